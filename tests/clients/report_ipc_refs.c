// link: driver
// Memory of another process mapped here: pool allocations shared through an exported pool
// (cuMemPoolImportPointer, freed by cuMemFree or cuMemFreeAsync, as cuda.core's IPC buffers and
// cudaMemPoolImportPointer users do) and IPC handles (cuIpcOpenMemHandle). The simulator shares
// within one process, so the "peer" is this process's own pool and allocation.
//
//   report_ipc_refs clean  a pointer imported twice (the driver maps it once and counts two
//                          references) and freed once with cuMemFreeAsync and once with
//                          cuMemFree; an IPC handle opened twice and closed twice; nothing to
//                          report. Prints what the importer sees through the alias.
//   report_ipc_refs leak   the same with one mistake each: an imported pointer never freed, an
//                          IPC handle opened twice and closed once, and an imported pointer
//                          closed like an IPC mapping (refused by the driver) before its free.
#include <stdint.h>
#include <unistd.h>
#include "sim_util.h"
#include "../../shim/include/gpuleak.h"

#define SIZE (1u << 20)

// The exporter: a shareable pool, one allocation in it, the pool's descriptor and the pointer's
// export data.
static CUmemoryPool exporter_pool(void) {
    CUmemPoolProps props = pool_props(0, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    CUmemoryPool pool;
    CHECK(cuMemPoolCreate(&pool, &props));
    return pool;
}

// The importer: the pool opened from its descriptor, the pointer imported from its export data.
__attribute__((noinline)) CUdeviceptr import_buffer(CUmemoryPool imported, CUmemPoolPtrExportData *data) {
    CUdeviceptr p = 0;
    CHECK(cuMemPoolImportPointer(&p, imported, data));
    return p;
}

__attribute__((noinline)) CUdeviceptr open_ipc(CUipcMemHandle h) {
    CUdeviceptr p = 0;
    CHECK(cuIpcOpenMemHandle_v2(&p, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    return p;
}

// Closes an imported pool pointer as if it were an IPC mapping: the driver refuses.
__attribute__((noinline)) void close_like_ipc(CUdeviceptr p) {
    printf("close of an imported pointer: %d\n", (int)cuIpcCloseMemHandle(p));
}

int main(int argc, char **argv) {
    int leak = argc > 1 && strcmp(argv[1], "leak") == 0;
    setup();
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));

    CUmemoryPool pool = exporter_pool();
    CUdeviceptr mine = 0;
    CHECK(cuMemAllocFromPoolAsync(&mine, SIZE, pool, s));
    CHECK(cuMemsetD32Async(mine, 0x5eed, SIZE / 4, s));
    CHECK(cuStreamSynchronize(s));
    int fd = -1;
    CHECK(cuMemPoolExportToShareableHandle(&fd, pool, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CUmemPoolPtrExportData data;
    CHECK(cuMemPoolExportPointer(&data, mine));
    CUmemoryPool imported;
    CHECK(cuMemPoolImportFromShareableHandle(&imported, (void *)(intptr_t)fd,
                                             CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    close(fd);

    CUdeviceptr a = import_buffer(imported, &data);
    CUdeviceptr b = import_buffer(imported, &data);
    uint32_t seen = 0;
    CHECK(cuMemcpyDtoH_v2(&seen, a + 64, sizeof seen));
    printf("same address: %d, seen 0x%x\n", a == b, seen);
    printf("live while imported: %llu\n", (unsigned long long)GPULEAK_LIVE_BYTES(-1));
    if (leak) {
        close_like_ipc(a);
        CHECK(cuMemFree_v2(a));
    } else {
        CHECK(cuMemFreeAsync(a, s));
        CHECK(cuMemFree_v2(b));
    }

    CUdeviceptr dev = 0;
    CHECK(cuMemAlloc_v2(&dev, 4096));
    CUipcMemHandle ih;
    CHECK(cuIpcGetMemHandle(&ih, dev));
    CUdeviceptr x = open_ipc(ih), y = open_ipc(ih);
    printf("same ipc address: %d\n", x == y);
    CHECK(cuIpcCloseMemHandle(x));
    if (!leak) CHECK(cuIpcCloseMemHandle(y));
    CHECK(cuMemFree_v2(dev));

    CHECK(cuMemFreeAsync(mine, s));
    CHECK(cuStreamSynchronize(s));
    CHECK(cuStreamDestroy_v2(s));
    CHECK(cuMemPoolDestroy(imported));
    CHECK(cuMemPoolDestroy(pool));
    printf("live at end: %llu\n", (unsigned long long)GPULEAK_LIVE_BYTES(-1));
    puts("done");
    return 0;
}
