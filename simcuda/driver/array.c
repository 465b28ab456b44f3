/*
 * array.c: CUDA arrays. An array takes Width * max(Height,1) * max(Depth,1) * element size *
 * channels bytes from its device's heap; its contents are not reachable (no array copies).
 */
#include "internal.h"

struct array {
    struct hdr h;
    struct alloc *mem;
    CUDA_ARRAY3D_DESCRIPTOR desc;
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

void array_dead(void *array) { ((struct array *)array)->h.alive = false; }

static CUresult array_create(CUarray *out, const CUDA_ARRAY3D_DESCRIPTOR *d) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    size_t elem = element_size(d->Format);
    if (!out || d->Width == 0 || elem == 0 ||
        (d->NumChannels != 1 && d->NumChannels != 2 && d->NumChannels != 4))
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
    if (!arr) return CUDA_ERROR_INVALID_HANDLE;
    heap_release(arr->mem);
    arr->mem = NULL;
    arr->h.alive = false;
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
