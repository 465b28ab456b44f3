/*
 * graphexec.c: executable graphs changed after instantiation.
 * cuGraphExecEventRecordNodeSetEvent and cuGraphExecEventWaitNodeSetEvent (11.1) change one
 * event node, cuGraphExecKernelNodeSetParams (10.1; _v2, 12.0), cuGraphExecMemcpyNodeSetParams
 * and cuGraphExecMemsetNodeSetParams (10.2) one kernel, memcpy or memset node,
 * cuGraphExecChildGraphNodeSetParams (11.1) the nodes that came from one child graph node,
 * cuGraphExecUpdate (10.2; _v2, 12.0) every node, and cuGraphExecNodeSetParams (12.2) any of
 * the first five through the generic node structure. cuGraphNodeSetEnabled and
 * cuGraphNodeGetEnabled (11.6) disable a kernel, memcpy or memset node (it runs as an empty
 * node) and enable it again (any other type: CUDA_ERROR_INVALID_VALUE). Launches after the
 * change run the new parameters (graph.c).
 *
 * A node of an executable graph is named by the CUgraphNode it was instantiated from: a node
 * of the graph the executable graph was made from, or of a child graph within it (instantiation
 * flattens child graphs and keeps every node's handle). An update copies parameters only: the
 * executable graph's nodes keep the identities they were instantiated with, as in CUDA, so
 * after an update from another graph, that graph's node handles name nothing here. Nor does
 * any change touch a node's enabled state: the programming guide ("Individual node enable")
 * says it is unaffected by individual node updates and by cuGraphExecUpdate, and parameters
 * set while a node is disabled take effect when it is enabled again.
 *
 * The simulator's update rule. Edges are not compared (a simulator limit): two graphs have
 * the same topology when their flattened sequences (graph_flatten) have the same length
 * (CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED otherwise) and the same node type at every
 * position (CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED otherwise). Of the reference's
 * limitations, these are modelled: memory nodes cannot change (allocation nodes keep their
 * address, size and device, free nodes their address); a kernel node's function keeps its
 * owning context (CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE); a memcpy node keeps
 * both sides' memory types; a memset node keeps its height, and a 2D memset its element size,
 * width and pitch (CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED for the others). Every other
 * parameter may change: the operands' contexts and devices are not checked (every device lies
 * in the simulator's one address space). A refused update changes nothing and is
 * CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE. The single-node setters apply the same rule and refuse
 * with CUDA_ERROR_INVALID_VALUE, as the reference lists no other error; a memcpy node's setter
 * also needs one-dimensional copies (one row, one slice) before and after, as its reference
 * says, and the new parameters must be valid as for adding such a node (graphparams.c).
 *
 * User objects (the programming guide's rule): a successful update replaces the executable
 * graph's references with copies of the new graph's; a child graph change adds references to
 * what the new child graph holds (those of the child it replaced stay until the executable
 * graph is destroyed: the simulator does not count references per child).
 */
#include <stdlib.h>

#include "internal.h"

/* An owner that is never a handle (handles never have the top bit set): references held
 * while an update swaps the executable graph's. */
#define SWAP_OWNER(exec) ((exec) ^ (1ull << 63))

static struct graph_exec *exec_get(CUgraphExec h) {
    return obj_get(HK_GRAPH_EXEC, (uint64_t)(uintptr_t)h);
}

/* The node of e instantiated from CUgraphNode h, or NULL. */
static struct node *exec_node(struct graph_exec *e, CUgraphNode h) {
    for (size_t i = 0; h && i < e->n; i++)
        if (e->nodes[i].handle == (uint64_t)(uintptr_t)h) return &e->nodes[i];
    return NULL;
}

static CUresult exec_set_event(CUgraphExec h, CUgraphNode node, CUevent event,
                               enum node_kind kind) {
    struct graph_exec *e = exec_get(h);
    struct node *n = e ? exec_node(e, node) : NULL;
    uint64_t ev = event_handle(event);
    if (!n || n->kind != kind || !ev) return CUDA_ERROR_INVALID_VALUE;
    n->event = ev;
    return CUDA_SUCCESS;
}

