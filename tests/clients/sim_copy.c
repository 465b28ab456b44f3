// link: driver
// Copies and memsets: data round-trips through device memory, interior pointers, bounds,
// freed memory, page-locked and managed memory as unified addresses, and a device pointer
// that the host cannot dereference. Each check prints "name 0|1" (1 = as expected) or a
// CUresult.
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>

#include "sim_util.h"

#define N 4096

static sigjmp_buf jump;

static void on_segv(int sig) {
    (void)sig;
    siglongjmp(jump, 1);
}

static int round_trip(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    static unsigned char in[N], out[N];
    for (int i = 0; i < N; i++) in[i] = (unsigned char)(i * 7 + 3);
    CUdeviceptr a, b;
    CUstream s;
    CHECK(cuMemAlloc_v2(&a, N));
    CHECK(cuMemAlloc_v2(&b, 2 * N));
    CHECK(cuStreamCreate(&s, 0));

    CHECK(cuMemcpyHtoD_v2(a, in, N));
    CHECK(cuMemcpyDtoH_v2(out, a, N));
    printf("htod_dtoh %d\n", !memcmp(in, out, N));

    // Device to device into the middle of b (an interior pointer), then back out.
    memset(out, 0, N);
    CHECK(cuMemcpyDtoD_v2(b + N, a, N));
    CHECK(cuMemcpyDtoH_v2_ptds(out, b + N, N));
    printf("dtod_interior %d\n", !memcmp(in, out, N));

    memset(out, 0, N);
    CHECK(cuMemcpyHtoDAsync_v2(b, in, N, s));
    CHECK(cuMemcpyDtoDAsync_v2_ptsz(a, b, N, CU_STREAM_PER_THREAD));
    CHECK(cuMemcpyDtoHAsync_v2(out, a, N, CU_STREAM_LEGACY));
    CHECK(cuStreamSynchronize(s));
    printf("async %d\n", !memcmp(in, out, N));

    memset(out, 0, N);
    CHECK(cuMemcpy(b, (CUdeviceptr)(uintptr_t)in, N));
    CHECK(cuMemcpyAsync((CUdeviceptr)(uintptr_t)out, b, N, NULL));
    printf("unified %d\n", !memcmp(in, out, N));

    CHECK(cuMemsetD8_v2(a, 0x5a, N));
    CHECK(cuMemsetD32_v2(a + 16, 0x11223344u, 4));
    CHECK(cuMemsetD16Async(a + 64, 0xbeef, 2, s));
    CHECK(cuMemcpyDtoH_v2(out, a, N));
    uint32_t w;
    uint16_t h;
    memcpy(&w, out + 28, 4);
    memcpy(&h, out + 66, 2);
    printf("memset %d\n", out[0] == 0x5a && out[15] == 0x5a && w == 0x11223344u &&
                              out[32] == 0x5a && h == 0xbeef && out[N - 1] == 0x5a);
    put_result("memset_misaligned", cuMemsetD32_v2(a + 2, 0, 4));

    put_result("htod_past_end", cuMemcpyHtoD_v2(a, in, N + 1));
    put_result("dtoh_past_end", cuMemcpyDtoH_v2(out, a + N - 8, 16));
    put_result("dtod_across_blocks", cuMemcpyDtoD_v2(a, b + 2 * N - 16, 64));
    put_result("memset_past_end", cuMemsetD8_v2(a + 1, 0, N));
    put_result("dtoh_unknown_device_pointer", cuMemcpyDtoH_v2(out, 0x700000f00000ull, 16));
    put_result("dtoh_null_host", cuMemcpyDtoH_v2(NULL, a, 16));
    put_result("htod_null_device", cuMemcpyHtoD_v2(0, in, 16));
    put_result("zero_bytes", cuMemcpyHtoD_v2(a, in, 0));
    CHECK(cuMemFree_v2(b));
    put_result("dtoh_freed", cuMemcpyDtoH_v2(out, b, 16));
    return 0;
}

