// link: driver
// VMM handles with more than one reference, as NCCL and PyTorch use them: retained handles
// (cuMemRetainAllocationHandle, one cuMemRelease each), handles imported from a shareable
// handle, and multicast objects.
//
//   report_vmm_refs clean   NCCL's own sequences (ncclCuMemAlloc / ncclCuMemFree, a retain to
//                           inspect a live buffer, an export imported back and mapped twice, an
//                           NVLS multicast object): everything released, nothing to report.
//   report_vmm_refs leak    the same with one mistake each: a retain never released (the
//                           buffer's memory stays), an import never released, a multicast
//                           object never released, and a handle released once too often.
//   report_vmm_refs devices (SIMCUDA_DEVICES=2) physical memory created on device 1 while
//                           device 0's context is current, and released.
#include <stdint.h>
#include <unistd.h>
#include "sim_util.h"
#include "../../shim/include/gpuleak.h"

static size_t gran;

static CUmemAllocationProp device_prop(void) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    return prop;
}

static void map_rw(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle h) {
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = 0;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    CHECK(cuMemMap(va, size, 0, h, 0));
    CHECK(cuMemSetAccess(va, size, &access, 1));
}

// ncclCuMemAlloc: create, reserve, map; the handle is kept (NCCL retains it again to free).
__attribute__((noinline)) CUdeviceptr buffer_alloc(size_t size) {
    CUmemAllocationProp prop = device_prop();
    CUmemGenericAllocationHandle h;
    CUdeviceptr va;
    CHECK(cuMemCreate(&h, size, &prop, 0));
    CHECK(cuMemAddressReserve(&va, size, gran, 0, 0));
    map_rw(va, size, h);
    return va;
}

// ncclCuMemFree: the handle is found again by retaining it, and released twice (the retain and
// the creation). Returns the (now released) handle.
__attribute__((noinline)) CUmemGenericAllocationHandle buffer_free(CUdeviceptr va, size_t size) {
    CUmemGenericAllocationHandle h;
    CHECK(cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)va));
    CHECK(cuMemRelease(h));
    CHECK(cuMemUnmap(va, size));
    CHECK(cuMemRelease(h));
    CHECK(cuMemAddressFree(va, size));
    return h;
}

// ncclCuMemGetAddressRange: a retain to read the handle's properties, released at once.
__attribute__((noinline)) void inspect(CUdeviceptr va, int release) {
    CUmemGenericAllocationHandle h;
    CUmemAllocationProp prop;
    CHECK(cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)va));
    CHECK(cuMemGetAllocationPropertiesFromHandle(&prop, h));
    if (release) CHECK(cuMemRelease(h));
}

// A peer's buffer: its exported handle imported and mapped at an address of our own.
__attribute__((noinline)) CUmemGenericAllocationHandle import_peer(CUdeviceptr peer, CUdeviceptr *va) {
    CUmemGenericAllocationHandle h, imported;
    int fd = -1;
    CHECK(cuMemRetainAllocationHandle(&h, (void *)(uintptr_t)peer));
    CHECK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
    CHECK(cuMemRelease(h));
    CHECK(cuMemImportFromShareableHandle(&imported, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    close(fd);
    CHECK(cuMemAddressReserve(va, gran, gran, 0, 0));
    map_rw(*va, gran, imported);
    return imported;
}

__attribute__((noinline)) void unmap_peer(CUmemGenericAllocationHandle imported, CUdeviceptr va, int release) {
    CHECK(cuMemUnmap(va, gran));
    if (release) CHECK(cuMemRelease(imported));
    CHECK(cuMemAddressFree(va, gran));
}

// NVLS: a multicast object, one device's memory bound to it, the object mapped.
__attribute__((noinline)) void multicast(CUdevice dev, int release) {
    CUmulticastObjectProp mc;
    memset(&mc, 0, sizeof mc);
    mc.numDevices = 1;
    mc.size = gran;
    mc.handleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    size_t mc_gran = 0;
    CHECK(cuMulticastGetGranularity(&mc_gran, &mc, CU_MULTICAST_GRANULARITY_RECOMMENDED));
    CUmemGenericAllocationHandle group, mem;
    CHECK(cuMulticastCreate(&group, &mc));
    CHECK(cuMulticastAddDevice(group, dev));
    CUmemAllocationProp prop = device_prop();
    CHECK(cuMemCreate(&mem, gran, &prop, 0));
    CHECK(cuMulticastBindMem(group, 0, mem, 0, gran, 0));
    CUdeviceptr va;
    CHECK(cuMemAddressReserve(&va, gran, mc_gran, 0, 0));
    map_rw(va, gran, group);
    CHECK(cuMulticastUnbind(group, dev, 0, gran));
    CHECK(cuMemUnmap(va, gran));
    CHECK(cuMemAddressFree(va, gran));
    CHECK(cuMemRelease(mem));
    if (release) CHECK(cuMemRelease(group));
}

// Released once more than it was created and retained: the driver refuses the last one.
__attribute__((noinline)) void release_too_often(void) {
    CUmemGenericAllocationHandle h = buffer_free(buffer_alloc(gran), gran);
    CUresult r = cuMemRelease(h);
    printf("third release: %d\n", r);
}

// Physical memory on device 1, made while device 0's context is current.
__attribute__((noinline)) CUmemGenericAllocationHandle on_device_1(size_t size) {
    CUmemAllocationProp prop = device_prop();
    prop.location.id = 1;
    CUmemGenericAllocationHandle h;
    CHECK(cuMemCreate(&h, size, &prop, 0));
    return h;
}

int main(int argc, char **argv) {
    int leak = argc > 1 && strcmp(argv[1], "leak") == 0;
    int devices = argc > 1 && strcmp(argv[1], "devices") == 0;
    setup();
    CUdevice dev = 0;
    CUmemAllocationProp prop = device_prop();
    CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
    if (devices) {
        CUmemGenericAllocationHandle h = on_device_1(3 * gran);
        printf("live on 0: %llu, on 1: %llu\n", (unsigned long long)GPULEAK_LIVE_BYTES(0),
               (unsigned long long)GPULEAK_LIVE_BYTES(1));
        CHECK(cuMemRelease(h));
        puts("done");
        return 0;
    }

    // Device memory live by the shim's own accounting (GPULEAK_LIVE=1), 0 without the shim.
    CUdeviceptr a = buffer_alloc(2 * gran);
    inspect(a, !leak);
    printf("live after inspect: %llu\n", (unsigned long long)GPULEAK_LIVE_BYTES(-1));
    CUdeviceptr b = buffer_alloc(gran);
    CUdeviceptr peer_va;
    CUmemGenericAllocationHandle imported = import_peer(b, &peer_va);
    unmap_peer(imported, peer_va, !leak);
    buffer_free(b, gran);
    buffer_free(a, 2 * gran);
    multicast(dev, !leak);
    printf("live at end: %llu\n", (unsigned long long)GPULEAK_LIVE_BYTES(-1));
    if (leak) release_too_often();
    puts("done");
    return 0;
}
