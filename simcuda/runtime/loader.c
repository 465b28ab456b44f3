/*
 * loader.c: how the simulated runtime finds the driver, and its per-thread state.
 *
 * Start-up mirrors NVIDIA's runtime: dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL), dlsym of
 * "cuGetProcAddress_v2" on that handle (falling back to the 4-argument "cuGetProcAddress"), a
 * request for "cuGetProcAddress" itself (at 12000, or 11030 for the 4-argument ABI) whose answer
 * is used from then on, and one request per driver function by base name, ABI version and flags
 * (the per-thread default stream for the _ptsz entry points of the _ptsz runtime functions).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>

#include "rt.h"

#define RT_MAX_DEVICES 8

typedef CUresult (*resolver5)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);
typedef CUresult (*resolver4)(const char *, void **, int, cuuint64_t);

struct driver drv;

static resolver5 proc5;
static resolver4 proc4;
static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static pthread_once_t init_once = PTHREAD_ONCE_INIT;
static cudaError_t load_result;
static cudaError_t init_result;

static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;
static CUcontext primary[RT_MAX_DEVICES];
static bool retained[RT_MAX_DEVICES];

static _Thread_local int thread_device;
static _Thread_local cudaError_t last_error;

#define PER_THREAD CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM

/* Required entry points (the runtime does not start without them), by name or by base name
 * for a versioned variant; optional ones (MAYBE*), which a driver may lack; and per-thread
 * variants (MAYBE_PT: the same base name asked for with CU_GET_PROC_ADDRESS_PER_THREAD_-
 * DEFAULT_STREAM, which answers the _ptsz / _ptds entry point). */
#define WANT(name, version) {#name, version, 0, true, offsetof(struct driver, name)}
#define WANT_V(base, version, field) {base, version, 0, true, offsetof(struct driver, field)}
#define MAYBE(name, version) {#name, version, 0, false, offsetof(struct driver, name)}
#define MAYBE_V(base, version, field) {base, version, 0, false, offsetof(struct driver, field)}
#define MAYBE_PT(base, version, field)                                                       \
    {base, version, PER_THREAD, false, offsetof(struct driver, field)}

/* Base names, ABI versions and flags as NVIDIA's runtime 12.9 requests them
 * (tests/data/libcudart-12.9.79.tsv). */
static const struct {
    const char *name;
    int version;
    cuuint64_t flags;
    bool required;
    size_t offset;
} wanted[] = {
    WANT(cuInit, 2000),
    WANT(cuDriverGetVersion, 2020),
    WANT(cuDeviceGetCount, 2000),
    WANT(cuDeviceGet, 2000),
    WANT(cuDevicePrimaryCtxRetain, 7000),
    WANT_V("cuDevicePrimaryCtxReset", 11000, cuDevicePrimaryCtxReset_v2),
    WANT(cuCtxGetCurrent, 4000),
    WANT(cuCtxSetCurrent, 4000),
    WANT(cuCtxGetDevice, 2000),
    WANT(cuCtxSynchronize, 2000),
    WANT_V("cuMemGetInfo", 3020, cuMemGetInfo_v2),
    WANT_V("cuMemAlloc", 3020, cuMemAlloc_v2),
    WANT_V("cuMemAllocPitch", 3020, cuMemAllocPitch_v2),
    WANT(cuMemAllocManaged, 6000),
    WANT_V("cuMemFree", 3020, cuMemFree_v2),
    WANT(cuMemHostAlloc, 2020),
    WANT(cuMemFreeHost, 2000),
    WANT(cuMemAllocAsync, 11020),
    WANT(cuMemFreeAsync, 11020),
    WANT(cuMemAllocFromPoolAsync, 11020),
    WANT(cuMemPoolCreate, 11020),
    WANT(cuMemPoolDestroy, 11020),
    WANT(cuIpcGetMemHandle, 4010),
    WANT_V("cuIpcOpenMemHandle", 11000, cuIpcOpenMemHandle_v2),
    WANT(cuIpcCloseMemHandle, 4010),
    WANT(cuMemcpy, 4000),
    WANT(cuMemcpyAsync, 4000),
    WANT_V("cuMemcpyHtoD", 3020, cuMemcpyHtoD_v2),
    WANT_V("cuMemcpyDtoH", 3020, cuMemcpyDtoH_v2),
    WANT_V("cuMemcpyDtoD", 3020, cuMemcpyDtoD_v2),
    WANT_V("cuMemcpyHtoDAsync", 3020, cuMemcpyHtoDAsync_v2),
    WANT_V("cuMemcpyDtoHAsync", 3020, cuMemcpyDtoHAsync_v2),
    WANT_V("cuMemcpyDtoDAsync", 3020, cuMemcpyDtoDAsync_v2),
    WANT_V("cuMemsetD8", 3020, cuMemsetD8_v2),
    WANT(cuStreamCreate, 2000),
    WANT_V("cuStreamDestroy", 4000, cuStreamDestroy_v2),
    WANT(cuStreamSynchronize, 2000),
    WANT(cuEventCreate, 2000),
    WANT(cuEventRecord, 2000),
    WANT(cuEventSynchronize, 2000),
    WANT_V("cuEventDestroy", 4000, cuEventDestroy_v2),
    MAYBE_PT("cuMemAllocAsync", 11020, cuMemAllocAsync_ptsz),
    MAYBE_PT("cuMemFreeAsync", 11020, cuMemFreeAsync_ptsz),
    MAYBE_PT("cuMemAllocFromPoolAsync", 11020, cuMemAllocFromPoolAsync_ptsz),
    MAYBE_V("cuMemHostRegister", 6050, cuMemHostRegister_v2),
    MAYBE(cuMemHostUnregister, 4000),
    MAYBE_V("cuArrayCreate", 3020, cuArrayCreate_v2),
    MAYBE_V("cuArray3DCreate", 3020, cuArray3DCreate_v2),
    MAYBE(cuArrayDestroy, 2000),
    MAYBE(cuMipmappedArrayCreate, 5000),
    MAYBE(cuMipmappedArrayDestroy, 5000),
    MAYBE_V("cuStreamBeginCapture", 10010, cuStreamBeginCapture_v2),
    MAYBE(cuStreamEndCapture, 10000),
    MAYBE(cuGraphCreate, 10000),
    MAYBE(cuGraphDestroy, 10000),
    MAYBE(cuGraphAddMemAllocNode, 11040),
    MAYBE(cuGraphAddMemFreeNode, 11040),
    MAYBE(cuGraphAddNode, 12020),
    MAYBE_V("cuGraphAddNode", 12030, cuGraphAddNode_v2),
    MAYBE(cuGraphInstantiateWithFlags, 11040),
    MAYBE(cuGraphInstantiateWithParams, 12000),
    MAYBE_PT("cuGraphInstantiateWithParams", 12000, cuGraphInstantiateWithParams_ptsz),
    MAYBE(cuGraphLaunch, 10000),
    MAYBE_PT("cuGraphLaunch", 10000, cuGraphLaunch_ptsz),
    MAYBE(cuGraphExecDestroy, 10000),
};

