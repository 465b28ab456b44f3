/*
 * vmm.c: virtual memory management (cuMemAddressReserve / cuMemCreate / cuMemMap ...), shareable
 * handles and multicast objects (IPC memory handles and external memory: ipc.c).
 *
 * A physical allocation (cuMemCreate) is a block of its device's heap, so it counts against
 * device memory. Mapping it into a reserved range makes copies to that range reach its bytes;
 * two ranges mapped to one handle alias. The memory is freed only when the handle has been
 * released (every cuMemCreate / cuMemRetainAllocationHandle matched by cuMemRelease) and no
 * mapping of it remains. cuMemAddressFree of a range that still has mappings fails.
 *
 * Shareable handles: cuMemExportToShareableHandle (POSIX file descriptors only) writes the
 * handle into a memfd; cuMemImportFromShareableHandle of such a descriptor in the same process
 * gives a new handle to the same memory, which holds one reference of the exported handle
 * until it is released and unmapped (descriptors from another process: NOT_SUPPORTED; the
 * descriptor itself holds no reference, unlike the real driver's).
 *
 * Multicast objects (cuMulticastCreate) are handles of their own, released by cuMemRelease and
 * mappable like physical memory; they have no memory behind them here, so copies to a
 * multicast mapping fail. Adding devices and binding memory only check their arguments.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* memfd_create, for the scripts that build the driver by hand */
#endif
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

struct phys {
    struct hdr h;        /* alive while the handle is held (refs > 0) */
    struct alloc *mem;   /* NULL once freed */
    uint64_t size;
    int refs;
    int mappings;
    CUmemAllocationProp prop;
    struct phys *target; /* an imported handle: the allocation it refers to (one of its refs) */
    bool multicast;      /* a multicast object: no memory of its own */
};

struct mapping {
    struct phys *phys;
    uint64_t offset;
    CUmemAccess_flags access[SIM_MAX_DEVICES];
};

static struct rtab reservations; /* obj unused */
static struct rtab mappings;     /* struct mapping */

static bool granular(uint64_t v) { return v % VMM_GRANULARITY == 0; }

static bool valid_prop(const CUmemAllocationProp *prop) {
    return prop && prop->type == CU_MEM_ALLOCATION_TYPE_PINNED &&
           prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
           dev_check(prop->location.id) == CUDA_SUCCESS;
}

static void phys_maybe_free(struct phys *p) {
    if (p->refs != 0 || p->mappings != 0) return;
    if (p->target) {
        struct phys *t = p->target;
        p->target = NULL;
        p->mem = NULL;
        if (--t->refs == 0) t->h.alive = false;
        phys_maybe_free(t);
    } else if (p->mem) {
        heap_release(p->mem);
        p->mem = NULL;
    }
}

CUresult vmm_xlate(uint64_t addr, size_t n, bool write, char **host, size_t *contig) {
    struct range *r = rtab_find(&mappings, addr);
    if (!r) return CUDA_ERROR_INVALID_VALUE;
    struct mapping *m = r->obj;
    if (!m->phys->mem) return CUDA_ERROR_INVALID_VALUE; /* a multicast mapping */
    CUmemAccess_flags need = write ? CU_MEM_ACCESS_FLAGS_PROT_READWRITE : CU_MEM_ACCESS_FLAGS_PROT_READ;
    bool allowed = false;
    for (int d = 0; d < g_cfg.devices; d++)
        if ((m->access[d] & need) == need) allowed = true;
    if (!allowed) return CUDA_ERROR_INVALID_VALUE;
    uint64_t avail = r->addr + r->size - addr;
    *host = heap_host(m->phys->mem) + m->offset + (addr - r->addr);
    *contig = n < avail ? n : (size_t)avail;
    return CUDA_SUCCESS;
}

