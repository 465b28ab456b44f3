/*
 * simcuda.h: the declarations of the simulated CUDA driver (libcuda.so.1) and the simulated
 * CUDA runtime (libcudart.so.12) that gpuleak's tests run against.
 *
 * Written for this project from the public CUDA Driver and Runtime API documentation; it is
 * not NVIDIA's cuda.h and declares only what the simulator implements. Unlike cuda.h it has no
 * macros that rename `cuMemAlloc` to `cuMemAlloc_v2`: every client calls the exact exported
 * symbol it means, so a test always knows which entry point an interposer has to catch.
 */
#ifndef SIMCUDA_H
#define SIMCUDA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define SIMCUDA_API __attribute__((visibility("default")))

/* ---------------------------------------------------------------------------------------- */
/* Driver API types                                                                          */
/* ---------------------------------------------------------------------------------------- */

typedef uint32_t cuuint32_t;
typedef uint64_t cuuint64_t;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef unsigned int CUdeviceptr_v1; /* the 32-bit pointer of the pre-3.2 ABI */
typedef unsigned long long CUmemGenericAllocationHandle;

typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUlib_st *CUlibrary;
typedef struct CUkern_st *CUkernel;
typedef struct CUarray_st *CUarray;
typedef struct CUmipmappedArray_st *CUmipmappedArray;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef struct CUmemPoolHandle_st *CUmemoryPool;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;
typedef struct CUgraphNode_st *CUgraphNode;
typedef struct CUgreenCtx_st *CUgreenCtx;
typedef struct CUuserObject_st *CUuserObject;

#define CU_STREAM_LEGACY ((CUstream)0x1)
#define CU_STREAM_PER_THREAD ((CUstream)0x2)

typedef enum CUresult_enum {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_ALREADY_MAPPED = 208,
    CUDA_ERROR_NOT_MAPPED = 211,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_ILLEGAL_STATE = 401,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE = 708,
    CUDA_ERROR_CONTEXT_IS_DESTROYED = 709,
    CUDA_ERROR_ASSERT = 710,
    CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED = 712,
    CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED = 713,
    CUDA_ERROR_NOT_PERMITTED = 800,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
    CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901,
    CUDA_ERROR_STREAM_CAPTURE_UNMATCHED = 903,
    CUDA_ERROR_STREAM_CAPTURE_ISOLATION = 905,
    CUDA_ERROR_STREAM_CAPTURE_IMPLICIT = 906,
    CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE = 910,
    CUDA_ERROR_UNKNOWN = 999
} CUresult;

typedef enum CUdevice_attribute_enum {
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 1,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X = 2,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y = 3,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z = 4,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X = 5,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y = 6,
    CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z = 7,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK = 8,
    CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY = 9,
    CU_DEVICE_ATTRIBUTE_WARP_SIZE = 10,
    CU_DEVICE_ATTRIBUTE_MAX_PITCH = 11,
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK = 12,
    CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13,
    CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT = 14,
    CU_DEVICE_ATTRIBUTE_GPU_OVERLAP = 15,
    CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16,
    CU_DEVICE_ATTRIBUTE_KERNEL_EXEC_TIMEOUT = 17,
    CU_DEVICE_ATTRIBUTE_INTEGRATED = 18,
    CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY = 19,
    CU_DEVICE_ATTRIBUTE_COMPUTE_MODE = 20,
    CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS = 31,
    CU_DEVICE_ATTRIBUTE_ECC_ENABLED = 32,
    CU_DEVICE_ATTRIBUTE_PCI_BUS_ID = 33,
    CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID = 34,
    CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE = 36,
    CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH = 37,
    CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38,
    CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR = 39,
    CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT = 40,
    CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING = 41,
    CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID = 50,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75,
    CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76,
    CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED = 78,
    CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED = 79,
    CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED = 80,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR = 81,
    CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR = 82,
    CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY = 83,
    CU_DEVICE_ATTRIBUTE_MULTI_GPU_BOARD = 84,
    CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS = 88,
    CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS = 89,
    CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED = 90,
    CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM = 91,
    CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH = 95,
    CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97,
    CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED = 99,
    CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = 102,
    CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = 103,
    CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR = 106,
    CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK = 111,
    CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED = 113,
    CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED = 115,
    CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES = 119,
    CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH = 120
} CUdevice_attribute;

typedef struct CUuuid_st {
    char bytes[16];
} CUuuid;

#define CU_IPC_HANDLE_SIZE 64
typedef struct CUipcMemHandle_st {
    char reserved[CU_IPC_HANDLE_SIZE];
} CUipcMemHandle;
#define CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS 0x1

/* Context creation flags (only stored and reported back). */
#define CU_CTX_SCHED_AUTO 0x00
#define CU_CTX_MAP_HOST 0x08
#define CU_CTX_FLAGS_MASK 0xff

typedef struct CUexecAffinityParam_st CUexecAffinityParam; /* accepted, never read */
typedef struct CUctxCreateParams_st {
    CUexecAffinityParam *execAffinityParams;
    int numExecAffinityParams;
    void *cigParams;
} CUctxCreateParams;

/* Streams, events, capture. */
#define CU_STREAM_DEFAULT 0x0
#define CU_STREAM_NON_BLOCKING 0x1
#define CU_EVENT_DEFAULT 0x0
#define CU_EVENT_BLOCKING_SYNC 0x1
#define CU_EVENT_DISABLE_TIMING 0x2
#define CU_EVENT_INTERPROCESS 0x4
#define CU_EVENT_RECORD_DEFAULT 0x0
#define CU_EVENT_RECORD_EXTERNAL 0x1
#define CU_EVENT_WAIT_DEFAULT 0x0
#define CU_EVENT_WAIT_EXTERNAL 0x1

typedef void (*CUstreamCallback)(CUstream hStream, CUresult status, void *userData);
/* A host function queued with cuLaunchHostFunc; it must not call CUDA. */
typedef void (*CUhostFn)(void *userData);

typedef enum CUstreamCaptureStatus_enum {
    CU_STREAM_CAPTURE_STATUS_NONE = 0,
    CU_STREAM_CAPTURE_STATUS_ACTIVE = 1,
    CU_STREAM_CAPTURE_STATUS_INVALIDATED = 2
} CUstreamCaptureStatus;

typedef enum CUstreamCaptureMode_enum {
    CU_STREAM_CAPTURE_MODE_GLOBAL = 0,
    CU_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1,
    CU_STREAM_CAPTURE_MODE_RELAXED = 2
} CUstreamCaptureMode;

/* Host memory flags. */
#define CU_MEMHOSTALLOC_PORTABLE 0x01
#define CU_MEMHOSTALLOC_DEVICEMAP 0x02
#define CU_MEMHOSTALLOC_WRITECOMBINED 0x04
#define CU_MEMHOSTREGISTER_PORTABLE 0x01
#define CU_MEMHOSTREGISTER_DEVICEMAP 0x02
#define CU_MEMHOSTREGISTER_IOMEMORY 0x04
#define CU_MEMHOSTREGISTER_READ_ONLY 0x08
#define CU_MEM_ATTACH_GLOBAL 0x1
#define CU_MEM_ATTACH_HOST 0x2

/* Virtual memory management and pools. */
typedef enum CUmemAllocationType_enum {
    CU_MEM_ALLOCATION_TYPE_INVALID = 0,
    CU_MEM_ALLOCATION_TYPE_PINNED = 1
} CUmemAllocationType;

typedef enum CUmemAllocationHandleType_enum {
    CU_MEM_HANDLE_TYPE_NONE = 0,
    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1,
    CU_MEM_HANDLE_TYPE_WIN32 = 2,
    CU_MEM_HANDLE_TYPE_WIN32_KMT = 4
} CUmemAllocationHandleType;

typedef enum CUmemLocationType_enum {
    CU_MEM_LOCATION_TYPE_INVALID = 0,
    CU_MEM_LOCATION_TYPE_DEVICE = 1,
    CU_MEM_LOCATION_TYPE_HOST = 2,
    CU_MEM_LOCATION_TYPE_HOST_NUMA = 3,
    CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT = 4
} CUmemLocationType;

/* cuMemPrefetchAsync's device ordinal for the host. */
#define CU_DEVICE_CPU ((CUdevice)-1)

typedef enum CUmemAccess_flags_enum {
    CU_MEM_ACCESS_FLAGS_PROT_NONE = 0,
    CU_MEM_ACCESS_FLAGS_PROT_READ = 1,
    CU_MEM_ACCESS_FLAGS_PROT_READWRITE = 3
} CUmemAccess_flags;

typedef enum CUmemAllocationGranularity_flags_enum {
    CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0,
    CU_MEM_ALLOC_GRANULARITY_RECOMMENDED = 1
} CUmemAllocationGranularity_flags;

typedef struct CUmemLocation_st {
    CUmemLocationType type;
    int id;
} CUmemLocation;

typedef struct CUmemAllocationProp_st {
    CUmemAllocationType type;
    CUmemAllocationHandleType requestedHandleTypes;
    CUmemLocation location;
    void *win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
} CUmemAllocationProp;

typedef struct CUmemAccessDesc_st {
    CUmemLocation location;
    CUmemAccess_flags flags;
} CUmemAccessDesc;

typedef enum CUmemPool_attribute_enum {
    CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES = 1,
    CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC = 2,
    CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES = 3,
    CU_MEMPOOL_ATTR_RELEASE_THRESHOLD = 4,
    CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT = 5,
    CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH = 6,
    CU_MEMPOOL_ATTR_USED_MEM_CURRENT = 7,
    CU_MEMPOOL_ATTR_USED_MEM_HIGH = 8
} CUmemPool_attribute;

typedef struct CUmemPoolProps_st {
    CUmemAllocationType allocType;
    CUmemAllocationHandleType handleTypes;
    CUmemLocation location;
    void *win32SecurityAttributes;
    size_t maxSize;
    unsigned short usage;
    unsigned char reserved[54];
} CUmemPoolProps;

/* Export data of one pool allocation (cuMemPoolExportPointer): 64 opaque bytes. */
typedef struct CUmemPoolPtrExportData_st {
    unsigned char reserved[64];
} CUmemPoolPtrExportData;

/* Arrays. */
typedef enum CUarray_format_enum {
    CU_AD_FORMAT_UNSIGNED_INT8 = 0x01,
    CU_AD_FORMAT_UNSIGNED_INT16 = 0x02,
    CU_AD_FORMAT_UNSIGNED_INT32 = 0x03,
    CU_AD_FORMAT_SIGNED_INT8 = 0x08,
    CU_AD_FORMAT_SIGNED_INT16 = 0x09,
    CU_AD_FORMAT_SIGNED_INT32 = 0x0a,
    CU_AD_FORMAT_HALF = 0x10,
    CU_AD_FORMAT_FLOAT = 0x20
} CUarray_format;

