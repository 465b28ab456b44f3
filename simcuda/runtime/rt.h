/*
 * rt.h: the simulated CUDA runtime's view of the driver.
 *
 * The runtime reaches the driver only the way NVIDIA's runtime does: dlopen("libcuda.so.1"),
 * dlsym of cuGetProcAddress_v2 (or the 4-argument cuGetProcAddress), then one resolver request
 * per driver function, by base name and ABI version. It never links against libcuda and never
 * calls an exported driver symbol directly, so an interposer that only exports symbols sees
 * none of these calls, exactly as with the real runtime.
 */
#ifndef SIMCUDART_RT_H
#define SIMCUDART_RT_H

#include <stdbool.h>
#include <stdint.h>

#include "simcuda.h"

#define RT_HIDDEN __attribute__((visibility("hidden")))

/* Driver entry points obtained from the resolver, with the ABI versions the runtime asks for. */
struct driver {
    CUresult (*cuInit)(unsigned int);
    CUresult (*cuDriverGetVersion)(int *);
    CUresult (*cuDeviceGetCount)(int *);
    CUresult (*cuDeviceGet)(CUdevice *, int);
    CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
    CUresult (*cuDevicePrimaryCtxReset_v2)(CUdevice);
    CUresult (*cuCtxGetCurrent)(CUcontext *);
    CUresult (*cuCtxSetCurrent)(CUcontext);
    CUresult (*cuCtxGetDevice)(CUdevice *);
    CUresult (*cuCtxSynchronize)(void);
    CUresult (*cuMemGetInfo_v2)(size_t *, size_t *);
    CUresult (*cuMemAlloc_v2)(CUdeviceptr *, size_t);
    CUresult (*cuMemAllocPitch_v2)(CUdeviceptr *, size_t *, size_t, size_t, unsigned int);
    CUresult (*cuMemAllocManaged)(CUdeviceptr *, size_t, unsigned int);
    CUresult (*cuMemFree_v2)(CUdeviceptr);
    CUresult (*cuMemHostAlloc)(void **, size_t, unsigned int);
    CUresult (*cuMemFreeHost)(void *);
    CUresult (*cuMemAllocAsync)(CUdeviceptr *, size_t, CUstream);
    CUresult (*cuMemFreeAsync)(CUdeviceptr, CUstream);
    CUresult (*cuMemAllocFromPoolAsync)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
    CUresult (*cuMemPoolCreate)(CUmemoryPool *, const CUmemPoolProps *);
    CUresult (*cuMemPoolDestroy)(CUmemoryPool);
    CUresult (*cuIpcGetMemHandle)(CUipcMemHandle *, CUdeviceptr);
    CUresult (*cuIpcOpenMemHandle_v2)(CUdeviceptr *, CUipcMemHandle, unsigned int);
    CUresult (*cuIpcCloseMemHandle)(CUdeviceptr);
    CUresult (*cuMemcpy)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*cuMemcpyAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemcpyHtoD_v2)(CUdeviceptr, const void *, size_t);
    CUresult (*cuMemcpyDtoH_v2)(void *, CUdeviceptr, size_t);
    CUresult (*cuMemcpyDtoD_v2)(CUdeviceptr, CUdeviceptr, size_t);
    CUresult (*cuMemcpyHtoDAsync_v2)(CUdeviceptr, const void *, size_t, CUstream);
    CUresult (*cuMemcpyDtoHAsync_v2)(void *, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemcpyDtoDAsync_v2)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
    CUresult (*cuMemsetD8_v2)(CUdeviceptr, unsigned char, size_t);
    CUresult (*cuStreamCreate)(CUstream *, unsigned int);
    CUresult (*cuStreamDestroy_v2)(CUstream);
    CUresult (*cuStreamSynchronize)(CUstream);
    CUresult (*cuEventCreate)(CUevent *, unsigned int);
    CUresult (*cuEventRecord)(CUevent, CUstream);
    CUresult (*cuEventSynchronize)(CUevent);
    CUresult (*cuEventDestroy_v2)(CUevent);
    /* Optional: a driver without them leaves them NULL, and only the cuda* functions that
     * need them fail (cudaErrorCallRequiresNewerDriver). */
    CUresult (*cuMemAllocAsync_ptsz)(CUdeviceptr *, size_t, CUstream);
    CUresult (*cuMemFreeAsync_ptsz)(CUdeviceptr, CUstream);
    CUresult (*cuMemAllocFromPoolAsync_ptsz)(CUdeviceptr *, size_t, CUmemoryPool, CUstream);
    CUresult (*cuMemHostRegister_v2)(void *, size_t, unsigned int);
    CUresult (*cuMemHostUnregister)(void *);
    CUresult (*cuArrayCreate_v2)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
    CUresult (*cuArray3DCreate_v2)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
    CUresult (*cuArrayDestroy)(CUarray);
    CUresult (*cuMipmappedArrayCreate)(CUmipmappedArray *, const CUDA_ARRAY3D_DESCRIPTOR *,
                                       unsigned int);
    CUresult (*cuMipmappedArrayDestroy)(CUmipmappedArray);
    CUresult (*cuStreamBeginCapture_v2)(CUstream, CUstreamCaptureMode);
    CUresult (*cuStreamEndCapture)(CUstream, CUgraph *);
    CUresult (*cuGraphCreate)(CUgraph *, unsigned int);
    CUresult (*cuGraphDestroy)(CUgraph);
    CUresult (*cuGraphAddMemAllocNode)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                       CUDA_MEM_ALLOC_NODE_PARAMS *);
    CUresult (*cuGraphAddMemFreeNode)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                                      CUdeviceptr);
    CUresult (*cuGraphAddNode)(CUgraphNode *, CUgraph, const CUgraphNode *, size_t,
                               CUgraphNodeParams *);
    CUresult (*cuGraphAddNode_v2)(CUgraphNode *, CUgraph, const CUgraphNode *,
                                  const CUgraphEdgeData *, size_t, CUgraphNodeParams *);
    CUresult (*cuGraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
    CUresult (*cuGraphInstantiateWithParams)(CUgraphExec *, CUgraph,
                                             CUDA_GRAPH_INSTANTIATE_PARAMS *);
    CUresult (*cuGraphInstantiateWithParams_ptsz)(CUgraphExec *, CUgraph,
                                                  CUDA_GRAPH_INSTANTIATE_PARAMS *);
    CUresult (*cuGraphLaunch)(CUgraphExec, CUstream);
    CUresult (*cuGraphLaunch_ptsz)(CUgraphExec, CUstream);
    CUresult (*cuGraphExecDestroy)(CUgraphExec);
};

