"""A cuda-core program that frees everything it allocates, for gpuleak's end-to-end tests.

cuda-core is NVIDIA's Pythonic layer over cuda-bindings: its device memory resource allocates from
the device's memory pool (cuDeviceGetMemPool, cuMemAllocFromPoolAsync) and frees with
cuMemFreeAsync; its legacy pinned resource uses cuMemAllocHost and cuMemFreeHost. Every buffer
is closed explicitly except one, which cuda-core's finalizer frees when its last reference goes,
so a correct report for this program finds no leak.

It prints the pool handle and one line per allocation:

    alloc call=NAME memory=device|host ptr=0x... size=N freed

Device pointers are the same in every run on the simulated driver; host pointers come from mmap
and move with the address-space layout.
"""

import ctypes
import sys

from cuda.core import Device, LegacyPinnedMemoryResource

DEVICE_BYTES = (1 << 20, 256 << 10, 1000)
PROBE_BYTES = 4096


def report(call, memory, buf, fate="freed"):
    print(f"alloc call={call} memory={memory} ptr={int(buf.handle):#x} size={buf.size} {fate}", flush=True)


def main():
    dev = Device(0)
    dev.set_current()
    print(f"device {dev.name}", flush=True)
    stream = dev.create_stream()
    pool = dev.memory_resource
    print(f"pool {int(pool.handle):#x}", flush=True)
    pinned = LegacyPinnedMemoryResource()

    staging = []
    for _ in range(2):
        buf = pinned.allocate(PROBE_BYTES, stream=stream)
        report("LegacyPinnedMemoryResource.allocate", "host", buf)
        staging.append(buf)
    buffers = []
    for size in DEVICE_BYTES:
        buf = pool.allocate(size, stream=stream)
        report("DeviceMemoryResource.allocate", "device", buf)
        buffers.append(buf)
    probe = pool.allocate(PROBE_BYTES, stream=stream)
    report("DeviceMemoryResource.allocate", "device", probe)

    # A round trip through device memory proves the pool's memory and the copies work.
    pattern = bytes(range(256)) * (PROBE_BYTES // 256)
    src, dst = staging
    ctypes.memmove(int(src.handle), pattern, PROBE_BYTES)
    probe.copy_from(src, stream=stream)
    probe.copy_to(dst, stream=stream)
    stream.sync()
    if ctypes.string_at(int(dst.handle), PROBE_BYTES) != pattern:
        sys.exit("cuda_core_client: the device returned other bytes than it was given")
    print("round trip ok", flush=True)

    # close() hands each buffer back to its memory resource's deallocate().
    for buf in buffers:
        buf.close(stream)
    for buf in staging:
        buf.close(stream)
    # The last reference: cuda-core's finalizer deallocates on the allocation stream.
    del probe
    stream.sync()
    stream.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
