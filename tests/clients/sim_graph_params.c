// link: driver
// Kernel, memcpy and memset nodes: their parameters read back from captured graphs, graphs
// built by hand and child graphs; changed in the graph, in executable graphs (one node at a
// time, through the generic structure, by whole-graph update); nodes disabled and enabled.
// Memory is read back after each launch to show what the launch ran.
#include <stddef.h>

#include "sim_util.h"

#define WORDS 1024

static CUdeviceptr d, e;   /* device buffers of WORDS words: the kernel's and the copies' */
static unsigned int src[WORDS], src2[WORDS];

static CUfunction function(CUmodule m, const char *name) {
    CUfunction f;
    CHECK(cuModuleGetFunction(&f, m, name));
    return f;
}

static unsigned int word(CUdeviceptr base, size_t i) {
    unsigned int v;
    CHECK(cuMemcpyDtoH_v2(&v, base + i * 4, sizeof v));
    return v;
}

static void clear(void) {
    CHECK(cuMemsetD32_v2(d, 0, WORDS));
    CHECK(cuMemsetD32_v2(e, 0, WORDS));
}

static CUcontext buffers(void) {
    CUcontext ctx = setup();
    CHECK(cuMemAlloc_v2(&d, WORDS * 4));
    CHECK(cuMemAlloc_v2(&e, WORDS * 4));
    for (unsigned int i = 0; i < WORDS; i++) src[i] = i, src2[i] = 100 + i;
    clear();
    return ctx;
}

/* A kernel node's parameters: key func grid block shared kernelParams' values, extra NULL. */
static void put_kernel(const char *key, const CUDA_KERNEL_NODE_PARAMS_v2 *k, CUfunction func) {
    CUdeviceptr p = 0;
    unsigned int value = 0, n = 0;
    if (k->kernelParams) {
        memcpy(&p, k->kernelParams[0], sizeof p);
        memcpy(&value, k->kernelParams[1], sizeof value);
        memcpy(&n, k->kernelParams[2], sizeof n);
    }
    printf("%s %d %u %u %u %u %u %u %u %d %u %u %d\n", key, k->func == func, k->gridDimX,
           k->gridDimY, k->gridDimZ, k->blockDimX, k->blockDimY, k->blockDimZ, k->sharedMemBytes,
           p == d, value, n, k->extra == NULL);
}

/* A memcpy node's descriptor: key types, whether the addresses are `dst` and `src`, pitches,
 * slice heights, offsets, extent. */
static void put_copy(const char *key, const CUDA_MEMCPY3D *c, CUdeviceptr dst, const void *src_) {
    printf("%s %d %d %d %d %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu %zu\n", key,
           (int)c->srcMemoryType, (int)c->dstMemoryType, c->srcHost == src_, c->dstDevice == dst,
           c->srcPitch, c->dstPitch, c->srcHeight, c->dstHeight,
           c->srcXInBytes + c->srcY + c->srcZ, c->dstXInBytes + c->dstY, c->dstZ,
           c->WidthInBytes, c->Height, c->Depth, c->srcLOD + c->dstLOD);
}

static void put_memset(const char *key, const CUDA_MEMSET_NODE_PARAMS *m, CUdeviceptr dst) {
    printf("%s %d %zu 0x%x %u %zu %zu\n", key, m->dst == dst, m->pitch, m->value,
           m->elementSize, m->width, m->height);
}

static CUDA_MEMCPY3D htod(CUdeviceptr dst, const void *host, size_t bytes) {
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_HOST;
    c.srcHost = host;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = dst;
    c.WidthInBytes = bytes;
    c.Height = 1;
    c.Depth = 1;
    return c;
}

/* The captured graph: fill_u32(d, 5, 256) on a 2x3x1 grid of 128x2x1 blocks with 64 bytes of
 * shared memory, d's first 1024 bytes copied from src, 64 halfwords 0xbeef at e + 2048. */
static CUgraph captured(CUstream s, CUfunction fill, CUgraphNode nodes[3]) {
    CUdeviceptr p = d;
    unsigned int value = 5, n = 256;
    void *args[] = {&p, &value, &n};
    CUgraph g;
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK(cuLaunchKernel(fill, 2, 3, 1, 128, 2, 1, 64, s, args, NULL));
    CHECK(cuMemcpyHtoDAsync_v2(e, src, 1024, s));
    CHECK(cuMemsetD16Async(e + 2048, 0xbeef, 64, s));
    CHECK(cuStreamEndCapture(s, &g));
    size_t count = 3;
    CHECK(cuGraphGetNodes(g, nodes, &count));
    return g;
}