static CUresult granularity(size_t *out, const CUmemAllocationProp *prop,
                            CUmemAllocationGranularity_flags option) {
    if (!out || !valid_prop(prop)) return CUDA_ERROR_INVALID_VALUE;
    if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM && option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED)
        return CUDA_ERROR_INVALID_VALUE;
    *out = VMM_GRANULARITY;
    return CUDA_SUCCESS;
}

static CUresult address_reserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr hint,
                                unsigned long long flags) {
    if (!ptr || flags != 0 || size == 0 || !granular(size)) return CUDA_ERROR_INVALID_VALUE;
    if (alignment & (alignment - 1)) return CUDA_ERROR_INVALID_VALUE;
    uint64_t align = alignment > VMM_GRANULARITY ? alignment : VMM_GRANULARITY, addr;
    bool hint_fits = hint && hint % align == 0 && hint >= VMM_BASE &&
                     hint + size <= VMM_BASE + VMM_SPAN && !rtab_overlaps(&reservations, hint, size);
    if (hint_fits)
        addr = hint;
    else if (!rtab_first_fit(&reservations, VMM_BASE, VMM_BASE + VMM_SPAN, size, align, &addr))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (!rtab_insert(&reservations, addr, size, NULL)) return CUDA_ERROR_OUT_OF_MEMORY;
    *ptr = addr;
    return CUDA_SUCCESS;
}

static CUresult address_free(CUdeviceptr ptr, size_t size) {
    struct range *r = rtab_exact(&reservations, ptr);
    if (!r || r->size != size) return CUDA_ERROR_INVALID_VALUE;
    if (rtab_overlaps(&mappings, ptr, size)) return CUDA_ERROR_INVALID_VALUE;
    rtab_remove(&reservations, ptr);
    return CUDA_SUCCESS;
}

