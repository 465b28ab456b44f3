// link: driver
// Stream-ordered allocation: pool reuse and release at synchronisation, the release
// threshold, trimming, created pools, per-thread variants, allocation under capture and
// sharing a pool's allocations (export, import, free of an imported pointer).
#include <stdint.h>
#include <unistd.h>
#include "sim_util.h"

#define MiB (1024ull * 1024ull)

static cuuint64_t attr(CUmemoryPool pool, CUmemPool_attribute a) {
    cuuint64_t v = 0;
    CHECK(cuMemPoolGetAttribute(pool, a, &v));
    return v;
}

static void put_pool(const char *when, CUmemoryPool pool) {
    printf("%s used %llu reserved %llu free %zu\n", when,
           (unsigned long long)attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT),
           (unsigned long long)attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), free_bytes());
}

// Default threshold 0: a freed block stays reserved (and is reused) until a synchronisation.
static int reuse(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUmemoryPool pool, current;
    CUstream s;
    CHECK(cuDeviceGetDefaultMemPool(&pool, 0));
    CHECK(cuDeviceGetMemPool(&current, 0));
    printf("current_is_default %d\n", pool == current);
    CHECK(cuStreamCreate(&s, 0));
    put_pool("start", pool);
    CUdeviceptr a, b;
    CHECK(cuMemAllocAsync(&a, MiB, s));
    put_pool("allocated", pool);
    CHECK(cuMemFreeAsync(a, s));
    put_pool("freed", pool);
    CHECK(cuMemAllocAsync(&b, MiB, s));
    printf("reused %d\n", a == b);
    put_result("free_sync", cuMemFree_v2(b));
    put_result("free_twice", cuMemFreeAsync(b, s));
    CHECK(cuStreamSynchronize(s));
    put_pool("synchronized", pool);
    printf("high used %llu reserved %llu\n",
           (unsigned long long)attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH),
           (unsigned long long)attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH));
    cuuint64_t zero = 0;
    CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH, &zero));
    put_u64("high_used_after_reset", attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH));
    put_result("set_used_current", cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &zero));
    return 0;
}

static int threshold(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUmemoryPool pool;
    CHECK(cuDeviceGetDefaultMemPool(&pool, 0));
    cuuint64_t keep = 4 * MiB;
    CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    put_u64("threshold", attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD));
    CUdeviceptr a, b;
    CHECK(cuMemAllocAsync(&a, 2 * MiB, NULL));
    CHECK(cuMemAllocAsync(&b, 3 * MiB, NULL));
    CHECK(cuMemFreeAsync(a, NULL));
    CHECK(cuMemFreeAsync(b, NULL));
    CHECK(cuCtxSynchronize());
    put_pool("synchronized", pool);
    CHECK(cuMemPoolTrimTo(pool, 0));
    put_pool("trimmed", pool);
    return 0;
}

static int created_pool(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUmemPoolProps props = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
    CUmemoryPool pool, def, current;
    CHECK(cuMemPoolCreate(&pool, &props));
    CHECK(cuDeviceGetDefaultMemPool(&def, 0));
    printf("distinct %d\n", pool != def);
    size_t start = free_bytes();
    CUdeviceptr a, b;
    CHECK(cuMemAllocFromPoolAsync(&a, MiB, pool, CU_STREAM_LEGACY));
    CHECK(cuDeviceSetMemPool(0, pool));
    CHECK(cuDeviceGetMemPool(&current, 0));
    printf("set_current %d\n", current == pool);
    CHECK(cuMemAllocAsync(&b, MiB, NULL));
    put_pool("two_allocations", pool);
    put_result("destroy_default", cuMemPoolDestroy(def));
    put_result("destroy", cuMemPoolDestroy(pool));
    CHECK(cuDeviceGetMemPool(&current, 0));
    printf("current_back_to_default %d\n", current == def);
    int v = 77, back = 0;
    CHECK(cuMemcpyHtoD_v2(a, &v, sizeof v));
    CHECK(cuMemcpyDtoH_v2(&back, a, sizeof back));
    printf("usable_after_destroy %d\n", back == 77);
    CHECK(cuMemFreeAsync(a, NULL));
    CHECK(cuMemFreeAsync(b, NULL));
    printf("freed_to_device %d\n", free_bytes() == start);
    CUdeviceptr c;
    put_result("alloc_from_destroyed", cuMemAllocFromPoolAsync(&c, MiB, pool, NULL));
    props.location.id = 3;
    put_result("create_bad_device", cuMemPoolCreate(&pool, &props));
    return 0;
}

static int per_thread(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUdeviceptr a, b;
    size_t start = free_bytes();
    put_result("alloc_ptsz_per_thread", cuMemAllocAsync_ptsz(&a, 4096, CU_STREAM_PER_THREAD));
    put_result("alloc_ptsz_null", cuMemAllocAsync_ptsz(&b, 4096, NULL));
    put_result("free_ptsz", cuMemFreeAsync_ptsz(a, CU_STREAM_PER_THREAD));
    put_result("free", cuMemFreeAsync(b, CU_STREAM_LEGACY));
    put_result("sync_ptsz", cuStreamSynchronize_ptsz(NULL));
    printf("released %d\n", free_bytes() == start);
    put_result("alloc_zero", cuMemAllocAsync(&a, 0, NULL));
    put_result("bad_stream", cuMemAllocAsync(&a, 4096, (CUstream)(uintptr_t)0x1000));
    return 0;
}