/* Captured and hand-built nodes read back; graph-level setters; wrong types refused. */
static int read_back(int argc, char **argv) {
    (void)argc, (void)argv;
    CUcontext ctx = buffers();
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUmodule m;
    CHECK(cuModuleLoadData(&m, "simcuda"));
    CUfunction fill = function(m, "fill_u32"), add = function(m, "add_u32");
    CUgraphNode c[3], dummy;
    CUgraph g = captured(s, fill, c);
    CUgraphNodeType t[3];
    for (int i = 0; i < 3; i++) CHECK(cuGraphNodeGetType(c[i], &t[i]));
    printf("captured_types %d %d %d\n", (int)t[0], (int)t[1], (int)t[2]);

    CUDA_KERNEL_NODE_PARAMS_v2 k2;
    CUDA_KERNEL_NODE_PARAMS_v1 k1;
    memset(&k2, 0xff, sizeof k2);
    put_result("kernel_get_v2", cuGraphKernelNodeGetParams_v2(c[0], &k2));
    put_kernel("captured_kernel_v2", &k2, fill);
    printf("captured_kernel_v2_kern_ctx %d %d\n", k2.kern == NULL, k2.ctx == ctx);
    put_result("kernel_get_v1", cuGraphKernelNodeGetParams(c[0], &k1));
    memcpy(&k2, &k1, sizeof k1);
    put_kernel("captured_kernel_v1", &k2, fill);
    CUDA_MEMCPY3D cp;
    memset(&cp, 0xff, sizeof cp);
    put_result("memcpy_get", cuGraphMemcpyNodeGetParams(c[1], &cp));
    put_copy("captured_memcpy", &cp, e, src);
    CUDA_MEMSET_NODE_PARAMS ms;
    put_result("memset_get", cuGraphMemsetNodeGetParams(c[2], &ms));
    put_memset("captured_memset", &ms, e + 2048);
    /* A kernel launched with the `extra` buffer reads back as kernelParams all the same. */
    struct { CUdeviceptr p; unsigned int value, n; } packed = {d, 3, 16};
    size_t packed_size = sizeof packed;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                     &packed_size, CU_LAUNCH_PARAM_END};
    CUgraph ge;
    CUgraphNode ke;
    size_t one = 1;
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK(cuLaunchKernel(add, 1, 1, 1, 16, 1, 1, 0, s, NULL, extra));
    CHECK(cuStreamEndCapture(s, &ge));
    CHECK(cuGraphGetNodes(ge, &ke, &one));
    CHECK(cuGraphKernelNodeGetParams_v2(ke, &k2));
    put_kernel("captured_extra", &k2, add);

    put_result("kernel_get_on_memcpy", cuGraphKernelNodeGetParams_v2(c[1], &k2));
    put_result("memcpy_get_on_memset", cuGraphMemcpyNodeGetParams(c[2], &cp));
    put_result("memset_get_on_kernel", cuGraphMemsetNodeGetParams(c[0], &ms));
    put_result("kernel_get_no_out", cuGraphKernelNodeGetParams(c[0], NULL));
    put_result("kernel_get_no_node", cuGraphKernelNodeGetParams(NULL, &k1));

    /* The same three nodes built by hand. */
    CUgraph h;
    CUgraphNode hk, hc, hs;
    CHECK(cuGraphCreate(&h, 0));
    CUdeviceptr p = d;
    unsigned int value = 5, n = 256;
    void *args[] = {&p, &value, &n};
    CUDA_KERNEL_NODE_PARAMS_v1 kp = {.func = fill, .gridDimX = 2, .gridDimY = 3, .gridDimZ = 1,
                                     .blockDimX = 128, .blockDimY = 2, .blockDimZ = 1,
                                     .sharedMemBytes = 64, .kernelParams = args};
    put_result("add_kernel", cuGraphAddKernelNode(&hk, h, NULL, 0, &kp));
    CUDA_MEMCPY3D hcp = htod(e, src, 1024);
    hcp.srcPitch = hcp.dstPitch = 1024, hcp.srcHeight = hcp.dstHeight = 1;
    put_result("add_memcpy", cuGraphAddMemcpyNode(&hc, h, &hk, 1, &hcp, NULL));
    CUDA_MEMSET_NODE_PARAMS hms = {.dst = e + 2048, .value = 0xbeef, .elementSize = 2,
                                   .width = 64, .height = 1};
    put_result("add_memset", cuGraphAddMemsetNode(&hs, h, &hc, 1, &hms, NULL));
    CHECK(cuGraphKernelNodeGetParams_v2(hk, &k2));
    put_kernel("built_kernel", &k2, fill);
    printf("built_kernel_kern_ctx %d %d\n", k2.kern == NULL, k2.ctx == ctx);
    CHECK(cuGraphMemcpyNodeGetParams(hc, &cp));
    printf("built_memcpy_same %d\n", memcmp(&cp, &hcp, sizeof cp) == 0);
    CHECK(cuGraphMemsetNodeGetParams(hs, &ms));
    printf("built_memset_same %d\n", memcmp(&ms, &hms, sizeof ms) == 0);
    /* A CUkernel in the v2 structure: func NULL, kern and ctx as given. */
    CUlibrary lib;
    CUkernel kern;
    CHECK(cuLibraryLoadData(&lib, "simcuda", NULL, NULL, 0, NULL, NULL, 0));
    CHECK(cuLibraryGetKernel(&kern, lib, "fill_u32"));
    CUDA_KERNEL_NODE_PARAMS_v2 kv2 = {.func = NULL, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                      .blockDimX = 32, .blockDimY = 1, .blockDimZ = 1,
                                      .kernelParams = args, .kern = kern, .ctx = ctx};
    CUgraphNode hk2;
    put_result("add_kernel_v2", cuGraphAddKernelNode_v2(&hk2, h, &hs, 1, &kv2));
    CHECK(cuGraphKernelNodeGetParams_v2(hk2, &k2));
    printf("built_kernel_v2 %d %d %d %u\n", k2.func == NULL, k2.kern == kern, k2.ctx == ctx,
           k2.blockDimX);
    /* Refused: what cuLaunchKernel refuses, and a foreign dependency. */
    kp.func = (CUfunction)m;
    put_result("add_kernel_bad_function", cuGraphAddKernelNode(&dummy, h, NULL, 0, &kp));
    kp.func = fill, kp.gridDimY = 0;
    put_result("add_kernel_empty_grid", cuGraphAddKernelNode(&dummy, h, NULL, 0, &kp));
    kp.gridDimY = 3, kp.blockDimX = 1024;
    put_result("add_kernel_big_block", cuGraphAddKernelNode(&dummy, h, NULL, 0, &kp));
    kp.blockDimX = 128, kp.kernelParams = NULL;
    put_result("add_kernel_no_params", cuGraphAddKernelNode(&dummy, h, NULL, 0, &kp));
    kp.kernelParams = args;
    put_result("add_kernel_foreign_dependency", cuGraphAddKernelNode(&dummy, h, c, 1, &kp));
    put_result("add_kernel_no_params_struct", cuGraphAddKernelNode(&dummy, h, NULL, 0, NULL));
    hcp.Height = 2, hcp.srcPitch = 16;
    put_result("add_memcpy_overlapping_rows", cuGraphAddMemcpyNode(&dummy, h, NULL, 0, &hcp, NULL));
    hcp.Height = 1, hcp.srcPitch = 1024, hcp.srcMemoryType = CU_MEMORYTYPE_ARRAY;
    put_result("add_memcpy_array", cuGraphAddMemcpyNode(&dummy, h, NULL, 0, &hcp, NULL));
    hcp.srcMemoryType = CU_MEMORYTYPE_HOST;

    /* The generic structure: its union at byte 16, each type read back by its getter. */
    printf("params_offsets %zu %zu %zu %zu\n", offsetof(CUgraphNodeParams, kernel),
           offsetof(CUgraphNodeParams, memcpy), offsetof(CUgraphNodeParams, memset),
           sizeof(CUgraphNodeParams));
    CUgraphNodeParams gp;
    memset(&gp, 0, sizeof gp);
    CUgraphNode gk, gc, gs;
    gp.type = CU_GRAPH_NODE_TYPE_KERNEL;
    memcpy(&gp.kernel, &kp, sizeof kp);
    put_result("add_node_kernel", cuGraphAddNode(&gk, h, NULL, 0, &gp));
    CHECK(cuGraphKernelNodeGetParams_v2(gk, &k2));
    put_kernel("add_node_kernel_params", &k2, fill);
    memset(&gp, 0, sizeof gp);
    gp.type = CU_GRAPH_NODE_TYPE_MEMCPY;
    gp.memcpy.copyParams = hcp;
    put_result("add_node_memcpy", cuGraphAddNode_v2(&gc, h, NULL, NULL, 0, &gp));
    CHECK(cuGraphMemcpyNodeGetParams(gc, &cp));
    printf("add_node_memcpy_same %d\n", memcmp(&cp, &hcp, sizeof cp) == 0);
    gp.memcpy.flags = 1;
    put_result("add_node_memcpy_flags", cuGraphAddNode(&dummy, h, NULL, 0, &gp));
    memset(&gp, 0, sizeof gp);
    gp.type = CU_GRAPH_NODE_TYPE_MEMSET;
    gp.memset = (CUDA_MEMSET_NODE_PARAMS_v2){.dst = e, .pitch = 256, .value = 0x7f,
                                             .elementSize = 1, .width = 200, .height = 3,
                                             .ctx = ctx};
    put_result("add_node_memset", cuGraphAddNode(&gs, h, NULL, 0, &gp));
    CHECK(cuGraphMemsetNodeGetParams(gs, &ms));
    put_memset("add_node_memset_params", &ms, e);

    /* Changed in the graph: read back at once. */
    value = 6;
    kp.func = add;
    put_result("kernel_set", cuGraphKernelNodeSetParams(hk, &kp));
    CHECK(cuGraphKernelNodeGetParams(hk, &k1));
    memcpy(&k2, &k1, sizeof k1);
    put_kernel("kernel_set_params", &k2, add);
    kv2.blockDimX = 64;
    put_result("kernel_set_v2", cuGraphKernelNodeSetParams_v2(hk2, &kv2));
    CHECK(cuGraphKernelNodeGetParams_v2(hk2, &k2));
    printf("kernel_set_v2_params %d %u\n", k2.kern == kern, k2.blockDimX);
    CUDA_MEMCPY3D moved = htod(e + 512, src2, 256);
    put_result("memcpy_set", cuGraphMemcpyNodeSetParams(hc, &moved));
    CHECK(cuGraphMemcpyNodeGetParams(hc, &cp));
    put_copy("memcpy_set_params", &cp, e + 512, src2);
    hms.value = 0x1234, hms.width = 8;
    put_result("memset_set", cuGraphMemsetNodeSetParams(hs, &hms));
    CHECK(cuGraphMemsetNodeGetParams(hs, &ms));
    put_memset("memset_set_params", &ms, e + 2048);
    memset(&gp, 0, sizeof gp);
    gp.type = CU_GRAPH_NODE_TYPE_MEMSET;
    gp.memset = (CUDA_MEMSET_NODE_PARAMS_v2){.dst = e + 4, .value = 9, .elementSize = 4,
                                             .width = 2, .height = 1};
    put_result("node_set_params_memset", cuGraphNodeSetParams(hs, &gp));
    CHECK(cuGraphMemsetNodeGetParams(hs, &ms));
    put_memset("node_set_params_memset_params", &ms, e + 4);
    put_result("node_set_params_wrong_type", cuGraphNodeSetParams(hc, &gp));
    put_result("kernel_set_on_memset", cuGraphKernelNodeSetParams(hs, &kp));
    put_result("memcpy_set_on_kernel", cuGraphMemcpyNodeSetParams(hk, &moved));
    put_result("memset_set_on_memcpy", cuGraphMemsetNodeSetParams(hc, &hms));
    hms.elementSize = 3;
    put_result("memset_set_bad_element", cuGraphMemsetNodeSetParams(hs, &hms));

    /* A child graph's nodes have parameters too: those of the copy the child graph node holds. */
    CUgraph parent, inner;
    CUgraphNode child, inner_nodes[3];
    CHECK(cuGraphCreate(&parent, 0));
    CHECK(cuGraphAddChildGraphNode(&child, parent, NULL, 0, g));
    CHECK(cuGraphChildGraphNodeGetGraph(child, &inner));
    size_t count = 3;
    CHECK(cuGraphGetNodes(inner, inner_nodes, &count));
    CHECK(cuGraphKernelNodeGetParams_v2(inner_nodes[0], &k2));
    put_kernel("child_kernel", &k2, fill);
    CHECK(cuGraphMemcpyNodeGetParams(inner_nodes[1], &cp));
    put_copy("child_memcpy", &cp, e, src);

    CUgraph graphs[] = {g, ge, h, parent};
    for (size_t i = 0; i < sizeof graphs / sizeof graphs[0]; i++) CHECK(cuGraphDestroy(graphs[i]));
    CHECK(cuStreamDestroy_v2(s));
    return 0;
}

