/*
 * graphstore.c: graphs as they are built, by a capture (stream.c) or by hand (graph.c,
 * graphnode.c, graphparams.c): their nodes, edges, child graphs and clones, the addresses
 * their allocation nodes are given, and their flattening into an executable graph's node list.
 *
 * A CUgraphNode is an HK_NODE object naming a node by its graph and index; nodes are never
 * removed, so indices (and the edges made of them) are stable. A clone keeps its source's
 * nodes at the same indices.
 */
#include <stdlib.h>

#include "internal.h"

struct graph {
    struct hdr h;
    struct ctx *ctx;
    uint64_t *allocs;   /* allocation nodes of this graph that none of its free nodes frees */
    size_t n, cap;
    size_t mem_nodes;   /* allocation and free nodes */
    uint64_t instance;  /* the executable graph made from it, while alive */
    struct graph *owner; /* the graph whose child graph node owns it (moved there), or NULL */
    const struct graph *cloned_from; /* the graph a child graph node's clone was made of */
    struct node *nodes;
    size_t nnodes, capnodes;
    struct edge *edges; /* in the order they were made */
    size_t nedges, capedges;
};

/* What a kernel node's getter hands out as kernelParams: one pointer per parameter of the
 * built-in kernels, each to that parameter's value. */
struct kernel_args {
    void *ptrs[3];
    CUdeviceptr p;
    unsigned int value, n;
};

/* What a CUgraphNode names: a node of a graph, by index (nodes are never removed). */
struct gnode {
    struct hdr h;
    struct graph *g;
    size_t index;
    /* Kernel nodes: what the last get returned. Here rather than in struct node, whose copies
     * (executable graphs, clones, a reallocated array) would move it under the caller. */
    struct kernel_args args;
};

static uint64_t next_graph_address = GRAPH_BASE;

uint64_t graph_next_address(size_t size) {
    uint64_t addr = next_graph_address;
    next_graph_address += round_up(size ? size : 1, HEAP_ALIGN);
    if (next_graph_address >= GRAPH_BASE + GRAPH_SPAN) next_graph_address = GRAPH_BASE;
    return addr;
}

static bool track_alloc(struct graph *g, uint64_t addr) {
    if (g->n == g->cap) {
        size_t cap = g->cap ? g->cap * 2 : 8;
        uint64_t *v = realloc(g->allocs, cap * sizeof *v);
        if (!v) return false;
        g->allocs = v;
        g->cap = cap;
    }
    g->allocs[g->n++] = addr;
    return true;
}

static bool untrack_alloc(struct graph *g, uint64_t addr) {
    for (size_t i = 0; i < g->n; i++) {
        if (g->allocs[i] != addr) continue;
        g->allocs[i] = g->allocs[--g->n];
        return true;
    }
    return false;
}

CUresult graph_node_append(struct graph *g, struct node *n, CUgraphNode *out) {
    if (g->nnodes == g->capnodes) {
        size_t cap = g->capnodes ? g->capnodes * 2 : 8;
        struct node *v = realloc(g->nodes, cap * sizeof *v);
        if (!v) return CUDA_ERROR_OUT_OF_MEMORY;
        g->nodes = v;
        g->capnodes = cap;
    }
    if (n->kind == N_ALLOC && !track_alloc(g, n->maddr)) return CUDA_ERROR_OUT_OF_MEMORY;
    struct gnode *gn = obj_new(HK_NODE, sizeof *gn);
    if (!gn) return CUDA_ERROR_OUT_OF_MEMORY;
    gn->g = g;
    gn->index = g->nnodes;
    if (n->kind == N_FREE) untrack_alloc(g, n->maddr);
    if (n->kind == N_ALLOC || n->kind == N_FREE) g->mem_nodes++;
    n->handle = H(gn);
    n->owner = 0; /* a node of an executable graph launched into a capture is the capture's */
    n->disabled = false;
    g->nodes[g->nnodes++] = *n;
    if (out) *out = (CUgraphNode)(uintptr_t)H(gn);
    return CUDA_SUCCESS;
}

bool graph_edges_reserve(struct graph *g, size_t more) {
    return sim_grow((void **)&g->edges, &g->capedges, g->nedges + more, sizeof *g->edges);
}

void graph_edge_push(struct graph *g, size_t from, size_t to) {
    g->edges[g->nedges++] = (struct edge){.from = from, .to = to};
}

void graph_edges_truncate(struct graph *g, size_t n) {
    if (n < g->nedges) g->nedges = n;
}

const struct edge *graph_edges(const struct graph *g, size_t *n) {
    *n = g->nedges;
    return g->edges;
}

