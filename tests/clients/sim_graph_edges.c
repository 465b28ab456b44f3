// link: driver
// Graph edges: what graphs built by hand and captured graphs keep of their dependencies
// (cuGraphGetEdges and _v2), a capture's current dependencies stream by stream
// (cuStreamGetCaptureInfo _v2 and _v3) and their updates (cuStreamUpdateCaptureDependencies),
// child graphs' copies, and edges added between existing nodes (cuGraphAddDependencies).
// Nodes are printed as their positions in cuGraphGetNodes order, edges as from>to.
#include <stddef.h>

#include "sim_util.h"

#define MAX_NODES 64
#define MAX_EDGES 64

static CUdeviceptr d; /* a buffer of 1024 words that every memset node writes */

/* The position of node h among g's nodes, or -1. */
static int position(CUgraph g, CUgraphNode h) {
    CUgraphNode nodes[MAX_NODES];
    size_t n = MAX_NODES;
    CHECK(cuGraphGetNodes(g, nodes, &n));
    for (size_t i = 0; i < n; i++)
        if (nodes[i] == h) return (int)i;
    return -1;
}

/* key count from>to ... for the n edges in from/to (a NULL pair as -, a half-NULL one as ?). */
static void put_pairs(const char *key, CUgraph g, const CUgraphNode *from, const CUgraphNode *to,
                      size_t n) {
    printf("%s %zu", key, n);
    for (size_t i = 0; i < n; i++) {
        if (!from[i] && !to[i])
            printf(" -");
        else if (!from[i] || !to[i])
            printf(" ?");
        else
            printf(" %d>%d", position(g, from[i]), position(g, to[i]));
    }
    printf("\n");
}

/* key count from>to ...: every edge of g, by cuGraphGetEdges. */
static void put_edges(const char *key, CUgraph g) {
    CUgraphNode from[MAX_EDGES], to[MAX_EDGES];
    size_t n = 0;
    CHECK(cuGraphGetEdges(g, NULL, NULL, &n));
    if (n > MAX_EDGES) n = MAX_EDGES;
    CHECK(cuGraphGetEdges(g, from, to, &n));
    put_pairs(key, g, from, to, n);
}

/* key count i ...: the n dependencies as positions in g. */
static void put_deps(const char *key, CUgraph g, const CUgraphNode *deps, size_t n) {
    printf("%s %zu", key, n);
    for (size_t i = 0; i < n; i++) printf(" %d", position(g, deps[i]));
    printf("\n");
}

/* key count i ...: stream s's current dependencies, by cuStreamGetCaptureInfo_v2. */
static void put_info_v2(const char *key, CUstream s) {
    CUstreamCaptureStatus status;
    cuuint64_t id;
    CUgraph g = NULL;
    const CUgraphNode *deps = NULL;
    size_t n = 99;
    CHECK(cuStreamGetCaptureInfo_v2(s, &status, &id, &g, &deps, &n));
    put_deps(key, g, deps, n);
}

/* The same by cuStreamGetCaptureInfo_v3, with whether every edge datum is zero. */
static void put_info_v3(const char *key, CUstream s) {
    CUstreamCaptureStatus status;
    cuuint64_t id;
    CUgraph g = NULL;
    const CUgraphNode *deps = NULL;
    const CUgraphEdgeData *edges = NULL;
    size_t n = 99;
    CHECK(cuStreamGetCaptureInfo_v3(s, &status, &id, &g, &deps, &edges, &n));
    int zero = n == 0 ? edges == NULL : edges != NULL;
    for (size_t i = 0; edges && i < n; i++) {
        static const CUgraphEdgeData z;
        zero &= memcmp(&edges[i], &z, sizeof z) == 0;
    }
    printf("%s %zu", key, n);
    for (size_t i = 0; i < n; i++) printf(" %d", position(g, deps[i]));
    printf(" zero=%d\n", zero);
}

static CUDA_MEMSET_NODE_PARAMS memset_params(unsigned int value) {
    CUDA_MEMSET_NODE_PARAMS p;
    memset(&p, 0, sizeof p);
    p.dst = d;
    p.value = value;
    p.elementSize = 4;
    p.width = 1;
    p.height = 1;
    return p;
}

