// link: driver
// Copies to and from CUDA arrays in the stream order. The first argument names the case.
//
// A kernel on stream a writes buffer d, then a copy on stream b reads it; between them, a
// synchronous array copy on the legacy default stream that touches neither (a and b are
// blocking streams, so the legacy stream's work comes after a's and before b's):
//   order-htoa, order-atoh, order-atoa, order-dtoa, order-atod, order-async (an asynchronous
//   copy on the NULL stream, which is the legacy one): nothing to report;
//   order-none (no array copy), order-ptds (cuMemcpyAtoA_v2_ptds, on the per-thread default
//   stream, which orders nothing between a and b), order-async-ptsz (the same through
//   cuMemcpyHtoAAsync_v2_ptsz): one race.
// A copy between d and an array on the legacy stream, and a kernel on another stream:
//   dtoa: a (blocking) writes d, cuMemcpyDtoA_v2 reads it: nothing;
//   dtoa-race: the same with a non-blocking: one race;
//   atod: cuMemcpyAtoD_v2 writes d, then a kernel on b (blocking): nothing;
//   atod-race: the same with b non-blocking: one race.
// What the host waits for at exit (a asynchronous copy into the array on stream a, then):
//   exit-atoh: a blocking, then cuMemcpyAtoH_v2, which waits for the legacy stream: nothing;
//   exit-nonblocking: the same with a non-blocking: unsynchronized-at-exit;
//   exit-pageable: cuMemcpyAtoHAsync_v2 on a into pageable memory (it returns when done):
//   nothing;
//   exit-pinned: the same into page-locked memory (registered, left so): unsynchronized-at-exit.
// batch: a 3D batch (cuMemcpy3DBatchAsync_v2) on stream b copies a 16 x 4 array of u32 into
//   the last 256 bytes of d (extents count elements: 4 bytes each), then a copy on stream c,
//   after waiting for b's event, reads d's last 4 bytes: nothing;
// batch-race: the same read with no wait: one race (found only if the batch's span is counted
//   in bytes, from the array's element size).
// freed: cuMemcpyDtoA_v2 from d after d was freed (refused): use-after-free.
// records: every entry point once, then a copy into a destroyed array; prints the addresses.
#include <stdint.h>

#include "sim_util.h"

#define N 1024
#define BYTES (N * sizeof(unsigned))

static CUfunction fill;
static unsigned host_scratch[N], host_out[N], pinned[N];

__attribute__((noinline)) static CUdeviceptr make_buffer(void) {
    CUdeviceptr d;
    CHECK(cuMemAlloc_v2(&d, BYTES));
    return d;
}

/* A 1D array of N u32. */
__attribute__((noinline)) static CUarray make_array(void) {
    CUarray a;
    CUDA_ARRAY_DESCRIPTOR desc = {.Width = N, .Format = CU_AD_FORMAT_UNSIGNED_INT32, .NumChannels = 1};
    CHECK(cuArrayCreate_v2(&a, &desc));
    return a;
}

/* fill_u32(d, value, N) on stream s: a kernel that writes d. */
static void produce(CUdeviceptr d, unsigned value, CUstream s) {
    CHECK(launch_fill(fill, s, d, value, N, N));
}

/* The array copy an "order-" case puts between a's kernel and b's read; e and arr are
 * scratch (a device buffer and an array nobody else touches). */
static void between(const char *how, CUarray arr, CUarray arr2, CUdeviceptr e) {
    if (!strcmp(how, "order-htoa"))
        CHECK(cuMemcpyHtoA_v2(arr, 0, host_scratch, BYTES));
    else if (!strcmp(how, "order-atoh"))
        CHECK(cuMemcpyAtoH_v2(host_scratch, arr, 0, BYTES));
    else if (!strcmp(how, "order-atoa"))
        CHECK(cuMemcpyAtoA_v2(arr2, 0, arr, 0, BYTES));
    else if (!strcmp(how, "order-dtoa"))
        CHECK(cuMemcpyDtoA_v2(arr, 0, e, BYTES));
    else if (!strcmp(how, "order-atod"))
        CHECK(cuMemcpyAtoD_v2(e, arr, 0, BYTES));
    else if (!strcmp(how, "order-async"))
        CHECK(cuMemcpyHtoAAsync_v2(arr, 0, host_scratch, BYTES, NULL));
    else if (!strcmp(how, "order-ptds"))
        CHECK(cuMemcpyAtoA_v2_ptds(arr2, 0, arr, 0, BYTES));
    else if (!strcmp(how, "order-async-ptsz"))
        CHECK(cuMemcpyHtoAAsync_v2_ptsz(arr, 0, host_scratch, BYTES, NULL));
    else if (strcmp(how, "order-none"))
        exit(2);
}