/* Every edge is made once the node is in, so a failed add leaves no edge behind. */
CUresult graph_add_node(struct graph *g, struct node *n, const CUgraphNode *deps, size_t ndeps,
                        CUgraphNode *out) {
    if (!graph_edges_reserve(g, ndeps)) return CUDA_ERROR_OUT_OF_MEMORY;
    size_t to = g->nnodes;
    CUresult r = graph_node_append(g, n, out);
    if (r != CUDA_SUCCESS) return r;
    for (size_t i = 0; i < ndeps; i++) {
        size_t from;
        if (graph_node_index(g, deps[i], &from)) graph_edge_push(g, from, to);
    }
    return CUDA_SUCCESS;
}

bool graph_node_address(uint64_t addr) {
    return addr >= GRAPH_BASE && addr < next_graph_address;
}

struct graph *graph_new(struct ctx *c) {
    struct graph *g = obj_new(HK_GRAPH, sizeof *g);
    if (g) g->ctx = c;
    return g;
}

CUgraph graph_handle(const struct graph *g) { return (CUgraph)(uintptr_t)H(g); }

void graph_discard(struct graph *g) { g->h.alive = false; }

const struct node *graph_node_get(CUgraphNode h) { return graph_node_get_mut(h, NULL); }

struct node *graph_node_get_mut(CUgraphNode h, struct graph **g) {
    struct gnode *gn = obj_get(HK_NODE, (uint64_t)(uintptr_t)h);
    if (!gn || !gn->g->h.alive) return NULL;
    if (g) *g = gn->g;
    return &gn->g->nodes[gn->index];
}

void **graph_node_kernel_params(CUgraphNode h, const struct node *n) {
    struct gnode *gn = obj_get(HK_NODE, (uint64_t)(uintptr_t)h);
    struct kernel_args *a = &gn->args;
    a->p = n->kparams[0];
    a->value = (unsigned int)n->kparams[1];
    a->n = (unsigned int)n->kparams[2];
    a->ptrs[0] = &a->p;
    a->ptrs[1] = &a->value;
    a->ptrs[2] = &a->n;
    return a->ptrs;
}

bool graph_node_index(const struct graph *g, CUgraphNode h, size_t *index) {
    struct gnode *gn = obj_get(HK_NODE, (uint64_t)(uintptr_t)h);
    if (!gn || gn->g != g) return false;
    *index = gn->index;
    return true;
}

bool graph_owns_nodes(const struct graph *g, const CUgraphNode *deps, size_t n) {
    if (n && !deps) return false;
    for (size_t i = 0; i < n; i++) {
        size_t index;
        if (!graph_node_index(g, deps[i], &index)) return false;
        for (size_t j = 0; j < i; j++)
            if (deps[j] == deps[i]) return false;
    }
    return true;
}

bool graph_alloc_unfreed(const struct graph *g, uint64_t addr) {
    for (size_t i = 0; i < g->n; i++)
        if (g->allocs[i] == addr) return true;
    return false;
}

bool graph_has_memory_nodes(const struct graph *g) {
    if (g->mem_nodes > 0) return true;
    for (size_t i = 0; i < g->nnodes; i++)
        if (g->nodes[i].kind == N_CHILD && graph_has_memory_nodes(g->nodes[i].child)) return true;
    return false;
}

bool graph_is_child(const struct graph *g) { return g->owner != NULL; }

/* A clone holds its source's nodes at the same indices (graph_clone), so the original's index
 * names its counterpart; a node added to the original after the clone was made has none. */
bool graph_find_in_clone(CUgraphNode original, const struct graph *clone, CUgraphNode *out) {
    struct gnode *gn = obj_get(HK_NODE, (uint64_t)(uintptr_t)original);
    if (!gn || !clone->cloned_from || gn->g != clone->cloned_from || gn->index >= clone->nnodes)
        return false;
    *out = (CUgraphNode)(uintptr_t)clone->nodes[gn->index].handle;
    return true;
}

/* A copy of src (which has no memory nodes), child graphs copied too, owned by `owner`. Its
 * nodes are at the same indices as their originals, so the edges copy as they are. */
static struct graph *graph_clone(const struct graph *src, struct graph *owner) {
    struct graph *g = graph_new(src->ctx);
    if (!g) return NULL;
    g->owner = owner;
    g->cloned_from = src;
    for (size_t i = 0; i < src->nnodes; i++) {
        struct node n = src->nodes[i];
        if (n.kind == N_CHILD && !(n.child = graph_clone(src->nodes[i].child, g))) return NULL;
        if (graph_node_append(g, &n, NULL) != CUDA_SUCCESS) return NULL;
    }
    if (!graph_edges_reserve(g, src->nedges)) return NULL;
    for (size_t i = 0; i < src->nedges; i++)
        graph_edge_push(g, src->edges[i].from, src->edges[i].to);
    return g;
}

