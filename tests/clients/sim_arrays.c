// link: driver
// Copies to and from CUDA arrays: the 1D entry points (cuMemcpy{HtoA,AtoH,AtoA,DtoA,AtoD}_v2,
// their _ptds forms, cuMemcpy{HtoA,AtoH}Async_v2 and their _ptsz forms), array sides of 2D and 3D
// copies, levels of a mipmapped array, a captured array copy, and what the driver refuses.
#include "sim_util.h"

#define W 64 /* elements (u32) of the 1D arrays */

static CUarray array_1d(size_t width, CUarray_format format) {
    CUarray a;
    CUDA_ARRAY_DESCRIPTOR d = {.Width = width, .Height = 0, .Format = format, .NumChannels = 1};
    CHECK(cuArrayCreate_v2(&a, &d));
    return a;
}

/* Whether the n words at p count up from `from`. */
static int counts(const unsigned *p, size_t n, unsigned from) {
    for (size_t i = 0; i < n; i++)
        if (p[i] != from + i) return 0;
    return 1;
}

static void fill_count(unsigned *p, size_t n, unsigned from) {
    for (size_t i = 0; i < n; i++) p[i] = from + (unsigned)i;
}

static int one_d(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    const size_t bytes = W * 4;
    unsigned src[W], out[W];
    fill_count(src, W, 100);
    CUarray a = array_1d(W, CU_AD_FORMAT_UNSIGNED_INT32), b = array_1d(W, CU_AD_FORMAT_UNSIGNED_INT32);
    CUdeviceptr d;
    CHECK(cuMemAlloc_v2(&d, bytes));

    /* host -> a -> b -> device -> host */
    put_result("htoa", cuMemcpyHtoA_v2(a, 0, src, bytes));
    put_result("atoa", cuMemcpyAtoA_v2(b, 0, a, 0, bytes));
    put_result("atod", cuMemcpyAtoD_v2(d, b, 0, bytes));
    CHECK(cuMemcpyDtoH_v2(out, d, bytes));
    put_u64("round_trip", counts(out, W, 100));
    /* device -> a -> host, at offsets: the second half of d into the first half of a. */
    unsigned words[W];
    fill_count(words, W, 500);
    CHECK(cuMemcpyHtoD_v2(d, words, bytes));
    put_result("dtoa_offset", cuMemcpyDtoA_v2(a, 0, d + bytes / 2, bytes / 2));
    memset(out, 0, sizeof out);
    put_result("atoh", cuMemcpyAtoH_v2(out, a, 0, bytes));
    put_u64("offset_copied", counts(out, W / 2, 500 + W / 2) && counts(out + W / 2, W / 2, 100 + W / 2));
    put_result("atoh_offset", cuMemcpyAtoH_v2(out, a, bytes - 8, 8));
    put_u64("atoh_offset_value", out[0] == 100 + W - 2 && out[1] == 100 + W - 1);

    /* The _ptds forms and the asynchronous ones, on a stream and on the per-thread stream. */
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    fill_count(src, W, 7);
    put_result("htoa_ptds", cuMemcpyHtoA_v2_ptds(a, 0, src, bytes));
    put_result("atoa_ptds", cuMemcpyAtoA_v2_ptds(b, 0, a, 0, bytes));
    put_result("atod_ptds", cuMemcpyAtoD_v2_ptds(d, b, 0, bytes));
    put_result("dtoa_ptds", cuMemcpyDtoA_v2_ptds(a, 0, d, bytes));
    memset(out, 0, sizeof out);
    put_result("atoh_ptds", cuMemcpyAtoH_v2_ptds(out, a, 0, bytes));
    put_u64("ptds_round_trip", counts(out, W, 7));
    fill_count(src, W, 40);
    put_result("htoa_async", cuMemcpyHtoAAsync_v2(a, 0, src, bytes, s));
    memset(out, 0, sizeof out);
    put_result("atoh_async", cuMemcpyAtoHAsync_v2(out, a, 0, bytes, s));
    CHECK(cuStreamSynchronize(s));
    put_u64("async_round_trip", counts(out, W, 40));
    fill_count(src, W, 90);
    put_result("htoa_async_ptsz", cuMemcpyHtoAAsync_v2_ptsz(b, 0, src, bytes, NULL));
    memset(out, 0, sizeof out);
    put_result("atoh_async_ptsz", cuMemcpyAtoHAsync_v2_ptsz(out, b, 0, bytes, NULL));
    put_u64("ptsz_round_trip", counts(out, W, 90));

    /* What the driver refuses. */
    put_result("past_end", cuMemcpyHtoA_v2(a, 8, src, bytes));
    put_result("offset_off_element", cuMemcpyHtoA_v2(a, 2, src, 4));
    put_result("atod_unallocated", cuMemcpyAtoD_v2(d + 2 * bytes, a, 0, 4));
    put_result("zero_bytes", cuMemcpyHtoA_v2(a, bytes, src, 0));
    CUarray flat;
    CUDA_ARRAY_DESCRIPTOR rows = {.Width = W, .Height = 4, .Format = CU_AD_FORMAT_UNSIGNED_INT32,
                                  .NumChannels = 1};
    CHECK(cuArrayCreate_v2(&flat, &rows));
    put_result("two_d_array", cuMemcpyHtoA_v2(flat, 0, src, 4));
    CHECK(cuArrayDestroy(flat));
    put_result("destroyed", cuMemcpyHtoA_v2(flat, 0, src, 4));
    put_result("no_array", cuMemcpyAtoH_v2(out, NULL, 0, 4));
    put_result("async_destroyed", cuMemcpyHtoAAsync_v2(flat, 0, src, 4, s));
    /* The array's memory is not a device pointer a program can name. */
    CUDA_ARRAY3D_DESCRIPTOR desc;
    CHECK(cuArray3DGetDescriptor_v2(&desc, a));
    put_u64("array_width", desc.Width);

    CHECK(cuArrayDestroy(a));
    CHECK(cuArrayDestroy(b));
    CHECK(cuMemFree_v2(d));
    CHECK(cuStreamDestroy_v2(s));
    return 0;
}

