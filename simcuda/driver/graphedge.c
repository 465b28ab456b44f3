/*
 * graphedge.c: a graph's edges read back (cuGraphGetEdges, 10.0; _v2 with edge data, 12.3) and
 * added between existing nodes (cuGraphAddDependencies, 10.0; _v2, 12.3), and the order in
 * which instantiation puts a graph's nodes.
 *
 * A graph keeps its edges as pairs of node indices, in the order they were made: a node added
 * by hand gets one from each of its dependencies, in the array's order (graph.c, graphnode.c,
 * graphparams.c); a captured node one from each of its stream's current dependencies (stream.c,
 * capture.c); a child graph node's copy of a graph has the same edges as the graph. Every edge
 * has the default (zero) edge data: cuGraphAddDependencies_v2 takes only NULL or zeroed edge
 * data, and cuGraphGetEdges_v2 never reports a lossy query.
 *
 * A node added to a graph depends only on nodes before it, so node order is a dependency order.
 * An edge added by cuGraphAddDependencies may go backwards; then instantiation orders the nodes
 * by their edges (graph_order: the smallest ready index first), and every launch runs them in
 * that order. An edge that exists already, from a node to itself, or that would close a cycle is
 * CUDA_ERROR_INVALID_VALUE, and a refused call adds no edge.
 */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

CUresult graph_order(const struct graph *g, size_t **order) {
    *order = NULL;
    size_t ne, nn;
    const struct edge *e = graph_edges(g, &ne);
    graph_nodes(g, &nn);
    bool forward = true;
    for (size_t i = 0; i < ne && forward; i++) forward = e[i].from < e[i].to;
    if (forward) return CUDA_SUCCESS;
    size_t *waiting = calloc(nn, sizeof *waiting); /* dependencies not yet placed */
    size_t *out = malloc(nn * sizeof *out);
    bool *placed = calloc(nn, sizeof *placed);
    if (!waiting || !out || !placed) {
        free(waiting);
        free(out);
        free(placed);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    for (size_t i = 0; i < ne; i++) waiting[e[i].to]++;
    CUresult r = CUDA_SUCCESS;
    for (size_t k = 0; k < nn && r == CUDA_SUCCESS; k++) {
        size_t next = 0;
        while (next < nn && (placed[next] || waiting[next])) next++;
        if (next == nn) {
            r = CUDA_ERROR_INVALID_VALUE; /* every node left waits for another: a cycle */
            break;
        }
        out[k] = next;
        placed[next] = true;
        for (size_t i = 0; i < ne; i++)
            if (e[i].from == next) waiting[e[i].to]--;
    }
    free(waiting);
    free(placed);
    if (r != CUDA_SUCCESS) {
        free(out);
        return r;
    }
    *order = out;
    return CUDA_SUCCESS;
}

static bool edge_data_zero(const CUgraphEdgeData *data, size_t n) {
    static const CUgraphEdgeData zero;
    for (size_t i = 0; data && i < n; i++)
        if (memcmp(&data[i], &zero, sizeof zero) != 0) return false;
    return true;
}

/* Both from and to NULL: the count. Otherwise up to *count edges, the rest of the arrays NULL
 * (edge data zero) and *count lowered to the number of edges when it was larger. */
static CUresult get_edges(CUgraph h, CUgraphNode *from, CUgraphNode *to, CUgraphEdgeData *data,
                          size_t *count) {
    struct graph *g = graph_get(h);
    if (!g || !count || (!from != !to) || (data && !from)) return CUDA_ERROR_INVALID_VALUE;
    size_t ne, nn;
    const struct edge *e = graph_edges(g, &ne);
    const struct node *nodes = graph_nodes(g, &nn);
    if (!from) {
        *count = ne;
        return CUDA_SUCCESS;
    }
    for (size_t i = 0; i < *count; i++) {
        from[i] = i < ne ? (CUgraphNode)(uintptr_t)nodes[e[i].from].handle : NULL;
        to[i] = i < ne ? (CUgraphNode)(uintptr_t)nodes[e[i].to].handle : NULL;
        if (data) memset(&data[i], 0, sizeof data[i]);
    }
    if (*count > ne) *count = ne;
    return CUDA_SUCCESS;
}

/* Whether g has the edge from -> to among its first n edges. */
static bool has_edge(const struct graph *g, size_t n, size_t from, size_t to) {
    size_t ne;
    const struct edge *e = graph_edges(g, &ne);
    for (size_t i = 0; i < n && i < ne; i++)
        if (e[i].from == from && e[i].to == to) return true;
    return false;
}

static CUresult add_dependencies(CUgraph h, const CUgraphNode *from, const CUgraphNode *to,
                                 const CUgraphEdgeData *data, size_t n) {
    struct graph *g = graph_get(h);
    if (!g || (n && (!from || !to)) || !edge_data_zero(data, n)) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < n; i++) {
        size_t a, b;
        if (!graph_node_index(g, from[i], &a) || !graph_node_index(g, to[i], &b) || a == b)
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (!graph_edges_reserve(g, n)) return CUDA_ERROR_OUT_OF_MEMORY;
    size_t before;
    graph_edges(g, &before);
    CUresult r = CUDA_SUCCESS;
    for (size_t i = 0; i < n && r == CUDA_SUCCESS; i++) {
        size_t a = 0, b = 0;
        graph_node_index(g, from[i], &a);
        graph_node_index(g, to[i], &b);
        size_t now;
        graph_edges(g, &now);
        if (has_edge(g, now, a, b))
            r = CUDA_ERROR_INVALID_VALUE; /* an edge already there, or given twice */
        else
            graph_edge_push(g, a, b);
    }
    size_t *order = NULL;
    if (r == CUDA_SUCCESS) r = graph_order(g, &order); /* a cycle: CUDA_ERROR_INVALID_VALUE */
    free(order);
    if (r != CUDA_SUCCESS) graph_edges_truncate(g, before);
    return r;
}

SIMCUDA_API CUresult cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
                                     size_t *numEdges) {
    API_ENTER();
    API_LOCKED(get_edges(hGraph, from, to, NULL, numEdges));
}

SIMCUDA_API CUresult cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
                                        CUgraphEdgeData *edgeData, size_t *numEdges) {
    API_ENTER();
    API_LOCKED(get_edges(hGraph, from, to, edgeData, numEdges));
}

SIMCUDA_API CUresult cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from,
                                            const CUgraphNode *to, size_t numDependencies) {
    API_ENTER();
    API_LOCKED(add_dependencies(hGraph, from, to, NULL, numDependencies));
}

SIMCUDA_API CUresult cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode *from,
                                               const CUgraphNode *to,
                                               const CUgraphEdgeData *edgeData,
                                               size_t numDependencies) {
    API_ENTER();
    API_LOCKED(add_dependencies(hGraph, from, to, edgeData, numDependencies));
}
