// link: driver
// Prefetches and discards of managed memory in the stream order. The first argument names
// the case.
//
// A kernel on the blocking stream a writes device buffer d, then a copy on the blocking
// stream b reads it; between them a prefetch of managed buffer m on the legacy default stream
// (which comes after a's work and before b's):
//   legacy, legacy-v2 (cuMemPrefetchAsync_v2): nothing to report;
//   none (no prefetch), ptsz (cuMemPrefetchAsync_ptsz on the per-thread default stream, which
//   orders nothing between a and b): one race.
// A kernel on the non-blocking stream a writes m, then on the non-blocking stream b:
//   concurrent: a prefetch of m (accesses stay coherent while it migrates): nothing;
//   discard: a discard of m after waiting for a's event: nothing;
//   discard-race: the same discard with no wait: one race.
// At exit, work never waited for:
//   exit: a prefetch on a, alone: nothing (its end is not the program's to observe);
//   exit-kernel: a kernel on a, then a prefetch: unsynchronized-at-exit, naming the kernel.
// freed: a prefetch of m after m was freed (refused): use-after-free.
// records: every entry point (a batch of three ranges, two locations), then a batch on the
// legacy NULL stream, which the driver refuses; prints the addresses and results.
#include <stdint.h>

#include "sim_util.h"

#define N 1024
#define BYTES (N * sizeof(unsigned))

static CUfunction fill;

__attribute__((noinline)) static CUdeviceptr make_buffer(void) {
    CUdeviceptr d;
    CHECK(cuMemAlloc_v2(&d, BYTES));
    return d;
}

__attribute__((noinline)) static CUdeviceptr make_managed(void) {
    CUdeviceptr m;
    CHECK(cuMemAllocManaged(&m, BYTES, CU_MEM_ATTACH_GLOBAL));
    return m;
}

/* fill_u32(p, value, N) on stream s: a kernel that writes p. */
static void produce(CUdeviceptr p, unsigned value, CUstream s) {
    CHECK(launch_fill(fill, s, p, value, N, N));
}

static const CUmemLocation GPU0 = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};

static int legacy(const char *how) {
    CUstream a = stream_of(1), b = stream_of(1);
    CUdeviceptr d = make_buffer(), m = make_managed();
    unsigned *out;
    CHECK(cuMemAllocHost_v2((void **)&out, BYTES));
    produce(d, 7, a);
    if (!strcmp(how, "legacy"))
        CHECK(cuMemPrefetchAsync(m, BYTES, 0, NULL));
    else if (!strcmp(how, "legacy-v2"))
        CHECK(cuMemPrefetchAsync_v2(m, BYTES, GPU0, 0, NULL));
    else if (!strcmp(how, "ptsz"))
        CHECK(cuMemPrefetchAsync_ptsz(m, BYTES, 0, NULL));
    else if (strcmp(how, "none"))
        exit(2);
    int ok = read_after(out, d, BYTES, a, b) == 7;
    CHECK(cuMemFreeHost(out));
    CHECK(cuMemFree_v2(d));
    CHECK(cuMemFree_v2(m));
    CHECK(cuStreamDestroy_v2(a));
    CHECK(cuStreamDestroy_v2(b));
    return ok ? 0 : 4;
}

static int on_managed(const char *how) {
    CUstream a = stream_of(0), b = stream_of(0);
    CUdeviceptr m = make_managed();
    CUevent done;
    CHECK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
    produce(m, 7, a);
    if (!strcmp(how, "concurrent")) {
        CHECK(cuMemPrefetchAsync_v2(m, BYTES, GPU0, 0, b));
    } else {
        if (!strcmp(how, "discard")) {
            CHECK(cuEventRecord(done, a));
            CHECK(cuStreamWaitEvent(b, done, 0));
        }
        size_t size = BYTES;
        CHECK(cuMemDiscardBatchAsync(&m, &size, 1, 0, b));
    }
    CHECK(cuStreamSynchronize(a));
    CHECK(cuStreamSynchronize(b));
    CHECK(cuEventDestroy_v2(done));
    CHECK(cuMemFree_v2(m));
    CHECK(cuStreamDestroy_v2(a));
    CHECK(cuStreamDestroy_v2(b));
    return 0;
}

