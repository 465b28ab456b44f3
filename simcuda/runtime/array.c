/*
 * array.c: the runtime's arrays, mipmapped arrays and 3D pitched allocations, on the driver's
 * cuArrayCreate_v2, cuArray3DCreate_v2, cuMipmappedArrayCreate and cuMemAllocPitch_v2.
 *
 * A channel format descriptor becomes the driver's format and channel count: the nonzero
 * component sizes must be x, x y or x y z w (1, 2 or 4 channels), all the same number of bits;
 * signed and unsigned kinds take 8, 16 or 32 bits, float 16 (half) or 32. Anything else is
 * cudaErrorInvalidChannelDescriptor. Runtime array flags are the driver's CUDA_ARRAY3D_*
 * values and pass through unchanged.
 */
#include <stdint.h>

#include "rt.h"

static cudaError_t channel_format(const struct cudaChannelFormatDesc *d, CUarray_format *format,
                                  unsigned int *channels) {
    if (!d) return cudaErrorInvalidValue;
    const int bits[4] = {d->x, d->y, d->z, d->w};
    unsigned int n = 0;
    while (n < 4 && bits[n] != 0) n++;
    for (unsigned int i = 0; i < 4; i++)
        if ((i < n && bits[i] != bits[0]) || (i >= n && bits[i] != 0))
            return cudaErrorInvalidChannelDescriptor;
    if (n != 1 && n != 2 && n != 4) return cudaErrorInvalidChannelDescriptor;
    switch (d->f) {
    case cudaChannelFormatKindSigned:
        if (bits[0] == 8) *format = CU_AD_FORMAT_SIGNED_INT8;
        else if (bits[0] == 16) *format = CU_AD_FORMAT_SIGNED_INT16;
        else if (bits[0] == 32) *format = CU_AD_FORMAT_SIGNED_INT32;
        else return cudaErrorInvalidChannelDescriptor;
        break;
    case cudaChannelFormatKindUnsigned:
        if (bits[0] == 8) *format = CU_AD_FORMAT_UNSIGNED_INT8;
        else if (bits[0] == 16) *format = CU_AD_FORMAT_UNSIGNED_INT16;
        else if (bits[0] == 32) *format = CU_AD_FORMAT_UNSIGNED_INT32;
        else return cudaErrorInvalidChannelDescriptor;
        break;
    case cudaChannelFormatKindFloat:
        if (bits[0] == 16) *format = CU_AD_FORMAT_HALF;
        else if (bits[0] == 32) *format = CU_AD_FORMAT_FLOAT;
        else return cudaErrorInvalidChannelDescriptor;
        break;
    default: return cudaErrorInvalidChannelDescriptor;
    }
    *channels = n;
    return cudaSuccess;
}

/* The driver's 3D descriptor for a runtime descriptor, extent and flags. */
static cudaError_t descriptor_3d(CUDA_ARRAY3D_DESCRIPTOR *out, const struct cudaChannelFormatDesc *desc,
                                 struct cudaExtent extent, unsigned int flags) {
    CUarray_format format;
    unsigned int channels;
    cudaError_t e = channel_format(desc, &format, &channels);
    if (e != cudaSuccess) return e;
    *out = (CUDA_ARRAY3D_DESCRIPTOR){.Width = extent.width, .Height = extent.height,
                                     .Depth = extent.depth, .Format = format,
                                     .NumChannels = channels, .Flags = flags};
    return cudaSuccess;
}

SIMCUDA_API cudaError_t cudaMallocArray(cudaArray_t *array, const struct cudaChannelFormatDesc *desc,
                                        size_t width, size_t height, unsigned int flags) {
    if (!array || (flags & ~(unsigned int)(cudaArraySurfaceLoadStore | cudaArrayTextureGather)))
        return rt_error(cudaErrorInvalidValue);
    CUarray_format format;
    unsigned int channels;
    cudaError_t e = channel_format(desc, &format, &channels);
    if (e != cudaSuccess) return rt_error(e);
    NEED(cuArrayCreate_v2);
    CUDA_ARRAY_DESCRIPTOR d = {.Width = width, .Height = height, .Format = format,
                               .NumChannels = channels};
    WITH_CONTEXT(drv.cuArrayCreate_v2(array, &d));
}

SIMCUDA_API cudaError_t cudaMalloc3DArray(cudaArray_t *array,
                                          const struct cudaChannelFormatDesc *desc,
                                          struct cudaExtent extent, unsigned int flags) {
    if (!array) return rt_error(cudaErrorInvalidValue);
    CUDA_ARRAY3D_DESCRIPTOR d;
    cudaError_t e = descriptor_3d(&d, desc, extent, flags);
    if (e != cudaSuccess) return rt_error(e);
    NEED(cuArray3DCreate_v2);
    WITH_CONTEXT(drv.cuArray3DCreate_v2(array, &d));
}

SIMCUDA_API cudaError_t cudaMallocMipmappedArray(cudaMipmappedArray_t *mipmappedArray,
                                                 const struct cudaChannelFormatDesc *desc,
                                                 struct cudaExtent extent, unsigned int numLevels,
                                                 unsigned int flags) {
    if (!mipmappedArray) return rt_error(cudaErrorInvalidValue);
    CUDA_ARRAY3D_DESCRIPTOR d;
    cudaError_t e = descriptor_3d(&d, desc, extent, flags);
    if (e != cudaSuccess) return rt_error(e);
    NEED(cuMipmappedArrayCreate);
    WITH_CONTEXT(drv.cuMipmappedArrayCreate(mipmappedArray, &d, numLevels));
}

/* One pitched allocation of extent.width bytes by extent.height * extent.depth rows (element
 * size 4, as cudaMallocPitch): the driver's pitch rule (rows aligned to 512) applies. */
SIMCUDA_API cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr, struct cudaExtent extent) {
    if (!pitchedDevPtr) return rt_error(cudaErrorInvalidValue);
    size_t rows;
    if (__builtin_mul_overflow(extent.height, extent.depth, &rows))
        return rt_error(cudaErrorMemoryAllocation);
    cudaError_t e = rt_context();
    if (e != cudaSuccess) return rt_error(e);
    CUdeviceptr p = 0;
    size_t pitch = 0;
    CUresult r = drv.cuMemAllocPitch_v2(&p, &pitch, extent.width, rows, 4);
    if (r == CUDA_SUCCESS)
        *pitchedDevPtr = (struct cudaPitchedPtr){.ptr = (void *)(uintptr_t)p, .pitch = pitch,
                                                 .xsize = extent.width, .ysize = extent.height};
    return rt_error(rt_from_driver(r));
}

SIMCUDA_API cudaError_t cudaFreeArray(cudaArray_t array) {
    NEED(cuArrayDestroy);
    cudaError_t e = rt_context();
    if (e != cudaSuccess) return rt_error(e);
    if (!array) return cudaSuccess;
    return rt_error(rt_from_driver(drv.cuArrayDestroy(array)));
}

SIMCUDA_API cudaError_t cudaFreeMipmappedArray(cudaMipmappedArray_t mipmappedArray) {
    NEED(cuMipmappedArrayDestroy);
    cudaError_t e = rt_context();
    if (e != cudaSuccess) return rt_error(e);
    if (!mipmappedArray) return cudaSuccess;
    return rt_error(rt_from_driver(drv.cuMipmappedArrayDestroy(mipmappedArray)));
}
