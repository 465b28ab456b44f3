// link: driver
// The parent allocates, forks a child that allocates 3 blocks and frees 1 (its own CUDA use),
// and a second child that never calls CUDA; prints both child pids.
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "simcuda.h"

static CUcontext setup(void) {
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return NULL;
    return ctx;
}

int main(void) {
    if (!setup()) return 3;
    CUdeviceptr d;
    cuMemAlloc_v2(&d, 1111);
    fflush(stdout);
    pid_t a = fork();
    if (a == 0) {
        CUdeviceptr x[3];
        for (int i = 0; i < 3; i++) cuMemAlloc_v2(&x[i], 2222);
        cuMemFree_v2(x[0]);
        _exit(0);
    }
    pid_t b = fork();
    if (b == 0) {
        printf("child without cuda\n");
        fflush(stdout);
        _exit(0);
    }
    int st;
    waitpid(a, &st, 0);
    waitpid(b, &st, 0);
    cuMemFree_v2(d);
    printf("children %d %d\n", (int)a, (int)b);
    return 0;
}
