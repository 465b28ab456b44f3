// link: driver
// A capture that forks onto a second stream and joins back, as PyTorch's torch.cuda.graph does
// with side streams: the side stream waits for an event recorded in the capture, and its memset
// and its stream-ordered allocation (freed by the origin stream after the join) are graph
// nodes, neither work nor memory. The graph is then launched and waited for on the origin
// stream; the side stream never runs anything, so it is never waited for. Its report has no
// finding and no leak. With the argument "leave", the side stream gets real work after the
// capture ended, which nothing waits for: one unsynchronized-at-exit finding. With "to-graph",
// the capture goes into a graph the program made first (cuStreamBeginCaptureToGraph).
#include "sim_util.h"

#define N 1024

int main(int argc, char **argv) {
    int leave = argc > 1 && !strcmp(argv[1], "leave");
    int to_graph = argc > 1 && !strcmp(argv[1], "to-graph");
    setup();
    CUstream origin, side;
    CUevent fork, join;
    CHECK(cuStreamCreate(&origin, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    CUdeviceptr d;
    CHECK(cuMemAlloc_v2(&d, N * sizeof(unsigned)));

    CUgraph given = NULL;
    if (to_graph) {
        CHECK(cuGraphCreate(&given, 0));
        CHECK(cuStreamBeginCaptureToGraph(origin, given, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
    } else {
        CHECK(cuStreamBeginCapture_v2(origin, CU_STREAM_CAPTURE_MODE_GLOBAL));
    }
    CHECK(cuEventRecord(fork, origin));
    CHECK(cuStreamWaitEvent(side, fork, 0));
    CHECK(cuMemsetD32Async(d, 7, N, side));
    CUdeviceptr scratch;
    CHECK(cuMemAllocAsync(&scratch, N * sizeof(unsigned), side));
    CHECK(cuMemsetD32Async(scratch, 1, N, side));
    CHECK(cuEventRecord(join, side));
    CHECK(cuStreamWaitEvent(origin, join, 0));
    CHECK(cuMemFreeAsync(scratch, origin));
    CUgraph graph;
    CHECK(cuStreamEndCapture(origin, &graph));
    if (to_graph && graph != given) return 5;

    CUgraphExec exec;
    CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
    CHECK(cuGraphLaunch(exec, origin));
    CHECK(cuStreamSynchronize(origin));
    unsigned first = 0;
    CHECK(cuMemcpyDtoH_v2(&first, d, sizeof first));
    if (leave) CHECK(cuMemsetD32Async(d, 9, N, side));
    printf("first %u\n", first);

    CHECK(cuGraphExecDestroy(exec));
    CHECK(cuGraphDestroy(graph));
    CHECK(cuEventDestroy_v2(fork));
    CHECK(cuEventDestroy_v2(join));
    CHECK(cuStreamDestroy_v2(origin));
    CHECK(cuStreamDestroy_v2(side));
    if (!leave) CHECK(cuMemFree_v2(d));
    return first == 7 ? 0 : 4;
}
