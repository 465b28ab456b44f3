// link: driver
// Frees inside one graph: a free node and the nodes that use the memory it frees. Stream A
// launches an executable graph twice and waits for it; nothing else runs beside it, so any
// finding is about the graph itself. By the first argument:
//
//   fork-ok      the capture on A allocates P (cuMemAllocAsync: an allocation node), fills
//                it, forks onto B (an event A recorded, which B waits for), where a copy
//                reads P into Z, and A waits for an event B recorded after that copy before
//                it frees P (cuMemFreeAsync: a free node);
//   after-ok     the capture on A allocates P, fills it and frees it;
//   hand-ok      built by hand: an allocation node (cuGraphAddMemAllocNode), a kernel node
//                filling P that depends on it, a free node (cuGraphAddMemFreeNode) that
//                depends on the kernel node;
//   generic-ok   as hand-ok, the allocation and free nodes made with cuGraphAddNode;
//   keep-ok      the capture on A allocates P and fills it, with no free node: P stays live
//                after each launch; B waits for an event A recorded after the launch, then
//                copies P into Z; A frees P (cuMemFreeAsync) after waiting for B.
//
// Each of those is correct: its report has no finding. Their mistaken twins:
//
//   fork-free    as fork-ok, without A's wait: A frees P while B's copy may still read it
//                (an unordered free: torch.cuda.graph with a side stream joined too late);
//   after-free   as after-ok, then a kernel given P after the free (a use after free; the
//                kernel is given no element to touch, so that the simulator runs it);
//   hand-race    as hand-ok, the kernel node depending on nothing (a graph race with the
//                allocation node: the kernel may run before the memory is allocated);
//   generic-free as generic-ok, the free node depending on the allocation node only (an
//                unordered free);
//   keep-race    as keep-ok, B's copy not waiting for the launch (a cross-stream race with
//                the memory the launch allocates);
//   use-after    the after-ok graph, then a kernel on A given P after the launch freed it
//                (a use after free that names the graph's free node).
//
// Prints "launched": the graph ran.
#include "sim_util.h"

#define N 1024

static CUfunction fill;
static CUdeviceptr Z;
/* The graph memory a capture allocated (its allocation node's address). */
static CUdeviceptr P;
static CUstream A, B;

static int is(const char *mode, const char *name) { return strcmp(mode, name) == 0; }

/* A launch of fill_u32 over n words of p on stream s. */
static void fill_on(CUstream s, CUdeviceptr p, unsigned n) { CHECK(launch_fill(fill, s, p, 7, n, N)); }

/* The capture on A that allocates P and forks onto B, whose copy reads it; A waits for the
 * copy before freeing P when `wait`. */
static CUgraph fork_graph(int wait) {
    CUgraph g;
    CUevent fork, read;
    CUdeviceptr p;
    CHECK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&read, CU_EVENT_DISABLE_TIMING));
    CHECK(cuStreamBeginCapture_v2(A, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuMemAllocAsync(&p, N * 4, A));
    fill_on(A, p, N);
    CHECK(cuEventRecord(fork, A));
    CHECK(cuStreamWaitEvent(B, fork, 0));
    CHECK(cuMemcpyDtoDAsync_v2(Z, p, N * 4, B));
    CHECK(cuEventRecord(read, B));
    if (wait) CHECK(cuStreamWaitEvent(A, read, 0));
    CHECK(cuMemFreeAsync(p, A));
    if (!wait) CHECK(cuStreamWaitEvent(A, read, 0));
    CHECK(cuStreamEndCapture(A, &g));
    CHECK(cuEventDestroy_v2(fork));
    CHECK(cuEventDestroy_v2(read));
    return g;
}

/* The capture on A that allocates P, fills it and frees it; then, when `late`, launches a
 * kernel given P. */
