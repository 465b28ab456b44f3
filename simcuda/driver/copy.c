/*
 * copy.c: memcpy entry points, 1D, 2D and 3D (memsets: memset.c; batches: copybatch.c). Work runs
 * synchronously at enqueue time; an operation enqueued on a capturing stream is not executed but
 * appended to the graph being captured, and runs at each launch of it (graph.c). A copy node keeps
 * the 3D descriptor of its copy (1D copies: one row, with each side's memory type: host, device,
 * or unified for cuMemcpy(Async) and batches) for cuGraphMemcpyNodeGetParams.
 *
 * 2D and 3D copies take each side's memory type from the descriptor: host and unified sides may be
 * any host memory, device sides must lie in device memory; an array side uses the array's own
 * rows (arraycopy.c's comment), and must lie inside it. Every row is
 * checked before any byte is copied. Peer copies need both contexts valid and then copy like their
 * device-to-device counterparts (every device shares the simulator's one address space).
 */
#include <string.h>

#include "internal.h"

/* A 1D copy as the 3D descriptor of one row of n bytes (what a copy node reports), each side
 * of memory type HOST, DEVICE or UNIFIED. */
CUDA_MEMCPY3D copy_linear(uint64_t dst, CUmemorytype dtype, uint64_t src, CUmemorytype stype,
                          size_t n) {
    CUDA_MEMCPY3D d = {.srcMemoryType = stype, .srcPitch = n, .srcHeight = 1,
                       .dstMemoryType = dtype, .dstPitch = n, .dstHeight = 1,
                       .WidthInBytes = n, .Height = 1, .Depth = 1};
    if (stype == CU_MEMORYTYPE_HOST)
        d.srcHost = (const void *)(uintptr_t)src;
    else
        d.srcDevice = src;
    if (dtype == CU_MEMORYTYPE_HOST)
        d.dstHost = (void *)(uintptr_t)dst;
    else
        d.dstDevice = dst;
    return d;
}


static uint64_t row_at(uint64_t base, size_t pitch, size_t rows, size_t y, size_t z) {
    return base + ((uint64_t)z * rows + y) * pitch;
}

/* Checks every row of a copy, moving nothing. */
CUresult xfer_check(const struct xfer *x) {
    for (size_t z = 0; z < x->depth; z++) {
        for (size_t y = 0; y < x->height; y++) {
            CUresult r = mem_copy_valid(row_at(x->dst, x->dpitch, x->drows, y, z), x->dmode,
                                        row_at(x->src, x->spitch, x->srows, y, z), x->smode,
                                        x->width);
            if (r != CUDA_SUCCESS) return r;
        }
    }
    return CUDA_SUCCESS;
}

CUresult xfer_run_locked(const struct xfer *x) {
    CUresult r = xfer_check(x);
    for (size_t z = 0; r == CUDA_SUCCESS && z < x->depth; z++) {
        for (size_t y = 0; r == CUDA_SUCCESS && y < x->height; y++) {
            r = mem_copy_locked(row_at(x->dst, x->dpitch, x->drows, y, z), x->dmode,
                                row_at(x->src, x->spitch, x->srows, y, z), x->smode, x->width);
        }
    }
    return r;
}

CUresult xfer_sync(const struct xfer *x) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    return xfer_run_locked(x);
}

/* A copy node: what runs (x) and the descriptor it was made from (d). */
struct node copy_node_of(const struct xfer *x, const CUDA_MEMCPY3D *d, struct ctx *c) {
    return (struct node){.kind = N_COPY, .ctx = c, .copy = *x, .desc = *d};
}

CUresult xfer_async(const struct xfer *x, const CUDA_MEMCPY3D *d, CUstream s, bool ptsz) {
    struct sref ref;
    CUresult r = stream_ref(s, ptsz, &ref);
    if (r != CUDA_SUCCESS) return r;
    if (ref.capturing) {
        struct node n = copy_node_of(x, d, ref.ctx);
        return stream_capture_node(&ref, &n);
    }
    return xfer_run_locked(x);
}

