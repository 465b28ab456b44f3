"""What `gpuleak run --no-framework-cache` hands a Python program (tests/e2e/python_pkg.rs):
prints each variable it may set, whether the sitecustomize that was on PYTHONPATH before still
ran, and which allocator calls `cupy` received when imported (the test puts a stand-in cupy
package on PYTHONPATH: the real one needs a CUDA toolkit)."""

import os

for name in (
    "PYTORCH_NO_CUDA_MEMORY_CACHING",
    "XLA_PYTHON_CLIENT_ALLOCATOR",
    "XLA_PYTHON_CLIENT_PREALLOCATE",
    "GPULEAK_NO_FRAMEWORK_CACHE",
    "NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT",
):
    print(f"env {name}={os.environ.get(name)}", flush=True)
print(f"user sitecustomize {os.environ.get('PKG_USER_SITECUSTOMIZE', 'not run')}", flush=True)

import cupy  # noqa: E402 - the stand-in

print(f"cupy calls {cupy.cuda.calls}", flush=True)