typedef struct CUDA_ARRAY_DESCRIPTOR_st {
    size_t Width;
    size_t Height;
    CUarray_format Format;
    unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_st {
    size_t Width;
    size_t Height;
    size_t Depth;
    CUarray_format Format;
    unsigned int NumChannels;
    unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR;

/* CUDA_ARRAY3D_DESCRIPTOR Flags (the simulator stores them; only the layered and cubemap
 * bits change anything: a mipmapped array's layer count is not halved, see simcuda/README.md). */
#define CUDA_ARRAY3D_LAYERED 0x01
#define CUDA_ARRAY3D_SURFACE_LDST 0x02
#define CUDA_ARRAY3D_CUBEMAP 0x04
#define CUDA_ARRAY3D_TEXTURE_GATHER 0x08

/* The pre-3.2 descriptors with 32-bit extents, only for the v1 entry points. */
typedef struct CUDA_ARRAY_DESCRIPTOR_v1_st {
    unsigned int Width;
    unsigned int Height;
    CUarray_format Format;
    unsigned int NumChannels;
} CUDA_ARRAY_DESCRIPTOR_v1;

typedef struct CUDA_ARRAY3D_DESCRIPTOR_v1_st {
    unsigned int Width;
    unsigned int Height;
    unsigned int Depth;
    CUarray_format Format;
    unsigned int NumChannels;
    unsigned int Flags;
} CUDA_ARRAY3D_DESCRIPTOR_v1;

/* 2D and 3D copies: each side is host, device, array or unified memory. */
typedef enum CUmemorytype_enum {
    CU_MEMORYTYPE_HOST = 0x01,
    CU_MEMORYTYPE_DEVICE = 0x02,
    CU_MEMORYTYPE_ARRAY = 0x03,
    CU_MEMORYTYPE_UNIFIED = 0x04
} CUmemorytype;

typedef struct CUDA_MEMCPY2D_st {
    size_t srcXInBytes;
    size_t srcY;
    CUmemorytype srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    CUarray srcArray;
    size_t srcPitch;
    size_t dstXInBytes;
    size_t dstY;
    CUmemorytype dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    CUarray dstArray;
    size_t dstPitch;
    size_t WidthInBytes;
    size_t Height;
} CUDA_MEMCPY2D;

typedef struct CUDA_MEMCPY3D_st {
    size_t srcXInBytes;
    size_t srcY;
    size_t srcZ;
    size_t srcLOD;
    CUmemorytype srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    CUarray srcArray;
    void *reserved0;
    size_t srcPitch;
    size_t srcHeight;
    size_t dstXInBytes;
    size_t dstY;
    size_t dstZ;
    size_t dstLOD;
    CUmemorytype dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    CUarray dstArray;
    void *reserved1;
    size_t dstPitch;
    size_t dstHeight;
    size_t WidthInBytes;
    size_t Height;
    size_t Depth;
} CUDA_MEMCPY3D;

/* A 3D copy between contexts: CUDA_MEMCPY3D's layout with each side's context where it has
 * its reserved fields. */
typedef struct CUDA_MEMCPY3D_PEER_st {
    size_t srcXInBytes;
    size_t srcY;
    size_t srcZ;
    size_t srcLOD;
    CUmemorytype srcMemoryType;
    const void *srcHost;
    CUdeviceptr srcDevice;
    CUarray srcArray;
    CUcontext srcContext;
    size_t srcPitch;
    size_t srcHeight;
    size_t dstXInBytes;
    size_t dstY;
    size_t dstZ;
    size_t dstLOD;
    CUmemorytype dstMemoryType;
    void *dstHost;
    CUdeviceptr dstDevice;
    CUarray dstArray;
    CUcontext dstContext;
    size_t dstPitch;
    size_t dstHeight;
    size_t WidthInBytes;
    size_t Height;
    size_t Depth;
} CUDA_MEMCPY3D_PEER;

/* Modules, libraries, kernels. */
typedef int CUjit_option;
typedef int CUlibraryOption;
typedef enum CUmoduleLoadingMode_enum {
    CU_MODULE_EAGER_LOADING = 1,
    CU_MODULE_LAZY_LOADING = 2
} CUmoduleLoadingMode;
/* cuLaunchKernelEx's configuration. Attributes are accepted and ignored by the simulator. */
typedef enum CUlaunchAttributeID_enum {
    CU_LAUNCH_ATTRIBUTE_IGNORE = 0,
    CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2,
    CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 4,
    CU_LAUNCH_ATTRIBUTE_PRIORITY = 8
} CUlaunchAttributeID;

typedef union CUlaunchAttributeValue_union {
    char pad[64];
    int cooperative;
    int priority;
    struct {
        unsigned int x, y, z;
    } clusterDim;
} CUlaunchAttributeValue;

typedef struct CUlaunchAttribute_st {
    CUlaunchAttributeID id;
    char pad[8 - sizeof(CUlaunchAttributeID)];
    CUlaunchAttributeValue value;
} CUlaunchAttribute;

typedef struct CUlaunchConfig_st {
    unsigned int gridDimX;
    unsigned int gridDimY;
    unsigned int gridDimZ;
    unsigned int blockDimX;
    unsigned int blockDimY;
    unsigned int blockDimZ;
    unsigned int sharedMemBytes;
    CUstream hStream;
    CUlaunchAttribute *attrs;
    unsigned int numAttrs;
} CUlaunchConfig;

#define CU_LAUNCH_PARAM_END ((void *)0x00)
#define CU_LAUNCH_PARAM_BUFFER_POINTER ((void *)0x01)
#define CU_LAUNCH_PARAM_BUFFER_SIZE ((void *)0x02)

/* The versioned resolver. */
typedef enum CUdriverProcAddressQueryResult_enum {
    CU_GET_PROC_ADDRESS_SUCCESS = 0,
    CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND = 1,
    CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT = 2
} CUdriverProcAddressQueryResult;
#define CU_GET_PROC_ADDRESS_DEFAULT 0x0
#define CU_GET_PROC_ADDRESS_LEGACY_STREAM 0x1
#define CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM 0x2

/* ---------------------------------------------------------------------------------------- */
/* Driver API entry points (every one an exported symbol of libcuda.so.1)                     */
/* ---------------------------------------------------------------------------------------- */

/* Initialisation, versions, errors, resolvers. */
SIMCUDA_API CUresult cuInit(unsigned int Flags);
SIMCUDA_API CUresult cuDriverGetVersion(int *driverVersion);
SIMCUDA_API CUresult cuGetErrorString(CUresult error, const char **pStr);
SIMCUDA_API CUresult cuGetErrorName(CUresult error, const char **pStr);
SIMCUDA_API CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion,
                                      cuuint64_t flags);
SIMCUDA_API CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int cudaVersion,
                                         cuuint64_t flags,
                                         CUdriverProcAddressQueryResult *symbolStatus);
SIMCUDA_API CUresult cuGetProcAddress_v2_ptsz(const char *symbol, void **pfn, int cudaVersion,
                                              cuuint64_t flags,
                                              CUdriverProcAddressQueryResult *symbolStatus);
SIMCUDA_API CUresult cuGetExportTable(const void **ppExportTable, const void *pExportTableId);

/* Devices. */
SIMCUDA_API CUresult cuDeviceGet(CUdevice *device, int ordinal);
SIMCUDA_API CUresult cuDeviceGetCount(int *count);
SIMCUDA_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
SIMCUDA_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
SIMCUDA_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev);
SIMCUDA_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev);
SIMCUDA_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev);
SIMCUDA_API CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev);
SIMCUDA_API CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev);
SIMCUDA_API CUresult cuDeviceGetDefaultMemPool(CUmemoryPool *pool_out, CUdevice dev);
SIMCUDA_API CUresult cuDeviceGetMemPool(CUmemoryPool *pool, CUdevice dev);
SIMCUDA_API CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool);

/* Primary contexts. The v1 and v2 entry points behave the same in the simulator. */
SIMCUDA_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
SIMCUDA_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev);
SIMCUDA_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
SIMCUDA_API CUresult cuDevicePrimaryCtxReset(CUdevice dev);
SIMCUDA_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev);
SIMCUDA_API CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags);
SIMCUDA_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags);
SIMCUDA_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active);

/* Contexts. */
SIMCUDA_API CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev);
SIMCUDA_API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev);
SIMCUDA_API CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray,
                                    int numParams, unsigned int flags, CUdevice dev);
SIMCUDA_API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                    unsigned int flags, CUdevice dev);
SIMCUDA_API CUresult cuCtxDestroy(CUcontext ctx);
SIMCUDA_API CUresult cuCtxDestroy_v2(CUcontext ctx);
SIMCUDA_API CUresult cuCtxGetCurrent(CUcontext *pctx);
SIMCUDA_API CUresult cuCtxSetCurrent(CUcontext ctx);
SIMCUDA_API CUresult cuCtxPushCurrent(CUcontext ctx);
SIMCUDA_API CUresult cuCtxPushCurrent_v2(CUcontext ctx);
SIMCUDA_API CUresult cuCtxPopCurrent(CUcontext *pctx);
SIMCUDA_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx);
SIMCUDA_API CUresult cuCtxGetDevice(CUdevice *device);
SIMCUDA_API CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx);
SIMCUDA_API CUresult cuCtxSynchronize(void);
SIMCUDA_API CUresult cuCtxSynchronize_v2(CUcontext ctx);
SIMCUDA_API CUresult cuCtxRecordEvent(CUcontext hCtx, CUevent hEvent);
SIMCUDA_API CUresult cuCtxWaitEvent(CUcontext hCtx, CUevent hEvent);
SIMCUDA_API CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority);
SIMCUDA_API CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version);
SIMCUDA_API CUresult cuCtxGetFlags(unsigned int *flags);
SIMCUDA_API CUresult cuCtxSetFlags(unsigned int flags);
SIMCUDA_API CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId);

/* Device memory. */
SIMCUDA_API CUresult cuMemGetInfo_v2(size_t *free, size_t *total);
SIMCUDA_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
SIMCUDA_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
                                        size_t Height, unsigned int ElementSizeBytes);
SIMCUDA_API CUresult cuMemFree_v2(CUdeviceptr dptr);
SIMCUDA_API CUresult cuMemGetAddressRange_v2(CUdeviceptr *pbase, size_t *psize, CUdeviceptr dptr);
/* The pointer attributes the simulator models, with their public numbers; the others are
 * CUDA_ERROR_NOT_SUPPORTED. Only device memory of the heap (cuMemAlloc, pitched and live
 * stream-ordered allocations) has attributes here. */
typedef enum CUpointer_attribute_enum {
    CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL = 9,
    CU_POINTER_ATTRIBUTE_RANGE_START_ADDR = 11,
    CU_POINTER_ATTRIBUTE_RANGE_SIZE = 12,
    CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE = 17
} CUpointer_attribute;
SIMCUDA_API CUresult cuPointerGetAttribute(void *data, CUpointer_attribute attribute, CUdeviceptr ptr);
SIMCUDA_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags);

/* Host memory. */
SIMCUDA_API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize);
SIMCUDA_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags);
SIMCUDA_API CUresult cuMemFreeHost(void *p);
SIMCUDA_API CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr *pdptr, void *p, unsigned int Flags);
SIMCUDA_API CUresult cuMemHostGetFlags(unsigned int *pFlags, void *p);
SIMCUDA_API CUresult cuMemHostRegister(void *p, size_t bytesize, unsigned int Flags);
SIMCUDA_API CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags);
SIMCUDA_API CUresult cuMemHostUnregister(void *p);

/* Copies and memsets: _ptds (synchronous) and _ptsz (stream) are the per-thread variants. */
SIMCUDA_API CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount);
SIMCUDA_API CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                   CUstream hStream);
SIMCUDA_API CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount,
                                        CUstream hStream);
SIMCUDA_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void *srcHost, size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void *srcHost,
                                          size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyDtoH_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyDtoH_v2_ptds(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                     size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                          size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void *srcHost,
                                          size_t ByteCount, CUstream hStream);
SIMCUDA_API CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void *srcHost,
                                               size_t ByteCount, CUstream hStream);
SIMCUDA_API CUresult cuMemcpyDtoHAsync_v2(void *dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                          CUstream hStream);
SIMCUDA_API CUresult cuMemcpyDtoHAsync_v2_ptsz(void *dstHost, CUdeviceptr srcDevice,
                                               size_t ByteCount, CUstream hStream);
SIMCUDA_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                          size_t ByteCount, CUstream hStream);
SIMCUDA_API CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice,
                                               size_t ByteCount, CUstream hStream);
SIMCUDA_API CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D *pCopy);
SIMCUDA_API CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D *pCopy);
SIMCUDA_API CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D *pCopy);
SIMCUDA_API CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D *pCopy);
SIMCUDA_API CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D *pCopy, CUstream hStream);
SIMCUDA_API CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D *pCopy, CUstream hStream);
SIMCUDA_API CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D *pCopy);
SIMCUDA_API CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D *pCopy);
SIMCUDA_API CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D *pCopy, CUstream hStream);
SIMCUDA_API CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D *pCopy, CUstream hStream);

/* Prefetches and discards of managed memory (prefetch.c). */
SIMCUDA_API CUresult cuMemPrefetchAsync(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                        CUstream hStream);
SIMCUDA_API CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr devPtr, size_t count, CUdevice dstDevice,
                                             CUstream hStream);
SIMCUDA_API CUresult cuMemPrefetchAsync_v2(CUdeviceptr devPtr, size_t count, CUmemLocation location,
                                           unsigned int flags, CUstream hStream);
SIMCUDA_API CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr devPtr, size_t count,
                                                CUmemLocation location, unsigned int flags,
                                                CUstream hStream);
SIMCUDA_API CUresult cuMemPrefetchBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                             CUmemLocation *prefetchLocs, size_t *prefetchLocIdxs,
                                             size_t numPrefetchLocs, unsigned long long flags,
                                             CUstream hStream);
SIMCUDA_API CUresult cuMemPrefetchBatchAsync_ptsz(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                                  CUmemLocation *prefetchLocs,
                                                  size_t *prefetchLocIdxs, size_t numPrefetchLocs,
                                                  unsigned long long flags, CUstream hStream);
SIMCUDA_API CUresult cuMemDiscardBatchAsync(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                            unsigned long long flags, CUstream hStream);
SIMCUDA_API CUresult cuMemDiscardBatchAsync_ptsz(CUdeviceptr *dptrs, size_t *sizes, size_t count,
                                                 unsigned long long flags, CUstream hStream);
SIMCUDA_API CUresult cuMemDiscardAndPrefetchBatchAsync(CUdeviceptr *dptrs, size_t *sizes,
                                                       size_t count, CUmemLocation *prefetchLocs,
                                                       size_t *prefetchLocIdxs,
                                                       size_t numPrefetchLocs,
                                                       unsigned long long flags, CUstream hStream);
SIMCUDA_API CUresult cuMemDiscardAndPrefetchBatchAsync_ptsz(
    CUdeviceptr *dptrs, size_t *sizes, size_t count, CUmemLocation *prefetchLocs,
    size_t *prefetchLocIdxs, size_t numPrefetchLocs, unsigned long long flags, CUstream hStream);

