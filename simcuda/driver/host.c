/*
 * host.c: page-locked host memory. Pinned allocations are real host mappings (the client
 * dereferences them); registrations only mark an existing host range. Both are visible to
 * copies as unified addresses, and both belong to the context that made them.
 */
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#define HOSTALLOC_FLAGS (CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED)
#define HOSTREGISTER_FLAGS                                                                       \
    (CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_IOMEMORY |  \
     CU_MEMHOSTREGISTER_READ_ONLY)

struct rtab g_host;

static struct hostrange *hostrange_of(const struct range *r) { return r->obj; }

void host_unmap_range(struct range *r) {
    struct hostrange *hr = hostrange_of(r);
    void *addr = (void *)(uintptr_t)r->addr;
    if (hr->kind != HR_REGISTERED) munmap(addr, hr->maplen);
    rtab_remove(&g_host, r->addr);
    free(hr);
}

void host_ctx_teardown(struct ctx *c) {
    for (size_t i = 0; i < g_host.n;) {
        struct range *r = &g_host.v[i];
        if (hostrange_of(r)->ctx == c && hostrange_of(r)->kind != HR_MANAGED)
            host_unmap_range(r); /* removes entry i; the next one slides into place */
        else
            i++;
    }
}

static CUresult host_alloc(void **pp, size_t size, unsigned int flags) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!pp || size == 0 || (flags & ~(unsigned)HOSTALLOC_FLAGS)) return CUDA_ERROR_INVALID_VALUE;
    size_t maplen = (size_t)round_up(size, (uint64_t)sysconf(_SC_PAGESIZE));
    struct hostrange *hr = calloc(1, sizeof *hr);
    void *p = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!hr || p == MAP_FAILED || !rtab_insert(&g_host, (uint64_t)(uintptr_t)p, size, hr)) {
        free(hr);
        if (p != MAP_FAILED) munmap(p, maplen);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *hr = (struct hostrange){.kind = HR_PINNED, .flags = flags, .ctx = c, .maplen = maplen};
    *pp = p;
    return CUDA_SUCCESS;
}

static CUresult host_free(void *p) {
    struct range *r = rtab_exact(&g_host, (uint64_t)(uintptr_t)p);
    if (!p || !r || hostrange_of(r)->kind != HR_PINNED) return CUDA_ERROR_INVALID_VALUE;
    host_unmap_range(r);
    return CUDA_SUCCESS;
}

static CUresult host_device_pointer(CUdeviceptr *pdptr, void *p, unsigned int flags) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!pdptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    struct range *range = rtab_find(&g_host, (uint64_t)(uintptr_t)p);
    if (!range || hostrange_of(range)->kind == HR_MANAGED) return CUDA_ERROR_INVALID_VALUE;
    /* Unified addressing: the device sees page-locked memory at its host address. */
    *pdptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

static CUresult host_get_flags(unsigned int *flags, void *p) {
    struct range *r = rtab_find(&g_host, (uint64_t)(uintptr_t)p);
    if (!flags || !r || hostrange_of(r)->kind != HR_PINNED) return CUDA_ERROR_INVALID_VALUE;
    *flags = hostrange_of(r)->flags;
    return CUDA_SUCCESS;
}

static CUresult host_register(void *p, size_t size, unsigned int flags) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    uint64_t addr = (uint64_t)(uintptr_t)p;
    if (!p || size == 0 || addr + size < addr || (flags & ~(unsigned)HOSTREGISTER_FLAGS))
        return CUDA_ERROR_INVALID_VALUE;
    if (rtab_overlaps(&g_host, addr, size)) return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    struct hostrange *hr = calloc(1, sizeof *hr);
    if (!hr || !rtab_insert(&g_host, addr, size, hr)) {
        free(hr);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *hr = (struct hostrange){.kind = HR_REGISTERED, .flags = flags, .ctx = c};
    return CUDA_SUCCESS;
}

static CUresult host_unregister(void *p) {
    struct range *r = rtab_exact(&g_host, (uint64_t)(uintptr_t)p);
    if (!p || !r || hostrange_of(r)->kind != HR_REGISTERED)
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    host_unmap_range(r);
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize) {
    API_ENTER();
    API_LOCKED(host_alloc(pp, bytesize, 0));
}

SIMCUDA_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags) {
    API_ENTER();
    API_LOCKED(host_alloc(pp, bytesize, Flags));
}

SIMCUDA_API CUresult cuMemFreeHost(void *p) {
    API_ENTER();
    API_LOCKED(host_free(p));
}

SIMCUDA_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags) {
    API_ENTER();
    API_LOCKED(host_device_pointer(pdptr, p, Flags));
}

SIMCUDA_API CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p) {
    API_ENTER();
    API_LOCKED(host_get_flags(pFlags, p));
}

SIMCUDA_API CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags) {
    API_ENTER();
    API_LOCKED(host_register(p, bytesize, Flags));
}

SIMCUDA_API CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags) {
    API_ENTER();
    API_LOCKED(host_register(p, bytesize, Flags));
}

SIMCUDA_API CUresult cuMemHostUnregister(void *p) {
    API_ENTER();
    API_LOCKED(host_unregister(p));
}
