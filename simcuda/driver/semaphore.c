/*
 * External semaphores: cuImportExternalSemaphore, cuSignalExternalSemaphoresAsync and
 * cuWaitExternalSemaphoresAsync (each with _ptsz), cuDestroyExternalSemaphore.
 *
 * Only semaphores from a file descriptor are imported: an opaque (binary) one and a timeline
 * one. The descriptor must be open; the driver owns it once the import succeeded, so it is
 * closed then. Other types are CUDA_ERROR_NOT_SUPPORTED (a simulator limit: Windows handles,
 * D3D fences and keyed mutexes, NvSciSync).
 *
 * A signal takes effect when it is queued, streams being always idle: a binary semaphore
 * becomes signaled, a timeline semaphore takes the signal's value. A wait is checked then and
 * taken as met, as a stream memory operation's wait is (memop.c): an idle device never waits
 * for a later signal, which only another agent (Vulkan, another process) could give here; a
 * binary semaphore's wait leaves it unsignaled. Flags must be 0 (their one flag is NvSciSync's).
 * Every semaphore of a call is checked before any takes effect. On a capturing stream each
 * semaphore of a call becomes a node of its own (the driver makes one node of a call: a
 * simulator simplification), which every launch runs, as above.
 */
#include <fcntl.h>
#include <stddef.h>
#include <unistd.h>

#include "internal.h"

_Static_assert(sizeof(CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC) == 96, "handle descriptor is 96 bytes");
_Static_assert(sizeof(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS) == 144, "signal parameters are 144 bytes");
_Static_assert(sizeof(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS) == 144, "wait parameters are 144 bytes");
_Static_assert(offsetof(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS, params.keyedMutex.key) == 16 &&
                   offsetof(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS, flags) == 72,
               "signal parameter offsets");
_Static_assert(offsetof(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS, params.keyedMutex.key) == 16 &&
                   offsetof(CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS, flags) == 72,
               "wait parameter offsets");

struct extsem {
    struct hdr h;
    CUexternalSemaphoreHandleType type;
    bool signaled;    /* a binary semaphore's state */
    uint64_t value;   /* a timeline semaphore's value */
};

static CUresult import(CUexternalSemaphore *out, const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *desc) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!out || !desc || desc->flags) return CUDA_ERROR_INVALID_VALUE;
    if (desc->type != CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD &&
        desc->type != CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD)
        return desc->type >= CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_WIN32 &&
                       desc->type <= CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_WIN32
                   ? CUDA_ERROR_NOT_SUPPORTED
                   : CUDA_ERROR_INVALID_VALUE;
    if (desc->handle.fd < 0 || fcntl(desc->handle.fd, F_GETFD) < 0) return CUDA_ERROR_INVALID_VALUE;
    struct extsem *s = obj_new(HK_EXTSEM, sizeof *s);
    if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
    s->type = desc->type;
    close(desc->handle.fd);
    *out = (CUexternalSemaphore)(uintptr_t)H(s);
    return CUDA_SUCCESS;
}

/* Checks a call's stream (into `ref`) and semaphores. */
static CUresult check(const CUexternalSemaphore *handles, const void *params, unsigned int n,
                      CUstream stream, bool ptsz, struct sref *ref) {
    CUresult r = stream_ref(stream, ptsz, ref);
    if (r != CUDA_SUCCESS) return r;
    if (n && (!handles || !params)) return CUDA_ERROR_INVALID_VALUE;
    for (unsigned int i = 0; i < n; i++)
        if (!obj_get(HK_EXTSEM, (uint64_t)(uintptr_t)handles[i])) return CUDA_ERROR_INVALID_HANDLE;
    return CUDA_SUCCESS;
}

/* Appends one node per semaphore of a call to the capture: a signal's (with `signal`, its
 * parameters) or a wait's. */
