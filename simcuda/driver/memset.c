/*
 * memset.c: memset entry points, 1D and 2D, synchronous and stream-ordered. A memset enqueued
 * on a capturing stream is not executed but appended to the graph being captured (a memset
 * node). 2D memsets check every row before writing one, and reject overlapping or misaligned
 * rows (memory.c's mem_set_rows_locked).
 */
#include <string.h>

#include "internal.h"

static CUresult set_sync(uint64_t dst, size_t pitch, const void *pattern, size_t elem,
                         size_t count, size_t rows) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    return mem_set_rows_locked(dst, pitch, pattern, elem, count, rows);
}

static CUresult set_async(uint64_t dst, size_t pitch, const void *pattern, size_t elem,
                          size_t count, size_t rows, CUstream s, bool ptsz) {
    struct sref ref;
    CUresult r = stream_ref(s, ptsz, &ref);
    if (r != CUDA_SUCCESS) return r;
    if (ref.capturing) {
        struct node n = {.kind = N_SET, .ctx = ref.ctx, .dst = dst, .elem = elem,
                         .count = count, .pitch = pitch, .rows = rows};
        memcpy(n.pattern, pattern, elem);
        return stream_capture_node(&ref, &n);
    }
    return mem_set_rows_locked(dst, pitch, pattern, elem, count, rows);
}

/* ---- memsets ------------------------------------------------------------------------------ */

SIMCUDA_API CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
    API_ENTER();
    API_LOCKED(set_sync(dstDevice, 0, &uc, 1, N, 1));
}

SIMCUDA_API CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N) {
    API_ENTER();
    API_LOCKED(set_sync(dstDevice, 0, &uc, 1, N, 1));
}

SIMCUDA_API CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N) {
    API_ENTER();
    API_LOCKED(set_sync(dstDevice, 0, &us, 2, N, 1));
}

SIMCUDA_API CUresult cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N) {
    API_ENTER();
    API_LOCKED(set_sync(dstDevice, 0, &us, 2, N, 1));
}

SIMCUDA_API CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
    API_ENTER();
    API_LOCKED(set_sync(dstDevice, 0, &ui, 4, N, 1));
}

SIMCUDA_API CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N) {
    API_ENTER();
    API_LOCKED(set_sync(dstDevice, 0, &ui, 4, N, 1));
}

SIMCUDA_API CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                     CUstream hStream) {
    API_ENTER();
    API_LOCKED(set_async(dstDevice, 0, &uc, 1, N, 1, hStream, false));
}

SIMCUDA_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                          CUstream hStream) {
    API_ENTER();
    API_LOCKED(set_async(dstDevice, 0, &uc, 1, N, 1, hStream, true));
}

SIMCUDA_API CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                      CUstream hStream) {
    API_ENTER();
    API_LOCKED(set_async(dstDevice, 0, &us, 2, N, 1, hStream, false));
}

SIMCUDA_API CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                           CUstream hStream) {
    API_ENTER();
    API_LOCKED(set_async(dstDevice, 0, &us, 2, N, 1, hStream, true));
}

SIMCUDA_API CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                      CUstream hStream) {
    API_ENTER();
    API_LOCKED(set_async(dstDevice, 0, &ui, 4, N, 1, hStream, false));
}

SIMCUDA_API CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                           CUstream hStream) {
    API_ENTER();
    API_LOCKED(set_async(dstDevice, 0, &ui, 4, N, 1, hStream, true));
}

/* ---- 2D memsets ---------------------------------------------------------------------------- */

SIMCUDA_API CUresult cuMemsetD2D8_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                                     size_t Width, size_t Height) {
    API_ENTER();
    API_LOCKED(set_sync(dstDevice, dstPitch, &uc, 1, Width, Height));
}

SIMCUDA_API CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch,
                                          unsigned char uc, size_t Width, size_t Height) {
    API_ENTER();
    API_LOCKED(set_sync(dstDevice, dstPitch, &uc, 1, Width, Height));
}

SIMCUDA_API CUresult cuMemsetD2D16_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                                      size_t Width, size_t Height) {
    API_ENTER();
    API_LOCKED(set_sync(dstDevice, dstPitch, &us, 2, Width, Height));
}

SIMCUDA_API CUresult cuMemsetD2D16_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch,
                                           unsigned short us, size_t Width, size_t Height) {
    API_ENTER();
    API_LOCKED(set_sync(dstDevice, dstPitch, &us, 2, Width, Height));
}

SIMCUDA_API CUresult cuMemsetD2D32_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                                      size_t Width, size_t Height) {
    API_ENTER();
    API_LOCKED(set_sync(dstDevice, dstPitch, &ui, 4, Width, Height));
}

SIMCUDA_API CUresult cuMemsetD2D32_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch,
                                           unsigned int ui, size_t Width, size_t Height) {
    API_ENTER();
    API_LOCKED(set_sync(dstDevice, dstPitch, &ui, 4, Width, Height));
}

SIMCUDA_API CUresult cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                                       size_t Width, size_t Height, CUstream hStream) {
    API_ENTER();
    API_LOCKED(set_async(dstDevice, dstPitch, &uc, 1, Width, Height, hStream, false));
}

SIMCUDA_API CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch,
                                            unsigned char uc, size_t Width, size_t Height,
                                            CUstream hStream) {
    API_ENTER();
    API_LOCKED(set_async(dstDevice, dstPitch, &uc, 1, Width, Height, hStream, true));
}

SIMCUDA_API CUresult cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch,
                                        unsigned short us, size_t Width, size_t Height,
                                        CUstream hStream) {
    API_ENTER();
    API_LOCKED(set_async(dstDevice, dstPitch, &us, 2, Width, Height, hStream, false));
}

SIMCUDA_API CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch,
                                             unsigned short us, size_t Width, size_t Height,
                                             CUstream hStream) {
    API_ENTER();
    API_LOCKED(set_async(dstDevice, dstPitch, &us, 2, Width, Height, hStream, true));
}

SIMCUDA_API CUresult cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch,
                                        unsigned int ui, size_t Width, size_t Height,
                                        CUstream hStream) {
    API_ENTER();
    API_LOCKED(set_async(dstDevice, dstPitch, &ui, 4, Width, Height, hStream, false));
}

SIMCUDA_API CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch,
                                             unsigned int ui, size_t Width, size_t Height,
                                             CUstream hStream) {
    API_ENTER();
    API_LOCKED(set_async(dstDevice, dstPitch, &ui, 4, Width, Height, hStream, true));
}
