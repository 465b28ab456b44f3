// link: driver
// Graph memory, picked by the first argument. capture_graph() captures on a stream a 4 MiB
// stream-ordered allocation, a memset of it (and, in `transient`, its free); add_node() makes
// the same allocation node by hand (cuGraphCreate, cuGraphAddMemAllocNode). Each launch of the
// instantiated graph allocates the 4 MiB at the node's fixed address; the client checks the
// memset's bytes after each launch.
//   leak       one launch, never freed;
//   clean      three launches, each followed by cuMemFreeAsync (the last by cuMemFree);
//   relaunch   two launches without a free between: the driver refuses the second, printed
//              as "relaunch N"; the first launch's memory is never freed;
//   autofree   instantiated with auto-free on launch: three launches, the last freed;
//   autofree-leak  the same, the last launch's memory never freed;
//   transient  the graph frees its own allocation: two launches, nothing outlives them;
//   nodes      add_node() and cuGraphInstantiateWithParams: one launch, never freed;
//   nodes-freed  the same, then a second graph made of one free node (cuGraphAddMemFreeNode)
//              frees it;
//   many       one graph of 600 allocation nodes of 4 KiB made by hand (more than one record
//              of the shim's lists): one launch, every allocation but the first freed;
//   generic    the allocation node made by the generic cuGraphAddNode_v2 (generic_node()):
//              one launch, never freed;
//   generic-freed  the same, freed by cuMemFree after the launch;
//   child      make_child() makes a graph holding one allocation node (cuGraphAddMemAllocNode),
//              which cuGraphAddChildGraphNode refuses to clone (printed as "clone refused N")
//              and cuGraphAddNode moves into a parent graph as a child graph node: one launch
//              of the parent, never freed;
//   child-freed  the same, and the parent frees the child's allocation after the child node
//              (cuGraphAddMemFreeNode): nothing outlives a launch.
// Prints "launches N" (successful launches), "bytes ok" when every launch's memory held the
// memset's bytes, and "memory node types A F" (allocation and free nodes cuGraphGetNodes
// listed in the first graph). With REPORT_GRAPHS_LIVE set, also "live WHEN N": the device
// memory the shim counts as live (gpuleak_live_bytes), before the first launch, after each
// launch and its free, and at the end.
#include "sim_util.h"
#include "../../shim/include/gpuleak.h"

#define SIZE (4u << 20)

static CUstream s;

static void live(const char *when) {
    if (getenv("REPORT_GRAPHS_LIVE")) printf("live %s %llu\n", when, (unsigned long long)GPULEAK_LIVE_BYTES(-1));
}

__attribute__((noinline)) static CUgraph capture_graph(int transient, CUdeviceptr *p) {
    CUgraph g;
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuMemAllocAsync(p, SIZE, s));
    CHECK(cuMemsetD8Async(*p, 0x5a, SIZE, s));
    if (transient) CHECK(cuMemFreeAsync(*p, s));
    CHECK(cuStreamEndCapture(s, &g));
    return g;
}

