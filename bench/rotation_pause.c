/*
 * rotation_pause: how long a calling thread waits while a bounded trace rotates.
 *
 *     rotation_pause [LIVE=100000] [PAIRS=4000000]
 *
 * Makes LIVE device allocations and keeps them (the checkpoint of every rotation carries them
 * all), then times each of PAIRS cuMemAllocHost_v2 + cuMemFreeHost pairs on its own with
 * clock_gettime. Host pairs, because the simulator keeps each kind of memory in a table of its
 * own, and its device table, with LIVE entries, costs far more per call than any shim.
 * Prints one line: `rotation_pause live=L pairs=N median_ns=X p9999_ns=Y max_ns=Z over_1ms=K`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include "simcuda.h"

static long long now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    long long x = *(const long long *)a, y = *(const long long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    long live = argc > 1 ? atol(argv[1]) : 100000;
    long pairs = argc > 2 ? atol(argv[2]) : 4000000;
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return 3;
    CUdeviceptr *kept = malloc(sizeof(CUdeviceptr) * (size_t)live);
    long long *took = malloc(sizeof(long long) * (size_t)pairs);
    if (!kept || !took) return 3;
    for (long i = 0; i < live; i++)
        if (cuMemAlloc_v2(&kept[i], 256)) return 3;
    long over = 0;
    for (long i = 0; i < pairs; i++) {
        void *h;
        long long t0 = now_ns();
        if (cuMemAllocHost_v2(&h, 4096) || cuMemFreeHost(h)) return 3;
        took[i] = now_ns() - t0;
        over += took[i] > 1000000;
    }
    qsort(took, (size_t)pairs, sizeof(long long), cmp);
    printf("rotation_pause live=%ld pairs=%ld median_ns=%lld p9999_ns=%lld max_ns=%lld over_1ms=%ld\n", live, pairs,
           took[pairs / 2], took[pairs - 1 - pairs / 10000], took[pairs - 1], over);
    return 0;
}
