/*
 * ipc.c: IPC memory handles and external memory: another allocation's memory mapped at a
 * second address (an alias).
 *
 * IPC: cuIpcOpenMemHandle works on handles exported by the same process and maps the memory at
 * a second address (an alias), reference-counted per allocation; handles from another process
 * return CUDA_ERROR_NOT_SUPPORTED. cuMemPoolImportPointer (pool.c) maps a pool allocation the
 * same way; such an alias is freed by cuMemFree or cuMemFreeAsync, not closed.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

struct ipc_alias {
    struct alloc *target;
    uint64_t target_addr;
    uint64_t serial;
    int refs;
    struct ctx *ctx;
    bool pool;           /* cuMemPoolImportPointer's: freed by cuMemFree[Async], not closed */
    bool external;       /* a buffer mapped onto external memory: freed by cuMemFree, never
                            shared with another mapping; `length` bytes at `offset` of target */
    uint64_t offset, length;
};

static struct rtab ipc_aliases; /* struct ipc_alias */

/* ---- IPC memory handles ------------------------------------------------------------------- */

static const char ipc_magic[8] = {'S', 'I', 'M', 'C', 'U', 'I', 'P', 'C'};

struct ipc_payload {
    char magic[8];
    int32_t pid;
    int32_t dev;
    uint64_t addr;
    uint64_t size;
    uint64_t serial;
};
_Static_assert(sizeof(struct ipc_payload) <= CU_IPC_HANDLE_SIZE, "IPC payload must fit the handle");

static bool ipc_target_live(const struct ipc_alias *al) {
    struct alloc *a = heap_find(al->target_addr);
    if (a != al->target || a->addr != al->target_addr || a->serial != al->serial) return false;
    if (al->pool) return a->kind == AK_ASYNC && !a->cached;
    return a->kind == AK_DEVICE || a->kind == AK_PITCH;
}

/* The bytes an alias maps: a whole allocation, or an external buffer's part of one. */
static uint64_t alias_length(const struct ipc_alias *al) {
    return al->external ? al->length : al->target->size;
}

CUresult ipc_xlate(uint64_t addr, size_t n, char **host, size_t *contig) {
    struct range *r = rtab_find(&ipc_aliases, addr);
    if (!r || !ipc_target_live(r->obj)) return CUDA_ERROR_INVALID_VALUE;
    const struct ipc_alias *al = r->obj;
    uint64_t off = addr - r->addr, len = alias_length(al);
    if (n > len || off > len - n) return CUDA_ERROR_INVALID_VALUE;
    *host = heap_host(al->target) + (al->external ? al->offset : 0) + off;
    *contig = n;
    return CUDA_SUCCESS;
}

void ipc_ctx_teardown(struct ctx *c) {
    for (size_t i = 0; i < ipc_aliases.n;) {
        struct ipc_alias *al = ipc_aliases.v[i].obj;
        if (al->ctx == c) {
            rtab_remove(&ipc_aliases, ipc_aliases.v[i].addr);
            free(al);
        } else {
            i++;
        }
    }
}

static CUresult alias_open(const struct ipc_alias *probe, struct ctx *c, CUdeviceptr *pdptr);

static CUresult ipc_get(CUipcMemHandle *handle, CUdeviceptr dptr) {
    struct alloc *a = heap_find(dptr);
    if (!handle || !a || a->addr != dptr || (a->kind != AK_DEVICE && a->kind != AK_PITCH))
        return CUDA_ERROR_INVALID_VALUE;
    struct ipc_payload p = {.pid = (int32_t)getpid(), .dev = a->dev, .addr = a->addr,
                            .size = a->size, .serial = a->serial};
    memcpy(p.magic, ipc_magic, sizeof p.magic);
    memset(handle, 0, sizeof *handle);
    memcpy(handle->reserved, &p, sizeof p);
    return CUDA_SUCCESS;
}

