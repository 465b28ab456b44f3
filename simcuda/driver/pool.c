/*
 * pool.c: stream-ordered allocation (cuMemAllocAsync and friends) and memory pools.
 *
 * A pool takes blocks from its device's heap. A freed block stays reserved in the pool's cache
 * and is handed out again to the next request of exactly the same block size; at every
 * synchronisation (stream, event, context) each pool of the device gives cached blocks back to
 * the heap until it holds no more than its release threshold (default 0). When the heap cannot
 * satisfy a request, all cached blocks of the device are released and the request retried.
 * "used" counts blocks handed out, "reserved" adds the cached ones.
 *
 * Under stream capture an allocation creates no memory: it adds an allocation node to the graph
 * and returns the node's fixed address in the graph range, which each launch of the graph
 * allocates (graph.c); a free under capture adds a free node.
 *
 * Sharing (same process only, like IPC): a pool created with POSIX file descriptor handles is
 * exported into a memfd; importing that descriptor gives a second pool handle that allocates
 * nothing and imports the exporter's pointers. cuMemPoolImportPointer maps a live allocation at
 * an alias address (vmm.c), reference-counted, freed by cuMemFree or cuMemFreeAsync.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static void pool_init(struct pool *p, int dev) {
    p->dev = dev;
    for (int i = 0; i < 3; i++) p->reuse[i] = 1;
    p->access[dev] = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    p->props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p->props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p->props.location.id = dev;
}

struct pool *pool_new_default(int dev) {
    struct pool *p = obj_new(HK_POOL, sizeof *p);
    if (!p) return NULL;
    pool_init(p, dev);
    p->is_default = true;
    return p;
}

static void note_highs(struct pool *p) {
    if (p->used > p->used_high) p->used_high = p->used;
    if (p->reserved > p->reserved_high) p->reserved_high = p->reserved;
}

/* Gives cached blocks back to the heap, newest first, until at most `keep` bytes are reserved. */
static void pool_trim(struct pool *p, uint64_t keep) {
    while (p->reserved > keep && p->ncache > 0) {
        struct alloc *a = p->cache[--p->ncache];
        p->reserved -= a->block;
        heap_release(a);
    }
}

void pools_sync(int dev) {
    for (size_t i = 0; i < obj_count(HK_POOL); i++) {
        struct pool *p = obj_at(HK_POOL, i);
        if (p->dev == dev) pool_trim(p, p->threshold);
    }
}

void pools_release_cached(int dev) {
    for (size_t i = 0; i < obj_count(HK_POOL); i++) {
        struct pool *p = obj_at(HK_POOL, i);
        if (p->dev == dev) pool_trim(p, 0);
    }
}

static void cache_remove(struct pool *p, size_t i) {
    memmove(&p->cache[i], &p->cache[i + 1], (p->ncache - i - 1) * sizeof p->cache[0]);
    p->ncache--;
}

CUresult pool_alloc_locked(struct pool *p, struct ctx *c, size_t size, uint64_t *out) {
    uint64_t block = round_up(size, HEAP_ALIGN);
    for (size_t i = 0; i < p->ncache; i++) {
        struct alloc *a = p->cache[i];
        if (a->block != block) continue;
        cache_remove(p, i);
        a->cached = false;
        a->size = size;
        a->ctx = c;
        p->used += block;
        note_highs(p);
        *out = a->addr;
        return CUDA_SUCCESS;
    }
    if (p->props.maxSize) {
        if (p->reserved + block > p->props.maxSize && block <= p->props.maxSize)
            pool_trim(p, p->props.maxSize - block);
        if (p->reserved + block > p->props.maxSize) return CUDA_ERROR_OUT_OF_MEMORY;
    }
    struct alloc *a;
    CUresult r = heap_alloc(p->dev, size, HEAP_ALIGN, AK_ASYNC, c, &a);
    if (r == CUDA_ERROR_OUT_OF_MEMORY) {
        pools_release_cached(p->dev);
        r = heap_alloc(p->dev, size, HEAP_ALIGN, AK_ASYNC, c, &a);
    }
    if (r != CUDA_SUCCESS) return r;
    a->pool = p;
    p->used += block;
    p->reserved += block;
    note_highs(p);
    *out = a->addr;
    return CUDA_SUCCESS;
}

void pool_free_alloc(struct alloc *a) {
    struct pool *p = a->pool;
    p->used -= a->block;
    if (p->destroyed) {
        p->reserved -= a->block;
        heap_release(a);
        return;
    }
    if (p->ncache == p->capcache) {
        size_t cap = p->capcache ? p->capcache * 2 : 16;
        struct alloc **v = realloc(p->cache, cap * sizeof *v);
        if (!v) { /* cannot cache it: release it at once */
            p->reserved -= a->block;
            heap_release(a);
            return;
        }
        p->cache = v;
        p->capcache = cap;
    }
    a->cached = true;
    p->cache[p->ncache++] = a;
}