CUresult copy_node_make(const CUDA_MEMCPY3D *p, struct ctx *c, struct node *n) {
    struct xfer x;
    CUresult r = copy_from_3d(p, &x);
    if (r == CUDA_SUCCESS) *n = copy_node_of(&x, p, c);
    return r;
}

static CUresult copy_sync(uint64_t dst, CUmemorytype dtype, uint64_t src, CUmemorytype stype,
                          size_t n) {
    CUDA_MEMCPY3D d = copy_linear(dst, dtype, src, stype, n);
    struct xfer x;
    copy_from_3d(&d, &x); /* a linear descriptor of these memory types always converts */
    return xfer_sync(&x);
}

static CUresult copy_async(uint64_t dst, CUmemorytype dtype, uint64_t src, CUmemorytype stype,
                           size_t n, CUstream s, bool ptsz) {
    CUDA_MEMCPY3D d = copy_linear(dst, dtype, src, stype, n);
    struct xfer x;
    copy_from_3d(&d, &x);
    return xfer_async(&x, &d, s, ptsz);
}

/* ---- 2D and 3D descriptors ---------------------------------------------------------------- */

CUresult array_side(CUarray arr, size_t x, size_t y, size_t z, const struct xfer *shape,
                           bool write, size_t *pitch, size_t *rows, uint64_t *addr,
                           enum xmode *mode) {
    uint64_t base;
    size_t row_bytes, nrows, slices, elem;
    CUresult r = array_layout(arr, &base, &row_bytes, &nrows, &slices, &elem);
    if (r != CUDA_SUCCESS) return r;
    if (x % elem != 0 || x > row_bytes || shape->width > row_bytes - x || y > nrows ||
        shape->height > nrows - y || z > slices || shape->depth > slices - z)
        return CUDA_ERROR_INVALID_VALUE;
    *pitch = row_bytes;
    *rows = nrows;
    *addr = row_at(base + x, row_bytes, nrows, y, z);
    *mode = write ? X_ARRAY_WRITE : X_ARRAY_READ;
    return CUDA_SUCCESS;
}

/* One side of a 2D or 3D copy (not an array): its first byte and how it may be addressed. */
static CUresult side(CUmemorytype type, const void *host, CUdeviceptr dev, size_t x, size_t y,
                     size_t z, size_t pitch, size_t rows, bool write, uint64_t *addr,
                     enum xmode *mode) {
    uint64_t base;
    switch (type) {
    case CU_MEMORYTYPE_HOST:
        base = (uint64_t)(uintptr_t)host;
        *mode = write ? X_ANY_WRITE : X_ANY_READ;
        break;
    case CU_MEMORYTYPE_DEVICE:
        base = dev;
        *mode = write ? X_DEV_WRITE : X_DEV_READ;
        break;
    case CU_MEMORYTYPE_UNIFIED:
        base = dev;
        *mode = write ? X_ANY_WRITE : X_ANY_READ;
        break;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
    *addr = row_at(base + x, pitch, rows, y, z);
    return CUDA_SUCCESS;
}

/* A 3D descriptor as a transfer (2D ones are converted to 3D first). */
CUresult copy_from_3d(const CUDA_MEMCPY3D *p, struct xfer *x) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    *x = (struct xfer){.dpitch = p->dstPitch, .spitch = p->srcPitch, .drows = p->dstHeight,
                       .srows = p->srcHeight, .width = p->WidthInBytes, .height = p->Height,
                       .depth = p->Depth};
    CUresult r =
        p->srcMemoryType == CU_MEMORYTYPE_ARRAY
            ? array_side(p->srcArray, p->srcXInBytes, p->srcY, p->srcZ, x, false, &x->spitch,
                         &x->srows, &x->src, &x->smode)
            : side(p->srcMemoryType, p->srcHost, p->srcDevice, p->srcXInBytes, p->srcY,
                   p->srcZ, p->srcPitch, p->srcHeight, false, &x->src, &x->smode);
    if (r == CUDA_SUCCESS)
        r = p->dstMemoryType == CU_MEMORYTYPE_ARRAY
                ? array_side(p->dstArray, p->dstXInBytes, p->dstY, p->dstZ, x, true, &x->dpitch,
                             &x->drows, &x->dst, &x->dmode)
                : side(p->dstMemoryType, p->dstHost, p->dstDevice, p->dstXInBytes, p->dstY,
                       p->dstZ, p->dstPitch, p->dstHeight, true, &x->dst, &x->dmode);
    if (r != CUDA_SUCCESS) return r;
    /* Rows must not overlap their neighbours; slices must hold Height rows. */
    if (x->height > 1 && (x->dpitch < x->width || x->spitch < x->width))
        return CUDA_ERROR_INVALID_VALUE;
    if (x->depth > 1 && (x->drows < x->height || x->srows < x->height))
        return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* A 2D descriptor as a transfer, and as the 3D descriptor it is (in *d). */
static CUresult from_2d(const CUDA_MEMCPY2D *p, struct xfer *x, CUDA_MEMCPY3D *d) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    *d = (CUDA_MEMCPY3D){
        .srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcMemoryType = p->srcMemoryType,
        .srcHost = p->srcHost, .srcDevice = p->srcDevice, .srcArray = p->srcArray,
        .srcPitch = p->srcPitch, .srcHeight = p->Height,
        .dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstMemoryType = p->dstMemoryType,
        .dstHost = p->dstHost, .dstDevice = p->dstDevice, .dstArray = p->dstArray,
        .dstPitch = p->dstPitch, .dstHeight = p->Height,
        .WidthInBytes = p->WidthInBytes, .Height = p->Height, .Depth = 1};
    return copy_from_3d(d, x);
}

