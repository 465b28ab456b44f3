/*
 * api.c: the cuda* functions of the simulated runtime. Each one makes sure the calling thread
 * has a context (initialising the runtime on first use), calls the driver through the pointers
 * the resolver handed out, and records a failure for cudaGetLastError.
 */
#include <stdint.h>
#include <string.h>

#include "rt.h"

SIMCUDA_API cudaError_t cudaGetDeviceCount(int *count) {
    if (!count) return rt_error(cudaErrorInvalidValue);
    cudaError_t e = rt_init();
    if (e != cudaSuccess) {
        *count = 0;
        return rt_error(e);
    }
    return rt_error(rt_from_driver(drv.cuDeviceGetCount(count)));
}

SIMCUDA_API cudaError_t cudaSetDevice(int device) {
    cudaError_t e = rt_init();
    if (e != cudaSuccess) return rt_error(e);
    int count = 0;
    drv.cuDeviceGetCount(&count);
    if (device < 0 || device >= count) return rt_error(cudaErrorInvalidDevice);
    rt_set_thread_device(device);
    return rt_error(rt_bind_device(device));
}

SIMCUDA_API cudaError_t cudaGetDevice(int *device) {
    if (!device) return rt_error(cudaErrorInvalidValue);
    cudaError_t e = rt_init();
    if (e != cudaSuccess) return rt_error(e);
    CUcontext current = NULL;
    drv.cuCtxGetCurrent(&current);
    if (!current) {
        *device = rt_thread_device();
        return cudaSuccess;
    }
    return rt_error(rt_from_driver(drv.cuCtxGetDevice(device)));
}

/* As with NVIDIA's runtime, a zero-byte cudaMalloc succeeds and returns NULL. */
SIMCUDA_API cudaError_t cudaMalloc(void **devPtr, size_t size) {
    if (!devPtr) return rt_error(cudaErrorInvalidValue);
    cudaError_t e = rt_context();
    if (e != cudaSuccess) return rt_error(e);
    if (size == 0) {
        *devPtr = NULL;
        return cudaSuccess;
    }
    CUdeviceptr p = 0;
    CUresult r = drv.cuMemAlloc_v2(&p, size);
    if (r == CUDA_SUCCESS) *devPtr = (void *)(uintptr_t)p;
    return rt_error(rt_from_driver(r));
}

SIMCUDA_API cudaError_t cudaFree(void *devPtr) {
    cudaError_t e = rt_context();
    if (e != cudaSuccess) return rt_error(e);
    if (!devPtr) return cudaSuccess;
    return rt_error(rt_from_driver(drv.cuMemFree_v2(DPTR(devPtr))));
}

SIMCUDA_API cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream) {
    if (!devPtr) return rt_error(cudaErrorInvalidValue);
    cudaError_t e = rt_context();
    if (e != cudaSuccess) return rt_error(e);
    CUdeviceptr p = 0;
    CUresult r = drv.cuMemAllocAsync(&p, size, stream);
    if (r == CUDA_SUCCESS) *devPtr = (void *)(uintptr_t)p;
    return rt_error(rt_from_driver(r));
}

SIMCUDA_API cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream) {
    WITH_CONTEXT(drv.cuMemFreeAsync(DPTR(devPtr), stream));
}

SIMCUDA_API cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
                                                cudaStream_t stream) {
    if (!ptr) return rt_error(cudaErrorInvalidValue);
    cudaError_t e = rt_context();
    if (e != cudaSuccess) return rt_error(e);
    CUdeviceptr p = 0;
    CUresult r = drv.cuMemAllocFromPoolAsync(&p, size, memPool, stream);
    if (r == CUDA_SUCCESS) *ptr = (void *)(uintptr_t)p;
    return rt_error(rt_from_driver(r));
}

/* The per-thread default stream variants call the driver's _ptsz entry points, for which a
 * NULL stream is the calling thread's default stream, as NVIDIA's runtime does. */
