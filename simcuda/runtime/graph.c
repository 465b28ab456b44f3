/*
 * graph.c: the runtime's stream capture and graphs, on the driver's graph entry points. The
 * runtime's parameter structures have the driver's layouts (asserted below; see simcuda.h), so
 * every call passes its arguments through: cudaGraphInstantiate (the CUDA 12 three-argument ABI) and
 * cudaGraphInstantiateWithFlags call cuGraphInstantiateWithFlags; cudaGraphAddNode calls the
 * 12.2 cuGraphAddNode and cudaGraphAddNode_v2 the 12.3 cuGraphAddNode_v2; the _ptsz functions
 * call the driver's _ptsz entry points, for which a NULL stream is the per-thread one.
 */
#include <stddef.h>
#include <stdint.h>

#include "rt.h"

#define SAME_SIZE(a, b) _Static_assert(sizeof(a) == sizeof(b), #a " has the size of " #b)
#define SAME_MEMBER(a, ma, b, mb)                                                          \
    _Static_assert(offsetof(a, ma) == offsetof(b, mb) &&                                  \
                       sizeof(((a *)0)->ma) == sizeof(((b *)0)->mb),                      \
                   #a "." #ma " is " #b "." #mb)

SAME_SIZE(cudaMemAllocNodeParams, CUDA_MEM_ALLOC_NODE_PARAMS);
SAME_MEMBER(cudaMemAllocNodeParams, poolProps, CUDA_MEM_ALLOC_NODE_PARAMS, poolProps);
SAME_MEMBER(cudaMemAllocNodeParams, accessDescs, CUDA_MEM_ALLOC_NODE_PARAMS, accessDescs);
SAME_MEMBER(cudaMemAllocNodeParams, accessDescCount, CUDA_MEM_ALLOC_NODE_PARAMS, accessDescCount);
SAME_MEMBER(cudaMemAllocNodeParams, bytesize, CUDA_MEM_ALLOC_NODE_PARAMS, bytesize);
SAME_MEMBER(cudaMemAllocNodeParams, dptr, CUDA_MEM_ALLOC_NODE_PARAMS, dptr);
SAME_SIZE(cudaGraphNodeParams, CUgraphNodeParams);
SAME_MEMBER(cudaGraphNodeParams, type, CUgraphNodeParams, type);
SAME_MEMBER(cudaGraphNodeParams, reserved0, CUgraphNodeParams, reserved0);
SAME_MEMBER(cudaGraphNodeParams, alloc, CUgraphNodeParams, alloc);
SAME_MEMBER(cudaGraphNodeParams, free.dptr, CUgraphNodeParams, free.dptr);
SAME_MEMBER(cudaGraphNodeParams, graph.graph, CUgraphNodeParams, graph.graph);
SAME_MEMBER(cudaGraphNodeParams, graph.ownership, CUgraphNodeParams, graph.ownership);
SAME_MEMBER(cudaGraphNodeParams, reserved2, CUgraphNodeParams, reserved2);
SAME_SIZE(cudaGraphInstantiateParams, CUDA_GRAPH_INSTANTIATE_PARAMS);
SAME_MEMBER(cudaGraphInstantiateParams, flags, CUDA_GRAPH_INSTANTIATE_PARAMS, flags);
SAME_MEMBER(cudaGraphInstantiateParams, uploadStream, CUDA_GRAPH_INSTANTIATE_PARAMS, hUploadStream);
SAME_MEMBER(cudaGraphInstantiateParams, errNode_out, CUDA_GRAPH_INSTANTIATE_PARAMS, hErrNode_out);
SAME_MEMBER(cudaGraphInstantiateParams, result_out, CUDA_GRAPH_INSTANTIATE_PARAMS, result_out);

#define ALLOC_PARAMS(p) ((CUDA_MEM_ALLOC_NODE_PARAMS *)(void *)(p))
#define NODE_PARAMS(p) ((CUgraphNodeParams *)(void *)(p))
#define INSTANTIATE_PARAMS(p) ((CUDA_GRAPH_INSTANTIATE_PARAMS *)(void *)(p))

SIMCUDA_API cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode) {
    NEED(cuStreamBeginCapture_v2);
    WITH_CONTEXT(drv.cuStreamBeginCapture_v2(stream, (CUstreamCaptureMode)mode));
}

