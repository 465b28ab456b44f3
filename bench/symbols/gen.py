#!/usr/bin/env python3
"""bench/symbols/gen.py: writes the C++ source of a large shared library, in the size class of
PyTorch's libtorch_cuda.so (hundreds of thousands of functions, a symbol table of tens of MB,
hundreds of MB of DWARF), and the program that allocates GPU memory from a few of its
functions. Used by bench/symbols/run.

    gen.py OUTDIR FILES FUNCS_PER_FILE

Each file is one namespace of FUNCS_PER_FILE functions; each function inlines three of the
file's 24 helpers (DW_TAG_inlined_subroutine entries and line rows, as template-heavy C++
has). Each of the first eight files also has a `chain_step` that calls the next file's, the
last calling cuMemAlloc_v2, and file 0 has the entry points the program calls, so that every
allocation's stack crosses eight compilation units (FILES of them when fewer).
"""

import os
import sys

HELPERS = 24


def unit(index, funcs, files):
    ns = f"torch_gen{index:04}"
    out = [
        "#include <stddef.h>",
        "#include <stdint.h>",
        '#include "simcuda.h"',
        "",
        f"namespace at {{ namespace native {{ namespace {ns} {{",
        "",
        "struct Tensor { int64_t sizes[4]; int64_t strides[4]; double scale; int device; };",
        "",
    ]
    for h in range(HELPERS):
        out.append(
            f"static inline __attribute__((always_inline)) int64_t helper_{h}(const Tensor &t, int64_t x) {{\n"
            f"    int64_t acc = x * {h + 3} + t.sizes[{h % 4}];\n"
            f"    for (int i = 0; i < 4; ++i) acc += t.strides[i] ^ (acc >> {h % 7 + 1});\n"
            f"    return acc + (int64_t)(t.scale * {h + 1});\n"
            f"}}\n"
        )
    for f in range(funcs):
        a, b, c = f % HELPERS, (f * 7 + 3) % HELPERS, (f * 13 + 5) % HELPERS
        out.append(
            f"__attribute__((noinline)) int64_t kernel_launcher_{f}(const Tensor &t, int64_t x) {{\n"
            f"    int64_t v = helper_{a}(t, x);\n"
            f"    v = helper_{b}(t, v + {f});\n"
            f"    v ^= helper_{c}(t, v);\n"
            f"    return v;\n"
            f"}}\n"
        )
    out.append("")
    # The chain that entry points go through: one function per unit, each calling the next
    # unit's (declared here), the last allocating.
    nxt = index + 1
    if index < min(CHAIN, files) - 1:
        out.append(f"}} }} }}\nnamespace at {{ namespace native {{ namespace torch_gen{nxt:04} {{")
        out.append("__attribute__((noinline)) CUresult chain_step(CUdeviceptr *d, size_t size, int depth);")
        out.append(f"}} }} }}\nnamespace at {{ namespace native {{ namespace {ns} {{")
        call = f"::at::native::torch_gen{nxt:04}::chain_step(d, size, depth + 1)"
    else:
        call = "cuMemAlloc_v2(d, size)"
    out.append(
        "__attribute__((noinline)) CUresult chain_step(CUdeviceptr *d, size_t size, int depth) {\n"
        f"    CUresult r = {call};\n"
        '    __asm__ volatile("" ::: "memory");\n'
        "    return r;\n"
        "}"
    )
    out.append("} } }")
    if index == 0:
        out.append("")
        for e in range(ENTRIES):
            out.append(
                f'extern "C" __attribute__((noinline)) int big_alloc_{e}(CUdeviceptr *d, size_t size) {{\n'
                f"    CUresult r = ::at::native::{ns}::chain_step(d, size + {e}, 0);\n"
                '    __asm__ volatile("" ::: "memory");\n'
                "    return (int)r;\n"
                "}"
            )
    return "\n".join(out) + "\n"


PROGRAM = r"""/* bench/symbols: allocates from the big library's entry points; some leak. */
#include <stdio.h>
#include <stdlib.h>
#include "simcuda.h"

%(decls)s

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuCtxCreate(&ctx, 0, dev)) return 2;
    CUdeviceptr kept[%(entries)d];
%(calls)s
    (void)kept;
    return 0;
}
"""

CHAIN = 8
ENTRIES = 4


def main():
    outdir, files, funcs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    os.makedirs(outdir, exist_ok=True)
    for i in range(files):
        path = os.path.join(outdir, f"unit{i:04}.cc")
        text = unit(i, funcs, files)
        if os.path.exists(path) and open(path).read() == text:
            continue
        with open(path, "w") as f:
            f.write(text)
    decls = "\n".join(f"int big_alloc_{e}(CUdeviceptr *d, size_t size);" for e in range(ENTRIES))
    calls = []
    for e in range(ENTRIES):
        # Freed allocations (not in the report) and one leak per entry point (in it).
        calls.append(
            f"    for (int i = 0; i < 3; i++) {{ CUdeviceptr d; if (big_alloc_{e}(&d, 4096)) return 3; cuMemFree_v2(d); }}\n"
            f"    if (big_alloc_{e}(&kept[{e}], {(e + 1) * 1 << 20})) return 3;"
        )
    with open(os.path.join(outdir, "program.c"), "w") as f:
        f.write(PROGRAM % {"decls": decls, "entries": ENTRIES, "calls": "\n".join(calls)})


if __name__ == "__main__":
    main()
