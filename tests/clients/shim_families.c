// link: driver
// Every allocation family through the exported symbols (-lcuda), printing what the program
// itself saw, one line per call: "<alloc|free|map|unmap> <api> <result> <ptr> <size>".
// Ends with a failed allocation, an unknown free, a double free and one leak of 777 bytes.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "simcuda.h"

static void out(const char *ev, const char *api, CUresult r, unsigned long long p, unsigned long long size) {
    printf("%s %s %d 0x%llx %llu\n", ev, api, (int)r, p, size);
}

#define CHECK(x)                                                                  \
    do {                                                                          \
        CUresult rc_ = (x);                                                       \
        if (rc_ != CUDA_SUCCESS) {                                                \
            fprintf(stderr, "%s:%d %s failed with %d\n", __FILE__, __LINE__, #x, rc_); \
            exit(3);                                                              \
        }                                                                         \
    } while (0)

int main(void) {
    CUresult r;
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));

    CUdeviceptr d = 0;
    r = cuMemAlloc_v2(&d, 1000); out("alloc", "cuMemAlloc_v2", r, d, 1000);
    r = cuMemFree_v2(d); out("free", "cuMemFree_v2", r, d, 0);

    size_t pitch = 0;
    r = cuMemAllocPitch_v2(&d, &pitch, 100, 10, 4); out("alloc", "cuMemAllocPitch_v2", r, d, 1000);
    printf("pitch %zu\n", pitch);
    r = cuMemFree_v2(d); out("free", "cuMemFree_v2", r, d, 0);

    r = cuMemAllocManaged(&d, 4096, 1); out("alloc", "cuMemAllocManaged", r, d, 4096);
    r = cuMemFree_v2(d); out("free", "cuMemFree_v2", r, d, 0);

    void *h = NULL;
    r = cuMemAllocHost_v2(&h, 8192); out("alloc", "cuMemAllocHost_v2", r, (unsigned long long)h, 8192);
    r = cuMemFreeHost(h); out("free", "cuMemFreeHost", r, (unsigned long long)h, 0);
    r = cuMemHostAlloc(&h, 8192, 0); out("alloc", "cuMemHostAlloc", r, (unsigned long long)h, 8192);
    r = cuMemFreeHost(h); out("free", "cuMemFreeHost", r, (unsigned long long)h, 0);

    void *buf = aligned_alloc(4096, 65536);
    r = cuMemHostRegister_v2(buf, 65536, 0); out("alloc", "cuMemHostRegister_v2", r, (unsigned long long)buf, 65536);
    r = cuMemHostUnregister(buf); out("free", "cuMemHostUnregister", r, (unsigned long long)buf, 0);
    free(buf);

    CUstream s;
    CHECK(cuStreamCreate(&s, 0));
    r = cuMemAllocAsync(&d, 2048, s); out("alloc", "cuMemAllocAsync", r, d, 2048);
    r = cuMemFreeAsync(d, s); out("free", "cuMemFreeAsync", r, d, 0);
    r = cuMemAllocAsync_ptsz(&d, 2048, CU_STREAM_PER_THREAD); out("alloc", "cuMemAllocAsync_ptsz", r, d, 2048);
    r = cuMemFreeAsync_ptsz(d, CU_STREAM_PER_THREAD); out("free", "cuMemFreeAsync_ptsz", r, d, 0);
    CUmemoryPool pool;
    CHECK(cuDeviceGetDefaultMemPool(&pool, dev));
    r = cuMemAllocFromPoolAsync(&d, 512, pool, s); out("alloc", "cuMemAllocFromPoolAsync", r, d, 512);
    r = cuMemFreeAsync(d, s); out("free", "cuMemFreeAsync", r, d, 0);
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
    r = cuMemAddressReserve(&va, 2 * gran, 0, 0, 0); out("alloc", "cuMemAddressReserve", r, va, 2 * gran);
    CUmemGenericAllocationHandle hnd = 0;
    r = cuMemCreate(&hnd, gran, &prop, 0); out("alloc", "cuMemCreate", r, hnd, gran);
    r = cuMemMap(va, gran, 0, hnd, 0); out("map", "cuMemMap", r, va, gran);
    r = cuMemRelease(hnd); out("free", "cuMemRelease", r, hnd, 0);
    r = cuMemUnmap(va, gran); out("unmap", "cuMemUnmap", r, va, gran);
    r = cuMemAddressFree(va, 2 * gran); out("free", "cuMemAddressFree", r, va, 2 * gran);

    CUDA_ARRAY_DESCRIPTOR ad = {64, 32, CU_AD_FORMAT_FLOAT, 4};
    CUarray arr;
    r = cuArrayCreate_v2(&arr, &ad); out("alloc", "cuArrayCreate_v2", r, (unsigned long long)arr, 64 * 32 * 4 * 4);
    r = cuArrayDestroy(arr); out("free", "cuArrayDestroy", r, (unsigned long long)arr, 0);
    CUDA_ARRAY3D_DESCRIPTOR ad3 = {16, 16, 4, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0};
    r = cuArray3DCreate_v2(&arr, &ad3); out("alloc", "cuArray3DCreate_v2", r, (unsigned long long)arr, 16 * 16 * 4);
    r = cuArrayDestroy(arr); out("free", "cuArrayDestroy", r, (unsigned long long)arr, 0);

    CUdeviceptr shared = 0, opened = 0;
    r = cuMemAlloc_v2(&shared, 4096); out("alloc", "cuMemAlloc_v2", r, shared, 4096);
    CUipcMemHandle ih;
    CHECK(cuIpcGetMemHandle(&ih, shared));
    size_t osize = 0; /* the size the shim asks the driver for */ r = cuIpcOpenMemHandle_v2(&opened, ih, 1); if (r == CUDA_SUCCESS) CHECK(cuMemGetAddressRange_v2(NULL, &osize, opened)); out("alloc", "cuIpcOpenMemHandle_v2", r, opened, osize);
    if (r == CUDA_SUCCESS) {
        r = cuIpcCloseMemHandle(opened); out("free", "cuIpcCloseMemHandle", r, opened, 0);
    }
    r = cuMemFree_v2(shared); out("free", "cuMemFree_v2", r, shared, 0);

    CUcontext c2;
    CHECK(cuCtxCreate_v2(&c2, 0, dev));
    r = cuMemAlloc_v2(&d, 300); out("alloc", "cuMemAlloc_v2", r, d, 300);
    CHECK(cuCtxDestroy_v2(c2));
    printf("ctx-destroyed 0x%llx\n", (unsigned long long)c2);
    CHECK(cuCtxSetCurrent(ctx));

    CUevent ev;
    CHECK(cuEventCreate(&ev, 0));
    CHECK(cuEventDestroy_v2(ev));

    r = cuMemAlloc_v2(&d, 1ULL << 40); out("alloc", "cuMemAlloc_v2", r, r == CUDA_SUCCESS ? d : 0, 1ULL << 40);
    r = cuMemFree_v2(0xdead00); out("free", "cuMemFree_v2", r, 0xdead00, 0);
    r = cuMemAlloc_v2(&d, 256); out("alloc", "cuMemAlloc_v2", r, d, 256);
    r = cuMemFree_v2(d); out("free", "cuMemFree_v2", r, d, 0);
    r = cuMemFree_v2(d); out("free", "cuMemFree_v2", r, d, 0);

    CUdeviceptr leak;
    r = cuMemAlloc_v2(&leak, 777); out("alloc", "cuMemAlloc_v2", r, leak, 777);
    return 0;
}
