/*
 * graph.c: executable graphs made from stream captures, their launch, graph memory, and host
 * functions.
 *
 * A captured graph (stream.c; graphstore.c keeps graphs) is the list of operations enqueued on the
 * capturing streams, in order: copies, memsets, kernels, host functions, event record and wait
 * nodes, and memory nodes; a graph built by hand holds memory nodes, child graph nodes, event
 * record and wait nodes (graphnode.c), kernels, copies and memsets (graphparams.c). Both keep
 * their edges (graphedge.c). Instantiation copies that list in a dependency order (node order
 * unless cuGraphAddDependencies added an edge backwards), with each child graph's nodes in place
 * of its node, into an executable graph owned by the graph's context; each cuGraphLaunch runs
 * every operation again, in that order, as if enqueued on the launch stream at that moment (all
 * work runs at enqueue time in the simulator): an event record node records its event, an event
 * wait node has nothing to wait for. A launch into a capturing stream appends the operations to
 * that capture as a chain after the stream's current dependencies (a simplification: the graph's
 * own edges are not copied), except for graphs with memory nodes (CUDA_ERROR_NOT_SUPPORTED, a
 * simulator limit). graphexec.c changes an executable graph's nodes after instantiation (kernels,
 * copies, memsets, events, child graphs, whole-graph updates) and disables and enables them; what
 * the next launch runs is what they hold then, without the disabled ones (into a capture too).
 *
 * Graph memory: an allocation node (cuMemAllocAsync under capture, cuGraphAddMemAllocNode,
 * cuGraphAddNode) has a fixed address in the graph range. Each launch allocates there (device
 * memory taken from the heap as a hidden block) until a free node of a graph, cuMemFreeAsync
 * or cuMemFree frees it. Launching while a previous launch's allocation is still live fails with
 * CUDA_ERROR_INVALID_VALUE, unless the graph was instantiated with
 * CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH, which frees it first. Destroying a graph or
 * an executable graph frees nothing; destroying the context does. A graph with memory nodes has
 * at most one executable graph alive at a time.
 *
 * cuLaunchHostFunc runs its function in stream order: at once (the stream is always idle), or
 * at each launch of the graph it was captured into. Host functions run outside the driver lock,
 * as stream callbacks do, so a misbehaving one that calls the driver does not deadlock.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

_Static_assert(sizeof(CUgraphNodeParams) == 256, "CUgraphNodeParams is 256 bytes");

#define INSTANTIATE_FLAGS 0xfull /* auto-free on launch, upload, device launch, node priority */

/* Memory a launch allocated, by its fixed address: the hidden heap block behind it. */
struct gmem {
    struct alloc *block;
    struct ctx *ctx;
    uint64_t size;
};

static struct rtab g_graph_mem;

static void gmem_release(struct range *r) {
    struct gmem *m = r->obj;
    uint64_t addr = r->addr;
    heap_release(m->block);
    free(m);
    rtab_remove(&g_graph_mem, addr);
}

bool graph_mem_free(uint64_t addr) {
    struct range *r = rtab_exact(&g_graph_mem, addr);
    if (!r) return false;
    gmem_release(r);
    return true;
}

CUresult graph_mem_xlate(uint64_t addr, size_t n, char **host, size_t *contig) {
    struct range *r = rtab_find(&g_graph_mem, addr);
    if (!r) return CUDA_ERROR_INVALID_VALUE;
    struct gmem *m = r->obj;
    if (n > m->size || addr - r->addr > m->size - n) return CUDA_ERROR_INVALID_VALUE;
    *host = heap_host(m->block) + (addr - r->addr);
    *contig = n;
    return CUDA_SUCCESS;
}

