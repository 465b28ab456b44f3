/*
 * graphparams.c: the parameters of kernel, memcpy and memset nodes, made, read and changed in
 * graphs: cuGraphAddKernelNode, cuGraphKernelNodeGetParams and cuGraphKernelNodeSetParams
 * (10.0; each _v2 at 12.0 with CUDA_KERNEL_NODE_PARAMS_v2), cuGraphAddMemcpyNode,
 * cuGraphMemcpyNodeGetParams/SetParams, cuGraphMemsetNodeGetParams/SetParams (10.0), and the
 * same three node types in the generic node structure (cuGraphAddNode, cuGraphNodeSetParams,
 * cuGraphExecNodeSetParams: CUDA_KERNEL_NODE_PARAMS_v3, CUDA_MEMCPY_NODE_PARAMS,
 * CUDA_MEMSET_NODE_PARAMS_v2).
 *
 * A node made here is the very node a capture makes: a kernel node what cuLaunchKernel adds
 * under capture (module.c), a memcpy node what cuMemcpy3DAsync adds (copy.c), a memset node
 * what cuMemsetD2D32Async adds; the getters read captured nodes and nodes of child graphs
 * alike. What a getter returns is what the capture or the last add or set gave:
 * - kernel nodes: `func` the CUfunction given (or the CUkernel cast to one), or NULL with
 *   `kern` when the node was given a CUkernel that way (v2); the grid and block dimensions
 *   and shared memory; `kernelParams` an array the node owns of one pointer per parameter,
 *   each to that parameter's value (whether the launch gave kernelParams or `extra`), valid
 *   until the node's parameters change; `extra` NULL; (v2) `ctx` the node's context;
 * - memcpy nodes: the descriptor as given (a 1D copy: one row of ByteCount bytes, pitches
 *   ByteCount, slice heights 1; memory types HOST, DEVICE or UNIFIED as the copy had them,
 *   UNIFIED for cuMemcpy(Async) and batches);
 * - memset nodes: destination, pitch (0 for a captured 1D memset), value (the element's bits),
 *   element size, width in elements, height in rows.
 * Changing a node here changes the graph, and so every later instantiation, never an executable
 * graph already made from it (graphexec.c changes those).
 *
 * Errors follow the reference: a missing node, graph, output or parameter structure, a node of
 * another type, a dependency that is not the graph's, or parameters a launch would refuse is
 * CUDA_ERROR_INVALID_VALUE; a context that is not usable is the context's error; an array side
 * of a copy is checked as copy.c checks it (CUDA_ERROR_INVALID_HANDLE for no live array).
 */
#include <string.h>

#include "internal.h"

_Static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS_v1) == 56, "CUDA_KERNEL_NODE_PARAMS is 56 bytes");
_Static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS_v2) == 72, "CUDA_KERNEL_NODE_PARAMS_v2 is 72 bytes");
_Static_assert(sizeof(CUDA_KERNEL_NODE_PARAMS_v3) == 72, "CUDA_KERNEL_NODE_PARAMS_v3 is 72 bytes");
_Static_assert(offsetof(CUDA_KERNEL_NODE_PARAMS_v2, kernelParams) == 40 &&
                   offsetof(CUDA_KERNEL_NODE_PARAMS_v2, kern) == 56,
               "CUDA_KERNEL_NODE_PARAMS_v2's members where CUDA has them");
_Static_assert(sizeof(CUDA_MEMCPY3D) == 200, "CUDA_MEMCPY3D is 200 bytes");
_Static_assert(sizeof(CUDA_MEMCPY_NODE_PARAMS) == 216 &&
                   offsetof(CUDA_MEMCPY_NODE_PARAMS, copyCtx) == 8 &&
                   offsetof(CUDA_MEMCPY_NODE_PARAMS, copyParams) == 16,
               "CUDA_MEMCPY_NODE_PARAMS's layout");
_Static_assert(sizeof(CUDA_MEMSET_NODE_PARAMS) == 40 && sizeof(CUDA_MEMSET_NODE_PARAMS_v2) == 48,
               "memset node parameters are 40 and (v2) 48 bytes");
_Static_assert(offsetof(CUgraphNodeParams, kernel) == 16 &&
                   offsetof(CUgraphNodeParams, memcpy) == 16 &&
                   offsetof(CUgraphNodeParams, memset) == 16 &&
                   offsetof(CUgraphNodeParams, reserved2) == 248,
               "CUgraphNodeParams' union starts at byte 16");

