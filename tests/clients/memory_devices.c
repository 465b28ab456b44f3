// link: driver
// Two devices (run with SIMCUDA_DEVICES=2) that peak at different moments from different
// sites: device 0 first holds 8 x 4 MiB from fill_dev0 (its peak, 33 MiB with keep_dev0's
// 1 MiB, kept all run), frees them, then device 1 holds 12 x 4 MiB from fill_dev1 (its peak,
// 48 MiB, and the process's: 49 MiB). Everything but keep_dev0 is freed at the end.
#include <stdio.h>

#include "sim_util.h"

#define MIB (1u << 20)

__attribute__((noinline)) static CUdeviceptr keep_dev0(void) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc_v2(&p, MIB));
    return p;
}

__attribute__((noinline)) static CUdeviceptr fill_dev0(void) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc_v2(&p, 4 * MIB));
    return p;
}

__attribute__((noinline)) static CUdeviceptr fill_dev1(void) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc_v2(&p, 4 * MIB));
    return p;
}

int main(void) {
    CUcontext ctx0 = setup(), ctx1 = NULL;
    CUdevice dev1;
    CHECK(cuDeviceGet(&dev1, 1));
    CHECK(cuDevicePrimaryCtxRetain(&ctx1, dev1));
    CUdeviceptr keep = keep_dev0(), p[12];
    for (int i = 0; i < 8; i++) p[i] = fill_dev0();
    for (int i = 0; i < 8; i++) CHECK(cuMemFree_v2(p[i]));
    CHECK(cuCtxSetCurrent(ctx1));
    for (int i = 0; i < 12; i++) p[i] = fill_dev1();
    for (int i = 0; i < 12; i++) CHECK(cuMemFree_v2(p[i]));
    CHECK(cuCtxSetCurrent(ctx0));
    CHECK(cuMemFree_v2(keep));
    printf("done\n");
    return 0;
}