/* Allocates a node's memory at its address; lock held. */
static CUresult gmem_alloc(const struct node *n, struct ctx *c) {
    struct gmem *m = calloc(1, sizeof *m);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    /* No owning context on the block itself: mem_ctx_teardown must leave it to
     * graph_ctx_teardown, which also drops the address. */
    CUresult r = heap_alloc(n->mdev, n->msize, HEAP_ALIGN, AK_GRAPH, NULL, &m->block);
    if (r != CUDA_SUCCESS) {
        free(m);
        return r;
    }
    m->ctx = c;
    m->size = n->msize;
    if (!rtab_insert(&g_graph_mem, n->maddr, round_up(n->msize, HEAP_ALIGN), m)) {
        heap_release(m->block);
        free(m);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    return CUDA_SUCCESS;
}

void graph_ctx_teardown(struct ctx *c) {
    for (size_t i = 0; i < obj_count(HK_GRAPH_EXEC); i++) {
        struct graph_exec *e = obj_at(HK_GRAPH_EXEC, i);
        if (e->ctx == c) e->h.alive = false;
    }
    /* Backwards: releasing entry i moves only the entries after it. */
    for (size_t i = g_graph_mem.n; i-- > 0;) {
        struct range *r = &g_graph_mem.v[i];
        if (((struct gmem *)r->obj)->ctx == c) gmem_release(r);
    }
}

static CUresult instantiate(CUgraphExec *out, CUgraph h, unsigned long long flags) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!out || (flags & ~INSTANTIATE_FLAGS)) return CUDA_ERROR_INVALID_VALUE;
    struct graph *g = graph_get(h);
    if (!g) return CUDA_ERROR_INVALID_VALUE;
    /* A graph moved into a child graph node runs only as part of its parent. */
    if (graph_is_child(g)) return CUDA_ERROR_INVALID_VALUE;
    bool memory = graph_has_memory_nodes(g);
    if (memory && graph_instance(g)) return CUDA_ERROR_INVALID_VALUE;
    struct node *nodes;
    size_t n;
    r = graph_flatten(g, &nodes, &n);
    if (r != CUDA_SUCCESS) return r;
    struct graph_exec *e = obj_new(HK_GRAPH_EXEC, sizeof *e);
    if (!e) {
        free(nodes);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    e->ctx = graph_ctx(g);
    e->source = g;
    e->auto_free = flags & CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH;
    e->memory = memory;
    e->nodes = nodes;
    e->n = n;
    if (!graph_user_objects_to(g, H(e))) {
        userobj_owner_release(H(e));
        e->h.alive = false;
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (memory) graph_set_instance(g, H(e));
    *out = (CUgraphExec)(uintptr_t)H(e);
    return CUDA_SUCCESS;
}

static CUresult instantiate_params(CUgraphExec *out, CUgraph h, CUDA_GRAPH_INSTANTIATE_PARAMS *p) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    /* Upload (flag 2) needs a stream and does nothing more here; device launch (4) and node
     * priority (8) change nothing either. */
    CUresult r = instantiate(out, h, p->flags);
    p->hErrNode_out = NULL;
    p->result_out = r == CUDA_SUCCESS ? CUDA_GRAPH_INSTANTIATE_SUCCESS : CUDA_GRAPH_INSTANTIATE_ERROR;
    return r;
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
    userobj_owner_release(H(e));
    return CUDA_SUCCESS;
}

/* Runs one node; lock held. Host functions are run by the caller, unlocked. */
static CUresult run_node(const struct node *n) {
    switch (n->kind) {
    case N_COPY: return xfer_run_locked(&n->copy);
    case N_SET: return mem_set_rows_locked(n->dst, n->pitch, n->pattern, n->elem, n->count, n->rows);
    case N_KERNEL: return kernel_run_node(n);
    case N_ALLOC: return CUDA_SUCCESS; /* allocated before the nodes run (graph_launch) */
    case N_FREE: graph_mem_free(n->maddr); return CUDA_SUCCESS;
    case N_HOST: break;
    case N_CHILD: break; /* never in an executable graph: instantiation flattens them */
    case N_EVENT_RECORD: event_mark_recorded(n->event); break;
    case N_EVENT_WAIT: break; /* every stream is idle: what it waits for is complete */
    case N_MEMOP: return memop_run_locked(&n->memop);
    case N_SEM_SIGNAL: semaphore_signal_locked(n->sem, n->sem_value); break;
    case N_SEM_WAIT: semaphore_wait_locked(n->sem); break;
    }
    return CUDA_SUCCESS;
}

/* Before a launch's nodes run: frees what the last launch left (auto-free), refuses if any
 * allocation node's memory is still live, then allocates every allocation node's memory (an
 * allocation freed later in the same graph is freed by its free node); lock held. */
