"""Streams ordered by a memory value, through cuda-bindings, for gpuleak's end-to-end tests.

cuda-bindings fetches every driver entry point through cuGetProcAddress_v2 at its own CUDA
version, so the stream memory operations below reach the shim through its resolver wrappers
(the `_v2` variants, which the driver hands out from 11.7). A memset on stream `producer`
fills a buffer; the producer then writes 1 to a flag in pinned host memory
(cuStreamWriteValue32), and stream `consumer` waits for that value (cuStreamWaitValue32)
before copying the buffer back: a correct program. With "batched" the write and the wait go
through cuStreamBatchMemOp. With "unordered" the consumer does not wait: a race.

Prints "value 7" (the first word read back) and "done".
"""

import ctypes
import sys

from cuda.bindings import driver as cu

WORDS = 1024


def check(result):
    """Returns the values of a cuda-bindings result tuple; exits with the error's name on failure."""
    err, *values = result
    if err != cu.CUresult.CUDA_SUCCESS:
        sys.exit(f"cuda_bindings_memops: CUDA call failed with {err.name}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def batch(stream, operation, flag, flags):
    op = cu.CUstreamBatchMemOpParams()
    if operation == cu.CUstreamBatchMemOpType.CU_STREAM_MEM_OP_WRITE_VALUE_32:
        params = op.writeValue
    else:
        params = op.waitValue
    params.operation = operation
    params.address = flag
    params.value = 1
    params.flags = flags
    check(cu.cuStreamBatchMemOp(stream, 1, [op], 0))


def main():
    mode = sys.argv[1] if len(sys.argv) > 1 else "ordered"
    check(cu.cuInit(0))
    dev = check(cu.cuDeviceGet(0))
    ctx = check(cu.cuDevicePrimaryCtxRetain(dev))
    check(cu.cuCtxSetCurrent(ctx))
    flags = cu.CUstream_flags.CU_STREAM_NON_BLOCKING
    producer = check(cu.cuStreamCreate(flags))
    consumer = check(cu.cuStreamCreate(flags))
    buffer = check(cu.cuMemAlloc(WORDS * 4))
    host = check(cu.cuMemHostAlloc(8, 0))
    ctypes.memset(host, 0, 8)
    flag = host  # the flag's word
    read_back = host + 4

    check(cu.cuMemsetD32Async(buffer, 7, WORDS, producer))
    if mode == "ordered":
        check(cu.cuStreamWriteValue32(producer, flag, 1, cu.CUstreamWriteValue_flags.CU_STREAM_WRITE_VALUE_DEFAULT))
        check(cu.cuStreamWaitValue32(consumer, flag, 1, cu.CUstreamWaitValue_flags.CU_STREAM_WAIT_VALUE_EQ))
    elif mode == "batched":
        batch(producer, cu.CUstreamBatchMemOpType.CU_STREAM_MEM_OP_WRITE_VALUE_32, flag, 0)
        batch(consumer, cu.CUstreamBatchMemOpType.CU_STREAM_MEM_OP_WAIT_VALUE_32, flag, 0)
    check(cu.cuMemcpyDtoHAsync(read_back, buffer, 4, consumer))
    check(cu.cuStreamSynchronize(consumer))
    check(cu.cuStreamSynchronize(producer))
    print(f"value {ctypes.c_uint32.from_address(int(read_back)).value}", flush=True)

    check(cu.cuStreamDestroy(producer))
    check(cu.cuStreamDestroy(consumer))
    check(cu.cuMemFree(buffer))
    check(cu.cuMemFreeHost(host))
    check(cu.cuDevicePrimaryCtxRelease(dev))
    print("done", flush=True)


if __name__ == "__main__":
    main()