static int order(const char *how) {
    CUstream a = stream_of(1), b = stream_of(1);
    CUdeviceptr d = make_buffer(), e = make_buffer();
    CUarray arr = make_array(), arr2 = make_array();
    unsigned *out;
    CHECK(cuMemAllocHost_v2((void **)&out, BYTES));
    produce(d, 7, a);
    between(how, arr, arr2, e);
    int ok = read_after(out, d, BYTES, a, b) == 7;
    CHECK(cuMemFreeHost(out));
    CHECK(cuArrayDestroy(arr));
    CHECK(cuArrayDestroy(arr2));
    CHECK(cuMemFree_v2(d));
    CHECK(cuMemFree_v2(e));
    CHECK(cuStreamDestroy_v2(a));
    CHECK(cuStreamDestroy_v2(b));
    return ok ? 0 : 4;
}

/* dtoa[-race], atod[-race]: a copy between d and an array on the legacy stream, and a
 * kernel on a stream of its own, blocking or not. */
static int legacy(const char *how) {
    int racy = strstr(how, "-race") != NULL;
    CUstream s = stream_of(!racy);
    CUdeviceptr d = make_buffer();
    CUarray arr = make_array();
    if (!strncmp(how, "dtoa", 4)) {
        produce(d, 7, s);
        CHECK(cuMemcpyDtoA_v2(arr, 0, d, BYTES));
    } else {
        CHECK(cuMemcpyHtoA_v2(arr, 0, host_scratch, BYTES));
        CHECK(cuMemcpyAtoD_v2(d, arr, 0, BYTES));
        produce(d, 7, s);
    }
    CHECK(cuStreamSynchronize(s));
    CHECK(cuArrayDestroy(arr));
    CHECK(cuMemFree_v2(d));
    CHECK(cuStreamDestroy_v2(s));
    return 0;
}

/* exit-*: an asynchronous copy into the array on a, then what the case names, and no other
 * wait before exit (the array is destroyed: destroying waits for nothing). */
static int at_exit(const char *how) {
    int blocking = !strcmp(how, "exit-atoh");
    CUstream a = stream_of(blocking);
    CUarray arr = make_array();
    CHECK(cuMemcpyHtoAAsync_v2(arr, 0, host_scratch, BYTES, a));
    if (!strcmp(how, "exit-atoh") || !strcmp(how, "exit-nonblocking")) {
        CHECK(cuMemcpyAtoH_v2(host_out, arr, 0, BYTES));
    } else if (!strcmp(how, "exit-pageable")) {
        CHECK(cuMemcpyAtoHAsync_v2(host_out, arr, 0, BYTES, a));
    } else {
        CHECK(cuMemHostRegister_v2(pinned, sizeof pinned, 0));
        CHECK(cuMemcpyAtoHAsync_v2(pinned, arr, 0, BYTES, a));
    }
    CHECK(cuArrayDestroy(arr));
    CHECK(cuStreamDestroy_v2(a));
    return 0;
}