/* Copies to and from 1D arrays (arraycopy.c). */
SIMCUDA_API CUresult cuMemcpyHtoA_v2(CUarray dstArray, size_t dstOffset, const void *srcHost,
                                     size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyHtoA_v2_ptds(CUarray dstArray, size_t dstOffset, const void *srcHost,
                                          size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyAtoH_v2(void *dstHost, CUarray srcArray, size_t srcOffset,
                                     size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyAtoH_v2_ptds(void *dstHost, CUarray srcArray, size_t srcOffset,
                                          size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyAtoA_v2(CUarray dstArray, size_t dstOffset, CUarray srcArray,
                                     size_t srcOffset, size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyAtoA_v2_ptds(CUarray dstArray, size_t dstOffset, CUarray srcArray,
                                          size_t srcOffset, size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyDtoA_v2(CUarray dstArray, size_t dstOffset, CUdeviceptr srcDevice,
                                     size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyDtoA_v2_ptds(CUarray dstArray, size_t dstOffset,
                                          CUdeviceptr srcDevice, size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyAtoD_v2(CUdeviceptr dstDevice, CUarray srcArray, size_t srcOffset,
                                     size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyAtoD_v2_ptds(CUdeviceptr dstDevice, CUarray srcArray,
                                          size_t srcOffset, size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyHtoAAsync_v2(CUarray dstArray, size_t dstOffset, const void *srcHost,
                                          size_t ByteCount, CUstream hStream);
SIMCUDA_API CUresult cuMemcpyHtoAAsync_v2_ptsz(CUarray dstArray, size_t dstOffset,
                                               const void *srcHost, size_t ByteCount,
                                               CUstream hStream);
SIMCUDA_API CUresult cuMemcpyAtoHAsync_v2(void *dstHost, CUarray srcArray, size_t srcOffset,
                                          size_t ByteCount, CUstream hStream);
SIMCUDA_API CUresult cuMemcpyAtoHAsync_v2_ptsz(void *dstHost, CUarray srcArray, size_t srcOffset,
                                               size_t ByteCount, CUstream hStream);
SIMCUDA_API CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext,
                                  CUdeviceptr srcDevice, CUcontext srcContext, size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext,
                                       CUdeviceptr srcDevice, CUcontext srcContext,
                                       size_t ByteCount);
SIMCUDA_API CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext,
                                       CUdeviceptr srcDevice, CUcontext srcContext,
                                       size_t ByteCount, CUstream hStream);
SIMCUDA_API CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext,
                                            CUdeviceptr srcDevice, CUcontext srcContext,
                                            size_t ByteCount, CUstream hStream);
SIMCUDA_API CUresult cuMemcpy3DPeer(const CUDA_MEMCPY3D_PEER *pCopy);
SIMCUDA_API CUresult cuMemcpy3DPeer_ptds(const CUDA_MEMCPY3D_PEER *pCopy);
SIMCUDA_API CUresult cuMemcpy3DPeerAsync(const CUDA_MEMCPY3D_PEER *pCopy, CUstream hStream);
SIMCUDA_API CUresult cuMemcpy3DPeerAsync_ptsz(const CUDA_MEMCPY3D_PEER *pCopy,
                                              CUstream hStream);

/* Batches of copies (12.8; 13.0's _v2 has no failure index): copy i moves sizes[i] bytes from
 * srcs[i] to dsts[i]; attrs[j] applies from copy attrsIdxs[j] on (attrsIdxs[0] is 0 and the
 * indices increase). Every copy is checked before any runs; a failed check sets *failIdx to the
 * copy's index (SIZE_MAX when no copy failed, or for an error of the batch itself). */
typedef enum CUmemcpySrcAccessOrder_enum {
    CU_MEMCPY_SRC_ACCESS_ORDER_INVALID = 0,
    CU_MEMCPY_SRC_ACCESS_ORDER_STREAM = 1,
    CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL = 2,
    CU_MEMCPY_SRC_ACCESS_ORDER_ANY = 3
} CUmemcpySrcAccessOrder;

typedef struct CUmemcpyAttributes_st {
    CUmemcpySrcAccessOrder srcAccessOrder;
    CUmemLocation srcLocHint;
    CUmemLocation dstLocHint;
    unsigned int flags;
} CUmemcpyAttributes;

SIMCUDA_API CUresult cuMemcpyBatchAsync(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                        size_t count, CUmemcpyAttributes *attrs,
                                        size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,
                                        CUstream hStream);
SIMCUDA_API CUresult cuMemcpyBatchAsync_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                             size_t count, CUmemcpyAttributes *attrs,
                                             size_t *attrsIdxs, size_t numAttrs, size_t *failIdx,
                                             CUstream hStream);
SIMCUDA_API CUresult cuMemcpyBatchAsync_v2(CUdeviceptr *dsts, CUdeviceptr *srcs, size_t *sizes,
                                           size_t count, CUmemcpyAttributes *attrs,
                                           size_t *attrsIdxs, size_t numAttrs, CUstream hStream);
SIMCUDA_API CUresult cuMemcpyBatchAsync_v2_ptsz(CUdeviceptr *dsts, CUdeviceptr *srcs,
                                                size_t *sizes, size_t count,
                                                CUmemcpyAttributes *attrs, size_t *attrsIdxs,
                                                size_t numAttrs, CUstream hStream);
/* One copy with a batch copy's attributes (13.2). */
SIMCUDA_API CUresult cuMemcpyWithAttributesAsync(CUdeviceptr dst, CUdeviceptr src, size_t size,
                                                 CUmemcpyAttributes *attr, CUstream hStream);
SIMCUDA_API CUresult cuMemcpyWithAttributesAsync_ptsz(CUdeviceptr dst, CUdeviceptr src,
                                                      size_t size, CUmemcpyAttributes *attr,
                                                      CUstream hStream);

/* Batches of 3D copies (12.8; 13.0's _v2 has no failure index) and one such copy with
 * attributes (13.2). Extents count elements (a byte each between two pointers); a pointer
 * operand's row length and layer height are in elements, 0 meaning packed. The simulator copies
 * no arrays: an array operand is CUDA_ERROR_NOT_SUPPORTED. */
typedef enum CUmemcpy3DOperandType_enum {
    CU_MEMCPY_OPERAND_TYPE_POINTER = 1,
    CU_MEMCPY_OPERAND_TYPE_ARRAY = 2
} CUmemcpy3DOperandType;

typedef struct CUoffset3D_st {
    size_t x, y, z;
} CUoffset3D;

typedef struct CUextent3D_st {
    size_t width, height, depth;
} CUextent3D;

typedef struct CUmemcpy3DOperand_st {
    CUmemcpy3DOperandType type;
    union {
        struct {
            CUdeviceptr ptr;
            size_t rowLength;
            size_t layerHeight;
            CUmemLocation locHint;
        } ptr;
        struct {
            CUarray array;
            CUoffset3D offset;
        } array;
    } op;
} CUmemcpy3DOperand;

typedef struct CUDA_MEMCPY3D_BATCH_OP_st {
    CUmemcpy3DOperand src;
    CUmemcpy3DOperand dst;
    CUextent3D extent;
    CUmemcpySrcAccessOrder srcAccessOrder;
    unsigned int flags;
} CUDA_MEMCPY3D_BATCH_OP;

SIMCUDA_API CUresult cuMemcpy3DBatchAsync(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                          size_t *failIdx, unsigned long long flags,
                                          CUstream hStream);
SIMCUDA_API CUresult cuMemcpy3DBatchAsync_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                               size_t *failIdx, unsigned long long flags,
                                               CUstream hStream);
SIMCUDA_API CUresult cuMemcpy3DBatchAsync_v2(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                             unsigned long long flags, CUstream hStream);
SIMCUDA_API CUresult cuMemcpy3DBatchAsync_v2_ptsz(size_t numOps, CUDA_MEMCPY3D_BATCH_OP *opList,
                                                  unsigned long long flags, CUstream hStream);
SIMCUDA_API CUresult cuMemcpy3DWithAttributesAsync(CUDA_MEMCPY3D_BATCH_OP *op,
                                                   unsigned long long flags, CUstream hStream);
SIMCUDA_API CUresult cuMemcpy3DWithAttributesAsync_ptsz(CUDA_MEMCPY3D_BATCH_OP *op,
                                                        unsigned long long flags,
                                                        CUstream hStream);
SIMCUDA_API CUresult cuMemsetD8_v2(CUdeviceptr dstDevice, unsigned char uc, size_t N);
SIMCUDA_API CUresult cuMemsetD8_v2_ptds(CUdeviceptr dstDevice, unsigned char uc, size_t N);
SIMCUDA_API CUresult cuMemsetD16_v2(CUdeviceptr dstDevice, unsigned short us, size_t N);
SIMCUDA_API CUresult cuMemsetD16_v2_ptds(CUdeviceptr dstDevice, unsigned short us, size_t N);
SIMCUDA_API CUresult cuMemsetD32_v2(CUdeviceptr dstDevice, unsigned int ui, size_t N);
SIMCUDA_API CUresult cuMemsetD32_v2_ptds(CUdeviceptr dstDevice, unsigned int ui, size_t N);
SIMCUDA_API CUresult cuMemsetD8Async(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                     CUstream hStream);
SIMCUDA_API CUresult cuMemsetD8Async_ptsz(CUdeviceptr dstDevice, unsigned char uc, size_t N,
                                          CUstream hStream);
SIMCUDA_API CUresult cuMemsetD16Async(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                      CUstream hStream);
SIMCUDA_API CUresult cuMemsetD16Async_ptsz(CUdeviceptr dstDevice, unsigned short us, size_t N,
                                           CUstream hStream);
SIMCUDA_API CUresult cuMemsetD32Async(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                      CUstream hStream);
SIMCUDA_API CUresult cuMemsetD32Async_ptsz(CUdeviceptr dstDevice, unsigned int ui, size_t N,
                                           CUstream hStream);
/* 2D memsets: Height rows of Width elements, dstPitch bytes apart. */
SIMCUDA_API CUresult cuMemsetD2D8_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                                     size_t Width, size_t Height);
SIMCUDA_API CUresult cuMemsetD2D8_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch,
                                          unsigned char uc, size_t Width, size_t Height);
SIMCUDA_API CUresult cuMemsetD2D16_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned short us,
                                      size_t Width, size_t Height);
SIMCUDA_API CUresult cuMemsetD2D16_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch,
                                           unsigned short us, size_t Width, size_t Height);
SIMCUDA_API CUresult cuMemsetD2D32_v2(CUdeviceptr dstDevice, size_t dstPitch, unsigned int ui,
                                      size_t Width, size_t Height);
SIMCUDA_API CUresult cuMemsetD2D32_v2_ptds(CUdeviceptr dstDevice, size_t dstPitch,
                                           unsigned int ui, size_t Width, size_t Height);
SIMCUDA_API CUresult cuMemsetD2D8Async(CUdeviceptr dstDevice, size_t dstPitch, unsigned char uc,
                                       size_t Width, size_t Height, CUstream hStream);
SIMCUDA_API CUresult cuMemsetD2D8Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch,
                                            unsigned char uc, size_t Width, size_t Height,
                                            CUstream hStream);
SIMCUDA_API CUresult cuMemsetD2D16Async(CUdeviceptr dstDevice, size_t dstPitch,
                                        unsigned short us, size_t Width, size_t Height,
                                        CUstream hStream);
SIMCUDA_API CUresult cuMemsetD2D16Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch,
                                             unsigned short us, size_t Width, size_t Height,
                                             CUstream hStream);
SIMCUDA_API CUresult cuMemsetD2D32Async(CUdeviceptr dstDevice, size_t dstPitch,
                                        unsigned int ui, size_t Width, size_t Height,
                                        CUstream hStream);
SIMCUDA_API CUresult cuMemsetD2D32Async_ptsz(CUdeviceptr dstDevice, size_t dstPitch,
                                             unsigned int ui, size_t Width, size_t Height,
                                             CUstream hStream);

/* Stream-ordered allocation and memory pools. */
SIMCUDA_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
SIMCUDA_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream);
SIMCUDA_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
                                             CUstream hStream);
SIMCUDA_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
                                                  CUmemoryPool pool, CUstream hStream);
SIMCUDA_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream);
SIMCUDA_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream);
SIMCUDA_API CUresult cuMemPoolCreate(CUmemoryPool *pool, const CUmemPoolProps *poolProps);
SIMCUDA_API CUresult cuMemPoolDestroy(CUmemoryPool pool);
SIMCUDA_API CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                           void *value);
SIMCUDA_API CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr,
                                           void *value);
SIMCUDA_API CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep);
SIMCUDA_API CUresult cuMemPoolSetAccess(CUmemoryPool pool, const CUmemAccessDesc *map,
                                        size_t count);
SIMCUDA_API CUresult cuMemPoolGetAccess(CUmemAccess_flags *flags, CUmemoryPool memPool,
                                        CUmemLocation *location);
SIMCUDA_API CUresult cuMemPoolExportToShareableHandle(void *handle_out, CUmemoryPool pool,
                                                      CUmemAllocationHandleType handleType,
                                                      unsigned long long flags);
SIMCUDA_API CUresult cuMemPoolImportFromShareableHandle(CUmemoryPool *pool_out, void *handle,
                                                        CUmemAllocationHandleType handleType,
                                                        unsigned long long flags);
SIMCUDA_API CUresult cuMemPoolExportPointer(CUmemPoolPtrExportData *shareData_out, CUdeviceptr ptr);
SIMCUDA_API CUresult cuMemPoolImportPointer(CUdeviceptr *ptr_out, CUmemoryPool pool,
                                            CUmemPoolPtrExportData *shareData);

/* Virtual memory management. */
SIMCUDA_API CUresult cuMemGetAllocationGranularity(size_t *granularity,
                                                   const CUmemAllocationProp *prop,
                                                   CUmemAllocationGranularity_flags option);
SIMCUDA_API CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment,
                                         CUdeviceptr addr, unsigned long long flags);
SIMCUDA_API CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size);
SIMCUDA_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
                                 const CUmemAllocationProp *prop, unsigned long long flags);
SIMCUDA_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle);
SIMCUDA_API CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                              CUmemGenericAllocationHandle handle, unsigned long long flags);
SIMCUDA_API CUresult cuMemUnmap(CUdeviceptr ptr, size_t size);
SIMCUDA_API CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                                    size_t count);
SIMCUDA_API CUresult cuMemGetAccess(unsigned long long *flags, const CUmemLocation *location,
                                    CUdeviceptr ptr);
