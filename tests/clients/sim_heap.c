// link: driver
// The device heap: first-fit placement, holes, coalescing, fragmentation, cuMemGetInfo,
// invalid and double frees, pitch allocations, and fault injection (SIMCUDA_FAIL).
#include "sim_util.h"

#define MiB (1024ull * 1024ull)

static size_t g_total(void) {
    size_t free = 0, total = 0;
    CHECK(cuMemGetInfo_v2(&free, &total));
    return total;
}

// A, B, C of 1 MiB; B freed; D, E of 512 KiB fill B's hole; then D, E and C freed so that the
// holes coalesce and F of 2 MiB starts where B was.
static int first_fit(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUdeviceptr a, b, c, d, e, f;
    CHECK(cuMemAlloc_v2(&a, MiB));
    CHECK(cuMemAlloc_v2(&b, MiB));
    CHECK(cuMemAlloc_v2(&c, MiB));
    CHECK(cuMemFree_v2(b));
    CHECK(cuMemAlloc_v2(&d, MiB / 2));
    CHECK(cuMemAlloc_v2(&e, MiB / 2));
    CHECK(cuMemFree_v2(d));
    CHECK(cuMemFree_v2(e));
    CHECK(cuMemFree_v2(c));
    CHECK(cuMemAlloc_v2(&f, 2 * MiB));
    put_ptr("A", a);
    put_ptr("B", b);
    put_ptr("C", c);
    put_ptr("D", d);
    put_ptr("E", e);
    put_ptr("F", f);
    return 0;
}

// Fills the device with 1 MiB blocks, frees every other one, then asks for 2 MiB.
static int fragment(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    static CUdeviceptr blocks[4096];
    int n = 0;
    while (n < 4096 && cuMemAlloc_v2(&blocks[n], MiB) == CUDA_SUCCESS) n++;
    put_u64("blocks", (unsigned long long)n);
    put_u64("free_when_full", free_bytes());
    for (int i = 0; i < n; i += 2) CHECK(cuMemFree_v2(blocks[i]));
    put_u64("free_with_holes", free_bytes());
    CUdeviceptr big = 0xabcdef, small = 0;
    put_result("alloc_2mib", cuMemAlloc_v2(&big, 2 * MiB));
    put_ptr("alloc_2mib_out", big);
    put_result("alloc_1mib", cuMemAlloc_v2(&small, MiB));
    put_ptr("alloc_1mib_at", small);
    put_ptr("first_hole", blocks[0]);
    return 0;
}

static int meminfo(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    size_t free0, total, free1, free2, dev_total;
    CUdeviceptr p;
    CHECK(cuMemGetInfo_v2(&free0, &total));
    CHECK(cuDeviceTotalMem_v2(&dev_total, 0));
    CHECK(cuMemAlloc_v2(&p, 1000));
    CHECK(cuMemGetInfo_v2(&free1, &total));
    CHECK(cuMemFree_v2(p));
    CHECK(cuMemGetInfo_v2(&free2, &total));
    put_u64("total", total);
    put_u64("device_total", dev_total);
    put_u64("free_before", free0);
    put_u64("free_during", free1);
    put_u64("free_after", free2);
    return 0;
}

static int bad_frees(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, 4096));
    put_result("interior", cuMemFree_v2(p + 256));
    put_result("first", cuMemFree_v2(p));
    put_result("second", cuMemFree_v2(p));
    put_result("unknown", cuMemFree_v2(0x1234));
    put_result("null", cuMemFree_v2(0));
    put_result("zero_size", cuMemAlloc_v2(&p, 0));
    return 0;
}

static int pitch(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUdeviceptr p, q;
    size_t pitch = 0;
    size_t before = free_bytes();
    put_result("alloc", cuMemAllocPitch_v2(&p, &pitch, 100, 10, 4));
    put_u64("pitch", pitch);
    put_u64("used", before - free_bytes());
    put_result("bad_element_size", cuMemAllocPitch_v2(&q, &pitch, 100, 10, 3));
    put_result("free", cuMemFree_v2(p));
    return 0;
}

