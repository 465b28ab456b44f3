// link: driver
// Calls every stream-ordering entry point the shim hooks, each exact variant once (legacy,
// _ptsz and _ptds), through exported symbols, and prints "ptr <hex>" for the buffer its
// kernels get. The test compares the trace's records with this list of calls.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "simcuda.h"

#define CHECK(x)                                                                       \
    do {                                                                               \
        CUresult rc_ = (x);                                                            \
        if (rc_ != CUDA_SUCCESS) {                                                     \
            fprintf(stderr, "%s:%d %s failed with %d\n", __FILE__, __LINE__, #x, rc_); \
            exit(3);                                                                   \
        }                                                                              \
    } while (0)

static void callback(CUstream s, CUresult status, void *user) {
    (void)s;
    (void)status;
    (*(int *)user)++;
}

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CUfunction fill, add;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, "simcuda kernels"));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    CHECK(cuModuleGetFunction(&add, mod, "add_u32"));

    CUstream s, s2;
    CUevent e;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreateWithPriority(&s2, 0, -1));
    CHECK(cuEventCreate(&e, 0));
    CUdeviceptr d, d2;
    CHECK(cuMemAlloc_v2(&d, 4096));
    CHECK(cuMemAlloc_v2(&d2, 4096));
    printf("ptr 0x%llx\n", (unsigned long long)d);
    printf("ctx 0x%llx\n", (unsigned long long)(uintptr_t)ctx);
    unsigned host[1024] = {0};

    CHECK(cuMemcpy(d, d2, 64));
    CHECK(cuMemcpy_ptds(d, d2, 64));
    CHECK(cuMemcpyAsync(d, d2, 64, s));
    CHECK(cuMemcpyAsync_ptsz(d, d2, 64, s));
    CHECK(cuMemcpyHtoD_v2(d, host, 64));
    CHECK(cuMemcpyHtoD_v2_ptds(d, host, 64));
    CHECK(cuMemcpyDtoH_v2(host, d, 64));
    CHECK(cuMemcpyDtoH_v2_ptds(host, d, 64));
    CHECK(cuMemcpyDtoD_v2(d2, d, 64));
    CHECK(cuMemcpyDtoD_v2_ptds(d2, d, 64));
    CHECK(cuMemcpyHtoDAsync_v2(d, host, 64, s));
    CHECK(cuMemcpyHtoDAsync_v2_ptsz(d, host, 64, s));
    CHECK(cuMemcpyDtoHAsync_v2(host, d, 64, s));
    CHECK(cuMemcpyDtoHAsync_v2_ptsz(host, d, 64, s));
    CHECK(cuMemcpyDtoDAsync_v2(d2, d, 64, s));
    CHECK(cuMemcpyDtoDAsync_v2_ptsz(d2, d, 64, s));
    CHECK(cuMemsetD8_v2(d, 1, 64));
    CHECK(cuMemsetD8_v2_ptds(d, 1, 64));
    CHECK(cuMemsetD16_v2(d, 1, 32));
    CHECK(cuMemsetD16_v2_ptds(d, 1, 32));
    CHECK(cuMemsetD32_v2(d, 1, 16));
    CHECK(cuMemsetD32_v2_ptds(d, 1, 16));
    CHECK(cuMemsetD8Async(d, 1, 64, s));
    CHECK(cuMemsetD8Async_ptsz(d, 1, 64, s));
    CHECK(cuMemsetD16Async(d, 1, 32, s));
    CHECK(cuMemsetD16Async_ptsz(d, 1, 32, s));
    CHECK(cuMemsetD32Async(d, 1, 16, s));
    CHECK(cuMemsetD32Async_ptsz(d, 1, 16, s));
    // 2D memsets: 3 rows of 16 elements, 256 bytes apart.
    CHECK(cuMemsetD2D8_v2(d, 256, 1, 16, 3));
    CHECK(cuMemsetD2D8_v2_ptds(d, 256, 1, 16, 3));
    CHECK(cuMemsetD2D16_v2(d, 256, 1, 16, 3));
    CHECK(cuMemsetD2D16_v2_ptds(d, 256, 1, 16, 3));
    CHECK(cuMemsetD2D32_v2(d, 256, 1, 16, 3));
    CHECK(cuMemsetD2D32_v2_ptds(d, 256, 1, 16, 3));
    CHECK(cuMemsetD2D8Async(d, 256, 1, 16, 3, s));
    CHECK(cuMemsetD2D8Async_ptsz(d, 256, 1, 16, 3, NULL));
    CHECK(cuMemsetD2D16Async(d, 256, 1, 16, 3, s));
    CHECK(cuMemsetD2D16Async_ptsz(d, 256, 1, 16, 3, NULL));
    CHECK(cuMemsetD2D32Async(d, 256, 1, 16, 3, s));
    CHECK(cuMemsetD2D32Async_ptsz(d, 256, 1, 16, 3, NULL));
    // Peer copies, d to d2 (one context on both sides); the 3D ones copy 2 rows of 64 bytes
    // from rows 128 bytes apart into rows 256 bytes apart.
    CHECK(cuMemcpyPeer(d2, ctx, d, ctx, 64));
    CHECK(cuMemcpyPeer_ptds(d2, ctx, d, ctx, 64));
    CHECK(cuMemcpyPeerAsync(d2, ctx, d, ctx, 64, s));
    CHECK(cuMemcpyPeerAsync_ptsz(d2, ctx, d, ctx, 64, NULL));
    CUDA_MEMCPY3D_PEER peer;
    memset(&peer, 0, sizeof peer);
    peer.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    peer.srcDevice = d;
    peer.srcContext = ctx;
    peer.srcPitch = 128;
    peer.srcHeight = 2;
    peer.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    peer.dstDevice = d2;
    peer.dstContext = ctx;
    peer.dstPitch = 256;
    peer.dstHeight = 2;
    peer.WidthInBytes = 64;
    peer.Height = 2;
    peer.Depth = 1;
    CHECK(cuMemcpy3DPeer(&peer));
    CHECK(cuMemcpy3DPeer_ptds(&peer));
    CHECK(cuMemcpy3DPeerAsync(&peer, s));
    CHECK(cuMemcpy3DPeerAsync_ptsz(&peer, NULL));

    // fill_u32(d, 5, 1024) through kernelParams; add_u32 through the extra buffer.
    unsigned value = 5, n = 1024;
    void *params[] = {&d, &value, &n};
    CHECK(cuLaunchKernel(fill, 8, 1, 1, 128, 1, 1, 0, s, params, NULL));
    char buf[16];
    unsigned delta = 1;
    memcpy(buf, &d, 8);
    memcpy(buf + 8, &delta, 4);
    memcpy(buf + 12, &n, 4);
    size_t size = sizeof buf;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    CHECK(cuLaunchKernel_ptsz(add, 8, 1, 1, 128, 1, 1, 0, NULL, NULL, extra));
    // The same functions again (their parameter layouts come from the shim's cache).
    CHECK(cuLaunchKernel(fill, 8, 1, 1, 128, 1, 1, 0, s, params, NULL));
    CHECK(cuLaunchKernel_ptsz(add, 8, 1, 1, 128, 1, 1, 0, NULL, NULL, extra));
    // Batches of copies, two copies each: d to d2 at offsets 0 and 64.
    CUdeviceptr bdsts[2] = {d2, d2 + 64}, bsrcs[2] = {d, d + 64};
    size_t bsizes[2] = {64, 32}, bidxs[1] = {0}, bfail;
    CUmemcpyAttributes battrs[1];
    memset(battrs, 0, sizeof battrs);
    battrs[0].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    CHECK(cuMemcpyBatchAsync(bdsts, bsrcs, bsizes, 2, battrs, bidxs, 1, &bfail, s));
    CHECK(cuMemcpyBatchAsync_ptsz(bdsts, bsrcs, bsizes, 2, battrs, bidxs, 1, &bfail, NULL));
    CHECK(cuMemcpyBatchAsync_v2(bdsts, bsrcs, bsizes, 2, battrs, bidxs, 1, s));
    CHECK(cuMemcpyBatchAsync_v2_ptsz(bdsts, bsrcs, bsizes, 2, battrs, bidxs, 1, NULL));
    // A copy with attributes (d to d2, 64 bytes), and batches of 3D copies: 4 rows of 16 bytes
    // from d, 64 bytes apart, into d2 packed, and 32 bytes from d + 256 to d2 + 128.
    CHECK(cuMemcpyWithAttributesAsync(d2, d, 64, battrs, s));
    CHECK(cuMemcpyWithAttributesAsync_ptsz(d2, d, 64, battrs, NULL));
    CUDA_MEMCPY3D_BATCH_OP cops[2];
    memset(cops, 0, sizeof cops);
    cops[0].src.type = cops[0].dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    cops[0].src.op.ptr.ptr = d;
    cops[0].src.op.ptr.rowLength = 64;
    cops[0].dst.op.ptr.ptr = d2;
    cops[0].extent = (CUextent3D){16, 4, 1};
    cops[1].src.type = cops[1].dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
    cops[1].src.op.ptr.ptr = d + 256;
    cops[1].dst.op.ptr.ptr = d2 + 128;
    cops[1].extent = (CUextent3D){32, 1, 1};
    cops[0].srcAccessOrder = cops[1].srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    CHECK(cuMemcpy3DBatchAsync(2, cops, &bfail, 0, s));
    CHECK(cuMemcpy3DBatchAsync_ptsz(2, cops, &bfail, 0, NULL));
    CHECK(cuMemcpy3DBatchAsync_v2(2, cops, 0, s));
    CHECK(cuMemcpy3DBatchAsync_v2_ptsz(2, cops, 0, NULL));
    CHECK(cuMemcpy3DWithAttributesAsync(cops, 0, s));
    CHECK(cuMemcpy3DWithAttributesAsync_ptsz(cops, 0, NULL));
    // Cooperative launches (kernelParams only).
    CHECK(cuLaunchCooperativeKernel(fill, 8, 1, 1, 128, 1, 1, 0, s, params));
    CHECK(cuLaunchCooperativeKernel_ptsz(fill, 8, 1, 1, 128, 1, 1, 0, NULL, params));

    int calls = 0;
    CHECK(cuStreamAddCallback(s, callback, &calls, 0));
    CHECK(cuStreamAddCallback_ptsz(NULL, callback, &calls, 0));
    CHECK(cuEventRecord(e, s));
    CHECK(cuEventRecord_ptsz(e, NULL));
    CHECK(cuEventRecordWithFlags(e, s, 0));
    CHECK(cuEventRecordWithFlags_ptsz(e, NULL, 0));
    CHECK(cuStreamWaitEvent(s2, e, 0));
    CHECK(cuStreamWaitEvent_ptsz(NULL, e, 0));
    CHECK(cuEventSynchronize(e));
    CHECK(cuEventQuery(e));
    CHECK(cuStreamQuery(s));
    CHECK(cuStreamQuery_ptsz(NULL));
    CHECK(cuStreamSynchronize(s));
    CHECK(cuStreamSynchronize_ptsz(NULL));
    CHECK(cuCtxSynchronize());
    CHECK(cuCtxSynchronize_v2(ctx));
    CHECK(cuCtxRecordEvent(ctx, e));
    CHECK(cuCtxWaitEvent(ctx, e));

    CUgraph g;
    CHECK(cuStreamBeginCapture_v2(s2, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuStreamEndCapture(s2, &g));
    CHECK(cuGraphDestroy(g));
    CHECK(cuStreamBeginCapture(s2));
    CHECK(cuStreamEndCapture(s2, &g));
    CHECK(cuGraphDestroy(g));
    CHECK(cuStreamBeginCapture_v2_ptsz(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK(cuStreamEndCapture_ptsz(s, &g));
    CHECK(cuGraphDestroy(g));
    CHECK(cuStreamBeginCapture_ptsz(s));
    CHECK(cuStreamEndCapture_ptsz(s, &g));
    CHECK(cuGraphDestroy(g));
    CUgraph given, same;
    CHECK(cuGraphCreate(&given, 0));
    CHECK(cuStreamBeginCaptureToGraph(s2, given, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuStreamEndCapture(s2, &same));
    CHECK(cuStreamBeginCaptureToGraph_ptsz(s, given, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK(cuStreamEndCapture_ptsz(s, &same));
    CHECK(cuGraphDestroy(given));

    /* Stream memory operations: each single-value variant once (writes, then waits for what
     * was written), and each batch variant with a write and a wait. */
    CHECK(cuStreamWriteValue32(s, d, 1, 0));
    CHECK(cuStreamWriteValue32_ptsz(NULL, d, 2, 0));
    CHECK(cuStreamWriteValue32_v2(s, d, 3, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER));
    CHECK(cuStreamWriteValue32_v2_ptsz(s2, d, 4, 0));
    CHECK(cuStreamWriteValue64(s, d + 8, 5, 0));
    CHECK(cuStreamWriteValue64_ptsz(NULL, d + 8, 6, 0));
    CHECK(cuStreamWriteValue64_v2(s, d + 8, 7, 0));
    CHECK(cuStreamWriteValue64_v2_ptsz(s2, d + 8, 0x1122334455667788ull, 0));
    CHECK(cuStreamWaitValue32(s2, d, 4, CU_STREAM_WAIT_VALUE_GEQ));
    CHECK(cuStreamWaitValue32_ptsz(NULL, d, 4, CU_STREAM_WAIT_VALUE_EQ));
    CHECK(cuStreamWaitValue32_v2(s, d, 4, CU_STREAM_WAIT_VALUE_AND));
    CHECK(cuStreamWaitValue32_v2_ptsz(NULL, d, 1, CU_STREAM_WAIT_VALUE_NOR | CU_STREAM_WAIT_VALUE_FLUSH));
    CHECK(cuStreamWaitValue64(s, d + 8, 7, 0));
    CHECK(cuStreamWaitValue64_ptsz(NULL, d + 8, 7, 0));
    CHECK(cuStreamWaitValue64_v2(s, d + 8, 7, 0));
    CHECK(cuStreamWaitValue64_v2_ptsz(s2, d + 8, 0x1122334455667788ull, CU_STREAM_WAIT_VALUE_EQ));
    CUstreamBatchMemOpParams ops[2];
    memset(ops, 0, sizeof ops);
    ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[0].writeValue.address = d + 16;
    ops[0].writeValue.value = 9;
    ops[1].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_64;
    ops[1].waitValue.address = d + 8;
    ops[1].waitValue.value64 = 0x1122334455667788ull;
    ops[1].waitValue.flags = CU_STREAM_WAIT_VALUE_EQ;
    CHECK(cuStreamBatchMemOp(s, 2, ops, 0));
    CHECK(cuStreamBatchMemOp_ptsz(NULL, 2, ops, 0));
    CHECK(cuStreamBatchMemOp_v2(s2, 2, ops, 0));
    CHECK(cuStreamBatchMemOp_v2_ptsz(s, 2, ops, 0));

    CHECK(cuMemFree_v2(d));
    CHECK(cuMemFree_v2(d2));
    CHECK(cuEventDestroy(e));
    CHECK(cuStreamDestroy(s2));
    CHECK(cuStreamDestroy_v2(s));
    printf("callbacks %d\n", calls);
    CHECK(cuDevicePrimaryCtxRelease_v2(dev));
    return 0;
}