CUresult graph_add_child(struct graph *g, struct graph *child, bool move,
                         const CUgraphNode *deps, size_t ndeps, CUgraphNode *out) {
    if (child->owner || child == g) return CUDA_ERROR_INVALID_VALUE;
    if (!move) {
        if (graph_has_memory_nodes(child)) return CUDA_ERROR_INVALID_VALUE;
        child = graph_clone(child, g);
        if (!child) return CUDA_ERROR_OUT_OF_MEMORY;
    } else {
        /* Not a graph g is itself inside, nor one instantiated on its own. */
        for (const struct graph *a = g->owner; a; a = a->owner)
            if (a == child) return CUDA_ERROR_INVALID_VALUE;
        if (graph_instance(child)) return CUDA_ERROR_INVALID_VALUE;
    }
    struct node n = {.kind = N_CHILD, .child = child};
    CUresult r = graph_add_node(g, &n, deps, ndeps, out);
    if (r == CUDA_SUCCESS) child->owner = g;
    return r;
}

static CUresult flatten_into(const struct graph *g, struct node **v, size_t *n, size_t *cap,
                             uint64_t owner);

/* Appends node i of g (a child graph node: its graph's nodes) to *v. */
static CUresult flatten_node(const struct graph *g, size_t i, struct node **v, size_t *n,
                             size_t *cap, uint64_t owner) {
    if (g->nodes[i].kind == N_CHILD)
        return flatten_into(g->nodes[i].child, v, n, cap, owner ? owner : g->nodes[i].handle);
    if (*n == *cap) {
        size_t c = *cap ? *cap * 2 : 8;
        struct node *w = realloc(*v, c * sizeof *w);
        if (!w) return CUDA_ERROR_OUT_OF_MEMORY;
        *v = w;
        *cap = c;
    }
    (*v)[*n] = g->nodes[i];
    (*v)[(*n)++].owner = owner;
    return CUDA_SUCCESS;
}

/* Appends g's nodes to *v in dependency order (graph_order), each marked as coming from child
 * graph node `owner` (0 at the top level; a child graph at any depth below a top-level child
 * graph node keeps that node's). */
static CUresult flatten_into(const struct graph *g, struct node **v, size_t *n, size_t *cap,
                             uint64_t owner) {
    size_t *order;
    CUresult r = graph_order(g, &order);
    for (size_t k = 0; k < g->nnodes && r == CUDA_SUCCESS; k++)
        r = flatten_node(g, order ? order[k] : k, v, n, cap, owner);
    free(order);
    return r;
}

CUresult graph_flatten(const struct graph *g, struct node **out, size_t *n) {
    size_t cap = 0;
    *out = NULL;
    *n = 0;
    CUresult r = flatten_into(g, out, n, &cap, 0);
    if (r != CUDA_SUCCESS) {
        free(*out);
        *out = NULL;
        *n = 0;
    }
    return r;
}

bool graph_user_objects_to(const struct graph *g, uint64_t exec) {
    if (!userobj_owner_copy(H(g), exec)) return false;
    for (size_t i = 0; i < g->nnodes; i++)
        if (g->nodes[i].kind == N_CHILD && !graph_user_objects_to(g->nodes[i].child, exec))
            return false;
    return true;
}

uint64_t graph_instance(const struct graph *g) {
    return g->instance && obj_get(HK_GRAPH_EXEC, g->instance) ? g->instance : 0;
}

void graph_set_instance(struct graph *g, uint64_t exec) { g->instance = exec; }

struct graph *graph_get(CUgraph h) { return obj_get(HK_GRAPH, (uint64_t)(uintptr_t)h); }

struct ctx *graph_ctx(const struct graph *g) { return g->ctx; }

const struct node *graph_nodes(const struct graph *g, size_t *n) {
    *n = g->nnodes;
    return g->nodes;
}


/* A graph and the child graphs its nodes own die together. */
static void graph_kill(struct graph *g) {
    g->h.alive = false;
    userobj_owner_release(H(g));
    for (size_t i = 0; i < g->nnodes; i++)
        if (g->nodes[i].kind == N_CHILD) graph_kill(g->nodes[i].child);
}

static CUresult graph_destroy(CUgraph h) {
    struct graph *g = obj_get(HK_GRAPH, (uint64_t)(uintptr_t)h);
    /* A child graph goes with the node that owns it. */
    if (!g || g->owner) return CUDA_ERROR_INVALID_VALUE;
    graph_kill(g);
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuGraphDestroy(CUgraph hGraph) {
    API_ENTER();
    API_LOCKED_THEN_DESTRUCTORS(graph_destroy(hGraph));
}
