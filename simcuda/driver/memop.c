/*
 * Stream memory operations: cuStreamWaitValue32/64, cuStreamWriteValue32/64 and
 * cuStreamBatchMemOp, with their _v2 and per-thread variants.
 *
 * Streams are always idle here, so a write stores its value when it is enqueued, and a wait
 * is checked then: a condition that does not hold could only be met by a later write, which
 * an idle device never waits for, so it is taken as met (the work after it runs at once, as a
 * real device would run it once another agent wrote the value). The address must be device
 * memory or page-locked host memory, aligned to the value's size; flags are checked as the
 * driver documents them. A batch is validated whole before any of it runs. On a capturing
 * stream each operation becomes a node of its own (the driver makes one batch node of a call:
 * a simulator simplification), which every launch runs.
 */
#include "internal.h"

#include <string.h>

#define WAIT_FLUSH (1u << 30)
#define MAX_BATCH 256

/* The host bytes of an operation's location. */
static CUresult location(uint64_t addr, bool wide, bool write, char **host) {
    size_t n = wide ? 8 : 4;
    if (addr == 0 || addr % n != 0) return CUDA_ERROR_INVALID_VALUE;
    size_t contig;
    CUresult r = xlate(addr, n, write ? X_DEV_WRITE : X_DEV_READ, host, &contig);
    if (r == CUDA_SUCCESS && contig < n) r = CUDA_ERROR_INVALID_VALUE;
    return r;
}

/* Checks one operation; `run` also carries it out. Barriers exist in the _v2 API only. */
static CUresult one_op(const CUstreamBatchMemOpParams *p, bool v2, bool run) {
    char *host;
    CUresult r;
    switch (p->operation) {
    case CU_STREAM_MEM_OP_WAIT_VALUE_32:
    case CU_STREAM_MEM_OP_WAIT_VALUE_64: {
        bool wide = p->operation == CU_STREAM_MEM_OP_WAIT_VALUE_64;
        if ((p->waitValue.flags & ~WAIT_FLUSH) > CU_STREAM_WAIT_VALUE_NOR)
            return CUDA_ERROR_INVALID_VALUE;
        /* Met or not, the work after it runs now (see the comment at the top). */
        return location(p->waitValue.address, wide, false, &host);
    }
    case CU_STREAM_MEM_OP_WRITE_VALUE_32:
    case CU_STREAM_MEM_OP_WRITE_VALUE_64: {
        bool wide = p->operation == CU_STREAM_MEM_OP_WRITE_VALUE_64;
        if (p->writeValue.flags > CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER)
            return CUDA_ERROR_INVALID_VALUE;
        r = location(p->writeValue.address, wide, true, &host);
        if (r != CUDA_SUCCESS || !run) return r;
        if (wide)
            memcpy(host, &p->writeValue.value64, 8);
        else
            memcpy(host, &p->writeValue.value, 4);
        return CUDA_SUCCESS;
    }
    case CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES:
        return p->flushRemoteWrites.flags == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    case CU_STREAM_MEM_OP_BARRIER:
        /* CU_STREAM_MEMORY_BARRIER_TYPE_SYS (0) or _GPU (1). */
        return v2 && p->memoryBarrier.flags <= 1 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    default: return CUDA_ERROR_INVALID_VALUE;
    }
}

