/*
 * copybatch.c: batches of copies (cuMemcpyBatchAsync, 1D, unified addressing) and of 3D copies
 * (cuMemcpy3DBatchAsync), checked and run as copy.c runs one copy, each a copy node when the
 * stream is capturing.
 */
#include <string.h>

#include "internal.h"

/* ---- batches of copies ---------------------------------------------------------------------- */

/* Checks the batch and its attributes, then every copy, then runs them in order (a capture
 * gets one copy node per copy). */
static CUresult copy_batch(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes, size_t count,
                           CUmemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                           size_t *failIdx, CUstream s, bool ptsz) {
    if (failIdx) *failIdx = SIZE_MAX;
    if (count == 0 || !dsts || !srcs || !sizes || !attrs || !attrsIdxs || numAttrs == 0 ||
        numAttrs > count || attrsIdxs[0] != 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (size_t j = 0; j < numAttrs; j++) {
        if (j > 0 && (attrsIdxs[j] <= attrsIdxs[j - 1] || attrsIdxs[j] >= count))
            return CUDA_ERROR_INVALID_VALUE;
        if (attrs[j].srcAccessOrder < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
            attrs[j].srcAccessOrder > CU_MEMCPY_SRC_ACCESS_ORDER_ANY)
            return CUDA_ERROR_INVALID_VALUE;
    }
    struct sref ref;
    CUresult r = stream_ref(s, ptsz, &ref);
    if (r != CUDA_SUCCESS) return r;
    for (size_t i = 0; i < count; i++) {
        r = mem_copy_valid(dsts[i], X_ANY_WRITE, srcs[i], X_ANY_READ, sizes[i]);
        if (r != CUDA_SUCCESS) {
            if (failIdx) *failIdx = i;
            return r;
        }
    }
    for (size_t i = 0; i < count; i++) {
        CUDA_MEMCPY3D d = copy_linear(dsts[i], CU_MEMORYTYPE_UNIFIED, srcs[i], CU_MEMORYTYPE_UNIFIED,
                                 sizes[i]);
        struct xfer x;
        copy_from_3d(&d, &x);
        struct node n = copy_node_of(&x, &d, ref.ctx);
        r = ref.capturing ? stream_capture_node(&ref, &n) : xfer_run_locked(&x);
        if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                        size_t count, CUmemcpyAttributes *attrs,
                                        size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,
                                        CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream,
                          false));
}

SIMCUDA_API CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                             size_t count, CUmemcpyAttributes *attrs,
                                             size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,
                                             CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, failIdx, hStream,
                          true));
}

SIMCUDA_API CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                           size_t count, CUmemcpyAttributes *attrs,
                                           size_t *attrsIdxs, size_t numAttrs, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, hStream,
                          false));
}

SIMCUDA_API CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs,
                                                size_t *sizes, size_t count,
                                                CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                                size_t numAttrs, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_batch(dsts, srcs, sizes, count, attrs, attrsIdxs, numAttrs, NULL, hStream,
                          true));
}

SIMCUDA_API CUresult cuMemcpyWithAttributesAsync(CUdeviceptr dst, CUdeviceptr src, size_t size,
                                                 CUmemcpyAttributes *attr, CUstream hStream) {
    size_t first = 0;
    API_ENTER();
    API_LOCKED(copy_batch(&dst, &src, &size, 1, attr, &first, 1, NULL, hStream, false));
}

SIMCUDA_API CUresult cuMemcpyWithAttributesAsync_ptsz(CUdeviceptr dst, CUdeviceptr src,
                                                      size_t size, CUmemcpyAttributes *attr,
                                                      CUstream hStream) {
    size_t first = 0;
    API_ENTER();
    API_LOCKED(copy_batch(&dst, &src, &size, 1, attr, &first, 1, NULL, hStream, true));
}

/* ---- batches of 3D copies ------------------------------------------------------------------- */

/* Bytes per element of a 3D batch operation: those of its array sides (which must agree), or
 * one byte between two pointers. */
static CUresult batch_element(const CUDA_MEMCPY3D_BATCH_OP *op, size_t *elem) {
    *elem = 0;
    const CUmemcpy3DOperand *sides[2] = {&op->src, &op->dst};
    for (int i = 0; i < 2; i++) {
        if (sides[i]->type != CU_MEMCPY_OPERAND_TYPE_ARRAY) continue;
        uint64_t base;
        size_t row, rows, slices, e;
        CUresult r = array_layout(sides[i]->op.array.array, &base, &row, &rows, &slices, &e);
        if (r != CUDA_SUCCESS) return r;
        if (*elem && *elem != e) return CUDA_ERROR_INVALID_VALUE;
        *elem = e;
    }
    if (!*elem) *elem = 1;
    return CUDA_SUCCESS;
}

/* One side of a 3D batch operation, into x (its address, mode, pitch and rows) and the 3D
 * descriptor d: a pointer (unified memory; row length and layer height in elements, 0 for
 * packed) or an array (its own rows; the offset in elements). */
