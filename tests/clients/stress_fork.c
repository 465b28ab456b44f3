// link: driver
// Forks N children (argv[1], default 50) after the parent has used CUDA; child i makes i + 1
// allocations and frees the first, then exits. Prints "child INDEX PID" per child and "done".
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
#include "simcuda.h"

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 50;
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return 3;
    CUdeviceptr mine;
    if (cuMemAlloc_v2(&mine, 4096) != CUDA_SUCCESS) return 4;
    for (int i = 0; i < n; i++) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid < 0) return 5;
        if (pid == 0) {
            CUdeviceptr first = 0;
            for (int k = 0; k <= i; k++) {
                CUdeviceptr d;
                if (cuMemAlloc_v2(&d, 512) != CUDA_SUCCESS) _exit(6);
                if (k == 0) first = d;
            }
            if (cuMemFree_v2(first) != CUDA_SUCCESS) _exit(7);
            _exit(0);
        }
        printf("child %d %d\n", i, (int)pid);
    }
    int failed = 0;
    for (int i = 0; i < n; i++) {
        int status;
        if (wait(&status) < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0) failed++;
    }
    if (cuMemFree_v2(mine) != CUDA_SUCCESS) return 8;
    printf("done %d failed\n", failed);
    return failed ? 1 : 0;
}
