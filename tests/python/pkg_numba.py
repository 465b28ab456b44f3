"""numba-cuda device arrays under gpuleak.check() (tests/e2e/python_pkg.rs). numba-cuda cannot
compile kernels here (that needs NVVM from a CUDA toolkit), but its device arrays are plain
driver allocations (cuMemAlloc through cuda-bindings), which the simulated driver serves.

Prints one line per case: `CASE ok` or `CASE leaked BYTES at FILE:LINE` (the innermost frame
of this file in the leak's stack, `?` when the stack has none)."""

import os

import numpy as np
from numba import cuda

import gpuleak

KEPT = []
HERE = os.path.abspath(__file__)


def where(error):
    for frame in error.leaks[0].stack:
        if frame.file == HERE:
            return f"{os.path.basename(frame.file)}:{frame.line}"
    return "?"


def run(name, body):
    try:
        with gpuleak.check():
            body()
        print(f"{name} ok", flush=True)
    except gpuleak.LeakError as e:
        print(f"{name} leaked {e.leaked_bytes} at {where(e)}", flush=True)


def leak():
    KEPT.append(cuda.device_array(1 << 20, dtype=np.uint8))  # the leak


def fixed():
    a = cuda.device_array(1 << 20, dtype=np.uint8)
    h = np.arange(256, dtype=np.float32)
    assert (cuda.to_device(h).copy_to_host() == h).all()
    del a


if __name__ == "__main__":
    run("leak", leak)
    run("fixed", fixed)
