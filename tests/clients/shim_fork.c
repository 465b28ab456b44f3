// link: driver
// The parent allocates and forks a child that goes on allocating at the very same call site
// (3 blocks, frees 1), then forks a second child that never calls CUDA; prints both pids.
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

static volatile size_t next_size = 1111;

static __attribute__((noinline)) CUdeviceptr alloc_here(void) {
    CUdeviceptr d = 0;
    cuMemAlloc_v2(&d, next_size);
    return d;
}

int main(void) {
    if (!setup()) return 3;
    pid_t a = 1;
    CUdeviceptr d = 0, x[3];
    int nx = 0;
    for (int i = 0; i < 4; i++) {
        /* The same call site, so the same stack, in the parent and in the child. */
        CUdeviceptr p = alloc_here();
        if (a == 0) {
            x[nx++] = p;
            if (nx == 3) {
                cuMemFree_v2(x[0]);
                _exit(0);
            }
            continue;
        }
        d = p;
        fflush(stdout);
        next_size = 2222;
        a = fork();
        if (a != 0) break;
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
