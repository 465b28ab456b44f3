// link: driver
// Exactly two leak sites, in named functions, for the report's golden tests:
// - make_scratch() leaks 3000 bytes of device memory and is reached twice from one call site;
// - pin_staging() leaks 10000 bytes of pinned host memory, once.
// Everything else it allocates it frees; report_clean.c is the same program without the leaks.
#include <stdio.h>
#include <stdlib.h>
#include "simcuda.h"

#define CHECK(x)                                                                       \
    do {                                                                               \
        CUresult rc_ = (x);                                                            \
        if (rc_ != CUDA_SUCCESS) {                                                     \
            fprintf(stderr, "%s:%d %s failed with %d\n", __FILE__, __LINE__, #x, rc_); \
            exit(3);                                                                   \
        }                                                                              \
    } while (0)

__attribute__((noinline)) CUdeviceptr make_scratch(size_t bytes) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc_v2(&p, bytes));
    return p;
}

__attribute__((noinline)) void *pin_staging(size_t bytes) {
    void *h = NULL;
    CHECK(cuMemAllocHost_v2(&h, bytes));
    return h;
}

__attribute__((noinline)) void use_and_free(void) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc_v2(&p, 4096));
    CHECK(cuMemFree_v2(p));
}

int main(int argc, char **argv) {
    (void)argv;
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));

    use_and_free();
    // argc keeps the compiler from unrolling the loop into two call sites.
    for (int i = 0; i < argc + 1; i++) {
        printf("scratch 0x%llx\n", (unsigned long long)make_scratch(3000));
    }
    printf("staging %p\n", pin_staging(10000));
    return 0;
}
