"""Python frames on any CPython 3.10 to 3.15, free-threaded or not, with ctypes only (no package
needed).

Leaks two device buffers from named functions, at lines marked `# LEAK: NAME`: one through
`ctypes.PyDLL` (the GIL stays held during the driver call), one through `ctypes.CDLL` (the GIL
is released), both reached through `outer` -> `through_map` -> a lambda called by the C builtin
`map` (so the interpreter's eval loop runs twice on the stack), then the same helper from two
sites whose native stacks are identical, and one leak from a second thread.
"""

import ctypes
import threading

PYDLL_BYTES = 2 << 20
CDLL_BYTES = 3 << 20
SITE_A_BYTES = 4096
SITE_B_BYTES = 8192
THREAD_BYTES = 5 << 20

PYDLL = ctypes.PyDLL("libcuda.so.1")
CDLL = ctypes.CDLL("libcuda.so.1")


def ok(err):
    if err != 0:
        raise SystemExit(f"python_frames_ctypes: CUDA error {err}")


def leak_with_gil_held():
    ptr = ctypes.c_uint64(0)
    ok(PYDLL.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(PYDLL_BYTES)))  # LEAK: pydll


def leak_with_gil_released():
    ptr = ctypes.c_uint64(0)
    ok(CDLL.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(CDLL_BYTES)))  # LEAK: cdll


def through_map(leak):
    return list(map(lambda _: leak(), [0]))


def outer():
    for leak in (leak_with_gil_held, leak_with_gil_released):
        through_map(leak)


def alloc_for_site(size):
    ptr = ctypes.c_uint64(0)
    ok(PYDLL.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)))  # LEAK: helper


def site_a():
    alloc_for_site(SITE_A_BYTES)  # LEAK: site_a


def site_b():
    alloc_for_site(SITE_B_BYTES)  # LEAK: site_b


def leak_in_thread(ctx):
    ok(CDLL.cuCtxSetCurrent(ctx))
    ptr = ctypes.c_uint64(0)
    ok(CDLL.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(THREAD_BYTES)))  # LEAK: thread


ok(CDLL.cuInit(0))
dev = ctypes.c_int(0)
ok(CDLL.cuDeviceGet(ctypes.byref(dev), 0))
ctx = ctypes.c_void_p(0)
ok(CDLL.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
ok(CDLL.cuCtxSetCurrent(ctx))
outer()  # the leaking calls
for _ in range(4):
    site_a()
    site_b()
worker = threading.Thread(target=leak_in_thread, args=(ctx,))
worker.start()
worker.join()
print("done", flush=True)
