// link: driver
// Contexts: destroying a context (or releasing / resetting a primary context) frees
// everything made in it; the per-thread context stack; several devices; calls before cuInit.
#include <stdint.h>

#include "sim_util.h"

#define MiB (1024ull * 1024ull)

// Makes one object of every kind in the current context; returns them through the pointers.
static void fill_context(CUdeviceptr *dev, void **pinned, CUstream *s, CUevent *e, CUmodule *m,
                         CUarray *arr, CUdeviceptr *managed, CUdeviceptr *async) {
    size_t pitch;
    CUdeviceptr pitched;
    CHECK(cuMemAlloc_v2(dev, MiB));
    CHECK(cuMemAllocPitch_v2(&pitched, &pitch, 1000, 100, 4));
    CHECK(cuMemAllocManaged(managed, MiB, CU_MEM_ATTACH_GLOBAL));
    CHECK(cuMemAllocHost_v2(pinned, 4096));
    CHECK(cuStreamCreate(s, 0));
    CHECK(cuMemAllocAsync(async, MiB, *s));
    CHECK(cuEventCreate(e, 0));
    CHECK(cuModuleLoadData(m, "simcuda"));
    CUDA_ARRAY_DESCRIPTOR desc = {256, 256, CU_AD_FORMAT_FLOAT, 1};
    CHECK(cuArrayCreate_v2(arr, &desc));
}

static int destroy(int argc, char **argv) {
    (void)argc, (void)argv;
    CUcontext primary = setup();
    CUcontext ctx, current;
    CUdeviceptr dev, managed, async;
    void *pinned;
    CUstream s;
    CUevent e;
    CUmodule m;
    CUarray arr;
    CUfunction f;
    size_t before = free_bytes();
    CHECK(cuCtxCreate_v2(&ctx, 0, 0));
    CHECK(cuCtxGetCurrent(&current));
    printf("created_is_current %d\n", current == ctx);
    fill_context(&dev, &pinned, &s, &e, &m, &arr, &managed, &async);
    put_u64("used_in_context", before - free_bytes());
    CHECK(cuCtxDestroy_v2(ctx));
    CHECK(cuCtxGetCurrent(&current));
    printf("popped_to_primary %d\n", current == primary);
    put_u64("used_after_destroy", before - free_bytes());
    put_result("free_device", cuMemFree_v2(dev));
    put_result("free_managed", cuMemFree_v2(managed));
    put_result("free_async", cuMemFree_v2(async));
    put_result("free_host", cuMemFreeHost(pinned));
    put_result("stream", cuStreamSynchronize(s));
    put_result("event", cuEventQuery(e));
    put_result("module", cuModuleGetFunction(&f, m, "fill_u32"));
    put_result("array", cuArrayDestroy(arr));
    put_result("destroy_again", cuCtxDestroy_v2(ctx));
    put_result("set_destroyed", cuCtxSetCurrent(ctx));
    put_result("destroy_primary", cuCtxDestroy_v2(primary));
    return 0;
}

