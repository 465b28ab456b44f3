"""Shared by the pkg_* test programs: a CUDA context through NVIDIA's cuda-bindings (ctypes
dlopen of libcuda.so.1, then cuGetProcAddress_v2), on whatever driver LD_LIBRARY_PATH finds
(the simulated one in the tests)."""

from cuda.bindings import driver as cu


def ok(result):
    """The values of a cuda-bindings result tuple; raises on a CUDA error."""
    err, *values = result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA call failed with {err.name}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


_CONTEXT = []


def context():
    """Retains device 0's primary context once and makes it current."""
    if not _CONTEXT:
        ok(cu.cuInit(0))
        dev = ok(cu.cuDeviceGet(0))
        ctx = ok(cu.cuDevicePrimaryCtxRetain(dev))
        _CONTEXT.append(ctx)
    ok(cu.cuCtxSetCurrent(_CONTEXT[0]))
    return _CONTEXT[0]


def alloc(size):
    context()
    return ok(cu.cuMemAlloc(size))


def free(ptr):
    ok(cu.cuMemFree(ptr))