static CUresult copy2d_sync(const CUDA_MEMCPY2D *p) {
    struct xfer x;
    CUDA_MEMCPY3D d;
    CUresult r = from_2d(p, &x, &d);
    return r == CUDA_SUCCESS ? xfer_sync(&x) : r;
}

static CUresult copy2d_async(const CUDA_MEMCPY2D *p, CUstream s, bool ptsz) {
    struct xfer x;
    CUDA_MEMCPY3D d;
    CUresult r = from_2d(p, &x, &d);
    return r == CUDA_SUCCESS ? xfer_async(&x, &d, s, ptsz) : r;
}

static CUresult copy3d_sync(const CUDA_MEMCPY3D *p) {
    struct xfer x;
    CUresult r = copy_from_3d(p, &x);
    return r == CUDA_SUCCESS ? xfer_sync(&x) : r;
}

static CUresult copy3d_async(const CUDA_MEMCPY3D *p, CUstream s, bool ptsz) {
    struct xfer x;
    CUresult r = copy_from_3d(p, &x);
    return r == CUDA_SUCCESS ? xfer_async(&x, p, s, ptsz) : r;
}

#define HOST(p) ((uint64_t)(uintptr_t)(p))
/* The memory types of 1D copies' sides. */
#define HOST_MEM CU_MEMORYTYPE_HOST
#define DEV_MEM CU_MEMORYTYPE_DEVICE
#define ANY_MEM CU_MEMORYTYPE_UNIFIED

/* ---- unified copies ----------------------------------------------------------------------- */

SIMCUDA_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
    API_ENTER();
    API_LOCKED(copy_sync(dst, ANY_MEM, src, ANY_MEM, ByteCount));
}

SIMCUDA_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
    API_ENTER();
    API_LOCKED(copy_sync(dst, ANY_MEM, src, ANY_MEM, ByteCount));
}

SIMCUDA_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                   CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_async(dst, ANY_MEM, src, ANY_MEM, ByteCount, hStream, false));
}

SIMCUDA_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                        CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_async(dst, ANY_MEM, src, ANY_MEM, ByteCount, hStream, true));
}

/* ---- host to device ----------------------------------------------------------------------- */

SIMCUDA_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount) {
    API_ENTER();
    API_LOCKED(copy_sync(dstDevice, DEV_MEM, HOST(srcHost), HOST_MEM, ByteCount));
}

