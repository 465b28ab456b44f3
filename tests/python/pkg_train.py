"""A "train.py" for the fresh virtual environment test (tests/e2e/python_pkg.rs): no package
but gpuleak, the driver reached with plain ctypes (dlopen of libcuda.so.1 and dlsym, which the
shim's dlsym answers). Each step allocates a scratch buffer; step 2 keeps its buffer (the
leak). gpuleak.check() around step 2 must raise; around step 1 (the fixed twin) it must not.

Prints `gpuleak from PATH`, `active BOOL`, `step N ok|leaked BYTES`."""

import ctypes
import sys

import gpuleak

cuda = ctypes.CDLL("libcuda.so.1")
KEPT = []


def ok(result, what):
    if result != 0:
        sys.exit(f"pkg_train: {what} failed with CUDA error {result}")


def step(n, leak):
    ptr = ctypes.c_uint64()
    ok(cuda.cuMemAlloc_v2(ctypes.byref(ptr), ctypes.c_size_t(256 << 10)), "cuMemAlloc_v2")
    if leak:
        KEPT.append(ptr.value)
    else:
        ok(cuda.cuMemFree_v2(ctypes.c_uint64(ptr.value)), "cuMemFree_v2")


def main():
    print(f"gpuleak from {gpuleak.__file__}", flush=True)
    print(f"active {gpuleak.active()}", flush=True)
    ok(cuda.cuInit(0), "cuInit")
    dev = ctypes.c_int()
    ok(cuda.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
    ctx = ctypes.c_void_p()
    ok(cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    ok(cuda.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    for n, leak in ((1, False), (2, True)):
        gpuleak.mark("step", n)
        try:
            with gpuleak.check():
                step(n, leak)
            print(f"step {n} ok", flush=True)
        except gpuleak.LeakError as e:
            print(f"step {n} leaked {e.leaked_bytes}", flush=True)


if __name__ == "__main__":
    main()
