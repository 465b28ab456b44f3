/*
 * stream.c: streams, stream callbacks and a minimal stream capture (events: event.c; the
 * graphs a capture builds: graphstore.c).
 *
 * All work executes when it is enqueued, so every stream is always idle and every recorded
 * event complete; what the simulator keeps exact is API-level state: which handles are live,
 * which context owns them, and whether a stream is capturing. NULL, CU_STREAM_LEGACY and
 * CU_STREAM_PER_THREAD are valid streams of the calling thread's current context.
 *
 * Capture: cuStreamBeginCapture(_v2) on a created stream starts it; copies, memsets, kernels
 * and host functions enqueued while capturing are not executed but appended, in order, to the
 * graph being built (graph.c instantiates and launches it), each depending on the stream's
 * current dependencies, which then become that node alone; stream-ordered allocations return
 * graph addresses (see pool.c); synchronising or querying a capturing stream, or adding a
 * stream callback to it, fails with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidates the
 * capture; cuStreamEndCapture returns the CUgraph.
 *
 * Cross-stream capture: an event recorded on a capturing stream records nothing but marks the
 * event as the capture's and remembers the stream's current dependencies; a created stream that
 * waits for it joins the capture (its work goes into the same graph, its current dependencies
 * start as the event's) until the capture ends on the stream that began it, which releases
 * every stream that joined; a stream already in the capture that waits for it adds the event's
 * dependencies to its own. Ending the capture on a joined stream fails with
 * CUDA_ERROR_STREAM_CAPTURE_UNMATCHED; waiting for a capture's event from a stream in another
 * capture fails with CUDA_ERROR_STREAM_CAPTURE_ISOLATION, from the legacy or per-thread
 * default stream with CUDA_ERROR_STREAM_CAPTURE_IMPLICIT; invalidating a joined stream's
 * capture invalidates the whole capture. (A simulator limit: the end does not check that every
 * joined stream was joined back into the origin stream.)
 */
#include <string.h>

#include "internal.h"

#define PRIORITY_LEAST 0
#define PRIORITY_GREATEST (-5)

static bool special_stream(CUstream s) { return (uintptr_t)s <= (uintptr_t)CU_STREAM_PER_THREAD; }

