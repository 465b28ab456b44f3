// link: driver
// A replayed graph hands its work to another stream through an external event node, as
// torch.cuda.Event(external=True) inside torch.cuda.graph does: the capture records the event
// with CU_EVENT_RECORD_EXTERNAL, so each launch of the graph records it, and a second stream
// waits for it before reading what the graph wrote; the host then waits for the second stream
// only. Its report has no finding. With the argument "internal", the record lacks the flag: it
// is the capture's own use of the event, no launch records it, so the second stream's wait is a
// no-op (wait-on-unrecorded-event) and nothing waits for the launch (unsynchronized-at-exit).
#include "sim_util.h"

#define N 1024

int main(int argc, char **argv) {
    int internal = argc > 1 && !strcmp(argv[1], "internal");
    setup();
    CUstream replay, consumer;
    CUevent done;
    CHECK(cuStreamCreate(&replay, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&consumer, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
    /* Stream-ordered memory, freed in the consumer's order: no free waits for the device. */
    CUdeviceptr d;
    CHECK(cuMemAllocAsync(&d, N * sizeof(unsigned), consumer));
    CHECK(cuStreamSynchronize(consumer));

    CHECK(cuStreamBeginCapture_v2(replay, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuMemsetD32Async(d, 7, N, replay));
    CHECK(cuEventRecordWithFlags(done, replay, internal ? CU_EVENT_RECORD_DEFAULT : CU_EVENT_RECORD_EXTERNAL));
    CUgraph graph;
    CHECK(cuStreamEndCapture(replay, &graph));
    CUgraphExec exec;
    CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));

    unsigned first = 0;
    CHECK(cuGraphLaunch(exec, replay));
    CHECK(cuStreamWaitEvent(consumer, done, 0));
    CHECK(cuMemcpyDtoHAsync_v2(&first, d, sizeof first, consumer));
    CHECK(cuMemFreeAsync(d, consumer));
    CHECK(cuStreamSynchronize(consumer));
    printf("first %u\n", first);

    CHECK(cuGraphExecDestroy(exec));
    CHECK(cuGraphDestroy(graph));
    CHECK(cuEventDestroy_v2(done));
    CHECK(cuStreamDestroy_v2(replay));
    CHECK(cuStreamDestroy_v2(consumer));
    return first == 7 ? 0 : 4;
}
