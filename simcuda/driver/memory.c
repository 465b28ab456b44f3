/*
 * memory.c: the per-device first-fit heaps, device/pitch/managed allocations, frees, and the
 * translation of device addresses to host backing that copies and kernels use.
 *
 * Each device's memory is the address range [DEV_BASE(d), DEV_BASE(d) + SIMCUDA_MEM_BYTES),
 * kept PROT_NONE in the host address space so that a device pointer is never dereferenceable
 * by the host, while one lazily touched host arena holds the bytes. Free space is the set of
 * gaps between allocated blocks: freeing a block leaves a hole, adjacent holes are one gap, and
 * an allocation fails with CUDA_ERROR_OUT_OF_MEMORY when no single gap fits it, however much
 * memory is free in total. That makes fragmentation reproducible.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000
#endif

/* Keeps [addr, addr + size) out of the host's hands; failure only costs that protection. */
static void reserve_span(uint64_t addr, uint64_t size) {
    void *want = (void *)(uintptr_t)addr;
    void *got = mmap(want, size, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (got != MAP_FAILED && got != want) munmap(got, size);
}

static bool arena_ready(int dev) {
    struct device *d = &g_dev[dev];
    if (d->arena) return true;
    void *p = mmap(NULL, g_cfg.mem_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return false;
    d->arena = p;
    reserve_span(DEV_BASE(dev), g_cfg.mem_bytes);
    if (dev == 0) {
        reserve_span(VMM_BASE, VMM_SPAN);
        reserve_span(IPC_BASE, IPC_SPAN);
        reserve_span(GRAPH_BASE, GRAPH_SPAN);
    }
    return true;
}

CUresult heap_alloc(int dev, uint64_t size, uint64_t align, enum akind kind, struct ctx *ctx,
                    struct alloc **out) {
    struct device *d = &g_dev[dev];
    if (size == 0 || size > g_cfg.mem_bytes) return CUDA_ERROR_OUT_OF_MEMORY;
    if (!arena_ready(dev)) return CUDA_ERROR_OUT_OF_MEMORY;
    uint64_t block = round_up(size, HEAP_ALIGN), addr;
    if (!rtab_first_fit(&d->heap, DEV_BASE(dev), DEV_BASE(dev) + g_cfg.mem_bytes, block, align,
                        &addr))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct alloc *a = calloc(1, sizeof *a);
    if (!a) return CUDA_ERROR_OUT_OF_MEMORY;
    static uint64_t next_serial = 1;
    *a = (struct alloc){.kind = kind, .dev = dev, .ctx = ctx, .addr = addr, .size = size,
                        .block = block, .serial = next_serial++};
    if (!rtab_insert(&d->heap, addr, block, a)) {
        free(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    d->used += block;
    *out = a;
    return CUDA_SUCCESS;
}

char *heap_host(const struct alloc *a) {
    return g_dev[a->dev].arena + (a->addr - DEV_BASE(a->dev));
}

void heap_release(struct alloc *a) {
    struct device *d = &g_dev[a->dev];
    rtab_remove(&d->heap, a->addr);
    d->used -= a->block;
    /* Give whole pages back to the host; a freed block's contents are undefined anyway. */
    uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE);
    uintptr_t start = round_up((uintptr_t)heap_host(a), page);
    uintptr_t end = ((uintptr_t)heap_host(a) + a->block) / page * page;
    if (end > start) madvise((void *)start, end - start, MADV_DONTNEED);
    free(a);
}

static int device_of_address(uint64_t addr) {
    for (int d = 0; d < g_cfg.devices; d++)
        if (addr >= DEV_BASE(d) && addr - DEV_BASE(d) < DEV_SPAN) return d;
    return -1;
}

struct alloc *heap_find(uint64_t addr) {
    int d = device_of_address(addr);
    if (d < 0) return NULL;
    struct range *r = rtab_find(&g_dev[d].heap, addr);
    return r ? r->obj : NULL;
}

/* Allocations whose device addresses the client holds (the others are reached by handles). */
static bool client_addressable(const struct alloc *a) {
    return a->kind == AK_DEVICE || a->kind == AK_PITCH || (a->kind == AK_ASYNC && !a->cached);
}

CUresult xlate(uint64_t addr, size_t n, enum xmode mode, char **host, size_t *contig) {
    bool any = mode == X_ANY_READ || mode == X_ANY_WRITE;
    if (device_of_address(addr) >= 0) {
        /* A range of heap memory must lie within one allocation. */
        struct alloc *a = heap_find(addr);
        bool array = mode == X_ARRAY_READ || mode == X_ARRAY_WRITE;
        if (!a || (array ? a->kind != AK_ARRAY : !client_addressable(a)) || n > a->size ||
            addr - a->addr > a->size - n)
            return CUDA_ERROR_INVALID_VALUE;
        *host = heap_host(a) + (addr - a->addr);
        *contig = n;
        return CUDA_SUCCESS;
    }
    if (mode == X_ARRAY_READ || mode == X_ARRAY_WRITE) return CUDA_ERROR_INVALID_VALUE;
    bool write = mode == X_DEV_WRITE || mode == X_ANY_WRITE;
    if (addr >= VMM_BASE && addr - VMM_BASE < VMM_SPAN) return vmm_xlate(addr, n, write, host, contig);
    if (addr >= IPC_BASE && addr - IPC_BASE < IPC_SPAN) return ipc_xlate(addr, n, host, contig);
    if (addr >= GRAPH_BASE && addr - GRAPH_BASE < GRAPH_SPAN) return graph_mem_xlate(addr, n, host, contig);
    /* Page-locked and managed ranges are device-addressable as a whole; host memory past
     * their end is only valid where any host pointer is (the host side of a copy). */
    struct range *r = rtab_find(&g_host, addr);
    if (r && !any && n > r->addr + r->size - addr) return CUDA_ERROR_INVALID_VALUE;
    if (r || (any && addr != 0)) {
        *host = (char *)(uintptr_t)addr;
        *contig = n;
        return CUDA_SUCCESS;
    }
    return CUDA_ERROR_INVALID_VALUE;
}

/* Pass 0 only validates, so a bad range copies nothing; pass 1 copies. */
static CUresult copy_passes(uint64_t dst, enum xmode dmode, uint64_t src, enum xmode smode,
                            size_t n, int passes) {
    if (n == 0) return CUDA_SUCCESS;
    if (dst + n < dst || src + n < src) return CUDA_ERROR_INVALID_VALUE;
    for (int pass = 0; pass < passes; pass++) {
        for (size_t off = 0; off < n;) {
            char *dh, *sh;
            size_t dc, sc;
            CUresult r = xlate(dst + off, n - off, dmode, &dh, &dc);
            if (r == CUDA_SUCCESS) r = xlate(src + off, n - off, smode, &sh, &sc);
            if (r != CUDA_SUCCESS) return r;
            size_t len = dc < sc ? dc : sc;
            if (pass == 1) memmove(dh, sh, len);
            off += len;
        }
    }
    return CUDA_SUCCESS;
}

CUresult mem_copy_locked(uint64_t dst, enum xmode dmode, uint64_t src, enum xmode smode, size_t n) {
    return copy_passes(dst, dmode, src, smode, n, 2);
}

CUresult mem_copy_valid(uint64_t dst, enum xmode dmode, uint64_t src, enum xmode smode, size_t n) {
    return copy_passes(dst, dmode, src, smode, n, 1);
}

CUresult mem_set_rows_locked(uint64_t dst, size_t pitch, const void *pattern, size_t elem,
                             size_t count, size_t rows) {
    if (count == 0 || rows == 0) return CUDA_SUCCESS;
    if (dst % elem != 0 || count > SIZE_MAX / elem) return CUDA_ERROR_INVALID_VALUE;
    size_t n = count * elem;
    /* Rows must not overlap, and each starts on an element. */
    if (rows > 1 && (pitch < n || pitch % elem != 0 || rows - 1 > (UINT64_MAX - dst) / pitch))
        return CUDA_ERROR_INVALID_VALUE;
    const unsigned char *pat = pattern;
    /* Every row is checked before any byte is written. */
    for (int pass = 0; pass < 2; pass++) {
        for (size_t row = 0; row < rows; row++) {
            uint64_t at = dst + (uint64_t)row * pitch;
            for (size_t off = 0; off < n;) {
                char *h;
                size_t c;
                CUresult r = xlate(at + off, n - off, X_DEV_WRITE, &h, &c);
                if (r != CUDA_SUCCESS) return r;
                if (pass == 1) {
                    if (elem == 1)
                        memset(h, pat[0], c);
                    else
                        for (size_t i = 0; i < c; i++) h[i] = (char)pat[(off + i) % elem];
                }
                off += c;
            }
        }
    }
    return CUDA_SUCCESS;
}

CUresult mem_set_locked(uint64_t dst, const void *pattern, size_t elem, size_t count) {
    return mem_set_rows_locked(dst, 0, pattern, elem, count, 1);
}

/* ---- device, pitch and managed allocations ------------------------------------------------ */

CUresult mem_alloc_locked(CUdeviceptr *dptr, size_t size, enum akind kind) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!dptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
    struct alloc *a;
    r = heap_alloc(c->dev, size, HEAP_ALIGN, kind, c, &a);
    if (r == CUDA_SUCCESS) *dptr = a->addr;
    return r;
}

static CUresult alloc_pitch(CUdeviceptr *dptr, size_t *pitch, size_t width, size_t height,
                            unsigned int elem) {
    if (!pitch || width == 0 || height == 0 || (elem != 4 && elem != 8 && elem != 16))
        return CUDA_ERROR_INVALID_VALUE;
    size_t p = (size_t)round_up(width, PITCH_ALIGN);
    if (height > SIZE_MAX / p) return CUDA_ERROR_OUT_OF_MEMORY;
    CUresult r = mem_alloc_locked(dptr, p * height, AK_PITCH);
    if (r == CUDA_SUCCESS) *pitch = p;
    return r;
}

static void managed_release(struct alloc *a) {
    struct range *r = rtab_exact(&g_host, (uint64_t)(uintptr_t)a->host);
    if (r) host_unmap_range(r);
    heap_release(a);
}

static CUresult alloc_managed(CUdeviceptr *dptr, size_t size, unsigned int flags) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!dptr || size == 0 || (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST))
        return CUDA_ERROR_INVALID_VALUE;
    struct alloc *a;
    r = heap_alloc(c->dev, size, HEAP_ALIGN, AK_MANAGED, c, &a);
    if (r != CUDA_SUCCESS) return r;
    /* Managed memory is host-accessible: the client gets a host mapping, while the device heap
     * block keeps the device memory accounting (and its fragmentation) honest. */
    struct hostrange *hr = calloc(1, sizeof *hr);
    size_t maplen = (size_t)round_up(size, (uint64_t)sysconf(_SC_PAGESIZE));
    void *p = mmap(NULL, maplen, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (!hr || p == MAP_FAILED) {
        free(hr);
        if (p != MAP_FAILED) munmap(p, maplen);
        heap_release(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *hr = (struct hostrange){.kind = HR_MANAGED, .flags = flags, .ctx = c, .managed = a,
                             .maplen = maplen};
    rtab_insert(&g_host, (uint64_t)(uintptr_t)p, size, hr);
    a->host = p;
    *dptr = (CUdeviceptr)(uintptr_t)p;
    return CUDA_SUCCESS;
}

CUresult mem_free_locked(CUdeviceptr dptr) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    return mem_free_ptr(dptr);
}

CUresult mem_free_ptr(CUdeviceptr dptr) {
    struct alloc *a = heap_find(dptr);
    if (a && a->addr == dptr && client_addressable(a)) {
        if (a->kind == AK_ASYNC)
            pool_free_alloc(a);
        else
            heap_release(a);
        return CUDA_SUCCESS;
    }
    struct range *hr = rtab_exact(&g_host, dptr);
    if (hr && ((struct hostrange *)hr->obj)->kind == HR_MANAGED) {
        managed_release(((struct hostrange *)hr->obj)->managed);
        return CUDA_SUCCESS;
    }
    if (ipc_free_pool_alias(dptr)) return CUDA_SUCCESS;
    if (graph_mem_free(dptr)) return CUDA_SUCCESS;
    return CUDA_ERROR_INVALID_VALUE;
}

static CUresult address_range(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    struct alloc *a = heap_find(dptr);
    uint64_t base, size;
    if (a && client_addressable(a) && dptr - a->addr < a->size) {
        base = a->addr;
        size = a->size;
    } else if (!ipc_address_range(dptr, &base, &size)) {
        struct range *hr = rtab_find(&g_host, dptr);
        if (!hr || ((struct hostrange *)hr->obj)->kind != HR_MANAGED) return CUDA_ERROR_NOT_FOUND;
        base = hr->addr;
        size = hr->size;
    }
    if (pbase) *pbase = base;
    if (psize) *psize = (size_t)size;
    return CUDA_SUCCESS;
}

static CUresult pointer_attribute(void *data, CUpointer_attribute attr, CUdeviceptr ptr) {
    if (!data) return CUDA_ERROR_INVALID_VALUE;
    struct alloc *a = heap_find(ptr);
    if (!a || !client_addressable(a) || ptr - a->addr >= a->size) return CUDA_ERROR_INVALID_VALUE;
    switch (attr) {
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        *(int *)data = a->dev;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
        *(CUdeviceptr *)data = a->addr;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        *(size_t *)data = (size_t)a->size;
        return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
        /* NULL for memory that no pool handed out. */
        *(CUmemoryPool *)data = a->kind == AK_ASYNC && a->pool ? (CUmemoryPool)(uintptr_t)H(a->pool) : NULL;
        return CUDA_SUCCESS;
    default:
        return CUDA_ERROR_NOT_SUPPORTED;
    }
}

SIMCUDA_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr) {
    API_ENTER();
    API_LOCKED(pointer_attribute(data, attribute, ptr));
}

static CUresult mem_info(size_t *free_bytes, size_t *total) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!free_bytes || !total) return CUDA_ERROR_INVALID_VALUE;
    *free_bytes = (size_t)(g_cfg.mem_bytes - g_dev[c->dev].used);
    *total = (size_t)g_cfg.mem_bytes;
    return CUDA_SUCCESS;
}

