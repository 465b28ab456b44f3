// link: driver
// What a graph launch touches, and the calls that change it. Stream A launches an executable
// graph whose one node (a fill_u32 kernel, a copy or a memset) touches buffer X or Y; stream
// B then touches a buffer without waiting for A, unless the mode says it waits. By the first
// argument:
//
//   waited         the graph's kernel fills X; B waits for an event A recorded after the
//                  launch, then fills X;
//   exec-kernel    the graph's kernel fills X until cuGraphExecKernelNodeSetParams makes it
//                  fill Y; B fills X;
//   exec-kernel-v2 the same through cuGraphExecKernelNodeSetParams_v2;
//   exec-params    the same through cuGraphExecNodeSetParams;
//   exec-memcpy    the graph copies X to Z until cuGraphExecMemcpyNodeSetParams makes it copy
//                  Y to Z; B fills X;
//   exec-memset    the graph sets X until cuGraphExecMemsetNodeSetParams makes it set Y; B
//                  fills X;
//   disabled       the graph's kernel fills X, and cuGraphNodeSetEnabled disables it; B
//                  fills X;
//   update         the graph's kernel fills X; cuGraphExecUpdate_v2 takes the parameters of a
//                  second graph whose kernel fills Y; B fills X;
//   child          the kernel is in a child graph, and fills X until
//                  cuGraphExecChildGraphNodeSetParams takes a child graph whose kernel fills
//                  Y; B fills X;
//   hand           the graph is built by hand (cuGraphAddKernelNode) and its kernel changed
//                  before instantiation (cuGraphKernelNodeSetParams) to fill Y; B fills X;
//   copy-read      the graph copies X to Z; B copies X to W (two reads of X);
//   late           B fills X first; A waits for an event B recorded after it, then launches
//                  the graph, whose kernel fills X;
//   fork           the capture forks onto B (an event A recorded, which B waits for), whose
//                  kernel fills Y, and joins back to A (an event B recorded), as
//                  torch.cuda.graph's side streams do; after the launch on A, B waits for an
//                  event A recorded after it, then fills Y.
//
// Each of those is correct: its report has no finding. Their mistaken twins, each a race
// of B with the launch:
//
//   unwaited       as waited, without the wait;
//   exec-stale     as exec-kernel, B filling Y, which the graph now fills;
//   reenabled      as disabled, the node enabled again before the launch;
//   update-race    as update, B filling Y;
//   child-race     as child, without the child graph's change;
//   hand-race      as hand, B filling Y;
//   copy-write     as copy-read, B setting X (the graph reads what B writes);
//   memset-read    the graph sets X; B copies X to W;
//   late-race      as late, without the wait (the launch is the later side of the race);
//   fork-race      as fork, B filling Y without the wait (the node that fills Y was captured
//                  from B, but the launch runs on A).
//
// Prints "launched": the graph ran.
#include "sim_util.h"

#define N 1024

static CUfunction fill;
static CUdeviceptr X, Y, Z, W;
static CUstream A, B;

/* A capture on A of one fill_u32 kernel of `p`. */
static CUgraph kernel_graph(CUdeviceptr p, unsigned value) {
    CUgraph g;
    unsigned n = N;
    void *params[] = {&p, &value, &n};
    CHECK(cuStreamBeginCapture_v2(A, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuLaunchKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, A, params, NULL));
    CHECK(cuStreamEndCapture(A, &g));
    return g;
}

/* A capture on A that forks onto B, whose kernel fills Y, and joins back; A's own kernel
 * fills X meanwhile. */
static CUgraph fork_graph(void) {
    CUgraph g;
    CUevent fork, join;
    unsigned value = 7, n = N;
    CUdeviceptr x = X, y = Y;
    void *px[] = {&x, &value, &n};
    void *py[] = {&y, &value, &n};
    CHECK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    CHECK(cuStreamBeginCapture_v2(A, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuEventRecord(fork, A));
    CHECK(cuStreamWaitEvent(B, fork, 0));
    CHECK(cuLaunchKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, B, py, NULL));
    CHECK(cuLaunchKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, A, px, NULL));
    CHECK(cuEventRecord(join, B));
    CHECK(cuStreamWaitEvent(A, join, 0));
    CHECK(cuStreamEndCapture(A, &g));
    CHECK(cuEventDestroy_v2(fork));
    CHECK(cuEventDestroy_v2(join));
    return g;
}