__attribute__((noinline)) static CUgraph add_node(CUdeviceptr *p) {
    CUgraph g;
    CHECK(cuGraphCreate(&g, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS params;
    memset(&params, 0, sizeof params);
    params.poolProps = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
    params.bytesize = SIZE;
    CUgraphNode node;
    CHECK(cuGraphAddMemAllocNode(&node, g, NULL, 0, &params));
    *p = params.dptr;
    return g;
}

static void count_memory_nodes(CUgraph g) {
    size_t n = 0;
    CHECK(cuGraphGetNodes(g, NULL, &n));
    CUgraphNode nodes[16];
    size_t got = 16;
    CHECK(cuGraphGetNodes(g, nodes, &got));
    int allocs = 0, frees = 0;
    for (size_t i = 0; i < got && i < n; i++) {
        CUgraphNodeType t;
        CHECK(cuGraphNodeGetType(nodes[i], &t));
        allocs += t == CU_GRAPH_NODE_TYPE_MEM_ALLOC;
        frees += t == CU_GRAPH_NODE_TYPE_MEM_FREE;
    }
    printf("memory node types %d %d\n", allocs, frees);
}

#define MANY 600

static int many(void) {
    CUgraph g;
    CHECK(cuGraphCreate(&g, 0));
    CUdeviceptr p[MANY];
    for (int i = 0; i < MANY; i++) {
        CUDA_MEM_ALLOC_NODE_PARAMS params;
        memset(&params, 0, sizeof params);
        params.poolProps = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
        params.bytesize = 4096;
        CUgraphNode node;
        CHECK(cuGraphAddMemAllocNode(&node, g, NULL, 0, &params));
        p[i] = params.dptr;
    }
    CUgraphExec exec;
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    CHECK(cuGraphLaunch(exec, s));
    for (int i = 1; i < MANY; i++) CHECK(cuMemFreeAsync(p[i], s));
    CHECK(cuStreamSynchronize(s));
    printf("launches 1\n");
    return 0;
}

__attribute__((noinline)) static CUgraph generic_node(CUdeviceptr *p) {
    CUgraph g;
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNodeParams params;
    memset(&params, 0, sizeof params);
    params.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    params.alloc.poolProps = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
    params.alloc.bytesize = SIZE;
    CUgraphNode node;
    CHECK(cuGraphAddNode_v2(&node, g, NULL, NULL, 0, &params));
    *p = params.alloc.dptr;
    return g;
}

// add_node() again under its own name: the test checks that the leak is reported in this
// frame (a shared helper, even inlined, would be the frame the report names).
__attribute__((noinline)) static CUgraph make_child(CUdeviceptr *p) {
    CUgraph g;
    CHECK(cuGraphCreate(&g, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS params;
    memset(&params, 0, sizeof params);
    params.poolProps = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
    params.bytesize = SIZE;
    CUgraphNode node;
    CHECK(cuGraphAddMemAllocNode(&node, g, NULL, 0, &params));
    *p = params.dptr;
    return g;
}

static CUgraph parent_of(CUgraph child, int free_after, CUdeviceptr p) {
    CUgraph g;
    CHECK(cuGraphCreate(&g, 0));
    CUgraphNode clone;
    printf("clone refused %d\n", (int)cuGraphAddChildGraphNode(&clone, g, NULL, 0, child));
    CUgraphNodeParams params;
    memset(&params, 0, sizeof params);
    params.type = CU_GRAPH_NODE_TYPE_GRAPH;
    params.graph.graph = child;
    params.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
    CUgraphNode node;
    CHECK(cuGraphAddNode(&node, g, NULL, 0, &params));
    CUgraph owned = NULL;
    CHECK(cuGraphChildGraphNodeGetGraph(node, &owned));
    if (owned == child) printf("child moved\n");
    // A moved graph runs only within its parent: it cannot be instantiated, destroyed or
    // given more memory nodes on its own.
    CUgraphExec exec;
    CUDA_MEM_ALLOC_NODE_PARAMS more;
    memset(&more, 0, sizeof more);
    more.poolProps = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
    more.bytesize = 4096;
    CUgraphNode extra;
    printf("moved child refuses %d %d %d\n", (int)cuGraphInstantiateWithFlags(&exec, child, 0),
           (int)cuGraphDestroy(child), (int)cuGraphAddMemAllocNode(&extra, child, NULL, 0, &more));
    if (free_after) {
        CUgraphNode f;
        CHECK(cuGraphAddMemFreeNode(&f, g, &node, 1, p));
    }
    return g;
}

static int built(const char *mode) {
    int freed = strstr(mode, "-freed") != NULL;
    CUdeviceptr p = 0;
    CUgraph g;
    if (strncmp(mode, "generic", 7) == 0) {
        g = generic_node(&p);
    } else {
        CUgraph child = make_child(&p);
        g = parent_of(child, freed, p);
    }
    CUgraphExec exec;
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    live("before");
    CHECK(cuGraphLaunch(exec, s));
    live("launch");
    CHECK(cuStreamSynchronize(s));
    if (strcmp(mode, "generic-freed") == 0) CHECK(cuMemFree_v2(p));
    live("end");
    if (strcmp(mode, "generic") == 0 || strcmp(mode, "child") == 0) {
        unsigned char b[2] = {1, 1};
        CHECK(cuMemcpyHtoD_v2(p + SIZE - 2, b, 2));
        printf("bytes ok\n");
    }
    printf("launches 1\n");
    CHECK(cuGraphExecDestroy(exec));
    CHECK(cuGraphDestroy(g));
    CHECK(cuStreamDestroy_v2(s));
    return 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "clean";
    setup();
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    if (strcmp(mode, "many") == 0) return many();
    if (strncmp(mode, "generic", 7) == 0 || strncmp(mode, "child", 5) == 0) return built(mode);
    int nodes = strncmp(mode, "nodes", 5) == 0;
    int autofree = strncmp(mode, "autofree", 8) == 0;
    int transient = strcmp(mode, "transient") == 0;
    CUdeviceptr p = 0;
    CUgraph g = nodes ? add_node(&p) : capture_graph(transient, &p);
    count_memory_nodes(g);
    CUgraphExec exec;
    if (nodes) {
        CUDA_GRAPH_INSTANTIATE_PARAMS params = {0};
        CHECK(cuGraphInstantiateWithParams(&exec, g, &params));
    } else {
        CHECK(cuGraphInstantiateWithFlags(&exec, g, autofree ? CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH : 0));
    }
    int launches = strcmp(mode, "leak") == 0 || nodes ? 1 : strcmp(mode, "relaunch") == 0 || transient ? 2 : 3;
    int ok = 0, bytes_ok = 1;
    live("before");
    for (int i = 0; i < launches; i++) {
        CUresult r = cuGraphLaunch(exec, s);
        live("launch");
        if (strcmp(mode, "relaunch") == 0 && i == 1) printf("relaunch %d\n", (int)r);
        if (r != CUDA_SUCCESS) continue;
        ok++;
        CHECK(cuStreamSynchronize(s));
        if (!transient && !nodes) {
            unsigned char b[2] = {0};
            CHECK(cuMemcpyDtoH_v2(b, p + SIZE - 2, 2));
            bytes_ok &= b[0] == 0x5a && b[1] == 0x5a;
        }
        if (strcmp(mode, "clean") == 0) CHECK(i == launches - 1 ? cuMemFree_v2(p) : cuMemFreeAsync(p, s));
        if (strcmp(mode, "autofree") == 0 && i == launches - 1) CHECK(cuMemFreeAsync(p, s));
        live("after");
    }
    if (strcmp(mode, "nodes-freed") == 0) {
        CUgraph f;
        CUgraphExec fe;
        CUgraphNode node;
        CHECK(cuGraphCreate(&f, 0));
        CHECK(cuGraphAddMemFreeNode(&node, f, NULL, 0, p));
        CHECK(cuGraphInstantiateWithFlags(&fe, f, 0));
        CHECK(cuGraphLaunch(fe, s));
        CHECK(cuGraphExecDestroy(fe));
        CHECK(cuGraphDestroy(f));
    }
    CHECK(cuStreamSynchronize(s));
    live("end");
    printf("launches %d\n", ok);
    if (bytes_ok) printf("bytes ok\n");
    // Destroying the graphs frees no graph memory.
    CHECK(cuGraphExecDestroy(exec));
    CHECK(cuGraphDestroy(g));
    CHECK(cuStreamDestroy_v2(s));
    return 0;
}
