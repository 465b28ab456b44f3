/*
 * graphnode.c: nodes of graphs built by hand beyond memory and child graph nodes (graph.c):
 * event record and wait nodes (CUDA 11.1) with their events read and changed in the graph,
 * cuGraphAddMemsetNode (10.0; graphparams.c makes the node), cuGraphNodeSetParams (12.2) for
 * event nodes (kernel, memcpy and memset nodes: graphparams.c), and
 * cuGraphNodeFindInClone (10.0) for the copies child graph nodes hold (cuGraphClone itself is
 * not implemented: a child graph node's copy is the only clone here).
 *
 * A node built here is the very node a capture would have made: an event record node is what
 * cuEventRecordWithFlags(CU_EVENT_RECORD_EXTERNAL) adds under capture, a memset node what
 * cuMemsetD2D32Async adds. Each launch of an executable graph records an event record node's
 * event (graph.c's run_node); a wait node has nothing to wait for on a device that is always
 * idle. Changing a node here changes the graph, and so every later instantiation, never an
 * executable graph already made from it (graphexec.c changes those).
 *
 * Errors follow the reference: a missing graph, output pointer, event or a dependency that is
 * not a node of the graph is CUDA_ERROR_INVALID_VALUE (these functions document no
 * CUDA_ERROR_INVALID_HANDLE), and so is a node of another type than the call's.
 */
#include <string.h>

#include "internal.h"

CUresult graph_add_event_node(CUgraphNode *out, CUgraph h, const CUgraphNode *deps,
                              size_t ndeps, CUevent event, enum node_kind kind) {
    struct graph *g = graph_get(h);
    uint64_t ev = event_handle(event);
    if (!out || !g || !ev || !graph_owns_nodes(g, deps, ndeps)) return CUDA_ERROR_INVALID_VALUE;
    struct node n = {.kind = kind, .event = ev};
    return graph_add_node(g, &n, deps, ndeps, out);
}

static CUresult event_node_get(CUgraphNode h, enum node_kind kind, CUevent *out) {
    const struct node *n = graph_node_get(h);
    if (!n || n->kind != kind || !out) return CUDA_ERROR_INVALID_VALUE;
    *out = (CUevent)(uintptr_t)n->event;
    return CUDA_SUCCESS;
}

static CUresult event_node_set(CUgraphNode h, enum node_kind kind, CUevent event) {
    struct node *n = graph_node_get_mut(h, NULL);
    uint64_t ev = event_handle(event);
    if (!n || n->kind != kind || !ev) return CUDA_ERROR_INVALID_VALUE;
    n->event = ev;
    return CUDA_SUCCESS;
}

static CUresult find_in_clone(CUgraphNode *out, CUgraphNode original, CUgraph clone) {
    struct graph *c = graph_get(clone);
    if (!out || !c || !graph_find_in_clone(original, c, out)) return CUDA_ERROR_INVALID_VALUE;
    return CUDA_SUCCESS;
}

/* cuGraphNodeSetParams: the structure's type must be the node's; event record and wait nodes
 * take their new event, kernel, memcpy and memset nodes their new parameters (graphparams.c),
 * any other type is CUDA_ERROR_NOT_SUPPORTED (a simulator limit). */
static CUresult node_set_params(CUgraphNode h, CUgraphNodeParams *p) {
    const struct node *n = graph_node_get(h);
    if (!n || !p || p->reserved0[0] || p->reserved0[1] || p->reserved0[2] || p->reserved2 ||
        node_kind_type(n->kind) != p->type)
        return CUDA_ERROR_INVALID_VALUE;
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_EVENT_RECORD:
        return event_node_set(h, N_EVENT_RECORD, p->eventRecord.event);
    case CU_GRAPH_NODE_TYPE_WAIT_EVENT: return event_node_set(h, N_EVENT_WAIT, p->eventWait.event);
    case CU_GRAPH_NODE_TYPE_KERNEL:
    case CU_GRAPH_NODE_TYPE_MEMCPY:
    case CU_GRAPH_NODE_TYPE_MEMSET: return graph_node_set_params(h, p);
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
}

SIMCUDA_API CUresult cuGraphAddEventRecordNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                               const CUgraphNode *dependencies,
                                               size_t numDependencies, CUevent event) {
    API_ENTER();
    API_LOCKED(graph_add_event_node(phGraphNode, hGraph, dependencies, numDependencies, event,
                                    N_EVENT_RECORD));
}

SIMCUDA_API CUresult cuGraphAddEventWaitNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                             const CUgraphNode *dependencies,
                                             size_t numDependencies, CUevent event) {
    API_ENTER();
    API_LOCKED(graph_add_event_node(phGraphNode, hGraph, dependencies, numDependencies, event,
                                    N_EVENT_WAIT));
}

SIMCUDA_API CUresult cuGraphEventRecordNodeGetEvent(CUgraphNode hNode, CUevent *event_out) {
    API_ENTER();
    API_LOCKED(event_node_get(hNode, N_EVENT_RECORD, event_out));
}

SIMCUDA_API CUresult cuGraphEventRecordNodeSetEvent(CUgraphNode hNode, CUevent event) {
    API_ENTER();
    API_LOCKED(event_node_set(hNode, N_EVENT_RECORD, event));
}

SIMCUDA_API CUresult cuGraphEventWaitNodeGetEvent(CUgraphNode hNode, CUevent *event_out) {
    API_ENTER();
    API_LOCKED(event_node_get(hNode, N_EVENT_WAIT, event_out));
}

SIMCUDA_API CUresult cuGraphEventWaitNodeSetEvent(CUgraphNode hNode, CUevent event) {
    API_ENTER();
    API_LOCKED(event_node_set(hNode, N_EVENT_WAIT, event));
}

SIMCUDA_API CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                          const CUgraphNode *dependencies,
                                          size_t numDependencies,
                                          const CUDA_MEMSET_NODE_PARAMS *memsetParams,
                                          CUcontext ctx) {
    API_ENTER();
    API_LOCKED(graph_add_memset(phGraphNode, hGraph, dependencies, numDependencies, memsetParams,
                                ctx));
}

SIMCUDA_API CUresult cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams) {
    API_ENTER();
    API_LOCKED(node_set_params(hNode, nodeParams));
}

SIMCUDA_API CUresult cuGraphNodeFindInClone(CUgraphNode *phNode, CUgraphNode hOriginalNode,
                                            CUgraph hClonedGraph) {
    API_ENTER();
    API_LOCKED(find_in_clone(phNode, hOriginalNode, hClonedGraph));
}
