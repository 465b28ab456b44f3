/*
 * event.c: events, and the context-wide event calls (cuCtxRecordEvent, cuCtxWaitEvent).
 *
 * Work runs when it is enqueued, so a recorded event is complete at once. An event recorded on
 * a capturing stream records nothing: it becomes the capture's, remembering the stream's
 * current dependencies, for the streams that wait for it to join the capture (stream.c).
 */
#include <time.h>

#include "internal.h"

/* The capture under way whose event ev is (its origin stream), or NULL: the event was last
   recorded outside a capture, or in one that has ended since. */
struct stream *event_capture(const struct event *ev) {
    struct stream *o = ev->capture_origin;
    if (!o || !o->h.alive || o->capture_id != ev->capture_id ||
        o->capture == CU_STREAM_CAPTURE_STATUS_NONE)
        return NULL;
    return o;
}

#define EVENT_FLAGS (CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING | CU_EVENT_INTERPROCESS)

static CUresult event_create(CUevent *ph, unsigned int flags) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!ph || (flags & ~(unsigned)EVENT_FLAGS)) return CUDA_ERROR_INVALID_VALUE;
    if ((flags & CU_EVENT_INTERPROCESS) && !(flags & CU_EVENT_DISABLE_TIMING))
        return CUDA_ERROR_INVALID_VALUE;
    struct event *e = obj_new(HK_EVENT, sizeof *e);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    e->ctx = c;
    e->flags = flags;
    *ph = (CUevent)(uintptr_t)H(e);
    return CUDA_SUCCESS;
}

static struct event *event_get(CUevent h) { return obj_get(HK_EVENT, (uint64_t)(uintptr_t)h); }

uint64_t event_handle(CUevent h) {
    struct event *e = event_get(h);
    return e ? H(e) : 0;
}

static CUresult event_destroy(CUevent h) {
    struct event *e = event_get(h);
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    e->h.alive = false;
    return CUDA_SUCCESS;
}