SIMCUDA_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost,
                                          size_t ByteCount) {
    API_ENTER();
    API_LOCKED(copy_sync(dstDevice, DEV_MEM, HOST(srcHost), HOST_MEM, ByteCount));
}

SIMCUDA_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
                                          size_t ByteCount, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_async(dstDevice, DEV_MEM, HOST(srcHost), HOST_MEM, ByteCount, hStream,
                          false));
}

SIMCUDA_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost,
                                               size_t ByteCount, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_async(dstDevice, DEV_MEM, HOST(srcHost), HOST_MEM, ByteCount, hStream,
                          true));
}

/* ---- device to host ----------------------------------------------------------------------- */

SIMCUDA_API CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
    API_ENTER();
    API_LOCKED(copy_sync(HOST(dstHost), HOST_MEM, srcDevice, DEV_MEM, ByteCount));
}

SIMCUDA_API CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
    API_ENTER();
    API_LOCKED(copy_sync(HOST(dstHost), HOST_MEM, srcDevice, DEV_MEM, ByteCount));
}

SIMCUDA_API CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                          CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_async(HOST(dstHost), HOST_MEM, srcDevice, DEV_MEM, ByteCount, hStream,
                          false));
}

SIMCUDA_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice,
                                               size_t ByteCount, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_async(HOST(dstHost), HOST_MEM, srcDevice, DEV_MEM, ByteCount, hStream,
                          true));
}

/* ---- device to device --------------------------------------------------------------------- */

SIMCUDA_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                     size_t ByteCount) {
    API_ENTER();
    API_LOCKED(copy_sync(dstDevice, DEV_MEM, srcDevice, DEV_MEM, ByteCount));
}

SIMCUDA_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                          size_t ByteCount) {
    API_ENTER();
    API_LOCKED(copy_sync(dstDevice, DEV_MEM, srcDevice, DEV_MEM, ByteCount));
}

SIMCUDA_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                          size_t ByteCount, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_async(dstDevice, DEV_MEM, srcDevice, DEV_MEM, ByteCount, hStream, false));
}

SIMCUDA_API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                               size_t ByteCount, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_async(dstDevice, DEV_MEM, srcDevice, DEV_MEM, ByteCount, hStream, true));
}

/* ---- 2D and 3D copies --------------------------------------------------------------------- */

SIMCUDA_API CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy) {
    API_ENTER();
    API_LOCKED(copy2d_sync(pCopy));
}

SIMCUDA_API CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy) {
    API_ENTER();
    API_LOCKED(copy2d_sync(pCopy));
}

SIMCUDA_API CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy) {
    API_ENTER();
    API_LOCKED(copy2d_sync(pCopy));
}

SIMCUDA_API CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy) {
    API_ENTER();
    API_LOCKED(copy2d_sync(pCopy));
}

SIMCUDA_API CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy2d_async(pCopy, hStream, false));
}

SIMCUDA_API CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy2d_async(pCopy, hStream, true));
}

SIMCUDA_API CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy) {
    API_ENTER();
    API_LOCKED(copy3d_sync(pCopy));
}

SIMCUDA_API CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy) {
    API_ENTER();
    API_LOCKED(copy3d_sync(pCopy));
}

SIMCUDA_API CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy3d_async(pCopy, hStream, false));
}

SIMCUDA_API CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy3d_async(pCopy, hStream, true));
}

/* ---- copies between contexts ---------------------------------------------------------------- */

/* Both contexts must be given and usable (the simulator's devices share one address space, so
 * a peer copy is a device-to-device copy once they are). */
static CUresult peer_contexts(CUcontext dst, CUcontext src) {
    struct ctx *c;
    if (!dst || !src) return CUDA_ERROR_INVALID_CONTEXT;
    CUresult r = ctx_resolve(dst, &c);
    if (r == CUDA_SUCCESS) r = ctx_resolve(src, &c);
    return r;
}

