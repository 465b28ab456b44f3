/*
 * resolver.c: the versioned entry-point table and cuGetProcAddress in its three ABIs.
 *
 * One row per exported function: (base name, first CUDA version of that ABI, per-thread
 * variant or not, exported symbol, address). A request (name, version, flags) picks, among the
 * rows with that base name, the one with the largest minimum version <= the requested version;
 * per-thread rows (_ptsz / _ptds) are preferred when the per-thread default stream is asked for,
 * and the ordinary row is used when the function has no per-thread variant at that version, as
 * the real driver does. A name that is absent from the table is CUDA_ERROR_NOT_FOUND with a NULL
 * pointer; a name whose rows all need a newer version is the same with status
 * CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT. A version above the driver's own version is
 * CUDA_ERROR_INVALID_VALUE, as documented for cuGetProcAddress.
 *
 * Every row's address is the exported symbol of the same name: the library is linked with
 * -Bsymbolic-functions, so `dlsym(handle, row.symbol)` and the resolver return the same pointer
 * and an interposer must wrap the resolver itself to see these calls.
 */
#include <string.h>

#include "internal.h"

struct entry {
    const char *base;
    int minver;
    bool per_thread;
    const char *symbol;
    void *fn;
};

#define ROW(base, ver, sym) {base, ver, false, #sym, (void *)sym}
#define PTROW(base, ver, sym) {base, ver, true, #sym, (void *)sym}

