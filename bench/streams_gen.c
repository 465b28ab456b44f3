/*
 * bench/streams_gen.c: a correctly ordered three-stream pipeline on the simulated driver that
 * makes about EVENTS stream-ordering calls, for bench/streams (run under libgpuleak.so, its
 * trace is what `gpuleak report` is timed on). Usage: streams_gen EVENTS.
 *
 * Each step of a ring of R buffers: an upload stream copies pinned host memory into buf[r]
 * (after waiting for the previous reader of that slot), a compute stream waits for it, takes a
 * scratch buffer from the pool, runs two kernels, copies, frees the scratch; a download stream
 * waits for the compute stream and copies buf[r] back; events order every hand-over. Every 64
 * steps the host waits for an event and polls a stream; every 256 steps the compute stream also
 * runs cuLaunchKernelEx, a 2D copy, a host function and a graph launch; every 4096 steps a
 * short-lived stream and event are made and destroyed. Everything is waited for and destroyed
 * at the end, so a correct analysis finds nothing. Prints "events N", the driver calls made
 * after set-up (all of them recorded but the graph's instantiation and destruction), and
 * "allocations N", which the report's summary must count too (it read the whole trace).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simcuda.h"

#define R 8
#define BUF 4096
#define KN 64 /* elements a kernel touches */

#define CHECK(call)                                                                        \
    do {                                                                                   \
        CUresult check_ = (call);                                                          \
        if (check_ != CUDA_SUCCESS) {                                                      \
            fprintf(stderr, "%s:%d: %s failed with %d\n", __FILE__, __LINE__, #call,      \
                    (int)check_);                                                          \
            exit(3);                                                                       \
        }                                                                                  \
        events++;                                                                          \
    } while (0)

static unsigned long long events, allocations;
static CUfunction fill, add;

static void noop(void *data) { (void)data; }

static void kernel(CUfunction f, CUdeviceptr p, unsigned value, CUstream s) {
    unsigned n = KN;
    void *params[] = {&p, &value, &n};
    CHECK(cuLaunchKernel(f, 1, 1, 1, KN, 1, 1, 0, s, params, NULL));
}

int main(int argc, char **argv) {
    unsigned long long target = argc > 1 ? strtoull(argv[1], NULL, 10) : 1000000;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) ||
        cuCtxSetCurrent(ctx) || cuModuleLoadData(&mod, "simcuda kernels") ||
        cuModuleGetFunction(&fill, mod, "fill_u32") || cuModuleGetFunction(&add, mod, "add_u32"))
        return 3;
    events = 0;

    CUstream up, compute, down;
    CHECK(cuStreamCreate(&up, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&compute, CU_STREAM_DEFAULT));
    CHECK(cuStreamCreate(&down, CU_STREAM_NON_BLOCKING));
    CUevent in[R], out[R], done[R];
    CUdeviceptr buf[R];
    for (int r = 0; r < R; r++) {
        CHECK(cuEventCreate(&in[r], CU_EVENT_DISABLE_TIMING));
        CHECK(cuEventCreate(&out[r], CU_EVENT_DISABLE_TIMING));
        CHECK(cuEventCreate(&done[r], CU_EVENT_DISABLE_TIMING));
        CHECK(cuMemAlloc_v2(&buf[r], BUF));
        allocations++;
    }
    char *pinned;
    CHECK(cuMemAllocHost_v2((void **)&pinned, R * BUF));
    allocations++;
    memset(pinned, 1, R * BUF);

    /* A graph of one host function, captured on a stream of its own. */
    CUstream cap;
    CUgraph graph;
    CUgraphExec exec;
    CHECK(cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamBeginCapture_v2(cap, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuLaunchHostFunc(cap, noop, NULL));
    CHECK(cuStreamEndCapture(cap, &graph));
    CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));

    for (unsigned long long step = 0; events < target; step++) {
        int r = (int)(step % R);
        char *host = pinned + r * BUF;
        if (step >= R) CHECK(cuStreamWaitEvent(up, done[r], 0));
        CHECK(cuMemcpyHtoDAsync_v2(buf[r], host, BUF, up));
        CHECK(cuEventRecord(in[r], up));

        CHECK(cuStreamWaitEvent(compute, in[r], 0));
        CUdeviceptr tmp;
        CHECK(cuMemAllocAsync(&tmp, BUF, compute));
        allocations++;
        kernel(fill, tmp, (unsigned)step, compute);
        kernel(add, buf[r], 1, compute);
        CHECK(cuMemcpyDtoDAsync_v2(buf[r], tmp, 256, compute));
        if (step % 256 == 0) {
            unsigned one = 1, n = KN;
            void *params[] = {&buf[r], &one, &n};
            CUlaunchConfig cfg = {.gridDimX = 1, .gridDimY = 1, .gridDimZ = 1, .blockDimX = KN,
                                  .blockDimY = 1, .blockDimZ = 1, .hStream = compute};
            CHECK(cuLaunchKernelEx(&cfg, add, params, NULL));
            CUDA_MEMCPY2D rows = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = tmp,
                                  .srcPitch = 256, .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                                  .dstDevice = buf[r], .dstPitch = 512, .WidthInBytes = 64,
                                  .Height = 4};
            CHECK(cuMemcpy2DAsync_v2(&rows, compute));
            CHECK(cuLaunchHostFunc(compute, noop, NULL));
            CHECK(cuGraphLaunch(exec, compute));
        }
        CHECK(cuMemFreeAsync(tmp, compute));
        CHECK(cuEventRecord(out[r], compute));

        CHECK(cuStreamWaitEvent(down, out[r], 0));
        CHECK(cuMemcpyDtoHAsync_v2(host, buf[r], BUF, down));
        CHECK(cuEventRecord(done[r], down));

        if (step % 64 == 63) {
            CHECK(cuEventSynchronize(done[r]));
            CHECK(cuStreamQuery(compute));
        }
        if (step % 4096 == 4095) {
            CUstream s;
            CUevent e;
            CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
            CHECK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
            CHECK(cuStreamWaitEvent(s, done[r], 0));
            CHECK(cuMemsetD8Async(buf[r], 0, 64, s));
            CHECK(cuEventRecord(e, s));
            CHECK(cuStreamWaitEvent(up, e, 0));
            CHECK(cuStreamSynchronize(s));
            CHECK(cuEventDestroy_v2(e));
            CHECK(cuStreamDestroy_v2(s));
        }
    }

    CHECK(cuCtxSynchronize());
    CHECK(cuGraphExecDestroy(exec));
    CHECK(cuGraphDestroy(graph));
    for (int r = 0; r < R; r++) {
        CHECK(cuEventDestroy_v2(in[r]));
        CHECK(cuEventDestroy_v2(out[r]));
        CHECK(cuEventDestroy_v2(done[r]));
        CHECK(cuMemFree_v2(buf[r]));
    }
    CHECK(cuMemFreeHost(pinned));
    CHECK(cuStreamDestroy_v2(up));
    CHECK(cuStreamDestroy_v2(compute));
    CHECK(cuStreamDestroy_v2(down));
    CHECK(cuStreamDestroy_v2(cap));
    printf("events %llu\nallocations %llu\n", events, allocations);
    return 0;
}