static CUgraph after_graph(int late) {
    CUgraph g;
    CUdeviceptr p;
    CHECK(cuStreamBeginCapture_v2(A, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuMemAllocAsync(&p, N * 4, A));
    fill_on(A, p, N);
    CHECK(cuMemFreeAsync(p, A));
    if (late) fill_on(A, p, 0);
    CHECK(cuStreamEndCapture(A, &g));
    P = p;
    return g;
}

/* The capture on A that allocates P and fills it, leaving it live. */
static CUgraph keep_graph(void) {
    CUgraph g;
    CHECK(cuStreamBeginCapture_v2(A, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuMemAllocAsync(&P, N * 4, A));
    fill_on(A, P, N);
    CHECK(cuStreamEndCapture(A, &g));
    return g;
}

/* keep-ok and keep-race: each launch's P is copied on B (after an event A recorded after the
 * launch when `wait`), then freed on A after A waits for B. */
static void keep(CUgraphExec exec, int wait) {
    CUevent launched, copied;
    CHECK(cuEventCreate(&launched, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&copied, CU_EVENT_DISABLE_TIMING));
    for (int i = 0; i < 2; i++) {
        CHECK(cuGraphLaunch(exec, A));
        CHECK(cuEventRecord(launched, A));
        if (wait) CHECK(cuStreamWaitEvent(B, launched, 0));
        CHECK(cuMemcpyDtoDAsync_v2(Z, P, N * 4, B));
        CHECK(cuEventRecord(copied, B));
        CHECK(cuStreamWaitEvent(A, copied, 0));
        CHECK(cuMemFreeAsync(P, A));
        CHECK(cuStreamSynchronize(A));
        CHECK(cuStreamSynchronize(B));
    }
    CHECK(cuEventDestroy_v2(launched));
    CHECK(cuEventDestroy_v2(copied));
}

/* Adds a node of `params` to g after `deps` (cuGraphAddNode). */
static CUgraphNode add_generic(CUgraph g, const CUgraphNode *deps, size_t n, CUgraphNodeParams *params) {
    CUgraphNode node;
    CHECK(cuGraphAddNode(&node, g, deps, n, params));
    return node;
}

/* Built by hand: an allocation node, a kernel node filling its memory (after the allocation
 * node when `ordered`), and a free node after the kernel node (`ordered`) or after the
 * allocation node only; with cuGraphAddNode when `generic`. */
static CUgraph hand_graph(int generic, int kernel_after_alloc, int free_after_kernel) {
    CUgraph g;
    CUgraphNode alloc, work;
    CHECK(cuGraphCreate(&g, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS a;
    memset(&a, 0, sizeof a);
    a.poolProps = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
    a.bytesize = N * 4;
    CUgraphNodeParams params;
    if (generic) {
        memset(&params, 0, sizeof params);
        params.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
        params.alloc = a;
        alloc = add_generic(g, NULL, 0, &params);
        a.dptr = params.alloc.dptr;
    } else {
        CHECK(cuGraphAddMemAllocNode(&alloc, g, NULL, 0, &a));
    }
    CUdeviceptr p = a.dptr;
    struct fill_args args;
    CUDA_KERNEL_NODE_PARAMS_v2 k = fill_node(fill, &args, p, 7, N);
    CHECK(cuGraphAddKernelNode_v2(&work, g, kernel_after_alloc ? &alloc : NULL, kernel_after_alloc ? 1 : 0, &k));
    CUgraphNode deps[2] = {work, alloc};
    size_t ndeps = free_after_kernel ? 2 : 1;
    const CUgraphNode *after = free_after_kernel ? deps : &alloc;
    if (generic) {
        memset(&params, 0, sizeof params);
        params.type = CU_GRAPH_NODE_TYPE_MEM_FREE;
        params.free.dptr = p;
        add_generic(g, after, ndeps, &params);
    } else {
        CUgraphNode free_node;
        CHECK(cuGraphAddMemFreeNode(&free_node, g, after, ndeps, p));
    }
    return g;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "fork-ok";
    setup();
    CUmodule mod;
    CHECK(cuModuleLoadData(&mod, "simcuda kernels"));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    CHECK(cuStreamCreate(&A, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&B, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemAlloc_v2(&Z, N * 4));
    CHECK(cuCtxSynchronize());

    CUgraph g;
    if (is(mode, "fork-ok") || is(mode, "fork-free")) {
        g = fork_graph(is(mode, "fork-ok"));
    } else if (is(mode, "after-ok") || is(mode, "after-free") || is(mode, "use-after")) {
        g = after_graph(is(mode, "after-free"));
    } else if (is(mode, "keep-ok") || is(mode, "keep-race")) {
        g = keep_graph();
    } else if (is(mode, "hand-ok") || is(mode, "hand-race")) {
        g = hand_graph(0, is(mode, "hand-ok"), 1);
    } else if (is(mode, "generic-ok") || is(mode, "generic-free")) {
        g = hand_graph(1, 1, is(mode, "generic-ok"));
    } else {
        fprintf(stderr, "unknown mode %s\n", mode);
        return 2;
    }
    CUgraphExec exec;
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    if (is(mode, "keep-ok") || is(mode, "keep-race")) {
        keep(exec, is(mode, "keep-ok"));
    } else {
        CHECK(cuGraphLaunch(exec, A));
        CHECK(cuStreamSynchronize(A));
        CHECK(cuGraphLaunch(exec, A));
        /* The kernel is given no element to touch, so that the simulator runs it. */
        if (is(mode, "use-after")) fill_on(A, P, 0);
    }
    printf("launched\n");
    CHECK(cuStreamSynchronize(A));

    CHECK(cuGraphExecDestroy(exec));
    CHECK(cuGraphDestroy(g));
    CHECK(cuMemFree_v2(Z));
    CHECK(cuStreamDestroy_v2(A));
    CHECK(cuStreamDestroy_v2(B));
    CHECK(cuModuleUnload(mod));
    return 0;
}