static const struct entry table[] = {
    /* initialisation, versions, errors, resolvers */
    ROW("cuInit", 2000, cuInit),
    ROW("cuDriverGetVersion", 2020, cuDriverGetVersion),
    ROW("cuGetErrorString", 6000, cuGetErrorString),
    ROW("cuGetErrorName", 6000, cuGetErrorName),
    ROW("cuGetExportTable", 3000, cuGetExportTable),
    ROW("cuGetProcAddress", 11030, cuGetProcAddress),
    ROW("cuGetProcAddress", 12000, cuGetProcAddress_v2),
    PTROW("cuGetProcAddress", 12000, cuGetProcAddress_v2_ptsz),

    /* devices and pools */
    ROW("cuDeviceGet", 2000, cuDeviceGet),
    ROW("cuDeviceGetCount", 2000, cuDeviceGetCount),
    ROW("cuDeviceGetName", 2000, cuDeviceGetName),
    ROW("cuDeviceTotalMem", 2000, cuDeviceTotalMem),
    ROW("cuDeviceTotalMem", 3020, cuDeviceTotalMem_v2),
    ROW("cuDeviceGetAttribute", 2000, cuDeviceGetAttribute),
    ROW("cuDeviceGetUuid", 9020, cuDeviceGetUuid),
    ROW("cuDeviceGetUuid", 11040, cuDeviceGetUuid_v2),
    ROW("cuDeviceComputeCapability", 2000, cuDeviceComputeCapability),
    ROW("cuDeviceCanAccessPeer", 4000, cuDeviceCanAccessPeer),
    ROW("cuDeviceGetDefaultMemPool", 11020, cuDeviceGetDefaultMemPool),
    ROW("cuDeviceGetMemPool", 11020, cuDeviceGetMemPool),
    ROW("cuDeviceSetMemPool", 11020, cuDeviceSetMemPool),

    /* primary contexts */
    ROW("cuDevicePrimaryCtxRetain", 7000, cuDevicePrimaryCtxRetain),
    ROW("cuDevicePrimaryCtxRelease", 7000, cuDevicePrimaryCtxRelease),
    ROW("cuDevicePrimaryCtxRelease", 11000, cuDevicePrimaryCtxRelease_v2),
    ROW("cuDevicePrimaryCtxReset", 7000, cuDevicePrimaryCtxReset),
    ROW("cuDevicePrimaryCtxReset", 11000, cuDevicePrimaryCtxReset_v2),
    ROW("cuDevicePrimaryCtxSetFlags", 7000, cuDevicePrimaryCtxSetFlags),
    ROW("cuDevicePrimaryCtxSetFlags", 11000, cuDevicePrimaryCtxSetFlags_v2),
    ROW("cuDevicePrimaryCtxGetState", 7000, cuDevicePrimaryCtxGetState),

    /* contexts */
    ROW("cuCtxCreate", 2000, cuCtxCreate),
    ROW("cuCtxCreate", 3020, cuCtxCreate_v2),
    ROW("cuCtxCreate", 11040, cuCtxCreate_v3),
    ROW("cuCtxCreate", 12050, cuCtxCreate_v4),
    ROW("cuCtxDestroy", 2000, cuCtxDestroy),
    ROW("cuCtxDestroy", 4000, cuCtxDestroy_v2),
    ROW("cuCtxGetCurrent", 4000, cuCtxGetCurrent),
    ROW("cuCtxSetCurrent", 4000, cuCtxSetCurrent),
    ROW("cuCtxPushCurrent", 2000, cuCtxPushCurrent),
    ROW("cuCtxPushCurrent", 4000, cuCtxPushCurrent_v2),
    ROW("cuCtxPopCurrent", 2000, cuCtxPopCurrent),
    ROW("cuCtxPopCurrent", 4000, cuCtxPopCurrent_v2),
    ROW("cuCtxGetDevice", 2000, cuCtxGetDevice),
    ROW("cuCtxGetDevice", 13000, cuCtxGetDevice_v2),
    ROW("cuCtxSynchronize", 2000, cuCtxSynchronize),
    ROW("cuCtxSynchronize", 13000, cuCtxSynchronize_v2),
    ROW("cuCtxRecordEvent", 12050, cuCtxRecordEvent),
    ROW("cuCtxWaitEvent", 12050, cuCtxWaitEvent),
    ROW("cuCtxGetStreamPriorityRange", 5050, cuCtxGetStreamPriorityRange),
    ROW("cuCtxGetApiVersion", 3020, cuCtxGetApiVersion),
    ROW("cuCtxGetFlags", 7000, cuCtxGetFlags),
    ROW("cuCtxSetFlags", 12010, cuCtxSetFlags),
    ROW("cuCtxGetId", 12000, cuCtxGetId),

    /* device, managed and host memory */
    ROW("cuMemGetInfo", 2000, cuMemGetInfo),
    ROW("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    ROW("cuMemAlloc", 2000, cuMemAlloc),
    ROW("cuMemAlloc", 3020, cuMemAlloc_v2),
    ROW("cuMemAllocPitch", 2000, cuMemAllocPitch),
    ROW("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
    ROW("cuMemFree", 2000, cuMemFree),
    ROW("cuMemFree", 3020, cuMemFree_v2),
    ROW("cuMemGetAddressRange", 2000, cuMemGetAddressRange),
    ROW("cuMemGetAddressRange", 3020, cuMemGetAddressRange_v2),
    ROW("cuPointerGetAttribute", 4000, cuPointerGetAttribute),
    ROW("cuMemAllocManaged", 6000, cuMemAllocManaged),
    ROW("cuMemAllocHost", 2000, cuMemAllocHost),
    ROW("cuMemAllocHost", 3020, cuMemAllocHost_v2),
    ROW("cuMemHostAlloc", 2020, cuMemHostAlloc),
    ROW("cuMemFreeHost", 2000, cuMemFreeHost),
    ROW("cuMemHostGetDevicePointer", 2020, cuMemHostGetDevicePointer),
    ROW("cuMemHostGetDevicePointer", 3020, cuMemHostGetDevicePointer_v2),
    ROW("cuMemHostGetFlags", 2030, cuMemHostGetFlags),
    ROW("cuMemHostRegister", 4000, cuMemHostRegister),
    ROW("cuMemHostRegister", 6050, cuMemHostRegister_v2),
    ROW("cuMemHostUnregister", 4000, cuMemHostUnregister),

    /* copies and memsets */
    ROW("cuMemcpy", 4000, cuMemcpy),
    PTROW("cuMemcpy", 7000, cuMemcpy_ptds),
    ROW("cuMemcpyAsync", 4000, cuMemcpyAsync),
    PTROW("cuMemcpyAsync", 7000, cuMemcpyAsync_ptsz),
    ROW("cuMemcpyHtoD", 2000, cuMemcpyHtoD),
    ROW("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2),
    PTROW("cuMemcpyHtoD", 7000, cuMemcpyHtoD_v2_ptds),
    ROW("cuMemcpyDtoH", 2000, cuMemcpyDtoH),
    ROW("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2),
    PTROW("cuMemcpyDtoH", 7000, cuMemcpyDtoH_v2_ptds),
    ROW("cuMemcpyDtoD", 2000, cuMemcpyDtoD),
    ROW("cuMemcpyDtoD", 3020, cuMemcpyDtoD_v2),
    PTROW("cuMemcpyDtoD", 7000, cuMemcpyDtoD_v2_ptds),
    ROW("cuMemcpyHtoDAsync", 2000, cuMemcpyHtoDAsync),
    ROW("cuMemcpyHtoDAsync", 3020, cuMemcpyHtoDAsync_v2),
    PTROW("cuMemcpyHtoDAsync", 7000, cuMemcpyHtoDAsync_v2_ptsz),
    ROW("cuMemcpyDtoHAsync", 2000, cuMemcpyDtoHAsync),
    ROW("cuMemcpyDtoHAsync", 3020, cuMemcpyDtoHAsync_v2),
    PTROW("cuMemcpyDtoHAsync", 7000, cuMemcpyDtoHAsync_v2_ptsz),
    ROW("cuMemcpyDtoDAsync", 3000, cuMemcpyDtoDAsync),
    ROW("cuMemcpyDtoDAsync", 3020, cuMemcpyDtoDAsync_v2),
    PTROW("cuMemcpyDtoDAsync", 7000, cuMemcpyDtoDAsync_v2_ptsz),
    ROW("cuMemsetD8", 2000, cuMemsetD8),
    ROW("cuMemsetD8", 3020, cuMemsetD8_v2),
    PTROW("cuMemsetD8", 7000, cuMemsetD8_v2_ptds),
    ROW("cuMemsetD16", 2000, cuMemsetD16),
    ROW("cuMemsetD16", 3020, cuMemsetD16_v2),
    PTROW("cuMemsetD16", 7000, cuMemsetD16_v2_ptds),
    ROW("cuMemsetD32", 2000, cuMemsetD32),
    ROW("cuMemsetD32", 3020, cuMemsetD32_v2),
    PTROW("cuMemsetD32", 7000, cuMemsetD32_v2_ptds),
    ROW("cuMemsetD8Async", 3020, cuMemsetD8Async),
    PTROW("cuMemsetD8Async", 7000, cuMemsetD8Async_ptsz),
    ROW("cuMemsetD16Async", 3020, cuMemsetD16Async),
    PTROW("cuMemsetD16Async", 7000, cuMemsetD16Async_ptsz),
    ROW("cuMemsetD32Async", 3020, cuMemsetD32Async),
    PTROW("cuMemsetD32Async", 7000, cuMemsetD32Async_ptsz),
    ROW("cuMemsetD2D8", 3020, cuMemsetD2D8_v2),
    PTROW("cuMemsetD2D8", 7000, cuMemsetD2D8_v2_ptds),
    ROW("cuMemsetD2D16", 3020, cuMemsetD2D16_v2),
    PTROW("cuMemsetD2D16", 7000, cuMemsetD2D16_v2_ptds),
    ROW("cuMemsetD2D32", 3020, cuMemsetD2D32_v2),
    PTROW("cuMemsetD2D32", 7000, cuMemsetD2D32_v2_ptds),
    ROW("cuMemsetD2D8Async", 3020, cuMemsetD2D8Async),
    PTROW("cuMemsetD2D8Async", 7000, cuMemsetD2D8Async_ptsz),
    ROW("cuMemsetD2D16Async", 3020, cuMemsetD2D16Async),
    PTROW("cuMemsetD2D16Async", 7000, cuMemsetD2D16Async_ptsz),
    ROW("cuMemsetD2D32Async", 3020, cuMemsetD2D32Async),
    PTROW("cuMemsetD2D32Async", 7000, cuMemsetD2D32Async_ptsz),
    ROW("cuMemcpy2D", 3020, cuMemcpy2D_v2),
    PTROW("cuMemcpy2D", 7000, cuMemcpy2D_v2_ptds),
    ROW("cuMemcpy2DUnaligned", 3020, cuMemcpy2DUnaligned_v2),
    PTROW("cuMemcpy2DUnaligned", 7000, cuMemcpy2DUnaligned_v2_ptds),
    ROW("cuMemcpy2DAsync", 3020, cuMemcpy2DAsync_v2),
    PTROW("cuMemcpy2DAsync", 7000, cuMemcpy2DAsync_v2_ptsz),
    ROW("cuMemcpy3D", 3020, cuMemcpy3D_v2),
    PTROW("cuMemcpy3D", 7000, cuMemcpy3D_v2_ptds),
    ROW("cuMemcpy3DAsync", 3020, cuMemcpy3DAsync_v2),
    PTROW("cuMemcpy3DAsync", 7000, cuMemcpy3DAsync_v2_ptsz),
    ROW("cuMemPrefetchAsync", 8000, cuMemPrefetchAsync),
    PTROW("cuMemPrefetchAsync", 8000, cuMemPrefetchAsync_ptsz),
    ROW("cuMemPrefetchAsync", 12020, cuMemPrefetchAsync_v2),
    PTROW("cuMemPrefetchAsync", 12020, cuMemPrefetchAsync_v2_ptsz),
    ROW("cuMemPrefetchBatchAsync", 13000, cuMemPrefetchBatchAsync),
    PTROW("cuMemPrefetchBatchAsync", 13000, cuMemPrefetchBatchAsync_ptsz),
    ROW("cuMemDiscardBatchAsync", 13000, cuMemDiscardBatchAsync),
    PTROW("cuMemDiscardBatchAsync", 13000, cuMemDiscardBatchAsync_ptsz),
    ROW("cuMemDiscardAndPrefetchBatchAsync", 13000, cuMemDiscardAndPrefetchBatchAsync),
    PTROW("cuMemDiscardAndPrefetchBatchAsync", 13000, cuMemDiscardAndPrefetchBatchAsync_ptsz),
    ROW("cuMemcpyHtoA", 3020, cuMemcpyHtoA_v2),
    PTROW("cuMemcpyHtoA", 7000, cuMemcpyHtoA_v2_ptds),
    ROW("cuMemcpyAtoH", 3020, cuMemcpyAtoH_v2),
    PTROW("cuMemcpyAtoH", 7000, cuMemcpyAtoH_v2_ptds),
    ROW("cuMemcpyAtoA", 3020, cuMemcpyAtoA_v2),
    PTROW("cuMemcpyAtoA", 7000, cuMemcpyAtoA_v2_ptds),
    ROW("cuMemcpyDtoA", 3020, cuMemcpyDtoA_v2),
    PTROW("cuMemcpyDtoA", 7000, cuMemcpyDtoA_v2_ptds),
    ROW("cuMemcpyAtoD", 3020, cuMemcpyAtoD_v2),
    PTROW("cuMemcpyAtoD", 7000, cuMemcpyAtoD_v2_ptds),
    ROW("cuMemcpyHtoAAsync", 3020, cuMemcpyHtoAAsync_v2),
    PTROW("cuMemcpyHtoAAsync", 7000, cuMemcpyHtoAAsync_v2_ptsz),
    ROW("cuMemcpyAtoHAsync", 3020, cuMemcpyAtoHAsync_v2),
    PTROW("cuMemcpyAtoHAsync", 7000, cuMemcpyAtoHAsync_v2_ptsz),
    ROW("cuImportExternalMemory", 10000, cuImportExternalMemory),
    ROW("cuExternalMemoryGetMappedBuffer", 10000, cuExternalMemoryGetMappedBuffer),
    ROW("cuExternalMemoryGetMappedMipmappedArray", 10000, cuExternalMemoryGetMappedMipmappedArray),
    ROW("cuDestroyExternalMemory", 10000, cuDestroyExternalMemory),
    ROW("cuImportExternalSemaphore", 10000, cuImportExternalSemaphore),
    ROW("cuSignalExternalSemaphoresAsync", 10000, cuSignalExternalSemaphoresAsync),
    PTROW("cuSignalExternalSemaphoresAsync", 10000, cuSignalExternalSemaphoresAsync_ptsz),
    ROW("cuWaitExternalSemaphoresAsync", 10000, cuWaitExternalSemaphoresAsync),
    PTROW("cuWaitExternalSemaphoresAsync", 10000, cuWaitExternalSemaphoresAsync_ptsz),
    ROW("cuDestroyExternalSemaphore", 10000, cuDestroyExternalSemaphore),
    ROW("cuMemcpyPeer", 4000, cuMemcpyPeer),
    PTROW("cuMemcpyPeer", 7000, cuMemcpyPeer_ptds),
    ROW("cuMemcpyPeerAsync", 4000, cuMemcpyPeerAsync),
    PTROW("cuMemcpyPeerAsync", 7000, cuMemcpyPeerAsync_ptsz),
    ROW("cuMemcpy3DPeer", 4000, cuMemcpy3DPeer),
    PTROW("cuMemcpy3DPeer", 7000, cuMemcpy3DPeer_ptds),
    ROW("cuMemcpy3DPeerAsync", 4000, cuMemcpy3DPeerAsync),
    PTROW("cuMemcpy3DPeerAsync", 7000, cuMemcpy3DPeerAsync_ptsz),
    ROW("cuMemcpyBatchAsync", 12080, cuMemcpyBatchAsync),
    PTROW("cuMemcpyBatchAsync", 12080, cuMemcpyBatchAsync_ptsz),
    ROW("cuMemcpyBatchAsync", 13000, cuMemcpyBatchAsync_v2),
    PTROW("cuMemcpyBatchAsync", 13000, cuMemcpyBatchAsync_v2_ptsz),
    ROW("cuMemcpy3DBatchAsync", 12080, cuMemcpy3DBatchAsync),
    PTROW("cuMemcpy3DBatchAsync", 12080, cuMemcpy3DBatchAsync_ptsz),
    ROW("cuMemcpy3DBatchAsync", 13000, cuMemcpy3DBatchAsync_v2),
    PTROW("cuMemcpy3DBatchAsync", 13000, cuMemcpy3DBatchAsync_v2_ptsz),
    ROW("cuMemcpyWithAttributesAsync", 13020, cuMemcpyWithAttributesAsync),
    PTROW("cuMemcpyWithAttributesAsync", 13020, cuMemcpyWithAttributesAsync_ptsz),
    ROW("cuMemcpy3DWithAttributesAsync", 13020, cuMemcpy3DWithAttributesAsync),
    PTROW("cuMemcpy3DWithAttributesAsync", 13020, cuMemcpy3DWithAttributesAsync_ptsz),

    /* stream-ordered allocation and pools */
    ROW("cuMemAllocAsync", 11020, cuMemAllocAsync),
    PTROW("cuMemAllocAsync", 11020, cuMemAllocAsync_ptsz),
    ROW("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync),
    PTROW("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync_ptsz),
    ROW("cuMemFreeAsync", 11020, cuMemFreeAsync),
    PTROW("cuMemFreeAsync", 11020, cuMemFreeAsync_ptsz),
    ROW("cuMemPoolCreate", 11020, cuMemPoolCreate),
    ROW("cuMemPoolDestroy", 11020, cuMemPoolDestroy),
    ROW("cuMemPoolGetAttribute", 11020, cuMemPoolGetAttribute),
    ROW("cuMemPoolSetAttribute", 11020, cuMemPoolSetAttribute),
    ROW("cuMemPoolTrimTo", 11020, cuMemPoolTrimTo),
    ROW("cuMemPoolSetAccess", 11020, cuMemPoolSetAccess),
    ROW("cuMemPoolGetAccess", 11020, cuMemPoolGetAccess),
    ROW("cuMemPoolExportToShareableHandle", 11020, cuMemPoolExportToShareableHandle),
    ROW("cuMemPoolImportFromShareableHandle", 11020, cuMemPoolImportFromShareableHandle),
    ROW("cuMemPoolExportPointer", 11020, cuMemPoolExportPointer),
    ROW("cuMemPoolImportPointer", 11020, cuMemPoolImportPointer),

    /* virtual memory management */
    ROW("cuMemGetAllocationGranularity", 10020, cuMemGetAllocationGranularity),
    ROW("cuMemAddressReserve", 10020, cuMemAddressReserve),
    ROW("cuMemAddressFree", 10020, cuMemAddressFree),
    ROW("cuMemCreate", 10020, cuMemCreate),
    ROW("cuMemRelease", 10020, cuMemRelease),
    ROW("cuMemMap", 10020, cuMemMap),
    ROW("cuMemUnmap", 10020, cuMemUnmap),
    ROW("cuMemSetAccess", 10020, cuMemSetAccess),
    ROW("cuMemGetAccess", 10020, cuMemGetAccess),
    ROW("cuMemGetAllocationPropertiesFromHandle", 10020, cuMemGetAllocationPropertiesFromHandle),
    ROW("cuMemRetainAllocationHandle", 11000, cuMemRetainAllocationHandle),
    ROW("cuMemExportToShareableHandle", 10020, cuMemExportToShareableHandle),
    ROW("cuMemImportFromShareableHandle", 10020, cuMemImportFromShareableHandle),
    ROW("cuMulticastCreate", 12010, cuMulticastCreate),
    ROW("cuMulticastGetGranularity", 12010, cuMulticastGetGranularity),
    ROW("cuMulticastAddDevice", 12010, cuMulticastAddDevice),
    ROW("cuMulticastBindMem", 12010, cuMulticastBindMem),
    ROW("cuMulticastUnbind", 12010, cuMulticastUnbind),

    /* arrays */
    ROW("cuArrayCreate", 2000, cuArrayCreate),
    ROW("cuArrayCreate", 3020, cuArrayCreate_v2),
    ROW("cuArray3DCreate", 2000, cuArray3DCreate),
    ROW("cuArray3DCreate", 3020, cuArray3DCreate_v2),
    ROW("cuArrayGetDescriptor", 2000, cuArrayGetDescriptor),
    ROW("cuArrayGetDescriptor", 3020, cuArrayGetDescriptor_v2),
    ROW("cuArray3DGetDescriptor", 2000, cuArray3DGetDescriptor),
    ROW("cuArray3DGetDescriptor", 3020, cuArray3DGetDescriptor_v2),
    ROW("cuArrayDestroy", 2000, cuArrayDestroy),
    ROW("cuMipmappedArrayCreate", 5000, cuMipmappedArrayCreate),
    ROW("cuMipmappedArrayGetLevel", 5000, cuMipmappedArrayGetLevel),
    ROW("cuMipmappedArrayDestroy", 5000, cuMipmappedArrayDestroy),

    /* IPC */
    ROW("cuIpcGetMemHandle", 4010, cuIpcGetMemHandle),
    ROW("cuIpcOpenMemHandle", 4010, cuIpcOpenMemHandle),
    ROW("cuIpcOpenMemHandle", 11000, cuIpcOpenMemHandle_v2),
    ROW("cuIpcCloseMemHandle", 4010, cuIpcCloseMemHandle),

    /* streams, capture, graphs */
    ROW("cuStreamCreate", 2000, cuStreamCreate),
    ROW("cuStreamCreateWithPriority", 5050, cuStreamCreateWithPriority),
    ROW("cuStreamDestroy", 2000, cuStreamDestroy),
    ROW("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    ROW("cuStreamSynchronize", 2000, cuStreamSynchronize),
    PTROW("cuStreamSynchronize", 7000, cuStreamSynchronize_ptsz),
    ROW("cuStreamQuery", 2000, cuStreamQuery),
    PTROW("cuStreamQuery", 7000, cuStreamQuery_ptsz),
    ROW("cuStreamWaitEvent", 3020, cuStreamWaitEvent),
    PTROW("cuStreamWaitEvent", 7000, cuStreamWaitEvent_ptsz),
    ROW("cuStreamAddCallback", 5000, cuStreamAddCallback),
    PTROW("cuStreamAddCallback", 7000, cuStreamAddCallback_ptsz),
    ROW("cuStreamGetFlags", 5050, cuStreamGetFlags),
    PTROW("cuStreamGetFlags", 7000, cuStreamGetFlags_ptsz),
    ROW("cuStreamGetPriority", 5050, cuStreamGetPriority),
    PTROW("cuStreamGetPriority", 7000, cuStreamGetPriority_ptsz),
    ROW("cuStreamGetCtx", 9020, cuStreamGetCtx),
    PTROW("cuStreamGetCtx", 9020, cuStreamGetCtx_ptsz),
    ROW("cuStreamGetCtx", 12050, cuStreamGetCtx_v2),
    PTROW("cuStreamGetCtx", 12050, cuStreamGetCtx_v2_ptsz),
    ROW("cuStreamIsCapturing", 10000, cuStreamIsCapturing),
    PTROW("cuStreamIsCapturing", 10000, cuStreamIsCapturing_ptsz),
    ROW("cuStreamGetCaptureInfo", 10010, cuStreamGetCaptureInfo),
    PTROW("cuStreamGetCaptureInfo", 10010, cuStreamGetCaptureInfo_ptsz),
    ROW("cuStreamGetCaptureInfo", 11030, cuStreamGetCaptureInfo_v2),
    PTROW("cuStreamGetCaptureInfo", 11030, cuStreamGetCaptureInfo_v2_ptsz),
    ROW("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3),
    PTROW("cuStreamGetCaptureInfo", 12030, cuStreamGetCaptureInfo_v3_ptsz),
    ROW("cuStreamUpdateCaptureDependencies", 11030, cuStreamUpdateCaptureDependencies),
    PTROW("cuStreamUpdateCaptureDependencies", 11030, cuStreamUpdateCaptureDependencies_ptsz),
    ROW("cuStreamUpdateCaptureDependencies", 12030, cuStreamUpdateCaptureDependencies_v2),
    PTROW("cuStreamUpdateCaptureDependencies", 12030, cuStreamUpdateCaptureDependencies_v2_ptsz),
    ROW("cuStreamBeginCapture", 10000, cuStreamBeginCapture),
    PTROW("cuStreamBeginCapture", 10000, cuStreamBeginCapture_ptsz),
    ROW("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2),
    PTROW("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2_ptsz),
    ROW("cuStreamBeginCaptureToGraph", 12030, cuStreamBeginCaptureToGraph),
    PTROW("cuStreamBeginCaptureToGraph", 12030, cuStreamBeginCaptureToGraph_ptsz),
    ROW("cuStreamEndCapture", 10000, cuStreamEndCapture),
    PTROW("cuStreamEndCapture", 10000, cuStreamEndCapture_ptsz),
    ROW("cuGraphDestroy", 10000, cuGraphDestroy),
    ROW("cuGraphInstantiate", 10000, cuGraphInstantiate),
    ROW("cuGraphInstantiate", 11000, cuGraphInstantiate_v2),
    ROW("cuGraphInstantiate", 12000, cuGraphInstantiateWithFlags),
    ROW("cuGraphInstantiateWithFlags", 11040, cuGraphInstantiateWithFlags),
    ROW("cuGraphInstantiateWithParams", 12000, cuGraphInstantiateWithParams),
    PTROW("cuGraphInstantiateWithParams", 12000, cuGraphInstantiateWithParams_ptsz),
    ROW("cuGraphCreate", 10000, cuGraphCreate),
    ROW("cuGraphAddMemAllocNode", 11040, cuGraphAddMemAllocNode),
    ROW("cuGraphAddMemFreeNode", 11040, cuGraphAddMemFreeNode),
    ROW("cuGraphAddNode", 12020, cuGraphAddNode),
    ROW("cuGraphAddNode", 12030, cuGraphAddNode_v2),
    ROW("cuGraphAddChildGraphNode", 10000, cuGraphAddChildGraphNode),
    ROW("cuGraphChildGraphNodeGetGraph", 10000, cuGraphChildGraphNodeGetGraph),
    ROW("cuGraphGetNodes", 10000, cuGraphGetNodes),
    ROW("cuGraphGetEdges", 10000, cuGraphGetEdges),
    ROW("cuGraphGetEdges", 12030, cuGraphGetEdges_v2),
    ROW("cuGraphAddDependencies", 10000, cuGraphAddDependencies),
    ROW("cuGraphAddDependencies", 12030, cuGraphAddDependencies_v2),
    ROW("cuGraphNodeGetType", 10000, cuGraphNodeGetType),
    ROW("cuGraphMemAllocNodeGetParams", 11040, cuGraphMemAllocNodeGetParams),
    ROW("cuGraphMemFreeNodeGetParams", 11040, cuGraphMemFreeNodeGetParams),
    ROW("cuGraphAddMemsetNode", 10000, cuGraphAddMemsetNode),
    ROW("cuGraphMemsetNodeGetParams", 10000, cuGraphMemsetNodeGetParams),
    ROW("cuGraphMemsetNodeSetParams", 10000, cuGraphMemsetNodeSetParams),
    ROW("cuGraphAddKernelNode", 10000, cuGraphAddKernelNode),
    ROW("cuGraphAddKernelNode", 12000, cuGraphAddKernelNode_v2),
    ROW("cuGraphKernelNodeGetParams", 10000, cuGraphKernelNodeGetParams),
    ROW("cuGraphKernelNodeGetParams", 12000, cuGraphKernelNodeGetParams_v2),
    ROW("cuGraphKernelNodeSetParams", 10000, cuGraphKernelNodeSetParams),
    ROW("cuGraphKernelNodeSetParams", 12000, cuGraphKernelNodeSetParams_v2),
    ROW("cuGraphAddMemcpyNode", 10000, cuGraphAddMemcpyNode),
    ROW("cuGraphMemcpyNodeGetParams", 10000, cuGraphMemcpyNodeGetParams),
    ROW("cuGraphMemcpyNodeSetParams", 10000, cuGraphMemcpyNodeSetParams),
    ROW("cuGraphAddEventRecordNode", 11010, cuGraphAddEventRecordNode),
    ROW("cuGraphAddEventWaitNode", 11010, cuGraphAddEventWaitNode),
    ROW("cuGraphEventRecordNodeGetEvent", 11010, cuGraphEventRecordNodeGetEvent),
    ROW("cuGraphEventRecordNodeSetEvent", 11010, cuGraphEventRecordNodeSetEvent),
    ROW("cuGraphEventWaitNodeGetEvent", 11010, cuGraphEventWaitNodeGetEvent),
    ROW("cuGraphEventWaitNodeSetEvent", 11010, cuGraphEventWaitNodeSetEvent),
    ROW("cuGraphNodeSetParams", 12020, cuGraphNodeSetParams),
    ROW("cuGraphNodeFindInClone", 10000, cuGraphNodeFindInClone),
    ROW("cuGraphExecEventRecordNodeSetEvent", 11010, cuGraphExecEventRecordNodeSetEvent),
    ROW("cuGraphExecEventWaitNodeSetEvent", 11010, cuGraphExecEventWaitNodeSetEvent),
    ROW("cuGraphExecChildGraphNodeSetParams", 11010, cuGraphExecChildGraphNodeSetParams),
    ROW("cuGraphExecKernelNodeSetParams", 10010, cuGraphExecKernelNodeSetParams),
    ROW("cuGraphExecKernelNodeSetParams", 12000, cuGraphExecKernelNodeSetParams_v2),
    ROW("cuGraphExecMemcpyNodeSetParams", 10020, cuGraphExecMemcpyNodeSetParams),
    ROW("cuGraphExecMemsetNodeSetParams", 10020, cuGraphExecMemsetNodeSetParams),
    ROW("cuGraphNodeSetEnabled", 11060, cuGraphNodeSetEnabled),
    ROW("cuGraphNodeGetEnabled", 11060, cuGraphNodeGetEnabled),
    ROW("cuGraphExecUpdate", 10020, cuGraphExecUpdate),
    ROW("cuGraphExecUpdate", 12000, cuGraphExecUpdate_v2),
    ROW("cuGraphExecNodeSetParams", 12020, cuGraphExecNodeSetParams),
    ROW("cuGraphExecDestroy", 10000, cuGraphExecDestroy),
    ROW("cuUserObjectCreate", 11030, cuUserObjectCreate),
    ROW("cuUserObjectRetain", 11030, cuUserObjectRetain),
    ROW("cuUserObjectRelease", 11030, cuUserObjectRelease),
    ROW("cuGraphRetainUserObject", 11030, cuGraphRetainUserObject),
    ROW("cuGraphReleaseUserObject", 11030, cuGraphReleaseUserObject),
    ROW("cuGraphLaunch", 10000, cuGraphLaunch),
    PTROW("cuGraphLaunch", 10000, cuGraphLaunch_ptsz),
    ROW("cuLaunchCooperativeKernel", 9000, cuLaunchCooperativeKernel),
    PTROW("cuLaunchCooperativeKernel", 9000, cuLaunchCooperativeKernel_ptsz),
    ROW("cuLaunchHostFunc", 10000, cuLaunchHostFunc),
    PTROW("cuLaunchHostFunc", 10000, cuLaunchHostFunc_ptsz),
    ROW("cuLaunchHostFunc", 13010, cuLaunchHostFunc_v2),
    PTROW("cuLaunchHostFunc", 13010, cuLaunchHostFunc_v2_ptsz),

    /* stream memory operations: the first ABI (8.0; 9.0 for 64-bit values), _v2 at 11.7 */
    ROW("cuStreamWaitValue32", 8000, cuStreamWaitValue32),
    PTROW("cuStreamWaitValue32", 8000, cuStreamWaitValue32_ptsz),
    ROW("cuStreamWaitValue32", 11070, cuStreamWaitValue32_v2),
    PTROW("cuStreamWaitValue32", 11070, cuStreamWaitValue32_v2_ptsz),
    ROW("cuStreamWriteValue32", 8000, cuStreamWriteValue32),
    PTROW("cuStreamWriteValue32", 8000, cuStreamWriteValue32_ptsz),
    ROW("cuStreamWriteValue32", 11070, cuStreamWriteValue32_v2),
    PTROW("cuStreamWriteValue32", 11070, cuStreamWriteValue32_v2_ptsz),
    ROW("cuStreamWaitValue64", 9000, cuStreamWaitValue64),
    PTROW("cuStreamWaitValue64", 9000, cuStreamWaitValue64_ptsz),
    ROW("cuStreamWaitValue64", 11070, cuStreamWaitValue64_v2),
    PTROW("cuStreamWaitValue64", 11070, cuStreamWaitValue64_v2_ptsz),
    ROW("cuStreamWriteValue64", 9000, cuStreamWriteValue64),
    PTROW("cuStreamWriteValue64", 9000, cuStreamWriteValue64_ptsz),
    ROW("cuStreamWriteValue64", 11070, cuStreamWriteValue64_v2),
    PTROW("cuStreamWriteValue64", 11070, cuStreamWriteValue64_v2_ptsz),
    ROW("cuStreamBatchMemOp", 8000, cuStreamBatchMemOp),
    PTROW("cuStreamBatchMemOp", 8000, cuStreamBatchMemOp_ptsz),
    ROW("cuStreamBatchMemOp", 11070, cuStreamBatchMemOp_v2),
    PTROW("cuStreamBatchMemOp", 11070, cuStreamBatchMemOp_v2_ptsz),

    /* events */
    ROW("cuEventCreate", 2000, cuEventCreate),
    ROW("cuEventDestroy", 2000, cuEventDestroy),
    ROW("cuEventDestroy", 4000, cuEventDestroy_v2),
    ROW("cuEventRecord", 2000, cuEventRecord),
    PTROW("cuEventRecord", 7000, cuEventRecord_ptsz),
    ROW("cuEventRecordWithFlags", 11010, cuEventRecordWithFlags),
    PTROW("cuEventRecordWithFlags", 11010, cuEventRecordWithFlags_ptsz),
    ROW("cuEventQuery", 2000, cuEventQuery),
    ROW("cuEventSynchronize", 2000, cuEventSynchronize),
    ROW("cuEventElapsedTime", 2000, cuEventElapsedTime),
    ROW("cuEventElapsedTime", 12080, cuEventElapsedTime_v2),

    /* modules, libraries, kernels */
    ROW("cuModuleLoadData", 2000, cuModuleLoadData),
    ROW("cuModuleLoadDataEx", 2010, cuModuleLoadDataEx),
    ROW("cuModuleUnload", 2000, cuModuleUnload),
    ROW("cuModuleGetFunction", 2000, cuModuleGetFunction),
    ROW("cuModuleGetLoadingMode", 11070, cuModuleGetLoadingMode),
    ROW("cuLibraryLoadData", 12000, cuLibraryLoadData),
    ROW("cuLibraryUnload", 12000, cuLibraryUnload),
    ROW("cuLibraryGetKernel", 12000, cuLibraryGetKernel),
    ROW("cuKernelGetFunction", 12000, cuKernelGetFunction),
    ROW("cuFuncGetParamInfo", 12040, cuFuncGetParamInfo),
    ROW("cuKernelGetParamInfo", 12040, cuKernelGetParamInfo),
    ROW("cuFuncGetName", 12030, cuFuncGetName),
    ROW("cuKernelGetName", 12030, cuKernelGetName),
    ROW("cuLaunchKernel", 4000, cuLaunchKernel),
    PTROW("cuLaunchKernel", 7000, cuLaunchKernel_ptsz),
    ROW("cuLaunchKernelEx", 11060, cuLaunchKernelEx),
    PTROW("cuLaunchKernelEx", 11060, cuLaunchKernelEx_ptsz),
};

#define NROWS (sizeof table / sizeof table[0])

bool resolver_exports(const char *symbol) {
    for (size_t i = 0; i < NROWS; i++)
        if (strcmp(table[i].symbol, symbol) == 0) return true;
    return false;
}

static const struct entry *best_row(const char *name, int version, bool per_thread, bool *known) {
    const struct entry *best = NULL;
    for (size_t i = 0; i < NROWS; i++) {
        const struct entry *e = &table[i];
        if (strcmp(e->base, name) != 0) continue;
        *known = true;
        if (e->per_thread != per_thread || e->minver > version) continue;
        if (!best || e->minver > best->minver) best = e;
    }
    return best;
}

/* Flag 0 means the legacy stream, or the per-thread stream for the _ptsz resolver. */
static CUresult resolve(const char *symbol, void **pfn, int version, cuuint64_t flags,
                        CUdriverProcAddressQueryResult *status, bool ptsz_default) {
    if (!pfn) return CUDA_ERROR_INVALID_VALUE;
    *pfn = NULL;
    if (!symbol) return CUDA_ERROR_INVALID_VALUE;
    if ((flags & ~(cuuint64_t)3) || flags == 3) return CUDA_ERROR_INVALID_VALUE;
    if (version > g_cfg.driver_version) return CUDA_ERROR_INVALID_VALUE;
    bool per_thread = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) ||
                      (ptsz_default && flags == CU_GET_PROC_ADDRESS_DEFAULT);
    bool known = false;
    const struct entry *e = per_thread ? best_row(symbol, version, true, &known) : NULL;
    if (!e) e = best_row(symbol, version, false, &known);
    if (!e) {
        if (status)
            *status = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                            : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = e->fn;
    if (status) *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                      cuuint64_t flags) {
    API_ENTER_NOINIT();
    return resolve(symbol, pfn, cudaVersion, flags, NULL, false);
}

SIMCUDA_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                         cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *symbolStatus) {
    API_ENTER_NOINIT();
    return resolve(symbol, pfn, cudaVersion, flags, symbolStatus, false);
}

SIMCUDA_API CUresult cuGetProcAddress_v2_ptsz(const char *symbol, void **pfn, int cudaVersion,
                                              cuuint64_t flags,
                                              CUdriverProcAddressQueryResult *symbolStatus) {
    API_ENTER_NOINIT();
    return resolve(symbol, pfn, cudaVersion, flags, symbolStatus, true);
}