CUresult stream_ref(CUstream s, bool ptsz, struct sref *out) {
    (void)ptsz; /* both default streams are idle, so the two flavours behave alike */
    if (special_stream(s)) {
        out->st = NULL;
        out->capturing = false;
        return ctx_current(&out->ctx);
    }
    struct stream *st = obj_get(HK_STREAM, (uint64_t)(uintptr_t)s);
    if (!st) return CUDA_ERROR_INVALID_HANDLE;
    if (!ctx_usable(st->ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    if (st->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    out->ctx = st->ctx;
    out->st = st;
    out->capturing = st->capture == CU_STREAM_CAPTURE_STATUS_ACTIVE;
    return CUDA_SUCCESS;
}

/* A node captured on stream st: after every node of st's current dependencies, which become
 * the new node alone. */
static CUresult capture_append(struct stream *st, struct node *n) {
    struct graph *g = st->graph;
    if (!depset_reserve(&st->deps, 1) || !graph_edges_reserve(g, st->deps.n))
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t to;
    graph_nodes(g, &to);
    CUresult r = graph_node_append(g, n, NULL);
    if (r != CUDA_SUCCESS) return r;
    for (size_t i = 0; i < st->deps.n; i++) graph_edge_push(g, st->deps.v[i], to);
    st->deps.n = 0;
    depset_add(&st->deps, to);
    return CUDA_SUCCESS;
}

CUresult stream_capture_node(struct sref *r, const struct node *n) {
    struct node copy = *n;
    return capture_append(r->st, &copy);
}

CUresult stream_capture_alloc(struct sref *r, size_t size, CUdeviceptr *out) {
    struct node n = {.kind = N_ALLOC, .maddr = graph_next_address(size), .msize = size,
                     .mdev = r->ctx->dev};
    CUresult res = capture_append(r->st, &n);
    if (res == CUDA_SUCCESS) *out = n.maddr;
    return res;
}

bool stream_capture_free(struct sref *r, uint64_t addr) {
    struct graph *g = r->st->graph;
    if (!graph_alloc_unfreed(g, addr) && !graph_node_address(addr)) return false;
    struct node n = {.kind = N_FREE, .maddr = addr};
    return capture_append(r->st, &n) == CUDA_SUCCESS;
}

void stream_ctx_teardown(struct ctx *c) {
    for (size_t i = 0; i < obj_count(HK_STREAM); i++) {
        struct stream *s = obj_at(HK_STREAM, i);
        if (s->ctx == c) s->h.alive = false;
    }
    for (size_t i = 0; i < obj_count(HK_EVENT); i++) {
        struct event *e = obj_at(HK_EVENT, i);
        if (e->ctx == c) e->h.alive = false;
    }
}

/* ---- streams ------------------------------------------------------------------------------ */

static CUresult stream_create(CUstream *ph, unsigned int flags, int priority) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!ph || (flags & ~(unsigned)CU_STREAM_NON_BLOCKING)) return CUDA_ERROR_INVALID_VALUE;
    struct stream *s = obj_new(HK_STREAM, sizeof *s);
    if (!s) return CUDA_ERROR_OUT_OF_MEMORY;
    s->ctx = c;
    s->flags = flags;
    s->priority = priority > PRIORITY_LEAST      ? PRIORITY_LEAST
                  : priority < PRIORITY_GREATEST ? PRIORITY_GREATEST
                                                 : priority;
    *ph = (CUstream)(uintptr_t)H(s);
    return CUDA_SUCCESS;
}

static CUresult stream_destroy(CUstream h) {
    struct stream *s = special_stream(h) ? NULL : obj_get(HK_STREAM, (uint64_t)(uintptr_t)h);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    s->h.alive = false;
    return CUDA_SUCCESS;
}

/* A capture gone wrong: the stream's, and the stream's that began it when it joined one. */
void stream_capture_invalidate(struct stream *st) {
    st->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    if (st->origin) st->origin->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
}

/* Synchronize and query on a capturing stream are illegal and invalidate the capture. */
static CUresult stream_wait_idle(CUstream h, bool ptsz) {
    struct sref r;
    CUresult res = stream_ref(h, ptsz, &r);
    if (res != CUDA_SUCCESS) return res;
    if (r.capturing) {
        stream_capture_invalidate(r.st);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    pools_sync(r.ctx->dev);
    return CUDA_SUCCESS;
}

/* A wait for an event of a capture under way joins the waiting stream to that capture, its
 * current dependencies those the event remembers; a stream already in it adds them to its own. */
static CUresult stream_wait_event(CUstream h, CUevent e, unsigned int flags, bool ptsz) {
    struct sref r;
    CUresult res = stream_ref(h, ptsz, &r);
    if (res != CUDA_SUCCESS) return res;
    struct event *ev = obj_get(HK_EVENT, (uint64_t)(uintptr_t)e);
    if (!ev) return CUDA_ERROR_INVALID_HANDLE;
    if (flags & ~(unsigned)CU_EVENT_WAIT_EXTERNAL) return CUDA_ERROR_INVALID_VALUE;
    /* External: an event wait node of the capture (invalid outside one). */
    if (flags & CU_EVENT_WAIT_EXTERNAL) {
        if (!r.capturing) return CUDA_ERROR_INVALID_VALUE;
        return stream_capture_node(&r, &(struct node){.kind = N_EVENT_WAIT, .event = H(ev)});
    }
    struct stream *origin = event_capture(ev);
    if (!origin) return CUDA_SUCCESS;
    if (!r.st) return CUDA_ERROR_STREAM_CAPTURE_IMPLICIT;
    if (r.st->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
        if (r.st->capture_id != ev->capture_id) return CUDA_ERROR_STREAM_CAPTURE_ISOLATION;
        return depset_union(&r.st->deps, &ev->deps) ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (origin->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (!depset_assign(&r.st->deps, ev->deps.v, ev->deps.n)) return CUDA_ERROR_OUT_OF_MEMORY;
    r.st->capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    r.st->mode = origin->mode;
    r.st->graph = origin->graph;
    r.st->capture_id = origin->capture_id;
    r.st->origin = origin;
    return CUDA_SUCCESS;
}

static CUresult stream_callback_check(CUstream h, CUstreamCallback cb, unsigned int flags,
                                      bool ptsz) {
    if (!cb || flags != 0) return CUDA_ERROR_INVALID_VALUE;
    struct sref r;
    CUresult res = stream_ref(h, ptsz, &r);
    if (res != CUDA_SUCCESS) return res;
    if (r.capturing) {
        stream_capture_invalidate(r.st);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    return CUDA_SUCCESS;
}

/* The callback runs at once, outside the lock, so it may call the driver. */
static CUresult stream_add_callback(CUstream h, CUstreamCallback cb, void *data,
                                    unsigned int flags, bool ptsz) {
    sim_lock();
    CUresult r = stream_callback_check(h, cb, flags, ptsz);
    sim_unlock();
    if (r == CUDA_SUCCESS) cb(h, CUDA_SUCCESS, data);
    return r;
}

enum stream_field { SF_FLAGS, SF_PRIORITY, SF_CTX };

/* Works on a stream whose capture was invalidated too: these are plain attribute reads. */
static CUresult stream_get(CUstream h, enum stream_field f, void *out) {
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    struct ctx *c;
    struct stream *s = NULL;
    if (special_stream(h)) {
        CUresult r = ctx_current(&c);
        if (r != CUDA_SUCCESS) return r;
    } else {
        s = obj_get(HK_STREAM, (uint64_t)(uintptr_t)h);
        if (!s) return CUDA_ERROR_INVALID_HANDLE;
        c = s->ctx;
    }
    switch (f) {
    case SF_FLAGS: *(unsigned int *)out = s ? s->flags : 0; break;
    case SF_PRIORITY: *(int *)out = s ? s->priority : 0; break;
    case SF_CTX: *(CUcontext *)out = (CUcontext)(uintptr_t)H(c); break;
    }
    return CUDA_SUCCESS;
}

CUresult stream_capture_state(CUstream h, CUstreamCaptureStatus *status, uint64_t *id,
                              struct graph **g, struct depset **deps) {
    *id = 0;
    *g = NULL;
    if (deps) *deps = NULL;
    if (special_stream(h)) {
        struct ctx *c;
        CUresult r = ctx_current(&c);
        if (r == CUDA_SUCCESS) *status = CU_STREAM_CAPTURE_STATUS_NONE;
        return r;
    }
    struct stream *s = obj_get(HK_STREAM, (uint64_t)(uintptr_t)h);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    *status = s->capture;
    if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE) {
        *id = s->capture_id;
        *g = s->graph;
        if (deps) *deps = &s->deps;
    }
    return CUDA_SUCCESS;
}

static CUresult stream_is_capturing(CUstream h, CUstreamCaptureStatus *status) {
    if (!status) return CUDA_ERROR_INVALID_VALUE;
    uint64_t id;
    struct graph *g;
    return stream_capture_state(h, status, &id, &g, NULL);
}

/* A capture begins on h, into a new graph, or into `into` (the program's) when not NULL. */
static CUresult stream_begin_capture_into(CUstream h, CUstreamCaptureMode mode, CUgraph into,
                                          const CUgraphNode *deps, const CUgraphEdgeData *edges,
                                          size_t ndeps) {
    if ((unsigned)mode > CU_STREAM_CAPTURE_MODE_RELAXED) return CUDA_ERROR_INVALID_VALUE;
    if (h == NULL || h == CU_STREAM_LEGACY) return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    if (h == CU_STREAM_PER_THREAD) return CUDA_ERROR_NOT_SUPPORTED; /* a simulator limit */
    struct stream *s = obj_get(HK_STREAM, (uint64_t)(uintptr_t)h);
    if (!s) return CUDA_ERROR_INVALID_HANDLE;
    if (!ctx_usable(s->ctx)) return CUDA_ERROR_INVALID_CONTEXT;
    if (s->capture != CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_ERROR_ILLEGAL_STATE;
    struct graph *g;
    /* The stream's first captured node depends on the given nodes (none for a new graph). */
    s->deps.n = 0;
    if (into) {
        g = graph_get(into);
        if (!g || graph_is_child(g) || graph_ctx(g) != s->ctx ||
            !graph_owns_nodes(g, deps, ndeps))
            return CUDA_ERROR_INVALID_VALUE;
        for (size_t i = 0; edges && i < ndeps; i++) {
            static const CUgraphEdgeData zero;
            if (memcmp(&edges[i], &zero, sizeof zero) != 0) return CUDA_ERROR_INVALID_VALUE;
        }
        if (!depset_reserve(&s->deps, ndeps)) return CUDA_ERROR_OUT_OF_MEMORY;
        for (size_t i = 0; i < ndeps; i++) {
            size_t index = 0;
            graph_node_index(g, deps[i], &index);
            depset_add(&s->deps, index);
        }
    } else {
        g = graph_new(s->ctx);
        if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
    }
    static uint64_t captures;
    s->graph_given = into != NULL;
    s->graph = g;
    s->mode = mode;
    s->capture = CU_STREAM_CAPTURE_STATUS_ACTIVE;
    s->capture_id = ++captures;
    return CUDA_SUCCESS;
}

static CUresult stream_begin_capture(CUstream h, CUstreamCaptureMode mode) {
    return stream_begin_capture_into(h, mode, NULL, NULL, NULL, 0);
}

static CUresult stream_end_capture(CUstream h, CUgraph *out) {
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    struct stream *s = special_stream(h) ? NULL : obj_get(HK_STREAM, (uint64_t)(uintptr_t)h);
    if (!s) return special_stream(h) ? CUDA_ERROR_ILLEGAL_STATE : CUDA_ERROR_INVALID_HANDLE;
    if (s->capture == CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_ERROR_ILLEGAL_STATE;
    if (s->origin) return CUDA_ERROR_STREAM_CAPTURE_UNMATCHED;
    struct graph *g = s->graph;
    bool invalidated = s->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    /* Every stream that joined this capture leaves it too. */
    for (size_t i = 0; i < obj_count(HK_STREAM); i++) {
        struct stream *j = obj_at(HK_STREAM, i);
        if (j->origin != s || j->capture_id != s->capture_id) continue;
        invalidated |= j->capture == CU_STREAM_CAPTURE_STATUS_INVALIDATED;
        j->capture = CU_STREAM_CAPTURE_STATUS_NONE;
        j->graph = NULL;
        j->origin = NULL;
        j->deps.n = 0;
    }
    s->capture = CU_STREAM_CAPTURE_STATUS_NONE;
    s->graph = NULL;
    s->deps.n = 0;
    if (invalidated) {
        if (!s->graph_given) graph_discard(g);
        *out = NULL;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *out = graph_handle(g);
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags) {
    API_ENTER();
    API_LOCKED(stream_create(phStream, Flags, 0));
}

SIMCUDA_API CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags,
                                                int priority) {
    API_ENTER();
    API_LOCKED(stream_create(phStream, flags, priority));
}

SIMCUDA_API CUresult cuStreamDestroy(CUstream hStream) {
    API_ENTER();
    API_LOCKED(stream_destroy(hStream));
}

SIMCUDA_API CUresult cuStreamDestroy_v2(CUstream hStream) {
    API_ENTER();
    API_LOCKED(stream_destroy(hStream));
}

SIMCUDA_API CUresult cuStreamSynchronize(CUstream hStream) {
    API_ENTER();
    API_LOCKED(stream_wait_idle(hStream, false));
}

SIMCUDA_API CUresult cuStreamSynchronize_ptsz(CUstream hStream) {
    API_ENTER();
    API_LOCKED(stream_wait_idle(hStream, true));
}

SIMCUDA_API CUresult cuStreamQuery(CUstream hStream) {
    API_ENTER();
    API_LOCKED(stream_wait_idle(hStream, false));
}

SIMCUDA_API CUresult cuStreamQuery_ptsz(CUstream hStream) {
    API_ENTER();
    API_LOCKED(stream_wait_idle(hStream, true));
}

SIMCUDA_API CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags) {
    API_ENTER();
    API_LOCKED(stream_wait_event(hStream, hEvent, Flags, false));
}

SIMCUDA_API CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags) {
    API_ENTER();
    API_LOCKED(stream_wait_event(hStream, hEvent, Flags, true));
}

SIMCUDA_API CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback,
                                         void *userData, unsigned int flags) {
    API_ENTER();
    return stream_add_callback(hStream, callback, userData, flags, false);
}

SIMCUDA_API CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback,
                                              void *userData, unsigned int flags) {
    API_ENTER();
    return stream_add_callback(hStream, callback, userData, flags, true);
}

SIMCUDA_API CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags) {
    API_ENTER();
    API_LOCKED(stream_get(hStream, SF_FLAGS, flags));
}

SIMCUDA_API CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags) {
    API_ENTER();
    API_LOCKED(stream_get(hStream, SF_FLAGS, flags));
}

