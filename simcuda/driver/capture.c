/*
 * capture.c: a capture's dependencies, stream by stream: what cuStreamGetCaptureInfo (10.1, its
 * 11.3 and 12.3 ABIs) reports and cuStreamUpdateCaptureDependencies (11.3; _v2 with edge data,
 * 12.3) changes.
 *
 * Every stream in a capture (the one that began it and each one that joined it) has its own
 * current dependencies: the nodes its next captured node will depend on (stream.c). A capture
 * begins with none (cuStreamBeginCaptureToGraph: the nodes given); a captured node depends on
 * them all and becomes the only one; an event recorded in the capture remembers them, and a
 * stream that waits for it adds them to its own (a stream that joins starts from them). Edge
 * data is always the default (zero): the _v2 and _v3 calls take only NULL or zeroed edge data.
 *
 * The dependency array cuStreamGetCaptureInfo returns stays valid until the calling thread's
 * next call of it (CUDA: until the next API call on the stream). A dependency array may not
 * name a node twice (CUDA_ERROR_INVALID_VALUE, as for every dependency array); adding a node
 * already among the current dependencies changes nothing.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- dependency sets ------------------------------------------------------------------------ */

bool depset_reserve(struct depset *s, size_t more) {
    return sim_grow((void **)&s->v, &s->cap, s->n + more, sizeof *s->v);
}

void depset_add(struct depset *s, size_t index) {
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i] == index) return;
    s->v[s->n++] = index;
}

bool depset_assign(struct depset *s, const size_t *v, size_t n) {
    if (n > s->n && !depset_reserve(s, n - s->n)) return false;
    if (n) memmove(s->v, v, n * sizeof *v);
    s->n = n;
    return true;
}

bool depset_union(struct depset *s, const struct depset *from) {
    if (!depset_reserve(s, from->n)) return false;
    for (size_t i = 0; i < from->n; i++) depset_add(s, from->v[i]);
    return true;
}

/* ---- cuStreamGetCaptureInfo ----------------------------------------------------------------- */

static _Thread_local CUgraphNode *t_deps;
static _Thread_local size_t t_deps_cap;
static _Thread_local CUgraphEdgeData *t_edges; /* all zero */
static _Thread_local size_t t_edges_cap;

static bool edges_zero(const CUgraphEdgeData *edges, size_t n) {
    static const CUgraphEdgeData zero;
    for (size_t i = 0; edges && i < n; i++)
        if (memcmp(&edges[i], &zero, sizeof zero) != 0) return false;
    return true;
}

/* The stream's current dependencies as node handles, in this thread's buffer (and as many
 * zeroed edge data in the other); false if out of memory. */
static bool deps_out(const struct graph *g, const struct depset *set) {
    size_t cap = t_edges_cap;
    if (!sim_grow((void **)&t_deps, &t_deps_cap, set->n, sizeof *t_deps) ||
        !sim_grow((void **)&t_edges, &t_edges_cap, set->n, sizeof *t_edges))
        return false;
    if (t_edges_cap > cap) memset(t_edges + cap, 0, (t_edges_cap - cap) * sizeof *t_edges);
    size_t n;
    const struct node *nodes = graph_nodes(g, &n);
    for (size_t i = 0; i < set->n; i++) t_deps[i] = (CUgraphNode)(uintptr_t)nodes[set->v[i]].handle;
    return true;
}

static CUresult capture_info(CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id,
                             CUgraph *graph, const CUgraphNode **deps,
                             const CUgraphEdgeData **edges, size_t *ndeps) {
    if (!status || (edges && !deps)) return CUDA_ERROR_INVALID_VALUE;
    uint64_t capture;
    struct graph *g;
    struct depset *set;
    CUresult r = stream_capture_state(h, status, &capture, &g, &set);
    if (r != CUDA_SUCCESS) return r;
    bool active = *status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
    size_t n = active ? set->n : 0;
    if (n && (deps || edges) && !deps_out(g, set)) return CUDA_ERROR_OUT_OF_MEMORY;
    if (id) *id = capture;
    if (graph) *graph = active ? graph_handle(g) : NULL;
    if (deps) *deps = n ? t_deps : NULL;
    if (edges) *edges = n ? t_edges : NULL;
    if (ndeps) *ndeps = n;
    return CUDA_SUCCESS;
}

#define CAPTURE_INFO(...)                             \
    do {                                              \
        API_ENTER();                                  \
        API_LOCKED(capture_info(__VA_ARGS__));        \
    } while (0)

