/*
 * array.c: CUDA arrays and mipmapped arrays. An array takes Width * max(Height,1) *
 * max(Depth,1) * element size * channels bytes from its device's heap, laid out as Depth
 * slices of Height rows of Width elements, with no padding: copies reach it through the array
 * handle only (arraycopy.c, and the array sides of 2D and 3D copies in copy.c).
 *
 * A mipmapped array takes one block of the heap for all its levels: the sum over levels
 * l = 0 .. numMipmapLevels - 1 of
 *     max(1, Width >> l) * H_l * D_l * element size * channels,
 *     H_l = Height ? max(1, Height >> l) : 1,
 *     D_l = Depth ? max(1, Depth >> l) : 1,
 * except that with CUDA_ARRAY3D_LAYERED or CUDA_ARRAY3D_CUBEMAP in Flags the depth is a layer
 * count and is never halved: D_l = max(Depth, 1). numMipmapLevels is clamped, as the driver
 * API reference says, to [1, 1 + floor(log2(max extent))], the extents being Width, Height and
 * (unless it counts layers) Depth: the last level is the first whose every extent is 1.
 * Width 0, a bad format or channel count: CUDA_ERROR_INVALID_VALUE; a size that overflows:
 * CUDA_ERROR_OUT_OF_MEMORY.
 *
 * cuMipmappedArrayGetLevel hands out one CUarray per level (the same handle each time), with
 * that level's extents in its descriptor and no memory of its own. It dies with its mipmapped
 * array and cannot be destroyed on its own: cuArrayDestroy answers CUDA_ERROR_INVALID_HANDLE.
 */
#include "internal.h"

struct mipmap;

struct array {
    struct hdr h;
    struct alloc *mem;            /* NULL for a level of a mipmapped array */
    CUDA_ARRAY3D_DESCRIPTOR desc;
    struct mipmap *parent;        /* a level: its mipmapped array */
    unsigned int level;
    struct array *next_level;     /* the parent's other levels handed out so far */
};

struct mipmap {
    struct hdr h;
    struct alloc *mem;
    CUDA_ARRAY3D_DESCRIPTOR desc;
    unsigned int levels;
    struct array *level_list;
};

static size_t element_size(CUarray_format f) {
    switch (f) {
    case CU_AD_FORMAT_UNSIGNED_INT8:
    case CU_AD_FORMAT_SIGNED_INT8: return 1;
    case CU_AD_FORMAT_UNSIGNED_INT16:
    case CU_AD_FORMAT_SIGNED_INT16:
    case CU_AD_FORMAT_HALF: return 2;
    case CU_AD_FORMAT_UNSIGNED_INT32:
    case CU_AD_FORMAT_SIGNED_INT32:
    case CU_AD_FORMAT_FLOAT: return 4;
    default: return 0;
    }
}

static void mipmap_dead(struct mipmap *m) {
    m->h.alive = false;
    m->mem = NULL;
    for (struct array *l = m->level_list; l; l = l->next_level) l->h.alive = false;
}

void array_dead(void *owner) {
    struct hdr *h = owner;
    if (h->kind == HK_MIPMAPPED)
        mipmap_dead(owner);
    else
        h->alive = false;
}

static bool valid_channels(unsigned int n) { return n == 1 || n == 2 || n == 4; }

static CUresult array_create(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    size_t elem = element_size(d->Format);
    if (!out || d->Width == 0 || elem == 0 || !valid_channels(d->NumChannels))
        return CUDA_ERROR_INVALID_VALUE;
    size_t bytes = d->Width;
    if (__builtin_mul_overflow(bytes, d->Height ? d->Height : 1, &bytes) ||
        __builtin_mul_overflow(bytes, d->Depth ? d->Depth : 1, &bytes) ||
        __builtin_mul_overflow(bytes, elem * d->NumChannels, &bytes))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct alloc *a;
    r = heap_alloc(c->dev, bytes, HEAP_ALIGN, AK_ARRAY, c, &a);
    if (r != CUDA_SUCCESS) return r;
    struct array *arr = obj_new(HK_ARRAY, sizeof *arr);
    if (!arr) {
        heap_release(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    arr->mem = a;
    arr->desc = *d;
    a->owner = arr;
    *out = (CUarray)(uintptr_t)H(arr);
    return CUDA_SUCCESS;
}

static CUresult array_create_2d(CUarray *out, const CUDA_ARRAY_DESCRIPTOR *d) {
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    CUDA_ARRAY3D_DESCRIPTOR d3 = {.Width = d->Width, .Height = d->Height, .Depth = 0,
                                  .Format = d->Format, .NumChannels = d->NumChannels, .Flags = 0};
    return array_create(out, &d3);
}

static CUresult array_create_3d(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d) {
    if (!d) return CUDA_ERROR_INVALID_VALUE;
    return array_create(out, d);
}

static struct array *array_get(CUarray h) { return obj_get(HK_ARRAY, (uint64_t)(uintptr_t)h); }

/* Bytes per element (all channels) of a valid descriptor. */
static uint64_t element_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d) {
    return (uint64_t)element_size(d->Format) * d->NumChannels;
}

static bool mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned int levels, uint64_t elem,
                         uint64_t *out);