static CUgraphNode add_memset(CUgraph g, const CUgraphNode *deps, size_t n, unsigned int value) {
    CUDA_MEMSET_NODE_PARAMS p = memset_params(value);
    CUgraphNode node;
    CHECK(cuGraphAddMemsetNode(&node, g, deps, n, &p, NULL));
    return node;
}

/* The fork and join built by hand: A; B and C after A; D after B and C. */
static CUgraph diamond(CUgraphNode nodes[4]) {
    CUgraph g;
    CHECK(cuGraphCreate(&g, 0));
    nodes[0] = add_memset(g, NULL, 0, 1);
    nodes[1] = add_memset(g, &nodes[0], 1, 2);
    nodes[2] = add_memset(g, &nodes[0], 1, 3);
    nodes[3] = add_memset(g, &nodes[1], 2, 4);
    return g;
}

static void buffer(void) {
    setup();
    CHECK(cuMemAlloc_v2(&d, 4096));
    CHECK(cuMemsetD32_v2(d, 0, 1024));
}

/* A hand-built fork and join read back by cuGraphGetEdges and _v2, and the errors. */
static int hand_built(int argc, char **argv) {
    (void)argc, (void)argv;
    buffer();
    CUgraphNode n[4];
    CUgraph g = diamond(n);
    size_t count = 99;
    put_result("count", cuGraphGetEdges(g, NULL, NULL, &count));
    put_u64("count_value", count);
    count = 99;
    put_result("count_v2", cuGraphGetEdges_v2(g, NULL, NULL, NULL, &count));
    put_u64("count_v2_value", count);
    put_edges("edges", g);

    CUgraphNode from[6], to[6];
    CUgraphEdgeData data[6];
    count = 4;
    memset(data, 0xff, sizeof data);
    put_result("full_v2", cuGraphGetEdges_v2(g, from, to, data, &count));
    put_pairs("full_v2_edges", g, from, to, count);
    int zero = 1;
    for (size_t i = 0; i < 4; i++) {
        static const CUgraphEdgeData z;
        zero &= memcmp(&data[i], &z, sizeof z) == 0;
    }
    printf("full_v2_data_zero %d %zu\n", zero, sizeof(CUgraphEdgeData));
    /* More room than edges: the rest NULL (edge data zero), the count written. */
    count = 6;
    memset(from, 0xff, sizeof from);
    memset(to, 0xff, sizeof to);
    memset(data, 0xff, sizeof data);
    put_result("oversized", cuGraphGetEdges_v2(g, from, to, data, &count));
    put_u64("oversized_count", count);
    put_pairs("oversized_edges", g, from, to, 6);
    zero = 1;
    for (size_t i = 0; i < 6; i++) {
        static const CUgraphEdgeData z;
        zero &= memcmp(&data[i], &z, sizeof z) == 0;
    }
    printf("oversized_data_zero %d\n", zero);
    /* Less room: the first edges, the count kept. */
    count = 2;
    put_result("undersized", cuGraphGetEdges(g, from, to, &count));
    put_pairs("undersized_edges", g, from, to, count);
    /* Edge data may be left out. */
    count = 4;
    put_result("v2_no_data", cuGraphGetEdges_v2(g, from, to, NULL, &count));
    put_pairs("v2_no_data_edges", g, from, to, count);

    put_result("no_count", cuGraphGetEdges(g, from, to, NULL));
    put_result("no_count_v2", cuGraphGetEdges_v2(g, NULL, NULL, NULL, NULL));
    put_result("no_graph", cuGraphGetEdges(NULL, NULL, NULL, &count));
    count = 4;
    put_result("data_without_from", cuGraphGetEdges_v2(g, NULL, to, data, &count));
    put_result("data_without_both", cuGraphGetEdges_v2(g, NULL, NULL, data, &count));
    put_result("from_without_to", cuGraphGetEdges(g, from, NULL, &count));

    /* A dependency array with a duplicate is refused and adds nothing. */
    CUgraphNode twice[2] = {n[1], n[1]}, dummy;
    CUDA_MEMSET_NODE_PARAMS p = memset_params(9);
    put_result("duplicate_dependency", cuGraphAddMemsetNode(&dummy, g, twice, 2, &p, NULL));
    size_t nodes = 0;
    CHECK(cuGraphGetNodes(g, NULL, &nodes));
    count = 0;
    CHECK(cuGraphGetEdges(g, NULL, NULL, &count));
    printf("after_duplicate %zu %zu\n", nodes, count);
    /* As is a foreign one. */
    CUgraph other;
    CHECK(cuGraphCreate(&other, 0));
    CUgraphNode foreign = add_memset(other, NULL, 0, 1);
    CUgraphNode mixed[2] = {n[3], foreign};
    put_result("foreign_dependency", cuGraphAddMemsetNode(&dummy, g, mixed, 2, &p, NULL));
    count = 0;
    CHECK(cuGraphGetEdges(g, NULL, NULL, &count));
    put_u64("after_foreign", count);
    /* A destroyed graph is unknown. */
    CHECK(cuGraphDestroy(other));
    count = 0;
    put_result("destroyed_graph", cuGraphGetEdges(other, NULL, NULL, &count));
    CHECK(cuGraphDestroy(g));
    return 0;
}