// Three cuMemAlloc_v2, two cuStreamCreate and two cuCtxSynchronize calls, in that order.
static int faults(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    for (int i = 1; i <= 3; i++) {
        CUdeviceptr p = 0xabc;
        char key[32];
        snprintf(key, sizeof key, "alloc%d", i);
        put_result(key, cuMemAlloc_v2(&p, 1024));
        snprintf(key, sizeof key, "alloc%d_out", i);
        put_ptr(key, p);
    }
    for (int i = 1; i <= 2; i++) {
        CUstream s;
        char key[32];
        snprintf(key, sizeof key, "stream%d", i);
        put_result(key, cuStreamCreate(&s, 0));
    }
    put_result("sync1", cuCtxSynchronize());
    put_result("sync2", cuCtxSynchronize());
    return 0;
}

// Arrays take width * height * depth * element size * channels bytes of device memory.
static int arrays(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    size_t start = free_bytes();
    CUarray a2, a3, bad;
    CUDA_ARRAY_DESCRIPTOR d2 = {1000, 10, CU_AD_FORMAT_HALF, 2};
    CUDA_ARRAY3D_DESCRIPTOR d3 = {64, 32, 8, CU_AD_FORMAT_FLOAT, 4, 0};
    CHECK(cuArrayCreate_v2(&a2, &d2));
    put_u64("used_2d", start - free_bytes());
    CHECK(cuArray3DCreate_v2(&a3, &d3));
    put_u64("used_both", start - free_bytes());
    CUDA_ARRAY_DESCRIPTOR got2;
    CUDA_ARRAY3D_DESCRIPTOR got3;
    CHECK(cuArrayGetDescriptor_v2(&got2, a2));
    printf("descriptor_2d %zu %zu %d %u\n", got2.Width, got2.Height, (int)got2.Format, got2.NumChannels);
    CHECK(cuArray3DGetDescriptor_v2(&got3, a3));
    printf("descriptor_3d %zu %zu %zu %d %u\n", got3.Width, got3.Height, got3.Depth, (int)got3.Format,
           got3.NumChannels);
    CHECK(cuArray3DGetDescriptor_v2(&got3, a2));
    put_u64("depth_of_2d", got3.Depth);
    CUDA_ARRAY_DESCRIPTOR wrong = {16, 16, (CUarray_format)0x77, 1};
    put_result("bad_format", cuArrayCreate_v2(&bad, &wrong));
    CUDA_ARRAY_DESCRIPTOR three = {16, 16, CU_AD_FORMAT_FLOAT, 3};
    put_result("bad_channels", cuArrayCreate_v2(&bad, &three));
    put_result("destroy", cuArrayDestroy(a2));
    put_result("destroy_again", cuArrayDestroy(a2));
    put_result("descriptor_destroyed", cuArrayGetDescriptor_v2(&got2, a2));
    put_result("destroy_3d", cuArrayDestroy(a3));
    put_u64("used_after", start - free_bytes());
    return 0;
}

static void put_descriptor(const char *key, CUarray a) {
    CUDA_ARRAY3D_DESCRIPTOR d;
    CUresult r = cuArray3DGetDescriptor_v2(&d, a);
    if (r != CUDA_SUCCESS)
        printf("%s %d\n", key, (int)r);
    else
        printf("%s %zu %zu %zu %d %u %u\n", key, d.Width, d.Height, d.Depth, (int)d.Format,
               d.NumChannels, d.Flags);
}

// Creates a mipmapped array and prints the device memory it took ("<key> <result> <bytes>").
static CUmipmappedArray put_mipmap(const char *key, size_t w, size_t h, size_t d,
                                   CUarray_format format, unsigned int channels,
                                   unsigned int flags, unsigned int levels) {
    CUDA_ARRAY3D_DESCRIPTOR desc = {w, h, d, format, channels, flags};
    CUmipmappedArray m = NULL;
    size_t before = free_bytes();
    CUresult r = cuMipmappedArrayCreate(&m, &desc, levels);
    printf("%s %d %zu\n", key, (int)r, before - free_bytes());
    return m;
}