SIMCUDA_API cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph) {
    NEED(cuStreamEndCapture);
    WITH_CONTEXT(drv.cuStreamEndCapture(stream, pGraph));
}

SIMCUDA_API cudaError_t cudaGraphCreate(cudaGraph_t *pGraph, unsigned int flags) {
    NEED(cuGraphCreate);
    WITH_CONTEXT(drv.cuGraphCreate(pGraph, flags));
}

SIMCUDA_API cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
    NEED(cuGraphDestroy);
    WITH_CONTEXT(drv.cuGraphDestroy(graph));
}

SIMCUDA_API cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                                 const cudaGraphNode_t *pDependencies,
                                                 size_t numDependencies,
                                                 cudaMemAllocNodeParams *nodeParams) {
    NEED(cuGraphAddMemAllocNode);
    WITH_CONTEXT(drv.cuGraphAddMemAllocNode(pGraphNode, graph, pDependencies, numDependencies,
                                            ALLOC_PARAMS(nodeParams)));
}

SIMCUDA_API cudaError_t cudaGraphAddMemFreeNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                                const cudaGraphNode_t *pDependencies,
                                                size_t numDependencies, void *dptr) {
    NEED(cuGraphAddMemFreeNode);
    WITH_CONTEXT(drv.cuGraphAddMemFreeNode(pGraphNode, graph, pDependencies, numDependencies,
                                           DPTR(dptr)));
}

SIMCUDA_API cudaError_t cudaGraphAddNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                         const cudaGraphNode_t *pDependencies,
                                         size_t numDependencies, cudaGraphNodeParams *nodeParams) {
    NEED(cuGraphAddNode);
    WITH_CONTEXT(drv.cuGraphAddNode(pGraphNode, graph, pDependencies, numDependencies,
                                    NODE_PARAMS(nodeParams)));
}

SIMCUDA_API cudaError_t cudaGraphAddNode_v2(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                            const cudaGraphNode_t *pDependencies,
                                            const cudaGraphEdgeData *dependencyData,
                                            size_t numDependencies,
                                            cudaGraphNodeParams *nodeParams) {
    NEED(cuGraphAddNode_v2);
    WITH_CONTEXT(drv.cuGraphAddNode_v2(pGraphNode, graph, pDependencies, dependencyData,
                                       numDependencies, NODE_PARAMS(nodeParams)));
}

SIMCUDA_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                             unsigned long long flags) {
    NEED(cuGraphInstantiateWithFlags);
    WITH_CONTEXT(drv.cuGraphInstantiateWithFlags(pGraphExec, graph, flags));
}

SIMCUDA_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec,
                                                      cudaGraph_t graph, unsigned long long flags) {
    NEED(cuGraphInstantiateWithFlags);
    WITH_CONTEXT(drv.cuGraphInstantiateWithFlags(pGraphExec, graph, flags));
}

SIMCUDA_API cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t *pGraphExec,
                                                       cudaGraph_t graph,
                                                       cudaGraphInstantiateParams *instantiateParams) {
    NEED(cuGraphInstantiateWithParams);
    WITH_CONTEXT(drv.cuGraphInstantiateWithParams(pGraphExec, graph,
                                                  INSTANTIATE_PARAMS(instantiateParams)));
}

/* A NULL upload stream in the parameters is the calling thread's default stream. */
SIMCUDA_API cudaError_t cudaGraphInstantiateWithParams_ptsz(
    cudaGraphExec_t *pGraphExec, cudaGraph_t graph, cudaGraphInstantiateParams *instantiateParams) {
    NEED(cuGraphInstantiateWithParams_ptsz);
    WITH_CONTEXT(drv.cuGraphInstantiateWithParams_ptsz(pGraphExec, graph,
                                                       INSTANTIATE_PARAMS(instantiateParams)));
}

SIMCUDA_API cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
    NEED(cuGraphLaunch);
    WITH_CONTEXT(drv.cuGraphLaunch(graphExec, stream));
}

SIMCUDA_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream) {
    NEED(cuGraphLaunch_ptsz);
    WITH_CONTEXT(drv.cuGraphLaunch_ptsz(graphExec, stream));
}

SIMCUDA_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
    NEED(cuGraphExecDestroy);
    WITH_CONTEXT(drv.cuGraphExecDestroy(graphExec));
}
