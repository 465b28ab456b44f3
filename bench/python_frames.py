"""bench/python_frames workload: cuMemAlloc_v2 + cuMemFree_v2 pairs from Python (ctypes.CDLL, so
the GIL is released during each call, as PyTorch does), made DEPTH Python frames deep
(`<module>` and the recursion included). SITES > 1 allocates from that many different lines in
turn (distinct Python stacks over identical native ones). Prints `ns_per_pair=N`: the loop's wall
time divided by PAIRS, warm-up excluded."""

import ctypes
import os
import sys
import time

PAIRS = int(os.environ.get("PAIRS", "100000"))
DEPTH = int(os.environ.get("DEPTH", "20"))
SITES = int(os.environ.get("SITES", "1"))

cu = ctypes.CDLL("libcuda.so.1")
for call, args in [("cuInit", (0,))]:
    assert getattr(cu, call)(*args) == 0
dev = ctypes.c_int(0)
assert cu.cuDeviceGet(ctypes.byref(dev), 0) == 0
ctx = ctypes.c_void_p(0)
assert cu.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev) == 0
assert cu.cuCtxSetCurrent(ctx) == 0

alloc, free = cu.cuMemAlloc_v2, cu.cuMemFree_v2
free.argtypes = [ctypes.c_uint64]
ptr = ctypes.c_uint64(0)
ref = ctypes.byref(ptr)
size = ctypes.c_size_t(4096)


def loop(pairs):
    site = 0
    for _ in range(pairs):
        # SITES distinct lines (each a different Python frame offset).
        if SITES == 1 or site == 0:
            alloc(ref, size)
        elif site == 1:
            alloc(ref, size)
        elif site == 2:
            alloc(ref, size)
        elif site == 3:
            alloc(ref, size)
        elif site == 4:
            alloc(ref, size)
        elif site == 5:
            alloc(ref, size)
        elif site == 6:
            alloc(ref, size)
        else:
            alloc(ref, size)
        free(ptr.value)
        site = (site + 1) % SITES


def nested(n, pairs):
    # <module> + (DEPTH - 2) nested calls + loop = DEPTH frames at the allocation.
    if n > 0:
        return nested(n - 1, pairs)
    start = time.perf_counter_ns()
    loop(pairs)
    return time.perf_counter_ns() - start


nested(DEPTH - 3, min(PAIRS, 5000))  # warm-up: stacks interned, code described
ns = nested(DEPTH - 3, PAIRS)
print(f"ns_per_pair={ns / PAIRS:.1f}")