static int batch(const char *how) {
    CUstream b = stream_of(0), c = stream_of(0);
    CUdeviceptr d = make_buffer();
    CUarray arr;
    CUDA_ARRAY_DESCRIPTOR desc = {.Width = 16, .Height = 4, .Format = CU_AD_FORMAT_UNSIGNED_INT32,
                                  .NumChannels = 1};
    CHECK(cuArrayCreate_v2(&arr, &desc));
    CUevent done;
    CHECK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
    unsigned *out;
    CHECK(cuMemAllocHost_v2((void **)&out, 4));
    CUDA_MEMCPY3D_BATCH_OP op;
    memset(&op, 0, sizeof op);
    op.src.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
    op.src.op.array.array = arr;
    op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    op.dst.op.ptr.ptr = d + BYTES - 256;
    op.extent = (CUextent3D){16, 4, 1};
    op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    CHECK(cuMemcpy3DBatchAsync_v2(1, &op, 0, b));
    if (!strcmp(how, "batch")) {
        CHECK(cuEventRecord(done, b));
        CHECK(cuStreamWaitEvent(c, done, 0));
    }
    CHECK(cuMemcpyDtoHAsync_v2(out, d + BYTES - 4, 4, c));
    CHECK(cuStreamSynchronize(b));
    CHECK(cuStreamSynchronize(c));
    CHECK(cuMemFreeHost(out));
    CHECK(cuEventDestroy_v2(done));
    CHECK(cuArrayDestroy(arr));
    CHECK(cuMemFree_v2(d));
    CHECK(cuStreamDestroy_v2(b));
    CHECK(cuStreamDestroy_v2(c));
    return 0;
}

static int freed(void) {
    CUdeviceptr d = make_buffer();
    CUarray arr = make_array();
    CHECK(cuMemFree_v2(d));
    CUresult r = cuMemcpyDtoA_v2(arr, 0, d, BYTES);
    CHECK(cuArrayDestroy(arr));
    return r == CUDA_SUCCESS ? 4 : 0;
}

/* Every entry point once (the asynchronous ones on s, then on the per-thread stream), then a
 * copy into a destroyed array, whose result is printed. */
static int records(void) {
    CUstream s = stream_of(0);
    CUdeviceptr d = make_buffer();
    CUarray arr = make_array(), arr2 = make_array();
    printf("d 0x%llx\ns 0x%llx\nhost 0x%llx\nout 0x%llx\n", (unsigned long long)d,
           (unsigned long long)(uintptr_t)s, (unsigned long long)(uintptr_t)host_scratch,
           (unsigned long long)(uintptr_t)host_out);
    CHECK(cuMemcpyHtoA_v2(arr, 0, host_scratch, BYTES));
    CHECK(cuMemcpyHtoA_v2_ptds(arr, 0, host_scratch, BYTES));
    CHECK(cuMemcpyAtoH_v2(host_out, arr, 0, BYTES));
    CHECK(cuMemcpyAtoH_v2_ptds(host_out, arr, 0, BYTES));
    CHECK(cuMemcpyAtoA_v2(arr2, 0, arr, 0, BYTES));
    CHECK(cuMemcpyAtoA_v2_ptds(arr2, 0, arr, 0, BYTES));
    CHECK(cuMemcpyDtoA_v2(arr, 0, d, BYTES));
    CHECK(cuMemcpyDtoA_v2_ptds(arr, 0, d, BYTES));
    CHECK(cuMemcpyAtoD_v2(d, arr, 0, BYTES));
    CHECK(cuMemcpyAtoD_v2_ptds(d, arr, 0, BYTES));
    CHECK(cuMemcpyHtoAAsync_v2(arr, 0, host_scratch, BYTES, s));
    CHECK(cuMemcpyHtoAAsync_v2_ptsz(arr, 0, host_scratch, BYTES, NULL));
    CHECK(cuMemcpyAtoHAsync_v2(host_out, arr, 0, BYTES, s));
    CHECK(cuMemcpyAtoHAsync_v2_ptsz(host_out, arr, 0, BYTES, NULL));
    CHECK(cuStreamSynchronize(s));
    CHECK(cuArrayDestroy(arr2));
    printf("destroyed %d\n", (int)cuMemcpyHtoA_v2(arr2, 0, host_scratch, BYTES));
    CHECK(cuArrayDestroy(arr));
    CHECK(cuMemFree_v2(d));
    CHECK(cuStreamDestroy_v2(s));
    return 0;
}

int main(int argc, char **argv) {
    setup();
    fill = load_fill();
    const char *how = argc > 1 ? argv[1] : "";
    if (!strncmp(how, "order-", 6)) return order(how);
    if (!strncmp(how, "dtoa", 4) || !strncmp(how, "atod", 4)) return legacy(how);
    if (!strncmp(how, "exit-", 5)) return at_exit(how);
    if (!strncmp(how, "batch", 5)) return batch(how);
    if (!strcmp(how, "freed")) return freed();
    if (!strcmp(how, "records")) return records();
    return 2;
}