static CUresult capture(struct sref *ref, const CUexternalSemaphore *handles,
                        const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *signal, unsigned int n) {
    CUresult r = CUDA_SUCCESS;
    for (unsigned int i = 0; i < n && r == CUDA_SUCCESS; i++) {
        struct node node = {.kind = signal ? N_SEM_SIGNAL : N_SEM_WAIT,
                            .sem = (uint64_t)(uintptr_t)handles[i]};
        if (signal) node.sem_value = signal[i].params.fence.value;
        r = stream_capture_node(ref, &node);
    }
    return r;
}

void semaphore_signal_locked(uint64_t handle, uint64_t value) {
    struct extsem *s = obj_get(HK_EXTSEM, handle);
    if (!s) return;
    if (s->type == CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD)
        s->signaled = true;
    else
        s->value = value;
}

void semaphore_wait_locked(uint64_t handle) {
    struct extsem *s = obj_get(HK_EXTSEM, handle);
    if (s) s->signaled = false;
}


static CUresult signal_locked(const CUexternalSemaphore *handles,
                              const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *params, unsigned int n,
                              CUstream stream, bool ptsz) {
    struct sref ref;
    CUresult r = check(handles, params, n, stream, ptsz, &ref);
    if (r != CUDA_SUCCESS) return r;
    for (unsigned int i = 0; i < n; i++)
        if (params[i].flags) return CUDA_ERROR_INVALID_VALUE;
    if (ref.capturing) return capture(&ref, handles, params, n);
    for (unsigned int i = 0; i < n; i++)
        semaphore_signal_locked((uint64_t)(uintptr_t)handles[i], params[i].params.fence.value);
    return CUDA_SUCCESS;
}

static CUresult wait_locked(const CUexternalSemaphore *handles,
                            const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *params, unsigned int n,
                            CUstream stream, bool ptsz) {
    struct sref ref;
    CUresult r = check(handles, params, n, stream, ptsz, &ref);
    if (r != CUDA_SUCCESS) return r;
    for (unsigned int i = 0; i < n; i++)
        if (params[i].flags) return CUDA_ERROR_INVALID_VALUE;
    if (ref.capturing) return capture(&ref, handles, NULL, n);
    /* Met or not, the work after it runs now (see the comment at the top). */
    for (unsigned int i = 0; i < n; i++) semaphore_wait_locked((uint64_t)(uintptr_t)handles[i]);
    return CUDA_SUCCESS;
}

static CUresult destroy(CUexternalSemaphore handle) {
    struct extsem *s = obj_get(HK_EXTSEM, (uint64_t)(uintptr_t)handle);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    s->h.alive = false;
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuImportExternalSemaphore(CUexternalSemaphore *extSem_out,
                                               const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *semHandleDesc) {
    API_ENTER();
    API_LOCKED(import(extSem_out, semHandleDesc));
}

SIMCUDA_API CUresult cuSignalExternalSemaphoresAsync(
    const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *paramsArray,
    unsigned int numExtSems, CUstream stream) {
    API_ENTER();
    API_LOCKED(signal_locked(extSemArray, paramsArray, numExtSems, stream, false));
}

SIMCUDA_API CUresult cuSignalExternalSemaphoresAsync_ptsz(
    const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *paramsArray,
    unsigned int numExtSems, CUstream stream) {
    API_ENTER();
    API_LOCKED(signal_locked(extSemArray, paramsArray, numExtSems, stream, true));
}

SIMCUDA_API CUresult cuWaitExternalSemaphoresAsync(
    const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *paramsArray,
    unsigned int numExtSems, CUstream stream) {
    API_ENTER();
    API_LOCKED(wait_locked(extSemArray, paramsArray, numExtSems, stream, false));
}

SIMCUDA_API CUresult cuWaitExternalSemaphoresAsync_ptsz(
    const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *paramsArray,
    unsigned int numExtSems, CUstream stream) {
    API_ENTER();
    API_LOCKED(wait_locked(extSemArray, paramsArray, numExtSems, stream, true));
}

SIMCUDA_API CUresult cuDestroyExternalSemaphore(CUexternalSemaphore extSem) {
    API_ENTER();
    API_LOCKED(destroy(extSem));
}
