/*
 * prefetch.c: prefetches and discards of managed memory on a stream: cuMemPrefetchAsync (8.0, to
 * a device ordinal or CU_DEVICE_CPU), cuMemPrefetchAsync_v2 (12.2, to a CUmemLocation),
 * cuMemPrefetchBatchAsync, cuMemDiscardBatchAsync and cuMemDiscardAndPrefetchBatchAsync (13.0),
 * each with _ptsz.
 *
 * The simulator has one memory, so a prefetch moves nothing and a discard leaves the bytes as
 * they were (the reference makes them indeterminate, which they may stay); what is modelled
 * is what the driver checks. Each range must lie inside one cuMemAllocManaged allocation
 * (CUDA_ERROR_INVALID_VALUE otherwise); a device ordinal must be CU_DEVICE_CPU or a device
 * (CUDA_ERROR_INVALID_DEVICE); a location must be a device by ordinal, the host, a host NUMA
 * node (id >= 0) or the current one (CUDA_ERROR_INVALID_VALUE otherwise, and
 * CUDA_ERROR_INVALID_DEVICE for a device ordinal out of range); flags must be 0. A batch needs
 * a count, its arrays, and a stream that is not the legacy NULL stream; its locations apply
 * from prefetchLocIdxs[k] on, which must start at 0, increase, stay below the count, and be at
 * most count many. Every range and location is checked before the call is taken. Graphs have
 * no prefetch or discard node: on a capturing stream each call fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the capture, as a synchronization does.
 */
#include "internal.h"

/* Whether [p, p + n) lies inside one managed allocation. */
static bool managed_range(CUdeviceptr p, size_t n) {
    struct range *r = rtab_find(&g_host, p);
    if (!r || ((struct hostrange *)r->obj)->kind != HR_MANAGED) return false;
    return n <= r->size && p - r->addr <= r->size - n;
}

static CUresult location_check(CUmemLocation l) {
    switch (l.type) {
    case CU_MEM_LOCATION_TYPE_DEVICE: return dev_check(l.id);
    case CU_MEM_LOCATION_TYPE_HOST:
    case CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT: return CUDA_SUCCESS;
    case CU_MEM_LOCATION_TYPE_HOST_NUMA: return l.id >= 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

/* The stream, which must not be capturing (a capture is invalidated); batches refuse the legacy
 * NULL stream. */
static CUresult on_stream(CUstream s, bool ptsz, bool batch) {
    if (batch && ((s == NULL && !ptsz) || s == CU_STREAM_LEGACY)) return CUDA_ERROR_INVALID_VALUE;
    struct sref r;
    CUresult res = stream_ref(s, ptsz, &r);
    if (res != CUDA_SUCCESS) return res;
    if (r.capturing) {
        stream_capture_invalidate(r.st);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    return CUDA_SUCCESS;
}

static CUresult prefetch(CUdeviceptr p, size_t n, CUmemLocation l, unsigned int flags, CUstream s,
                         bool ptsz) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r == CUDA_SUCCESS) r = on_stream(s, ptsz, false);
    if (r != CUDA_SUCCESS) return r;
    if (flags || !managed_range(p, n)) return CUDA_ERROR_INVALID_VALUE;
    return location_check(l);
}

static CUmemLocation of_device(CUdevice d) {
    if (d == CU_DEVICE_CPU) return (CUmemLocation){.type = CU_MEM_LOCATION_TYPE_HOST};
    return (CUmemLocation){.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = d};
}

/* A batch of count ranges; locs (NULL for a discard) apply from idxs[k] on. */
static CUresult batch(CUdeviceptr *p, size_t *n, size_t count, CUmemLocation *locs, size_t *idxs,
                      size_t nlocs, unsigned long long flags, CUstream s, bool ptsz,
                      bool prefetches) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r == CUDA_SUCCESS) r = on_stream(s, ptsz, true);
    if (r != CUDA_SUCCESS) return r;
    if (count == 0 || !p || !n || flags) return CUDA_ERROR_INVALID_VALUE;
    if (prefetches) {
        if (!locs || !idxs || nlocs == 0 || nlocs > count || idxs[0] != 0) return CUDA_ERROR_INVALID_VALUE;
        for (size_t k = 0; k < nlocs; k++) {
            if (k > 0 && idxs[k] <= idxs[k - 1]) return CUDA_ERROR_INVALID_VALUE;
            if (idxs[k] >= count) return CUDA_ERROR_INVALID_VALUE;
            r = location_check(locs[k]);
            if (r != CUDA_SUCCESS) return r;
        }
    }
    for (size_t i = 0; i < count; i++)
        if (!managed_range(p[i], n[i])) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                        CUstream hStream) {
    API_ENTER();
    API_LOCKED(prefetch(devPtr, count, of_device(dstDevice), 0, hStream, false));
}

SIMCUDA_API CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                             CUstream hStream) {
    API_ENTER();
    API_LOCKED(prefetch(devPtr, count, of_device(dstDevice), 0, hStream, true));
}

SIMCUDA_API CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                           unsigned int flags, CUstream hStream) {
    API_ENTER();
    API_LOCKED(prefetch(devPtr, count, location, flags, hStream, false));
}

SIMCUDA_API CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count,
                                                CUmemLocation location, unsigned int flags,
                                                CUstream hStream) {
    API_ENTER();
    API_LOCKED(prefetch(devPtr, count, location, flags, hStream, true));
}

SIMCUDA_API CUresult cuMemPrefetchBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                             CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs,
                                             size_t numPrefetchLocs, unsigned long long flags,
                                             CUstream hStream) {
    API_ENTER();
    API_LOCKED(batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags,
                     hStream, false, true));
}

SIMCUDA_API CUresult cuMemPrefetchBatchAsync_ptsz(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                                  CUmemLocation *prefetchLocs,
                                                  size_t *prefetchLocIdxs, size_t numPrefetchLocs,
                                                  unsigned long long flags, CUstream hStream) {
    API_ENTER();
    API_LOCKED(batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags,
                     hStream, true, true));
}

SIMCUDA_API CUresult cuMemDiscardBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                            unsigned long long flags, CUstream hStream) {
    API_ENTER();
    API_LOCKED(batch(dptrs, sizes, count, NULL, NULL, 0, flags, hStream, false, false));
}

SIMCUDA_API CUresult cuMemDiscardBatchAsync_ptsz(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                                 unsigned long long flags, CUstream hStream) {
    API_ENTER();
    API_LOCKED(batch(dptrs, sizes, count, NULL, NULL, 0, flags, hStream, true, false));
}

SIMCUDA_API CUresult cuMemDiscardAndPrefetchBatchAsync(CUdeviceptr *dptrs, size_t *sizes,
                                                       size_t count, CUmemLocation *prefetchLocs,
                                                       size_t *prefetchLocIdxs,
                                                       size_t numPrefetchLocs,
                                                       unsigned long long flags, CUstream hStream) {
    API_ENTER();
    API_LOCKED(batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags,
                     hStream, false, true));
}

SIMCUDA_API CUresult cuMemDiscardAndPrefetchBatchAsync_ptsz(
    CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *prefetchLocs,
    size_t *prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream) {
    API_ENTER();
    API_LOCKED(batch(dptrs, sizes, count, prefetchLocs, prefetchLocIdxs, numPrefetchLocs, flags,
                     hStream, true, true));
}
