// link: driver
// Return addresses signed with pointer authentication: on aarch64 each function below is built
// with `branch-protection=pac-ret` (as Debian's and Ubuntu's arm64 packages are built with
// -mbranch-protection=standard), so the return address it saves in its frame record carries a
// signature in its upper bits. Leaks 12345 bytes from signed_leaf, called through
// signed_middle and signed_outer. On other architectures the functions are ordinary ones.
#include <stdio.h>
#include "simcuda.h"

#if defined(__aarch64__)
#define SIGNED __attribute__((noinline, target("branch-protection=pac-ret")))
#else
#define SIGNED __attribute__((noinline))
#endif

SIGNED static CUdeviceptr signed_leaf(size_t n) {
    CUdeviceptr d = 0;
    if (cuMemAlloc_v2(&d, n) != CUDA_SUCCESS) return 0;
    __asm__ volatile("" ::: "memory");
    return d;
}

SIGNED static CUdeviceptr signed_middle(size_t n) {
    CUdeviceptr d = signed_leaf(n);
    __asm__ volatile("" ::: "memory");
    return d;
}

SIGNED static CUdeviceptr signed_outer(size_t n) {
    CUdeviceptr d = signed_middle(n);
    __asm__ volatile("" ::: "memory");
    return d;
}

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return 3;
    CUdeviceptr d = signed_outer(12345);
    if (!d) return 1;
    printf("leaked %#llx\n", (unsigned long long)d);
    return 0;
}