SIMCUDA_API CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp *prop,
                                                            CUmemGenericAllocationHandle handle);
SIMCUDA_API CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle *handle, void *addr);
SIMCUDA_API CUresult cuMemExportToShareableHandle(void *shareableHandle,
                                                  CUmemGenericAllocationHandle handle,
                                                  CUmemAllocationHandleType handleType,
                                                  unsigned long long flags);
SIMCUDA_API CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle,
                                                    void *osHandle,
                                                    CUmemAllocationHandleType shHandleType);

/* Multicast objects (CUDA 12.1). */
typedef struct CUmulticastObjectProp_st {
    unsigned int numDevices;
    size_t size;
    unsigned long long handleTypes;
    unsigned long long flags;
} CUmulticastObjectProp;

typedef enum CUmulticastGranularity_flags_enum {
    CU_MULTICAST_GRANULARITY_MINIMUM = 0,
    CU_MULTICAST_GRANULARITY_RECOMMENDED = 1
} CUmulticastGranularity_flags;

SIMCUDA_API CUresult cuMulticastCreate(CUmemGenericAllocationHandle *mcHandle,
                                       const CUmulticastObjectProp *prop);
SIMCUDA_API CUresult cuMulticastGetGranularity(size_t *granularity, const CUmulticastObjectProp *prop,
                                               CUmulticastGranularity_flags option);
SIMCUDA_API CUresult cuMulticastAddDevice(CUmemGenericAllocationHandle mcHandle, CUdevice dev);
SIMCUDA_API CUresult cuMulticastBindMem(CUmemGenericAllocationHandle mcHandle, size_t mcOffset,
                                        CUmemGenericAllocationHandle memHandle, size_t memOffset,
                                        size_t size, unsigned long long flags);
SIMCUDA_API CUresult cuMulticastUnbind(CUmemGenericAllocationHandle mcHandle, CUdevice dev,
                                       size_t mcOffset, size_t size);

/* Arrays. */
SIMCUDA_API CUresult cuArrayCreate_v2(CUarray *pHandle,
                                      const CUDA_ARRAY_DESCRIPTOR *pAllocateArray);
SIMCUDA_API CUresult cuArray3DCreate_v2(CUarray *pHandle,
                                        const CUDA_ARRAY3D_DESCRIPTOR *pAllocateArray);
SIMCUDA_API CUresult cuArrayGetDescriptor_v2(CUDA_ARRAY_DESCRIPTOR *pArrayDescriptor,
                                             CUarray hArray);
SIMCUDA_API CUresult cuArray3DGetDescriptor_v2(CUDA_ARRAY3D_DESCRIPTOR *pArrayDescriptor,
                                               CUarray hArray);
SIMCUDA_API CUresult cuArrayDestroy(CUarray hArray);

/* Mipmapped arrays (CUDA 5.0). One block of device memory holds every level: the sum over
 * levels l = 0 .. numMipmapLevels - 1 of
 *   max(1, Width >> l) * H_l * D_l * element size * NumChannels,
 * H_l = Height ? max(1, Height >> l) : 1, D_l = Depth ? max(1, Depth >> l) : 1, except that with
 * CUDA_ARRAY3D_LAYERED or CUDA_ARRAY3D_CUBEMAP in Flags D_l = max(Depth, 1) (layers are not
 * halved), after numMipmapLevels is clamped to [1, 1 + floor(log2(max extent))] (see
 * simcuda/README.md). A level's CUarray lives as
 * long as its mipmapped array and cannot be destroyed on its own (cuArrayDestroy:
 * CUDA_ERROR_INVALID_HANDLE). */
SIMCUDA_API CUresult cuMipmappedArrayCreate(CUmipmappedArray *pHandle,
                                            const CUDA_ARRAY3D_DESCRIPTOR *pMipmappedArrayDesc,
                                            unsigned int numMipmapLevels);

/* External memory (OPAQUE_FD only): the object is backed by simulated device memory; buffers
 * mapped onto it are aliases freed by cuMemFree; mapped mipmapped arrays are not simulated
 * (CUDA_ERROR_NOT_SUPPORTED). */
typedef struct CUextMemory_st *CUexternalMemory;
typedef enum CUexternalMemoryHandleType_enum {
    CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD = 1,
    CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32 = 2,
    CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_WIN32_KMT = 3,
    CU_EXTERNAL_MEMORY_HANDLE_TYPE_D3D12_HEAP = 4,
    CU_EXTERNAL_MEMORY_HANDLE_TYPE_D3D12_RESOURCE = 5,
    CU_EXTERNAL_MEMORY_HANDLE_TYPE_D3D11_RESOURCE = 6,
    CU_EXTERNAL_MEMORY_HANDLE_TYPE_D3D11_RESOURCE_KMT = 7,
    CU_EXTERNAL_MEMORY_HANDLE_TYPE_NVSCIBUF = 8
} CUexternalMemoryHandleType;
#define CUDA_EXTERNAL_MEMORY_DEDICATED 0x1
typedef struct CUDA_EXTERNAL_MEMORY_HANDLE_DESC_st {
    CUexternalMemoryHandleType type;
    union {
        int fd;
        struct {
            void *handle;
            const void *name;
        } win32;
        const void *nvSciBufObject;
    } handle;
    unsigned long long size;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_MEMORY_HANDLE_DESC;
typedef struct CUDA_EXTERNAL_MEMORY_BUFFER_DESC_st {
    unsigned long long offset;
    unsigned long long size;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_MEMORY_BUFFER_DESC;
typedef struct CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC_st {
    unsigned long long offset;
    CUDA_ARRAY3D_DESCRIPTOR arrayDesc;
    unsigned int numLevels;
    unsigned int reserved[16];
} CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC;
SIMCUDA_API CUresult cuImportExternalMemory(CUexternalMemory *extMem_out,
                                            const CUDA_EXTERNAL_MEMORY_HANDLE_DESC *memHandleDesc);
SIMCUDA_API CUresult cuExternalMemoryGetMappedBuffer(
    CUdeviceptr *devPtr, CUexternalMemory extMem, const CUDA_EXTERNAL_MEMORY_BUFFER_DESC *bufferDesc);
SIMCUDA_API CUresult cuExternalMemoryGetMappedMipmappedArray(
    CUmipmappedArray *mipmap, CUexternalMemory extMem,
    const CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC *mipmapDesc);
SIMCUDA_API CUresult cuDestroyExternalMemory(CUexternalMemory extMem);

/* External semaphores (10.0; opaque and timeline semaphores from a file descriptor only). A
 * signal sets a binary semaphore or a timeline semaphore's value when it is queued; a wait is
 * validated and taken as met, as streams are always idle (see stream memory operations). */
typedef struct CUextSemaphore_st *CUexternalSemaphore;
typedef enum CUexternalSemaphoreHandleType_enum {
    CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD = 1,
    CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_WIN32 = 2,
    CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_WIN32_KMT = 3,
    CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_D3D12_FENCE = 4,
    CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_D3D11_FENCE = 5,
    CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_NVSCISYNC = 6,
    CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_D3D11_KEYED_MUTEX = 7,
    CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_D3D11_KEYED_MUTEX_KMT = 8,
    CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD = 9,
    CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_WIN32 = 10
} CUexternalSemaphoreHandleType;
typedef struct CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC_st {
    CUexternalSemaphoreHandleType type;
    union {
        int fd;
        struct {
            void *handle;
            const void *name;
        } win32;
        const void *nvSciSyncObj;
    } handle;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC;
typedef struct CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS_st {
    struct {
        struct {
            unsigned long long value;
        } fence;
        union {
            void *fence;
            unsigned long long reserved;
        } nvSciSync;
        struct {
            unsigned long long key;
        } keyedMutex;
        unsigned int reserved[12];
    } params;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS;
typedef struct CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS_st {
    struct {
        struct {
            unsigned long long value;
        } fence;
        union {
            void *fence;
            unsigned long long reserved;
        } nvSciSync;
        struct {
            unsigned long long key;
            unsigned int timeoutMs;
        } keyedMutex;
        unsigned int reserved[10];
    } params;
    unsigned int flags;
    unsigned int reserved[16];
} CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS;
SIMCUDA_API CUresult cuImportExternalSemaphore(CUexternalSemaphore *extSem_out,
                                               const CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC *semHandleDesc);
SIMCUDA_API CUresult cuSignalExternalSemaphoresAsync(
    const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *paramsArray,
    unsigned int numExtSems, CUstream stream);
SIMCUDA_API CUresult cuSignalExternalSemaphoresAsync_ptsz(
    const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS *paramsArray,
    unsigned int numExtSems, CUstream stream);
SIMCUDA_API CUresult cuWaitExternalSemaphoresAsync(
    const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *paramsArray,
    unsigned int numExtSems, CUstream stream);
SIMCUDA_API CUresult cuWaitExternalSemaphoresAsync_ptsz(
    const CUexternalSemaphore *extSemArray, const CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS *paramsArray,
    unsigned int numExtSems, CUstream stream);
SIMCUDA_API CUresult cuDestroyExternalSemaphore(CUexternalSemaphore extSem);
SIMCUDA_API CUresult cuMipmappedArrayGetLevel(CUarray *pLevelArray,
                                              CUmipmappedArray hMipmappedArray,
                                              unsigned int level);
SIMCUDA_API CUresult cuMipmappedArrayDestroy(CUmipmappedArray hMipmappedArray);

/* Inter-process memory handles (same-process open only, see simcuda/README.md). */
SIMCUDA_API CUresult cuIpcGetMemHandle(CUipcMemHandle *pHandle, CUdeviceptr dptr);
SIMCUDA_API CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                        unsigned int Flags);
SIMCUDA_API CUresult cuIpcOpenMemHandle_v2(CUdeviceptr *pdptr, CUipcMemHandle handle,
                                           unsigned int Flags);
SIMCUDA_API CUresult cuIpcCloseMemHandle(CUdeviceptr dptr);

/* Streams. */
SIMCUDA_API CUresult cuStreamCreate(CUstream *phStream, unsigned int Flags);
SIMCUDA_API CUresult cuStreamCreateWithPriority(CUstream *phStream, unsigned int flags,
                                                int priority);
SIMCUDA_API CUresult cuStreamDestroy(CUstream hStream);
SIMCUDA_API CUresult cuStreamDestroy_v2(CUstream hStream);
SIMCUDA_API CUresult cuStreamSynchronize(CUstream hStream);
SIMCUDA_API CUresult cuStreamSynchronize_ptsz(CUstream hStream);
SIMCUDA_API CUresult cuStreamQuery(CUstream hStream);
SIMCUDA_API CUresult cuStreamQuery_ptsz(CUstream hStream);
SIMCUDA_API CUresult cuStreamWaitEvent(CUstream hStream, CUevent hEvent, unsigned int Flags);
SIMCUDA_API CUresult cuStreamWaitEvent_ptsz(CUstream hStream, CUevent hEvent, unsigned int Flags);
SIMCUDA_API CUresult cuStreamAddCallback(CUstream hStream, CUstreamCallback callback,
                                         void *userData, unsigned int flags);
SIMCUDA_API CUresult cuStreamAddCallback_ptsz(CUstream hStream, CUstreamCallback callback,
                                              void *userData, unsigned int flags);
SIMCUDA_API CUresult cuStreamGetFlags(CUstream hStream, unsigned int *flags);
SIMCUDA_API CUresult cuStreamGetFlags_ptsz(CUstream hStream, unsigned int *flags);
SIMCUDA_API CUresult cuStreamGetPriority(CUstream hStream, int *priority);
SIMCUDA_API CUresult cuStreamGetPriority_ptsz(CUstream hStream, int *priority);
SIMCUDA_API CUresult cuStreamGetCtx(CUstream hStream, CUcontext *pctx);
SIMCUDA_API CUresult cuStreamGetCtx_ptsz(CUstream hStream, CUcontext *pctx);
SIMCUDA_API CUresult cuStreamGetCtx_v2(CUstream hStream, CUcontext *pCtx, CUgreenCtx *pGreenCtx);
SIMCUDA_API CUresult cuStreamGetCtx_v2_ptsz(CUstream hStream, CUcontext *pCtx,
                                            CUgreenCtx *pGreenCtx);
SIMCUDA_API CUresult cuStreamIsCapturing(CUstream hStream, CUstreamCaptureStatus *captureStatus);
SIMCUDA_API CUresult cuStreamIsCapturing_ptsz(CUstream hStream,
                                              CUstreamCaptureStatus *captureStatus);
SIMCUDA_API CUresult cuStreamBeginCapture(CUstream hStream);
SIMCUDA_API CUresult cuStreamBeginCapture_ptsz(CUstream hStream);
SIMCUDA_API CUresult cuStreamBeginCapture_v2(CUstream hStream, CUstreamCaptureMode mode);
SIMCUDA_API CUresult cuStreamBeginCapture_v2_ptsz(CUstream hStream, CUstreamCaptureMode mode);
SIMCUDA_API CUresult cuStreamEndCapture(CUstream hStream, CUgraph *phGraph);
SIMCUDA_API CUresult cuStreamEndCapture_ptsz(CUstream hStream, CUgraph *phGraph);
SIMCUDA_API CUresult cuGraphDestroy(CUgraph hGraph);

/* Graphs captured from streams: instantiated, launched (every captured operation runs again,
 * in capture order, on the launch stream) and destroyed. */
SIMCUDA_API CUresult cuGraphInstantiate(CUgraphExec *phGraphExec, CUgraph hGraph,
                                        CUgraphNode *phErrorNode, char *logBuffer,
                                        size_t bufferSize);
SIMCUDA_API CUresult cuGraphInstantiate_v2(CUgraphExec *phGraphExec, CUgraph hGraph,
                                           CUgraphNode *phErrorNode, char *logBuffer,
                                           size_t bufferSize);
SIMCUDA_API CUresult cuGraphInstantiateWithFlags(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                 unsigned long long flags);
SIMCUDA_API CUresult cuGraphExecDestroy(CUgraphExec hGraphExec);
SIMCUDA_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream);
SIMCUDA_API CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream);

/* Graph memory nodes (CUDA 11.4): allocation nodes made by cuMemAllocAsync under capture or
 * cuGraphAddMemAllocNode get a fixed address; each launch of the instantiated graph allocates
 * there, until a free node, cuMemFreeAsync or cuMemFree frees it (or the next launch, with
 * CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH). */
typedef enum CUgraphNodeType_enum {
    CU_GRAPH_NODE_TYPE_KERNEL = 0,
    CU_GRAPH_NODE_TYPE_MEMCPY = 1,
    CU_GRAPH_NODE_TYPE_MEMSET = 2,
    CU_GRAPH_NODE_TYPE_HOST = 3,
    CU_GRAPH_NODE_TYPE_GRAPH = 4,
    CU_GRAPH_NODE_TYPE_EMPTY = 5,
    CU_GRAPH_NODE_TYPE_WAIT_EVENT = 6,
    CU_GRAPH_NODE_TYPE_EVENT_RECORD = 7,
    CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL = 8,
    CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT = 9,
    CU_GRAPH_NODE_TYPE_MEM_ALLOC = 10,
    CU_GRAPH_NODE_TYPE_MEM_FREE = 11,
    CU_GRAPH_NODE_TYPE_BATCH_MEM_OP = 12
} CUgraphNodeType;

#define CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH 1ull

typedef struct CUDA_MEM_ALLOC_NODE_PARAMS_st {
    CUmemPoolProps poolProps;
    const CUmemAccessDesc *accessDescs;
    size_t accessDescCount;
    size_t bytesize;
    CUdeviceptr dptr;
} CUDA_MEM_ALLOC_NODE_PARAMS;

typedef enum CUgraphInstantiateResult_enum {
    CUDA_GRAPH_INSTANTIATE_SUCCESS = 0,
    CUDA_GRAPH_INSTANTIATE_ERROR = 1
} CUgraphInstantiateResult;

typedef struct CUDA_GRAPH_INSTANTIATE_PARAMS_st {
    unsigned long long flags;
    CUstream hUploadStream;
    CUgraphNode hErrNode_out;
    CUgraphInstantiateResult result_out;
} CUDA_GRAPH_INSTANTIATE_PARAMS;

SIMCUDA_API CUresult cuGraphCreate(CUgraph *phGraph, unsigned int flags);
SIMCUDA_API CUresult cuGraphAddMemAllocNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                            const CUgraphNode *dependencies,
                                            size_t numDependencies,
                                            CUDA_MEM_ALLOC_NODE_PARAMS *nodeParams);