static CUresult mem_create(CUmemGenericAllocationHandle *handle, size_t size,
                           const CUmemAllocationProp *prop, unsigned long long flags) {
    if (!handle || !valid_prop(prop) || flags != 0 || size == 0 || !granular(size))
        return CUDA_ERROR_INVALID_VALUE;
    struct alloc *a;
    CUresult r = heap_alloc(prop->location.id, size, HEAP_ALIGN, AK_PHYS, NULL, &a);
    if (r != CUDA_SUCCESS) return r;
    struct phys *p = obj_new(HK_PHYS, sizeof *p);
    if (!p) {
        heap_release(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    p->mem = a;
    p->size = size;
    p->refs = 1;
    p->prop = *prop;
    a->owner = p;
    *handle = H(p);
    return CUDA_SUCCESS;
}

static CUresult mem_release(CUmemGenericAllocationHandle handle) {
    struct phys *p = obj_get(HK_PHYS, handle);
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    if (--p->refs == 0) p->h.alive = false;
    phys_maybe_free(p);
    return CUDA_SUCCESS;
}

static CUresult mem_map(CUdeviceptr ptr, size_t size, size_t offset,
                        CUmemGenericAllocationHandle handle, unsigned long long flags) {
    struct phys *p = obj_get(HK_PHYS, handle);
    if (!p || flags != 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
    if (!granular(ptr) || !granular(size) || !granular(offset) || offset > p->size ||
        size > p->size - offset)
        return CUDA_ERROR_INVALID_VALUE;
    struct range *resv = rtab_find(&reservations, ptr);
    if (!resv || ptr + size > resv->addr + resv->size) return CUDA_ERROR_INVALID_VALUE;
    if (rtab_overlaps(&mappings, ptr, size)) return CUDA_ERROR_INVALID_VALUE;
    struct mapping *m = calloc(1, sizeof *m);
    if (!m || !rtab_insert(&mappings, ptr, size, m)) {
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->phys = p;
    m->offset = offset;
    p->mappings++;
    return CUDA_SUCCESS;
}

/* Every mapping overlapping [ptr, ptr + size) must lie wholly inside it; at least one must. */
static CUresult mapped_span(CUdeviceptr ptr, size_t size, bool gapless, size_t *first, size_t *last) {
    if (size == 0 || ptr + size < ptr) return CUDA_ERROR_INVALID_VALUE;
    size_t i = 0;
    while (i < mappings.n && mappings.v[i].addr + mappings.v[i].size <= ptr) i++;
    *first = i;
    uint64_t expect = ptr;
    for (; i < mappings.n && mappings.v[i].addr < ptr + size; i++) {
        struct range *r = &mappings.v[i];
        if (r->addr < ptr || r->addr + r->size > ptr + size) return CUDA_ERROR_INVALID_VALUE;
        if (gapless && r->addr != expect) return CUDA_ERROR_INVALID_VALUE;
        expect = r->addr + r->size;
    }
    *last = i;
    if (*last == *first || (gapless && expect != ptr + size)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult mem_unmap(CUdeviceptr ptr, size_t size) {
    size_t first, last;
    CUresult r = mapped_span(ptr, size, false, &first, &last);
    if (r != CUDA_SUCCESS) return r;
    while (last-- > first) {
        struct range *rg = &mappings.v[first];
        struct mapping *m = rg->obj;
        rtab_remove(&mappings, rg->addr);
        m->phys->mappings--;
        phys_maybe_free(m->phys);
        free(m);
    }
    return CUDA_SUCCESS;
}

static bool valid_access(const CUmemAccessDesc *d) {
    return d->location.type == CU_MEM_LOCATION_TYPE_DEVICE &&
           dev_check(d->location.id) == CUDA_SUCCESS &&
           (d->flags == CU_MEM_ACCESS_FLAGS_PROT_NONE || d->flags == CU_MEM_ACCESS_FLAGS_PROT_READ ||
            d->flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
}

static CUresult set_access(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
    if (!desc || count == 0) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < count; i++)
        if (!valid_access(&desc[i])) return CUDA_ERROR_INVALID_VALUE;
    size_t first, last;
    CUresult r = mapped_span(ptr, size, true, &first, &last);
    if (r != CUDA_SUCCESS) return r;
    for (size_t i = first; i < last; i++) {
        struct mapping *m = mappings.v[i].obj;
        for (size_t j = 0; j < count; j++) m->access[desc[j].location.id] = desc[j].flags;
    }
    return CUDA_SUCCESS;
}

static CUresult get_access(unsigned long long *flags, const CUmemLocation *location, CUdeviceptr ptr) {
    if (!flags || !location || location->type != CU_MEM_LOCATION_TYPE_DEVICE ||
        dev_check(location->id) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    struct range *r = rtab_find(&mappings, ptr);
    if (!r) return CUDA_ERROR_INVALID_VALUE;
    *flags = ((struct mapping *)r->obj)->access[location->id];
    return CUDA_SUCCESS;
}

static CUresult properties(CUmemAllocationProp *prop, CUmemGenericAllocationHandle handle) {
    struct phys *p = obj_get(HK_PHYS, handle);
    if (!prop || !p) return CUDA_ERROR_INVALID_VALUE;
    *prop = p->prop;
    return CUDA_SUCCESS;
}

static CUresult retain_handle(CUmemGenericAllocationHandle *handle, void *addr) {
    struct range *r = rtab_find(&mappings, (uint64_t)(uintptr_t)addr);
    if (!handle || !r) return CUDA_ERROR_INVALID_VALUE;
    struct phys *p = ((struct mapping *)r->obj)->phys;
    p->refs++;
    p->h.alive = true;
    *handle = H(p);
    return CUDA_SUCCESS;
}

static const char share_magic[8] = {'S', 'I', 'M', 'C', 'U', 'V', 'M', 'M'};

struct share_payload {
    char magic[8];
    int32_t pid;
    uint64_t handle;
};

static CUresult export_handle(void *out, CUmemGenericAllocationHandle handle,
                              CUmemAllocationHandleType type, unsigned long long flags) {
    struct phys *p = obj_get(HK_PHYS, handle);
    if (!out || !p || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
    if (!(p->prop.requestedHandleTypes & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
        return CUDA_ERROR_INVALID_VALUE;
    while (p->target) p = p->target;
    struct share_payload s = {.pid = (int32_t)getpid(), .handle = H(p)};
    memcpy(s.magic, share_magic, sizeof s.magic);
    int fd = share_fd_write("simcuda-vmm", &s, sizeof s);
    if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    *(int *)out = fd;
    return CUDA_SUCCESS;
}

int share_fd_write(const char *name, const void *payload, size_t n) {
    int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) return -1;
    if (pwrite(fd, payload, n, 0) != (ssize_t)n) {
        close(fd);
        return -1;
    }
    return fd;
}

bool share_fd_read(void *os_handle, void *payload, size_t n, const char magic[8]) {
    int fd = (int)(intptr_t)os_handle;
    return pread(fd, payload, n, 0) == (ssize_t)n && memcmp(payload, magic, 8) == 0;
}

static CUresult import_handle(CUmemGenericAllocationHandle *handle, void *os_handle,
                              CUmemAllocationHandleType type) {
    if (!handle) return CUDA_ERROR_INVALID_VALUE;
    if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
    struct share_payload s;
    if (!share_fd_read(os_handle, &s, sizeof s, share_magic)) return CUDA_ERROR_INVALID_VALUE;
    if (s.pid != (int32_t)getpid()) return CUDA_ERROR_NOT_SUPPORTED;
    struct phys *t = obj_get(HK_PHYS, s.handle);
    if (!t || !t->mem) return CUDA_ERROR_INVALID_VALUE;
    struct phys *p = obj_new(HK_PHYS, sizeof *p);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    p->mem = t->mem;
    p->size = t->size;
    p->prop = t->prop;
    p->refs = 1;
    p->target = t;
    t->refs++;
    *handle = H(p);
    return CUDA_SUCCESS;
}

static bool valid_mc_prop(const CUmulticastObjectProp *prop) {
    return prop && prop->numDevices >= 1 && (int)prop->numDevices <= g_cfg.devices && prop->size > 0 &&
           granular(prop->size) && prop->flags == 0;
}

static CUresult mc_create(CUmemGenericAllocationHandle *handle, const CUmulticastObjectProp *prop) {
    if (!handle || !valid_mc_prop(prop)) return CUDA_ERROR_INVALID_VALUE;
    struct phys *p = obj_new(HK_PHYS, sizeof *p);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    p->size = prop->size;
    p->refs = 1;
    p->multicast = true;
    p->prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p->prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p->prop.requestedHandleTypes = (CUmemAllocationHandleType)prop->handleTypes;
    *handle = H(p);
    return CUDA_SUCCESS;
}

static struct phys *mc_get(CUmemGenericAllocationHandle handle) {
    struct phys *p = obj_get(HK_PHYS, handle);
    return p && p->multicast ? p : NULL;
}

static CUresult mc_bind(CUmemGenericAllocationHandle mc, size_t mc_offset,
                        CUmemGenericAllocationHandle mem, size_t mem_offset, size_t size,
                        unsigned long long flags) {
    struct phys *m = mc_get(mc), *p = obj_get(HK_PHYS, mem);
    if (!m || !p || p->multicast || flags != 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
    if (mc_offset > m->size || size > m->size - mc_offset || mem_offset > p->size ||
        size > p->size - mem_offset)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

static CUresult mc_unbind(CUmemGenericAllocationHandle mc, CUdevice dev, size_t offset, size_t size) {
    struct phys *m = mc_get(mc);
    if (!m || dev_check(dev) != CUDA_SUCCESS || offset > m->size || size > m->size - offset)
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuMemExportToShareableHandle(void *shareableHandle,
                                                  CUmemGenericAllocationHandle handle,
                                                  CUmemAllocationHandleType handleType,
                                                  unsigned long long flags) {
    API_ENTER();
    API_LOCKED(export_handle(shareableHandle, handle, handleType, flags));
}

SIMCUDA_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
                                                    void *osHandle,
                                                    CUmemAllocationHandleType shHandleType) {
    API_ENTER();
    API_LOCKED(import_handle(handle, osHandle, shHandleType));
}

SIMCUDA_API CUresult cuMulticastCreate(CUmemGenericAllocationHandle *mcHandle,
                                       const CUmulticastObjectProp *prop) {
    API_ENTER();
    API_LOCKED(mc_create(mcHandle, prop));
}

SIMCUDA_API CUresult cuMulticastGetGranularity(size_t *granularity, const CUmulticastObjectProp *prop,
                                               CUmulticastGranularity_flags option) {
    API_ENTER();
    if (!granularity || !valid_mc_prop(prop) ||
        (option != CU_MULTICAST_GRANULARITY_MINIMUM && option != CU_MULTICAST_GRANULARITY_RECOMMENDED))
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = VMM_GRANULARITY;
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuMulticastAddDevice(CUmemGenericAllocationHandle mcHandle, CUdevice dev) {
    API_ENTER();
    API_LOCKED(mc_get(mcHandle) && dev_check(dev) == CUDA_SUCCESS ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE);
}

SIMCUDA_API CUresult cuMulticastBindMem(CUmemGenericAllocationHandle mcHandle, size_t mcOffset,
                                        CUmemGenericAllocationHandle memHandle, size_t memOffset,
                                        size_t size, unsigned long long flags) {
    API_ENTER();
    API_LOCKED(mc_bind(mcHandle, mcOffset, memHandle, memOffset, size, flags));
}

SIMCUDA_API CUresult cuMulticastUnbind(CUmemGenericAllocationHandle mcHandle, CUdevice dev,
                                       size_t mcOffset, size_t size) {
    API_ENTER();
    API_LOCKED(mc_unbind(mcHandle, dev, mcOffset, size));
}

SIMCUDA_API CUresult cuMemGetAllocationGranularity(size_t *granularity_out,
                                                   const CUmemAllocationProp *prop,
                                                   CUmemAllocationGranularity_flags option) {
    API_ENTER();
    API_LOCKED(granularity(granularity_out, prop, option));
}

SIMCUDA_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                         CUdeviceptr addr, unsigned long long flags) {
    API_ENTER();
    API_LOCKED(address_reserve(ptr, size, alignment, addr, flags));
}

SIMCUDA_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
    API_ENTER();
    API_LOCKED(address_free(ptr, size));
}

SIMCUDA_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                 const CUmemAllocationProp *prop, unsigned long long flags) {
    API_ENTER();
    API_LOCKED(mem_create(handle, size, prop, flags));
}

SIMCUDA_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
    API_ENTER();
    API_LOCKED(mem_release(handle));
}

SIMCUDA_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                              CUmemGenericAllocationHandle handle, unsigned long long flags) {
    API_ENTER();
    API_LOCKED(mem_map(ptr, size, offset, handle, flags));
}

SIMCUDA_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
    API_ENTER();
    API_LOCKED(mem_unmap(ptr, size));
}

SIMCUDA_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                    size_t count) {
    API_ENTER();
    API_LOCKED(set_access(ptr, size, desc, count));
}

SIMCUDA_API CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
                                    CUdeviceptr ptr) {
    API_ENTER();
    API_LOCKED(get_access(flags, location, ptr));
}

SIMCUDA_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                            CUmemGenericAllocationHandle handle) {
    API_ENTER();
    API_LOCKED(properties(prop, handle));
}

SIMCUDA_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr) {
    API_ENTER();
    API_LOCKED(retain_handle(handle, addr));
}
