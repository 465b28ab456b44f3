/*
 * context.c: devices, primary contexts, created contexts and the per-thread context stack.
 *
 * A primary context exists once per device for the life of the process; it is usable while its
 * retain count is above zero. Releasing it to zero, resetting it, or destroying a created
 * context frees everything made in that context, as the real driver does.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

#define CTX_STACK_MAX 64
#define STREAM_PRIORITY_LEAST 0
#define STREAM_PRIORITY_GREATEST (-5)

struct device g_dev[SIM_MAX_DEVICES];

static _Thread_local struct ctx *ctx_stack[CTX_STACK_MAX];
static _Thread_local int ctx_depth;
static unsigned long long next_ctx_id = 1000;

CUresult dev_check(CUdevice dev) {
    return dev >= 0 && dev < g_cfg.devices ? CUDA_SUCCESS : CUDA_ERROR_INVALID_DEVICE;
}

bool ctx_usable(const struct ctx *c) { return c && c->h.alive && (!c->primary || c->refs > 0); }

CUresult ctx_current(struct ctx **out) {
    if (ctx_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
    struct ctx *c = ctx_stack[ctx_depth - 1];
    if (!ctx_usable(c)) return CUDA_ERROR_INVALID_CONTEXT;
    *out = c;
    return CUDA_SUCCESS;
}

CUresult ctx_resolve(CUcontext handle, struct ctx **out) {
    if (!handle) return ctx_current(out);
    struct ctx *c = obj_get(HK_CTX, (uint64_t)(uintptr_t)handle);
    if (!ctx_usable(c)) return CUDA_ERROR_INVALID_CONTEXT;
    *out = c;
    return CUDA_SUCCESS;
}

void ctx_sync(struct ctx *c) { pools_sync(c->dev); }

void ctx_teardown(struct ctx *c) {
    mem_ctx_teardown(c);
    host_ctx_teardown(c);
    stream_ctx_teardown(c);
    graph_ctx_teardown(c);
    module_ctx_teardown(c);
    ipc_ctx_teardown(c);
}

/* ---- devices ------------------------------------------------------------------------------ */

static int attribute(CUdevice_attribute a) {
    switch (a) {
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y: return 1024;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z: return 64;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z: return 65535;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK: return 49152;
    case CU_DEVICE_ATTRIBUTE_TOTAL_CONSTANT_MEMORY: return 65536;
    case CU_DEVICE_ATTRIBUTE_WARP_SIZE: return 32;
    case CU_DEVICE_ATTRIBUTE_MAX_PITCH: return 2147483647;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK: return 65536;
    case CU_DEVICE_ATTRIBUTE_CLOCK_RATE: return 1980000;
    case CU_DEVICE_ATTRIBUTE_TEXTURE_ALIGNMENT: return 512;
    case CU_DEVICE_ATTRIBUTE_GPU_OVERLAP: return 1;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: return 132;
    case CU_DEVICE_ATTRIBUTE_CAN_MAP_HOST_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_KERNELS: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE: return 2619000;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH: return 5120;
    case CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE: return 52428800;
    case CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR: return 2048;
    case CU_DEVICE_ATTRIBUTE_ASYNC_ENGINE_COUNT: return 3;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: return 0;
    case CU_DEVICE_ATTRIBUTE_STREAM_PRIORITIES_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_GLOBAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_LOCAL_L1_CACHE_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR: return 233472;
    case CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR: return 65536;
    case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY: return 1;
    case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS: return 1;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_PREEMPTION_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM: return 1;
    case CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: return 232448;
    case CU_DEVICE_ATTRIBUTE_HOST_REGISTER_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR: return 32;
    case CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK: return 1024;
    case CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED: return 1;
    case CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES: return CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    case CU_DEVICE_ATTRIBUTE_CLUSTER_LAUNCH: return 1;
    default: return 0;
    }
}

