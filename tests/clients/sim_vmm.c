// link: driver
// Virtual memory management: aliasing mappings, physical memory that outlives its handle
// while mapped, retained handles, contiguous ranges built from several handles, and the
// errors of misuse.
#include "sim_util.h"

static CUmemAllocationProp device_prop(void) {
    CUmemAllocationProp prop;
    memset(&prop, 0, sizeof prop);
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = 0;
    return prop;
}

static CUresult read_write(CUdeviceptr ptr, size_t size) {
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = 0;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    return cuMemSetAccess(ptr, size, &access, 1);
}

// One handle mapped at two addresses: a write through one is read through the other.
static int alias(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUmemAllocationProp prop = device_prop();
    size_t gran = 0;
    CHECK(cuMemGetAllocationGranularity(&gran, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
    put_u64("granularity", gran);
    CUdeviceptr va;
    CUmemGenericAllocationHandle h;
    CHECK(cuMemAddressReserve(&va, 4 * gran, 0, 0, 0));
    CHECK(cuMemCreate(&h, gran, &prop, 0));
    CHECK(cuMemMap(va, gran, 0, h, 0));
    CHECK(cuMemMap(va + 2 * gran, gran, 0, h, 0));
    put_result("copy_before_access", cuMemcpyHtoD_v2(va, "x", 1));
    CHECK(read_write(va, gran));
    CHECK(read_write(va + 2 * gran, gran));
    unsigned long long flags = 0;
    CUmemLocation loc = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    CHECK(cuMemGetAccess(&flags, &loc, va + 100));
    put_u64("access_flags", flags);
    char in[64] = "written through the first mapping", out[64] = {0};
    CHECK(cuMemcpyHtoD_v2(va + 4096, in, sizeof in));
    CHECK(cuMemcpyDtoH_v2(out, va + 2 * gran + 4096, sizeof out));
    printf("alias %d\n", !strcmp(in, out));
    put_result("copy_to_unmapped", cuMemcpyHtoD_v2(va + gran, in, sizeof in));
    put_result("copy_past_mapping", cuMemcpyHtoD_v2(va + gran - 8, in, 16));
    CUmemAllocationProp got;
    CHECK(cuMemGetAllocationPropertiesFromHandle(&got, h));
    printf("properties %d\n", got.type == prop.type && got.location.id == 0);
    return 0;
}

// cuMemRelease before cuMemUnmap: the memory stays (and stays usable) until the unmap.
static int release_before_unmap(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUmemAllocationProp prop = device_prop();
    size_t gran = 2u << 20;
    CUdeviceptr va;
    CUmemGenericAllocationHandle h;
    put_u64("free_start", free_bytes());
    CHECK(cuMemAddressReserve(&va, gran, 0, 0, 0));
    put_u64("free_reserved", free_bytes());
    CHECK(cuMemCreate(&h, gran, &prop, 0));
    put_u64("free_created", free_bytes());
    CHECK(cuMemMap(va, gran, 0, h, 0));
    CHECK(read_write(va, gran));
    put_result("release", cuMemRelease(h));
    put_u64("free_released", free_bytes());
    put_result("release_again", cuMemRelease(h));
    put_result("map_released_handle", cuMemMap(va, gran, 0, h, 0));
    int v = 1234, back = 0;
    CHECK(cuMemcpyHtoD_v2(va, &v, sizeof v));
    CHECK(cuMemcpyDtoH_v2(&back, va, sizeof back));
    printf("usable_after_release %d\n", back == 1234);
    put_result("unmap", cuMemUnmap(va, gran));
    put_u64("free_unmapped", free_bytes());
    put_result("copy_after_unmap", cuMemcpyHtoD_v2(va, &v, sizeof v));
    put_result("address_free", cuMemAddressFree(va, gran));
    return 0;
}

// cuMemRetainAllocationHandle takes a reference that needs its own cuMemRelease.
static int retain(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUmemAllocationProp prop = device_prop();
    size_t gran = 2u << 20;
    CUdeviceptr va;
    CUmemGenericAllocationHandle h, again = 0;
    size_t start = free_bytes();
    CHECK(cuMemAddressReserve(&va, gran, 0, 0, 0));
    CHECK(cuMemCreate(&h, gran, &prop, 0));
    CHECK(cuMemMap(va, gran, 0, h, 0));
    CHECK(cuMemRetainAllocationHandle(&again, (void *)(uintptr_t)(va + 4096)));
    printf("same_handle %d\n", again == h);
    CHECK(cuMemUnmap(va, gran));
    CHECK(cuMemRelease(h));
    printf("kept_by_retain %d\n", free_bytes() == start - gran);
    CHECK(cuMemRelease(again));
    printf("freed_after_both %d\n", free_bytes() == start);
    return 0;
}

// A range built from three handles, as expandable segments do; a copy crosses the seams.
static int expandable(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUmemAllocationProp prop = device_prop();
    size_t gran = 2u << 20;
    CUdeviceptr va;
    CUmemGenericAllocationHandle h[3];
    CHECK(cuMemAddressReserve(&va, 8 * gran, 0, 0, 0));
    for (int i = 0; i < 3; i++) {
        CHECK(cuMemCreate(&h[i], gran, &prop, 0));
        CHECK(cuMemMap(va + (size_t)i * gran, gran, 0, h[i], 0));
        CHECK(cuMemRelease(h[i]));
    }
    CHECK(read_write(va, 3 * gran));
    static unsigned char in[3u << 20], out[3u << 20];
    for (size_t i = 0; i < sizeof in; i++) in[i] = (unsigned char)(i * 13 + i / 4096);
    CHECK(cuMemcpyHtoD_v2(va + gran / 2, in, sizeof in));
    CHECK(cuMemcpyDtoH_v2(out, va + gran / 2, sizeof out));
    printf("across_handles %d\n", !memcmp(in, out, sizeof in));
    CHECK(cuMemsetD32_v2(va + gran - 8, 0x01020304u, 4));
    unsigned int words[4];
    CHECK(cuMemcpyDtoH_v2(words, va + gran - 8, sizeof words));
    printf("memset_across_handles %d\n", words[0] == 0x01020304u && words[3] == 0x01020304u);
    put_result("set_access_with_gap", read_write(va, 4 * gran));
    put_result("address_free_while_mapped", cuMemAddressFree(va, 8 * gran));
    put_result("unmap_partial", cuMemUnmap(va, gran / 2));
    put_result("unmap_all", cuMemUnmap(va, 3 * gran));
    put_result("address_free", cuMemAddressFree(va, 8 * gran));
    return 0;
}

static int errors(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUmemAllocationProp prop = device_prop();
    size_t gran = 2u << 20;
    CUdeviceptr va, other;
    CUmemGenericAllocationHandle h;
    put_result("reserve_unaligned_size", cuMemAddressReserve(&va, gran + 1, 0, 0, 0));
    CHECK(cuMemAddressReserve(&va, 2 * gran, 0, 0, 0));
    put_result("reserve_at_hint", cuMemAddressReserve(&other, gran, 0, va + 4 * gran, 0));
    printf("hint_honoured %d\n", other == va + 4 * gran);
    put_result("create_unaligned_size", cuMemCreate(&h, 4096, &prop, 0));
    CUmemAllocationProp bad = prop;
    bad.location.id = 5;
    put_result("create_bad_device", cuMemCreate(&h, gran, &bad, 0));
    CHECK(cuMemCreate(&h, gran, &prop, 0));
    put_result("map_outside_reservation", cuMemMap(va + 2 * gran, gran, 0, h, 0));
    put_result("map_beyond_handle", cuMemMap(va, gran, gran, h, 0));
    put_result("map_misaligned", cuMemMap(va + 4096, gran, 0, h, 0));
    CHECK(cuMemMap(va, gran, 0, h, 0));
    put_result("map_over_mapping", cuMemMap(va, gran, 0, h, 0));
    put_result("unmap_unmapped", cuMemUnmap(va + gran, gran));
    put_result("address_free_wrong_size", cuMemAddressFree(va, gran));
    put_result("release_bogus_handle", cuMemRelease(0x1234));
    return 0;
}

int main(int argc, char **argv) {
    static const struct subcommand cmds[] = {
        {"alias", alias},           {"release-before-unmap", release_before_unmap},
        {"retain", retain},         {"expandable", expandable},
        {"errors", errors},
    };
    return DISPATCH(cmds);
}