static CUfunction fill_function(void) {
    CUmodule m;
    CUfunction f;
    CHECK(cuModuleLoadData(&m, "simcuda"));
    CHECK(cuModuleGetFunction(&f, m, "fill_u32"));
    return f;
}

/* Every node-adding entry point records its dependencies as edges. */
static int entry_points(int argc, char **argv) {
    (void)argc, (void)argv;
    buffer();
    CUfunction fill = fill_function();
    CUevent ev;
    CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
    CUgraph g, child;
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphCreate(&child, 0));
    add_memset(child, NULL, 0, 1);
    CUgraphNode root = add_memset(g, NULL, 0, 1), node, alloc;

    CUdeviceptr p = d;
    unsigned int value = 5, n = 16;
    void *args[] = {&p, &value, &n};
    CUDA_KERNEL_NODE_PARAMS_v1 k1 = {.func = fill, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                     .blockDimX = 16, .blockDimY = 1, .blockDimZ = 1,
                                     .kernelParams = args};
    put_result("kernel", cuGraphAddKernelNode(&node, g, &root, 1, &k1));
    CUDA_KERNEL_NODE_PARAMS_v2 k2;
    memset(&k2, 0, sizeof k2);
    memcpy(&k2, &k1, sizeof k1);
    put_result("kernel_v2", cuGraphAddKernelNode_v2(&node, g, &root, 1, &k2));
    static unsigned int host[16];
    CUDA_MEMCPY3D cp;
    memset(&cp, 0, sizeof cp);
    cp.srcMemoryType = CU_MEMORYTYPE_HOST;
    cp.srcHost = host;
    cp.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    cp.dstDevice = d;
    cp.WidthInBytes = sizeof host;
    cp.Height = 1;
    cp.Depth = 1;
    put_result("memcpy", cuGraphAddMemcpyNode(&node, g, &root, 1, &cp, NULL));
    CUDA_MEMSET_NODE_PARAMS ms = memset_params(2);
    put_result("memset", cuGraphAddMemsetNode(&node, g, &root, 1, &ms, NULL));
    CUDA_MEM_ALLOC_NODE_PARAMS ap;
    memset(&ap, 0, sizeof ap);
    ap.poolProps = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
    ap.bytesize = 4096;
    put_result("alloc", cuGraphAddMemAllocNode(&alloc, g, &root, 1, &ap));
    CUgraphNode after_alloc[2] = {alloc, root};
    put_result("free", cuGraphAddMemFreeNode(&node, g, after_alloc, 2, ap.dptr));
    put_result("child", cuGraphAddChildGraphNode(&node, g, &root, 1, child));
    put_result("record", cuGraphAddEventRecordNode(&node, g, &root, 1, ev));
    put_result("wait", cuGraphAddEventWaitNode(&node, g, &root, 1, ev));
    CUgraphNodeParams gp;
    memset(&gp, 0, sizeof gp);
    gp.type = CU_GRAPH_NODE_TYPE_WAIT_EVENT;
    gp.eventWait.event = ev;
    put_result("add_node", cuGraphAddNode(&node, g, &root, 1, &gp));
    CUgraphEdgeData zero[1];
    memset(zero, 0, sizeof zero);
    put_result("add_node_v2", cuGraphAddNode_v2(&node, g, &root, zero, 1, &gp));
    /* A failed add makes no edge. */
    k1.gridDimX = 0;
    put_result("kernel_refused", cuGraphAddKernelNode(&node, g, &root, 1, &k1));
    put_edges("edges", g);
    CHECK(cuGraphDestroy(g));
    CHECK(cuGraphDestroy(child));
    return 0;
}

