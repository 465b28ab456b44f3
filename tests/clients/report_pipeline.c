// link: driver
// A correct two-stream pipeline, the shape of a training or inference loop: each step
// uploads a batch on a copy stream from pinned memory into pool memory, computes on a
// compute stream that waits for the upload's event, and downloads on the copy stream after
// the compute stream's event, freeing both buffers there in stream order. Every 8th step the
// host waits (alternately on the copy stream and on an event) and checks the numbers; at the
// end everything is synchronized and released. Its report must have no finding and no leak.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "simcuda.h"

#define CHECK(x)                                                                       \
    do {                                                                               \
        CUresult rc_ = (x);                                                            \
        if (rc_ != CUDA_SUCCESS) {                                                     \
            fprintf(stderr, "%s:%d %s failed with %d\n", __FILE__, __LINE__, #x, rc_); \
            exit(3);                                                                   \
        }                                                                              \
    } while (0)

#define N 4096
#define STEPS 200
#define DEPTH 2

static void launch(CUfunction f, CUdeviceptr p, unsigned value, CUstream s) {
    unsigned n = N;
    void *params[] = {&p, &value, &n};
    CHECK(cuLaunchKernel(f, N / 256, 1, 1, 256, 1, 1, 0, s, params, NULL));
}

int main(int argc, char **argv) {
    int steps = argc > 1 ? atoi(argv[1]) : STEPS;
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fill, add;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, "simcuda kernels"));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    CHECK(cuModuleGetFunction(&add, mod, "add_u32"));

    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    CUmemoryPool pool;
    CHECK(cuMemPoolCreate(&pool, &props));

    CUstream copy, compute;
    CHECK(cuStreamCreate(&copy, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreateWithPriority(&compute, CU_STREAM_NON_BLOCKING, -1));
    CUevent uploaded[DEPTH], computed[DEPTH], done[DEPTH];
    unsigned *in_host[DEPTH], *out_host[DEPTH];
    for (int i = 0; i < DEPTH; i++) {
        CHECK(cuEventCreate(&uploaded[i], CU_EVENT_DISABLE_TIMING));
        CHECK(cuEventCreate(&computed[i], CU_EVENT_DISABLE_TIMING));
        CHECK(cuEventCreate(&done[i], CU_EVENT_DISABLE_TIMING));
        CHECK(cuMemAllocHost_v2((void **)&in_host[i], N * sizeof(unsigned)));
        CHECK(cuMemAllocHost_v2((void **)&out_host[i], N * sizeof(unsigned)));
    }
    // A table the compute stream reads every step, written once and waited for.
    CUdeviceptr table;
    CHECK(cuMemAlloc_v2(&table, N * sizeof(unsigned)));
    CHECK(cuMemsetD32Async(table, 0, N, compute));
    CHECK(cuStreamSynchronize(compute));

    int bad = 0;
    for (int step = 0; step < steps; step++) {
        int slot = step % DEPTH;
        // The host may rewrite this slot's pinned buffers only once their last copy is done.
        if (step >= DEPTH) CHECK(cuEventSynchronize(done[slot]));
        for (int i = 0; i < N; i++) in_host[slot][i] = (unsigned)(step + i);

        CUdeviceptr in, out;
        CHECK(cuMemAllocFromPoolAsync(&in, N * sizeof(unsigned), pool, copy));
        CHECK(cuMemcpyHtoDAsync_v2(in, in_host[slot], N * sizeof(unsigned), copy));
        CHECK(cuEventRecord(uploaded[slot], copy));

        CHECK(cuStreamWaitEvent(compute, uploaded[slot], 0));
        CHECK(cuMemAllocAsync(&out, N * sizeof(unsigned), compute));
        launch(add, in, 1, compute);
        launch(add, table, 0, compute);
        CHECK(cuMemcpyDtoDAsync_v2(out, in, N * sizeof(unsigned), compute));
        CHECK(cuEventRecord(computed[slot], compute));

        CHECK(cuStreamWaitEvent(copy, computed[slot], 0));
        CHECK(cuMemcpyDtoHAsync_v2(out_host[slot], out, N * sizeof(unsigned), copy));
        CHECK(cuMemFreeAsync(in, copy));
        CHECK(cuMemFreeAsync(out, copy));
        CHECK(cuEventRecord(done[slot], copy));

        if (step % 8 == 7) {
            if (step % 16 == 7) {
                CHECK(cuStreamSynchronize(copy));
            } else {
                CHECK(cuEventSynchronize(done[slot]));
            }
            for (int i = 0; i < N; i++) bad += out_host[slot][i] != (unsigned)(step + i + 1);
        }
    }
    CHECK(cuStreamSynchronize(copy));
    CHECK(cuStreamSynchronize(compute));
    printf("steps %d bad %d\n", steps, bad);

    // Scratch memory zeroed on the legacy default stream: the compute stream is
    // non-blocking, so it waits for an event recorded there.
    CUdeviceptr scratch;
    CHECK(cuMemAlloc_v2(&scratch, N * sizeof(unsigned)));
    CHECK(cuMemsetD32_v2(scratch, 0, N));
    CHECK(cuEventRecord(done[0], NULL));
    CHECK(cuStreamWaitEvent(compute, done[0], 0));
    launch(fill, scratch, 9, compute);
    CHECK(cuStreamSynchronize(compute));
    CHECK(cuMemFree_v2(scratch));

    CHECK(cuMemFree_v2(table));
    for (int i = 0; i < DEPTH; i++) {
        CHECK(cuEventDestroy_v2(uploaded[i]));
        CHECK(cuEventDestroy_v2(computed[i]));
        CHECK(cuEventDestroy_v2(done[i]));
        CHECK(cuMemFreeHost(in_host[i]));
        CHECK(cuMemFreeHost(out_host[i]));
    }
    CHECK(cuStreamDestroy_v2(copy));
    CHECK(cuStreamDestroy_v2(compute));
    CHECK(cuMemPoolDestroy(pool));
    CHECK(cuModuleUnload(mod));
    CHECK(cuDevicePrimaryCtxRelease_v2(dev));
    return bad != 0;
}
