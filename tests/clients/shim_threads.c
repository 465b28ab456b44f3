// link: driver
// THREADS threads x PAIRS alloc/free pairs each (argv[1], argv[2]; default 8 x 100000).
// With a third argument US, main calls exit() US microseconds after starting the threads,
// while they still allocate.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include "simcuda.h"

static CUcontext ctx;
static long pairs = 100000;

static void *worker(void *arg) {
    long id = (long)arg;
    cuCtxSetCurrent(ctx);
    long failures = 0;
    for (long i = 0; i < pairs; i++) {
        CUdeviceptr d;
        if (cuMemAlloc_v2(&d, 256 + (size_t)((id * 7 + i) % 16) * 256) != CUDA_SUCCESS) failures++;
        else if (cuMemFree_v2(d) != CUDA_SUCCESS) failures++;
    }
    return (void *)failures;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 8;
    if (argc > 2) pairs = atol(argv[2]);
    CUdevice dev;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev)) return 3;
    pthread_t t[64];
    for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    if (argc > 3) {
        usleep((useconds_t)atoi(argv[3]));
        exit(0);
    }
    long failures = 0;
    for (int i = 0; i < threads; i++) {
        void *f;
        pthread_join(t[i], &f);
        failures += (long)f;
    }
    printf("threads %d pairs %ld failures %ld\n", threads, pairs, failures);
    return failures ? 1 : 0;
}
