"""Which allocator the real CuPy uses after import (tests/e2e/python_pkg.rs): its memory pool's
`malloc` by default, the raw `_malloc` under `gpuleak run --no-framework-cache`. Importing cupy
and reading its allocator make no CUDA call, so this runs without a GPU or CUDA toolkit."""

import cupy

allocator = cupy.cuda.get_allocator()
print(f"cupy {cupy.__version__} allocator {getattr(allocator, '__qualname__', allocator)!s}", flush=True)
