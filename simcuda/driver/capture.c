/*
 * capture.c: what a stream's capture is (cuStreamGetCaptureInfo, its 11.3 and 12.3 ABIs).
 *
 * A capture here is a chain: each operation captured depends on the one before, so the
 * capture's current dependencies are its last node, or none before the first. Edge data is
 * always the default (zero). The dependency array returned stays valid until the calling
 * thread's next call of these functions (CUDA: until the next API call on the stream).
 */
#include "internal.h"

static _Thread_local CUgraphNode t_dep;
static const CUgraphEdgeData default_edge; /* all zero */

static CUresult capture_info(CUstream h, CUstreamCaptureStatus *status, cuuint64_t *id,
                             CUgraph *graph, const CUgraphNode **deps,
                             const CUgraphEdgeData **edges, size_t *ndeps) {
    if (!status || (edges && !deps)) return CUDA_ERROR_INVALID_VALUE;
    uint64_t capture;
    struct graph *g;
    CUresult r = stream_capture_state(h, status, &capture, &g);
    if (r != CUDA_SUCCESS) return r;
    if (id) *id = capture;
    bool active = *status == CU_STREAM_CAPTURE_STATUS_ACTIVE;
    if (graph) *graph = active ? graph_handle(g) : NULL;
    const struct node *last = active ? graph_last_node(g) : NULL;
    t_dep = last ? (CUgraphNode)(uintptr_t)last->handle : NULL;
    if (deps) *deps = last ? &t_dep : NULL;
    if (edges) *edges = last ? &default_edge : NULL;
    if (ndeps) *ndeps = last ? 1 : 0;
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