// Under capture an allocation creates a graph node, not memory.
static int capture(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUstream s;
    CUstreamCaptureStatus st;
    CUgraph g = NULL;
    CUdeviceptr outside, inside, inside2;
    CHECK(cuStreamCreate(&s, 0));
    CHECK(cuMemAlloc_v2(&outside, 4096));
    size_t start = free_bytes();
    put_result("begin_legacy", cuStreamBeginCapture_v2(CU_STREAM_LEGACY, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL));
    put_result("begin_twice", cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuStreamIsCapturing(s, &st));
    put_u64("capturing", st);
    CHECK(cuStreamIsCapturing(NULL, &st));
    put_u64("null_capturing", st);
    put_result("alloc_in_capture", cuMemAllocAsync(&inside, 1 << 20, s));
    put_ptr("graph_address", inside);
    printf("no_memory_taken %d\n", free_bytes() == start);
    put_result("copy_to_graph_address", cuMemcpyHtoD_v2(inside, "x", 1));
    put_result("free_in_capture", cuMemFreeAsync(inside, s));
    put_result("free_outside_pointer_in_capture", cuMemFreeAsync(outside, s));
    put_result("end", cuStreamEndCapture(s, &g));
    printf("graph %d\n", g != NULL);
    put_result("graph_destroy", cuGraphDestroy(g));
    put_result("graph_destroy_again", cuGraphDestroy(g));
    put_result("end_not_capturing", cuStreamEndCapture(s, &g));

    CHECK(cuStreamBeginCapture(s));
    put_result("alloc_in_second_capture", cuMemAllocAsync(&inside2, 4096, s));
    put_result("sync_in_capture", cuStreamSynchronize(s));
    CHECK(cuStreamIsCapturing(s, &st));
    put_u64("invalidated", st);
    put_result("end_invalidated", cuStreamEndCapture(s, &g));
    printf("graph_after_invalidation %d\n", g == NULL);
    CHECK(cuStreamIsCapturing(s, &st));
    put_u64("capturing_after_end", st);
    put_result("free_outside_after_capture", cuMemFree_v2(outside));
    return 0;
}

// A shareable pool exported and imported back (same process), one allocation exported and
// imported twice: one alias address, two references, each freed by cuMemFree[Async].
static int share(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUmemPoolProps props = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
    CUmemoryPool plain, pool, imported;
    CHECK(cuMemPoolCreate(&plain, &props));
    int fd = -1;
    put_result("export_unshareable", cuMemPoolExportToShareableHandle(&fd, plain, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    props.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    CHECK(cuMemPoolCreate(&pool, &props));
    CHECK(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CHECK(cuMemPoolImportFromShareableHandle(&imported, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    close(fd);
    CUdeviceptr mine, a, b, c;
    put_result("alloc_from_imported", cuMemAllocFromPoolAsync(&c, MiB, imported, NULL));
    CHECK(cuMemAllocFromPoolAsync(&mine, MiB, pool, NULL));
    CUmemPoolPtrExportData data;
    CHECK(cuMemPoolExportPointer(&data, mine));
    put_result("import_into_exporter", cuMemPoolImportPointer(&a, pool, &data));
    CHECK(cuMemPoolImportPointer(&a, imported, &data));
    CHECK(cuMemPoolImportPointer(&b, imported, &data));
    printf("one_alias %d\n", a == b && a != mine);
    int v = 1234, back = 0;
    CHECK(cuMemcpyHtoD_v2(mine, &v, sizeof v));
    CHECK(cuMemcpyDtoH_v2(&back, a, sizeof back));
    printf("same_memory %d\n", back == v);
    CUdeviceptr base = 0;
    size_t size = 0;
    CHECK(cuMemGetAddressRange_v2(&base, &size, a + 16));
    printf("range %d %zu\n", base == a, size);
    put_result("ipc_close", cuIpcCloseMemHandle(a));
    put_result("free_async", cuMemFreeAsync(a, NULL));
    put_result("free", cuMemFree_v2(b));
    put_result("free_again", cuMemFree_v2(b));
    CHECK(cuMemFreeAsync(mine, NULL));
    put_result("export_freed", cuMemPoolExportPointer(&data, mine));
    put_result("import_freed", cuMemPoolImportPointer(&c, imported, &data));
    return 0;
}

int main(int argc, char **argv) {
    static const struct subcommand cmds[] = {
        {"reuse", reuse},           {"threshold", threshold},   {"created-pool", created_pool},
        {"per-thread", per_thread}, {"capture", capture},       {"share", share},
    };
    return DISPATCH(cmds);
}
