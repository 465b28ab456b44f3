"""Which allocator the real CuPy uses after import (tests/e2e/python_pkg.rs): its memory pool's
`malloc` by default (inside gpuleak's function that watches for out of memory, whose
`__wrapped__` it is), the raw `_malloc` under `gpuleak run --no-framework-cache`. Importing cupy
and reading its allocator make no CUDA call, so this runs without a GPU or CUDA toolkit."""

import cupy

allocator = cupy.cuda.get_allocator()
name = getattr(allocator, "__qualname__", allocator)
inner = getattr(allocator, "__wrapped__", None)
if inner is not None:
    name = f"{name} around {getattr(inner, '__qualname__', inner)!s}"
print(f"cupy {cupy.__version__} allocator {name!s}", flush=True)
