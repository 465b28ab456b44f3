"""A stand-in for CuPy (tests/python/fake_cupy/README.md): arrays hold blocks of a memory pool
whose chunks are real driver allocations."""

__version__ = "0.0.0+fake"

from . import cuda  # noqa: E402
from .cuda import get_default_memory_pool  # noqa: E402,F401

uint8, float32, float64 = "uint8", "float32", "float64"
_ITEMSIZE = {uint8: 1, float32: 4, float64: 8}


class ndarray:
    """A device array; its block goes back to the pool when the array dies."""

    def __init__(self, shape, dtype):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        size = 1
        for n in shape:
            size *= int(n)
        self.shape = shape
        self.dtype = dtype
        self.nbytes = size * _ITEMSIZE[dtype]
        self.data = cuda.alloc(self.nbytes)

    def __del__(self):
        data, self.data = getattr(self, "data", None), None
        if data is not None:
            data.free()


def empty(shape, dtype=float64):
    return ndarray(shape, dtype)


def zeros(shape, dtype=float64):
    return ndarray(shape, dtype)
