"""A cuda-bindings program with one deliberate leak, for gpuleak's end-to-end tests.

NVIDIA's cuda-bindings loads the driver with ctypes (dlopen of libcuda.so.1) and fetches every
entry point through cuGetProcAddress_v2, so each allocation below reaches the shim through its
resolver wrappers. The program retains the primary context, allocates with cuMemAlloc,
cuMemAllocAsync on a stream of its own and cuMemHostAlloc, checks a round trip through device
memory, and frees everything except one cuMemAlloc buffer (the leak).

It prints one line per allocation:

    alloc call=NAME memory=device|host ptr=0x... size=N freed|leaked

Device pointers are the same in every run on the simulated driver; host pointers come from mmap
and move with the address-space layout.
"""

import ctypes
import sys

from cuda.bindings import driver as cu

LEAKED_BYTES = 1 << 20
SCRATCH_BYTES = 256 << 10
ASYNC_BYTES = (512 << 10, 128 << 10)
HOST_BYTES = 64 << 10
PROBE_BYTES = 4096


def check(result):
    """Returns the values of a cuda-bindings result tuple; exits with the error's name on failure."""
    err, *values = result
    if err != cu.CUresult.CUDA_SUCCESS:
        sys.exit(f"cuda_bindings_client: CUDA call failed with {err.name}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def report(call, memory, ptr, size, fate):
    print(f"alloc call={call} memory={memory} ptr={int(ptr):#x} size={size} {fate}", flush=True)


def main():
    check(cu.cuInit(0))
    dev = check(cu.cuDeviceGet(0))
    name = check(cu.cuDeviceGetName(64, dev))
    name = name.split(b"\0", 1)[0].decode()
    print(f"device {name}", flush=True)
    ctx = check(cu.cuDevicePrimaryCtxRetain(dev))
    check(cu.cuCtxSetCurrent(ctx))
    stream = check(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING))

    host = check(cu.cuMemHostAlloc(HOST_BYTES, 0))
    report("cuMemHostAlloc", "host", host, HOST_BYTES, "freed")

    # The bug: a buffer kept "for later" that nothing ever frees.
    cache = check(cu.cuMemAlloc(LEAKED_BYTES))
    report("cuMemAlloc", "device", cache, LEAKED_BYTES, "leaked")
    scratch = check(cu.cuMemAlloc(SCRATCH_BYTES))
    report("cuMemAlloc", "device", scratch, SCRATCH_BYTES, "freed")

    buffers = []
    for size in ASYNC_BYTES:
        ptr = check(cu.cuMemAllocAsync(size, stream))
        report("cuMemAllocAsync", "device", ptr, size, "freed")
        buffers.append(ptr)

    # A round trip through device memory, staged in the pinned buffer, proves the copies work.
    pattern = bytes(range(256)) * (PROBE_BYTES // 256)
    ctypes.memmove(host, pattern, PROBE_BYTES)
    check(cu.cuMemcpyHtoDAsync(buffers[0], host, PROBE_BYTES, stream))
    check(cu.cuMemcpyDtoHAsync(host + PROBE_BYTES, buffers[0], PROBE_BYTES, stream))
    check(cu.cuStreamSynchronize(stream))
    if ctypes.string_at(host + PROBE_BYTES, PROBE_BYTES) != pattern:
        sys.exit("cuda_bindings_client: the device returned other bytes than it was given")
    print("round trip ok", flush=True)

    for ptr in buffers:
        check(cu.cuMemFreeAsync(ptr, stream))
    check(cu.cuStreamSynchronize(stream))
    check(cu.cuStreamDestroy(stream))
    check(cu.cuMemFree(scratch))
    check(cu.cuMemFreeHost(host))
    check(cu.cuDevicePrimaryCtxRelease(dev))
    print("done", flush=True)


if __name__ == "__main__":
    main()
