// link: driver
// Races inside one graph: two nodes with no path between them that touch the same buffer.
// Stream A launches an executable graph and waits for it; nothing else runs beside it, so
// any finding is about the graph itself. By the first argument:
//
//   side-ok      the capture on A fills X, forks onto B (an event A recorded, which B waits
//                for), where a copy reads X into Z, while A waits for an event B recorded
//                after that copy before it sets X again; B joins back;
//   hand-ok      built by hand: a memset node sets X; a kernel node that fills X depends on
//                it, and a memcpy node that copies X to Z depends on the kernel node;
//   child-ok     as hand-ok, the kernel inside a child graph (its node depends on the memset
//                node, and the memcpy node on it);
//   kernels-ok   the capture forks onto B, whose kernel fills X, while A's fills Y;
//   mem-ok       as side-ok, on memory the capture allocates (cuMemAllocAsync: an
//                allocation node) and frees at its end (a free node).
//
// Each of those is correct: its report has no finding. Their mistaken twins, each a
// graph-race:
//
//   side-race    as side-ok, without A's wait: A's memset writes X while B's copy may still
//                read it (torch.cuda.graph with a side stream joined back too late);
//   hand-race    as hand-ok, the memcpy node depending on the memset node only;
//   child-race   as child-ok, the memcpy node depending on the memset node only;
//   kernels      as kernels-ok, both kernels filling X (a warning: neither kernel is known
//                to write);
//   mem-race     as mem-ok, without A's wait.
//
// Prints "launched": the graph ran.
#include "sim_util.h"

#define N 1024

static CUfunction fill;
static CUdeviceptr X, Y, Z;
static CUstream A, B;
static CUcontext ctx;

static int is(const char *mode, const char *name) { return strcmp(mode, name) == 0; }

/* A launch of fill_u32 over N words of p on stream s. */
static void fill_on(CUstream s, CUdeviceptr p, unsigned value) { CHECK(launch_fill(fill, s, p, value, N, N)); }

/* The capture on A that forks onto B and joins back (side-ok, side-race), on X or on memory
 * the capture allocates and frees (mem-ok, mem-race). */
static CUgraph side_graph(int wait, int graph_memory) {
    CUgraph g;
    CUevent fork, read, join;
    CUdeviceptr p = X;
    CHECK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&read, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    CHECK(cuStreamBeginCapture_v2(A, CU_STREAM_CAPTURE_MODE_GLOBAL));
    if (graph_memory) CHECK(cuMemAllocAsync(&p, N * 4, A));
    fill_on(A, p, 7);
    CHECK(cuEventRecord(fork, A));
    CHECK(cuStreamWaitEvent(B, fork, 0));
    CHECK(cuMemcpyDtoDAsync_v2(Z, p, N * 4, B));
    CHECK(cuEventRecord(read, B));
    if (wait) CHECK(cuStreamWaitEvent(A, read, 0));
    CHECK(cuMemsetD32Async(p, 3, N, A));
    CHECK(cuEventRecord(join, B));
    CHECK(cuStreamWaitEvent(A, join, 0));
    if (graph_memory) CHECK(cuMemFreeAsync(p, A));
    CHECK(cuStreamEndCapture(A, &g));
    CHECK(cuEventDestroy_v2(fork));
    CHECK(cuEventDestroy_v2(read));
    CHECK(cuEventDestroy_v2(join));
    return g;
}

/* The capture on A that forks onto B, whose kernel fills `side`, while A's fills X. */
static CUgraph kernels_graph(CUdeviceptr side) {
    CUgraph g;
    CUevent fork, join;
    CHECK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    CHECK(cuStreamBeginCapture_v2(A, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuEventRecord(fork, A));
    CHECK(cuStreamWaitEvent(B, fork, 0));
    fill_on(B, side, 5);
    fill_on(A, X, 7);
    CHECK(cuEventRecord(join, B));
    CHECK(cuStreamWaitEvent(A, join, 0));
    CHECK(cuStreamEndCapture(A, &g));
    CHECK(cuEventDestroy_v2(fork));
    CHECK(cuEventDestroy_v2(join));
    return g;
}

/* A capture on A of one kernel filling X (a child graph's). */
static CUgraph fill_graph(void) {
    CUgraph g;
    CHECK(cuStreamBeginCapture_v2(A, CU_STREAM_CAPTURE_MODE_GLOBAL));
    fill_on(A, X, 9);
    CHECK(cuStreamEndCapture(A, &g));
    return g;
}

/* Built by hand: a memset node of X, then a kernel node filling X (or a child graph node
 * holding `child`, when not NULL), then a memcpy node from X to Z that depends on the
 * kernel's node when `ordered`, else on the memset node only. */
static CUgraph hand_graph(CUgraph child, int ordered) {
    CUgraph g;
    CUgraphNode set, work, copy;
    CHECK(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS m;
    memset(&m, 0, sizeof m);
    m.dst = X;
    m.value = 1;
    m.elementSize = 4;
    m.width = N;
    m.height = 1;
    CHECK(cuGraphAddMemsetNode(&set, g, NULL, 0, &m, ctx));
    if (child) {
        CHECK(cuGraphAddChildGraphNode(&work, g, &set, 1, child));
    } else {
        struct fill_args args;
        CUDA_KERNEL_NODE_PARAMS_v2 k = fill_node(fill, &args, X, 7, N);
        CHECK(cuGraphAddKernelNode_v2(&work, g, &set, 1, &k));
    }
    CUDA_MEMCPY3D c = copy_node(Z, X, N * 4);
    CHECK(cuGraphAddMemcpyNode(&copy, g, ordered ? &work : &set, 1, &c, ctx));
    return g;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "side-ok";
    setup();
    CUmodule mod;
    CHECK(cuCtxGetCurrent(&ctx));
    CHECK(cuModuleLoadData(&mod, "simcuda kernels"));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    CHECK(cuStreamCreate(&A, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&B, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemAlloc_v2(&X, N * 4));
    CHECK(cuMemAlloc_v2(&Y, N * 4));
    CHECK(cuMemAlloc_v2(&Z, N * 4));
    CHECK(cuCtxSynchronize());

    CUgraph g, child = NULL;
    if (is(mode, "side-ok") || is(mode, "side-race")) {
        g = side_graph(is(mode, "side-ok"), 0);
    } else if (is(mode, "mem-ok") || is(mode, "mem-race")) {
        g = side_graph(is(mode, "mem-ok"), 1);
    } else if (is(mode, "hand-ok") || is(mode, "hand-race")) {
        g = hand_graph(NULL, is(mode, "hand-ok"));
    } else if (is(mode, "child-ok") || is(mode, "child-race")) {
        child = fill_graph();
        g = hand_graph(child, is(mode, "child-ok"));
    } else if (is(mode, "kernels-ok") || is(mode, "kernels")) {
        g = kernels_graph(is(mode, "kernels") ? X : Y);
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    CUgraphExec exec;
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    CHECK(cuGraphLaunch(exec, A));
    CHECK(cuGraphLaunch(exec, A));
    printf("launched\n");
    CHECK(cuStreamSynchronize(A));

    CHECK(cuGraphExecDestroy(exec));
    CHECK(cuGraphDestroy(g));
    if (child) CHECK(cuGraphDestroy(child));
    CHECK(cuMemFree_v2(X));
    CHECK(cuMemFree_v2(Y));
    CHECK(cuMemFree_v2(Z));
    CHECK(cuStreamDestroy_v2(A));
    CHECK(cuStreamDestroy_v2(B));
    CHECK(cuModuleUnload(mod));
    return 0;
}
