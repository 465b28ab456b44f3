"""A stand-in for PyTorch (tests/python/fake_torch/README.md): tensors are device buffers of a
given size from a small caching allocator on real driver allocations."""

__version__ = "0.0.0+fake"

from . import _C, cuda  # noqa: E402

uint8 = "uint8"


class Tensor:
    """A device buffer; its memory goes back to the cache when the tensor dies."""

    def __init__(self, block, nbytes):
        self._block = block
        self.nbytes = nbytes

    def data_ptr(self):
        return self._block.address

    def __del__(self):
        block, self._block = getattr(self, "_block", None), None
        if block is not None:
            cuda._allocator().free(block)


def empty(nbytes, dtype=uint8, device="cuda"):
    """A tensor of `nbytes` bytes on the device (only uint8 and "cuda" are known here)."""
    if dtype != uint8 or not str(device).startswith("cuda"):
        raise ValueError("fake torch: only empty(n, dtype=torch.uint8, device='cuda')")
    return Tensor(cuda._allocator().malloc(int(nbytes)), int(nbytes))


def matmul(a, api="cublas"):
    """A product of `a` (its size) through cuBLAS ("cublas") or cuBLASLt ("cublaslt"), with
    the workspace PyTorch keeps for it; raises with cuBLAS's status when cuBLAS fails."""
    from .cuda import _blas

    status = _blas.matmul(api)
    if status != 0:
        raise RuntimeError(f"CUDA error: CUBLAS_STATUS {status} when calling {api}")
    return empty(a.nbytes)
