"""Python frames of many threads allocating at once, with ctypes only.

THREADS threads (more than the 16 entries a free-threaded 3.14 code object's array of
thread-local bytecode starts with, so the array is replaced by a larger one while other threads
run the code) each call one shared function ROUNDS times, all released together by a barrier.
Thread i leaks blocks of (i + 1) * 4096 bytes, from the line marked with the comment "LEAK:
shared", called from the line marked "LEAK: worker".
"""

import ctypes
import threading

THREADS = 24
ROUNDS = 20

CDLL = ctypes.CDLL("libcuda.so.1")


def ok(err):
    if err != 0:
        raise SystemExit(f"python_frames_threads: CUDA error {err}")


def alloc(size):
    ptr = ctypes.c_uint64(0)
    ok(CDLL.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(size)))  # LEAK: shared


def worker(ctx, index, barrier):
    ok(CDLL.cuCtxSetCurrent(ctx))
    barrier.wait()
    for _ in range(ROUNDS):
        alloc((index + 1) * 4096)  # LEAK: worker


ok(CDLL.cuInit(0))
dev = ctypes.c_int(0)
ok(CDLL.cuDeviceGet(ctypes.byref(dev), 0))
ctx = ctypes.c_void_p(0)
ok(CDLL.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
barrier = threading.Barrier(THREADS)
threads = [threading.Thread(target=worker, args=(ctx, i, barrier)) for i in range(THREADS)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("done", flush=True)