/* ---- nodes from parameters ---------------------------------------------------------------- */

/* Rows that do not overlap (the pitch holds a whole row, checked without overflow), elements
 * of 1, 2 or 4 bytes, nothing empty. The destination is checked when a launch runs the node,
 * as for a captured memset. */
CUresult memset_node_make(const CUDA_MEMSET_NODE_PARAMS *p, struct ctx *c, struct node *n) {
    size_t elem = p->elementSize;
    if ((elem != 1 && elem != 2 && elem != 4) || p->width == 0 || p->height == 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (p->height > 1 && (p->width > p->pitch / elem || p->pitch % elem))
        return CUDA_ERROR_INVALID_VALUE;
    *n = (struct node){.kind = N_SET, .ctx = c, .dst = p->dst, .elem = elem, .count = p->width,
                       .pitch = p->pitch, .rows = p->height};
    /* The element's bytes in memory order, as cuMemsetD8/16/32 take them from their value. */
    uint8_t v8 = (uint8_t)p->value;
    uint16_t v16 = (uint16_t)p->value;
    uint32_t v32 = p->value;
    memcpy(n->pattern, elem == 1 ? (void *)&v8 : elem == 2 ? (void *)&v16 : (void *)&v32, elem);
    return CUDA_SUCCESS;
}

static CUresult memset_node_in(const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx, struct node *n) {
    struct ctx *c;
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = ctx_resolve(ctx, &c);
    return r == CUDA_SUCCESS ? memset_node_make(p, c, n) : r;
}

static CUresult copy_node_in(const CUDA_MEMCPY3D *p, CUcontext ctx, struct node *n) {
    struct ctx *c;
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = ctx_resolve(ctx, &c);
    return r == CUDA_SUCCESS ? copy_node_make(p, c, n) : r;
}

/* The three kernel structures share their first members; v1 has no kernel and context. */
#define KERNEL_DESC(p, k, c)                                                                   \
    ((struct kernel_desc){.func = (p)->func, .kern = (k), .ctx = (c),                          \
                          .grid = {(p)->gridDimX, (p)->gridDimY, (p)->gridDimZ},               \
                          .block = {(p)->blockDimX, (p)->blockDimY, (p)->blockDimZ},           \
                          .shmem = (p)->sharedMemBytes, .params = (p)->kernelParams,           \
                          .extra = (p)->extra})

CUresult kernel_node_v1(const CUDA_KERNEL_NODE_PARAMS_v1 *p, struct node *n) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    struct kernel_desc d = KERNEL_DESC(p, NULL, NULL);
    return kernel_node_make(&d, n);
}

CUresult kernel_node_v2(const CUDA_KERNEL_NODE_PARAMS_v2 *p, struct node *n) {
    if (!p) return CUDA_ERROR_INVALID_VALUE;
    struct kernel_desc d = KERNEL_DESC(p, p->kern, p->ctx);
    return kernel_node_make(&d, n);
}

CUresult node_from_params(const CUgraphNodeParams *p, struct node *out) {
    switch (p->type) {
    case CU_GRAPH_NODE_TYPE_KERNEL: {
        struct kernel_desc d = KERNEL_DESC(&p->kernel, p->kernel.kern, p->kernel.ctx);
        return kernel_node_make(&d, out);
    }
    case CU_GRAPH_NODE_TYPE_MEMCPY:
        if (p->memcpy.flags || p->memcpy.reserved) return CUDA_ERROR_INVALID_VALUE;
        return copy_node_in(&p->memcpy.copyParams, p->memcpy.copyCtx, out);
    case CU_GRAPH_NODE_TYPE_MEMSET: {
        const CUDA_MEMSET_NODE_PARAMS_v2 *m = &p->memset;
        CUDA_MEMSET_NODE_PARAMS v1 = {.dst = m->dst, .pitch = m->pitch, .value = m->value,
                                      .elementSize = m->elementSize, .width = m->width,
                                      .height = m->height};
        return memset_node_in(&v1, m->ctx, out);
    }
    default: return CUDA_ERROR_NOT_SUPPORTED;
    }
}

void node_take_params(struct node *a, const struct node *b) {
    uint64_t handle = a->handle, owner = a->owner;
    bool disabled = a->disabled;
    *a = *b;
    a->handle = handle;
    a->owner = owner;
    a->disabled = disabled;
}