static CUresult ipc_open(CUdeviceptr *pdptr, const CUipcMemHandle *handle, unsigned int flags) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!pdptr || (flags & ~(unsigned)CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS)) return CUDA_ERROR_INVALID_VALUE;
    struct ipc_payload p;
    memcpy(&p, handle->reserved, sizeof p);
    if (memcmp(p.magic, ipc_magic, sizeof p.magic) != 0) return CUDA_ERROR_INVALID_VALUE;
    if (p.pid != (int32_t)getpid()) return CUDA_ERROR_NOT_SUPPORTED;
    struct ipc_alias probe = {.target = heap_find(p.addr), .target_addr = p.addr, .serial = p.serial};
    if (!probe.target || !ipc_target_live(&probe)) return CUDA_ERROR_INVALID_VALUE;
    return alias_open(&probe, c, pdptr);
}

/* Maps probe's target at an alias address, or counts one more reference of the alias that
 * already maps it (of the same kind: IPC mapping or imported pool pointer). */
static CUresult alias_open(const struct ipc_alias *probe, struct ctx *c, CUdeviceptr *pdptr) {
    for (size_t i = 0; i < ipc_aliases.n; i++) {
        struct ipc_alias *al = ipc_aliases.v[i].obj;
        if (!probe->external && !al->external && al->serial == probe->serial &&
            al->pool == probe->pool && ipc_target_live(al)) {
            al->refs++;
            *pdptr = ipc_aliases.v[i].addr;
            return CUDA_SUCCESS;
        }
    }
    uint64_t addr;
    uint64_t span = probe->external ? round_up(probe->length, HEAP_ALIGN) : probe->target->block;
    if (!rtab_first_fit(&ipc_aliases, IPC_BASE, IPC_BASE + IPC_SPAN, span, HEAP_ALIGN, &addr))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct ipc_alias *al = malloc(sizeof *al);
    if (!al || !rtab_insert(&ipc_aliases, addr, span, al)) {
        free(al);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *al = *probe;
    al->refs = 1;
    al->ctx = c;
    *pdptr = addr;
    return CUDA_SUCCESS;
}

CUresult ipc_alias_pool(struct alloc *target, struct ctx *c, CUdeviceptr *out) {
    struct ipc_alias probe = {.target = target, .target_addr = target->addr, .serial = target->serial,
                              .pool = true};
    if (!ipc_target_live(&probe)) return CUDA_ERROR_INVALID_VALUE;
    return alias_open(&probe, c, out);
}

/* Drops one reference of the alias at dptr, if it is of the kind asked for (an IPC mapping;
 * or, `freed`, what cuMemFree frees: an imported pool pointer or an external buffer). */
static bool alias_close(CUdeviceptr dptr, bool freed) {
    struct range *r = rtab_exact(&ipc_aliases, dptr);
    if (!r) return false;
    const struct ipc_alias *found = r->obj;
    if ((found->pool || found->external) != freed) return false;
    struct ipc_alias *al = r->obj;
    if (--al->refs == 0) {
        rtab_remove(&ipc_aliases, dptr);
        free(al);
    }
    return true;
}

bool ipc_free_pool_alias(CUdeviceptr dptr) { return alias_close(dptr, true); }

bool ipc_address_range(uint64_t addr, uint64_t *base, uint64_t *size) {
    struct range *r = rtab_find(&ipc_aliases, addr);
    if (!r || !ipc_target_live(r->obj)) return false;
    uint64_t len = alias_length(r->obj);
    if (addr - r->addr >= len) return false;
    *base = r->addr;
    *size = len;
    return true;
}

static CUresult ipc_close(CUdeviceptr dptr) {
    return alias_close(dptr, false) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIMCUDA_API CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr) {
    API_ENTER();
    API_LOCKED(ipc_get(pHandle, dptr));
}

SIMCUDA_API CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                        unsigned int Flags) {
    API_ENTER();
    API_LOCKED(ipc_open(pdptr, &handle, Flags));
}

