"""cuda-core memory resources that own their memory pools, for gpuleak's end-to-end tests.

`DeviceMemoryResource(device, options=DeviceMemoryResourceOptions(...))` creates a pool of its
own (cuMemPoolCreate, through cuda-bindings' cuGetProcAddress table) and destroys it when the
resource is closed or its last reference goes, at the latest when the interpreter shuts down.
Three resources, each used for one 1 MiB buffer, by the first argument:

    close  each resource is closed after use;
    keep   each is kept in a module global: cuda-core destroys them at shutdown;
    exit   each is kept, then the process ends with os._exit, which runs no finalizer (as
           multiprocessing's workers do): the three pools are never destroyed.
"""

import os
import sys

from cuda.core import Device, DeviceMemoryResource, DeviceMemoryResourceOptions

KEPT = []


def make_resource():
    return DeviceMemoryResource(0, options=DeviceMemoryResourceOptions(max_size=64 << 20))


def main(mode):
    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()
    for _ in range(3):
        mr = make_resource()
        buf = mr.allocate(1 << 20, stream=stream)
        buf.close(stream)
        stream.sync()
        if mode == "close":
            mr.close()
        else:
            KEPT.append(mr)
    stream.close()
    print("done", flush=True)
    if mode == "exit":
        os._exit(0)


main(sys.argv[1])