static CUresult batch_side(const CUmemcpy3DOperand *o, const CUextent3D *e, size_t elem, bool write,
                           struct xfer *x, CUDA_MEMCPY3D *d) {
    uint64_t *addr = write ? &x->dst : &x->src;
    enum xmode *mode = write ? &x->dmode : &x->smode;
    size_t *pitch = write ? &x->dpitch : &x->spitch;
    size_t *rows = write ? &x->drows : &x->srows;
    if (o->type == CU_MEMCPY_OPERAND_TYPE_ARRAY) {
        const CUoffset3D *at = &o->op.array.offset;
        if (at->x > SIZE_MAX / elem) return CUDA_ERROR_INVALID_VALUE;
        CUresult r = array_side(o->op.array.array, at->x * elem, at->y, at->z, x, write, pitch,
                                rows, addr, mode);
        if (r != CUDA_SUCCESS) return r;
        if (write) {
            d->dstMemoryType = CU_MEMORYTYPE_ARRAY, d->dstArray = o->op.array.array;
            d->dstXInBytes = at->x * elem, d->dstY = at->y, d->dstZ = at->z;
        } else {
            d->srcMemoryType = CU_MEMORYTYPE_ARRAY, d->srcArray = o->op.array.array;
            d->srcXInBytes = at->x * elem, d->srcY = at->y, d->srcZ = at->z;
        }
        return CUDA_SUCCESS;
    }
    if (o->type != CU_MEMCPY_OPERAND_TYPE_POINTER) return CUDA_ERROR_INVALID_VALUE;
    size_t row = o->op.ptr.rowLength, layer = o->op.ptr.layerHeight;
    if ((row && row < e->width) || (layer && layer < e->height)) return CUDA_ERROR_INVALID_VALUE;
    if ((row ? row : e->width) > SIZE_MAX / elem) return CUDA_ERROR_INVALID_VALUE;
    *addr = o->op.ptr.ptr;
    *mode = write ? X_ANY_WRITE : X_ANY_READ;
    *pitch = (row ? row : e->width) * elem;
    *rows = layer ? layer : e->height;
    if (write) {
        d->dstMemoryType = CU_MEMORYTYPE_UNIFIED, d->dstDevice = *addr;
        d->dstPitch = *pitch, d->dstHeight = *rows;
    } else {
        d->srcMemoryType = CU_MEMORYTYPE_UNIFIED, d->srcDevice = *addr;
        d->srcPitch = *pitch, d->srcHeight = *rows;
    }
    return CUDA_SUCCESS;
}

/* An operation of a 3D batch as a transfer (the extent in elements: bytes between two
 * pointers, the arrays' elements otherwise), and as the 3D descriptor it is (in *desc). */
static CUresult from_batch_op(const CUDA_MEMCPY3D_BATCH_OP *op, struct xfer *x,
                              CUDA_MEMCPY3D *desc) {
    if (op->srcAccessOrder < CU_MEMCPY_SRC_ACCESS_ORDER_STREAM ||
        op->srcAccessOrder > CU_MEMCPY_SRC_ACCESS_ORDER_ANY)
        return CUDA_ERROR_INVALID_VALUE;
    const CUextent3D *e = &op->extent;
    if (!e->width || !e->height || !e->depth) return CUDA_ERROR_INVALID_VALUE;
    size_t elem;
    CUresult r = batch_element(op, &elem);
    if (r != CUDA_SUCCESS) return r;
    if (e->width > SIZE_MAX / elem) return CUDA_ERROR_INVALID_VALUE;
    *x = (struct xfer){.width = e->width * elem, .height = e->height, .depth = e->depth};
    *desc = (CUDA_MEMCPY3D){.WidthInBytes = x->width, .Height = x->height, .Depth = x->depth};
    r = batch_side(&op->src, e, elem, false, x, desc);
    if (r == CUDA_SUCCESS) r = batch_side(&op->dst, e, elem, true, x, desc);
    return r;
}

/* Checks the batch, then every operation (a failure sets *failIdx to its index), then runs them
 * in order (a capture gets one copy node per operation). Flags must be 0. */
static CUresult copy_3d_batch(size_t n, const CUDA_MEMCPY3D_BATCH_OP *ops, size_t *failIdx,
                              unsigned long long flags, CUstream s, bool ptsz) {
    if (failIdx) *failIdx = SIZE_MAX;
    if (n == 0 || !ops || flags) return CUDA_ERROR_INVALID_VALUE;
    struct sref ref;
    CUresult r = stream_ref(s, ptsz, &ref);
    if (r != CUDA_SUCCESS) return r;
    struct xfer x;
    CUDA_MEMCPY3D d;
    for (size_t i = 0; i < n; i++) {
        r = from_batch_op(&ops[i], &x, &d);
        if (r == CUDA_SUCCESS) r = xfer_check(&x);
        if (r != CUDA_SUCCESS) {
            if (failIdx) *failIdx = i;
            return r;
        }
    }
    for (size_t i = 0; i < n; i++) {
        from_batch_op(&ops[i], &x, &d);
        struct node node = copy_node_of(&x, &d, ref.ctx);
        r = ref.capturing ? stream_capture_node(&ref, &node) : xfer_run_locked(&x);
        if (r != CUDA_SUCCESS) return r;
    }
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                          size_t *failIdx, unsigned long long flags,
                                          CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_3d_batch(numOps, opList, failIdx, flags, hStream, false));
}

SIMCUDA_API CUresult cuMemcpy3DBatchAsync_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                               size_t *failIdx, unsigned long long flags,
                                               CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_3d_batch(numOps, opList, failIdx, flags, hStream, true));
}

SIMCUDA_API CUresult cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                             unsigned long long flags, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_3d_batch(numOps, opList, NULL, flags, hStream, false));
}

SIMCUDA_API CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                                  unsigned long long flags, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_3d_batch(numOps, opList, NULL, flags, hStream, true));
}

SIMCUDA_API CUresult cuMemcpy3DWithAttributesAsync(CUDA_MEMCPY3D_BATCH_OP *op,
                                                   unsigned long long flags, CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_3d_batch(1, op, NULL, flags, hStream, false));
}

SIMCUDA_API CUresult cuMemcpy3DWithAttributesAsync_ptsz(CUDA_MEMCPY3D_BATCH_OP *op,
                                                        unsigned long long flags,
                                                        CUstream hStream) {
    API_ENTER();
    API_LOCKED(copy_3d_batch(1, op, NULL, flags, hStream, true));
}