/* ---- graph-level add, get, set -------------------------------------------------------------- */

/* Appends `made` (when making it succeeded: r) to graph h after deps. */
static CUresult add_made(CUgraphNode *out, CUgraph h, const CUgraphNode *deps, size_t ndeps,
                         CUresult r, struct node *made) {
    struct graph *g = graph_get(h);
    if (!out || !g || !graph_owns_nodes(g, deps, ndeps)) return CUDA_ERROR_INVALID_VALUE;
    return r == CUDA_SUCCESS ? graph_add_node(g, made, deps, ndeps, out) : r;
}

/* The node h names, if it is of that kind. */
static struct node *node_of(CUgraphNode h, enum node_kind kind) {
    struct node *n = graph_node_get_mut(h, NULL);
    return n && n->kind == kind ? n : NULL;
}

/* Node h (of `kind`) takes `made`'s parameters (when making it succeeded: r). */
static CUresult set_made(CUgraphNode h, enum node_kind kind, CUresult r, const struct node *made) {
    struct node *n = node_of(h, kind);
    if (!n) return CUDA_ERROR_INVALID_VALUE;
    if (r == CUDA_SUCCESS) node_take_params(n, made);
    return r;
}

/* The v2 structure into out, or its first `size` bytes (the v1 structure is the v2 one without
 * its last two members). */
static CUresult kernel_get(CUgraphNode h, void *out, size_t size) {
    const struct node *n = node_of(h, N_KERNEL);
    if (!n || !out) return CUDA_ERROR_INVALID_VALUE;
    CUDA_KERNEL_NODE_PARAMS_v2 p = {
        .func = (CUfunction)(uintptr_t)n->func,
        .gridDimX = n->grid[0], .gridDimY = n->grid[1], .gridDimZ = n->grid[2],
        .blockDimX = n->block[0], .blockDimY = n->block[1], .blockDimZ = n->block[2],
        .sharedMemBytes = n->shmem, .kernelParams = graph_node_kernel_params(h, n),
        .extra = NULL, .kern = (CUkernel)(uintptr_t)n->kern,
        .ctx = n->ctx ? (CUcontext)(uintptr_t)H(n->ctx) : NULL};
    memcpy(out, &p, size);
    return CUDA_SUCCESS;
}

static CUresult memcpy_get(CUgraphNode h, CUDA_MEMCPY3D *out) {
    const struct node *n = node_of(h, N_COPY);
    if (!n || !out) return CUDA_ERROR_INVALID_VALUE;
    *out = n->desc;
    return CUDA_SUCCESS;
}

static CUresult memset_get(CUgraphNode h, CUDA_MEMSET_NODE_PARAMS *out) {
    const struct node *n = node_of(h, N_SET);
    if (!n || !out) return CUDA_ERROR_INVALID_VALUE;
    uint8_t v8;
    uint16_t v16;
    uint32_t v32;
    void *v = n->elem == 1 ? (void *)&v8 : n->elem == 2 ? (void *)&v16 : (void *)&v32;
    memcpy(v, n->pattern, n->elem);
    *out = (CUDA_MEMSET_NODE_PARAMS){
        .dst = n->dst, .pitch = n->pitch,
        .value = n->elem == 1 ? v8 : n->elem == 2 ? v16 : v32,
        .elementSize = (unsigned int)n->elem, .width = n->count, .height = n->rows};
    return CUDA_SUCCESS;
}

static CUresult add_kernel_v1(CUgraphNode *out, CUgraph h, const CUgraphNode *deps, size_t ndeps,
                              const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
    struct node n;
    return add_made(out, h, deps, ndeps, kernel_node_v1(p, &n), &n);
}

static CUresult add_kernel_v2(CUgraphNode *out, CUgraph h, const CUgraphNode *deps, size_t ndeps,
                              const CUDA_KERNEL_NODE_PARAMS_v2 *p) {
    struct node n;
    return add_made(out, h, deps, ndeps, kernel_node_v2(p, &n), &n);
}

static CUresult add_memcpy(CUgraphNode *out, CUgraph h, const CUgraphNode *deps, size_t ndeps,
                           const CUDA_MEMCPY3D *p, CUcontext ctx) {
    struct node n;
    return add_made(out, h, deps, ndeps, copy_node_in(p, ctx, &n), &n);
}