static int primary(int argc, char **argv) {
    (void)argc, (void)argv;
    CUcontext ctx, again;
    CUdeviceptr p, q;
    unsigned int flags;
    int active;
    CHECK(cuInit(0));
    CHECK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    put_u64("active_before", (unsigned long long)active);
    put_result("release_unretained", cuDevicePrimaryCtxRelease_v2(0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CHECK(cuDevicePrimaryCtxRetain(&again, 0));
    printf("same_handle %d\n", ctx == again);
    CHECK(cuCtxSetCurrent(ctx));
    size_t before = free_bytes();
    CHECK(cuMemAlloc_v2(&p, MiB));
    CHECK(cuDevicePrimaryCtxRelease_v2(0));
    put_u64("used_after_first_release", before - free_bytes());
    CHECK(cuDevicePrimaryCtxReset_v2(0));
    put_u64("used_after_reset", before - free_bytes());
    put_result("free_after_reset", cuMemFree_v2(p));
    CHECK(cuMemAlloc_v2(&q, MiB));
    put_result("set_flags_v1_while_active", cuDevicePrimaryCtxSetFlags(0, CU_CTX_MAP_HOST));
    put_result("set_flags_v2_while_active", cuDevicePrimaryCtxSetFlags_v2(0, CU_CTX_MAP_HOST));
    CHECK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    printf("state %u %d\n", flags, active);
    CHECK(cuDevicePrimaryCtxRelease(0));
    CHECK(cuDevicePrimaryCtxGetState(0, &flags, &active));
    put_u64("active_after_last_release", (unsigned long long)active);
    put_result("alloc_in_released", cuMemAlloc_v2(&p, 256));
    CHECK(cuDevicePrimaryCtxRetain(&again, 0));
    put_u64("used_after_retain_again", before - free_bytes());
    put_result("free_from_released", cuMemFree_v2(q));
    return 0;
}

static int stack(int argc, char **argv) {
    (void)argc, (void)argv;
    CUcontext a, b, got;
    CUdevice dev = -1;
    CHECK(cuInit(0));
    CHECK(cuCtxGetCurrent(&got));
    printf("initially_none %d\n", got == NULL);
    CUdeviceptr p;
    put_result("alloc_without_context", cuMemAlloc_v2(&p, 256));
    put_result("pop_empty", cuCtxPopCurrent_v2(&got));
    CHECK(cuCtxCreate_v2(&a, 0, 0));
    CHECK(cuCtxCreate_v2(&b, 0, 0));
    CHECK(cuCtxGetCurrent(&got));
    printf("top_is_b %d\n", got == b);
    CHECK(cuCtxPopCurrent_v2(&got));
    printf("popped_b %d\n", got == b);
    CHECK(cuCtxGetCurrent(&got));
    printf("then_a %d\n", got == a);
    CHECK(cuCtxPushCurrent_v2(b));
    CHECK(cuCtxSetCurrent(a));
    CHECK(cuCtxPopCurrent_v2(&got));
    printf("set_replaced_top %d\n", got == a);
    CHECK(cuCtxGetCurrent(&got));
    printf("below_is_a %d\n", got == a);
    CHECK(cuCtxSetCurrent(NULL));
    CHECK(cuCtxGetCurrent(&got));
    printf("set_null_pops %d\n", got == NULL);
    CHECK(cuCtxGetDevice_v2(&dev, b));
    put_u64("device_of_b", (unsigned long long)dev);
    unsigned long long id_a, id_b;
    CHECK(cuCtxGetId(a, &id_a));
    CHECK(cuCtxGetId(b, &id_b));
    printf("distinct_ids %d\n", id_a != id_b);
    put_result("sync_v2", cuCtxSynchronize_v2(b));
    put_result("get_device_without_context", cuCtxGetDevice(&dev));
    return 0;
}

static int devices(int argc, char **argv) {
    (void)argc, (void)argv;
    int count = 0;
    CHECK(cuInit(0));
    CHECK(cuDeviceGetCount(&count));
    put_u64("count", (unsigned long long)count);
    for (int d = 0; d < count; d++) {
        CUdevice dev;
        CUcontext ctx;
        CUdeviceptr p;
        char name[64];
        size_t total;
        int major, pools, vmm;
        CUuuid uuid;
        CHECK(cuDeviceGet(&dev, d));
        CHECK(cuDeviceGetName(name, sizeof name, dev));
        CHECK(cuDeviceTotalMem_v2(&total, dev));
        CHECK(cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev));
        CHECK(cuDeviceGetAttribute(&pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, dev));
        CHECK(cuDeviceGetAttribute(&vmm, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, dev));
        CHECK(cuDeviceGetUuid_v2(&uuid, dev));
        CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
        CHECK(cuCtxSetCurrent(ctx));
        CHECK(cuMemAlloc_v2(&p, 4096));
        printf("device %d name %s total %zu cc %d pools %d vmm %d uuid_last %d first_alloc 0x%llx\n",
               d, name, total, major, pools, vmm, uuid.bytes[15], p);
    }
    CUdevice dev;
    put_result("get_out_of_range", cuDeviceGet(&dev, count));
    int v;
    put_result("attribute_bad_device", cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_WARP_SIZE, count));
    CHECK(cuDeviceGetAttribute(&v, (CUdevice_attribute)100000, 0));
    put_u64("unknown_attribute", (unsigned long long)v);
    return 0;
}

// Entry points called before cuInit, and the error strings.
static int before_init(int argc, char **argv) {
    (void)argc, (void)argv;
    CUdeviceptr p;
    int count = -1, version = 0;
    const char *text = NULL;
    const void *table = (const void *)1;
    put_result("alloc", cuMemAlloc_v2(&p, 256));
    put_result("device_count", cuDeviceGetCount(&count));
    put_result("driver_version", cuDriverGetVersion(&version));
    put_u64("version", (unsigned long long)version);
    put_result("error_name", cuGetErrorName(CUDA_ERROR_OUT_OF_MEMORY, &text));
    printf("name %s\n", text);
    put_result("error_string", cuGetErrorString(CUDA_ERROR_INVALID_VALUE, &text));
    printf("string %s\n", text);
    put_result("error_name_unknown", cuGetErrorName((CUresult)12345, &text));
    put_result("export_table", cuGetExportTable(&table, NULL));
    printf("export_table_null %d\n", table == NULL);
    put_result("init_bad_flags", cuInit(1));
    put_result("init", cuInit(0));
    put_result("device_count_after", cuDeviceGetCount(&count));
    put_u64("count", (unsigned long long)count);
    return 0;
}

int main(int argc, char **argv) {
    static const struct subcommand cmds[] = {
        {"destroy", destroy}, {"primary", primary},         {"stack", stack},
        {"devices", devices}, {"before-init", before_init},
    };
    return DISPATCH(cmds);
}