SIMCUDA_API cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t stream) {
    if (!devPtr) return rt_error(cudaErrorInvalidValue);
    NEED(cuMemAllocAsync_ptsz);
    cudaError_t e = rt_context();
    if (e != cudaSuccess) return rt_error(e);
    CUdeviceptr p = 0;
    CUresult r = drv.cuMemAllocAsync_ptsz(&p, size, stream);
    if (r == CUDA_SUCCESS) *devPtr = (void *)(uintptr_t)p;
    return rt_error(rt_from_driver(r));
}

SIMCUDA_API cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t stream) {
    NEED(cuMemFreeAsync_ptsz);
    WITH_CONTEXT(drv.cuMemFreeAsync_ptsz(DPTR(devPtr), stream));
}

SIMCUDA_API cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size,
                                                     cudaMemPool_t memPool, cudaStream_t stream) {
    if (!ptr) return rt_error(cudaErrorInvalidValue);
    NEED(cuMemAllocFromPoolAsync_ptsz);
    cudaError_t e = rt_context();
    if (e != cudaSuccess) return rt_error(e);
    CUdeviceptr p = 0;
    CUresult r = drv.cuMemAllocFromPoolAsync_ptsz(&p, size, memPool, stream);
    if (r == CUDA_SUCCESS) *ptr = (void *)(uintptr_t)p;
    return rt_error(rt_from_driver(r));
}

SIMCUDA_API cudaError_t cudaMemPoolCreate(cudaMemPool_t *memPool, const cudaMemPoolProps *poolProps) {
    WITH_CONTEXT(drv.cuMemPoolCreate(memPool, poolProps));
}

SIMCUDA_API cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool) {
    WITH_CONTEXT(drv.cuMemPoolDestroy(memPool));
}

SIMCUDA_API cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags) {
    if (!devPtr) return rt_error(cudaErrorInvalidValue);
    cudaError_t e = rt_context();
    if (e != cudaSuccess) return rt_error(e);
    CUdeviceptr p = 0;
    CUresult r = drv.cuMemAllocManaged(&p, size, flags);
    if (r == CUDA_SUCCESS) *devPtr = (void *)(uintptr_t)p;
    return rt_error(rt_from_driver(r));
}

SIMCUDA_API cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr) {
    if (!handle) return rt_error(cudaErrorInvalidValue);
    WITH_CONTEXT(drv.cuIpcGetMemHandle((CUipcMemHandle *)(void *)handle, DPTR(devPtr)));
}

SIMCUDA_API cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags) {
    if (!devPtr) return rt_error(cudaErrorInvalidValue);
    cudaError_t e = rt_context();
    if (e != cudaSuccess) return rt_error(e);
    CUipcMemHandle h;
    memcpy(&h, &handle, sizeof h);
    CUdeviceptr p = 0;
    CUresult r = drv.cuIpcOpenMemHandle_v2(&p, h, flags);
    if (r == CUDA_SUCCESS) *devPtr = (void *)(uintptr_t)p;
    return rt_error(rt_from_driver(r));
}

SIMCUDA_API cudaError_t cudaIpcCloseMemHandle(void *devPtr) {
    WITH_CONTEXT(drv.cuIpcCloseMemHandle(DPTR(devPtr)));
}

SIMCUDA_API cudaError_t cudaMallocHost(void **ptr, size_t size) {
    WITH_CONTEXT(drv.cuMemHostAlloc(ptr, size, 0));
}

SIMCUDA_API cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags) {
    WITH_CONTEXT(drv.cuMemHostAlloc(pHost, size, flags));
}

SIMCUDA_API cudaError_t cudaFreeHost(void *ptr) {
    cudaError_t e = rt_context();
    if (e != cudaSuccess) return rt_error(e);
    if (!ptr) return cudaSuccess;
    return rt_error(rt_from_driver(drv.cuMemFreeHost(ptr)));
}

/* The runtime's cudaHostRegister* flags are the driver's CU_MEMHOSTREGISTER_* values. */
SIMCUDA_API cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags) {
    NEED(cuMemHostRegister_v2);
    WITH_CONTEXT(drv.cuMemHostRegister_v2(ptr, size, flags));
}

SIMCUDA_API cudaError_t cudaHostUnregister(void *ptr) {
    NEED(cuMemHostUnregister);
    WITH_CONTEXT(drv.cuMemHostUnregister(ptr));
}