/* Whether node b (of the new graph) may give its parameters to a (of the executable graph). */
static CUgraphExecUpdateResult node_compatible(const struct node *a, const struct node *b) {
    if (a->kind != b->kind) return CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED;
    bool same = true;
    switch (a->kind) {
    case N_ALLOC: same = a->maddr == b->maddr && a->msize == b->msize && a->mdev == b->mdev; break;
    case N_FREE: same = a->maddr == b->maddr; break;
    case N_KERNEL:
        if (a->ctx != b->ctx) return CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE;
        break;
    case N_COPY:
        same = a->desc.srcMemoryType == b->desc.srcMemoryType &&
               a->desc.dstMemoryType == b->desc.dstMemoryType;
        break;
    case N_SET:
        same = a->rows == b->rows &&
               (a->rows == 1 || (a->elem == b->elem && a->count == b->count && a->pitch == b->pitch));
        break;
    default: break;
    }
    return same ? CU_GRAPH_EXEC_UPDATE_SUCCESS : CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED;
}

/* cuGraphExecUpdate: the checks, then every node's parameters, or nothing. */
static CUresult exec_update(CUgraphExec h, CUgraph hg, CUgraphExecUpdateResultInfo *info) {
    if (!info) return CUDA_ERROR_INVALID_VALUE;
    info->result = CU_GRAPH_EXEC_UPDATE_ERROR;
    info->errorNode = NULL;
    info->errorFromNode = NULL;
    struct graph_exec *e = exec_get(h);
    struct graph *g = graph_get(hg);
    /* A graph moved into a child graph node exists only as part of its parent. */
    if (!e || !g || graph_is_child(g)) return CUDA_ERROR_INVALID_VALUE;
    struct node *nodes;
    size_t n;
    CUresult r = graph_flatten(g, &nodes, &n);
    if (r != CUDA_SUCCESS) return r;
    CUgraphExecUpdateResult res = n == e->n ? CU_GRAPH_EXEC_UPDATE_SUCCESS
                                            : CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED;
    for (size_t i = 0; i < n && res == CU_GRAPH_EXEC_UPDATE_SUCCESS; i++) {
        res = node_compatible(&e->nodes[i], &nodes[i]);
        /* The node of hGraph the update could not take. */
        if (res != CU_GRAPH_EXEC_UPDATE_SUCCESS)
            info->errorNode = (CUgraphNode)(uintptr_t)nodes[i].handle;
    }
    if (res == CU_GRAPH_EXEC_UPDATE_SUCCESS && !graph_user_objects_to(g, SWAP_OWNER(H(e)))) {
        userobj_owner_release(SWAP_OWNER(H(e)));
        res = CU_GRAPH_EXEC_UPDATE_ERROR;
        r = CUDA_ERROR_OUT_OF_MEMORY;
    }
    info->result = res;
    if (res != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
        free(nodes);
        return r != CUDA_SUCCESS ? r : CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE;
    }
    for (size_t i = 0; i < n; i++) node_take_params(&e->nodes[i], &nodes[i]);
    free(nodes);
    /* The new graph's references replace the old ones; an object both hold never drops to
     * zero on the way. */
    userobj_owner_release(H(e));
    userobj_owner_move(SWAP_OWNER(H(e)), H(e));
    return CUDA_SUCCESS;
}

/* The 10.2 ABI: the error node and the result through two pointers. */
static CUresult exec_update_v1(CUgraphExec h, CUgraph hg, CUgraphNode *error_node,
                               CUgraphExecUpdateResult *result) {
    if (!error_node || !result) return CUDA_ERROR_INVALID_VALUE;
    CUgraphExecUpdateResultInfo info;
    CUresult r = exec_update(h, hg, &info);
    *error_node = info.errorNode;
    *result = info.result;
    return r;
}

/* cuGraphExecChildGraphNodeSetParams: node is a child graph node of the graph e was made
 * from; the nodes that came from it take the parameters of child's, under the update rule. */
