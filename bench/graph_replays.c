/*
 * graph_replays: the same kernels replayed as a CUDA graph or launched one by one, for what a
 * graph launch costs the analyzer (docs/history/performance.md, "Graph launches in the analyzer").
 *
 *     graph_replays MODE [NODES=1000] [REPLAYS=2000] [BUFFERS=64]
 *
 * Each step runs NODES fill_u32 kernels, kernel i over buffer i % BUFFERS, on stream A, then
 * stream B waits for an event A recorded and reads one buffer (a device copy), as a consumer
 * of a replayed graph does; every 64 steps the host synchronizes. MODE `graph` captures the
 * NODES kernels once and launches the executable graph at each step; MODE `direct` launches
 * them one by one; MODE `graph-memory` captures as `graph` but gives each kernel a
 * temporary the capture allocates just before it and frees just after it (an allocation
 * node, the kernel node, a free node: graph memory freed inside the graph, for the cost of
 * judging those frees). The program is correct: its report must have no finding.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simcuda.h"

#define CHECK(call)                                                                   \
    do {                                                                              \
        CUresult r_ = (call);                                                         \
        if (r_ != CUDA_SUCCESS) {                                                     \
            fprintf(stderr, "%s:%d: %s -> %d\n", __FILE__, __LINE__, #call, (int)r_); \
            exit(1);                                                                  \
        }                                                                             \
    } while (0)

#define WORDS 256

static CUfunction fill;
static CUdeviceptr *buf;
static int temporaries;

static void kernels(CUstream s, int nodes, int buffers) {
    for (int i = 0; i < nodes; i++) {
        CUdeviceptr p = buf[i % buffers];
        if (temporaries) CHECK(cuMemAllocAsync(&p, WORDS * 4, s));
        unsigned value = (unsigned)i, n = WORDS;
        void *params[] = {&p, &value, &n};
        CHECK(cuLaunchKernel(fill, 1, 1, 1, WORDS, 1, 1, 0, s, params, NULL));
        if (temporaries) CHECK(cuMemFreeAsync(p, s));
    }
}

int main(int argc, char **argv) {
    if (argc < 2 || (strcmp(argv[1], "graph") && strcmp(argv[1], "direct") && strcmp(argv[1], "graph-memory"))) {
        fprintf(stderr, "usage: graph_replays graph|direct|graph-memory [NODES] [REPLAYS] [BUFFERS]\n");
        return 2;
    }
    temporaries = !strcmp(argv[1], "graph-memory");
    int graph = temporaries || !strcmp(argv[1], "graph");
    int nodes = argc > 2 ? atoi(argv[2]) : 1000;
    int replays = argc > 3 ? atoi(argv[3]) : 2000;
    int buffers = argc > 4 ? atoi(argv[4]) : 64;
    if (nodes < 1 || replays < 1 || buffers < 1) return 2;

    CUdevice dev;
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CUmodule mod;
    CHECK(cuModuleLoadData(&mod, "simcuda kernels"));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    CUstream a, b;
    CHECK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    buf = calloc((size_t)buffers, sizeof *buf);
    for (int i = 0; i < buffers; i++) CHECK(cuMemAlloc_v2(&buf[i], WORDS * 4));
    CUdeviceptr out;
    CHECK(cuMemAlloc_v2(&out, WORDS * 4));
    CUevent done;
    CHECK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));

    CUgraph g = NULL;
    CUgraphExec exec = NULL;
    if (graph) {
        CHECK(cuStreamBeginCapture_v2(a, CU_STREAM_CAPTURE_MODE_RELAXED));
        kernels(a, nodes, buffers);
        CHECK(cuStreamEndCapture(a, &g));
        CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    }
    for (int step = 0; step < replays; step++) {
        if (graph)
            CHECK(cuGraphLaunch(exec, a));
        else
            kernels(a, nodes, buffers);
        CHECK(cuEventRecord(done, a));
        CHECK(cuStreamWaitEvent(b, done, 0));
        CHECK(cuMemcpyDtoDAsync_v2(out, buf[step % buffers], WORDS * 4, b));
        /* A waits for B's read before the next step writes that buffer again. */
        CHECK(cuEventRecord(done, b));
        CHECK(cuStreamWaitEvent(a, done, 0));
        if (step % 64 == 63) CHECK(cuCtxSynchronize());
    }
    CHECK(cuCtxSynchronize());
    if (graph) {
        CHECK(cuGraphExecDestroy(exec));
        CHECK(cuGraphDestroy(g));
    }
    CHECK(cuEventDestroy_v2(done));
    for (int i = 0; i < buffers; i++) CHECK(cuMemFree_v2(buf[i]));
    CHECK(cuMemFree_v2(out));
    CHECK(cuStreamDestroy_v2(a));
    CHECK(cuStreamDestroy_v2(b));
    CHECK(cuModuleUnload(mod));
    free(buf);
    printf("graph_replays mode=%s nodes=%d replays=%d buffers=%d\n", argv[1], nodes, replays, buffers);
    return 0;
}