/* What the captured graph's launch left: d[0], d[255], d[256], e[0], e[255], e[512], e[543],
 * e[544] (words). */
static void put_launch(const char *key) {
    printf("%s %u %u %u %u %u 0x%x 0x%x 0x%x\n", key, word(d, 0), word(d, 255), word(d, 256),
           word(e, 0), word(e, 255), word(e, 512), word(e, 543), word(e, 544));
}

/* Executable graphs changed one node at a time, through the generic structure, and by
 * whole-graph update; refusals change nothing. */
static int exec_edits(int argc, char **argv) {
    (void)argc, (void)argv;
    CUcontext ctx = buffers();
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUmodule m;
    CHECK(cuModuleLoadData(&m, "simcuda"));
    CUfunction fill = function(m, "fill_u32"), add = function(m, "add_u32");
    CUgraphNode c[3];
    CUgraph g = captured(s, fill, c);
    CUgraphExec x;
    CHECK(cuGraphInstantiateWithFlags(&x, g, 0));
    CHECK(cuGraphLaunch(x, s));
    put_launch("launch");

    CUdeviceptr p = d;
    unsigned int value = 7, n = 128;
    void *args[] = {&p, &value, &n};
    CUDA_KERNEL_NODE_PARAMS_v1 kp = {.func = fill, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                     .blockDimX = 128, .blockDimY = 1, .blockDimZ = 1,
                                     .kernelParams = args};
    put_result("exec_kernel_set", cuGraphExecKernelNodeSetParams(x, c[0], &kp));
    CUDA_MEMCPY3D cp = htod(e + 1024, src2, 512);
    put_result("exec_memcpy_set", cuGraphExecMemcpyNodeSetParams(x, c[1], &cp, NULL));
    CUDA_MEMSET_NODE_PARAMS ms = {.dst = e + 3072, .value = 0x1234, .elementSize = 2,
                                  .width = 32, .height = 1};
    put_result("exec_memset_set", cuGraphExecMemsetNodeSetParams(x, c[2], &ms, NULL));
    clear();
    CHECK(cuGraphLaunch(x, s));
    printf("exec_set_launch %u %u %u %u %u 0x%x 0x%x 0x%x\n", word(d, 0), word(d, 127),
           word(d, 128), word(e, 256), word(e, 383), word(e, 768), word(e, 783), word(e, 784));
    /* The graph still holds what it was captured with. */
    CUDA_KERNEL_NODE_PARAMS_v2 k2;
    CHECK(cuGraphKernelNodeGetParams_v2(c[0], &k2));
    printf("graph_unchanged %u\n", *(unsigned int *)k2.kernelParams[1]);

    value = 1, n = 64;
    CUDA_KERNEL_NODE_PARAMS_v2 kv2 = {.func = add, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                      .blockDimX = 64, .blockDimY = 1, .blockDimZ = 1,
                                      .kernelParams = args};
    put_result("exec_kernel_set_v2", cuGraphExecKernelNodeSetParams_v2(x, c[0], &kv2));
    clear();
    CHECK(cuGraphLaunch(x, s));
    printf("exec_set_v2_launch %u %u\n", word(d, 63), word(d, 64));

    /* Through the generic structure. */
    CUgraphNodeParams gp;
    memset(&gp, 0, sizeof gp);
    gp.type = CU_GRAPH_NODE_TYPE_KERNEL;
    value = 11, n = 16;
    p = d + 2048;
    memcpy(&gp.kernel, &kp, sizeof kp);
    put_result("exec_node_kernel", cuGraphExecNodeSetParams(x, c[0], &gp));
    memset(&gp, 0, sizeof gp);
    gp.type = CU_GRAPH_NODE_TYPE_MEMCPY;
    gp.memcpy.copyParams = htod(e, src2, 16);
    put_result("exec_node_memcpy", cuGraphExecNodeSetParams(x, c[1], &gp));
    memset(&gp, 0, sizeof gp);
    gp.type = CU_GRAPH_NODE_TYPE_MEMSET;
    gp.memset = (CUDA_MEMSET_NODE_PARAMS_v2){.dst = e + 64, .value = 0xab, .elementSize = 1,
                                             .width = 8, .height = 1};
    put_result("exec_node_memset", cuGraphExecNodeSetParams(x, c[2], &gp));
    clear();
    CHECK(cuGraphLaunch(x, s));
    printf("exec_node_launch %u %u %u %u %u 0x%x 0x%x %u\n", word(d, 0), word(d, 512),
           word(d, 527), word(d, 528), word(e, 3), word(e, 16), word(e, 17), word(e, 18));

    /* Refused: other types, other memory types, 2D copies, memset heights, another context's
     * function, a node of another graph. Nothing changes. */
    put_result("exec_kernel_on_memcpy", cuGraphExecKernelNodeSetParams(x, c[1], &kp));
    put_result("exec_memcpy_on_kernel", cuGraphExecMemcpyNodeSetParams(x, c[0], &cp, NULL));
    put_result("exec_memset_on_memcpy", cuGraphExecMemsetNodeSetParams(x, c[1], &ms, NULL));
    gp.type = CU_GRAPH_NODE_TYPE_KERNEL;
    memcpy(&gp.kernel, &kp, sizeof kp);
    put_result("exec_node_kernel_on_memset_node", cuGraphExecNodeSetParams(x, c[2], &gp));
    CUDA_MEMCPY3D unified = cp;
    unified.srcMemoryType = CU_MEMORYTYPE_UNIFIED;
    unified.srcDevice = (CUdeviceptr)(uintptr_t)src2;
    put_result("exec_memcpy_memory_type", cuGraphExecMemcpyNodeSetParams(x, c[1], &unified, NULL));
    CUDA_MEMCPY3D rows = cp;
    rows.WidthInBytes = 16, rows.Height = 2, rows.srcPitch = rows.dstPitch = 16;
    put_result("exec_memcpy_2d", cuGraphExecMemcpyNodeSetParams(x, c[1], &rows, NULL));
    ms.height = 2, ms.pitch = 64;
    put_result("exec_memset_height", cuGraphExecMemsetNodeSetParams(x, c[2], &ms, NULL));
    ms.height = 1, ms.width = 0;
    put_result("exec_memset_empty", cuGraphExecMemsetNodeSetParams(x, c[2], &ms, NULL));
    CUcontext other;
    CUdevice dev;
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuCtxCreate_v2(&other, 0, dev));
    CUmodule om;
    CHECK(cuModuleLoadData(&om, "simcuda"));
    CUfunction foreign = function(om, "fill_u32");
    CHECK(cuCtxSetCurrent(ctx));
    kp.func = foreign;
    put_result("exec_kernel_other_context", cuGraphExecKernelNodeSetParams(x, c[0], &kp));
    kp.func = fill;
    CUgraphNode other_nodes[3];
    CUgraph g2 = captured(s, fill, other_nodes);
    put_result("exec_kernel_foreign_node", cuGraphExecKernelNodeSetParams(x, other_nodes[0], &kp));
    put_result("exec_kernel_no_exec", cuGraphExecKernelNodeSetParams(NULL, c[0], &kp));
    put_result("exec_kernel_no_params", cuGraphExecKernelNodeSetParams(x, c[0], NULL));
    clear();
    CHECK(cuGraphLaunch(x, s));
    printf("refused_unchanged %u %u 0x%x\n", word(d, 512), word(e, 3), word(e, 16));

    /* A whole-graph update carries every parameter over: from the graph as captured. */
    CUgraphExecUpdateResultInfo info;
    CUresult ur = cuGraphExecUpdate_v2(x, g, &info);
    printf("update %d %d\n", (int)ur, (int)info.result);
    clear();
    CHECK(cuGraphLaunch(x, s));
    put_launch("update_launch");
    /* From a graph whose kernel runs in another context, or whose copy reads unified memory. */
    CUgraph h;
    CUgraphNode hk, hc, hs;
    CHECK(cuGraphCreate(&h, 0));
    kp.func = foreign;
    CHECK(cuGraphAddKernelNode(&hk, h, NULL, 0, &kp));
    CHECK(cuGraphAddMemcpyNode(&hc, h, &hk, 1, &cp, NULL));
    CUDA_MEMSET_NODE_PARAMS hms = {.dst = e, .value = 1, .elementSize = 4, .width = 4,
                                   .height = 1};
    CHECK(cuGraphAddMemsetNode(&hs, h, &hc, 1, &hms, NULL));
    ur = cuGraphExecUpdate_v2(x, h, &info);
    printf("update_other_context %d %d %d\n", (int)ur, (int)info.result, info.errorNode == hk);
    kp.func = add;
    CHECK(cuGraphKernelNodeSetParams(hk, &kp));
    CHECK(cuGraphMemcpyNodeSetParams(hc, &unified));
    ur = cuGraphExecUpdate_v2(x, h, &info);
    printf("update_memory_type %d %d %d\n", (int)ur, (int)info.result, info.errorNode == hc);
    CHECK(cuGraphMemcpyNodeSetParams(hc, &cp));
    ur = cuGraphExecUpdate_v2(x, h, &info);
    printf("update_by_hand %d %d\n", (int)ur, (int)info.result);
    clear();
    CHECK(cuMemsetD32_v2(d + 2048, 2, 16));
    CHECK(cuGraphLaunch(x, s));
    printf("update_by_hand_launch %u %u %u %u\n", word(d, 512), word(e, 0), word(e, 3),
           word(e, 256));

    /* A child graph's node, named in the parent's executable graph. */
    CUgraph parent, inner;
    CUgraphNode child, inner_nodes[3];
    CHECK(cuGraphCreate(&parent, 0));
    CHECK(cuGraphAddChildGraphNode(&child, parent, NULL, 0, g));
    CHECK(cuGraphChildGraphNodeGetGraph(child, &inner));
    size_t count = 3;
    CHECK(cuGraphGetNodes(inner, inner_nodes, &count));
    CUgraphExec px;
    CHECK(cuGraphInstantiateWithFlags(&px, parent, 0));
    p = d, value = 42, n = 4;
    kp.func = fill;
    put_result("child_exec_kernel_set", cuGraphExecKernelNodeSetParams(px, inner_nodes[0], &kp));
    clear();
    CHECK(cuGraphLaunch(px, s));
    printf("child_exec_launch %u %u\n", word(d, 3), word(d, 4));

    CHECK(cuGraphExecDestroy(px));
    CHECK(cuGraphExecDestroy(x));
    CUgraph graphs[] = {g, g2, h, parent};
    for (size_t i = 0; i < sizeof graphs / sizeof graphs[0]; i++) CHECK(cuGraphDestroy(graphs[i]));
    CHECK(cuStreamDestroy_v2(s));
    CHECK(cuCtxDestroy_v2(other));
    return 0;
}

