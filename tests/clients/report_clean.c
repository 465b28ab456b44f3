// link: driver
// The correct twin of report_leaks.c: the same allocations, every one freed, plus the other
// families a program frees correctly (pitched, managed, stream-ordered, VMM with release
// before unmap, memory in a created context freed before it is destroyed). Its report must
// show no leak and no finding.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

__attribute__((noinline)) void other_families(CUdevice dev) {
    CUdeviceptr d = 0;
    size_t pitch = 0;
    CHECK(cuMemAllocPitch_v2(&d, &pitch, 100, 10, 4));
    CHECK(cuMemFree_v2(d));
    CHECK(cuMemAllocManaged(&d, 4096, 1));
    CHECK(cuMemFree_v2(d));

    CUstream s;
    CHECK(cuStreamCreate(&s, 0));
    CHECK(cuMemAllocAsync(&d, 2048, s));
    CHECK(cuMemFreeAsync(d, s));
    CHECK(cuStreamSynchronize(s));
    CHECK(cuStreamDestroy_v2(s));

    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    size_t gran = 0;
    CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    CUdeviceptr va = 0;
    CUmemGenericAllocationHandle h = 0;
    CHECK(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
    CHECK(cuMemCreate(&h, gran, &prop, 0));
    CHECK(cuMemMap(va, gran, 0, h, 0));
    CHECK(cuMemRelease(h));  // the memory lives on while mapped
    CHECK(cuMemUnmap(va, gran));
    CHECK(cuMemAddressFree(va, 2 * gran));

    CUcontext c2, primary;
    CHECK(cuCtxGetCurrent(&primary));
    CHECK(cuCtxCreate_v2(&c2, 0, dev));
    CHECK(cuMemAlloc_v2(&d, 300));
    CHECK(cuMemFree_v2(d));
    CHECK(cuCtxDestroy_v2(c2));
    CHECK(cuCtxSetCurrent(primary));
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
    for (int i = 0; i < argc + 1; i++) {
        CHECK(cuMemFree_v2(make_scratch(3000)));
    }
    CHECK(cuMemFreeHost(pin_staging(10000)));
    other_families(dev);
    CHECK(cuDevicePrimaryCtxRelease_v2(dev));
    return 0;
}