static int shaped(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    /* A 2D array of 8 rows of 16 u32: rows 2..5, columns 4..11 written from host memory with a
     * pitch of its own, read back whole by a 3D copy. */
    enum { AW = 16, AH = 8 };
    CUarray a;
    CUDA_ARRAY_DESCRIPTOR rows = {.Width = AW, .Height = AH, .Format = CU_AD_FORMAT_UNSIGNED_INT32,
                                  .NumChannels = 1};
    CHECK(cuArrayCreate_v2(&a, &rows));
    unsigned zero[AW * AH], src[4][32], out[AW * AH];
    memset(zero, 0, sizeof zero);
    for (unsigned y = 0; y < 4; y++) fill_count(src[y], 32, 1000 * (y + 1));
    CUDA_MEMCPY2D whole = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = zero, .srcPitch = AW * 4,
                           .dstMemoryType = CU_MEMORYTYPE_ARRAY, .dstArray = a,
                           .WidthInBytes = AW * 4, .Height = AH};
    put_result("zeroed", cuMemcpy2D_v2(&whole));
    CUDA_MEMCPY2D part = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = src, .srcPitch = 32 * 4,
                          .dstXInBytes = 4 * 4, .dstY = 2, .dstMemoryType = CU_MEMORYTYPE_ARRAY,
                          .dstArray = a, .WidthInBytes = 8 * 4, .Height = 4};
    put_result("part", cuMemcpy2D_v2(&part));
    CUDA_MEMCPY3D back = {.srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = a,
                          .dstMemoryType = CU_MEMORYTYPE_HOST, .dstHost = out, .dstPitch = AW * 4,
                          .dstHeight = AH, .WidthInBytes = AW * 4, .Height = AH, .Depth = 1};
    put_result("back", cuMemcpy3D_v2(&back));
    int placed = 1;
    for (unsigned y = 0; y < AH; y++)
        for (unsigned x = 0; x < AW; x++) {
            unsigned want = y >= 2 && y < 6 && x >= 4 && x < 12 ? 1000 * (y - 1) + (x - 4) : 0;
            placed &= out[y * AW + x] == want;
        }
    put_u64("part_placed", placed);
    /* A 3D batch from the array's part (8 elements of 4 rows from x 4, y 2) into device memory
     * packed, and back from there into the array's first rows: extents and offsets count
     * elements (4 bytes each here), a pointer's row length too. */
    CUdeviceptr dev;
    CHECK(cuMemAlloc_v2(&dev, 4096));
    CHECK(cuMemsetD8_v2(dev, 0, 4096));
    CUDA_MEMCPY3D_BATCH_OP op;
    memset(&op, 0, sizeof op);
    op.src.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
    op.src.op.array.array = a;
    op.src.op.array.offset = (CUoffset3D){4, 2, 0};
    op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    op.dst.op.ptr.ptr = dev;
    op.extent = (CUextent3D){8, 4, 1};
    op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    CUstream bs;
    CHECK(cuStreamCreate(&bs, CU_STREAM_NON_BLOCKING));
    put_result("batch_from_array", cuMemcpy3DBatchAsync_v2(1, &op, 0, bs));
    unsigned packed[32];
    CHECK(cuMemcpyDtoH_v2(packed, dev, sizeof packed));
    int batch_placed = 1;
    for (unsigned y = 0; y < 4; y++)
        for (unsigned x = 0; x < 8; x++) batch_placed &= packed[y * 8 + x] == 1000 * (y + 1) + x;
    put_u64("batch_from_array_placed", batch_placed);
    CUDA_MEMCPY3D_BATCH_OP back_op = op;
    back_op.src = op.dst;
    back_op.dst = op.src;
    back_op.dst.op.array.offset = (CUoffset3D){0, 0, 0};
    back_op.src.op.ptr.rowLength = 8;
    put_result("batch_into_array", cuMemcpy3DWithAttributesAsync(&back_op, 0, bs));
    CHECK(cuMemcpy3D_v2(&back));
    put_u64("batch_into_array_placed", out[0] == 1000 && out[7] == 1007 && out[AW] == 2000 && out[8] == 0);
    back_op.dst.op.array.offset = (CUoffset3D){12, 0, 0};
    put_result("batch_past_columns", cuMemcpy3DWithAttributesAsync(&back_op, 0, bs));
    CUarray bytes_array;
    CUDA_ARRAY_DESCRIPTOR u8 = {.Width = 64, .Height = 8, .Format = CU_AD_FORMAT_UNSIGNED_INT8,
                                .NumChannels = 1};
    CHECK(cuArrayCreate_v2(&bytes_array, &u8));
    CUDA_MEMCPY3D_BATCH_OP mixed = op;
    mixed.dst.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
    mixed.dst.op.array.array = bytes_array;
    mixed.dst.op.array.offset = (CUoffset3D){0, 0, 0};
    put_result("batch_element_mismatch", cuMemcpy3DWithAttributesAsync(&mixed, 0, bs));
    CHECK(cuArrayDestroy(bytes_array));
    CHECK(cuStreamDestroy_v2(bs));
    CHECK(cuMemFree_v2(dev));

    /* Past the array's rows or columns, or off an element. */
    part.dstY = 5;
    put_result("past_rows", cuMemcpy2D_v2(&part));
    part.dstY = 2, part.dstXInBytes = 10 * 4;
    put_result("past_columns", cuMemcpy2D_v2(&part));
    part.dstXInBytes = 6;
    put_result("off_element", cuMemcpy2D_v2(&part));

    /* A 1D mipmapped array of 3 levels (64, 32, 16 u32): each level holds its own data. */
    CUmipmappedArray m;
    CUDA_ARRAY3D_DESCRIPTOR md = {.Width = 64, .Format = CU_AD_FORMAT_UNSIGNED_INT32, .NumChannels = 1};
    CHECK(cuMipmappedArrayCreate(&m, &md, 3));
    CUarray l0, l1;
    CHECK(cuMipmappedArrayGetLevel(&l0, m, 0));
    CHECK(cuMipmappedArrayGetLevel(&l1, m, 1));
    unsigned big[64], small[32];
    fill_count(big, 64, 1);
    fill_count(small, 32, 3000);
    CHECK(cuMemcpyHtoA_v2(l0, 0, big, sizeof big));
    put_result("level_1", cuMemcpyHtoA_v2(l1, 0, small, sizeof small));
    put_result("level_1_past_end", cuMemcpyHtoA_v2(l1, 4, small, sizeof small));
    memset(big, 0, sizeof big);
    memset(small, 0, sizeof small);
    CHECK(cuMemcpyAtoH_v2(big, l0, 0, sizeof big));
    CHECK(cuMemcpyAtoH_v2(small, l1, 0, sizeof small));
    put_u64("levels_apart", counts(big, 64, 1) && counts(small, 32, 3000));
    CHECK(cuMipmappedArrayDestroy(m));
    put_result("level_of_destroyed", cuMemcpyAtoH_v2(small, l1, 0, 4));

    /* A captured copy into an array is a copy node naming it; each launch runs it. */
    CUarray c = array_1d(W, CU_AD_FORMAT_UNSIGNED_INT32);
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    unsigned host[W];
    fill_count(host, W, 77);
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    put_result("captured", cuMemcpyHtoAAsync_v2(c, 0, host, sizeof host, s));
    CUgraph g;
    CHECK(cuStreamEndCapture(s, &g));
    unsigned got[W];
    CHECK(cuMemcpyAtoH_v2(got, c, 0, sizeof got));
    put_u64("ran_when_captured", counts(got, W, 77));
    CUgraphNode node;
    size_t n = 1;
    CHECK(cuGraphGetNodes(g, &node, &n));
    CUDA_MEMCPY3D p;
    CHECK(cuGraphMemcpyNodeGetParams(node, &p));
    put_u64("node_names_array", p.dstMemoryType == CU_MEMORYTYPE_ARRAY && p.dstArray == c &&
                                    p.WidthInBytes == sizeof host);
    CUgraphExec e;
    CHECK(cuGraphInstantiateWithFlags(&e, g, 0));
    put_result("launch", cuGraphLaunch(e, s));
    CHECK(cuStreamSynchronize(s));
    CHECK(cuMemcpyAtoH_v2(got, c, 0, sizeof got));
    put_u64("ran_by_launch", counts(got, W, 77));
    CHECK(cuGraphExecDestroy(e));
    CHECK(cuGraphDestroy(g));
    CHECK(cuArrayDestroy(c));
    CHECK(cuArrayDestroy(a));
    CHECK(cuStreamDestroy_v2(s));
    return 0;
}

int main(int argc, char **argv) {
    static const struct subcommand cmds[] = {{"one-d", one_d}, {"shaped", shaped}};
    return DISPATCH(cmds);
}
