/*
 * pool_sample: N cuMemAllocAsync + cuMemFreeAsync pairs on one stream at a call stack of F
 * frames, timed inside the program (start-up, context and stream creation and a warm-up
 * excluded), optionally asking the device's pool for its reserved and used memory
 * (cuMemPoolGetAttribute with CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT and
 * CU_MEMPOOL_ATTR_USED_MEM_CURRENT, two pure getters) after every EVERY-th pair: what a shim
 * that samples the pool on async allocations would add to each pair (issue 5, "pools:
 * reserved versus used"; docs/history/performance.md, "Timeline and fragmentation").
 *
 *     pool_sample [FRAMES=25] [PAIRS=200000] [EVERY=0] [SIZE=4096]
 *
 * EVERY=0 asks nothing. The stream is synchronized every 1024 pairs, so the pool's frees
 * complete as a program's would. Prints one line:
 * `pool_sample every=E pairs=N ns_per_pair=X cpu_ns_per_pair=Y reserved=R used=U`.
 */
#include "simcuda.h"
#include "frames.h"

static long pairs = 200000;
static long every = 0;
static size_t size = 4096;
static const long warmup = 2000;
static CUstream stream;
static CUmemoryPool pool;
static cuuint64_t reserved, used;

static long run_pairs(long n) {
    long failures = 0;
    for (long i = 0; i < n; i++) {
        CUdeviceptr d;
        if (cuMemAllocAsync(&d, size, stream) != CUDA_SUCCESS) {
            failures++;
            continue;
        }
        if (cuMemFreeAsync(d, stream) != CUDA_SUCCESS) failures++;
        if (every > 0 && i % every == 0) {
            /* Failures ignored, as the shim would. */
            cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved);
            cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used);
        }
        if (i % 1024 == 1023 && cuStreamSynchronize(stream) != CUDA_SUCCESS) failures++;
    }
    return failures;
}

__attribute__((noinline)) static long churn(void) {
    long failures = run_pairs(warmup);
    struct stamp t0 = stamp();
    failures += run_pairs(pairs);
    struct stamp t1 = stamp();
    printf("pool_sample every=%ld pairs=%ld ns_per_pair=%.1f cpu_ns_per_pair=%.1f reserved=%llu used=%llu\n", every,
           pairs, (t1.wall - t0.wall) / (double)pairs, (t1.cpu - t0.cpu) / (double)pairs,
           (unsigned long long)reserved, (unsigned long long)used);
    return failures;
}

int main(int argc, char **argv) {
    int frames = (int)arg_long(argc, argv, 1, 25);
    pairs = arg_long(argc, argv, 2, pairs);
    every = arg_long(argc, argv, 3, every);
    size = (size_t)arg_long(argc, argv, 4, (long)size);
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) ||
        cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING) || cuDeviceGetMemPool(&pool, dev)) {
        fprintf(stderr, "pool_sample: no simulated device\n");
        return 3;
    }
    long failures = descend(levels_for(frames));
    cuStreamSynchronize(stream);
    cuStreamDestroy_v2(stream);
    cuDevicePrimaryCtxRelease_v2(dev);
    if (failures) {
        fprintf(stderr, "pool_sample: %ld failed calls\n", failures);
        return 1;
    }
    return 0;
}