SIMCUDA_API CUresult cuGraphAddMemFreeNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                           const CUgraphNode *dependencies,
                                           size_t numDependencies, CUdeviceptr dptr);
SIMCUDA_API CUresult cuGraphGetNodes(CUgraph hGraph, CUgraphNode *nodes, size_t *numNodes);
SIMCUDA_API CUresult cuGraphNodeGetType(CUgraphNode hNode, CUgraphNodeType *type);
SIMCUDA_API CUresult cuGraphMemAllocNodeGetParams(CUgraphNode hNode,
                                                  CUDA_MEM_ALLOC_NODE_PARAMS *params_out);
SIMCUDA_API CUresult cuGraphMemFreeNodeGetParams(CUgraphNode hNode, CUdeviceptr *dptr_out);
SIMCUDA_API CUresult cuGraphInstantiateWithParams(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                  CUDA_GRAPH_INSTANTIATE_PARAMS *params);
SIMCUDA_API CUresult cuGraphInstantiateWithParams_ptsz(CUgraphExec *phGraphExec, CUgraph hGraph,
                                                       CUDA_GRAPH_INSTANTIATE_PARAMS *params);

/* User objects (CUDA 11.3): reference-counted objects with a destructor, whose references a
 * graph can hold (cuda-core keeps what its executable graphs need alive this way). */
typedef enum CUuserObject_flags_enum { CU_USER_OBJECT_NO_DESTRUCTOR_SYNC = 1 } CUuserObject_flags;
typedef enum CUuserObjectRetain_flags_enum { CU_GRAPH_USER_OBJECT_MOVE = 1 } CUuserObjectRetain_flags;

SIMCUDA_API CUresult cuUserObjectCreate(CUuserObject *object_out, void *ptr, CUhostFn destroy,
                                        unsigned int initialRefcount, unsigned int flags);
SIMCUDA_API CUresult cuUserObjectRetain(CUuserObject object, unsigned int count);
SIMCUDA_API CUresult cuUserObjectRelease(CUuserObject object, unsigned int count);
SIMCUDA_API CUresult cuGraphRetainUserObject(CUgraph graph, CUuserObject object,
                                             unsigned int count, unsigned int flags);
SIMCUDA_API CUresult cuGraphReleaseUserObject(CUgraph graph, CUuserObject object,
                                              unsigned int count);

/* Child graphs and the generic node constructor (CUDA 12.2; _v2 with edge data, 12.3). A
 * child graph node embeds a clone of a graph without memory nodes (cuGraphAddChildGraphNode,
 * or cuGraphAddNode with CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE), or the graph itself, memory
 * nodes and all, with CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE (CUDA 12.9): the parent owns it,
 * and it can no longer be instantiated, destroyed or given memory nodes on its own.
 * cuGraphAddNode here makes kernel, memcpy, memset, allocation, free, child graph, event
 * record and event wait nodes only. */
typedef enum CUgraphChildGraphNodeOwnership_enum {
    CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE = 0,
    CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE = 1
} CUgraphChildGraphNodeOwnership;

typedef struct CUDA_CHILD_GRAPH_NODE_PARAMS_st {
    CUgraph graph;
    CUgraphChildGraphNodeOwnership ownership;
} CUDA_CHILD_GRAPH_NODE_PARAMS;

typedef struct CUDA_MEM_FREE_NODE_PARAMS_st {
    CUdeviceptr dptr;
} CUDA_MEM_FREE_NODE_PARAMS;

/* Event record and wait nodes (CUDA 11.1): each launch of the graph records, or waits for,
 * the event. */
typedef struct CUDA_EVENT_RECORD_NODE_PARAMS_st {
    CUevent event;
} CUDA_EVENT_RECORD_NODE_PARAMS;

typedef struct CUDA_EVENT_WAIT_NODE_PARAMS_st {
    CUevent event;
} CUDA_EVENT_WAIT_NODE_PARAMS;

/* Kernel nodes (CUDA 10.0; _v2 with a CUkernel and its context, 12.0; _v3, 12.2, the same
 * layout for the generic node structure). `kern` is used only when `func` is NULL, and `ctx`
 * only with `kern`. Parameters come as kernelParams (one pointer per parameter) or in the
 * `extra` buffer, as cuLaunchKernel takes them. */
typedef struct CUDA_KERNEL_NODE_PARAMS_st {
    CUfunction func;
    unsigned int gridDimX;
    unsigned int gridDimY;
    unsigned int gridDimZ;
    unsigned int blockDimX;
    unsigned int blockDimY;
    unsigned int blockDimZ;
    unsigned int sharedMemBytes;
    void **kernelParams;
    void **extra;
} CUDA_KERNEL_NODE_PARAMS_v1;

typedef struct CUDA_KERNEL_NODE_PARAMS_v2_st {
    CUfunction func;
    unsigned int gridDimX;
    unsigned int gridDimY;
    unsigned int gridDimZ;
    unsigned int blockDimX;
    unsigned int blockDimY;
    unsigned int blockDimZ;
    unsigned int sharedMemBytes;
    void **kernelParams;
    void **extra;
    CUkernel kern;
    CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS_v2;

/* What CUDA 12 calls CUDA_KERNEL_NODE_PARAMS. */
typedef CUDA_KERNEL_NODE_PARAMS_v2 CUDA_KERNEL_NODE_PARAMS;

typedef struct CUDA_KERNEL_NODE_PARAMS_v3_st {
    CUfunction func;
    unsigned int gridDimX;
    unsigned int gridDimY;
    unsigned int gridDimZ;
    unsigned int blockDimX;
    unsigned int blockDimY;
    unsigned int blockDimZ;
    unsigned int sharedMemBytes;
    void **kernelParams;
    void **extra;
    CUkernel kern;
    CUcontext ctx;
} CUDA_KERNEL_NODE_PARAMS_v3;

/* A memcpy node in the generic node structure (12.2): flags and reserved must be 0. */
typedef struct CUDA_MEMCPY_NODE_PARAMS_st {
    int flags;
    int reserved;
    CUcontext copyCtx;
    CUDA_MEMCPY3D copyParams;
} CUDA_MEMCPY_NODE_PARAMS;

/* Memset nodes (10.0; `value` holds the element's bits, `elementSize` is 1, 2 or 4 bytes,
 * `width` counts elements, `pitch` is in bytes and used when `height` > 1); _v2 (12.2, the
 * generic node structure's) with the context the node runs in. */
typedef struct CUDA_MEMSET_NODE_PARAMS_st {
    CUdeviceptr dst;
    size_t pitch;
    unsigned int value;
    unsigned int elementSize;
    size_t width;
    size_t height;
} CUDA_MEMSET_NODE_PARAMS;

typedef struct CUDA_MEMSET_NODE_PARAMS_v2_st {
    CUdeviceptr dst;
    size_t pitch;
    unsigned int value;
    unsigned int elementSize;
    size_t width;
    size_t height;
    CUcontext ctx;
} CUDA_MEMSET_NODE_PARAMS_v2;

typedef struct CUgraphNodeParams_st {
    CUgraphNodeType type;
    int reserved0[3];
    union {
        long long reserved1[29];
        CUDA_KERNEL_NODE_PARAMS_v3 kernel;
        CUDA_MEMCPY_NODE_PARAMS memcpy;
        CUDA_MEMSET_NODE_PARAMS_v2 memset;
        CUDA_MEM_ALLOC_NODE_PARAMS alloc;
        CUDA_MEM_FREE_NODE_PARAMS free;
        CUDA_CHILD_GRAPH_NODE_PARAMS graph;
        CUDA_EVENT_WAIT_NODE_PARAMS eventWait;
        CUDA_EVENT_RECORD_NODE_PARAMS eventRecord;
    };
    long long reserved2;
} CUgraphNodeParams;

typedef struct CUgraphEdgeData_st {
    unsigned char from_port;
    unsigned char to_port;
    unsigned char type;
    unsigned char reserved[5];
} CUgraphEdgeData;

SIMCUDA_API CUresult cuGraphAddNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                    const CUgraphNode *dependencies, size_t numDependencies,
                                    CUgraphNodeParams *nodeParams);
SIMCUDA_API CUresult cuGraphAddNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                       const CUgraphNode *dependencies,
                                       const CUgraphEdgeData *dependencyData,
                                       size_t numDependencies, CUgraphNodeParams *nodeParams);
/* A capture into an existing graph (12.3): its nodes are added to hGraph, after the given
 * dependencies (nodes of hGraph; edge data NULL or all zero). */
SIMCUDA_API CUresult cuStreamBeginCaptureToGraph(CUstream hStream, CUgraph hGraph,
                                                 const CUgraphNode *dependencies,
                                                 const CUgraphEdgeData *dependencyData,
                                                 size_t numDependencies, CUstreamCaptureMode mode);
SIMCUDA_API CUresult cuStreamBeginCaptureToGraph_ptsz(CUstream hStream, CUgraph hGraph,
                                                      const CUgraphNode *dependencies,
                                                      const CUgraphEdgeData *dependencyData,
                                                      size_t numDependencies,
                                                      CUstreamCaptureMode mode);
/* A stream's capture (10.1; with its graph and current dependencies, 11.3; with their edge
 * data, 12.3, the ABI that CUDA 13 names cuStreamGetCaptureInfo). */
SIMCUDA_API CUresult cuStreamGetCaptureInfo(CUstream hStream,
                                            CUstreamCaptureStatus *captureStatus_out,
                                            cuuint64_t *id_out);
SIMCUDA_API CUresult cuStreamGetCaptureInfo_ptsz(CUstream hStream,
                                                 CUstreamCaptureStatus *captureStatus_out,
                                                 cuuint64_t *id_out);
SIMCUDA_API CUresult cuStreamGetCaptureInfo_v2(CUstream hStream,
                                               CUstreamCaptureStatus *captureStatus_out,
                                               cuuint64_t *id_out, CUgraph *graph_out,
                                               const CUgraphNode **dependencies_out,
                                               size_t *numDependencies_out);
SIMCUDA_API CUresult cuStreamGetCaptureInfo_v2_ptsz(CUstream hStream,
                                                    CUstreamCaptureStatus *captureStatus_out,
                                                    cuuint64_t *id_out, CUgraph *graph_out,
                                                    const CUgraphNode **dependencies_out,
                                                    size_t *numDependencies_out);