void mem_ctx_teardown(struct ctx *c) {
    for (int d = 0; d < g_cfg.devices; d++) {
        struct rtab *heap = &g_dev[d].heap;
        size_t n = 0;
        struct alloc **doomed = malloc((heap->n + 1) * sizeof *doomed);
        if (!doomed) continue;
        for (size_t i = 0; i < heap->n; i++) {
            struct alloc *a = heap->v[i].obj;
            if (a->ctx == c) doomed[n++] = a;
        }
        for (size_t i = 0; i < n; i++) {
            struct alloc *a = doomed[i];
            switch (a->kind) {
            case AK_ASYNC: pool_drop_alloc(a); heap_release(a); break;
            case AK_MANAGED: managed_release(a); break;
            case AK_ARRAY: array_dead(a->owner); heap_release(a); break;
            default: heap_release(a); break;
            }
        }
        free(doomed);
    }
}

SIMCUDA_API CUresult cuMemGetInfo_v2(size_t *free, size_t *total) {
    API_ENTER();
    API_LOCKED(mem_info(free, total));
}

SIMCUDA_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize) {
    API_ENTER();
    API_LOCKED(mem_alloc_locked(dptr, bytesize, AK_DEVICE));
}

SIMCUDA_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                        size_t Height, unsigned int ElementSizeBytes) {
    API_ENTER();
    API_LOCKED(alloc_pitch(dptr, pPitch, WidthInBytes, Height, ElementSizeBytes));
}

SIMCUDA_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags) {
    API_ENTER();
    API_LOCKED(alloc_managed(dptr, bytesize, flags));
}

SIMCUDA_API CUresult cuMemFree_v2(CUdeviceptr dptr) {
    API_ENTER();
    API_LOCKED(mem_free_locked(dptr));
}

SIMCUDA_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr) {
    API_ENTER();
    API_LOCKED(address_range(pbase, psize, dptr));
}
