// link: driver
// Makes N allocations (argv[2]), prints "ready" and then: "segv" dereferences NULL,
// "abort" calls abort(), "hang" sleeps until killed, "exit" returns normally.
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "simcuda.h"

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "exit";
    int n = argc > 2 ? atoi(argv[2]) : 100;
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return 3;
    for (int i = 0; i < n; i++) {
        CUdeviceptr d;
        if (cuMemAlloc_v2(&d, 4096) != CUDA_SUCCESS) return 4;
    }
    printf("ready\n");
    fflush(stdout);
    if (!strcmp(mode, "segv")) {
        volatile int *p = NULL;
        return *p;
    }
    if (!strcmp(mode, "abort")) abort();
    if (!strcmp(mode, "hang")) {
        for (;;) pause();
    }
    return 0;
}