static CUresult ask(const char *name, int version, cuuint64_t flags, void **fn,
                    CUdriverProcAddressQueryResult *status) {
    if (proc5) return proc5(name, fn, version, flags, status);
    CUresult r = proc4(name, fn, version, flags);
    if (status)
        *status = r == CUDA_SUCCESS ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    return r;
}

static cudaError_t load_driver(void) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return cudaErrorInsufficientDriver;
    void *self = NULL;
    void *v2 = dlsym(h, "cuGetProcAddress_v2");
    if (v2) {
        proc5 = (resolver5)v2;
        if (proc5("cuGetProcAddress", &self, 12000, 0, NULL) == CUDA_SUCCESS && self)
            proc5 = (resolver5)self;
    } else {
        void *v1 = dlsym(h, "cuGetProcAddress");
        if (!v1) return cudaErrorInsufficientDriver;
        proc4 = (resolver4)v1;
        if (proc4("cuGetProcAddress", &self, 11030, 0) == CUDA_SUCCESS && self)
            proc4 = (resolver4)self;
    }
    for (size_t i = 0; i < sizeof wanted / sizeof wanted[0]; i++) {
        void *fn = NULL;
        if (ask(wanted[i].name, wanted[i].version, wanted[i].flags, &fn, NULL) != CUDA_SUCCESS)
            fn = NULL;
        if (!fn && wanted[i].required) return cudaErrorInsufficientDriver;
        memcpy((char *)&drv + wanted[i].offset, &fn, sizeof fn);
    }
    return cudaSuccess;
}

static void load_once_fn(void) { load_result = load_driver(); }

cudaError_t rt_load(void) {
    pthread_once(&load_once, load_once_fn);
    return load_result;
}

static void init_once_fn(void) {
    init_result = rt_load();
    if (init_result != cudaSuccess) return;
    int version = 0;
    if (drv.cuDriverGetVersion(&version) != CUDA_SUCCESS || version < 12000) {
        init_result = cudaErrorInsufficientDriver;
        return;
    }
    init_result = rt_from_driver(drv.cuInit(0));
}

cudaError_t rt_init(void) {
    pthread_once(&init_once, init_once_fn);
    return init_result;
}

cudaError_t rt_bind_device(int device) {
    if (device < 0 || device >= RT_MAX_DEVICES) return cudaErrorInvalidDevice;
    pthread_mutex_lock(&primary_lock);
    CUresult r = CUDA_SUCCESS;
    if (!retained[device]) {
        r = drv.cuDevicePrimaryCtxRetain(&primary[device], device);
        retained[device] = r == CUDA_SUCCESS;
    }
    CUcontext ctx = primary[device];
    pthread_mutex_unlock(&primary_lock);
    if (r != CUDA_SUCCESS) return rt_from_driver(r);
    return rt_from_driver(drv.cuCtxSetCurrent(ctx));
}

cudaError_t rt_context(void) {
    cudaError_t e = rt_init();
    if (e != cudaSuccess) return e;
    CUcontext current = NULL;
    CUresult r = drv.cuCtxGetCurrent(&current);
    if (r != CUDA_SUCCESS) return rt_from_driver(r);
    return current ? cudaSuccess : rt_bind_device(thread_device);
}

int rt_thread_device(void) { return thread_device; }
void rt_set_thread_device(int device) { thread_device = device; }

cudaError_t rt_entry_point(const char *symbol, void **fn, unsigned int version,
                           unsigned long long flags, cudaDriverEntryPointQueryResult *status) {
    cudaError_t e = rt_load();
    if (e != cudaSuccess) return e;
    if (!symbol || !fn) return cudaErrorInvalidValue;
    CUdriverProcAddressQueryResult s = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = ask(symbol, (int)version, flags, fn, &s);
    if (r == CUDA_ERROR_NOT_FOUND) {
        *fn = NULL;
        if (status) *status = (cudaDriverEntryPointQueryResult)s;
        return cudaErrorSymbolNotFound;
    }
    if (r == CUDA_SUCCESS && status) *status = cudaDriverEntryPointSuccess;
    return rt_from_driver(r);
}

cudaError_t rt_error(cudaError_t e) {
    if (e != cudaSuccess) last_error = e;
    return e;
}

cudaError_t rt_take_last_error(bool reset) {
    cudaError_t e = last_error;
    if (reset) last_error = cudaSuccess;
    return e;
}