static CUresult exec_set_child(CUgraphExec h, CUgraphNode node, CUgraph child) {
    struct graph_exec *e = exec_get(h);
    struct graph *owner_graph = NULL;
    const struct node *cn = graph_node_get_mut(node, &owner_graph);
    struct graph *c = graph_get(child);
    if (!e || !cn || cn->kind != N_CHILD || owner_graph != e->source || !c || graph_is_child(c))
        return CUDA_ERROR_INVALID_VALUE;
    struct node *nodes;
    size_t n;
    CUresult r = graph_flatten(c, &nodes, &n);
    if (r != CUDA_SUCCESS) return r;
    uint64_t owner = (uint64_t)(uintptr_t)node;
    size_t k = 0; /* the nodes of e that came from `node`, in order, matched with child's */
    for (size_t i = 0; i < e->n && r == CUDA_SUCCESS; i++) {
        if (e->nodes[i].owner != owner) continue;
        if (k >= n || node_compatible(&e->nodes[i], &nodes[k]) != CU_GRAPH_EXEC_UPDATE_SUCCESS)
            r = CUDA_ERROR_INVALID_VALUE;
        k++;
    }
    if (r == CUDA_SUCCESS && k != n) r = CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS && !graph_user_objects_to(c, H(e))) r = CUDA_ERROR_OUT_OF_MEMORY;
    for (size_t i = 0, j = 0; r == CUDA_SUCCESS && i < e->n; i++)
        if (e->nodes[i].owner == owner) node_take_params(&e->nodes[i], &nodes[j++]);
    free(nodes);
    return r;
}

/* One kernel, memcpy or memset node of e: node h of kind `kind` takes `made`'s parameters
 * (when making them succeeded: r) under the update rule; a memcpy's old and new copies must
 * be one-dimensional (one row, one slice). */
static CUresult exec_set_work(CUgraphExec h, CUgraphNode node, enum node_kind kind, CUresult r,
                              const struct node *made) {
    struct graph_exec *e = exec_get(h);
    struct node *n = e ? exec_node(e, node) : NULL;
    if (!n || n->kind != kind) return CUDA_ERROR_INVALID_VALUE;
    if (r != CUDA_SUCCESS) return r;
    if (node_compatible(n, made) != CU_GRAPH_EXEC_UPDATE_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
    if (kind == N_COPY && (n->desc.Height != 1 || n->desc.Depth != 1 || made->desc.Height != 1 ||
                           made->desc.Depth != 1 || made->desc.WidthInBytes == 0))
        return CUDA_ERROR_INVALID_VALUE;
    node_take_params(n, made);
    return CUDA_SUCCESS;
}

static CUresult exec_set_kernel_v1(CUgraphExec h, CUgraphNode node,
                                   const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
    struct node made;
    return exec_set_work(h, node, N_KERNEL, kernel_node_v1(p, &made), &made);
}

static CUresult exec_set_kernel_v2(CUgraphExec h, CUgraphNode node,
                                   const CUDA_KERNEL_NODE_PARAMS_v2 *p) {
    struct node made;
    return exec_set_work(h, node, N_KERNEL, kernel_node_v2(p, &made), &made);
}

static CUresult exec_set_memcpy(CUgraphExec h, CUgraphNode node, const CUDA_MEMCPY3D *p,
                                CUcontext ctx) {
    struct node made;
    struct ctx *c;
    CUresult r = p ? ctx_resolve(ctx, &c) : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) r = copy_node_make(p, c, &made);
    return exec_set_work(h, node, N_COPY, r, &made);
}

static CUresult exec_set_memset(CUgraphExec h, CUgraphNode node, const CUDA_MEMSET_NODE_PARAMS *p,
                                CUcontext ctx) {
    struct node made;
    struct ctx *c;
    CUresult r = p ? ctx_resolve(ctx, &c) : CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) r = memset_node_make(p, c, &made);
    return exec_set_work(h, node, N_SET, r, &made);
}

/* cuGraphNodeSetEnabled / cuGraphNodeGetEnabled: kernel, memcpy and memset nodes only. */
static struct node *exec_switchable(CUgraphExec h, CUgraphNode node) {
    struct graph_exec *e = exec_get(h);
    struct node *n = e ? exec_node(e, node) : NULL;
    return n && (n->kind == N_KERNEL || n->kind == N_COPY || n->kind == N_SET) ? n : NULL;
}

static CUresult exec_set_enabled(CUgraphExec h, CUgraphNode node, unsigned int enabled) {
    struct node *n = exec_switchable(h, node);
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    n->disabled = !enabled;
    return CUDA_SUCCESS;
}

static CUresult exec_get_enabled(CUgraphExec h, CUgraphNode node, unsigned int *enabled) {
    const struct node *n = exec_switchable(h, node);
    if (!n || !enabled) return CUDA_ERROR_INVALID_VALUE;
    *enabled = !n->disabled;
    return CUDA_SUCCESS;
}

