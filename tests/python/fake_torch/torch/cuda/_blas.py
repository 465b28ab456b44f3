"""cuBLAS as PyTorch drives it: one workspace per (cuBLAS handle, stream), allocated from the
caching allocator at the first matmul there and kept for the life of the process (PyTorch's
"cuBLAS workspaces"), handed to cuBLAS before every matmul (`cublasSetWorkspace_v2`) or given
to every cuBLASLt matmul (`cublasLtMatmul`'s workspace argument).

The calls go through the native library that FAKE_TORCH_BLAS names (tests/libraries/torch_blas.c,
linked to a stand-in cuBLAS), as libtorch_cuda's do: through its PLT, where a preloaded library
interposes them."""

import ctypes
import os

# Workspace bytes per API (PyTorch's are 32 MiB on Hopper; smaller here, in the same pools:
# cuBLAS's in a large segment of its own, cuBLASLt's in a small-pool segment).
WORKSPACE = {"cublas": 4 << 20, "cublaslt": 1 << 20}
# Opaque handles: the stand-in cuBLAS never reads them.
HANDLE = {"cublas": 0xB1A5, "cublaslt": 0xB1A7}

_LIB = None
_WORKSPACES = {}


def _lib():
    global _LIB
    if _LIB is None:
        path = os.environ.get("FAKE_TORCH_BLAS")
        if not path:
            raise RuntimeError("fake torch: FAKE_TORCH_BLAS names no native library")
        lib = ctypes.CDLL(path)
        for name in ("torch_blas_set_workspace", "torch_blas_lt_matmul"):
            f = getattr(lib, name)
            f.restype = ctypes.c_int
            f.argtypes = [ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64]
        _LIB = lib
    return _LIB


def matmul(api):
    """One matmul through `api` ("cublas" or "cublaslt") on the default stream; cuBLAS's status."""
    from . import _allocator

    lib = _lib()
    block = _WORKSPACES.get(api)
    if block is None:
        block = _WORKSPACES[api] = _allocator().malloc(WORKSPACE[api])
    if api == "cublas":
        return lib.torch_blas_set_workspace(HANDLE[api], block.address, WORKSPACE[api])
    return lib.torch_blas_lt_matmul(HANDLE[api], block.address, WORKSPACE[api])