SIMCUDA_API CUresult cuStreamGetCaptureInfo_v3(CUstream hStream,
                                               CUstreamCaptureStatus *captureStatus_out,
                                               cuuint64_t *id_out, CUgraph *graph_out,
                                               const CUgraphNode **dependencies_out,
                                               const CUgraphEdgeData **edgeData_out,
                                               size_t *numDependencies_out);
SIMCUDA_API CUresult cuStreamGetCaptureInfo_v3_ptsz(CUstream hStream,
                                                    CUstreamCaptureStatus *captureStatus_out,
                                                    cuuint64_t *id_out, CUgraph *graph_out,
                                                    const CUgraphNode **dependencies_out,
                                                    const CUgraphEdgeData **edgeData_out,
                                                    size_t *numDependencies_out);
/* A capturing stream's current dependencies changed (11.3; _v2 with edge data, 12.3): the
 * nodes given are added to them, or replace them. */
typedef enum CUstreamUpdateCaptureDependencies_flags_enum {
    CU_STREAM_ADD_CAPTURE_DEPENDENCIES = 0x0,
    CU_STREAM_SET_CAPTURE_DEPENDENCIES = 0x1
} CUstreamUpdateCaptureDependencies_flags;

SIMCUDA_API CUresult cuStreamUpdateCaptureDependencies(CUstream hStream, CUgraphNode *dependencies,
                                                       size_t numDependencies, unsigned int flags);
SIMCUDA_API CUresult cuStreamUpdateCaptureDependencies_ptsz(CUstream hStream,
                                                            CUgraphNode *dependencies,
                                                            size_t numDependencies,
                                                            unsigned int flags);
SIMCUDA_API CUresult cuStreamUpdateCaptureDependencies_v2(CUstream hStream,
                                                          CUgraphNode *dependencies,
                                                          const CUgraphEdgeData *dependencyData,
                                                          size_t numDependencies,
                                                          unsigned int flags);
SIMCUDA_API CUresult cuStreamUpdateCaptureDependencies_v2_ptsz(
    CUstream hStream, CUgraphNode *dependencies, const CUgraphEdgeData *dependencyData,
    size_t numDependencies, unsigned int flags);

/* A graph's edges (10.0; _v2 with edge data, 12.3): to[i] depends on from[i]. from and to both
 * NULL: the number of edges in *numEdges. */
SIMCUDA_API CUresult cuGraphGetEdges(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
                                     size_t *numEdges);
SIMCUDA_API CUresult cuGraphGetEdges_v2(CUgraph hGraph, CUgraphNode *from, CUgraphNode *to,
                                        CUgraphEdgeData *edgeData, size_t *numEdges);
/* Edges added between nodes of a graph (10.0; _v2 with edge data, 12.3): to[i] comes to depend
 * on from[i]. */
SIMCUDA_API CUresult cuGraphAddDependencies(CUgraph hGraph, const CUgraphNode *from,
                                            const CUgraphNode *to, size_t numDependencies);
SIMCUDA_API CUresult cuGraphAddDependencies_v2(CUgraph hGraph, const CUgraphNode *from,
                                               const CUgraphNode *to,
                                               const CUgraphEdgeData *edgeData,
                                               size_t numDependencies);

SIMCUDA_API CUresult cuGraphAddChildGraphNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                              const CUgraphNode *dependencies,
                                              size_t numDependencies, CUgraph childGraph);
SIMCUDA_API CUresult cuGraphChildGraphNodeGetGraph(CUgraphNode hNode, CUgraph *phGraph);

/* Graphs built by hand: event record and wait nodes (11.1), their events read and changed in
 * the graph, and memset nodes (10.0). */
SIMCUDA_API CUresult cuGraphAddEventRecordNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                               const CUgraphNode *dependencies,
                                               size_t numDependencies, CUevent event);
SIMCUDA_API CUresult cuGraphAddEventWaitNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                             const CUgraphNode *dependencies,
                                             size_t numDependencies, CUevent event);
SIMCUDA_API CUresult cuGraphEventRecordNodeGetEvent(CUgraphNode hNode, CUevent *event_out);
SIMCUDA_API CUresult cuGraphEventRecordNodeSetEvent(CUgraphNode hNode, CUevent event);
SIMCUDA_API CUresult cuGraphEventWaitNodeGetEvent(CUgraphNode hNode, CUevent *event_out);
SIMCUDA_API CUresult cuGraphEventWaitNodeSetEvent(CUgraphNode hNode, CUevent event);
SIMCUDA_API CUresult cuGraphAddMemsetNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                          const CUgraphNode *dependencies,
                                          size_t numDependencies,
                                          const CUDA_MEMSET_NODE_PARAMS *memsetParams,
                                          CUcontext ctx);
/* A node's parameters changed in its graph through the generic structure (12.2): kernel,
 * memcpy, memset, event record and wait nodes here. */
SIMCUDA_API CUresult cuGraphNodeSetParams(CUgraphNode hNode, CUgraphNodeParams *nodeParams);

/* Kernel, memcpy and memset nodes built by hand, read and changed in the graph (10.0; the
 * kernel functions' _v2, 12.0, with CUDA_KERNEL_NODE_PARAMS_v2). A captured kernel launch,
 * copy or memset is such a node too. The kernelParams a kernel node's getter returns point to
 * storage the node owns (valid until its parameters change); its `extra` is NULL. */
SIMCUDA_API CUresult cuGraphAddKernelNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                          const CUgraphNode *dependencies,
                                          size_t numDependencies,
                                          const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
SIMCUDA_API CUresult cuGraphAddKernelNode_v2(CUgraphNode *phGraphNode, CUgraph hGraph,
                                             const CUgraphNode *dependencies,
                                             size_t numDependencies,
                                             const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams);
SIMCUDA_API CUresult cuGraphKernelNodeGetParams(CUgraphNode hNode,
                                                CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
SIMCUDA_API CUresult cuGraphKernelNodeGetParams_v2(CUgraphNode hNode,
                                                   CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams);
SIMCUDA_API CUresult cuGraphKernelNodeSetParams(CUgraphNode hNode,
                                                const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
SIMCUDA_API CUresult cuGraphKernelNodeSetParams_v2(CUgraphNode hNode,
                                                   const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams);
SIMCUDA_API CUresult cuGraphAddMemcpyNode(CUgraphNode *phGraphNode, CUgraph hGraph,
                                          const CUgraphNode *dependencies,
                                          size_t numDependencies,
                                          const CUDA_MEMCPY3D *copyParams, CUcontext ctx);
SIMCUDA_API CUresult cuGraphMemcpyNodeGetParams(CUgraphNode hNode, CUDA_MEMCPY3D *nodeParams);
SIMCUDA_API CUresult cuGraphMemcpyNodeSetParams(CUgraphNode hNode,
                                                const CUDA_MEMCPY3D *nodeParams);
SIMCUDA_API CUresult cuGraphMemsetNodeGetParams(CUgraphNode hNode,
                                                CUDA_MEMSET_NODE_PARAMS *nodeParams);
SIMCUDA_API CUresult cuGraphMemsetNodeSetParams(CUgraphNode hNode,
                                                const CUDA_MEMSET_NODE_PARAMS *nodeParams);
/* The node of a cloned graph (here: the copy a child graph node holds, which
 * cuGraphChildGraphNodeGetGraph returns) made from a node of the graph it copies. */
SIMCUDA_API CUresult cuGraphNodeFindInClone(CUgraphNode *phNode, CUgraphNode hOriginalNode,
                                            CUgraph hClonedGraph);

/* Executable graphs changed after instantiation. A node is named by its handle in the graph the
 * executable graph was instantiated from (child graphs' nodes included): an update copies
 * parameters, never node identities. */
typedef enum CUgraphExecUpdateResult_enum {
    CU_GRAPH_EXEC_UPDATE_SUCCESS = 0,
    CU_GRAPH_EXEC_UPDATE_ERROR = 1,
    CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED = 2,
    CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED = 3,
    CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED = 4,
    CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED = 5,
    CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED = 6,
    CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE = 7,
    CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED = 8
} CUgraphExecUpdateResult;

typedef struct CUgraphExecUpdateResultInfo_st {
    CUgraphExecUpdateResult result;
    CUgraphNode errorNode;
    CUgraphNode errorFromNode;
} CUgraphExecUpdateResultInfo;

SIMCUDA_API CUresult cuGraphExecEventRecordNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                        CUevent event);
SIMCUDA_API CUresult cuGraphExecEventWaitNodeSetEvent(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                      CUevent event);
SIMCUDA_API CUresult cuGraphExecChildGraphNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                        CUgraph childGraph);
/* 10.2's ABI, and 12.0's with the result in a structure (what the resolver answers from
 * 12000). */
SIMCUDA_API CUresult cuGraphExecUpdate(CUgraphExec hGraphExec, CUgraph hGraph,
                                       CUgraphNode *hErrorNode_out,
                                       CUgraphExecUpdateResult *updateResult_out);
SIMCUDA_API CUresult cuGraphExecUpdate_v2(CUgraphExec hGraphExec, CUgraph hGraph,
                                          CUgraphExecUpdateResultInfo *resultInfo);
/* 12.2: kernel, memcpy, memset, event record and wait nodes, child graph nodes; other types
 * are not supported here. */
SIMCUDA_API CUresult cuGraphExecNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                              CUgraphNodeParams *nodeParams);
/* One kernel (10.1; _v2, 12.0), memcpy or memset (10.2) node of an executable graph changed;
 * and kernel, memcpy and memset nodes disabled (run as empty nodes) and enabled again (11.6). */
SIMCUDA_API CUresult cuGraphExecKernelNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                    const CUDA_KERNEL_NODE_PARAMS_v1 *nodeParams);
SIMCUDA_API CUresult cuGraphExecKernelNodeSetParams_v2(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                       const CUDA_KERNEL_NODE_PARAMS_v2 *nodeParams);
SIMCUDA_API CUresult cuGraphExecMemcpyNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                    const CUDA_MEMCPY3D *copyParams,
                                                    CUcontext ctx);
SIMCUDA_API CUresult cuGraphExecMemsetNodeSetParams(CUgraphExec hGraphExec, CUgraphNode hNode,
                                                    const CUDA_MEMSET_NODE_PARAMS *memsetParams,
                                                    CUcontext ctx);
SIMCUDA_API CUresult cuGraphNodeSetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode,
                                           unsigned int isEnabled);
SIMCUDA_API CUresult cuGraphNodeGetEnabled(CUgraphExec hGraphExec, CUgraphNode hNode,
                                           unsigned int *isEnabled);

/* Host functions, run in stream order (the simulator runs them when enqueued, or at the
 * launch of the graph they were captured into). */
SIMCUDA_API CUresult cuLaunchHostFunc(CUstream hStream, CUhostFn fn, void *userData);
SIMCUDA_API CUresult cuLaunchHostFunc_ptsz(CUstream hStream, CUhostFn fn, void *userData);
/* CUDA 13.1: the same with the host task's sync mode (0 blocking, 1 spin-wait). */
SIMCUDA_API CUresult cuLaunchHostFunc_v2(CUstream hStream, CUhostFn fn, void *userData,
                                         unsigned int syncMode);
SIMCUDA_API CUresult cuLaunchHostFunc_v2_ptsz(CUstream hStream, CUhostFn fn, void *userData,
                                              unsigned int syncMode);

/* Stream memory operations (waits on and writes of 32- and 64-bit values, and batches of
 * them). A write stores its value when enqueued, as all work runs then; a wait is checked
 * when enqueued and, since an idle device can never see a later write, one whose condition
 * does not hold is taken as met (the work after it runs at once, as a real device would run it
 * once another agent wrote the value). Not captured: on a capturing stream they are refused
 * with CUDA_ERROR_NOT_SUPPORTED. */
typedef enum CUstreamWaitValue_flags_enum {
    CU_STREAM_WAIT_VALUE_GEQ = 0x0,
    CU_STREAM_WAIT_VALUE_EQ = 0x1,
    CU_STREAM_WAIT_VALUE_AND = 0x2,
    CU_STREAM_WAIT_VALUE_NOR = 0x3,
    CU_STREAM_WAIT_VALUE_FLUSH = 1 << 30
} CUstreamWaitValue_flags;

typedef enum CUstreamWriteValue_flags_enum {
    CU_STREAM_WRITE_VALUE_DEFAULT = 0x0,
    CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER = 0x1
} CUstreamWriteValue_flags;

typedef enum CUstreamBatchMemOpType_enum {
    CU_STREAM_MEM_OP_WAIT_VALUE_32 = 1,
    CU_STREAM_MEM_OP_WRITE_VALUE_32 = 2,
    CU_STREAM_MEM_OP_FLUSH_REMOTE_WRITES = 3,
    CU_STREAM_MEM_OP_WAIT_VALUE_64 = 4,
    CU_STREAM_MEM_OP_WRITE_VALUE_64 = 5,
    CU_STREAM_MEM_OP_BARRIER = 6
} CUstreamBatchMemOpType;

/* One operation of a batch: a tagged union of 48 bytes, as the public header lays it out. */
typedef union CUstreamBatchMemOpParams_union {
    CUstreamBatchMemOpType operation;
    struct {
        CUstreamBatchMemOpType operation;
        CUdeviceptr address;
        union {
            cuuint32_t value;
            cuuint64_t value64;
        };
        unsigned int flags;
        CUdeviceptr alias;
    } waitValue, writeValue;
    struct {
        CUstreamBatchMemOpType operation;
        unsigned int flags;
    } flushRemoteWrites, memoryBarrier;
    cuuint64_t pad[6];
} CUstreamBatchMemOpParams;

