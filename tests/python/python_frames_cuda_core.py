"""Python frames through NVIDIA's cuda-core, for gpuleak's end-to-end tests: a device buffer
from the device's memory pool (cuMemAllocFromPoolAsync under cuda-core's Cython layer) is
allocated at the line marked `# LEAK: cuda_core` and kept; the process then ends with
os._exit, so that no finalizer frees it. Prints `leaked N`."""

import os

from cuda.core import Device

LEAK_BYTES = 7 << 20
KEPT = []


def leak_through_cuda_core(dev, stream):
    KEPT.append(dev.memory_resource.allocate(LEAK_BYTES, stream=stream))  # LEAK: cuda_core


def main():
    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    leak_through_cuda_core(dev, stream)
    stream.sync()
    print(f"leaked {LEAK_BYTES}", flush=True)
    os._exit(0)


main()