SIMCUDA_API CUresult cuStreamGetPriority(CUstream hStream, int *priority) {
    API_ENTER();
    API_LOCKED(stream_get(hStream, SF_PRIORITY, priority));
}

SIMCUDA_API CUresult cuStreamGetPriority_ptsz(CUstream hStream, int *priority) {
    API_ENTER();
    API_LOCKED(stream_get(hStream, SF_PRIORITY, priority));
}

SIMCUDA_API CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx) {
    API_ENTER();
    API_LOCKED(stream_get(hStream, SF_CTX, pctx));
}

SIMCUDA_API CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx) {
    API_ENTER();
    API_LOCKED(stream_get(hStream, SF_CTX, pctx));
}

SIMCUDA_API CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx) {
    API_ENTER();
    if (pGreenCtx) *pGreenCtx = NULL;
    API_LOCKED(stream_get(hStream, SF_CTX, pCtx));
}

SIMCUDA_API CUresult cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx,
                                            CUgreenCtx *pGreenCtx) {
    API_ENTER();
    if (pGreenCtx) *pGreenCtx = NULL;
    API_LOCKED(stream_get(hStream, SF_CTX, pCtx));
}

SIMCUDA_API CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus) {
    API_ENTER();
    API_LOCKED(stream_is_capturing(hStream, captureStatus));
}

