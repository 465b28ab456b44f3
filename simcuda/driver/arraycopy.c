/*
 * arraycopy.c: the 1D copies to and from CUDA arrays (cuMemcpy{HtoA,AtoH,AtoA,DtoA,AtoD}_v2 and
 * their _ptds forms, cuMemcpy{HtoA,AtoH}Async_v2 and their _ptsz forms).
 *
 * An array's memory is Depth slices of Height rows of Width elements, no padding (array.c); a
 * level of a mipmapped array lies after the levels before it. The driver API reference names
 * these calls copies of "a 1D CUDA array", so the simulator takes only arrays of one row (Height
 * and Depth 0 or 1) here: any other is CUDA_ERROR_INVALID_VALUE, as is an offset that is not on
 * an element or a range past the array's end. Each call is the 3D copy of one row it stands
 * for, with the array side at X = its offset, so a captured one is a copy node whose
 * cuGraphMemcpyNodeGetParams descriptor names the array. An array destroyed (or a mipmapped
 * array's level whose mipmapped array was) is CUDA_ERROR_INVALID_HANDLE.
 */
#include "internal.h"

#define HOST(p) ((uint64_t)(uintptr_t)(p))

/* Whether arr is an array of one row (a bad handle is left to the copy to refuse). */
static bool one_row(CUarray arr) {
    uint64_t base;
    size_t row_bytes, rows, slices, elem;
    if (array_layout(arr, &base, &row_bytes, &rows, &slices, &elem) != CUDA_SUCCESS) return true;
    return rows == 1 && slices == 1;
}

/* One side: an array (is_array: arr, at offset) or linear memory of type `type` at addr. */
struct end {
    bool is_array;
    CUarray arr;
    size_t offset;
    uint64_t addr;
    CUmemorytype type;
};

static CUresult array_copy(struct end dst, struct end src, size_t n, bool async, CUstream s,
                           bool ptsz) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    CUDA_MEMCPY3D d = copy_linear(dst.addr, dst.is_array ? CU_MEMORYTYPE_DEVICE : dst.type,
                                  src.addr, src.is_array ? CU_MEMORYTYPE_DEVICE : src.type, n);
    if (dst.is_array) {
        if (!one_row(dst.arr)) return CUDA_ERROR_INVALID_VALUE;
        d.dstMemoryType = CU_MEMORYTYPE_ARRAY;
        d.dstArray = dst.arr;
        d.dstDevice = 0;
        d.dstXInBytes = dst.offset;
    }
    if (src.is_array) {
        if (!one_row(src.arr)) return CUDA_ERROR_INVALID_VALUE;
        d.srcMemoryType = CU_MEMORYTYPE_ARRAY;
        d.srcArray = src.arr;
        d.srcDevice = 0;
        d.srcXInBytes = src.offset;
    }
    struct xfer x;
    r = copy_from_3d(&d, &x);
    if (r != CUDA_SUCCESS) return r;
    return async ? xfer_async(&x, &d, s, ptsz) : xfer_sync(&x);
}

static struct end array_end(CUarray arr, size_t offset) {
    return (struct end){.is_array = true, .arr = arr, .offset = offset};
}

static struct end linear(uint64_t addr, CUmemorytype type) {
    return (struct end){.is_array = false, .addr = addr, .type = type};
}

#define SYNC false, NULL, false

SIMCUDA_API CUresult cuMemcpyHtoA_v2(CUarray dstArray, size_t dstOffset, const void *srcHost,
                                     size_t ByteCount) {
    API_ENTER();
    API_LOCKED(array_copy(array_end(dstArray, dstOffset), linear(HOST(srcHost), CU_MEMORYTYPE_HOST),
                          ByteCount, SYNC));
}

SIMCUDA_API CUresult cuMemcpyHtoA_v2_ptds(CUarray dstArray, size_t dstOffset, const void *srcHost,
                                          size_t ByteCount) {
    API_ENTER();
    API_LOCKED(array_copy(array_end(dstArray, dstOffset), linear(HOST(srcHost), CU_MEMORYTYPE_HOST),
                          ByteCount, SYNC));
}

SIMCUDA_API CUresult cuMemcpyAtoH_v2(void *dstHost, CUarray srcArray, size_t srcOffset,
                                     size_t ByteCount) {
    API_ENTER();
    API_LOCKED(array_copy(linear(HOST(dstHost), CU_MEMORYTYPE_HOST), array_end(srcArray, srcOffset),
                          ByteCount, SYNC));
}