static CUresult batch_locked(CUstream s, bool ptsz, unsigned int count,
                             const CUstreamBatchMemOpParams *ops, unsigned int flags, bool v2) {
    if (count == 0 || count >= MAX_BATCH || !ops || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    struct sref ref;
    CUresult r = stream_ref(s, ptsz, &ref);
    if (r != CUDA_SUCCESS) return r;
    for (unsigned int i = 0; i < count; i++) {
        r = one_op(&ops[i], v2, false);
        if (r != CUDA_SUCCESS) return r;
    }
    for (unsigned int i = 0; i < count && r == CUDA_SUCCESS; i++) {
        if (ref.capturing)
            r = stream_capture_node(&ref, &(struct node){.kind = N_MEMOP, .memop = ops[i]});
        else
            one_op(&ops[i], v2, true);
    }
    return r;
}

CUresult memop_run_locked(const CUstreamBatchMemOpParams *p) {
    return one_op(p, true, true);
}

/* A single wait or write as a batch of one. */
static CUresult single(CUstream s, bool ptsz, CUstreamBatchMemOpType op, CUdeviceptr addr,
                       uint64_t value, unsigned int flags) {
    CUstreamBatchMemOpParams p;
    memset(&p, 0, sizeof p);
    p.operation = op;
    p.waitValue.address = addr;
    if (op == CU_STREAM_MEM_OP_WAIT_VALUE_64 || op == CU_STREAM_MEM_OP_WRITE_VALUE_64)
        p.waitValue.value64 = value;
    else
        p.waitValue.value = (cuuint32_t)value;
    p.waitValue.flags = flags;
    sim_lock();
    CUresult r = batch_locked(s, ptsz, 1, &p, 0, true);
    sim_unlock();
    return r;
}

#define VALUE_APIS(name, type, op)                                                             \
    SIMCUDA_API CUresult name(CUstream stream, CUdeviceptr addr, type value,                  \
                              unsigned int flags) {                                             \
        API_ENTER();                                                                           \
        return single(stream, false, op, addr, value, flags);                                  \
    }                                                                                          \
    SIMCUDA_API CUresult name##_ptsz(CUstream stream, CUdeviceptr addr, type value,           \
                                     unsigned int flags) {                                      \
        API_ENTER();                                                                           \
        return single(stream, true, op, addr, value, flags);                                   \
    }                                                                                          \
    SIMCUDA_API CUresult name##_v2(CUstream stream, CUdeviceptr addr, type value,             \
                                   unsigned int flags) {                                        \
        API_ENTER();                                                                           \
        return single(stream, false, op, addr, value, flags);                                  \
    }                                                                                          \
    SIMCUDA_API CUresult name##_v2_ptsz(CUstream stream, CUdeviceptr addr, type value,        \
                                        unsigned int flags) {                                   \
        API_ENTER();                                                                           \
        return single(stream, true, op, addr, value, flags);                                   \
    }

VALUE_APIS(cuStreamWaitValue32, cuuint32_t, CU_STREAM_MEM_OP_WAIT_VALUE_32)
VALUE_APIS(cuStreamWaitValue64, cuuint64_t, CU_STREAM_MEM_OP_WAIT_VALUE_64)
VALUE_APIS(cuStreamWriteValue32, cuuint32_t, CU_STREAM_MEM_OP_WRITE_VALUE_32)
VALUE_APIS(cuStreamWriteValue64, cuuint64_t, CU_STREAM_MEM_OP_WRITE_VALUE_64)

SIMCUDA_API CUresult cuStreamBatchMemOp(CUstream stream, unsigned int count,
                                        CUstreamBatchMemOpParams *paramArray, unsigned int flags) {
    API_ENTER();
    API_LOCKED(batch_locked(stream, false, count, paramArray, flags, false));
}

SIMCUDA_API CUresult cuStreamBatchMemOp_ptsz(CUstream stream, unsigned int count,
                                             CUstreamBatchMemOpParams *paramArray,
                                             unsigned int flags) {
    API_ENTER();
    API_LOCKED(batch_locked(stream, true, count, paramArray, flags, false));
}

SIMCUDA_API CUresult cuStreamBatchMemOp_v2(CUstream stream, unsigned int count,
                                           CUstreamBatchMemOpParams *paramArray,
                                           unsigned int flags) {
    API_ENTER();
    API_LOCKED(batch_locked(stream, false, count, paramArray, flags, true));
}

SIMCUDA_API CUresult cuStreamBatchMemOp_v2_ptsz(CUstream stream, unsigned int count,
                                                CUstreamBatchMemOpParams *paramArray,
                                                unsigned int flags) {
    API_ENTER();
    API_LOCKED(batch_locked(stream, true, count, paramArray, flags, true));
}