// Mipmapped arrays: the device memory of every level in one block, levels as arrays that
// only their mipmapped array can destroy, double destroys refused.
static int mipmaps(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    size_t start = free_bytes();
    CUmipmappedArray m2 = put_mipmap("mip_2d", 64, 32, 0, CU_AD_FORMAT_FLOAT, 4, 0, 4);
    CUmipmappedArray layered =
        put_mipmap("mip_layered", 32, 16, 6, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_LAYERED, 3);
    CUmipmappedArray cube =
        put_mipmap("mip_cubemap", 16, 16, 6, CU_AD_FORMAT_FLOAT, 1, CUDA_ARRAY3D_CUBEMAP, 5);
    CUmipmappedArray m3 = put_mipmap("mip_3d", 16, 16, 16, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0, 5);
    CUmipmappedArray m1 = put_mipmap("mip_1d", 64, 0, 0, CU_AD_FORMAT_HALF, 2, 0, 7);
    // More levels than halvings: clamped to the last level whose extents are all 1; no level
    // is clamped to one.
    CUmipmappedArray deep = put_mipmap("mip_deep", 64, 0, 0, CU_AD_FORMAT_FLOAT, 4, 0, 100);
    CUmipmappedArray huge = put_mipmap("mip_huge_levels", 1, 0, 0, CU_AD_FORMAT_UNSIGNED_INT8, 1, 0, 0xffffffffu);
    CUmipmappedArray none = put_mipmap("mip_zero_levels", 64, 32, 0, CU_AD_FORMAT_FLOAT, 4, 0, 0);
    put_mipmap("mip_zero_width", 0, 32, 0, CU_AD_FORMAT_FLOAT, 4, 0, 2);
    put_mipmap("mip_bad_format", 64, 32, 0, (CUarray_format)0x77, 4, 0, 2);
    put_mipmap("mip_bad_channels", 64, 32, 0, CU_AD_FORMAT_FLOAT, 3, 0, 2);
    put_mipmap("mip_overflow", (size_t)1 << 40, (size_t)1 << 40, 0, CU_AD_FORMAT_FLOAT, 4, 0, 2);
    CUDA_ARRAY3D_DESCRIPTOR desc = {64, 32, 0, CU_AD_FORMAT_FLOAT, 4, 0};
    put_result("mip_null_handle", cuMipmappedArrayCreate(NULL, &desc, 2));
    put_result("mip_null_desc", cuMipmappedArrayCreate(&m1, NULL, 2));

    CUarray l0, l3, l3_again, bad = NULL;
    put_result("level0", cuMipmappedArrayGetLevel(&l0, m2, 0));
    put_result("level3", cuMipmappedArrayGetLevel(&l3, m2, 3));
    CHECK(cuMipmappedArrayGetLevel(&l3_again, m2, 3));
    put_u64("level3_same_handle", l3 == l3_again);
    put_u64("level_not_mipmap", (void *)l0 != (void *)m2);
    put_result("level4", cuMipmappedArrayGetLevel(&bad, m2, 4));
    put_result("level_null_out", cuMipmappedArrayGetLevel(NULL, m2, 0));
    put_result("level_bad_handle", cuMipmappedArrayGetLevel(&bad, (CUmipmappedArray)l0, 0));
    put_descriptor("level0_desc", l0);
    put_descriptor("level3_desc", l3);
    CUarray ll, l3d;
    CHECK(cuMipmappedArrayGetLevel(&ll, layered, 2));
    put_descriptor("layered_level2_desc", ll);
    CHECK(cuMipmappedArrayGetLevel(&l3d, m3, 2));
    put_descriptor("level2_3d_desc", l3d);
    CUarray deep6;
    put_result("deep_level6", cuMipmappedArrayGetLevel(&deep6, deep, 6));
    put_descriptor("deep_level6_desc", deep6);
    put_result("deep_level7", cuMipmappedArrayGetLevel(&bad, deep, 7));
    put_result("destroy_level", cuArrayDestroy(l0));
    put_result("destroy_as_array", cuArrayDestroy((CUarray)m2));
    put_result("destroy_array_as_mipmap", cuMipmappedArrayDestroy((CUmipmappedArray)l0));

    size_t before = free_bytes();
    put_result("destroy", cuMipmappedArrayDestroy(m2));
    put_u64("destroy_freed", free_bytes() - before);
    put_result("destroy_again", cuMipmappedArrayDestroy(m2));
    put_result("level_after_destroy", cuMipmappedArrayGetLevel(&bad, m2, 0));
    put_descriptor("level0_desc_after_destroy", l0);
    put_result("destroy_level_after_destroy", cuArrayDestroy(l3));
    put_result("destroy_null", cuMipmappedArrayDestroy(NULL));
    CHECK(cuMipmappedArrayDestroy(layered));
    CHECK(cuMipmappedArrayDestroy(cube));
    CHECK(cuMipmappedArrayDestroy(m3));
    CHECK(cuMipmappedArrayDestroy(m1));
    CHECK(cuMipmappedArrayDestroy(deep));
    CHECK(cuMipmappedArrayDestroy(huge));
    CHECK(cuMipmappedArrayDestroy(none));
    put_u64("used_after", start - free_bytes());
    return 0;
}