static int host_memory(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUdeviceptr d, mapped;
    void *pinned;
    unsigned int flags = 99;
    CHECK(cuMemAlloc_v2(&d, N));
    CHECK(cuMemHostAlloc(&pinned, N, CU_MEMHOSTALLOC_DEVICEMAP));
    memset(pinned, 0x42, N);
    CHECK(cuMemHostGetDevicePointer_v2(&mapped, pinned, 0));
    printf("device_pointer_is_host_pointer %d\n", mapped == (CUdeviceptr)(uintptr_t)pinned);
    CHECK(cuMemHostGetFlags(&flags, pinned));
    put_u64("host_flags", flags);
    // The pinned buffer used as a device address on both sides of device copies.
    CHECK(cuMemcpyDtoD_v2(d, mapped + 16, 64));
    unsigned char out[64];
    CHECK(cuMemcpyDtoH_v2(out, d, 64));
    printf("pinned_as_device %d\n", out[0] == 0x42 && out[63] == 0x42);
    put_result("pinned_past_end", cuMemcpyDtoD_v2(d, mapped + N - 8, 64));

    // Registered host memory.
    static unsigned char buf[3 * N];
    memset(buf, 7, sizeof buf);
    CHECK(cuMemHostRegister_v2(buf + N, N, 0));
    put_result("register_overlap", cuMemHostRegister_v2(buf + N + 100, 10, 0));
    CUdeviceptr reg;
    CHECK(cuMemHostGetDevicePointer_v2(&reg, buf + N + 8, 0));
    CHECK(cuMemcpyDtoH_v2(out, reg, 64));
    printf("registered_as_device %d\n", out[0] == 7);
    put_result("unregister_interior", cuMemHostUnregister(buf + N + 8));
    put_result("unregister", cuMemHostUnregister(buf + N));
    put_result("unregister_again", cuMemHostUnregister(buf + N));
    put_result("device_pointer_unregistered", cuMemHostGetDevicePointer_v2(&reg, buf, 0));

    // Managed memory is written by the host directly and read by the device.
    CUdeviceptr m;
    CHECK(cuMemAllocManaged(&m, N, CU_MEM_ATTACH_GLOBAL));
    memset((void *)(uintptr_t)m, 0x33, N);
    CHECK(cuMemcpyDtoD_v2(d, m, N));
    CHECK(cuMemcpyDtoH_v2(out, d + N - 64, 64));
    printf("managed_host_writes %d\n", out[63] == 0x33);
    CUdeviceptr base = 0;
    size_t size = 0;
    CHECK(cuMemGetAddressRange_v2(&base, &size, m + 100));
    printf("managed_range %d\n", base == m && size == N);
    CHECK(cuMemGetAddressRange_v2(&base, &size, d + 100));
    printf("device_range %d\n", base == d && size == N);
    put_result("free_managed", cuMemFree_v2(m));
    put_result("free_host_twice_first", cuMemFreeHost(pinned));
    put_result("free_host_twice_second", cuMemFreeHost(pinned));
    put_result("free_host_device_pointer", cuMemFreeHost((void *)(uintptr_t)d));
    return 0;
}

// A device pointer is not host memory: dereferencing it faults, as on a real GPU.
static int no_host_access(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUdeviceptr d;
    CHECK(cuMemAlloc_v2(&d, N));
    signal(SIGSEGV, on_segv);
    volatile unsigned char *p = (volatile unsigned char *)(uintptr_t)d;
    if (sigsetjmp(jump, 1) == 0) {
        unsigned char v = *p;
        printf("host_read_of_device_pointer succeeded %u\n", v);
    } else {
        printf("host_read_of_device_pointer faulted\n");
    }
    return 0;
}