static CUresult launch_memory(struct graph_exec *e) {
    for (size_t i = 0; i < e->n; i++) {
        const struct node *n = &e->nodes[i];
        if (n->kind != N_ALLOC) continue;
        if (rtab_exact(&g_graph_mem, n->maddr)) {
            if (!e->auto_free) return CUDA_ERROR_INVALID_VALUE;
            graph_mem_free(n->maddr);
        }
    }
    for (size_t i = 0; i < e->n; i++) {
        if (e->nodes[i].kind != N_ALLOC) continue;
        CUresult r = gmem_alloc(&e->nodes[i], e->ctx);
        if (r != CUDA_SUCCESS) {
            while (i-- > 0)
                if (e->nodes[i].kind == N_ALLOC) graph_mem_free(e->nodes[i].maddr);
            return r;
        }
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
    if (r == CUDA_SUCCESS && e->memory && ref.capturing) r = CUDA_ERROR_NOT_SUPPORTED;
    if (r == CUDA_SUCCESS && e->memory) r = launch_memory(e);
    if (r != CUDA_SUCCESS) {
        sim_unlock();
        return r;
    }
    const struct node *nodes = e->nodes;
    size_t count = e->n;
    for (size_t i = 0; i < count && r == CUDA_SUCCESS; i++) {
        if (nodes[i].disabled) continue; /* an empty node until enabled again */
        if (ref.capturing) {
            r = stream_capture_node(&ref, &nodes[i]);
        } else if (nodes[i].kind == N_HOST) {
            /* Read under the lock: an update of the executable graph may change the node. */
            sim_host_fn fn = nodes[i].fn;
            void *data = nodes[i].data;
            sim_unlock();
            fn(data);
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

SIMCUDA_API CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                  CUDA_GRAPH_INSTANTIATE_PARAMS *params) {
    API_ENTER();
    API_LOCKED(instantiate_params(phGraphExec, hGraph, params));
}

SIMCUDA_API CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                       CUDA_GRAPH_INSTANTIATE_PARAMS *params) {
    API_ENTER();
    API_LOCKED(instantiate_params(phGraphExec, hGraph, params));
}

SIMCUDA_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec) {
    API_ENTER();
    API_LOCKED_THEN_DESTRUCTORS(exec_destroy(hGraphExec));
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

/* ---- graphs built by hand: memory nodes and node queries ---------------------------------- */

static CUresult graph_create(CUgraph *out, unsigned int flags) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!out || flags) return CUDA_ERROR_INVALID_VALUE;
    struct graph *g = graph_new(c);
    if (!g) return CUDA_ERROR_OUT_OF_MEMORY;
    *out = graph_handle(g);
    return CUDA_SUCCESS;
}

static CUresult add_alloc_node(CUgraphNode *out, CUgraph h, const CUgraphNode *deps, size_t ndeps,
                               CUDA_MEM_ALLOC_NODE_PARAMS *p) {
    struct graph *g = graph_get(h);
    /* A graph moved into a child graph node takes no more memory nodes. */
    if (!out || !g || !p || p->bytesize == 0 || !graph_owns_nodes(g, deps, ndeps) ||
        graph_is_child(g))
        return CUDA_ERROR_INVALID_VALUE;
    const CUmemPoolProps *props = &p->poolProps;
    if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED || props->handleTypes != 0 ||
        props->location.type != CU_MEM_LOCATION_TYPE_DEVICE ||
        dev_check(props->location.id) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    struct node n = {.kind = N_ALLOC, .maddr = graph_next_address(p->bytesize),
                     .msize = p->bytesize, .mdev = props->location.id};
    CUresult r = graph_add_node(g, &n, deps, ndeps, out);
    if (r == CUDA_SUCCESS) p->dptr = n.maddr;
    return r;
}

