// link: dl
// Reaches the driver as cudarc and ctypes do: dlopen("libcuda.so.1", RTLD_LOCAL) and one
// dlsym per function. Prints "alloc|free <api> <result> <ptr> <size>" lines, then what
// RTLD_DEFAULT and RTLD_NEXT lookups answered.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include "simcuda.h"

#define LOAD(h, name) name##_t name = (name##_t)dlsym(h, #name)

typedef CUresult (*cuInit_t)(unsigned);
typedef CUresult (*cuDeviceGet_t)(CUdevice *, int);
typedef CUresult (*cuDevicePrimaryCtxRetain_t)(CUcontext *, CUdevice);
typedef CUresult (*cuCtxSetCurrent_t)(CUcontext);
typedef CUresult (*cuMemAlloc_v2_t)(CUdeviceptr *, size_t);
typedef CUresult (*cuMemFree_v2_t)(CUdeviceptr);
typedef CUresult (*cuMemAllocAsync_t)(CUdeviceptr *, size_t, CUstream);
typedef CUresult (*cuMemFreeAsync_t)(CUdeviceptr, CUstream);
typedef CUresult (*cuStreamCreate_t)(CUstream *, unsigned);
typedef CUresult (*cuStreamSynchronize_t)(CUstream);

int main(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 3;
    }
    LOAD(h, cuInit);
    LOAD(h, cuDeviceGet);
    LOAD(h, cuDevicePrimaryCtxRetain);
    LOAD(h, cuCtxSetCurrent);
    LOAD(h, cuMemAlloc_v2);
    LOAD(h, cuMemFree_v2);
    LOAD(h, cuMemAllocAsync);
    LOAD(h, cuMemFreeAsync);
    LOAD(h, cuStreamCreate);
    LOAD(h, cuStreamSynchronize);
    CUdevice dev;
    CUcontext ctx;
    CUstream s;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx) || cuStreamCreate(&s, 0)) return 4;
    CUdeviceptr a, b, c;
    CUresult r;
    r = cuMemAlloc_v2(&a, 1000); printf("alloc cuMemAlloc_v2 %d 0x%llx 1000\n", r, a);
    r = cuMemAlloc_v2(&b, 2000); printf("alloc cuMemAlloc_v2 %d 0x%llx 2000\n", r, b);
    r = cuMemAllocAsync(&c, 3000, s); printf("alloc cuMemAllocAsync %d 0x%llx 3000\n", r, c);
    r = cuMemFree_v2(a); printf("free cuMemFree_v2 %d 0x%llx 0\n", r, a);
    r = cuMemFreeAsync(c, s); printf("free cuMemFreeAsync %d 0x%llx 0\n", r, c);
    cuStreamSynchronize(s);
    printf("RTLD_DEFAULT cuMemAlloc_v2: %s\n", dlsym(RTLD_DEFAULT, "cuMemAlloc_v2") ? "found" : "missing");
#if defined(__aarch64__)
#define PUTS_VERSION "GLIBC_2.17"
#else
#define PUTS_VERSION "GLIBC_2.2.5"
#endif
    // dlvsym's two paths through the shim's entry point: RTLD_NEXT (the tail jump) and a
    // handle (looked up, then offered for substitution).
    printf("RTLD_NEXT dlvsym puts: %s\n", dlvsym(RTLD_NEXT, "puts", PUTS_VERSION) == (void *)puts ? "puts" : "other");
    printf("RTLD_DEFAULT dlvsym puts: %s\n", dlvsym(RTLD_DEFAULT, "puts", PUTS_VERSION) == (void *)puts ? "puts" : "other");
    printf("RTLD_NEXT puts: %s\n", dlsym(RTLD_NEXT, "puts") ? "found" : "missing");
    printf("unknown: %s\n", dlsym(h, "cuNoSuchFunction") ? "found" : "missing");
    return 0;
}