// IPC handles opened in the exporting process map the same memory at a second address.
static int ipc(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUdeviceptr d, opened = 0, again = 0, async, other;
    CUipcMemHandle h, h_async;
    CHECK(cuMemAlloc_v2(&d, N));
    CHECK(cuIpcGetMemHandle(&h, d));
    size_t before = free_bytes();
    put_result("open", cuIpcOpenMemHandle_v2(&opened, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
    printf("new_address %d\n", opened != 0 && opened != d);
    printf("no_memory_taken %d\n", free_bytes() == before);
    char in[32] = "seen through the alias", out[32] = {0};
    CHECK(cuMemcpyHtoD_v2(d + 64, in, sizeof in));
    CHECK(cuMemcpyDtoH_v2(out, opened + 64, sizeof out));
    printf("alias %d\n", !strcmp(in, out));
    put_result("alias_past_end", cuMemcpyDtoH_v2(out, opened + N - 8, 16));
    put_result("open_again_v1", cuIpcOpenMemHandle(&again, h, 0));
    printf("same_address %d\n", again == opened);
    put_result("close", cuIpcCloseMemHandle(opened));
    put_result("still_open", cuMemcpyDtoH_v2(out, opened, 4));
    put_result("close_last", cuIpcCloseMemHandle(opened));
    put_result("close_closed", cuIpcCloseMemHandle(opened));
    put_result("copy_after_close", cuMemcpyDtoH_v2(out, opened, 4));
    CHECK(cuMemAllocAsync(&async, N, NULL));
    put_result("handle_of_async", cuIpcGetMemHandle(&h_async, async));
    put_result("handle_of_interior", cuIpcGetMemHandle(&h_async, d + 256));
    CHECK(cuIpcOpenMemHandle_v2(&opened, h, 0));
    CHECK(cuMemFree_v2(d));
    put_result("copy_after_target_freed", cuMemcpyDtoH_v2(out, opened, 4));
    CHECK(cuMemAlloc_v2(&other, N));
    printf("reallocated_at_same_address %d\n", other == d);
    put_result("open_stale_handle", cuIpcOpenMemHandle_v2(&again, h, 0));
    CUipcMemHandle garbage;
    memset(&garbage, 0x5a, sizeof garbage);
    put_result("open_garbage", cuIpcOpenMemHandle_v2(&again, garbage, 0));
    return 0;
}

/* Batches of copies: every copy runs in order, each checked before any runs, with the
 * attribute rules and the failure index. */
static int batch(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUdeviceptr a, b;
    CHECK(cuMemAlloc_v2(&a, 4096));
    CHECK(cuMemAlloc_v2(&b, 4096));
    unsigned host[1024], back[1024];
    for (unsigned i = 0; i < 1024; i++) host[i] = i * 3;
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    /* Host to a, then a to b, in one batch: the second copy sees the first's bytes. */
    CUdeviceptr dsts[2] = {a, b}, srcs[2] = {(CUdeviceptr)(uintptr_t)host, a};
    size_t sizes[2] = {sizeof host, sizeof host};
    CUmemcpyAttributes attrs[2];
    memset(attrs, 0, sizeof attrs);
    attrs[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    attrs[1].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
    size_t idxs[2] = {0, 1}, fail = 7;
    CHECK(cuMemcpyBatchAsync(dsts, srcs, sizes, 2, attrs, idxs, 2, &fail, s));
    CHECK(cuMemcpyDtoH_v2(back, b, sizeof back));
    printf("in_order %d %zu\n", !memcmp(back, host, sizeof host), fail);
    CHECK(cuMemsetD32_v2(b, 0, 1024));
    CHECK(cuMemcpyBatchAsync_v2_ptsz(dsts, srcs, sizes, 2, attrs, idxs, 1, NULL));
    CHECK(cuMemcpyDtoH_v2(back, b, sizeof back));
    printf("v2 %d\n", !memcmp(back, host, sizeof host));
    /* The second copy runs past b's end: nothing is copied, and the index says which. */
    CHECK(cuMemsetD32_v2(a, 0, 1024));
    sizes[1] = 8192;
    put_result("past_end", cuMemcpyBatchAsync_ptsz(dsts, srcs, sizes, 2, attrs, idxs, 1, &fail, s));
    printf("fail_idx %zu\n", fail);
    CHECK(cuMemcpyDtoH_v2(back, a, sizeof back));
    printf("nothing_copied %d\n", back[1] == 0);
    sizes[1] = sizeof host;
    put_result("no_attrs", cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 2, attrs, idxs, 0, s));
    idxs[0] = 1;
    put_result("first_index", cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 2, attrs, idxs, 1, s));
    idxs[0] = 0;
    attrs[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID;
    put_result("bad_order", cuMemcpyBatchAsync(dsts, srcs, sizes, 2, attrs, idxs, 1, &fail, s));
    printf("batch_fail_idx %d\n", fail == (size_t)-1);
    put_result("empty", cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 0, attrs, idxs, 1, s));
    CHECK(cuStreamDestroy_v2(s));
    CHECK(cuMemFree_v2(a));
    CHECK(cuMemFree_v2(b));
    return 0;
}

static CUmemcpy3DOperand pointer_operand(CUdeviceptr p, size_t row, size_t layer) {
    CUmemcpy3DOperand o;
    memset(&o, 0, sizeof o);
    o.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    o.op.ptr.ptr = p;
    o.op.ptr.rowLength = row;
    o.op.ptr.layerHeight = layer;
    return o;
}

/* Batches of 3D copies and copies with attributes: pitched and packed operands (a byte per
 * element between pointers), checked whole with the failure index (array operands:
 * sim_arrays.c). */
static int batch_3d(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUdeviceptr a, b;
    CHECK(cuMemAlloc_v2(&a, 4096));
    CHECK(cuMemAlloc_v2(&b, 4096));
    unsigned char host[4096], back[4096];
    for (unsigned i = 0; i < sizeof host; i++) host[i] = (unsigned char)(i * 7 + 1);
    CHECK(cuMemcpyHtoD_v2(a, host, sizeof host));
    CHECK(cuMemsetD8_v2(b, 0, 4096));
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    /* 2 layers of 3 rows of 10 bytes: from a (64-byte rows, 4-row layers) into b, packed. */
    CUDA_MEMCPY3D_BATCH_OP ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].src = pointer_operand(a, 64, 4);
    ops[0].dst = pointer_operand(b, 0, 0);
    ops[0].extent = (CUextent3D){10, 3, 2};
    ops[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    /* And 16 bytes of a into b + 1024, one row. */
    ops[1].src = pointer_operand(a + 512, 0, 0);
    ops[1].dst = pointer_operand(b + 1024, 0, 0);
    ops[1].extent = (CUextent3D){16, 1, 1};
    ops[1].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_DURING_API_CALL;
    size_t fail = 7;
    CHECK(cuMemcpy3DBatchAsync(2, ops, &fail, 0, s));
    CHECK(cuMemcpyDtoH_v2(back, b, sizeof back));
    int rows_ok = 1;
    for (int z = 0; z < 2; z++)
        for (int y = 0; y < 3; y++)
            rows_ok &= !memcmp(back + (z * 3 + y) * 10, host + (z * 4 + y) * 64, 10);
    printf("packed %d %d %zu\n", rows_ok, back[60] == 0, fail);
    printf("second %d\n", !memcmp(back + 1024, host + 512, 16));
    CHECK(cuMemsetD8_v2(b, 0, 4096));
    CHECK(cuMemcpy3DBatchAsync_v2_ptsz(1, ops, 0, NULL));
    CHECK(cuMemcpy3DWithAttributesAsync(&ops[1], 0, s));
    CHECK(cuMemcpyDtoH_v2(back, b, sizeof back));
    printf("v2_and_single %d %d\n", !memcmp(back + 30, host + 4 * 64, 10),
           !memcmp(back + 1024, host + 512, 16));
    /* The second operation runs past b's end: nothing copied, its index said. */
    CHECK(cuMemsetD8_v2(b, 0, 4096));
    ops[1].dst = pointer_operand(b + 4090, 0, 0);
    put_result("past_end", cuMemcpy3DBatchAsync_ptsz(2, ops, &fail, 0, s));
    CHECK(cuMemcpyDtoH_v2(back, b, sizeof back));
    printf("fail_idx %zu %d\n", fail, back[0] == 0);
    ops[1].dst = pointer_operand(b + 1024, 0, 0);
    ops[0].src.op.ptr.rowLength = 5;
    put_result("short_rows", cuMemcpy3DBatchAsync(2, ops, &fail, 0, s));
    printf("short_rows_idx %zu\n", fail);
    ops[0].src.op.ptr.rowLength = 64;
    put_result("flags", cuMemcpy3DBatchAsync_v2(2, ops, 1, s));
    put_result("empty", cuMemcpy3DBatchAsync_v2(0, ops, 0, s));
    ops[1].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_INVALID;
    put_result("bad_order", cuMemcpy3DWithAttributesAsync_ptsz(&ops[1], 0, NULL));
    ops[1].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_ANY;
    ops[1].src.type = CU_MEMCPY_OPERAND_TYPE_ARRAY;
    put_result("array", cuMemcpy3DWithAttributesAsync(&ops[1], 0, s));
    /* One copy with attributes. */
    CUmemcpyAttributes attr;
    memset(&attr, 0, sizeof attr);
    attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    CHECK(cuMemsetD8_v2(b, 0, 4096));
    CHECK(cuMemcpyWithAttributesAsync(b, a, 100, &attr, s));
    CHECK(cuMemcpyWithAttributesAsync_ptsz(b + 200, a, 100, &attr, NULL));
    CHECK(cuMemcpyDtoH_v2(back, b, sizeof back));
    printf("attributes %d %d\n", !memcmp(back, host, 100), !memcmp(back + 200, host, 100));
    put_result("no_attribute", cuMemcpyWithAttributesAsync(b, a, 100, NULL, s));
    CHECK(cuStreamDestroy_v2(s));
    CHECK(cuMemFree_v2(a));
    CHECK(cuMemFree_v2(b));
    return 0;
}

/* Copies between two devices' contexts (run with SIMCUDA_DEVICES=2) and 2D memsets. */
static int peer(int argc, char **argv) {
    (void)argc, (void)argv;
    CUcontext c0 = setup(), c1;
    CUdevice d1;
    CHECK(cuDeviceGet(&d1, 1));
    CHECK(cuDevicePrimaryCtxRetain(&c1, d1));
    CUdeviceptr a, b;
    CHECK(cuMemAlloc_v2(&a, 4096));
    CHECK(cuCtxSetCurrent(c1));
    CHECK(cuMemAlloc_v2(&b, 4096));
    unsigned host[1024], back[1024];
    for (unsigned i = 0; i < 1024; i++) host[i] = i * 5 + 1;
    CHECK(cuMemcpyHtoD_v2(a, host, sizeof host));
    CHECK(cuMemcpyPeer(b, c1, a, c0, sizeof host));
    CHECK(cuMemcpyDtoH_v2(back, b, sizeof back));
    printf("peer %d\n", !memcmp(back, host, sizeof host));
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuMemsetD32_v2(a, 0, 1024));
    CHECK(cuMemcpyPeerAsync_ptsz(a, c0, b, c1, sizeof host, s));
    CHECK(cuStreamSynchronize(s));
    CHECK(cuMemcpyDtoH_v2(back, a, sizeof back));
    printf("peer_async %d\n", !memcmp(back, host, sizeof host));
    put_result("peer_no_context", cuMemcpyPeer(b, NULL, a, c0, 64));
    put_result("peer_past_end", cuMemcpyPeerAsync(b, c1, a + 64, c0, 4096, s));
    /* 3D: rows 0 and 1 of a (256-byte rows) into b's rows 128 bytes apart, 64 bytes each. */
    CHECK(cuMemsetD8_v2(b, 0, 4096));
    CUDA_MEMCPY3D_PEER p;
    memset(&p, 0, sizeof p);
    p.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    p.srcDevice = a;
    p.srcContext = c0;
    p.srcPitch = 256;
    p.srcHeight = 2;
    p.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    p.dstDevice = b;
    p.dstContext = c1;
    p.dstPitch = 128;
    p.dstHeight = 2;
    p.WidthInBytes = 64;
    p.Height = 2;
    p.Depth = 1;
    CHECK(cuMemcpy3DPeer(&p));
    CHECK(cuMemcpyDtoH_v2(back, b, sizeof back));
    printf("peer_3d %d\n", !memcmp(back, host, 64) && !memcmp(back + 32, host + 64, 64) &&
                               back[16] == 0 && back[48] == 0);
    p.dstContext = NULL;
    put_result("peer_3d_no_context", cuMemcpy3DPeerAsync(&p, s));
    /* 2D memsets: 3 rows of 4 16-bit elements, 64 bytes apart, the gaps left alone. */
    CHECK(cuMemsetD8_v2(b, 0xee, 4096));
    CHECK(cuMemsetD2D16Async_ptsz(b, 64, 0x1234, 4, 3, s));
    CHECK(cuStreamSynchronize(s));
    unsigned short row[96];
    CHECK(cuMemcpyDtoH_v2(row, b, sizeof row));
    int ok = 1;
    for (int y = 0; y < 3; y++)
        for (int x = 0; x < 32; x++) ok &= row[y * 32 + x] == (x < 4 ? 0x1234 : 0xeeee);
    printf("memset_2d %d\n", ok);
    put_result("memset_2d_overlapping", cuMemsetD2D32_v2(b, 8, 0, 4, 3));
    put_result("memset_2d_misaligned_pitch", cuMemsetD2D16_v2(b, 63, 0, 4, 3));
    put_result("memset_2d_past_end", cuMemsetD2D8_v2(b, 2048, 0, 64, 3));
    CHECK(cuMemcpyDtoH_v2(row, b, sizeof row));
    printf("memset_2d_nothing_written %d\n", row[0] == 0x1234);
    put_result("memset_2d_one_row_any_pitch", cuMemsetD2D8_v2(b, 0, 7, 64, 1));
    CHECK(cuStreamDestroy_v2(s));
    CHECK(cuMemFree_v2(b));
    CHECK(cuCtxSetCurrent(c0));
    CHECK(cuMemFree_v2(a));
    return 0;
}

int main(int argc, char **argv) {
    static const struct subcommand cmds[] = {
        {"ipc", ipc},
        {"batch", batch},
        {"batch-3d", batch_3d},
        {"peer", peer},
        {"round-trip", round_trip},
        {"host-memory", host_memory},
        {"no-host-access", no_host_access},
    };
    return DISPATCH(cmds);
}