SIMCUDA_API CUresult cuStreamWaitValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                         unsigned int flags);
SIMCUDA_API CUresult cuStreamWaitValue32_ptsz(CUstream stream, CUdeviceptr addr,
                                              cuuint32_t value, unsigned int flags);
SIMCUDA_API CUresult cuStreamWaitValue32_v2(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                            unsigned int flags);
SIMCUDA_API CUresult cuStreamWaitValue32_v2_ptsz(CUstream stream, CUdeviceptr addr,
                                                 cuuint32_t value, unsigned int flags);
SIMCUDA_API CUresult cuStreamWaitValue64(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                         unsigned int flags);
SIMCUDA_API CUresult cuStreamWaitValue64_ptsz(CUstream stream, CUdeviceptr addr,
                                              cuuint64_t value, unsigned int flags);
SIMCUDA_API CUresult cuStreamWaitValue64_v2(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                            unsigned int flags);
SIMCUDA_API CUresult cuStreamWaitValue64_v2_ptsz(CUstream stream, CUdeviceptr addr,
                                                 cuuint64_t value, unsigned int flags);
SIMCUDA_API CUresult cuStreamWriteValue32(CUstream stream, CUdeviceptr addr, cuuint32_t value,
                                          unsigned int flags);
SIMCUDA_API CUresult cuStreamWriteValue32_ptsz(CUstream stream, CUdeviceptr addr,
                                               cuuint32_t value, unsigned int flags);
SIMCUDA_API CUresult cuStreamWriteValue32_v2(CUstream stream, CUdeviceptr addr,
                                             cuuint32_t value, unsigned int flags);
SIMCUDA_API CUresult cuStreamWriteValue32_v2_ptsz(CUstream stream, CUdeviceptr addr,
                                                  cuuint32_t value, unsigned int flags);
SIMCUDA_API CUresult cuStreamWriteValue64(CUstream stream, CUdeviceptr addr, cuuint64_t value,
                                          unsigned int flags);
SIMCUDA_API CUresult cuStreamWriteValue64_ptsz(CUstream stream, CUdeviceptr addr,
                                               cuuint64_t value, unsigned int flags);
SIMCUDA_API CUresult cuStreamWriteValue64_v2(CUstream stream, CUdeviceptr addr,
                                             cuuint64_t value, unsigned int flags);
SIMCUDA_API CUresult cuStreamWriteValue64_v2_ptsz(CUstream stream, CUdeviceptr addr,
                                                  cuuint64_t value, unsigned int flags);
SIMCUDA_API CUresult cuStreamBatchMemOp(CUstream stream, unsigned int count,
                                        CUstreamBatchMemOpParams *paramArray, unsigned int flags);
SIMCUDA_API CUresult cuStreamBatchMemOp_ptsz(CUstream stream, unsigned int count,
                                             CUstreamBatchMemOpParams *paramArray,
                                             unsigned int flags);
SIMCUDA_API CUresult cuStreamBatchMemOp_v2(CUstream stream, unsigned int count,
                                           CUstreamBatchMemOpParams *paramArray,
                                           unsigned int flags);
SIMCUDA_API CUresult cuStreamBatchMemOp_v2_ptsz(CUstream stream, unsigned int count,
                                                CUstreamBatchMemOpParams *paramArray,
                                                unsigned int flags);

/* Events. */
SIMCUDA_API CUresult cuEventCreate(CUevent *phEvent, unsigned int Flags);
SIMCUDA_API CUresult cuEventDestroy(CUevent hEvent);
SIMCUDA_API CUresult cuEventDestroy_v2(CUevent hEvent);
SIMCUDA_API CUresult cuEventRecord(CUevent hEvent, CUstream hStream);
SIMCUDA_API CUresult cuEventRecord_ptsz(CUevent hEvent, CUstream hStream);
SIMCUDA_API CUresult cuEventRecordWithFlags(CUevent hEvent, CUstream hStream, unsigned int flags);
SIMCUDA_API CUresult cuEventRecordWithFlags_ptsz(CUevent hEvent, CUstream hStream,
                                                 unsigned int flags);
SIMCUDA_API CUresult cuEventQuery(CUevent hEvent);
SIMCUDA_API CUresult cuEventSynchronize(CUevent hEvent);
SIMCUDA_API CUresult cuEventElapsedTime(float *pMilliseconds, CUevent hStart, CUevent hEnd);
SIMCUDA_API CUresult cuEventElapsedTime_v2(float *pMilliseconds, CUevent hStart, CUevent hEnd);

/* Modules, libraries, kernels: images are any bytes starting with "simcuda"; the built-in
 * kernels are fill_u32(unsigned *p, unsigned value, unsigned n),
 * add_u32(unsigned *p, unsigned delta, unsigned n) and
 * check_u32(const unsigned *p, unsigned value, unsigned n), which only reads p. */
SIMCUDA_API CUresult cuModuleLoadData(CUmodule *module, const void *image);
SIMCUDA_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image,
                                        unsigned int numOptions, CUjit_option *options,
                                        void **optionValues);
SIMCUDA_API CUresult cuModuleUnload(CUmodule hmod);
SIMCUDA_API CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name);
SIMCUDA_API CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode);
SIMCUDA_API CUresult cuLibraryLoadData(CUlibrary *library, const void *code,
                                       CUjit_option *jitOptions, void **jitOptionsValues,
                                       unsigned int numJitOptions, CUlibraryOption *libraryOptions,
                                       void **libraryOptionValues,
                                       unsigned int numLibraryOptions);
SIMCUDA_API CUresult cuLibraryUnload(CUlibrary library);
SIMCUDA_API CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name);
SIMCUDA_API CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel);
SIMCUDA_API CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                                        size_t *paramSize);
SIMCUDA_API CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
                                          size_t *paramSize);
SIMCUDA_API CUresult cuFuncGetName(const char **name, CUfunction hfunc);
SIMCUDA_API CUresult cuKernelGetName(const char **name, CUkernel hfunc);
SIMCUDA_API CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                    unsigned int gridDimZ, unsigned int blockDimX,
                                    unsigned int blockDimY, unsigned int blockDimZ,
                                    unsigned int sharedMemBytes, CUstream hStream,
                                    void **kernelParams, void **extra);
SIMCUDA_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                         unsigned int gridDimY, unsigned int gridDimZ,
                                         unsigned int blockDimX, unsigned int blockDimY,
                                         unsigned int blockDimZ, unsigned int sharedMemBytes,
                                         CUstream hStream, void **kernelParams, void **extra);
SIMCUDA_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                               unsigned int gridDimY, unsigned int gridDimZ,
                                               unsigned int blockDimX, unsigned int blockDimY,
                                               unsigned int blockDimZ, unsigned int sharedMemBytes,
                                               CUstream hStream, void **kernelParams);
SIMCUDA_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                                    unsigned int gridDimY, unsigned int gridDimZ,
                                                    unsigned int blockDimX, unsigned int blockDimY,
                                                    unsigned int blockDimZ,
                                                    unsigned int sharedMemBytes, CUstream hStream,
                                                    void **kernelParams);
SIMCUDA_API CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                                      void **kernelParams, void **extra);
SIMCUDA_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                           void **kernelParams, void **extra);

/* Legacy pre-3.2 (32-bit pointer and size) entry points: exported so that a resolver request
 * below the _v2 version finds the exact symbol the real driver would return, but they only
 * return CUDA_ERROR_NOT_SUPPORTED. */
SIMCUDA_API CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev);
SIMCUDA_API CUresult cuMemGetInfo(unsigned int *free, unsigned int *total);
SIMCUDA_API CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize);
SIMCUDA_API CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
                                     unsigned int WidthInBytes, unsigned int Height,
                                     unsigned int ElementSizeBytes);
SIMCUDA_API CUresult cuMemFree(CUdeviceptr_v1 dptr);
SIMCUDA_API CUresult cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize,
                                          CUdeviceptr_v1 dptr);
SIMCUDA_API CUresult cuMemAllocHost(void **pp, unsigned int bytesize);
SIMCUDA_API CUresult cuMemHostGetDevicePointer(CUdeviceptr_v1 *pdptr, void *p, unsigned int Flags);
SIMCUDA_API CUresult cuMemcpyHtoD(CUdeviceptr_v1 dstDevice, const void *srcHost,
                                  unsigned int ByteCount);
SIMCUDA_API CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount);
SIMCUDA_API CUresult cuMemcpyDtoD(CUdeviceptr_v1 dstDevice, CUdeviceptr_v1 srcDevice,
                                  unsigned int ByteCount);
SIMCUDA_API CUresult cuMemcpyHtoDAsync(CUdeviceptr_v1 dstDevice, const void *srcHost,
                                       unsigned int ByteCount, CUstream hStream);
SIMCUDA_API CUresult cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr_v1 srcDevice,
                                       unsigned int ByteCount, CUstream hStream);
SIMCUDA_API CUresult cuMemcpyDtoDAsync(CUdeviceptr_v1 dstDevice, CUdeviceptr_v1 srcDevice,
                                       unsigned int ByteCount, CUstream hStream);
SIMCUDA_API CUresult cuMemsetD8(CUdeviceptr_v1 dstDevice, unsigned char uc, unsigned int N);
SIMCUDA_API CUresult cuMemsetD16(CUdeviceptr_v1 dstDevice, unsigned short us, unsigned int N);
SIMCUDA_API CUresult cuMemsetD32(CUdeviceptr_v1 dstDevice, unsigned int ui, unsigned int N);
SIMCUDA_API CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *pAllocateArray);
SIMCUDA_API CUresult cuArray3DCreate(CUarray *pHandle,
                                     const CUDA_ARRAY3D_DESCRIPTOR_v1 *pAllocateArray);
SIMCUDA_API CUresult cuArrayGetDescriptor(CUDA_ARRAY_DESCRIPTOR_v1 *pArrayDescriptor,
                                          CUarray hArray);
SIMCUDA_API CUresult cuArray3DGetDescriptor(CUDA_ARRAY3D_DESCRIPTOR_v1 *pArrayDescriptor,
                                            CUarray hArray);

/* ---------------------------------------------------------------------------------------- */
/* Runtime API (libcudart.so.12 and libcudart_static.a)                                     */
/* ---------------------------------------------------------------------------------------- */

/* Runtime error numbers coincide with the driver's for every code the simulator returns. */
typedef enum cudaError_enum_rt {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInitializationError = 3,
    cudaErrorInvalidChannelDescriptor = 20,
    cudaErrorInvalidMemcpyDirection = 21,
    cudaErrorInsufficientDriver = 35,
    cudaErrorCallRequiresNewerDriver = 36,
    cudaErrorNoDevice = 100,
    cudaErrorInvalidDevice = 101,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorSymbolNotFound = 500,
    cudaErrorNotReady = 600,
    cudaErrorHostMemoryAlreadyRegistered = 712,
    cudaErrorHostMemoryNotRegistered = 713,
    cudaErrorNotSupported = 801,
    cudaErrorStreamCaptureUnsupported = 900,
    cudaErrorStreamCaptureInvalidated = 901,
    cudaErrorUnknown = 999
} cudaError_t;

enum cudaMemcpyKind {
    cudaMemcpyHostToHost = 0,
    cudaMemcpyHostToDevice = 1,
    cudaMemcpyDeviceToHost = 2,
    cudaMemcpyDeviceToDevice = 3,
    cudaMemcpyDefault = 4
};

typedef enum cudaDriverEntryPointQueryResult {
    cudaDriverEntryPointSuccess = 0,
    cudaDriverEntryPointSymbolNotFound = 1,
    cudaDriverEntryPointVersionNotSufficent = 2
} cudaDriverEntryPointQueryResult;

typedef CUstream cudaStream_t;
typedef CUevent cudaEvent_t;
/* The runtime's pool handle and properties: the driver's, in the same layout. */
typedef CUmemoryPool cudaMemPool_t;
typedef CUmemPoolProps cudaMemPoolProps;
/* The runtime's IPC handle: 64 opaque bytes, passed by value (the driver's, in the same layout). */
typedef struct cudaIpcMemHandle_st {
    char reserved[CU_IPC_HANDLE_SIZE];
} cudaIpcMemHandle_t;
#define cudaIpcMemLazyEnablePeerAccess 0x01

#define cudaStreamLegacy ((cudaStream_t)0x1)
#define cudaStreamPerThread ((cudaStream_t)0x2)
#define cudaHostAllocDefault 0x00
#define cudaHostAllocPortable 0x01
#define cudaHostAllocMapped 0x02
#define cudaHostAllocWriteCombined 0x04
#define cudaMemAttachGlobal 0x01
#define cudaEnableDefault 0x0
#define cudaEnableLegacyStream 0x1
#define cudaEnablePerThreadDefaultStream 0x2

#define cudaHostRegisterDefault 0x00
#define cudaHostRegisterPortable 0x01
#define cudaHostRegisterMapped 0x02
#define cudaHostRegisterIoMemory 0x04
#define cudaHostRegisterReadOnly 0x08

/* Arrays. A channel format descriptor gives each component's size in bits (x, y, z, w: the
 * nonzero ones must be x, x y, or x y z w, all of one size) and their kind; the runtime maps it
 * to the driver's CUarray_format and channel count (anything else:
 * cudaErrorInvalidChannelDescriptor). Array handles are the driver's. */
