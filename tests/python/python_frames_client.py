"""Python frames in allocation stacks, for gpuleak's end-to-end tests.

Leaks three device buffers from named Python functions, each at a line marked with a
`# LEAK:` comment that the test looks up:

- through NVIDIA's cuda-bindings (`cuMemAlloc`), whose Cython wrappers release the GIL around
  the driver call, as PyTorch does before it allocates;
- through `ctypes.PyDLL` (`cuMemAlloc_v2`), which keeps the GIL held during the call;
- through `ctypes.CDLL` (`cuMemAlloc_v2`), which releases it.

The calls are reached through `outer` -> `through_map` (called by the C builtin `map`, which
starts a new run of the interpreter's eval loop) -> the leaking function, so the stacks hold
two groups of Python frames separated by native frames. Prints one line per allocation:

    alloc call=NAME size=N gil=held|released ptr=0x...

Then `site_a` and `site_b` leak through the same helper in turn, four times each: their native
stacks are identical (Python-to-Python calls run in the same eval-loop frame), only their
Python frames differ. Last, a `threading.Thread` leaks from `leak_in_thread`.

Checked once with gdb (a breakpoint on the simulator's cuMemAlloc_v2 printing
PyGILState_Check()): 0 under cuda-bindings' cuMemAlloc and ctypes.CDLL, 1 under ctypes.PyDLL.
"""

import ctypes
import sys
import threading

from cuda.bindings import driver as cu

BINDINGS_BYTES = 1 << 20
PYDLL_BYTES = 2 << 20
CDLL_BYTES = 3 << 20
SITE_A_BYTES = 4096
SITE_B_BYTES = 8192
THREAD_BYTES = 5 << 20


def check(result):
    err, *values = result
    if err != cu.CUresult.CUDA_SUCCESS:
        sys.exit(f"python_frames_client: CUDA call failed with {err.name}")
    return values[0] if len(values) == 1 else tuple(values)


def leak_through_bindings():
    ptr = check(cu.cuMemAlloc(BINDINGS_BYTES))  # LEAK: bindings
    print(f"alloc call=cuMemAlloc size={BINDINGS_BYTES} gil=released ptr={int(ptr):#x}", flush=True)


def leak_with_gil_held():
    ptr = ctypes.c_uint64(0)
    err = PYDLL.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(PYDLL_BYTES))  # LEAK: pydll
    assert err == 0, err
    print(f"alloc call=cuMemAlloc_v2 size={PYDLL_BYTES} gil=held ptr={ptr.value:#x}", flush=True)


def leak_with_gil_released():
    ptr = ctypes.c_uint64(0)
    err = CDLL.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(CDLL_BYTES))  # LEAK: cdll
    assert err == 0, err
    print(f"alloc call=cuMemAlloc_v2 size={CDLL_BYTES} gil=released ptr={ptr.value:#x}", flush=True)


def through_map(leak):
    return list(map(lambda _: leak(), [0]))


def outer():
    for leak in (leak_through_bindings, leak_with_gil_held, leak_with_gil_released):
        through_map(leak)


def alloc_for_site(size):
    ptr = ctypes.c_uint64(0)
    assert PYDLL.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)) == 0  # LEAK: helper


def site_a():
    alloc_for_site(SITE_A_BYTES)  # LEAK: site_a


def site_b():
    alloc_for_site(SITE_B_BYTES)  # LEAK: site_b


def leak_in_thread():
    check(cu.cuCtxSetCurrent(CTX))
    ptr = ctypes.c_uint64(0)
    assert CDLL.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(THREAD_BYTES)) == 0  # LEAK: thread


check(cu.cuInit(0))
DEV = check(cu.cuDeviceGet(0))
CTX = check(cu.cuDevicePrimaryCtxRetain(DEV))
check(cu.cuCtxSetCurrent(CTX))
PYDLL = ctypes.PyDLL("libcuda.so.1")
CDLL = ctypes.CDLL("libcuda.so.1")
outer()  # the leaking calls
for _ in range(4):
    site_a()
    site_b()
worker = threading.Thread(target=leak_in_thread)
worker.start()
worker.join()
