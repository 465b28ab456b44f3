/*
 * copy.c: memcpy and memset entry points. Work runs synchronously at enqueue time; an
 * operation enqueued on a capturing stream is recorded nowhere and not executed (the captured
 * graph is never launched by the simulator).
 */
#include "internal.h"

static CUresult copy_sync(uint64_t dst, enum xmode dmode, uint64_t src, enum xmode smode,
                          size_t n) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    return mem_copy_locked(dst, dmode, src, smode, n);
}

static CUresult copy_async(uint64_t dst, enum xmode dmode, uint64_t src, enum xmode smode,
                           size_t n, CUstream s, bool ptsz) {
    struct sref ref;
    CUresult r = stream_ref(s, ptsz, &ref);
    if (r != CUDA_SUCCESS || ref.capturing) return r;
    return mem_copy_locked(dst, dmode, src, smode, n);
}

static CUresult set_sync(uint64_t dst, const void *pattern, size_t elem, size_t count) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    return mem_set_locked(dst, pattern, elem, count);
}

static CUresult set_async(uint64_t dst, const void *pattern, size_t elem, size_t count,
                          CUstream s, bool ptsz) {
    struct sref ref;
    CUresult r = stream_ref(s, ptsz, &ref);
    if (r != CUDA_SUCCESS || ref.capturing) return r;
    return mem_set_locked(dst, pattern, elem, count);
}

#define HOST(p) ((uint64_t)(uintptr_t)(p))

/* ---- unified copies ----------------------------------------------------------------------- */

SIMCUDA_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
    API_ENTER();
    API_LOCKED(copy_sync(dst, X_ANY_WRITE, src, X_ANY_READ, ByteCount));
}

SIMCUDA_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
    API_ENTER();
    API_LOCKED(copy_sync(dst, X_ANY_WRITE, src, X_ANY_READ, ByteCount));
}

SIMCUDA_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                   CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_async(dst, X_ANY_WRITE, src, X_ANY_READ, ByteCount, hStream, false));
}

SIMCUDA_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                        CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_async(dst, X_ANY_WRITE, src, X_ANY_READ, ByteCount, hStream, true));
}

/* ---- host to device ----------------------------------------------------------------------- */

SIMCUDA_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount) {
    API_ENTER();
    API_LOCKED(copy_sync(dstDevice, X_DEV_WRITE, HOST(srcHost), X_ANY_READ, ByteCount));
}

SIMCUDA_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost,
                                          size_t ByteCount) {
    API_ENTER();
    API_LOCKED(copy_sync(dstDevice, X_DEV_WRITE, HOST(srcHost), X_ANY_READ, ByteCount));
}

SIMCUDA_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
                                          size_t ByteCount, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_async(dstDevice, X_DEV_WRITE, HOST(srcHost), X_ANY_READ, ByteCount, hStream,
                          false));
}

SIMCUDA_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost,
                                               size_t ByteCount, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_async(dstDevice, X_DEV_WRITE, HOST(srcHost), X_ANY_READ, ByteCount, hStream,
                          true));
}

/* ---- device to host ----------------------------------------------------------------------- */

SIMCUDA_API CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
    API_ENTER();
    API_LOCKED(copy_sync(HOST(dstHost), X_ANY_WRITE, srcDevice, X_DEV_READ, ByteCount));
}

SIMCUDA_API CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
    API_ENTER();
    API_LOCKED(copy_sync(HOST(dstHost), X_ANY_WRITE, srcDevice, X_DEV_READ, ByteCount));
}

SIMCUDA_API CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                          CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_async(HOST(dstHost), X_ANY_WRITE, srcDevice, X_DEV_READ, ByteCount, hStream,
                          false));
}

SIMCUDA_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice,
                                               size_t ByteCount, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_async(HOST(dstHost), X_ANY_WRITE, srcDevice, X_DEV_READ, ByteCount, hStream,
                          true));
}

/* ---- device to device --------------------------------------------------------------------- */

SIMCUDA_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                     size_t ByteCount) {
    API_ENTER();
    API_LOCKED(copy_sync(dstDevice, X_DEV_WRITE, srcDevice, X_DEV_READ, ByteCount));
}

SIMCUDA_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                          size_t ByteCount) {
    API_ENTER();
    API_LOCKED(copy_sync(dstDevice, X_DEV_WRITE, srcDevice, X_DEV_READ, ByteCount));
}

SIMCUDA_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                          size_t ByteCount, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_async(dstDevice, X_DEV_WRITE, srcDevice, X_DEV_READ, ByteCount, hStream, false));
}

SIMCUDA_API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                               size_t ByteCount, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_async(dstDevice, X_DEV_WRITE, srcDevice, X_DEV_READ, ByteCount, hStream, true));
}

/* ---- memsets ------------------------------------------------------------------------------ */

SIMCUDA_API CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
    API_ENTER();
    API_LOCKED(set_sync(dstDevice, &uc, 1, N));
}

SIMCUDA_API CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
    API_ENTER();
    API_LOCKED(set_sync(dstDevice, &uc, 1, N));
}

SIMCUDA_API CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N) {
    API_ENTER();
    API_LOCKED(set_sync(dstDevice, &us, 2, N));
}

SIMCUDA_API CUresult cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N) {
    API_ENTER();
    API_LOCKED(set_sync(dstDevice, &us, 2, N));
}

SIMCUDA_API CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
    API_ENTER();
    API_LOCKED(set_sync(dstDevice, &ui, 4, N));
}

SIMCUDA_API CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
    API_ENTER();
    API_LOCKED(set_sync(dstDevice, &ui, 4, N));
}

SIMCUDA_API CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                     CUstream hStream) {
    API_ENTER();
    API_LOCKED(set_async(dstDevice, &uc, 1, N, hStream, false));
}

SIMCUDA_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                          CUstream hStream) {
    API_ENTER();
    API_LOCKED(set_async(dstDevice, &uc, 1, N, hStream, true));
}

SIMCUDA_API CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                      CUstream hStream) {
    API_ENTER();
    API_LOCKED(set_async(dstDevice, &us, 2, N, hStream, false));
}

SIMCUDA_API CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                           CUstream hStream) {
    API_ENTER();
    API_LOCKED(set_async(dstDevice, &us, 2, N, hStream, true));
}

SIMCUDA_API CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                      CUstream hStream) {
    API_ENTER();
    API_LOCKED(set_async(dstDevice, &ui, 4, N, hStream, false));
}

SIMCUDA_API CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                           CUstream hStream) {
    API_ENTER();
    API_LOCKED(set_async(dstDevice, &ui, 4, N, hStream, true));
}