enum cudaChannelFormatKind {
    cudaChannelFormatKindSigned = 0,
    cudaChannelFormatKindUnsigned = 1,
    cudaChannelFormatKindFloat = 2,
    cudaChannelFormatKindNone = 3
};

typedef struct cudaChannelFormatDesc {
    int x, y, z, w;
    enum cudaChannelFormatKind f;
} cudaChannelFormatDesc;

typedef struct cudaExtent {
    size_t width;  /* in elements for arrays, in bytes for cudaMalloc3D */
    size_t height;
    size_t depth;
} cudaExtent;

typedef struct cudaPitchedPtr {
    void *ptr;
    size_t pitch;
    size_t xsize;
    size_t ysize;
} cudaPitchedPtr;

typedef CUarray cudaArray_t;
typedef CUmipmappedArray cudaMipmappedArray_t;

/* Array flags: the driver's CUDA_ARRAY3D_* values. */
#define cudaArrayDefault 0x00
#define cudaArrayLayered 0x01
#define cudaArraySurfaceLoadStore 0x02
#define cudaArrayCubemap 0x04
#define cudaArrayTextureGather 0x08

/* Stream capture and graphs. Graph, executable graph and node handles are the driver's. The
 * parameter structures are the runtime's own, with the member names and types of the public
 * runtime documentation; each has the layout of its driver counterpart (same members in the
 * same order and of the same sizes: a runtime void * where the driver has a CUdeviceptr), which
 * runtime/graph.c asserts, so the runtime passes them to the driver as they are:
 * cudaMemAllocNodeParams ~ CUDA_MEM_ALLOC_NODE_PARAMS, cudaGraphNodeParams ~ CUgraphNodeParams
 * (256 bytes; alloc, free and child graph members here), cudaGraphInstantiateParams ~
 * CUDA_GRAPH_INSTANTIATE_PARAMS (uploadStream and errNode_out for hUploadStream and
 * hErrNode_out). cudaGraphEdgeData has the driver's very members and is its typedef. */
typedef CUgraph cudaGraph_t;
typedef CUgraphExec cudaGraphExec_t;
typedef CUgraphNode cudaGraphNode_t;
typedef CUmemAccessDesc cudaMemAccessDesc;
typedef CUgraphEdgeData cudaGraphEdgeData;

typedef struct cudaMemAllocNodeParams {
    cudaMemPoolProps poolProps;
    const cudaMemAccessDesc *accessDescs;
    size_t accessDescCount;
    size_t bytesize;
    void *dptr; /* out: the allocation's fixed address */
} cudaMemAllocNodeParams;

typedef struct cudaMemFreeNodeParams {
    void *dptr;
} cudaMemFreeNodeParams;

#define cudaGraphChildGraphOwnershipClone CU_GRAPH_CHILD_GRAPH_OWNERSHIP_CLONE
#define cudaGraphChildGraphOwnershipMove CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE

typedef struct cudaChildGraphNodeParams {
    cudaGraph_t graph;
    CUgraphChildGraphNodeOwnership ownership;
} cudaChildGraphNodeParams;

/* Node types: the driver's values (cudaGraphNodeType* names for the ones modelled). */
#define cudaGraphNodeTypeGraph CU_GRAPH_NODE_TYPE_GRAPH
#define cudaGraphNodeTypeMemAlloc CU_GRAPH_NODE_TYPE_MEM_ALLOC
#define cudaGraphNodeTypeMemFree CU_GRAPH_NODE_TYPE_MEM_FREE

typedef struct cudaGraphNodeParams {
    CUgraphNodeType type;
    int reserved0[3];
    union {
        long long reserved1[29];
        cudaMemAllocNodeParams alloc;
        cudaMemFreeNodeParams free;
        cudaChildGraphNodeParams graph;
    };
    long long reserved2;
} cudaGraphNodeParams;

typedef enum cudaGraphInstantiateResult {
    cudaGraphInstantiateSuccess = 0,
    cudaGraphInstantiateError = 1
} cudaGraphInstantiateResult;

typedef struct cudaGraphInstantiateParams {
    unsigned long long flags;
    cudaStream_t uploadStream;
    cudaGraphNode_t errNode_out;
    cudaGraphInstantiateResult result_out;
} cudaGraphInstantiateParams;

enum cudaStreamCaptureMode {
    cudaStreamCaptureModeGlobal = 0,
    cudaStreamCaptureModeThreadLocal = 1,
    cudaStreamCaptureModeRelaxed = 2
};

#define cudaGraphInstantiateFlagAutoFreeOnLaunch 1ull
#define cudaGraphInstantiateFlagUpload 2ull
#define cudaGraphInstantiateFlagDeviceLaunch 4ull
#define cudaGraphInstantiateFlagUseNodePriority 8ull

/* The version of the CUDA runtime the simulated libcudart reports (12.9). */
#define SIMCUDART_VERSION 12090

SIMCUDA_API cudaError_t cudaGetDeviceCount(int *count);
SIMCUDA_API cudaError_t cudaSetDevice(int device);
SIMCUDA_API cudaError_t cudaGetDevice(int *device);
SIMCUDA_API cudaError_t cudaMalloc(void **devPtr, size_t size);
SIMCUDA_API cudaError_t cudaFree(void *devPtr);
SIMCUDA_API cudaError_t cudaMallocAsync(void **devPtr, size_t size, cudaStream_t stream);
SIMCUDA_API cudaError_t cudaFreeAsync(void *devPtr, cudaStream_t stream);
SIMCUDA_API cudaError_t cudaMallocFromPoolAsync(void **ptr, size_t size, cudaMemPool_t memPool,
                                                cudaStream_t stream);
SIMCUDA_API cudaError_t cudaMemPoolCreate(cudaMemPool_t *memPool, const cudaMemPoolProps *poolProps);
SIMCUDA_API cudaError_t cudaMemPoolDestroy(cudaMemPool_t memPool);
SIMCUDA_API cudaError_t cudaMallocManaged(void **devPtr, size_t size, unsigned int flags);
SIMCUDA_API cudaError_t cudaMallocHost(void **ptr, size_t size);
SIMCUDA_API cudaError_t cudaIpcGetMemHandle(cudaIpcMemHandle_t *handle, void *devPtr);
SIMCUDA_API cudaError_t cudaIpcOpenMemHandle(void **devPtr, cudaIpcMemHandle_t handle, unsigned int flags);
SIMCUDA_API cudaError_t cudaIpcCloseMemHandle(void *devPtr);
SIMCUDA_API cudaError_t cudaHostAlloc(void **pHost, size_t size, unsigned int flags);
SIMCUDA_API cudaError_t cudaFreeHost(void *ptr);
SIMCUDA_API cudaError_t cudaMallocPitch(void **devPtr, size_t *pitch, size_t width, size_t height);
SIMCUDA_API cudaError_t cudaMemGetInfo(size_t *free, size_t *total);
SIMCUDA_API cudaError_t cudaMemcpy(void *dst, const void *src, size_t count,
                                   enum cudaMemcpyKind kind);
SIMCUDA_API cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t count,
                                        enum cudaMemcpyKind kind, cudaStream_t stream);
SIMCUDA_API cudaError_t cudaMemset(void *devPtr, int value, size_t count);
SIMCUDA_API cudaError_t cudaStreamCreate(cudaStream_t *pStream);
SIMCUDA_API cudaError_t cudaStreamDestroy(cudaStream_t stream);
SIMCUDA_API cudaError_t cudaStreamSynchronize(cudaStream_t stream);
SIMCUDA_API cudaError_t cudaEventCreate(cudaEvent_t *event);
SIMCUDA_API cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream);
SIMCUDA_API cudaError_t cudaEventSynchronize(cudaEvent_t event);
SIMCUDA_API cudaError_t cudaEventDestroy(cudaEvent_t event);
SIMCUDA_API cudaError_t cudaDeviceSynchronize(void);
SIMCUDA_API cudaError_t cudaDeviceReset(void);
SIMCUDA_API cudaError_t cudaGetLastError(void);
SIMCUDA_API cudaError_t cudaPeekAtLastError(void);
SIMCUDA_API const char *cudaGetErrorString(cudaError_t error);
SIMCUDA_API const char *cudaGetErrorName(cudaError_t error);
SIMCUDA_API cudaError_t cudaDriverGetVersion(int *driverVersion);
SIMCUDA_API cudaError_t cudaRuntimeGetVersion(int *runtimeVersion);
SIMCUDA_API cudaError_t cudaGetDriverEntryPoint(const char *symbol, void **funcPtr,
                                                unsigned long long flags,
                                                cudaDriverEntryPointQueryResult *driverStatus);
SIMCUDA_API cudaError_t cudaGetDriverEntryPointByVersion(
    const char *symbol, void **funcPtr, unsigned int cudaVersion, unsigned long long flags,
    cudaDriverEntryPointQueryResult *driverStatus);

/* Per-thread default stream variants (what nvcc --default-stream per-thread compiles the plain
 * names to): stream 0 is the calling thread's default stream. They call the driver's _ptsz
 * entry points, resolved with CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM. */
SIMCUDA_API cudaError_t cudaMallocAsync_ptsz(void **devPtr, size_t size, cudaStream_t stream);
SIMCUDA_API cudaError_t cudaFreeAsync_ptsz(void *devPtr, cudaStream_t stream);
SIMCUDA_API cudaError_t cudaMallocFromPoolAsync_ptsz(void **ptr, size_t size,
                                                     cudaMemPool_t memPool, cudaStream_t stream);

/* Arrays, mipmapped arrays, 3D pitched memory. cudaMallocArray's flags may be
 * cudaArrayDefault, cudaArraySurfaceLoadStore or cudaArrayTextureGather (others:
 * cudaErrorInvalidValue); cudaMalloc3D is one pitched allocation of extent.width bytes by
 * extent.height * extent.depth rows. */
SIMCUDA_API cudaError_t cudaMallocArray(cudaArray_t *array, const struct cudaChannelFormatDesc *desc,
                                        size_t width, size_t height, unsigned int flags);
SIMCUDA_API cudaError_t cudaMalloc3DArray(cudaArray_t *array,
                                          const struct cudaChannelFormatDesc *desc,
                                          struct cudaExtent extent, unsigned int flags);
SIMCUDA_API cudaError_t cudaMallocMipmappedArray(cudaMipmappedArray_t *mipmappedArray,
                                                 const struct cudaChannelFormatDesc *desc,
                                                 struct cudaExtent extent, unsigned int numLevels,
                                                 unsigned int flags);
SIMCUDA_API cudaError_t cudaMalloc3D(struct cudaPitchedPtr *pitchedDevPtr, struct cudaExtent extent);
SIMCUDA_API cudaError_t cudaFreeArray(cudaArray_t array);
SIMCUDA_API cudaError_t cudaFreeMipmappedArray(cudaMipmappedArray_t mipmappedArray);

/* Host memory registration. */
SIMCUDA_API cudaError_t cudaHostRegister(void *ptr, size_t size, unsigned int flags);
SIMCUDA_API cudaError_t cudaHostUnregister(void *ptr);

/* Stream capture and graphs. cudaGraphInstantiate is the CUDA 12 three-argument ABI. */
SIMCUDA_API cudaError_t cudaStreamBeginCapture(cudaStream_t stream, enum cudaStreamCaptureMode mode);
SIMCUDA_API cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph);
SIMCUDA_API cudaError_t cudaGraphCreate(cudaGraph_t *pGraph, unsigned int flags);
SIMCUDA_API cudaError_t cudaGraphDestroy(cudaGraph_t graph);
SIMCUDA_API cudaError_t cudaGraphAddMemAllocNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                                 const cudaGraphNode_t *pDependencies,
                                                 size_t numDependencies,
                                                 cudaMemAllocNodeParams *nodeParams);
SIMCUDA_API cudaError_t cudaGraphAddMemFreeNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                                const cudaGraphNode_t *pDependencies,
                                                size_t numDependencies, void *dptr);
SIMCUDA_API cudaError_t cudaGraphAddNode(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                         const cudaGraphNode_t *pDependencies,
                                         size_t numDependencies, cudaGraphNodeParams *nodeParams);
SIMCUDA_API cudaError_t cudaGraphAddNode_v2(cudaGraphNode_t *pGraphNode, cudaGraph_t graph,
                                            const cudaGraphNode_t *pDependencies,
                                            const cudaGraphEdgeData *dependencyData,
                                            size_t numDependencies,
                                            cudaGraphNodeParams *nodeParams);
SIMCUDA_API cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph,
                                             unsigned long long flags);
SIMCUDA_API cudaError_t cudaGraphInstantiateWithFlags(cudaGraphExec_t *pGraphExec,
                                                      cudaGraph_t graph, unsigned long long flags);
SIMCUDA_API cudaError_t cudaGraphInstantiateWithParams(cudaGraphExec_t *pGraphExec,
                                                       cudaGraph_t graph,
                                                       cudaGraphInstantiateParams *instantiateParams);
SIMCUDA_API cudaError_t cudaGraphInstantiateWithParams_ptsz(
    cudaGraphExec_t *pGraphExec, cudaGraph_t graph, cudaGraphInstantiateParams *instantiateParams);
SIMCUDA_API cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream);
SIMCUDA_API cudaError_t cudaGraphLaunch_ptsz(cudaGraphExec_t graphExec, cudaStream_t stream);
SIMCUDA_API cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec);

#ifdef __cplusplus
}
#endif

#endif /* SIMCUDA_H */