/* A capture that forks onto a second stream through an event and joins back. */
static int capture(int argc, char **argv) {
    (void)argc, (void)argv;
    buffer();
    CUstream s1, s2;
    CUevent fork, join;
    CHECK(cuStreamCreate(&s1, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    CHECK(cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    put_info_v2("begun", s1);
    CHECK(cuMemsetD32Async(d, 1, 1, s1)); /* node 0 */
    put_info_v2("after_a", s1);
    CHECK(cuEventRecord(fork, s1));
    CHECK(cuStreamWaitEvent(s2, fork, 0));
    put_info_v2("joined", s2);
    CHECK(cuMemsetD32Async(d + 4, 2, 1, s1)); /* node 1 */
    CHECK(cuMemsetD32Async(d + 8, 3, 1, s2)); /* node 2 */
    put_info_v2("fork_s1", s1);
    put_info_v2("fork_s2", s2);
    put_info_v3("fork_s1_v3", s1);
    put_info_v3("fork_s2_v3", s2);
    CHECK(cuEventRecord(join, s2));
    CHECK(cuStreamWaitEvent(s1, join, 0));
    put_info_v2("join_s1", s1);
    put_info_v3("join_s1_v3", s1);
    put_info_v2("join_s2", s2);
    /* Waiting again for the same event adds nothing. */
    CHECK(cuStreamWaitEvent(s1, join, 0));
    put_info_v2("join_again", s1);
    CHECK(cuMemsetD32Async(d, 4, 1, s1)); /* node 3 */
    put_info_v2("after_d", s1);
    put_info_v3("after_d_v3", s1);
    CUgraph g;
    CHECK(cuStreamEndCapture(s1, &g));
    put_edges("edges", g);

    /* An event recorded before any node remembers no dependency; the joining stream starts
     * from none, a root of its own. */
    CHECK(cuStreamBeginCapture_v2(s1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuEventRecord(fork, s1));
    CHECK(cuStreamWaitEvent(s2, fork, 0));
    put_info_v2("empty_fork", s2);
    CHECK(cuMemsetD32Async(d, 1, 1, s2)); /* node 0 */
    CHECK(cuMemsetD32Async(d, 2, 1, s1)); /* node 1 */
    CHECK(cuEventRecord(join, s2));
    CHECK(cuStreamWaitEvent(s1, join, 0));
    CHECK(cuMemsetD32Async(d, 3, 1, s1)); /* node 2 */
    CUgraph g2;
    CHECK(cuStreamEndCapture(s1, &g2));
    put_edges("roots_edges", g2);
    CHECK(cuGraphDestroy(g));
    CHECK(cuGraphDestroy(g2));
    return 0;
}

/* cuStreamUpdateCaptureDependencies: add to and replace a stream's current dependencies. */
static int update(int argc, char **argv) {
    (void)argc, (void)argv;
    buffer();
    CUstream s, idle;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&idle, CU_STREAM_NON_BLOCKING));
    CUgraph other;
    CHECK(cuGraphCreate(&other, 0));
    CUgraphNode foreign = add_memset(other, NULL, 0, 1);
    CUgraphNode a, b, list[2];
    put_result("not_capturing", cuStreamUpdateCaptureDependencies(idle, NULL, 0, 0));
    put_result("not_capturing_ptsz", cuStreamUpdateCaptureDependencies_ptsz(NULL, NULL, 0, 0));
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuMemsetD32Async(d, 1, 1, s)); /* node 0: A */
    CUstreamCaptureStatus status;
    cuuint64_t id;
    CUgraph g;
    const CUgraphNode *deps;
    size_t n;
    CHECK(cuStreamGetCaptureInfo_v2(s, &status, &id, &g, &deps, &n));
    a = deps[0];
    CHECK(cuMemsetD32Async(d, 2, 1, s)); /* node 1: B */
    CHECK(cuStreamGetCaptureInfo_v2(s, &status, &id, &g, &deps, &n));
    b = deps[0];
    put_result("add", cuStreamUpdateCaptureDependencies(s, &a, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
    put_info_v2("added", s);
    put_result("add_again", cuStreamUpdateCaptureDependencies(s, &a, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
    put_info_v2("added_again", s);
    put_result("set", cuStreamUpdateCaptureDependencies(s, &a, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
    put_info_v3("set_deps", s);
    list[0] = a, list[1] = a;
    put_result("duplicate", cuStreamUpdateCaptureDependencies(s, list, 2, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
    list[0] = b, list[1] = foreign;
    put_result("foreign", cuStreamUpdateCaptureDependencies(s, list, 2, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
    put_result("null_nodes", cuStreamUpdateCaptureDependencies(s, NULL, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
    put_result("bad_flags", cuStreamUpdateCaptureDependencies(s, &b, 1, 2));
    CUgraphEdgeData data[2];
    memset(data, 0, sizeof data);
    data[0].type = 1;
    put_result("v2_edge_data", cuStreamUpdateCaptureDependencies_v2(s, &b, data, 1, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
    put_info_v2("refused_unchanged", s);
    CHECK(cuMemsetD32Async(d, 3, 1, s)); /* node 2: C, after A only */
    put_info_v2("after_c", s);
    put_result("set_none", cuStreamUpdateCaptureDependencies_ptsz(s, NULL, 0, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
    put_info_v2("none", s);
    CHECK(cuMemsetD32Async(d, 4, 1, s)); /* node 3: D, a root */
    data[0].type = 0;
    list[0] = a, list[1] = b;
    put_result("v2_add", cuStreamUpdateCaptureDependencies_v2(s, list, data, 2, CU_STREAM_ADD_CAPTURE_DEPENDENCIES));
    put_info_v2("v2_added", s);
    put_result("v2_set_null_data", cuStreamUpdateCaptureDependencies_v2_ptsz(s, &b, NULL, 1, CU_STREAM_SET_CAPTURE_DEPENDENCIES));
    put_info_v2("v2_set", s);
    CHECK(cuMemsetD32Async(d, 5, 1, s)); /* node 4: E, after B */
    CHECK(cuStreamEndCapture(s, &g));
    put_edges("edges", g);
    /* An invalidated capture takes no update. */
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    put_result("sync", cuStreamSynchronize(s));
    put_result("invalidated", cuStreamUpdateCaptureDependencies(s, NULL, 0, 0));
    CUgraph gone;
    put_result("end_invalidated", cuStreamEndCapture(s, &gone));
    CHECK(cuGraphDestroy(g));
    CHECK(cuGraphDestroy(other));
    return 0;
}

/* A capture into a graph built by hand starts from the nodes given; a graph launched into a
 * capture is appended as a chain. */
static int into_graph(int argc, char **argv) {
    (void)argc, (void)argv;
    buffer();
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUgraphNode n[4];
    CUgraph g = diamond(n);
    CHECK(cuStreamBeginCaptureToGraph(s, g, &n[1], NULL, 2, CU_STREAM_CAPTURE_MODE_GLOBAL));
    put_info_v3("begun", s);
    CHECK(cuMemsetD32Async(d, 5, 1, s)); /* node 4, after B and C */
    CUgraph ended;
    CHECK(cuStreamEndCapture(s, &ended));
    put_edges("to_graph_edges", g);
    CUgraphNode twice[2] = {n[0], n[0]};
    put_result("to_graph_duplicate",
               cuStreamBeginCaptureToGraph(s, g, twice, NULL, 2, CU_STREAM_CAPTURE_MODE_GLOBAL));

    CUgraph fork;
    CUgraphNode f[4];
    fork = diamond(f);
    CUgraphExec exec;
    CHECK(cuGraphInstantiateWithFlags(&exec, fork, 0));
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuMemsetD32Async(d, 1, 1, s)); /* node 0 */
    CHECK(cuGraphLaunch(exec, s));        /* nodes 1 to 4 */
    put_info_v2("after_launch", s);
    CUgraph launched;
    CHECK(cuStreamEndCapture(s, &launched));
    put_edges("launch_edges", launched);
    CHECK(cuGraphExecDestroy(exec));
    CHECK(cuGraphDestroy(g));
    CHECK(cuGraphDestroy(fork));
    CHECK(cuGraphDestroy(launched));
    return 0;
}

/* A child graph node's graph keeps its edges: a copy (cuGraphAddChildGraphNode) and a graph
 * moved in (cuGraphAddNode with ownership move). */
static int child(int argc, char **argv) {
    (void)argc, (void)argv;
    buffer();
    CUgraphNode n[4], m[4];
    CUgraph inner = diamond(n), moved = diamond(m), parent;
    CHECK(cuGraphCreate(&parent, 0));
    CUgraphNode root = add_memset(parent, NULL, 0, 1), copy_node, move_node;
    CUgraph embedded;
    CHECK(cuGraphAddChildGraphNode(&copy_node, parent, &root, 1, inner));
    CUgraphNodeParams gp;
    memset(&gp, 0, sizeof gp);
    gp.type = CU_GRAPH_NODE_TYPE_GRAPH;
    gp.graph.graph = moved;
    gp.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
    CHECK(cuGraphAddNode(&move_node, parent, &root, 1, &gp));
    put_edges("parent_edges", parent);
    CHECK(cuGraphChildGraphNodeGetGraph(copy_node, &embedded));
    printf("copy_is_other %d\n", embedded != inner);
    put_edges("copy_edges", embedded);
    /* The copy's edges name the copy's nodes. */
    CUgraphNode from[4], to[4], found;
    size_t count = 4;
    CHECK(cuGraphGetEdges(embedded, from, to, &count));
    CHECK(cuGraphNodeFindInClone(&found, n[3], embedded));
    printf("copy_join_is_clone %d\n", to[3] == found);
    /* The original takes a node the copy does not. */
    add_memset(inner, &n[3], 1, 5);
    put_edges("original_edges", inner);
    put_edges("copy_edges_after", embedded);
    CHECK(cuGraphChildGraphNodeGetGraph(move_node, &embedded));
    printf("moved_is_same %d\n", embedded == moved);
    put_edges("moved_edges", embedded);
    /* A graph with a child of a child: the nested copy keeps its edges too. */
    CUgraph outer;
    CHECK(cuGraphCreate(&outer, 0));
    CUgraphNode nested;
    CHECK(cuGraphAddChildGraphNode(&nested, outer, NULL, 0, parent));
    CUgraph parent_copy, inner_copy;
    CHECK(cuGraphChildGraphNodeGetGraph(nested, &parent_copy));
    CUgraphNode pn[3];
    size_t np = 3;
    CHECK(cuGraphGetNodes(parent_copy, pn, &np));
    CHECK(cuGraphChildGraphNodeGetGraph(pn[1], &inner_copy));
    put_edges("nested_parent_edges", parent_copy);
    put_edges("nested_inner_edges", inner_copy);
    CHECK(cuGraphDestroy(outer));
    CHECK(cuGraphDestroy(parent));
    CHECK(cuGraphDestroy(inner));
    return 0;
}

static unsigned int word0(void) {
    unsigned int v;
    CHECK(cuMemcpyDtoH_v2(&v, d, sizeof v));
    return v;
}

/* cuGraphAddDependencies: edges between existing nodes, which launches honour. */
static int add_deps(int argc, char **argv) {
    (void)argc, (void)argv;
    buffer();
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUgraph g;
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode x = add_memset(g, NULL, 0, 2); /* node 0 */
    CUgraphNode y = add_memset(g, NULL, 0, 1); /* node 1 */
    CUgraphExec exec;
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    CHECK(cuGraphLaunch(exec, s));
    printf("node_order_run %u\n", word0());
    CHECK(cuGraphExecDestroy(exec));
    /* x after y: a launch runs y first. */
    put_result("add", cuGraphAddDependencies(g, &y, &x, 1));
    put_edges("edges", g);
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    CHECK(cuGraphLaunch(exec, s));
    printf("dependency_order_run %u\n", word0());
    CHECK(cuGraphExecDestroy(exec));
    put_result("existing", cuGraphAddDependencies(g, &y, &x, 1));
    put_result("cycle", cuGraphAddDependencies(g, &x, &y, 1));
    put_result("self", cuGraphAddDependencies(g, &x, &x, 1));
    CUgraphNode z = add_memset(g, NULL, 0, 3); /* node 2 */
    CUgraphNode from[2] = {x, x}, to[2] = {z, z};
    put_result("twice_in_one_call", cuGraphAddDependencies(g, from, to, 2));
    put_edges("after_refused", g);
    CUgraphEdgeData data[1];
    memset(data, 0, sizeof data);
    data[0].to_port = 1;
    put_result("v2_edge_data", cuGraphAddDependencies_v2(g, &x, &z, data, 1));
    put_result("v2_null_data", cuGraphAddDependencies_v2(g, &x, &z, NULL, 1));
    put_result("none", cuGraphAddDependencies(g, NULL, NULL, 0));
    put_result("null_nodes", cuGraphAddDependencies(g, NULL, &z, 1));
    CUgraph other;
    CHECK(cuGraphCreate(&other, 0));
    CUgraphNode foreign = add_memset(other, NULL, 0, 1);
    put_result("foreign", cuGraphAddDependencies(g, &foreign, &z, 1));
    put_result("no_graph", cuGraphAddDependencies(NULL, &x, &z, 1));
    put_edges("final_edges", g);
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    CHECK(cuGraphLaunch(exec, s));
    printf("final_run %u\n", word0());
    CHECK(cuGraphExecDestroy(exec));
    CHECK(cuGraphDestroy(g));
    CHECK(cuGraphDestroy(other));
    return 0;
}

/* The resolver answers the new entry points: key result, whether the address is the symbol's. */
static void put_resolved(const char *key, const char *name, int version, cuuint64_t flags,
                         void *symbol) {
    void *fn = NULL;
    CUdriverProcAddressQueryResult status;
    CUresult r = cuGetProcAddress_v2(name, &fn, version, flags, &status);
    printf("%s %d %d\n", key, (int)r, fn == symbol);
}

static int resolver(int argc, char **argv) {
    (void)argc, (void)argv;
    CHECK(cuInit(0));
    put_resolved("edges_10000", "cuGraphGetEdges", 10000, 0, (void *)cuGraphGetEdges);
    put_resolved("edges_12030", "cuGraphGetEdges", 12030, 0, (void *)cuGraphGetEdges_v2);
    put_resolved("add_deps_10000", "cuGraphAddDependencies", 10000, 0,
                 (void *)cuGraphAddDependencies);
    put_resolved("add_deps_12030", "cuGraphAddDependencies", 12030, 0,
                 (void *)cuGraphAddDependencies_v2);
    put_resolved("update_11030", "cuStreamUpdateCaptureDependencies", 11030, 0,
                 (void *)cuStreamUpdateCaptureDependencies);
    put_resolved("update_11030_ptsz", "cuStreamUpdateCaptureDependencies", 11030,
                 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                 (void *)cuStreamUpdateCaptureDependencies_ptsz);
    put_resolved("update_12030", "cuStreamUpdateCaptureDependencies", 12030, 0,
                 (void *)cuStreamUpdateCaptureDependencies_v2);
    put_resolved("update_12030_ptsz", "cuStreamUpdateCaptureDependencies", 12030,
                 CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM,
                 (void *)cuStreamUpdateCaptureDependencies_v2_ptsz);
    put_resolved("update_11020", "cuStreamUpdateCaptureDependencies", 11020, 0, NULL);
    return 0;
}

int main(int argc, char **argv) {
    static const struct subcommand cmds[] = {
        {"hand-built", hand_built}, {"entry-points", entry_points}, {"capture", capture},
        {"update", update},         {"into-graph", into_graph},     {"child", child},
        {"add-deps", add_deps},     {"resolver", resolver}};
    return DISPATCH(cmds);
}