SIMCUDA_API CUresult cuDeviceGet(CUdevice *device, int ordinal) {
    API_ENTER();
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    if (dev_check(ordinal) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
    *device = ordinal;
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuDeviceGetCount(int *count) {
    API_ENTER();
    if (!count) return CUDA_ERROR_INVALID_VALUE;
    *count = g_cfg.devices;
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuDeviceGetName(char *name, int len, CUdevice dev) {
    API_ENTER();
    if (!name || len <= 0) return CUDA_ERROR_INVALID_VALUE;
    if (dev_check(dev) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
    snprintf(name, (size_t)len, "simcuda GPU %d", dev);
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev) {
    API_ENTER();
    if (!bytes) return CUDA_ERROR_INVALID_VALUE;
    if (dev_check(dev) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
    *bytes = (size_t)g_cfg.mem_bytes;
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuDeviceGetAttribute(int *pi, CUdevice_attribute attrib, CUdevice dev) {
    API_ENTER();
    if (!pi) return CUDA_ERROR_INVALID_VALUE;
    if (dev_check(dev) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
    if (attrib == CU_DEVICE_ATTRIBUTE_PCI_BUS_ID)
        *pi = dev + 1;
    else
        *pi = attribute(attrib);
    return CUDA_SUCCESS;
}

static CUresult device_uuid(CUuuid *uuid, CUdevice dev) {
    if (!uuid) return CUDA_ERROR_INVALID_VALUE;
    if (dev_check(dev) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
    static const char prefix[15] = "simcuda-device-";
    memcpy(uuid->bytes, prefix, sizeof prefix);
    uuid->bytes[15] = (char)dev;
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuDeviceGetUuid(CUuuid *uuid, CUdevice dev) {
    API_ENTER();
    return device_uuid(uuid, dev);
}

SIMCUDA_API CUresult cuDeviceGetUuid_v2(CUuuid *uuid, CUdevice dev) {
    API_ENTER();
    return device_uuid(uuid, dev);
}

SIMCUDA_API CUresult cuDeviceComputeCapability(int *major, int *minor, CUdevice dev) {
    API_ENTER();
    if (!major || !minor) return CUDA_ERROR_INVALID_VALUE;
    if (dev_check(dev) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
    *major = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    *minor = attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuDeviceCanAccessPeer(int *canAccessPeer, CUdevice dev, CUdevice peerDev) {
    API_ENTER();
    if (!canAccessPeer) return CUDA_ERROR_INVALID_VALUE;
    if (dev_check(dev) != CUDA_SUCCESS || dev_check(peerDev) != CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_DEVICE;
    *canAccessPeer = dev != peerDev;
    return CUDA_SUCCESS;
}

/* ---- primary contexts --------------------------------------------------------------------- */

static CUresult primary_retain(CUcontext *pctx, CUdevice dev) {
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    if (dev_check(dev) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
    struct ctx *c = g_dev[dev].primary;
    c->refs++;
    *pctx = (CUcontext)(uintptr_t)H(c);
    return CUDA_SUCCESS;
}

static CUresult primary_release(CUdevice dev) {
    if (dev_check(dev) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
    struct ctx *c = g_dev[dev].primary;
    if (c->refs == 0) return CUDA_ERROR_INVALID_CONTEXT;
    if (--c->refs == 0) ctx_teardown(c);
    return CUDA_SUCCESS;
}

static CUresult primary_reset(CUdevice dev) {
    if (dev_check(dev) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
    ctx_teardown(g_dev[dev].primary);
    return CUDA_SUCCESS;
}

static CUresult primary_set_flags(CUdevice dev, unsigned int flags, bool while_active) {
    if (dev_check(dev) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
    if (flags & ~(unsigned)CU_CTX_FLAGS_MASK) return CUDA_ERROR_INVALID_VALUE;
    struct ctx *c = g_dev[dev].primary;
    if (c->refs > 0 && !while_active) return CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE;
    c->flags = flags;
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
    API_ENTER();
    API_LOCKED(primary_retain(pctx, dev));
}

SIMCUDA_API CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
    API_ENTER();
    API_LOCKED(primary_release(dev));
}

SIMCUDA_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
    API_ENTER();
    API_LOCKED(primary_release(dev));
}

SIMCUDA_API CUresult cuDevicePrimaryCtxReset(CUdevice dev) {
    API_ENTER();
    API_LOCKED(primary_reset(dev));
}

SIMCUDA_API CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
    API_ENTER();
    API_LOCKED(primary_reset(dev));
}

SIMCUDA_API CUresult cuDevicePrimaryCtxSetFlags(CUdevice dev, unsigned int flags) {
    API_ENTER();
    API_LOCKED(primary_set_flags(dev, flags, false));
}

SIMCUDA_API CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
    API_ENTER();
    API_LOCKED(primary_set_flags(dev, flags, true));
}

static CUresult primary_state(CUdevice dev, unsigned int *flags, int *active) {
    if (!flags || !active) return CUDA_ERROR_INVALID_VALUE;
    if (dev_check(dev) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
    *flags = g_dev[dev].primary->flags;
    *active = g_dev[dev].primary->refs > 0;
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int *flags, int *active) {
    API_ENTER();
    API_LOCKED(primary_state(dev, flags, active));
}

/* ---- created contexts and the context stack ----------------------------------------------- */

static CUresult ctx_push(struct ctx *c) {
    if (ctx_depth == CTX_STACK_MAX) return CUDA_ERROR_INVALID_VALUE;
    ctx_stack[ctx_depth++] = c;
    return CUDA_SUCCESS;
}

static CUresult ctx_create(CUcontext *pctx, unsigned int flags, CUdevice dev) {
    if (!pctx || (flags & ~(unsigned)CU_CTX_FLAGS_MASK)) return CUDA_ERROR_INVALID_VALUE;
    if (dev_check(dev) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_DEVICE;
    if (ctx_depth == CTX_STACK_MAX) return CUDA_ERROR_INVALID_VALUE;
    struct ctx *c = obj_new(HK_CTX, sizeof *c);
    if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
    c->dev = dev;
    c->flags = flags;
    c->id = next_ctx_id++;
    ctx_push(c);
    *pctx = (CUcontext)(uintptr_t)H(c);
    return CUDA_SUCCESS;
}

static CUresult ctx_destroy(CUcontext handle) {
    struct ctx *c = obj_get(HK_CTX, (uint64_t)(uintptr_t)handle);
    if (!c || c->primary) return CUDA_ERROR_INVALID_CONTEXT;
    ctx_teardown(c);
    c->h.alive = false;
    int kept = 0;
    for (int i = 0; i < ctx_depth; i++)
        if (ctx_stack[i] != c) ctx_stack[kept++] = ctx_stack[i];
    ctx_depth = kept;
    return CUDA_SUCCESS;
}

static CUresult ctx_set_current(CUcontext handle) {
    if (!handle) {
        if (ctx_depth > 0) ctx_depth--;
        return CUDA_SUCCESS;
    }
    struct ctx *c = obj_get(HK_CTX, (uint64_t)(uintptr_t)handle);
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    if (ctx_depth == 0) return ctx_push(c);
    ctx_stack[ctx_depth - 1] = c;
    return CUDA_SUCCESS;
}

static CUresult ctx_push_current(CUcontext handle) {
    struct ctx *c = obj_get(HK_CTX, (uint64_t)(uintptr_t)handle);
    if (!c) return CUDA_ERROR_INVALID_CONTEXT;
    return ctx_push(c);
}

static CUresult ctx_pop_current(CUcontext *pctx) {
    if (ctx_depth == 0) return CUDA_ERROR_INVALID_CONTEXT;
    struct ctx *c = ctx_stack[--ctx_depth];
    if (pctx) *pctx = (CUcontext)(uintptr_t)H(c);
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuCtxCreate(CUcontext *pctx, unsigned int flags, CUdevice dev) {
    API_ENTER();
    API_LOCKED(ctx_create(pctx, flags, dev));
}

SIMCUDA_API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev) {
    API_ENTER();
    API_LOCKED(ctx_create(pctx, flags, dev));
}

SIMCUDA_API CUresult cuCtxCreate_v3(CUcontext *pctx, CUexecAffinityParam *paramsArray,
                                    int numParams, unsigned int flags, CUdevice dev) {
    API_ENTER();
    if (numParams < 0 || (numParams > 0 && !paramsArray)) return CUDA_ERROR_INVALID_VALUE;
    API_LOCKED(ctx_create(pctx, flags, dev));
}

SIMCUDA_API CUresult cuCtxCreate_v4(CUcontext *pctx, CUctxCreateParams *ctxCreateParams,
                                    unsigned int flags, CUdevice dev) {
    API_ENTER();
    (void)ctxCreateParams;
    API_LOCKED(ctx_create(pctx, flags, dev));
}

SIMCUDA_API CUresult cuCtxDestroy(CUcontext ctx) {
    API_ENTER();
    API_LOCKED(ctx_destroy(ctx));
}

SIMCUDA_API CUresult cuCtxDestroy_v2(CUcontext ctx) {
    API_ENTER();
    API_LOCKED(ctx_destroy(ctx));
}

SIMCUDA_API CUresult cuCtxGetCurrent(CUcontext *pctx) {
    API_ENTER();
    if (!pctx) return CUDA_ERROR_INVALID_VALUE;
    *pctx = ctx_depth ? (CUcontext)(uintptr_t)H(ctx_stack[ctx_depth - 1]) : NULL;
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuCtxSetCurrent(CUcontext ctx) {
    API_ENTER();
    API_LOCKED(ctx_set_current(ctx));
}

SIMCUDA_API CUresult cuCtxPushCurrent(CUcontext ctx) {
    API_ENTER();
    API_LOCKED(ctx_push_current(ctx));
}

SIMCUDA_API CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
    API_ENTER();
    API_LOCKED(ctx_push_current(ctx));
}

SIMCUDA_API CUresult cuCtxPopCurrent(CUcontext *pctx) {
    API_ENTER();
    return ctx_pop_current(pctx);
}

SIMCUDA_API CUresult cuCtxPopCurrent_v2(CUcontext *pctx) {
    API_ENTER();
    return ctx_pop_current(pctx);
}

static CUresult ctx_get_device(CUdevice *device, CUcontext handle) {
    if (!device) return CUDA_ERROR_INVALID_VALUE;
    struct ctx *c;
    CUresult r = ctx_resolve(handle, &c);
    if (r == CUDA_SUCCESS) *device = c->dev;
    return r;
}

SIMCUDA_API CUresult cuCtxGetDevice(CUdevice *device) {
    API_ENTER();
    API_LOCKED(ctx_get_device(device, NULL));
}

SIMCUDA_API CUresult cuCtxGetDevice_v2(CUdevice *device, CUcontext ctx) {
    API_ENTER();
    API_LOCKED(ctx_get_device(device, ctx));
}

static CUresult ctx_synchronize(CUcontext handle) {
    struct ctx *c;
    CUresult r = ctx_resolve(handle, &c);
    if (r == CUDA_SUCCESS) ctx_sync(c);
    return r;
}

SIMCUDA_API CUresult cuCtxSynchronize(void) {
    API_ENTER();
    API_LOCKED(ctx_synchronize(NULL));
}

SIMCUDA_API CUresult cuCtxSynchronize_v2(CUcontext ctx) {
    API_ENTER();
    API_LOCKED(ctx_synchronize(ctx));
}

static CUresult ctx_priority_range(int *least, int *greatest) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (least) *least = STREAM_PRIORITY_LEAST;
    if (greatest) *greatest = STREAM_PRIORITY_GREATEST;
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuCtxGetStreamPriorityRange(int *leastPriority, int *greatestPriority) {
    API_ENTER();
    API_LOCKED(ctx_priority_range(leastPriority, greatestPriority));
}

static CUresult ctx_api_version(CUcontext handle, unsigned int *version) {
    struct ctx *c;
    if (!version) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = ctx_resolve(handle, &c);
    if (r == CUDA_SUCCESS) *version = 3020;
    return r;
}

SIMCUDA_API CUresult cuCtxGetApiVersion(CUcontext ctx, unsigned int *version) {
    API_ENTER();
    API_LOCKED(ctx_api_version(ctx, version));
}

static CUresult ctx_flags(unsigned int *get, const unsigned int *set) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (get) *get = c->flags;
    if (set) {
        if (*set & ~(unsigned)CU_CTX_FLAGS_MASK) return CUDA_ERROR_INVALID_VALUE;
        c->flags = *set;
    }
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuCtxGetFlags(unsigned int *flags) {
    API_ENTER();
    if (!flags) return CUDA_ERROR_INVALID_VALUE;
    API_LOCKED(ctx_flags(flags, NULL));
}

SIMCUDA_API CUresult cuCtxSetFlags(unsigned int flags) {
    API_ENTER();
    API_LOCKED(ctx_flags(NULL, &flags));
}

static CUresult ctx_id(CUcontext handle, unsigned long long *id) {
    struct ctx *c;
    if (!id) return CUDA_ERROR_INVALID_VALUE;
    CUresult r = ctx_resolve(handle, &c);
    if (r == CUDA_SUCCESS) *id = c->id;
    return r;
}

SIMCUDA_API CUresult cuCtxGetId(CUcontext ctx, unsigned long long *ctxId) {
    API_ENTER();
    API_LOCKED(ctx_id(ctx, ctxId));
}