static CUresult peer_sync(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                          size_t n) {
    CUresult r = peer_contexts(dctx, sctx);
    return r == CUDA_SUCCESS ? copy_sync(dst, DEV_MEM, src, DEV_MEM, n) : r;
}

static CUresult peer_async(CUdeviceptr dst, CUcontext dctx, CUdeviceptr src, CUcontext sctx,
                           size_t n, CUstream s, bool ptsz) {
    CUresult r = peer_contexts(dctx, sctx);
    return r == CUDA_SUCCESS ? copy_async(dst, DEV_MEM, src, DEV_MEM, n, s, ptsz) : r;
}

/* A 3D peer descriptor is a 3D descriptor with the two contexts where it has reserved fields. */
static CUresult from_3d_peer(const CUDA_MEMCPY3D_PEER *p, struct xfer *x, CUDA_MEMCPY3D *d) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = peer_contexts(p->dstContext, p->srcContext);
    if (r != CUDA_SUCCESS) return r;
    *d = (CUDA_MEMCPY3D){
        .srcXInBytes = p->srcXInBytes, .srcY = p->srcY, .srcZ = p->srcZ, .srcLOD = p->srcLOD,
        .srcMemoryType = p->srcMemoryType, .srcHost = p->srcHost, .srcDevice = p->srcDevice,
        .srcArray = p->srcArray, .srcPitch = p->srcPitch, .srcHeight = p->srcHeight,
        .dstXInBytes = p->dstXInBytes, .dstY = p->dstY, .dstZ = p->dstZ, .dstLOD = p->dstLOD,
        .dstMemoryType = p->dstMemoryType, .dstHost = p->dstHost, .dstDevice = p->dstDevice,
        .dstArray = p->dstArray, .dstPitch = p->dstPitch, .dstHeight = p->dstHeight,
        .WidthInBytes = p->WidthInBytes, .Height = p->Height, .Depth = p->Depth};
    return copy_from_3d(d, x);
}

static CUresult copy3d_peer_sync(const CUDA_MEMCPY3D_PEER *p) {
    struct xfer x;
    CUDA_MEMCPY3D d;
    CUresult r = from_3d_peer(p, &x, &d);
    return r == CUDA_SUCCESS ? xfer_sync(&x) : r;
}

static CUresult copy3d_peer_async(const CUDA_MEMCPY3D_PEER *p, CUstream s, bool ptsz) {
    struct xfer x;
    CUDA_MEMCPY3D d;
    CUresult r = from_3d_peer(p, &x, &d);
    return r == CUDA_SUCCESS ? xfer_async(&x, &d, s, ptsz) : r;
}

SIMCUDA_API CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext,
                                  CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount) {
    API_ENTER();
    API_LOCKED(peer_sync(dstDevice, dstContext, srcDevice, srcContext, ByteCount));
}

SIMCUDA_API CUresult cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext,
                                       CUdeviceptr srcDevice, CUcontext srcContext,
                                       size_t ByteCount) {
    API_ENTER();
    API_LOCKED(peer_sync(dstDevice, dstContext, srcDevice, srcContext, ByteCount));
}

SIMCUDA_API CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
                                       CUdeviceptr srcDevice, CUcontext srcContext,
                                       size_t ByteCount, CUstream hStream) {
    API_ENTER();
    API_LOCKED(peer_async(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, false));
}

SIMCUDA_API CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext,
                                            CUdeviceptr srcDevice, CUcontext srcContext,
                                            size_t ByteCount, CUstream hStream) {
    API_ENTER();
    API_LOCKED(peer_async(dstDevice, dstContext, srcDevice, srcContext, ByteCount, hStream, true));
}

SIMCUDA_API CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy) {
    API_ENTER();
    API_LOCKED(copy3d_peer_sync(pCopy));
}

SIMCUDA_API CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *pCopy) {
    API_ENTER();
    API_LOCKED(copy3d_peer_sync(pCopy));
}

SIMCUDA_API CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy3d_peer_async(pCopy, hStream, false));
}

SIMCUDA_API CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *pCopy,
                                              CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy3d_peer_async(pCopy, hStream, true));
}