void pool_drop_alloc(struct alloc *a) {
    struct pool *p = a->pool;
    if (a->cached) {
        for (size_t i = 0; i < p->ncache; i++)
            if (p->cache[i] == a) {
                cache_remove(p, i);
                break;
            }
    } else {
        p->used -= a->block;
    }
    p->reserved -= a->block;
}

/* ---- stream-ordered allocation ------------------------------------------------------------ */

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool handle, bool from_pool,
                            CUstream s, bool ptsz) {
    struct sref ref;
    CUresult r = stream_ref(s, ptsz, &ref);
    if (r != CUDA_SUCCESS) return r;
    if (!dptr || size == 0) return CUDA_ERROR_INVALID_VALUE;
    struct pool *p = g_dev[ref.ctx->dev].current_pool;
    if (from_pool) {
        p = obj_get(HK_POOL, (uint64_t)(uintptr_t)handle);
        /* Imported pools make no allocations of their own. */
        if (!p || p->imported_from) return CUDA_ERROR_INVALID_VALUE;
    }
    if (ref.capturing) return stream_capture_alloc(&ref, size, dptr);
    uint64_t addr;
    r = pool_alloc_locked(p, ref.ctx, size, &addr);
    if (r == CUDA_SUCCESS) *dptr = addr;
    return r;
}

static CUresult free_async(CUdeviceptr dptr, CUstream s, bool ptsz) {
    struct sref ref;
    CUresult r = stream_ref(s, ptsz, &ref);
    if (r != CUDA_SUCCESS) return r;
    if (ref.capturing)
        return stream_capture_free(&ref, dptr) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    return mem_free_ptr(dptr);
}

SIMCUDA_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    API_ENTER();
    API_LOCKED(alloc_async(dptr, bytesize, NULL, false, hStream, false));
}

SIMCUDA_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream) {
    API_ENTER();
    API_LOCKED(alloc_async(dptr, bytesize, NULL, false, hStream, true));
}

SIMCUDA_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream hStream) {
    API_ENTER();
    API_LOCKED(alloc_async(dptr, bytesize, pool, true, hStream, false));
}

SIMCUDA_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                  CUmemoryPool pool, CUstream hStream) {
    API_ENTER();
    API_LOCKED(alloc_async(dptr, bytesize, pool, true, hStream, true));
}

SIMCUDA_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
    API_ENTER();
    API_LOCKED(free_async(dptr, hStream, false));
}

SIMCUDA_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
    API_ENTER();
    API_LOCKED(free_async(dptr, hStream, true));
}

/* ---- pools -------------------------------------------------------------------------------- */

