// link: cudart-shared
// Runtime calls beyond shim_runtime.c, each of which the shim tags as the `via` of the driver
// records it causes (shim_runtime_tags_static.c links the same code statically): the
// per-thread default stream variants of stream-ordered allocation, arrays (2D, 3D,
// mipmapped), cudaMalloc3D, host registration, graph memory nodes (cudaGraphAddMemAllocNode,
// cudaGraphAddNode, cudaGraphAddNode_v2) and every instantiation call.
//
// Everything is freed but two things: the second mipmapped array (leak_mipmapped) and the
// memory of the node that add_node_v2 makes, which the graph's one launch leaves allocated.
// The other two nodes of that graph are freed by free nodes of the same graph.
#include "sim_util.h"

__attribute__((noinline)) static cudaError_t leak_mipmapped(cudaMipmappedArray_t *m,
                                                            const cudaChannelFormatDesc *desc) {
    cudaExtent extent = {64, 32, 0};
    return cudaMallocMipmappedArray(m, desc, extent, 2, 0);
}

__attribute__((noinline)) static cudaError_t add_mem_alloc_node(cudaGraphNode_t *n, cudaGraph_t g,
                                                                size_t size, void **p) {
    cudaMemAllocNodeParams params;
    memset(&params, 0, sizeof params);
    params.poolProps = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
    params.bytesize = size;
    cudaError_t r = cudaGraphAddMemAllocNode(n, g, NULL, 0, &params);
    *p = (void *)(uintptr_t)params.dptr;
    return r;
}

__attribute__((noinline)) static cudaError_t add_node(cudaGraphNode_t *n, cudaGraph_t g, size_t size,
                                                      void **p) {
    cudaGraphNodeParams params;
    memset(&params, 0, sizeof params);
    params.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    params.alloc.poolProps = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
    params.alloc.bytesize = size;
    cudaError_t r = cudaGraphAddNode(n, g, NULL, 0, &params);
    *p = (void *)(uintptr_t)params.alloc.dptr;
    return r;
}

__attribute__((noinline)) static cudaError_t add_node_v2(cudaGraphNode_t *n, cudaGraph_t g,
                                                         size_t size, void **p) {
    cudaGraphNodeParams params;
    memset(&params, 0, sizeof params);
    params.type = CU_GRAPH_NODE_TYPE_MEM_ALLOC;
    params.alloc.poolProps = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
    params.alloc.bytesize = size;
    cudaError_t r = cudaGraphAddNode_v2(n, g, NULL, NULL, 0, &params);
    *p = (void *)(uintptr_t)params.alloc.dptr;
    return r;
}

int main(void) {
    void *a = NULL, *b = NULL;
    cudaMemPool_t pool;
    cudaMemPoolProps props = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
    CHECK_RT(cudaMemPoolCreate(&pool, &props));
    CHECK_RT(cudaMallocAsync_ptsz(&a, 2048, 0));
    CHECK_RT(cudaMallocFromPoolAsync_ptsz(&b, 4096, pool, 0));
    CHECK_RT(cudaFreeAsync_ptsz(a, 0));
    CHECK_RT(cudaFreeAsync_ptsz(b, 0));
    CHECK_RT(cudaStreamSynchronize(cudaStreamPerThread));
    CHECK_RT(cudaMemPoolDestroy(pool));

    cudaChannelFormatDesc float1 = {32, 0, 0, 0, cudaChannelFormatKindFloat};
    cudaChannelFormatDesc float4 = {32, 32, 32, 32, cudaChannelFormatKindFloat};
    cudaArray_t arr2d, arr3d;
    CHECK_RT(cudaMallocArray(&arr2d, &float1, 64, 16, 0));
    cudaExtent extent3d = {8, 8, 4};
    CHECK_RT(cudaMalloc3DArray(&arr3d, &float1, extent3d, 0));
    cudaMipmappedArray_t mm, leaked;
    cudaExtent extent_mm = {64, 32, 0};
    CHECK_RT(cudaMallocMipmappedArray(&mm, &float4, extent_mm, 4, 0));
    CHECK_RT(leak_mipmapped(&leaked, &float4));
    cudaPitchedPtr pitched;
    cudaExtent extent_linear = {100, 10, 2};
    CHECK_RT(cudaMalloc3D(&pitched, extent_linear));
    static char host[8192];
    CHECK_RT(cudaHostRegister(host, sizeof host, 0));
    CHECK_RT(cudaFreeArray(arr2d));
    CHECK_RT(cudaFreeArray(arr3d));
    CHECK_RT(cudaFreeMipmappedArray(mm));
    CHECK_RT(cudaFree(pitched.ptr));
    CHECK_RT(cudaHostUnregister(host));

    // A captured allocation, freed in the same graph; the graph instantiated by each call.
    cudaStream_t s;
    cudaGraph_t captured;
    void *c = NULL;
    CHECK_RT(cudaStreamCreate(&s));
    CHECK_RT(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    CHECK_RT(cudaMallocAsync(&c, 1024, s));
    CHECK_RT(cudaFreeAsync(c, s));
    CHECK_RT(cudaStreamEndCapture(s, &captured));
    cudaGraphExec_t e;
    CHECK_RT(cudaGraphInstantiate(&e, captured, 0));
    CHECK_RT(cudaGraphLaunch(e, s));
    CHECK_RT(cudaStreamSynchronize(s));
    CHECK_RT(cudaGraphExecDestroy(e));
    cudaGraphInstantiateParams ip;
    memset(&ip, 0, sizeof ip);
    CHECK_RT(cudaGraphInstantiateWithParams(&e, captured, &ip));
    CHECK_RT(cudaGraphExecDestroy(e));
    CHECK_RT(cudaGraphInstantiateWithParams_ptsz(&e, captured, &ip));
    CHECK_RT(cudaGraphExecDestroy(e));
    CHECK_RT(cudaGraphDestroy(captured));

    // Three allocation nodes; free nodes of the same graph free the first two.
    cudaGraph_t g;
    cudaGraphNode_t n1, n2, n3, f1, f2;
    void *p1, *p2, *p3;
    CHECK_RT(cudaGraphCreate(&g, 0));
    CHECK_RT(add_mem_alloc_node(&n1, g, 64 << 10, &p1));
    CHECK_RT(add_node(&n2, g, 32 << 10, &p2));
    CHECK_RT(add_node_v2(&n3, g, 16 << 10, &p3));
    CHECK_RT(cudaGraphAddMemFreeNode(&f1, g, &n1, 1, p1));
    CHECK_RT(cudaGraphAddMemFreeNode(&f2, g, &n2, 1, p2));
    CHECK_RT(cudaGraphInstantiateWithFlags(&e, g, 0));
    CHECK_RT(cudaGraphLaunch(e, s));
    CHECK_RT(cudaStreamSynchronize(s));
    CHECK_RT(cudaGraphExecDestroy(e));
    CHECK_RT(cudaGraphDestroy(g));
    CHECK_RT(cudaStreamDestroy(s));
    puts("done");
    return 0;
}