/* cuGraphExecNodeSetParams: a child graph node (not itself in e, which holds its nodes) as
 * cuGraphExecChildGraphNodeSetParams; otherwise the node must be e's and of the structure's
 * type. Event record and wait nodes take their event, kernel, memcpy and memset nodes their
 * parameters as their own setters do; other types are CUDA_ERROR_NOT_SUPPORTED, a simulator
 * limit (their parameters change only by a whole-graph update here). */
static CUresult exec_node_set_params(CUgraphExec h, CUgraphNode node, CUgraphNodeParams *p) {
    if (!p || p->reserved0[0] || p->reserved0[1] || p->reserved0[2] || p->reserved2)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->type == CU_GRAPH_NODE_TYPE_GRAPH) return exec_set_child(h, node, p->graph.graph);
    struct graph_exec *e = exec_get(h);
    struct node *n = e ? exec_node(e, node) : NULL;
    if (!n || node_kind_type(n->kind) != p->type) return CUDA_ERROR_INVALID_VALUE;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return exec_set_event(h, node, p->eventRecord.event, N_EVENT_RECORD);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT:
        return exec_set_event(h, node, p->eventWait.event, N_EVENT_WAIT);
    case CU_GRAPH_NODE_TYPE_KERNEL:
    case CU_GRAPH_NODE_TYPE_MEMCPY:
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        struct node made;
        return exec_set_work(h, node, n->kind, node_from_params(p, &made), &made);
    }
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
}

SIMCUDA_API CUresult cuGraphExecEventRecordNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                        CUevent event) {
    API_ENTER();
    API_LOCKED(exec_set_event(hGraphExec, hNode, event, N_EVENT_RECORD));
}

SIMCUDA_API CUresult cuGraphExecEventWaitNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                      CUevent event) {
    API_ENTER();
    API_LOCKED(exec_set_event(hGraphExec, hNode, event, N_EVENT_WAIT));
}

SIMCUDA_API CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                        CUgraph childGraph) {
    API_ENTER();
    API_LOCKED(exec_set_child(hGraphExec, hNode, childGraph));
}

SIMCUDA_API CUresult cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph,
                                       CUgraphNode *hErrorNode_out,
                                       CUgraphExecUpdateResult *updateResult_out) {
    API_ENTER();
    API_LOCKED_THEN_DESTRUCTORS(
        exec_update_v1(hGraphExec, hGraph, hErrorNode_out, updateResult_out));
}

SIMCUDA_API CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                                          CUgraphExecUpdateResultInfo *resultInfo) {
    API_ENTER();
    API_LOCKED_THEN_DESTRUCTORS(exec_update(hGraphExec, hGraph, resultInfo));
}

SIMCUDA_API CUresult cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                              CUgraphNodeParams *nodeParams) {
    API_ENTER();
    API_LOCKED(exec_node_set_params(hGraphExec, hNode, nodeParams));
}

SIMCUDA_API CUresult cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                    const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams) {
    API_ENTER();
    API_LOCKED(exec_set_kernel_v1(hGraphExec, hNode, nodeParams));
}

SIMCUDA_API CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                       const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams) {
    API_ENTER();
    API_LOCKED(exec_set_kernel_v2(hGraphExec, hNode, nodeParams));
}

SIMCUDA_API CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                    const CUDA_MEMCPY3D *copyParams,
                                                    CUcontext ctx) {
    API_ENTER();
    API_LOCKED(exec_set_memcpy(hGraphExec, hNode, copyParams, ctx));
}

SIMCUDA_API CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                    const CUDA_MEMSET_NODE_PARAMS *memsetParams,
                                                    CUcontext ctx) {
    API_ENTER();
    API_LOCKED(exec_set_memset(hGraphExec, hNode, memsetParams, ctx));
}

SIMCUDA_API CUresult cuGraphNodeSetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode,
                                           unsigned int isEnabled) {
    API_ENTER();
    API_LOCKED(exec_set_enabled(hGraphExec, hNode, isEnabled));
}

SIMCUDA_API CUresult cuGraphNodeGetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode,
                                           unsigned int *isEnabled) {
    API_ENTER();
    API_LOCKED(exec_get_enabled(hGraphExec, hNode, isEnabled));
}