SIMCUDA_API CUresult cuMemcpyAtoH_v2_ptds(void *dstHost, CUarray srcArray, size_t srcOffset,
                                          size_t ByteCount) {
    API_ENTER();
    API_LOCKED(array_copy(linear(HOST(dstHost), CU_MEMORYTYPE_HOST), array_end(srcArray, srcOffset),
                          ByteCount, SYNC));
}

SIMCUDA_API CUresult cuMemcpyAtoA_v2(CUarray dstArray, size_t dstOffset, CUarray srcArray,
                                     size_t srcOffset, size_t ByteCount) {
    API_ENTER();
    API_LOCKED(array_copy(array_end(dstArray, dstOffset), array_end(srcArray, srcOffset), ByteCount,
                          SYNC));
}

SIMCUDA_API CUresult cuMemcpyAtoA_v2_ptds(CUarray dstArray, size_t dstOffset, CUarray srcArray,
                                          size_t srcOffset, size_t ByteCount) {
    API_ENTER();
    API_LOCKED(array_copy(array_end(dstArray, dstOffset), array_end(srcArray, srcOffset), ByteCount,
                          SYNC));
}

SIMCUDA_API CUresult cuMemcpyDtoA_v2(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice,
                                     size_t ByteCount) {
    API_ENTER();
    API_LOCKED(array_copy(array_end(dstArray, dstOffset), linear(srcDevice, CU_MEMORYTYPE_DEVICE),
                          ByteCount, SYNC));
}

SIMCUDA_API CUresult cuMemcpyDtoA_v2_ptds(CUarray dstArray, size_t dstOffset,
                                          CUdeviceptr srcDevice, size_t ByteCount) {
    API_ENTER();
    API_LOCKED(array_copy(array_end(dstArray, dstOffset), linear(srcDevice, CU_MEMORYTYPE_DEVICE),
                          ByteCount, SYNC));
}

SIMCUDA_API CUresult cuMemcpyAtoD_v2(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset,
                                     size_t ByteCount) {
    API_ENTER();
    API_LOCKED(array_copy(linear(dstDevice, CU_MEMORYTYPE_DEVICE), array_end(srcArray, srcOffset),
                          ByteCount, SYNC));
}

SIMCUDA_API CUresult cuMemcpyAtoD_v2_ptds(CUdeviceptr dstDevice, CUarray srcArray,
                                          size_t srcOffset, size_t ByteCount) {
    API_ENTER();
    API_LOCKED(array_copy(linear(dstDevice, CU_MEMORYTYPE_DEVICE), array_end(srcArray, srcOffset),
                          ByteCount, SYNC));
}

SIMCUDA_API CUresult cuMemcpyHtoAAsync_v2(CUarray dstArray, size_t dstOffset, const void *srcHost,
                                          size_t ByteCount, CUstream hStream) {
    API_ENTER();
    API_LOCKED(array_copy(array_end(dstArray, dstOffset), linear(HOST(srcHost), CU_MEMORYTYPE_HOST),
                          ByteCount, true, hStream, false));
}

SIMCUDA_API CUresult cuMemcpyHtoAAsync_v2_ptsz(CUarray dstArray, size_t dstOffset,
                                               const void *srcHost, size_t ByteCount,
                                               CUstream hStream) {
    API_ENTER();
    API_LOCKED(array_copy(array_end(dstArray, dstOffset), linear(HOST(srcHost), CU_MEMORYTYPE_HOST),
                          ByteCount, true, hStream, true));
}

SIMCUDA_API CUresult cuMemcpyAtoHAsync_v2(void *dstHost, CUarray srcArray, size_t srcOffset,
                                          size_t ByteCount, CUstream hStream) {
    API_ENTER();
    API_LOCKED(array_copy(linear(HOST(dstHost), CU_MEMORYTYPE_HOST), array_end(srcArray, srcOffset),
                          ByteCount, true, hStream, false));
}

SIMCUDA_API CUresult cuMemcpyAtoHAsync_v2_ptsz(void *dstHost, CUarray srcArray, size_t srcOffset,
                                               size_t ByteCount, CUstream hStream) {
    API_ENTER();
    API_LOCKED(array_copy(linear(HOST(dstHost), CU_MEMORYTYPE_HOST), array_end(srcArray, srcOffset),
                          ByteCount, true, hStream, true));
}
