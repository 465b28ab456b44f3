/*
 * graph.c: executable graphs made from stream captures, their launch, and host functions.
 *
 * A captured graph (stream.c) is the list of operations enqueued on the capturing stream, in
 * order: copies, memsets, kernels and host functions. Instantiation copies that list into an
 * executable graph owned by the graph's context; each cuGraphLaunch runs every operation again,
 * in order, as if enqueued on the launch stream at that moment (all work runs at enqueue time in
 * the simulator). A launch into a capturing stream appends the operations to that capture.
 * Graphs with memory allocation nodes (cuMemAllocAsync under capture) cannot be instantiated:
 * CUDA_ERROR_NOT_SUPPORTED, a simulator limit.
 *
 * cuLaunchHostFunc runs its function in stream order: at once (the stream is always idle), or
 * at each launch of the graph it was captured into. Host functions run outside the driver lock,
 * as stream callbacks do, so a misbehaving one that calls the driver does not deadlock.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define INSTANTIATE_FLAGS 0xfull /* auto-free on launch, upload, device launch, node priority */

struct graph_exec {
    struct hdr h;
    struct ctx *ctx;
    struct node *nodes; /* never freed, so a launch running a host function unlocked is safe */
    size_t n;
};

void graph_ctx_teardown(struct ctx *c) {
    for (size_t i = 0; i < obj_count(HK_GRAPH_EXEC); i++) {
        struct graph_exec *e = obj_at(HK_GRAPH_EXEC, i);
        if (e->ctx == c) e->h.alive = false;
    }
}

static CUresult instantiate(CUgraphExec *out, CUgraph h, unsigned long long flags) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!out || (flags & ~INSTANTIATE_FLAGS)) return CUDA_ERROR_INVALID_VALUE;
    struct graph *g = graph_get(h);
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    if (graph_has_alloc_nodes(g)) return CUDA_ERROR_NOT_SUPPORTED;
    size_t n;
    const struct node *nodes = graph_nodes(g, &n);
    struct graph_exec *e = obj_new(HK_GRAPH_EXEC, sizeof *e);
    if (!e) return CUDA_ERROR_OUT_OF_MEMORY;
    e->ctx = graph_ctx(g);
    if (n) {
        e->nodes = malloc(n * sizeof *nodes);
        if (!e->nodes) {
            e->h.alive = false;
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
        memcpy(e->nodes, nodes, n * sizeof *nodes);
    }
    e->n = n;
    *out = (CUgraphExec)(uintptr_t)H(e);
    return CUDA_SUCCESS;
}

/* The pre-12.0 ABI: the error node and log are written only on failure, and never fail here. */
static CUresult instantiate_logged(CUgraphExec *out, CUgraph h, CUgraphNode *error_node,
                                   char *log, size_t log_size) {
    if (error_node) *error_node = NULL;
    if (log && log_size) log[0] = '\0';
    sim_lock();
    CUresult r = instantiate(out, h, 0);
    sim_unlock();
    return r;
}

static CUresult exec_destroy(CUgraphExec h) {
    struct graph_exec *e = obj_get(HK_GRAPH_EXEC, (uint64_t)(uintptr_t)h);
    if (!e) return CUDA_ERROR_INVALID_VALUE;
    e->h.alive = false;
    return CUDA_SUCCESS;
}

/* Runs one node; lock held. Host functions are run by the caller, unlocked. */
static CUresult run_node(const struct node *n) {
    switch (n->kind) {
    case N_COPY: return xfer_run_locked(&n->copy);
    case N_SET: return mem_set_locked(n->dst, n->pattern, n->elem, n->count);
    case N_KERNEL: return kernel_run_node(n);
    case N_HOST: break;
    }
    return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec h, CUstream s, bool ptsz) {
    sim_lock();
    struct graph_exec *e = obj_get(HK_GRAPH_EXEC, (uint64_t)(uintptr_t)h);
    struct sref ref;
    CUresult r = e ? stream_ref(s, ptsz, &ref) : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && !ctx_usable(e->ctx)) r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && ref.ctx != e->ctx) r = CUDA_ERROR_INVALID_CONTEXT;
    if (r != CUDA_SUCCESS) {
        sim_unlock();
        return r;
    }
    const struct node *nodes = e->nodes;
    size_t count = e->n;
    for (size_t i = 0; i < count && r == CUDA_SUCCESS; i++) {
        if (ref.capturing) {
            r = stream_capture_node(&ref, &nodes[i]);
        } else if (nodes[i].kind == N_HOST) {
            sim_unlock();
            nodes[i].fn(nodes[i].data);
            sim_lock();
        } else {
            r = run_node(&nodes[i]);
        }
    }
    sim_unlock();
    return r;
}

static CUresult host_func(CUstream s, CUhostFn fn, void *data, bool ptsz) {
    if (!fn) return CUDA_ERROR_INVALID_VALUE;
    sim_lock();
    struct sref ref;
    CUresult r = stream_ref(s, ptsz, &ref);
    bool now = r == CUDA_SUCCESS && !ref.capturing;
    if (r == CUDA_SUCCESS && ref.capturing)
        r = stream_capture_node(&ref, &(struct node){.kind = N_HOST, .fn = fn, .data = data});
    sim_unlock();
    if (now) fn(data);
    return r;
}

SIMCUDA_API CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
                                        CUgraphNode *phErrorNode, char *logBuffer,
                                        size_t bufferSize) {
    API_ENTER();
    return instantiate_logged(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

SIMCUDA_API CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
                                           CUgraphNode *phErrorNode, char *logBuffer,
                                           size_t bufferSize) {
    API_ENTER();
    return instantiate_logged(phGraphExec, hGraph, phErrorNode, logBuffer, bufferSize);
}

SIMCUDA_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                 unsigned long long flags) {
    API_ENTER();
    API_LOCKED(instantiate(phGraphExec, hGraph, flags));
}

SIMCUDA_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
    API_ENTER();
    API_LOCKED(exec_destroy(hGraphExec));
}

SIMCUDA_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream) {
    API_ENTER();
    return graph_launch(hGraphExec, hStream, false);
}

SIMCUDA_API CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream) {
    API_ENTER();
    return graph_launch(hGraphExec, hStream, true);
}

SIMCUDA_API CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData) {
    API_ENTER();
    return host_func(hStream, fn, userData, false);
}

SIMCUDA_API CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData) {
    API_ENTER();
    return host_func(hStream, fn, userData, true);
}

/* CUDA 13.1: with the host task's sync mode (CU_HOST_TASK_BLOCKING 0, CU_HOST_TASK_SPINWAIT
 * 1), which changes nothing here: the function runs at once or at its graph's launch. */
SIMCUDA_API CUresult cuLaunchHostFunc_v2(CUstream hStream, CUhostFn fn, void *userData,
                                         unsigned int syncMode) {
    API_ENTER();
    if (syncMode > 1) return CUDA_ERROR_INVALID_VALUE;
    return host_func(hStream, fn, userData, false);
}

SIMCUDA_API CUresult cuLaunchHostFunc_v2_ptsz(CUstream hStream, CUhostFn fn, void *userData,
                                              unsigned int syncMode) {
    API_ENTER();
    if (syncMode > 1) return CUDA_ERROR_INVALID_VALUE;
    return host_func(hStream, fn, userData, true);
}
