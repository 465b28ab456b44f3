"""Holds device memory allocated from marked lines until stdin closes, for gpuleak's
end-to-end test of the metrics endpoint's `site` label under Python.

`hold_scratch` allocates 3 MiB through cuda-bindings at the line marked with the SITE comment,
so the label must name that line (the innermost line of the user's code), not CPython's or
cuda-bindings' frames. Prints `ready` once it holds the memory.
"""

import sys

from cuda.bindings import driver as cu

SCRATCH_BYTES = 3 << 20


def check(result):
    err, *values = result
    if err != cu.CUresult.CUDA_SUCCESS:
        sys.exit(f"python_frames_held: CUDA call failed with {err.name}")
    return values[0] if len(values) == 1 else tuple(values)


def hold_scratch():
    return check(cu.cuMemAlloc(SCRATCH_BYTES))  # SITE: scratch


def setup():
    check(cu.cuInit(0))
    ctx = check(cu.cuDevicePrimaryCtxRetain(check(cu.cuDeviceGet(0))))
    check(cu.cuCtxSetCurrent(ctx))


setup()
held = hold_scratch()
print("ready", flush=True)
sys.stdin.read()
check(cu.cuMemFree(held))