/* Kernel, memcpy and memset nodes disabled and enabled; other types refused. */
static int enable(int argc, char **argv) {
    (void)argc, (void)argv;
    buffers();
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUmodule m;
    CHECK(cuModuleLoadData(&m, "simcuda"));
    CUfunction fill = function(m, "fill_u32");
    CUgraphNode c[3];
    CUgraph g = captured(s, fill, c);
    CUgraphExec x;
    CHECK(cuGraphInstantiateWithFlags(&x, g, 0));
    unsigned int on[3] = {9, 9, 9};
    for (int i = 0; i < 3; i++) CHECK(cuGraphNodeGetEnabled(x, c[i], &on[i]));
    printf("enabled_at_first %u %u %u\n", on[0], on[1], on[2]);
    CUresult off[3];
    for (int i = 0; i < 3; i++) off[i] = cuGraphNodeSetEnabled(x, c[i], 0);
    printf("disable %d %d %d\n", (int)off[0], (int)off[1], (int)off[2]);
    for (int i = 0; i < 3; i++) CHECK(cuGraphNodeGetEnabled(x, c[i], &on[i]));
    printf("disabled %u %u %u\n", on[0], on[1], on[2]);
    CHECK(cuGraphLaunch(x, s));
    put_launch("disabled_launch");
    /* Enabled again: they run. Any nonzero value enables. */
    CHECK(cuGraphNodeSetEnabled(x, c[1], 1));
    CHECK(cuGraphNodeSetEnabled(x, c[2], 2));
    CHECK(cuGraphLaunch(x, s));
    put_launch("two_enabled_launch");
    /* Parameters set while disabled run once enabled. */
    CUdeviceptr p = d;
    unsigned int value = 13, n = 8;
    void *args[] = {&p, &value, &n};
    CUDA_KERNEL_NODE_PARAMS_v1 kp = {.func = fill, .gridDimX = 1, .gridDimY = 1, .gridDimZ = 1,
                                     .blockDimX = 8, .blockDimY = 1, .blockDimZ = 1,
                                     .kernelParams = args};
    CHECK(cuGraphExecKernelNodeSetParams(x, c[0], &kp));
    CHECK(cuGraphNodeGetEnabled(x, c[0], &on[0]));
    printf("set_while_disabled %u\n", on[0]);
    CHECK(cuGraphNodeSetEnabled(x, c[0], 1));
    clear();
    CHECK(cuGraphLaunch(x, s));
    printf("enabled_launch %u %u\n", word(d, 7), word(d, 8));
    /* A whole-graph update keeps the enabled state and carries the parameters. */
    CHECK(cuGraphNodeSetEnabled(x, c[0], 0));
    CUgraphExecUpdateResultInfo info;
    CUresult ur = cuGraphExecUpdate_v2(x, g, &info);
    CHECK(cuGraphNodeGetEnabled(x, c[0], &on[0]));
    printf("update_keeps_disabled %d %u\n", (int)ur, on[0]);
    clear();
    CHECK(cuGraphLaunch(x, s));
    printf("update_disabled_launch %u\n", word(d, 0));
    CHECK(cuGraphNodeSetEnabled(x, c[0], 1));
    CHECK(cuGraphLaunch(x, s));
    printf("update_enabled_launch %u %u\n", word(d, 255), word(d, 256));
    /* Launched into a capture, a disabled node is left out. */
    CHECK(cuGraphNodeSetEnabled(x, c[1], 0));
    CUstream cap;
    CUgraph into;
    CHECK(cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamBeginCapture_v2(cap, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK(cuGraphLaunch(x, cap));
    CHECK(cuStreamEndCapture(cap, &into));
    size_t count = 0;
    CHECK(cuGraphGetNodes(into, NULL, &count));
    put_u64("captured_without_disabled", count);

    /* Other node types, foreign nodes, missing outputs. */
    CUgraph eg;
    CUgraphNode rec;
    CUevent ev;
    CUgraphExec ex;
    CHECK(cuEventCreate(&ev, CU_EVENT_DEFAULT));
    CHECK(cuGraphCreate(&eg, 0));
    CHECK(cuGraphAddEventRecordNode(&rec, eg, NULL, 0, ev));
    CHECK(cuGraphInstantiateWithFlags(&ex, eg, 0));
    put_result("disable_event_node", cuGraphNodeSetEnabled(ex, rec, 0));
    put_result("get_enabled_event_node", cuGraphNodeGetEnabled(ex, rec, &on[0]));
    put_result("disable_foreign_node", cuGraphNodeSetEnabled(ex, c[0], 0));
    put_result("get_enabled_no_out", cuGraphNodeGetEnabled(x, c[0], NULL));
    put_result("disable_no_exec", cuGraphNodeSetEnabled(NULL, c[0], 0));

    CHECK(cuGraphExecDestroy(ex));
    CHECK(cuGraphExecDestroy(x));
    CUgraph graphs[] = {g, into, eg};
    for (size_t i = 0; i < sizeof graphs / sizeof graphs[0]; i++) CHECK(cuGraphDestroy(graphs[i]));
    CHECK(cuStreamDestroy_v2(cap));
    CHECK(cuStreamDestroy_v2(s));
    return 0;
}

int main(int argc, char **argv) {
    static const struct subcommand cmds[] = {
        {"read-back", read_back}, {"exec-edits", exec_edits}, {"enable", enable}};
    return DISPATCH(cmds);
}