SIMCUDA_API CUresult cuStreamIsCapturing_ptsz(CUstream hStream,
                                              CUstreamCaptureStatus *captureStatus) {
    API_ENTER();
    API_LOCKED(stream_is_capturing(hStream, captureStatus));
}

SIMCUDA_API CUresult cuStreamBeginCapture(CUstream hStream) {
    API_ENTER();
    API_LOCKED(stream_begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL));
}

SIMCUDA_API CUresult cuStreamBeginCapture_ptsz(CUstream hStream) {
    API_ENTER();
    API_LOCKED(stream_begin_capture(hStream, CU_STREAM_CAPTURE_MODE_GLOBAL));
}

SIMCUDA_API CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode) {
    API_ENTER();
    API_LOCKED(stream_begin_capture(hStream, mode));
}

SIMCUDA_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode) {
    API_ENTER();
    API_LOCKED(stream_begin_capture(hStream, mode));
}

SIMCUDA_API CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                                 const CUgraphNode *dependencies,
                                                 const CUgraphEdgeData *dependencyData,
                                                 size_t numDependencies, CUstreamCaptureMode mode) {
    API_ENTER();
    API_LOCKED(stream_begin_capture_into(hStream, mode, hGraph, dependencies, dependencyData,
                                         numDependencies));
}

SIMCUDA_API CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                                      const CUgraphNode *dependencies,
                                                      const CUgraphEdgeData *dependencyData,
                                                      size_t numDependencies,
                                                      CUstreamCaptureMode mode) {
    API_ENTER();
    API_LOCKED(stream_begin_capture_into(hStream, mode, hGraph, dependencies, dependencyData,
                                         numDependencies));
}

SIMCUDA_API CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph) {
    API_ENTER();
    API_LOCKED(stream_end_capture(hStream, phGraph));
}

SIMCUDA_API CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph) {
    API_ENTER();
    API_LOCKED(stream_end_capture(hStream, phGraph));
}