SIMCUDA_API cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height) {
    if (!devPtr) return rt_error(cudaErrorInvalidValue);
    cudaError_t e = rt_context();
    if (e != cudaSuccess) return rt_error(e);
    CUdeviceptr p = 0;
    CUresult r = drv.cuMemAllocPitch_v2(&p, pitch, width, height, 4);
    if (r == CUDA_SUCCESS) *devPtr = (void *)(uintptr_t)p;
    return rt_error(rt_from_driver(r));
}

SIMCUDA_API cudaError_t cudaMemGetInfo(size_t *free, size_t *total) {
    WITH_CONTEXT(drv.cuMemGetInfo_v2(free, total));
}

SIMCUDA_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
                                   enum cudaMemcpyKind kind) {
    cudaError_t e = rt_context();
    if (e != cudaSuccess) return rt_error(e);
    CUresult r;
    switch (kind) {
    case cudaMemcpyHostToDevice: r = drv.cuMemcpyHtoD_v2(DPTR(dst), src, count); break;
    case cudaMemcpyDeviceToHost: r = drv.cuMemcpyDtoH_v2(dst, DPTR(src), count); break;
    case cudaMemcpyDeviceToDevice: r = drv.cuMemcpyDtoD_v2(DPTR(dst), DPTR(src), count); break;
    case cudaMemcpyHostToHost:
    case cudaMemcpyDefault: r = drv.cuMemcpy(DPTR(dst), DPTR(src), count); break;
    default: return rt_error(cudaErrorInvalidMemcpyDirection);
    }
    return rt_error(rt_from_driver(r));
}

SIMCUDA_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                        enum cudaMemcpyKind kind, cudaStream_t stream) {
    cudaError_t e = rt_context();
    if (e != cudaSuccess) return rt_error(e);
    CUresult r;
    switch (kind) {
    case cudaMemcpyHostToDevice: r = drv.cuMemcpyHtoDAsync_v2(DPTR(dst), src, count, stream); break;
    case cudaMemcpyDeviceToHost: r = drv.cuMemcpyDtoHAsync_v2(dst, DPTR(src), count, stream); break;
    case cudaMemcpyDeviceToDevice:
        r = drv.cuMemcpyDtoDAsync_v2(DPTR(dst), DPTR(src), count, stream);
        break;
    case cudaMemcpyHostToHost:
    case cudaMemcpyDefault: r = drv.cuMemcpyAsync(DPTR(dst), DPTR(src), count, stream); break;
    default: return rt_error(cudaErrorInvalidMemcpyDirection);
    }
    return rt_error(rt_from_driver(r));
}

SIMCUDA_API cudaError_t cudaMemset(void *devPtr, int value, size_t count) {
    WITH_CONTEXT(drv.cuMemsetD8_v2(DPTR(devPtr), (unsigned char)value, count));
}

SIMCUDA_API cudaError_t cudaStreamCreate(cudaStream_t *pStream) {
    WITH_CONTEXT(drv.cuStreamCreate(pStream, CU_STREAM_DEFAULT));
}

SIMCUDA_API cudaError_t cudaStreamDestroy(cudaStream_t stream) {
    WITH_CONTEXT(drv.cuStreamDestroy_v2(stream));
}

SIMCUDA_API cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
    WITH_CONTEXT(drv.cuStreamSynchronize(stream));
}

SIMCUDA_API cudaError_t cudaEventCreate(cudaEvent_t *event) {
    WITH_CONTEXT(drv.cuEventCreate(event, CU_EVENT_DEFAULT));
}

SIMCUDA_API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream) {
    WITH_CONTEXT(drv.cuEventRecord(event, stream));
}

SIMCUDA_API cudaError_t cudaEventSynchronize(cudaEvent_t event) {
    WITH_CONTEXT(drv.cuEventSynchronize(event));
}

SIMCUDA_API cudaError_t cudaEventDestroy(cudaEvent_t event) {
    WITH_CONTEXT(drv.cuEventDestroy_v2(event));
}

