// link: driver
// The second C workload of scripts/validate-gpu, built like leak_driver.c (driver-API calls
// only, against simcuda/include/simcuda.h, linked to libcuda.so.1 by name): a correct program
// whose two non-blocking streams share a buffer and are ordered only by
//   1. a value the producer writes and the consumer waits for (cuStreamWriteValue32_v2,
//      cuStreamWaitValue32_v2),
//   2. the same in batches (cuStreamBatchMemOp_v2),
//   3. an event that a replayed graph records in an external record node
//      (cuEventRecordWithFlags with CU_EVENT_RECORD_EXTERNAL in the capture),
//   4. an asynchronous copy into pageable memory, which returns once the copy is complete.
// Each step checks what the consumer read (exit 4 when the device disagrees). Everything is
// freed: gpuleak must report no leak and no finding. Prints "ordered ok".
#include <stdint.h>

#include "sim_util.h" /* CHECK and setup(): tests/clients/sim_util.h */

#define WORDS (256 * 1024)

static unsigned pageable[WORDS];

static void expect(const char *step, const unsigned *got, unsigned want) {
    if (got[0] == want && got[WORDS - 1] == want) return;
    fprintf(stderr, "ordered_driver: %s read %u, %u instead of %u\n", step, got[0], got[WORDS - 1], want);
    exit(4);
}

/* A one-operation batch: a write of `value` or a wait until the flag is at least `value`. */
static void batch(CUstream s, CUstreamBatchMemOpType op, CUdeviceptr flag, unsigned value) {
    CUstreamBatchMemOpParams p;
    memset(&p, 0, sizeof p);
    p.operation = op;
    p.waitValue.address = flag;
    p.waitValue.value = value;
    p.waitValue.flags = op == CU_STREAM_MEM_OP_WAIT_VALUE_32 ? CU_STREAM_WAIT_VALUE_GEQ : 0;
    CHECK(cuStreamBatchMemOp_v2(s, 1, &p, 0));
}

int main(void) {
    setup();
    CUstream producer, consumer;
    CHECK(cuStreamCreate(&producer, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&consumer, CU_STREAM_NON_BLOCKING));
    CUdeviceptr buf, flag;
    CHECK(cuMemAlloc_v2(&buf, WORDS * sizeof(unsigned)));
    CHECK(cuMemAlloc_v2(&flag, 256));
    unsigned *pinned;
    CHECK(cuMemAllocHost_v2((void **)&pinned, WORDS * sizeof(unsigned)));
    CHECK(cuMemsetD32Async(flag, 0, 64, producer));
    CHECK(cuStreamSynchronize(producer));

    /* 1. A value written after the producer's memset, waited for by the consumer. */
    CHECK(cuMemsetD32Async(buf, 1, WORDS, producer));
    CHECK(cuStreamWriteValue32_v2(producer, flag, 1, CU_STREAM_WRITE_VALUE_DEFAULT));
    CHECK(cuStreamWaitValue32_v2(consumer, flag, 1, CU_STREAM_WAIT_VALUE_GEQ));
    CHECK(cuMemcpyDtoHAsync_v2(pinned, buf, WORDS * sizeof(unsigned), consumer));
    CHECK(cuStreamSynchronize(consumer));
    expect("value", pinned, 1);

    /* 2. The same, batched. */
    CHECK(cuMemsetD32Async(buf, 2, WORDS, producer));
    batch(producer, CU_STREAM_MEM_OP_WRITE_VALUE_32, flag, 2);
    batch(consumer, CU_STREAM_MEM_OP_WAIT_VALUE_32, flag, 2);
    CHECK(cuMemcpyDtoHAsync_v2(pinned, buf, WORDS * sizeof(unsigned), consumer));
    CHECK(cuStreamSynchronize(consumer));
    expect("batch", pinned, 2);

    /* 3. A graph that fills the buffer and records an event in an external record node. */
    CUevent done;
    CHECK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
    CHECK(cuStreamBeginCapture_v2(producer, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    CHECK(cuMemsetD32Async(buf, 3, WORDS, producer));
    CHECK(cuEventRecordWithFlags(done, producer, CU_EVENT_RECORD_EXTERNAL));
    CUgraph graph;
    CHECK(cuStreamEndCapture(producer, &graph));
    CUgraphExec exec;
    CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    CHECK(cuGraphLaunch(exec, producer));
    CHECK(cuStreamWaitEvent(consumer, done, 0));
    CHECK(cuMemcpyDtoHAsync_v2(pinned, buf, WORDS * sizeof(unsigned), consumer));
    CHECK(cuStreamSynchronize(consumer));
    expect("graph event", pinned, 3);

    /* 4. A copy into pageable memory has completed when it returns: the consumer may
       overwrite the buffer at once. */
    CHECK(cuMemsetD32Async(buf, 4, WORDS, producer));
    CHECK(cuMemcpyDtoHAsync_v2(pageable, buf, sizeof pageable, producer));
    expect("pageable", pageable, 4);
    CHECK(cuMemsetD32Async(buf, 5, WORDS, consumer));
    CHECK(cuMemcpyDtoHAsync_v2(pinned, buf, WORDS * sizeof(unsigned), consumer));
    CHECK(cuStreamSynchronize(consumer));
    expect("after pageable", pinned, 5);

    CHECK(cuGraphExecDestroy(exec));
    CHECK(cuGraphDestroy(graph));
    CHECK(cuEventDestroy_v2(done));
    CHECK(cuStreamDestroy_v2(producer));
    CHECK(cuStreamDestroy_v2(consumer));
    CHECK(cuMemFreeHost(pinned));
    CHECK(cuMemFree_v2(flag));
    CHECK(cuMemFree_v2(buf));
    printf("ordered ok\n");
    return 0;
}