static CUresult device_pool(CUmemoryPool *out, CUdevice dev, bool current) {
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    if (dev_check(dev) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
    struct pool *p = current ? g_dev[dev].current_pool : g_dev[dev].default_pool;
    *out = (CUmemoryPool)(uintptr_t)H(p);
    return CUDA_SUCCESS;
}

static CUresult set_device_pool(CUdevice dev, CUmemoryPool handle) {
    if (dev_check(dev) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
    struct pool *p = obj_get(HK_POOL, (uint64_t)(uintptr_t)handle);
    if (!p || p->dev != dev || p->imported_from) return CUDA_ERROR_INVALID_VALUE;
    g_dev[dev].current_pool = p;
    return CUDA_SUCCESS;
}

static CUresult pool_create(CUmemoryPool *out, const CUmemPoolProps *props) {
    if (!out || !props || props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED)
        return CUDA_ERROR_INVALID_VALUE;
    if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        dev_check(props->location.id) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    if (props->handleTypes & ~(unsigned)CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
        return CUDA_ERROR_NOT_SUPPORTED;
    struct pool *p = obj_new(HK_POOL, sizeof *p);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    pool_init(p, props->location.id);
    p->props = *props;
    *out = (CUmemoryPool)(uintptr_t)H(p);
    return CUDA_SUCCESS;
}

/* Outstanding allocations keep working; each returns its block to the heap when freed. */
static CUresult pool_destroy(CUmemoryPool handle) {
    struct pool *p = obj_get(HK_POOL, (uint64_t)(uintptr_t)handle);
    if (!p || p->is_default) return CUDA_ERROR_INVALID_VALUE;
    pool_trim(p, 0);
    p->destroyed = true;
    p->h.alive = false;
    if (g_dev[p->dev].current_pool == p) g_dev[p->dev].current_pool = g_dev[p->dev].default_pool;
    return CUDA_SUCCESS;
}

static CUresult pool_attribute(CUmemoryPool handle, CUmemPool_attribute attr, void *value,
                               bool set) {
    struct pool *p = obj_get(HK_POOL, (uint64_t)(uintptr_t)handle);
    if (!p || !value) return CUDA_ERROR_INVALID_VALUE;
    cuuint64_t *v64 = value;
    switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
        if (set)
            p->reuse[attr - 1] = *(int *)value != 0;
        else
            *(int *)value = p->reuse[attr - 1];
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
        if (set)
            p->threshold = *v64;
        else
            *v64 = p->threshold;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
        if (set) return CUDA_ERROR_INVALID_VALUE;
        *v64 = attr == CU_MEMPOOL_ATTR_USED_MEM_CURRENT ? p->used : p->reserved;
        return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH: {
        bool used = attr == CU_MEMPOOL_ATTR_USED_MEM_HIGH;
        if (!set) {
            *v64 = used ? p->used_high : p->reserved_high;
            return CUDA_SUCCESS;
        }
        if (*v64 != 0) return CUDA_ERROR_INVALID_VALUE; /* only a reset to the current value */
        if (used)
            p->used_high = p->used;
        else
            p->reserved_high = p->reserved;
        return CUDA_SUCCESS;
    }
    default:
        return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult pool_trim_to(CUmemoryPool handle, size_t keep) {
    struct pool *p = obj_get(HK_POOL, (uint64_t)(uintptr_t)handle);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    pool_trim(p, keep);
    return CUDA_SUCCESS;
}

static CUresult pool_set_access(CUmemoryPool handle, const CUmemAccessDesc *map, size_t count) {
    struct pool *p = obj_get(HK_POOL, (uint64_t)(uintptr_t)handle);
    if (!p || (count && !map)) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++) {
        const CUmemAccessDesc *d = &map[i];
        if (d->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
            dev_check(d->location.id) != CUDA_SUCCESS)
            return CUDA_ERROR_INVALID_VALUE;
        if (d->flags != CU_MEM_ACCESS_FLAGS_PROT_NONE && d->flags != CU_MEM_ACCESS_FLAGS_PROT_READ &&
            d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
        if (d->location.id == p->dev && d->flags != CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return CUDA_ERROR_INVALID_VALUE;
    }
    for (size_t i = 0; i < count; i++) p->access[map[i].location.id] = map[i].flags;
    return CUDA_SUCCESS;
}

static CUresult pool_get_access(CUmemAccess_flags *flags, CUmemoryPool handle,
                                CUmemLocation *location) {
    struct pool *p = obj_get(HK_POOL, (uint64_t)(uintptr_t)handle);
    if (!p || !flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE ||
        dev_check(location->id) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    *flags = p->access[location->id];
    return CUDA_SUCCESS;
}

/* ---- sharing pools and their allocations -------------------------------------------------- */

static const char pool_magic[8] = {'S', 'I', 'M', 'C', 'U', 'P', 'O', 'L'};
static const char ptr_magic[8] = {'S', 'I', 'M', 'C', 'U', 'P', 'T', 'R'};

struct pool_payload {
    char magic[8];
    int32_t pid;
    uint64_t pool;   /* the exporting pool's handle */
    uint64_t addr;   /* pointer exports: the allocation */
    uint64_t serial;
};
_Static_assert(sizeof(struct pool_payload) <= sizeof(CUmemPoolPtrExportData),
               "pointer export must fit its 64 bytes");

static bool shareable(const struct pool *p) {
    return p->props.handleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
}

static CUresult pool_export(void *out, CUmemoryPool handle, CUmemAllocationHandleType type,
                            unsigned long long flags) {
    struct pool *p = obj_get(HK_POOL, (uint64_t)(uintptr_t)handle);
    if (!out || !p || flags != 0 || p->imported_from) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
    if (!shareable(p)) return CUDA_ERROR_INVALID_VALUE;
    struct pool_payload s = {.pid = (int32_t)getpid(), .pool = H(p)};
    memcpy(s.magic, pool_magic, sizeof s.magic);
    int fd = share_fd_write("simcuda-pool", &s, sizeof s);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    *(int *)out = fd;
    return CUDA_SUCCESS;
}

/* Same process only: a new pool handle standing for the exporter's, which makes no
 * allocations and can import the exporter's pointers. */
static CUresult pool_import(CUmemoryPool *out, void *os_handle, CUmemAllocationHandleType type,
                            unsigned long long flags) {
    if (!out || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
    struct pool_payload s;
    if (!share_fd_read(os_handle, &s, sizeof s, pool_magic)) return CUDA_ERROR_INVALID_VALUE;
    if (s.pid != (int32_t)getpid()) return CUDA_ERROR_NOT_SUPPORTED;
    struct pool *src = obj_get(HK_POOL, s.pool);
    if (!src) return CUDA_ERROR_INVALID_VALUE;
    struct pool *p = obj_new(HK_POOL, sizeof *p);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    pool_init(p, src->dev);
    p->props = src->props;
    p->imported_from = src;
    *out = (CUmemoryPool)(uintptr_t)H(p);
    return CUDA_SUCCESS;
}

static CUresult pointer_export(CUmemPoolPtrExportData *out, CUdeviceptr ptr) {
    struct alloc *a = heap_find(ptr);
    if (!out || !a || a->addr != ptr || a->kind != AK_ASYNC || a->cached || !shareable(a->pool))
        return CUDA_ERROR_INVALID_VALUE;
    struct pool_payload s = {.pid = (int32_t)getpid(), .pool = H(a->pool), .addr = a->addr,
                             .serial = a->serial};
    memcpy(s.magic, ptr_magic, sizeof s.magic);
    memset(out, 0, sizeof *out);
    memcpy(out->reserved, &s, sizeof s);
    return CUDA_SUCCESS;
}

static CUresult pointer_import(CUdeviceptr *out, CUmemoryPool handle, const CUmemPoolPtrExportData *data) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    struct pool *p = obj_get(HK_POOL, (uint64_t)(uintptr_t)handle);
    if (!out || !data || !p || !p->imported_from) return CUDA_ERROR_INVALID_VALUE;
    struct pool_payload s;
    memcpy(&s, data->reserved, sizeof s);
    if (memcmp(s.magic, ptr_magic, sizeof s.magic) != 0) return CUDA_ERROR_INVALID_VALUE;
    if (s.pid != (int32_t)getpid()) return CUDA_ERROR_NOT_SUPPORTED;
    struct alloc *a = heap_find(s.addr);
    if (s.pool != H(p->imported_from) || !a || a->addr != s.addr || a->serial != s.serial ||
        a->pool != p->imported_from)
        return CUDA_ERROR_INVALID_VALUE;
    return ipc_alias_pool(a, c, out);
}

SIMCUDA_API CUresult cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
                                                      CUmemAllocationHandleType handleType,
                                                      unsigned long long flags) {
    API_ENTER();
    API_LOCKED(pool_export(handle_out, pool, handleType, flags));
}

SIMCUDA_API CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
                                                        CUmemAllocationHandleType handleType,
                                                        unsigned long long flags) {
    API_ENTER();
    API_LOCKED(pool_import(pool_out, handle, handleType, flags));
}

SIMCUDA_API CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr) {
    API_ENTER();
    API_LOCKED(pointer_export(shareData_out, ptr));
}

SIMCUDA_API CUresult cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool,
                                            CUmemPoolPtrExportData *shareData) {
    API_ENTER();
    API_LOCKED(pointer_import(ptr_out, pool, shareData));
}

SIMCUDA_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev) {
    API_ENTER();
    API_LOCKED(device_pool(pool_out, dev, false));
}

SIMCUDA_API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev) {
    API_ENTER();
    API_LOCKED(device_pool(pool, dev, true));
}

SIMCUDA_API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
    API_ENTER();
    API_LOCKED(set_device_pool(dev, pool));
}

SIMCUDA_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps) {
    API_ENTER();
    API_LOCKED(pool_create(pool, poolProps));
}

SIMCUDA_API CUresult cuMemPoolDestroy(CUmemoryPool pool) {
    API_ENTER();
    API_LOCKED(pool_destroy(pool));
}

SIMCUDA_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                           void *value) {
    API_ENTER();
    API_LOCKED(pool_attribute(pool, attr, value, false));
}

SIMCUDA_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                           void *value) {
    API_ENTER();
    API_LOCKED(pool_attribute(pool, attr, value, true));
}

SIMCUDA_API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
    API_ENTER();
    API_LOCKED(pool_trim_to(pool, minBytesToKeep));
}

SIMCUDA_API CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map,
                                        size_t count) {
    API_ENTER();
    API_LOCKED(pool_set_access(pool, map, count));
}

SIMCUDA_API CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool,
                                        CUmemLocation *location) {
    API_ENTER();
    API_LOCKED(pool_get_access(flags, memPool, location));
}