static CUresult add_free_node(CUgraphNode *out, CUgraph h, const CUgraphNode *deps, size_t ndeps,
                              CUdeviceptr dptr) {
    struct graph *g = graph_get(h);
    if (!out || !g || !graph_owns_nodes(g, deps, ndeps) || graph_is_child(g))
        return CUDA_ERROR_INVALID_VALUE;
    /* This graph's allocation not yet freed in it, or another graph's allocation. */
    bool own = false;
    size_t n;
    const struct node *nodes = graph_nodes(g, &n);
    for (size_t i = 0; i < n; i++)
        if (nodes[i].kind == N_ALLOC && nodes[i].maddr == dptr) own = true;
    if (own ? !graph_alloc_unfreed(g, dptr) : !graph_node_address(dptr))
        return CUDA_ERROR_INVALID_VALUE;
    struct node node = {.kind = N_FREE, .maddr = dptr};
    return graph_add_node(g, &node, deps, ndeps, out);
}

static CUresult get_nodes(CUgraph h, CUgraphNode *out, size_t *count) {
    struct graph *g = graph_get(h);
    if (!g || !count) return CUDA_ERROR_INVALID_VALUE;
    size_t n;
    const struct node *nodes = graph_nodes(g, &n);
    if (out) {
        for (size_t i = 0; i < *count; i++)
            out[i] = i < n ? (CUgraphNode)(uintptr_t)nodes[i].handle : NULL;
        if (*count > n) *count = n;
    } else {
        *count = n;
    }
    return CUDA_SUCCESS;
}

CUgraphNodeType node_kind_type(enum node_kind kind) {
    switch (kind) {
    case N_COPY: return CU_GRAPH_NODE_TYPE_MEMCPY;
    case N_SET: return CU_GRAPH_NODE_TYPE_MEMSET;
    case N_KERNEL: return CU_GRAPH_NODE_TYPE_KERNEL;
    case N_HOST: return CU_GRAPH_NODE_TYPE_HOST;
    case N_ALLOC: return CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    case N_FREE: return CU_GRAPH_NODE_TYPE_MEM_FREE;
    case N_CHILD: return CU_GRAPH_NODE_TYPE_GRAPH;
    case N_EVENT_RECORD: return CU_GRAPH_NODE_TYPE_EVENT_RECORD;
    case N_EVENT_WAIT: return CU_GRAPH_NODE_TYPE_WAIT_EVENT;
    case N_MEMOP: return CU_GRAPH_NODE_TYPE_BATCH_MEM_OP;
    case N_SEM_SIGNAL: return CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL;
    case N_SEM_WAIT: return CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT;
    }
    return CU_GRAPH_NODE_TYPE_EMPTY; /* unreachable: every kind is listed */
}

static CUresult node_type(CUgraphNode h, CUgraphNodeType *type) {
    const struct node *n = graph_node_get(h);
    if (!n || !type) return CUDA_ERROR_INVALID_VALUE;
    *type = node_kind_type(n->kind);
    return CUDA_SUCCESS;
}

static CUresult alloc_node_params(CUgraphNode h, CUDA_MEM_ALLOC_NODE_PARAMS *p) {
    const struct node *n = graph_node_get(h);
    if (!n || n->kind != N_ALLOC || !p) return CUDA_ERROR_INVALID_VALUE;
    memset(p, 0, sizeof *p);
    p->poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    p->poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    p->poolProps.location.id = n->mdev;
    p->bytesize = n->msize;
    p->dptr = n->maddr;
    return CUDA_SUCCESS;
}

static CUresult free_node_params(CUgraphNode h, CUdeviceptr *dptr) {
    const struct node *n = graph_node_get(h);
    if (!n || n->kind != N_FREE || !dptr) return CUDA_ERROR_INVALID_VALUE;
    *dptr = n->maddr;
    return CUDA_SUCCESS;
}

static CUresult add_child_node(CUgraphNode *out, CUgraph h, const CUgraphNode *deps, size_t ndeps,
                               CUgraph child, bool move) {
    struct graph *g = graph_get(h), *c = graph_get(child);
    if (!out || !g || !c || !graph_owns_nodes(g, deps, ndeps)) return CUDA_ERROR_INVALID_VALUE;
    return graph_add_child(g, c, move, deps, ndeps, out);
}

static CUresult child_graph(CUgraphNode h, CUgraph *out) {
    const struct node *n = graph_node_get(h);
    if (!n || n->kind != N_CHILD || !out) return CUDA_ERROR_INVALID_VALUE;
    *out = graph_handle(n->child);
    return CUDA_SUCCESS;
}