static CUresult event_record(CUevent h, CUstream s, unsigned int flags, bool ptsz) {
    if (flags & ~(unsigned)CU_EVENT_RECORD_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    struct event *e = event_get(h);
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    struct sref r;
    CUresult res = stream_ref(s, ptsz, &r);
    if (res != CUDA_SUCCESS) return res;
    /* External: an event record node of the capture, recorded at each launch of the graph
     * (invalid outside a capture). */
    if (flags & CU_EVENT_RECORD_EXTERNAL) {
        if (!r.capturing) return CUDA_ERROR_INVALID_VALUE;
        return stream_capture_node(&r, &(struct node){.kind = N_EVENT_RECORD, .event = H(e)});
    }
    if (r.capturing) {
        if (!depset_assign(&e->deps, r.st->deps.v, r.st->deps.n)) return CUDA_ERROR_OUT_OF_MEMORY;
        e->capture_id = r.st->capture_id;
        e->capture_origin = r.st->origin ? r.st->origin : r.st;
        return CUDA_SUCCESS;
    }
    event_mark_recorded(H(e));
    return CUDA_SUCCESS;
}

void event_mark_recorded(uint64_t event) {
    struct event *e = obj_get(HK_EVENT, event);
    if (!e) return;
    e->capture_id = 0;
    e->capture_origin = NULL;
    e->deps.n = 0;
    e->recorded = true;
    clock_gettime(CLOCK_MONOTONIC, &e->when);
}

static CUresult event_query(CUevent h, bool synchronize) {
    struct event *e = event_get(h);
    if (!e) return CUDA_ERROR_INVALID_HANDLE;
    if (synchronize) pools_sync(e->ctx->dev);
    return CUDA_SUCCESS;
}

static CUresult event_elapsed(float *ms, CUevent start, CUevent end) {
    if (!ms) return CUDA_ERROR_INVALID_VALUE;
    struct event *a = event_get(start), *b = event_get(end);
    if (!a || !b || !a->recorded || !b->recorded) return CUDA_ERROR_INVALID_HANDLE;
    if ((a->flags | b->flags) & CU_EVENT_DISABLE_TIMING) return CUDA_ERROR_INVALID_HANDLE;
    double d = (double)(b->when.tv_sec - a->when.tv_sec) * 1e3 +
               (double)(b->when.tv_nsec - a->when.tv_nsec) / 1e6;
    *ms = (float)d;
    return CUDA_SUCCESS;
}

/* Streams of context c under capture are invalidated: a context-wide event call is refused
 * while any is (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED). True if there was one. */
static bool ctx_captures_refused(const struct ctx *c) {
    bool any = false;
    for (size_t i = 0; i < obj_count(HK_STREAM); i++) {
        struct stream *s = obj_at(HK_STREAM, i);
        if (s->h.alive && s->ctx == c && s->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE) {
            stream_capture_invalidate(s);
            any = true;
        }
    }
    return any;
}

/* cuCtxRecordEvent (12.5): the event captures all of the context's work so far (finished at
 * once here). The event must be the context's. */
static CUresult ctx_record_event(CUcontext h, CUevent e) {
    struct ctx *c;
    CUresult r = ctx_resolve(h, &c);
    if (r != CUDA_SUCCESS) return r;
    struct event *ev = event_get(e);
    if (!ev || ev->ctx != c) return CUDA_ERROR_INVALID_HANDLE;
    if (ctx_captures_refused(c)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    event_mark_recorded(H(ev));
    return CUDA_SUCCESS;
}

/* cuCtxWaitEvent (12.5): all later work of the context waits for the event, which may be
 * another context's (nothing to wait for on the simulated device). Refused for an event of a
 * capture under way, which is invalidated, and while a stream of the context captures. */
static CUresult ctx_wait_event(CUcontext h, CUevent e) {
    struct ctx *c;
    CUresult r = ctx_resolve(h, &c);
    if (r != CUDA_SUCCESS) return r;
    struct event *ev = event_get(e);
    if (!ev) return CUDA_ERROR_INVALID_HANDLE;
    struct stream *origin = event_capture(ev);
    if (origin) {
        stream_capture_invalidate(origin);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    if (ctx_captures_refused(c)) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuCtxRecordEvent(CUcontext hCtx, CUevent hEvent) {
    API_ENTER();
    API_LOCKED(ctx_record_event(hCtx, hEvent));
}

SIMCUDA_API CUresult cuCtxWaitEvent(CUcontext hCtx, CUevent hEvent) {
    API_ENTER();
    API_LOCKED(ctx_wait_event(hCtx, hEvent));
}

SIMCUDA_API CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags) {
    API_ENTER();
    API_LOCKED(event_create(phEvent, Flags));
}

SIMCUDA_API CUresult cuEventDestroy(CUevent hEvent) {
    API_ENTER();
    API_LOCKED(event_destroy(hEvent));
}

SIMCUDA_API CUresult cuEventDestroy_v2(CUevent hEvent) {
    API_ENTER();
    API_LOCKED(event_destroy(hEvent));
}

SIMCUDA_API CUresult cuEventRecord(CUevent hEvent, CUstream hStream) {
    API_ENTER();
    API_LOCKED(event_record(hEvent, hStream, 0, false));
}

SIMCUDA_API CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream) {
    API_ENTER();
    API_LOCKED(event_record(hEvent, hStream, 0, true));
}

SIMCUDA_API CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags) {
    API_ENTER();
    API_LOCKED(event_record(hEvent, hStream, flags, false));
}

SIMCUDA_API CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream,
                                                 unsigned int flags) {
    API_ENTER();
    API_LOCKED(event_record(hEvent, hStream, flags, true));
}

SIMCUDA_API CUresult cuEventQuery(CUevent hEvent) {
    API_ENTER();
    API_LOCKED(event_query(hEvent, false));
}

SIMCUDA_API CUresult cuEventSynchronize(CUevent hEvent) {
    API_ENTER();
    API_LOCKED(event_query(hEvent, true));
}

SIMCUDA_API CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
    API_ENTER();
    API_LOCKED(event_elapsed(pMilliseconds, hStart, hEnd));
}

SIMCUDA_API CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd) {
    API_ENTER();
    API_LOCKED(event_elapsed(pMilliseconds, hStart, hEnd));
}
