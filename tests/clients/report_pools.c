// link: driver
// Stream-ordered memory pools' own lifetimes, picked by the first argument. Each mode makes a
// pool in make_pool() whose release threshold keeps freed memory reserved (UINT64_MAX), takes
// 4 MiB from it on a stream and gives them back, and synchronizes:
//   leak    the pool is never destroyed: 4 MiB stay reserved until the process ends;
//   clean   the pool is destroyed;
//   import  the pool is exported and imported (import_pool); the exporter's pool is destroyed,
//           the imported one never is;
//   outstanding  the pool is destroyed while an allocation from it is outstanding (the driver
//           keeps it until that is freed), then the allocation is freed;
//   trimmed like leak, but the pool is trimmed to nothing after the synchronization (prints
//           "trimmed N", what it reserves after), and a trim of a destroyed pool is refused;
//   failed  refused pool calls only (properties the driver rejects, a destroy of the default
//           pool, a second destroy of a destroyed pool): no pool is ever left alive.
// Prints "reserved N" as the pool says after the synchronization, and each refused call's
// result.
#include <stdint.h>
#include <unistd.h>
#include "sim_util.h"

#define SIZE (4u << 20)

__attribute__((noinline)) CUmemoryPool make_pool(CUmemAllocationHandleType handles) {
    CUmemPoolProps props = pool_props(0, handles);
    CUmemoryPool pool;
    CHECK(cuMemPoolCreate(&pool, &props));
    cuuint64_t keep = UINT64_MAX;
    CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep));
    return pool;
}

__attribute__((noinline)) CUmemoryPool import_pool(int fd) {
    CUmemoryPool imported;
    CHECK(cuMemPoolImportFromShareableHandle(&imported, (void *)(intptr_t)fd,
                                             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    return imported;
}

static void use(CUmemoryPool pool, CUstream s) {
    CUdeviceptr p = 0;
    CHECK(cuMemAllocFromPoolAsync(&p, SIZE, pool, s));
    CHECK(cuMemsetD8Async(p, 7, SIZE, s));
    CHECK(cuMemFreeAsync(p, s));
    CHECK(cuStreamSynchronize(s));
    cuuint64_t reserved = 0;
    CHECK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
    printf("reserved %llu\n", (unsigned long long)reserved);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "clean";
    setup();
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    if (strcmp(mode, "failed") == 0) {
        CUmemPoolProps bad = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
        bad.allocType = CU_MEM_ALLOCATION_TYPE_INVALID;
        CUmemoryPool pool = NULL;
        printf("bad properties: %d\n", (int)cuMemPoolCreate(&pool, &bad));
        CUmemoryPool def = NULL;
        CHECK(cuDeviceGetDefaultMemPool(&def, 0));
        printf("default pool: %d\n", (int)cuMemPoolDestroy(def));
        CUmemoryPool once = make_pool(CU_MEM_HANDLE_TYPE_NONE);
        CHECK(cuMemPoolDestroy(once));
        printf("second destroy: %d\n", (int)cuMemPoolDestroy(once));
    } else if (strcmp(mode, "outstanding") == 0) {
        CUmemoryPool pool = make_pool(CU_MEM_HANDLE_TYPE_NONE);
        CUdeviceptr p = 0;
        CHECK(cuMemAllocFromPoolAsync(&p, SIZE, pool, s));
        CHECK(cuStreamSynchronize(s));
        CHECK(cuMemPoolDestroy(pool));
        CHECK(cuMemsetD8Async(p, 7, SIZE, s));
        CHECK(cuMemFreeAsync(p, s));
        CHECK(cuStreamSynchronize(s));
    } else if (strcmp(mode, "import") == 0) {
        CUmemoryPool pool = make_pool(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
        use(pool, s);
        int fd = -1;
        CHECK(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
        CUmemoryPool imported = import_pool(fd);
        close(fd);
        (void)imported;
        CHECK(cuMemPoolDestroy(pool));
    } else if (strcmp(mode, "trimmed") == 0) {
        CUmemoryPool pool = make_pool(CU_MEM_HANDLE_TYPE_NONE);
        use(pool, s);
        CHECK(cuMemPoolTrimTo(pool, 0));
        cuuint64_t reserved = 1;
        CHECK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
        printf("trimmed %llu\n", (unsigned long long)reserved);
        CUmemoryPool gone = make_pool(CU_MEM_HANDLE_TYPE_NONE);
        CHECK(cuMemPoolDestroy(gone));
        printf("trim of a destroyed pool: %d\n", (int)cuMemPoolTrimTo(gone, 0));
    } else {
        CUmemoryPool pool = make_pool(CU_MEM_HANDLE_TYPE_NONE);
        use(pool, s);
        if (strcmp(mode, "clean") == 0) CHECK(cuMemPoolDestroy(pool));
    }
    CHECK(cuStreamDestroy_v2(s));
    puts("done");
    return 0;
}