SIMCUDA_API cudaError_t cudaDeviceSynchronize(void) { WITH_CONTEXT(drv.cuCtxSynchronize()); }

/* Frees every allocation of the current device's primary context (cuDevicePrimaryCtxReset_v2). */
SIMCUDA_API cudaError_t cudaDeviceReset(void) {
    cudaError_t e = rt_context();
    if (e != cudaSuccess) return rt_error(e);
    CUdevice dev = 0;
    CUresult r = drv.cuCtxGetDevice(&dev);
    if (r == CUDA_SUCCESS) r = drv.cuDevicePrimaryCtxReset_v2(dev);
    return rt_error(rt_from_driver(r));
}

SIMCUDA_API cudaError_t cudaGetLastError(void) { return rt_take_last_error(true); }

SIMCUDA_API cudaError_t cudaPeekAtLastError(void) { return rt_take_last_error(false); }

static const struct {
    cudaError_t code;
    const char *name;
    const char *text;
} errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorInvalidChannelDescriptor, "cudaErrorInvalidChannelDescriptor",
     "invalid channel descriptor"},
    {cudaErrorInvalidMemcpyDirection, "cudaErrorInvalidMemcpyDirection", "invalid copy direction for memcpy"},
    {cudaErrorInsufficientDriver, "cudaErrorInsufficientDriver",
     "CUDA driver version is insufficient for CUDA runtime version"},
    {cudaErrorCallRequiresNewerDriver, "cudaErrorCallRequiresNewerDriver",
     "API call is not supported in the installed CUDA driver"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorInvalidResourceHandle, "cudaErrorInvalidResourceHandle", "invalid resource handle"},
    {cudaErrorSymbolNotFound, "cudaErrorSymbolNotFound", "named symbol not found"},
    {cudaErrorNotReady, "cudaErrorNotReady", "device not ready"},
    {cudaErrorHostMemoryAlreadyRegistered, "cudaErrorHostMemoryAlreadyRegistered",
     "part or all of the requested memory range is already mapped"},
    {cudaErrorHostMemoryNotRegistered, "cudaErrorHostMemoryNotRegistered",
     "pointer does not correspond to a registered memory region"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
    {cudaErrorStreamCaptureUnsupported, "cudaErrorStreamCaptureUnsupported",
     "operation not permitted when stream is capturing"},
    {cudaErrorStreamCaptureInvalidated, "cudaErrorStreamCaptureInvalidated",
     "operation failed due to a previous error during capture"},
    {cudaErrorUnknown, "cudaErrorUnknown", "unknown error"},
};

SIMCUDA_API const char *cudaGetErrorString(cudaError_t error) {
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == error) return errors[i].text;
    return "unrecognized error code";
}

SIMCUDA_API const char *cudaGetErrorName(cudaError_t error) {
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == error) return errors[i].name;
    return "cudaErrorUnknown";
}

/* Reports 0 without an error when no driver can be loaded, as NVIDIA's runtime does. */
SIMCUDA_API cudaError_t cudaDriverGetVersion(int *driverVersion) {
    if (!driverVersion) return rt_error(cudaErrorInvalidValue);
    if (rt_load() != cudaSuccess) {
        *driverVersion = 0;
        return cudaSuccess;
    }
    return rt_error(rt_from_driver(drv.cuDriverGetVersion(driverVersion)));
}

SIMCUDA_API cudaError_t cudaRuntimeGetVersion(int *runtimeVersion) {
    if (!runtimeVersion) return rt_error(cudaErrorInvalidValue);
    *runtimeVersion = SIMCUDART_VERSION;
    return cudaSuccess;
}

SIMCUDA_API cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr,
                                                unsigned long long flags,
                                                cudaDriverEntryPointQueryResult *driverStatus) {
    return rt_error(rt_entry_point(symbol, funcPtr, SIMCUDART_VERSION, flags, driverStatus));
}

SIMCUDA_API cudaError_t cudaGetDriverEntryPointByVersion(
    const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
    cudaDriverEntryPointQueryResult *driverStatus) {
    return rt_error(rt_entry_point(symbol, funcPtr, cudaVersion, flags, driverStatus));
}