/* exit, exit-kernel: work on a never waited for (m stays allocated: freeing it would wait). */
static int at_exit(const char *how) {
    CUstream a = stream_of(0);
    static CUdeviceptr m;
    m = make_managed();
    if (!strcmp(how, "exit-kernel")) produce(m, 7, a);
    CHECK(cuMemPrefetchAsync_v2(m, BYTES, GPU0, 0, a));
    CHECK(cuStreamDestroy_v2(a));
    return 0;
}

static int freed(void) {
    CUdeviceptr m = make_managed();
    CHECK(cuMemFree_v2(m));
    return cuMemPrefetchAsync(m, BYTES, 0, NULL) == CUDA_SUCCESS ? 4 : 0;
}

static int records(void) {
    CUstream s = stream_of(0);
    CUdeviceptr m = make_managed();
    printf("m 0x%llx\ns 0x%llx\n", (unsigned long long)m, (unsigned long long)(uintptr_t)s);
    CHECK(cuMemPrefetchAsync(m, BYTES, 0, s));
    CHECK(cuMemPrefetchAsync(m, BYTES, CU_DEVICE_CPU, s));
    CHECK(cuMemPrefetchAsync_ptsz(m, 64, 0, NULL));
    CHECK(cuMemPrefetchAsync_v2(m + 64, 128, GPU0, 0, s));
    CUmemLocation numa = {.type = CU_MEM_LOCATION_TYPE_HOST_NUMA, .id = 1};
    CHECK(cuMemPrefetchAsync_v2_ptsz(m, BYTES, numa, 0, NULL));
    CUdeviceptr ptrs[3] = {m, m + 256, m + 512};
    size_t sizes[3] = {256, 256, 512};
    CUmemLocation locs[2] = {GPU0, {.type = CU_MEM_LOCATION_TYPE_HOST}};
    size_t idxs[2] = {0, 2};
    CHECK(cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, idxs, 2, 0, s));
    CHECK(cuMemPrefetchBatchAsync_ptsz(ptrs, sizes, 1, locs, idxs, 1, 0, NULL));
    CHECK(cuMemDiscardBatchAsync(ptrs, sizes, 2, 0, s));
    CHECK(cuMemDiscardBatchAsync_ptsz(ptrs, sizes, 1, 0, NULL));
    CHECK(cuMemDiscardAndPrefetchBatchAsync(ptrs, sizes, 3, locs, idxs, 2, 0, s));
    CHECK(cuMemDiscardAndPrefetchBatchAsync_ptsz(ptrs + 2, sizes + 2, 1, locs + 1, idxs, 1, 0, NULL));
    CHECK(cuStreamSynchronize(s));
    printf("legacy_batch %d\n", (int)cuMemPrefetchBatchAsync(ptrs, sizes, 3, locs, idxs, 2, 0, NULL));
    CHECK(cuMemFree_v2(m));
    CHECK(cuStreamDestroy_v2(s));
    return 0;
}

int main(int argc, char **argv) {
    setup();
    fill = load_fill();
    const char *how = argc > 1 ? argv[1] : "";
    if (!strncmp(how, "legacy", 6) || !strcmp(how, "none") || !strcmp(how, "ptsz")) return legacy(how);
    if (!strcmp(how, "concurrent") || !strncmp(how, "discard", 7)) return on_managed(how);
    if (!strncmp(how, "exit", 4)) return at_exit(how);
    if (!strcmp(how, "freed")) return freed();
    if (!strcmp(how, "records")) return records();
    return 2;
}