// Mipmapped arrays die with their context: a primary context reset, and cuCtxDestroy.
static int mipmap_teardown(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    size_t start = free_bytes();
    CUDA_ARRAY3D_DESCRIPTOR desc = {64, 32, 0, CU_AD_FORMAT_FLOAT, 4, 0};
    CUmipmappedArray m;
    CUarray level;
    CHECK(cuMipmappedArrayCreate(&m, &desc, 4));
    CHECK(cuMipmappedArrayGetLevel(&level, m, 1));
    put_u64("used", start - free_bytes());
    put_result("reset", cuDevicePrimaryCtxReset_v2(0));
    CUcontext primary;
    CHECK(cuDevicePrimaryCtxRetain(&primary, 0));
    CHECK(cuCtxSetCurrent(primary));
    put_u64("reset_freed", free_bytes() == start);
    put_result("destroy_after_reset", cuMipmappedArrayDestroy(m));
    put_descriptor("level_after_reset", level);

    CUcontext ctx;
    CHECK(cuCtxCreate_v2(&ctx, 0, 0));
    CHECK(cuMipmappedArrayCreate(&m, &desc, 4));
    CHECK(cuMipmappedArrayGetLevel(&level, m, 1));
    put_u64("used_in_created", start - free_bytes());
    put_result("ctx_destroy", cuCtxDestroy_v2(ctx));
    CHECK(cuCtxSetCurrent(primary));
    put_u64("ctx_destroy_freed", free_bytes() == start);
    put_result("destroy_after_ctx_destroy", cuMipmappedArrayDestroy(m));
    put_descriptor("level_after_ctx_destroy", level);
    return 0;
}

// Two cuMipmappedArrayCreate calls (for SIMCUDA_FAIL).
static int mipmap_faults(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUDA_ARRAY3D_DESCRIPTOR desc = {64, 32, 0, CU_AD_FORMAT_FLOAT, 4, 0};
    size_t start = free_bytes();
    CUmipmappedArray m = NULL;
    put_result("create1", cuMipmappedArrayCreate(&m, &desc, 4));
    put_u64("create1_used", start - free_bytes());
    put_result("create2", cuMipmappedArrayCreate(&m, &desc, 4));
    put_u64("create2_used", start - free_bytes());
    return 0;
}

// The 32-bit entry points exist but are not implemented.
static int legacy(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUdeviceptr_v1 p = 0x1234;
    unsigned int free = 0, total = 0;
    put_result("alloc_v1", cuMemAlloc(&p, 256));
    put_u64("alloc_v1_out", p);
    put_result("mem_get_info_v1", cuMemGetInfo(&free, &total));
    put_result("memcpy_v1", cuMemcpyHtoD(0, &p, 4));
    put_u64("device_memory_untouched", free_bytes() == g_total() ? 1 : 0);
    return 0;
}

int main(int argc, char **argv) {
    static const struct subcommand cmds[] = {
        {"first-fit", first_fit}, {"fragment", fragment}, {"meminfo", meminfo},
        {"bad-frees", bad_frees}, {"pitch", pitch},       {"faults", faults},
        {"arrays", arrays},       {"legacy", legacy},
        {"mipmaps", mipmaps},     {"mipmap-teardown", mipmap_teardown},
        {"mipmap-faults", mipmap_faults},
    };
    return DISPATCH(cmds);
}