CUresult array_layout(CUarray h, uint64_t *base, size_t *row_bytes, size_t *rows, size_t *slices,
                      size_t *elem) {
    struct array *arr = array_get(h);
    if (!arr) return CUDA_ERROR_INVALID_HANDLE;
    const CUDA_ARRAY3D_DESCRIPTOR *d = &arr->desc;
    *elem = (size_t)element_bytes(d);
    *row_bytes = d->Width * *elem;
    *rows = d->Height ? d->Height : 1;
    *slices = d->Depth ? d->Depth : 1;
    if (!arr->parent) {
        *base = arr->mem->addr;
        return CUDA_SUCCESS;
    }
    /* A level lies after the levels before it in its mipmapped array's block. */
    uint64_t before = 0;
    mipmap_bytes(&arr->parent->desc, arr->level, *elem, &before); /* fits: the block's did */
    *base = arr->parent->mem->addr + before;
    return CUDA_SUCCESS;
}

static CUresult array_descriptor(CUDA_ARRAY_DESCRIPTOR *out2, CUDA_ARRAY3D_DESCRIPTOR *out3,
                                 CUarray h) {
    struct array *arr = array_get(h);
    if (!arr) return CUDA_ERROR_INVALID_HANDLE;
    if (out3) *out3 = arr->desc;
    if (out2)
        *out2 = (CUDA_ARRAY_DESCRIPTOR){.Width = arr->desc.Width, .Height = arr->desc.Height,
                                        .Format = arr->desc.Format,
                                        .NumChannels = arr->desc.NumChannels};
    return out2 || out3 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult array_destroy(CUarray h) {
    struct array *arr = array_get(h);
    /* A level of a mipmapped array is not the client's to destroy. */
    if (!arr || arr->parent) return CUDA_ERROR_INVALID_HANDLE;
    heap_release(arr->mem);
    arr->mem = NULL;
    arr->h.alive = false;
    return CUDA_SUCCESS;
}

/* ---- mipmapped arrays -------------------------------------------------------------------- */

static uint64_t halved(uint64_t extent, unsigned int level) {
    uint64_t v = level >= 64 ? 0 : extent >> level;
    return v ? v : 1;
}

/* numMipmapLevels clamped to [1, 1 + floor(log2(max extent))] (see the top). */
static unsigned int clamped_levels(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned int levels) {
    bool layers = d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);
    uint64_t extent = d->Width;
    if (d->Height > extent) extent = d->Height;
    if (!layers && d->Depth > extent) extent = d->Depth;
    unsigned int most = extent ? 64 - (unsigned int)__builtin_clzll(extent) : 1;
    return levels == 0 ? 1 : levels < most ? levels : most;
}

/* The size rule in the comment at the top, over `levels` already clamped; false on overflow. */
static bool mipmap_bytes(const CUDA_ARRAY3D_DESCRIPTOR *d, unsigned int levels, uint64_t elem,
                         uint64_t *out) {
    bool layers = d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);
    uint64_t total = 0;
    for (unsigned int l = 0; l < levels; l++) {
        uint64_t w = halved(d->Width, l);
        uint64_t h = d->Height ? halved(d->Height, l) : 1;
        uint64_t dp = !d->Depth ? 1 : layers ? d->Depth : halved(d->Depth, l);
        uint64_t bytes;
        if (__builtin_mul_overflow(w, h, &bytes) || __builtin_mul_overflow(bytes, dp, &bytes) ||
            __builtin_mul_overflow(bytes, elem, &bytes) || __builtin_add_overflow(total, bytes, &total))
            return false;
    }
    *out = total;
    return true;
}