SIMCUDA_API CUresult cuStreamGetCaptureInfo(CUstream hStream,
                                            CUstreamCaptureStatus *captureStatus_out,
                                            cuuint64_t *id_out) {
    CAPTURE_INFO(hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

SIMCUDA_API CUresult cuStreamGetCaptureInfo_ptsz(CUstream hStream,
                                                 CUstreamCaptureStatus *captureStatus_out,
                                                 cuuint64_t *id_out) {
    CAPTURE_INFO(hStream, captureStatus_out, id_out, NULL, NULL, NULL, NULL);
}

SIMCUDA_API CUresult cuStreamGetCaptureInfo_v2(CUstream hStream,
                                               CUstreamCaptureStatus *captureStatus_out,
                                               cuuint64_t *id_out, CUgraph *graph_out,
                                               const CUgraphNode **dependencies_out,
                                               size_t *numDependencies_out) {
    CAPTURE_INFO(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
                 numDependencies_out);
}

SIMCUDA_API CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream,
                                                    CUstreamCaptureStatus *captureStatus_out,
                                                    cuuint64_t *id_out, CUgraph *graph_out,
                                                    const CUgraphNode **dependencies_out,
                                                    size_t *numDependencies_out) {
    CAPTURE_INFO(hStream, captureStatus_out, id_out, graph_out, dependencies_out, NULL,
                 numDependencies_out);
}

SIMCUDA_API CUresult cuStreamGetCaptureInfo_v3(CUstream hStream,
                                               CUstreamCaptureStatus *captureStatus_out,
                                               cuuint64_t *id_out, CUgraph *graph_out,
                                               const CUgraphNode **dependencies_out,
                                               const CUgraphEdgeData **edgeData_out,
                                               size_t *numDependencies_out) {
    CAPTURE_INFO(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                 numDependencies_out);
}

SIMCUDA_API CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream,
                                                    CUstreamCaptureStatus *captureStatus_out,
                                                    cuuint64_t *id_out, CUgraph *graph_out,
                                                    const CUgraphNode **dependencies_out,
                                                    const CUgraphEdgeData **edgeData_out,
                                                    size_t *numDependencies_out) {
    CAPTURE_INFO(hStream, captureStatus_out, id_out, graph_out, dependencies_out, edgeData_out,
                 numDependencies_out);
}

/* ---- cuStreamUpdateCaptureDependencies ------------------------------------------------------ */

/* Adds the n nodes to the stream's current dependencies (CU_STREAM_ADD_CAPTURE_DEPENDENCIES)
 * or replaces them (CU_STREAM_SET_CAPTURE_DEPENDENCIES). Not capturing: CUDA_ERROR_ILLEGAL_STATE;
 * an invalidated capture: CUDA_ERROR_STREAM_CAPTURE_INVALIDATED; other flags, a node not of the
 * capture's graph, a node twice, nonzero edge data: CUDA_ERROR_INVALID_VALUE. */
static CUresult update_deps(CUstream h, const CUgraphNode *deps, const CUgraphEdgeData *edges,
                            size_t n, unsigned int flags) {
    CUstreamCaptureStatus status;
    uint64_t id;
    struct graph *g;
    struct depset *set;
    CUresult r = stream_capture_state(h, &status, &id, &g, &set);
    if (r != CUDA_SUCCESS) return r;
    if (flags != CU_STREAM_ADD_CAPTURE_DEPENDENCIES && flags != CU_STREAM_SET_CAPTURE_DEPENDENCIES)
        return CUDA_ERROR_INVALID_VALUE;
    if (status == CU_STREAM_CAPTURE_STATUS_NONE) return CUDA_ERROR_ILLEGAL_STATE;
    if (status == CU_STREAM_CAPTURE_STATUS_INVALIDATED)
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    if (!graph_owns_nodes(g, deps, n) || !edges_zero(edges, n)) return CUDA_ERROR_INVALID_VALUE;
    struct depset given = {0};
    if (!depset_reserve(&given, n)) return CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0; i < n; i++) {
        size_t index = 0;
        graph_node_index(g, deps[i], &index);
        depset_add(&given, index);
    }
    bool ok = flags == CU_STREAM_SET_CAPTURE_DEPENDENCIES ? depset_assign(set, given.v, given.n)
                                                          : depset_union(set, &given);
    free(given.v);
    return ok ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
}

SIMCUDA_API CUresult cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
                                                       size_t numDependencies, unsigned int flags) {
    API_ENTER();
    API_LOCKED(update_deps(hStream, dependencies, NULL, numDependencies, flags));
}

SIMCUDA_API CUresult cuStreamUpdateCaptureDependencies_ptsz(CUstream hStream,
                                                            CUgraphNode *dependencies,
                                                            size_t numDependencies,
                                                            unsigned int flags) {
    API_ENTER();
    API_LOCKED(update_deps(hStream, dependencies, NULL, numDependencies, flags));
}

SIMCUDA_API CUresult cuStreamUpdateCaptureDependencies_v2(CUstream hStream,
                                                          CUgraphNode *dependencies,
                                                          const CUgraphEdgeData *dependencyData,
                                                          size_t numDependencies,
                                                          unsigned int flags) {
    API_ENTER();
    API_LOCKED(update_deps(hStream, dependencies, dependencyData, numDependencies, flags));
}

SIMCUDA_API CUresult cuStreamUpdateCaptureDependencies_v2_ptsz(
    CUstream hStream, CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData,
    size_t numDependencies, unsigned int flags) {
    API_ENTER();
    API_LOCKED(update_deps(hStream, dependencies, dependencyData, numDependencies, flags));
}