/* A capture on A of a copy of N words from src to dst. */
static CUgraph copy_graph(CUdeviceptr dst, CUdeviceptr src) {
    CUgraph g;
    CHECK(cuStreamBeginCapture_v2(A, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuMemcpyDtoDAsync_v2(dst, src, N * 4, A));
    CHECK(cuStreamEndCapture(A, &g));
    return g;
}

/* A capture on A of a memset of N words at p. */
static CUgraph memset_graph(CUdeviceptr p) {
    CUgraph g;
    CHECK(cuStreamBeginCapture_v2(A, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuMemsetD32Async(p, 3, N, A));
    CHECK(cuStreamEndCapture(A, &g));
    return g;
}

/* The graph's first node. */
static CUgraphNode first_node(CUgraph g) {
    CUgraphNode node = NULL;
    size_t n = 1;
    CHECK(cuGraphGetNodes(g, &node, &n));
    return node;
}

/* A graph holding one child graph node, whose graph is `child`; its node in *node. */
static CUgraph parent_of(CUgraph child, CUgraphNode *node) {
    CUgraph g;
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphAddChildGraphNode(node, g, NULL, 0, child));
    return g;
}

/* B fills p (a kernel: the model takes it to write its pointer parameters). */
static void b_fills(CUdeviceptr p) {
    unsigned value = 5, n = N;
    void *params[] = {&p, &value, &n};
    CHECK(cuLaunchKernel(fill, N / 256, 1, 1, 256, 1, 1, 0, B, params, NULL));
}

static int is(const char *mode, const char *name) { return strcmp(mode, name) == 0; }

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "waited";
    setup();
    CUmodule mod;
    CHECK(cuModuleLoadData(&mod, "simcuda kernels"));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    CHECK(cuStreamCreate(&A, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&B, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemAlloc_v2(&X, N * 4));
    CHECK(cuMemAlloc_v2(&Y, N * 4));
    CHECK(cuMemAlloc_v2(&Z, N * 4));
    CHECK(cuMemAlloc_v2(&W, N * 4));
    CHECK(cuMemsetD32_v2(X, 1, N));
    CHECK(cuMemsetD32_v2(Y, 1, N));
    CHECK(cuCtxSynchronize());

    CUgraph g = NULL, other = NULL, child = NULL;
    CUgraphNode node = NULL;
    CUgraphExec exec;
    struct fill_args args;
    int copies = is(mode, "exec-memcpy") || is(mode, "copy-read") || is(mode, "copy-write");
    int memsets = is(mode, "exec-memset") || is(mode, "memset-read");
    if (copies) {
        g = copy_graph(Z, X);
    } else if (memsets) {
        g = memset_graph(X);
    } else if (is(mode, "child") || is(mode, "child-race")) {
        child = kernel_graph(X, 7);
        g = parent_of(child, &node);
    } else if (is(mode, "fork") || is(mode, "fork-race")) {
        g = fork_graph();
    } else if (is(mode, "hand") || is(mode, "hand-race")) {
        CUDA_KERNEL_NODE_PARAMS_v2 k = fill_node(fill, &args, X, 7, N);
        CHECK(cuGraphCreate(&g, 0));
        CHECK(cuGraphAddKernelNode_v2(&node, g, NULL, 0, &k));
        k = fill_node(fill, &args, Y, 7, N);
        CHECK(cuGraphKernelNodeSetParams_v2(node, &k));
    } else {
        g = kernel_graph(X, 7);
    }
    if (!node) node = first_node(g);
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));

    if (is(mode, "exec-kernel") || is(mode, "exec-stale")) {
        CUDA_KERNEL_NODE_PARAMS_v2 k = fill_node(fill, &args, Y, 7, N);
        CHECK(cuGraphExecKernelNodeSetParams(exec, node, (CUDA_KERNEL_NODE_PARAMS_v1 *)&k));
    } else if (is(mode, "exec-kernel-v2")) {
        CUDA_KERNEL_NODE_PARAMS_v2 k = fill_node(fill, &args, Y, 7, N);
        CHECK(cuGraphExecKernelNodeSetParams_v2(exec, node, &k));
    } else if (is(mode, "exec-params")) {
        CUgraphNodeParams p;
        memset(&p, 0, sizeof p);
        p.type = CU_GRAPH_NODE_TYPE_KERNEL;
        CUDA_KERNEL_NODE_PARAMS_v2 k = fill_node(fill, &args, Y, 7, N);
        memcpy(&p.kernel, &k, sizeof k);
        CHECK(cuGraphExecNodeSetParams(exec, node, &p));
    } else if (is(mode, "exec-memcpy")) {
        CUDA_MEMCPY3D c = copy_node(Z, Y, N * 4);
        CUcontext ctx;
        CHECK(cuCtxGetCurrent(&ctx));
        CHECK(cuGraphExecMemcpyNodeSetParams(exec, node, &c, ctx));
    } else if (is(mode, "exec-memset")) {
        CUDA_MEMSET_NODE_PARAMS m;
        memset(&m, 0, sizeof m);
        m.dst = Y;
        m.value = 3;
        m.elementSize = 4;
        m.width = N;
        m.height = 1;
        CUcontext ctx;
        CHECK(cuCtxGetCurrent(&ctx));
        CHECK(cuGraphExecMemsetNodeSetParams(exec, node, &m, ctx));
    } else if (is(mode, "disabled") || is(mode, "reenabled")) {
        CHECK(cuGraphNodeSetEnabled(exec, node, 0));
        if (is(mode, "reenabled")) CHECK(cuGraphNodeSetEnabled(exec, node, 1));
    } else if (is(mode, "update") || is(mode, "update-race")) {
        other = kernel_graph(Y, 7);
        CUgraphExecUpdateResultInfo info;
        CHECK(cuGraphExecUpdate_v2(exec, other, &info));
    } else if (is(mode, "child")) {
        CUgraph next = kernel_graph(Y, 7);
        CHECK(cuGraphExecChildGraphNodeSetParams(exec, node, next));
        CHECK(cuGraphDestroy(next));
    }

    int late = is(mode, "late") || is(mode, "late-race");
    if (late) {
        b_fills(X);
        if (is(mode, "late")) {
            CUevent filled;
            CHECK(cuEventCreate(&filled, CU_EVENT_DISABLE_TIMING));
            CHECK(cuEventRecord(filled, B));
            CHECK(cuStreamWaitEvent(A, filled, 0));
            CHECK(cuEventDestroy_v2(filled));
        }
    }
    CHECK(cuGraphLaunch(exec, A));
    printf("launched\n");
    if (is(mode, "waited") || is(mode, "fork")) {
        CUevent done;
        CHECK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
        CHECK(cuEventRecord(done, A));
        CHECK(cuStreamWaitEvent(B, done, 0));
        CHECK(cuEventDestroy_v2(done));
    }
    if (is(mode, "exec-stale") || is(mode, "update-race") || is(mode, "hand-race") ||
        is(mode, "fork") || is(mode, "fork-race"))
        b_fills(Y);
    else if (is(mode, "copy-read") || is(mode, "memset-read"))
        CHECK(cuMemcpyDtoDAsync_v2(W, X, N * 4, B));
    else if (is(mode, "copy-write"))
        CHECK(cuMemsetD32Async(X, 9, N, B));
    else if (!late)
        b_fills(X);

    CHECK(cuCtxSynchronize());
    CHECK(cuGraphExecDestroy(exec));
    CHECK(cuGraphDestroy(g));
    if (other) CHECK(cuGraphDestroy(other));
    if (child) CHECK(cuGraphDestroy(child));
    CHECK(cuMemFree_v2(X));
    CHECK(cuMemFree_v2(Y));
    CHECK(cuMemFree_v2(Z));
    CHECK(cuMemFree_v2(W));
    CHECK(cuStreamDestroy_v2(A));
    CHECK(cuStreamDestroy_v2(B));
    CHECK(cuModuleUnload(mod));
    return 0;
}