static CUresult mipmap_create(CUmipmappedArray *out, const CUDA_ARRAY3D_DESCRIPTOR *d,
                              unsigned int levels) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!out || !d) return CUDA_ERROR_INVALID_VALUE;
    size_t elem = element_size(d->Format);
    if (d->Width == 0 || elem == 0 || !valid_channels(d->NumChannels))
        return CUDA_ERROR_INVALID_VALUE;
    levels = clamped_levels(d, levels);
    uint64_t bytes;
    if (!mipmap_bytes(d, levels, (uint64_t)elem * d->NumChannels, &bytes))
        return CUDA_ERROR_OUT_OF_MEMORY;
    struct alloc *a;
    r = heap_alloc(c->dev, bytes, HEAP_ALIGN, AK_ARRAY, c, &a);
    if (r != CUDA_SUCCESS) return r;
    struct mipmap *m = obj_new(HK_MIPMAPPED, sizeof *m);
    if (!m) {
        heap_release(a);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    m->mem = a;
    m->desc = *d;
    m->levels = levels;
    a->owner = m;
    *out = (CUmipmappedArray)(uintptr_t)H(m);
    return CUDA_SUCCESS;
}

static struct mipmap *mipmap_get(CUmipmappedArray h) {
    return obj_get(HK_MIPMAPPED, (uint64_t)(uintptr_t)h);
}

static CUresult mipmap_level(CUarray *out, CUmipmappedArray h, unsigned int level) {
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    struct mipmap *m = mipmap_get(h);
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    if (level >= m->levels) return CUDA_ERROR_INVALID_VALUE;
    for (struct array *l = m->level_list; l; l = l->next_level) {
        if (l->level == level) {
            *out = (CUarray)(uintptr_t)H(l);
            return CUDA_SUCCESS;
        }
    }
    struct array *arr = obj_new(HK_ARRAY, sizeof *arr);
    if (!arr) return CUDA_ERROR_OUT_OF_MEMORY;
    const CUDA_ARRAY3D_DESCRIPTOR *d = &m->desc;
    bool layers = d->Flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP);
    arr->desc = *d;
    arr->desc.Width = (size_t)halved(d->Width, level);
    arr->desc.Height = d->Height ? (size_t)halved(d->Height, level) : 0;
    arr->desc.Depth = !d->Depth || layers ? d->Depth : (size_t)halved(d->Depth, level);
    arr->parent = m;
    arr->level = level;
    arr->next_level = m->level_list;
    m->level_list = arr;
    *out = (CUarray)(uintptr_t)H(arr);
    return CUDA_SUCCESS;
}

static CUresult mipmap_destroy(CUmipmappedArray h) {
    struct mipmap *m = mipmap_get(h);
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    heap_release(m->mem);
    mipmap_dead(m);
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuArrayCreate_v2(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR *pAllocateArray) {
    API_ENTER();
    API_LOCKED(array_create_2d(pHandle, pAllocateArray));
}

SIMCUDA_API CUresult cuArray3DCreate_v2(CUarray *pHandle,
                                        const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray) {
    API_ENTER();
    API_LOCKED(array_create_3d(pHandle, pAllocateArray));
}

SIMCUDA_API CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *pArrayDescriptor,
                                             CUarray hArray) {
    API_ENTER();
    if (!pArrayDescriptor) return CUDA_ERROR_INVALID_VALUE;
    API_LOCKED(array_descriptor(pArrayDescriptor, NULL, hArray));
}

SIMCUDA_API CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *pArrayDescriptor,
                                               CUarray hArray) {
    API_ENTER();
    if (!pArrayDescriptor) return CUDA_ERROR_INVALID_VALUE;
    API_LOCKED(array_descriptor(NULL, pArrayDescriptor, hArray));
}

SIMCUDA_API CUresult cuArrayDestroy(CUarray hArray) {
    API_ENTER();
    API_LOCKED(array_destroy(hArray));
}

SIMCUDA_API CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                            const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                            unsigned int numMipmapLevels) {
    API_ENTER();
    API_LOCKED(mipmap_create(pHandle, pMipmappedArrayDesc, numMipmapLevels));
}

SIMCUDA_API CUresult cuMipmappedArrayGetLevel(CUarray *pLevelArray,
                                              CUmipmappedArray hMipmappedArray,
                                              unsigned int level) {
    API_ENTER();
    API_LOCKED(mipmap_level(pLevelArray, hMipmappedArray, level));
}

SIMCUDA_API CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray) {
    API_ENTER();
    API_LOCKED(mipmap_destroy(hMipmappedArray));
}