/* cuGraphAddNode[_v2]: kernel, memcpy, memset (graphparams.c), allocation, free, child graph,
 * event record and event wait nodes (any other type is CUDA_ERROR_NOT_SUPPORTED here, a
 * simulator limit). */
static CUresult add_node(CUgraphNode *out, CUgraph h, const CUgraphNode *deps, size_t ndeps,
                         CUgraphNodeParams *p) {
    if (!p || p->reserved0[0] || p->reserved0[1] || p->reserved0[2] || p->reserved2)
        return CUDA_ERROR_INVALID_VALUE;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL:
    case CU_GRAPH_NODE_TYPE_MEMCPY:
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        struct graph *g = graph_get(h);
        struct node n;
        if (!out || !g || !graph_owns_nodes(g, deps, ndeps)) return CUDA_ERROR_INVALID_VALUE;
        CUresult r = node_from_params(p, &n);
        return r == CUDA_SUCCESS ? graph_add_node(g, &n, deps, ndeps, out) : r;
    }
    case CU_GRAPH_NODE_TYPE_MEM_ALLOC: return add_alloc_node(out, h, deps, ndeps, &p->alloc);
    case CU_GRAPH_NODE_TYPE_MEM_FREE: return add_free_node(out, h, deps, ndeps, p->free.dptr);
    case CU_GRAPH_NODE_TYPE_GRAPH:
        if (p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE &&
            p->graph.ownership != CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE)
            return CUDA_ERROR_INVALID_VALUE;
        return add_child_node(out, h, deps, ndeps, p->graph.graph,
                              p->graph.ownership == CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE);
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return graph_add_event_node(out, h, deps, ndeps, p->eventRecord.event, N_EVENT_RECORD);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return graph_add_event_node(out, h, deps, ndeps, p->eventWait.event, N_EVENT_WAIT);
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
}

SIMCUDA_API CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                    const CUgraphNode *dependencies, size_t numDependencies,
                                    CUgraphNodeParams *nodeParams) {
    API_ENTER();
    API_LOCKED(add_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

/* Edge data (ports, edge types) changes nothing here and is not kept: every edge is a full
 * dependency, read back with default data. */
SIMCUDA_API CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                       const CUgraphNode *dependencies,
                                       const CUgraphEdgeData *dependencyData,
                                       size_t numDependencies, CUgraphNodeParams *nodeParams) {
    (void)dependencyData;
    API_ENTER();
    API_LOCKED(add_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

SIMCUDA_API CUresult cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                              const CUgraphNode *dependencies,
                                              size_t numDependencies, CUgraph childGraph) {
    API_ENTER();
    API_LOCKED(add_child_node(phGraphNode, hGraph, dependencies, numDependencies, childGraph, false));
}

SIMCUDA_API CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph) {
    API_ENTER();
    API_LOCKED(child_graph(hNode, phGraph));
}

SIMCUDA_API CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags) {
    API_ENTER();
    API_LOCKED(graph_create(phGraph, flags));
}

SIMCUDA_API CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                            const CUgraphNode *dependencies,
                                            size_t numDependencies,
                                            CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams) {
    API_ENTER();
    API_LOCKED(add_alloc_node(phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

SIMCUDA_API CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                           const CUgraphNode *dependencies,
                                           size_t numDependencies, CUdeviceptr dptr) {
    API_ENTER();
    API_LOCKED(add_free_node(phGraphNode, hGraph, dependencies, numDependencies, dptr));
}

SIMCUDA_API CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes) {
    API_ENTER();
    API_LOCKED(get_nodes(hGraph, nodes, numNodes));
}

SIMCUDA_API CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type) {
    API_ENTER();
    API_LOCKED(node_type(hNode, type));
}

SIMCUDA_API CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode,
                                                  CUDA_MEM_ALLOC_NODE_PARAMS *params_out) {
    API_ENTER();
    API_LOCKED(alloc_node_params(hNode, params_out));
}

SIMCUDA_API CUresult cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out) {
    API_ENTER();
    API_LOCKED(free_node_params(hNode, dptr_out));
}