SIMCUDA_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                           unsigned int Flags) {
    API_ENTER();
    API_LOCKED(ipc_open(pdptr, &handle, Flags));
}

SIMCUDA_API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
    API_ENTER();
    API_LOCKED(ipc_close(dptr));
}

/* ---- external memory ---------------------------------------------------------------------- */

/* An imported external memory object: the simulator backs it with device memory of its own
 * (an opaque file descriptor carries no memory here); buffers mapped onto it are aliases of
 * parts of that memory, freed by cuMemFree. */
struct extmem {
    struct hdr h;
    uint64_t addr;   /* the backing allocation */
    uint64_t size;
};

static CUresult ext_import(CUexternalMemory *out, const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *desc) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!out || !desc || desc->size == 0 || (desc->flags & ~CUDA_EXTERNAL_MEMORY_DEDICATED))
        return CUDA_ERROR_INVALID_VALUE;
    if (desc->type != CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD) return CUDA_ERROR_NOT_SUPPORTED;
    if (desc->handle.fd < 0 || fcntl(desc->handle.fd, F_GETFD) < 0) return CUDA_ERROR_INVALID_VALUE;
    struct extmem *m = obj_new(HK_EXTMEM, sizeof *m);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    CUdeviceptr addr;
    r = mem_alloc_locked(&addr, desc->size, AK_DEVICE);
    if (r != CUDA_SUCCESS) {
        m->h.alive = false;
        return r;
    }
    m->addr = addr;
    m->size = desc->size;
    /* The driver owns the descriptor once the import succeeded. */
    close(desc->handle.fd);
    *out = (CUexternalMemory)(uintptr_t)H(m);
    return CUDA_SUCCESS;
}

static CUresult ext_buffer(CUdeviceptr *out, CUexternalMemory ext,
                           const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *desc) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    struct extmem *m = obj_get(HK_EXTMEM, (uint64_t)(uintptr_t)ext);
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    if (!out || !desc || desc->flags || desc->size == 0 || desc->offset > m->size ||
        desc->size > m->size - desc->offset)
        return CUDA_ERROR_INVALID_VALUE;
    struct alloc *a = heap_find(m->addr);
    struct ipc_alias probe = {.target = a, .target_addr = m->addr, .serial = a->serial,
                              .external = true, .offset = desc->offset, .length = desc->size};
    return alias_open(&probe, c, out);
}

static CUresult ext_destroy(CUexternalMemory ext) {
    struct extmem *m = obj_get(HK_EXTMEM, (uint64_t)(uintptr_t)ext);
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    /* Buffers still mapped onto it die with it (they "must no longer be used"). */
    struct alloc *a = heap_find(m->addr);
    if (a && a->addr == m->addr) heap_release(a);
    m->h.alive = false;
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuImportExternalMemory(CUexternalMemory *extMem_out,
                                            const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *memHandleDesc) {
    API_ENTER();
    API_LOCKED(ext_import(extMem_out, memHandleDesc));
}

SIMCUDA_API CUresult cuExternalMemoryGetMappedBuffer(
    CUdeviceptr *devPtr, CUexternalMemory extMem, const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *bufferDesc) {
    API_ENTER();
    API_LOCKED(ext_buffer(devPtr, extMem, bufferDesc));
}

SIMCUDA_API CUresult cuExternalMemoryGetMappedMipmappedArray(
    CUmipmappedArray *mipmap, CUexternalMemory extMem,
    const CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC *mipmapDesc) {
    (void)mipmap, (void)extMem, (void)mipmapDesc;
    API_ENTER();
    /* A simulator limit: arrays onto external memory are not simulated. */
    return CUDA_ERROR_NOT_SUPPORTED;
}

SIMCUDA_API CUresult cuDestroyExternalMemory(CUexternalMemory extMem) {
    API_ENTER();
    API_LOCKED(ext_destroy(extMem));
}
