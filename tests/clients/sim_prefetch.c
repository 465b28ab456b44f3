// link: driver
// Prefetches and discards of managed memory: what the driver accepts and refuses, and that a
// capturing stream refuses them (graphs have no such node) and loses its capture.
#include "sim_util.h"

static int prefetch(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUdeviceptr m, d;
    CHECK(cuMemAllocManaged(&m, 4096, CU_MEM_ATTACH_GLOBAL));
    CHECK(cuMemAlloc_v2(&d, 4096));
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    const CUmemLocation gpu = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    put_result("to_device", cuMemPrefetchAsync(m, 4096, 0, s));
    put_result("to_cpu", cuMemPrefetchAsync(m, 4096, CU_DEVICE_CPU, NULL));
    put_result("ptsz", cuMemPrefetchAsync_ptsz(m + 100, 200, 0, NULL));
    put_result("bad_device", cuMemPrefetchAsync(m, 4096, 9, s));
    put_result("device_memory", cuMemPrefetchAsync(d, 4096, 0, s));
    put_result("past_end", cuMemPrefetchAsync(m + 1, 4096, 0, s));
    put_result("v2_device", cuMemPrefetchAsync_v2(m, 4096, gpu, 0, s));
    put_result("v2_ptsz", cuMemPrefetchAsync_v2_ptsz(m, 4096, gpu, 0, NULL));
    CUmemLocation l = {.type = CU_MEM_LOCATION_TYPE_HOST_NUMA, .id = 0};
    put_result("v2_numa", cuMemPrefetchAsync_v2(m, 4096, l, 0, s));
    l.id = -1;
    put_result("v2_bad_numa", cuMemPrefetchAsync_v2(m, 4096, l, 0, s));
    l = (CUmemLocation){.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 9};
    put_result("v2_bad_device", cuMemPrefetchAsync_v2(m, 4096, l, 0, s));
    l = (CUmemLocation){.type = CU_MEM_LOCATION_TYPE_INVALID};
    put_result("v2_invalid", cuMemPrefetchAsync_v2(m, 4096, l, 0, s));
    put_result("v2_flags", cuMemPrefetchAsync_v2(m, 4096, gpu, 1, s));

    CUdeviceptr ptrs[3] = {m, m + 1024, m + 2048};
    size_t sizes[3] = {1024, 1024, 2048};
    CUmemLocation locs[2] = {gpu, {.type = CU_MEM_LOCATION_TYPE_HOST}};
    size_t idxs[2] = {0, 2};
    put_result("batch", cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, idxs, 2, 0, s));
    put_result("batch_ptsz", cuMemPrefetchBatchAsync_ptsz(ptrs, sizes, 3, locs, idxs, 2, 0, NULL));
    put_result("batch_legacy", cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, idxs, 2, 0, NULL));
    put_result("batch_stream_legacy",
               cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, idxs, 2, 0, CU_STREAM_LEGACY));
    put_result("batch_empty", cuMemPrefetchBatchAsync(ptrs, sizes, 0, locs, idxs, 2, 0, s));
    put_result("batch_flags", cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, idxs, 2, 1, s));
    size_t late[2] = {1, 2};
    put_result("batch_first_index", cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, late, 2, 0, s));
    size_t same[2] = {0, 0};
    put_result("batch_index_order", cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, same, 2, 0, s));
    size_t past[2] = {0, 3};
    put_result("batch_index_past", cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, past, 2, 0, s));
    put_result("batch_more_locations", cuMemPrefetchBatchAsync(ptrs, sizes, 1, locs, idxs, 2, 0, s));
    ptrs[1] = d;
    put_result("batch_device_memory", cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, idxs, 2, 0, s));
    ptrs[1] = m + 1024;
    put_result("discard", cuMemDiscardBatchAsync(ptrs, sizes, 3, 0, s));
    put_result("discard_ptsz", cuMemDiscardBatchAsync_ptsz(ptrs, sizes, 3, 0, NULL));
    put_result("discard_legacy", cuMemDiscardBatchAsync(ptrs, sizes, 3, 0, NULL));
    put_result("discard_null_sizes", cuMemDiscardBatchAsync(ptrs, NULL, 3, 0, s));
    put_result("discard_and_prefetch", cuMemDiscardAndPrefetchBatchAsync(ptrs, sizes, 3, locs, idxs, 2, 0, s));
    put_result("discard_and_prefetch_ptsz",
               cuMemDiscardAndPrefetchBatchAsync_ptsz(ptrs, sizes, 3, locs, idxs, 2, 0, NULL));
    put_result("discard_and_prefetch_no_locations",
               cuMemDiscardAndPrefetchBatchAsync(ptrs, sizes, 3, NULL, idxs, 2, 0, s));

    /* Under capture: refused, and the capture is lost. */
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    put_result("captured", cuMemPrefetchAsync(m, 4096, 0, s));
    CUgraph g;
    put_result("capture_end", cuStreamEndCapture(s, &g));
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    put_result("captured_discard", cuMemDiscardBatchAsync(ptrs, sizes, 1, 0, s));
    put_result("capture_end_discard", cuStreamEndCapture(s, &g));

    CHECK(cuMemFree_v2(m));
    put_result("freed", cuMemPrefetchAsync(m, 4096, 0, s));
    CHECK(cuMemFree_v2(d));
    CHECK(cuStreamDestroy_v2(s));
    return 0;
}

int main(int argc, char **argv) {
    static const struct subcommand cmds[] = {{"prefetch", prefetch}};
    return DISPATCH(cmds);
}