CUresult graph_add_memset(CUgraphNode *out, CUgraph h, const CUgraphNode *deps, size_t ndeps,
                          const CUDA_MEMSET_NODE_PARAMS *p, CUcontext ctx) {
    struct node n;
    return add_made(out, h, deps, ndeps, memset_node_in(p, ctx, &n), &n);
}

static CUresult set_kernel_v1(CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS_v1 *p) {
    struct node n;
    return set_made(h, N_KERNEL, kernel_node_v1(p, &n), &n);
}

static CUresult set_kernel_v2(CUgraphNode h, const CUDA_KERNEL_NODE_PARAMS_v2 *p) {
    struct node n;
    return set_made(h, N_KERNEL, kernel_node_v2(p, &n), &n);
}

/* A memcpy or memset node keeps the context it was made in. */
static CUresult set_memcpy(CUgraphNode h, const CUDA_MEMCPY3D *p) {
    struct node *old = node_of(h, N_COPY), n;
    if (!old || !p) return CUDA_ERROR_INVALID_VALUE;
    return set_made(h, N_COPY, copy_node_make(p, old->ctx, &n), &n);
}

static CUresult set_memset(CUgraphNode h, const CUDA_MEMSET_NODE_PARAMS *p) {
    struct node *old = node_of(h, N_SET), n;
    if (!old || !p) return CUDA_ERROR_INVALID_VALUE;
    return set_made(h, N_SET, memset_node_make(p, old->ctx, &n), &n);
}

CUresult graph_node_set_params(CUgraphNode h, const CUgraphNodeParams *p) {
    const struct node *old = graph_node_get(h);
    if (!old) return CUDA_ERROR_INVALID_VALUE;
    struct node n;
    return set_made(h, old->kind, node_from_params(p, &n), &n);
}

SIMCUDA_API CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                          const CUgraphNode *dependencies,
                                          size_t numDependencies,
                                          const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams) {
    API_ENTER();
    API_LOCKED(add_kernel_v1(phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

SIMCUDA_API CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                             const CUgraphNode *dependencies,
                                             size_t numDependencies,
                                             const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams) {
    API_ENTER();
    API_LOCKED(add_kernel_v2(phGraphNode, hGraph, dependencies, numDependencies, nodeParams));
}

SIMCUDA_API CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode,
                                                CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams) {
    API_ENTER();
    API_LOCKED(kernel_get(hNode, nodeParams, sizeof *nodeParams));
}

SIMCUDA_API CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode,
                                                   CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams) {
    API_ENTER();
    API_LOCKED(kernel_get(hNode, nodeParams, sizeof *nodeParams));
}

SIMCUDA_API CUresult cuGraphKernelNodeSetParams(CUgraphNode hNode,
                                                const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams) {
    API_ENTER();
    API_LOCKED(set_kernel_v1(hNode, nodeParams));
}

SIMCUDA_API CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode hNode,
                                                   const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams) {
    API_ENTER();
    API_LOCKED(set_kernel_v2(hNode, nodeParams));
}

SIMCUDA_API CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                          const CUgraphNode *dependencies,
                                          size_t numDependencies,
                                          const CUDA_MEMCPY3D *copyParams, CUcontext ctx) {
    API_ENTER();
    API_LOCKED(add_memcpy(phGraphNode, hGraph, dependencies, numDependencies, copyParams, ctx));
}

SIMCUDA_API CUresult cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams) {
    API_ENTER();
    API_LOCKED(memcpy_get(hNode, nodeParams));
}

SIMCUDA_API CUresult cuGraphMemcpyNodeSetParams(CUgraphNode hNode,
                                                const CUDA_MEMCPY3D *nodeParams) {
    API_ENTER();
    API_LOCKED(set_memcpy(hNode, nodeParams));
}

SIMCUDA_API CUresult cuGraphMemsetNodeGetParams(CUgraphNode hNode,
                                                CUDA_MEMSET_NODE_PARAMS *nodeParams) {
    API_ENTER();
    API_LOCKED(memset_get(hNode, nodeParams));
}

SIMCUDA_API CUresult cuGraphMemsetNodeSetParams(CUgraphNode hNode,
                                                const CUDA_MEMSET_NODE_PARAMS *nodeParams) {
    API_ENTER();
    API_LOCKED(set_memset(hNode, nodeParams));
}
