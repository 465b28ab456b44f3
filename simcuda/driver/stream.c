/*
 * stream.c: streams, events, stream callbacks and a minimal stream capture.
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
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "internal.h"

#define PRIORITY_LEAST 0
#define PRIORITY_GREATEST (-5)

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

struct stream {
    struct hdr h;
    struct ctx *ctx;
    unsigned int flags;
    int priority;
    CUstreamCaptureStatus capture;
    CUstreamCaptureMode mode;
    struct graph *graph;
    uint64_t capture_id; /* of the capture under way (or invalidated), unique in the process */
    struct stream *origin; /* for a stream that joined a capture: the stream that began it */
    bool graph_given;      /* captured into the program's graph (cuStreamBeginCaptureToGraph) */
    struct depset deps;    /* while capturing: what its next captured node depends on */
};

struct event {
    struct hdr h;
    struct ctx *ctx;
    unsigned int flags;
    bool recorded;
    struct timespec when;
    /* Last recorded on a capturing stream: that capture's id and origin stream (else 0, NULL). */
    uint64_t capture_id;
    struct stream *capture_origin;
    struct depset deps; /* the recording stream's current dependencies then */
};

static uint64_t next_graph_address = GRAPH_BASE;

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

/* Appends a node with no edges; its handle in *out. */
static CUresult node_append(struct graph *g, struct node *n, CUgraphNode *out) {
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
    CUresult r = node_append(g, n, out);
    if (r != CUDA_SUCCESS) return r;
    for (size_t i = 0; i < ndeps; i++) {
        size_t from;
        if (graph_node_index(g, deps[i], &from)) graph_edge_push(g, from, to);
    }
    return CUDA_SUCCESS;
}

/* A node captured on stream st: after every node of st's current dependencies, which become
 * the new node alone. */
static CUresult capture_append(struct stream *st, struct node *n) {
    struct graph *g = st->graph;
    if (!depset_reserve(&st->deps, 1) || !graph_edges_reserve(g, st->deps.n))
        return CUDA_ERROR_OUT_OF_MEMORY;
    size_t to = g->nnodes;
    CUresult r = node_append(g, n, NULL);
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

bool graph_node_address(uint64_t addr) {
    return addr >= GRAPH_BASE && addr < next_graph_address;
}

struct graph *graph_new(struct ctx *c) {
    struct graph *g = obj_new(HK_GRAPH, sizeof *g);
    if (g) g->ctx = c;
    return g;
}

CUgraph graph_handle(const struct graph *g) { return (CUgraph)(uintptr_t)H(g); }

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
        if (node_append(g, &n, NULL) != CUDA_SUCCESS) return NULL;
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
static void capture_invalidate(struct stream *st) {
    st->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
    if (st->origin) st->origin->capture = CU_STREAM_CAPTURE_STATUS_INVALIDATED;
}

/* Synchronize and query on a capturing stream are illegal and invalidate the capture. */
static CUresult stream_wait_idle(CUstream h, bool ptsz) {
    struct sref r;
    CUresult res = stream_ref(h, ptsz, &r);
    if (res != CUDA_SUCCESS) return res;
    if (r.capturing) {
        capture_invalidate(r.st);
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
    }
    pools_sync(r.ctx->dev);
    return CUDA_SUCCESS;
}

/* The capture under way whose event ev is (its origin stream), or NULL: the event was last
   recorded outside a capture, or in one that has ended since. */
static struct stream *event_capture(const struct event *ev) {
    struct stream *o = ev->capture_origin;
    if (!o || !o->h.alive || o->capture_id != ev->capture_id ||
        o->capture == CU_STREAM_CAPTURE_STATUS_NONE)
        return NULL;
    return o;
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
        capture_invalidate(r.st);
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
        if (!g || g->owner || g->ctx != s->ctx || !graph_owns_nodes(g, deps, ndeps))
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
        if (!s->graph_given) g->h.alive = false;
        *out = NULL;
        return CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *out = (CUgraph)(uintptr_t)H(g);
    return CUDA_SUCCESS;
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

SIMCUDA_API CUresult cuGraphDestroy(CUgraph hGraph) {
    API_ENTER();
    API_LOCKED_THEN_DESTRUCTORS(graph_destroy(hGraph));
}

/* ---- events ------------------------------------------------------------------------------- */

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
    e->capture_id = 0;
    e->capture_origin = NULL;
    e->deps.n = 0;
    e->recorded = true;
    clock_gettime(CLOCK_MONOTONIC, &e->when);
    return CUDA_SUCCESS;
}

void event_record_node_ran(uint64_t event) {
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
            capture_invalidate(s);
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
    event_record_node_ran(H(ev));
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
        capture_invalidate(origin);
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