RT_HIDDEN extern struct driver drv;

/* Loads the driver and resolves every entry point, once. */
RT_HIDDEN cudaError_t rt_load(void);
/* rt_load, a driver version check and cuInit, once. */
RT_HIDDEN cudaError_t rt_init(void);
/* rt_init, then makes sure the calling thread has a current context (the primary context of
 * its device unless the thread already made one current itself). */
RT_HIDDEN cudaError_t rt_context(void);
/* Makes device's primary context current on the calling thread. */
RT_HIDDEN cudaError_t rt_bind_device(int device);
RT_HIDDEN int rt_thread_device(void);
RT_HIDDEN void rt_set_thread_device(int device);
/* Asks the driver's resolver, as cudaGetDriverEntryPointByVersion does. */
RT_HIDDEN cudaError_t rt_entry_point(const char *symbol, void **fn, unsigned int version,
                                     unsigned long long flags,
                                     cudaDriverEntryPointQueryResult *status);
/* Remembers a failure for cudaGetLastError and returns it. */
RT_HIDDEN cudaError_t rt_error(cudaError_t e);
RT_HIDDEN cudaError_t rt_take_last_error(bool reset);

static inline cudaError_t rt_from_driver(CUresult r) { return (cudaError_t)r; }

#define DPTR(p) ((CUdeviceptr)(uintptr_t)(p))

/* Runs `call` (a driver call) after making sure a context is current. */
#define WITH_CONTEXT(call)                                   \
    do {                                                     \
        cudaError_t ctx_ = rt_context();                     \
        if (ctx_ != cudaSuccess) return rt_error(ctx_);      \
        return rt_error(rt_from_driver(call));               \
    } while (0)

/* After the runtime's start-up checks: an optional entry point the driver did not provide
 * means the call needs a newer driver. */
#define NEED(field)                                                                  \
    do {                                                                             \
        cudaError_t need_ = rt_init();                                               \
        if (need_ != cudaSuccess) return rt_error(need_);                            \
        if (!drv.field) return rt_error(cudaErrorCallRequiresNewerDriver);           \
    } while (0)

#endif /* SIMCUDART_RT_H */
