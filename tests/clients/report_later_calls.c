// link: driver
// One stream-ordering mistake made through each entry point added after the first ones,
// named by the first argument, with correctly ordered twins named by the second:
//   host-func      work left on a stream by cuLaunchHostFunc, never waited for (twins: host,
//                  event)
//   graph          a cuGraphLaunch never waited for (twins: host, event)
//   launch-ex      a kernel launched by cuLaunchKernelEx on one stream, read on another with no
//                  edge (twins: host, event)
//   copy-2d        a kernel's output read by cuMemcpy2DAsync_v2 on another stream with no edge
//                  (twins: host, event)
//   copy-3d        the same through cuMemcpy3DAsync_v2 (twins: host, event)
//   copy-2d-sync   a device-to-device cuMemcpy2D_v2 (which the host does not wait for) into a
//                  buffer that a non-blocking stream then reads (twins: pinned, a host-to-device
//                  copy from pinned memory, which the host does wait for; event)
// Every subcommand otherwise cleans up after itself, so a mistake is the only finding of its
// report and a twin's report has none.
#include <stdint.h>

#include "sim_util.h"

#define N 1024
#define ROW 64
#define PITCH 256

static CUfunction fill;
static unsigned host_buf[N];
static int host_calls;

static void bump(void *counter) { (*(int *)counter)++; }

__attribute__((noinline)) static CUstream make_stream(unsigned flags) {
    CUstream s;
    CHECK(cuStreamCreate(&s, flags));
    return s;
}

__attribute__((noinline)) static CUdeviceptr make_buffer(void) {
    CUdeviceptr d;
    CHECK(cuMemAlloc_v2(&d, N * sizeof(unsigned)));
    return d;
}

/* Orders stream `to` after everything queued on `from` so far, as the twin asks: by an event
 * ("event") or by waiting on the host ("host"); the mistake ("") does nothing. */
static void order(const char *how, CUstream from, CUstream to) {
    if (!strcmp(how, "event")) {
        CUevent ev;
        CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
        CHECK(cuEventRecord(ev, from));
        CHECK(cuStreamWaitEvent(to, ev, 0));
        CHECK(cuEventDestroy_v2(ev));
    } else if (!strcmp(how, "host")) {
        CHECK(cuStreamSynchronize(from));
    }
}

/* The host waits for `s` as the twin asks ("host": synchronize, "event": an event recorded
 * and synchronized); the mistake ("") never waits. */
static void wait_for(const char *how, CUstream s) {
    if (!strcmp(how, "event")) {
        CUevent ev;
        CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
        CHECK(cuEventRecord(ev, s));
        CHECK(cuEventSynchronize(ev));
        CHECK(cuEventDestroy_v2(ev));
    } else if (!strcmp(how, "host")) {
        CHECK(cuStreamSynchronize(s));
    }
}

/* fill_u32(d, value, N) on stream s. */
static void produce(CUdeviceptr d, unsigned value, CUstream s) {
    unsigned n = N;
    void *params[] = {&d, &value, &n};
    CHECK(cuLaunchKernel(fill, N / 128, 1, 1, 128, 1, 1, 0, s, params, NULL));
}

/* Synchronizes and destroys both streams, frees the buffers (0: none). */
static void finish(CUstream a, CUstream b, CUdeviceptr d, CUdeviceptr e) {
    CHECK(cuStreamSynchronize(a));
    CHECK(cuStreamSynchronize(b));
    CHECK(cuStreamDestroy_v2(a));
    CHECK(cuStreamDestroy_v2(b));
    if (d) CHECK(cuMemFree_v2(d));
    if (e) CHECK(cuMemFree_v2(e));
}

static int host_func(const char *how) {
    CUstream a = make_stream(CU_STREAM_NON_BLOCKING);
    CHECK(cuLaunchHostFunc(a, bump, &host_calls));
    wait_for(how, a);
    CHECK(cuStreamDestroy_v2(a));
    return host_calls == 1 ? 0 : 4;
}

static int graph(const char *how) {
    CUstream a = make_stream(CU_STREAM_NON_BLOCKING), cap = make_stream(CU_STREAM_NON_BLOCKING);
    CUgraph g;
    CUgraphExec exec;
    CHECK(cuStreamBeginCapture_v2(cap, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuLaunchHostFunc(cap, bump, &host_calls));
    CHECK(cuStreamEndCapture(cap, &g));
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    CHECK(cuGraphLaunch(exec, a));
    wait_for(how, a);
    CHECK(cuGraphExecDestroy(exec));
    CHECK(cuGraphDestroy(g));
    CHECK(cuStreamDestroy_v2(a));
    CHECK(cuStreamDestroy_v2(cap));
    return host_calls == 1 ? 0 : 4;
}

static int launch_ex(const char *how) {
    CUstream a = make_stream(CU_STREAM_NON_BLOCKING), b = make_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr d = make_buffer();
    unsigned value = 7, n = N;
    void *params[] = {&d, &value, &n};
    CUlaunchConfig cfg = {.gridDimX = N / 128, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 128,
                          .blockDimY = 1, .blockDimZ = 1, .hStream = a};
    CHECK(cuLaunchKernelEx(&cfg, fill, params, NULL));
    order(how, a, b);
    CHECK(cuMemcpyDtoHAsync_v2(host_buf, d, sizeof host_buf, b));
    finish(a, b, d, 0);
    return host_buf[N - 1] == 7 ? 0 : 4;
}

/* A kernel on a fills d; a 2D (or 3D) copy on b reads 4 rows of it, 256 bytes apart. */
static int copy_nd(const char *how, int dims) {
    CUstream a = make_stream(CU_STREAM_NON_BLOCKING), b = make_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr d = make_buffer();
    produce(d, 8, a);
    order(how, a, b);
    if (dims == 2) {
        CUDA_MEMCPY2D c = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = d,
                           .srcPitch = PITCH, .dstMemoryType = CU_MEMORYTYPE_HOST,
                           .dstHost = host_buf, .dstPitch = ROW, .WidthInBytes = ROW,
                           .Height = 4};
        CHECK(cuMemcpy2DAsync_v2(&c, b));
    } else {
        CUDA_MEMCPY3D c = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = d,
                           .srcPitch = PITCH, .srcHeight = 2, .dstMemoryType = CU_MEMORYTYPE_HOST,
                           .dstHost = host_buf, .dstPitch = ROW, .dstHeight = 2,
                           .WidthInBytes = ROW, .Height = 2, .Depth = 2};
        CHECK(cuMemcpy3DAsync_v2(&c, b));
    }
    finish(a, b, d, 0);
    return host_buf[0] == 8 ? 0 : 4;
}

/* A synchronous 2D copy into e on the legacy stream, then a read of e on a non-blocking
 * stream b. The host waits for a copy from pinned host memory, not for a device-to-device
 * one. */
static int copy_2d_sync(const char *how) {
    CUstream a = make_stream(CU_STREAM_NON_BLOCKING), b = make_stream(CU_STREAM_NON_BLOCKING);
    CUdeviceptr d = make_buffer(), e = make_buffer();
    unsigned *pinned;
    CHECK(cuMemAllocHost_v2((void **)&pinned, N * sizeof(unsigned)));
    for (int i = 0; i < N; i++) pinned[i] = 9;
    CHECK(cuMemcpyHtoD_v2(d, pinned, N * sizeof(unsigned)));
    CUDA_MEMCPY2D c = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = d, .srcPitch = ROW,
                       .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = e, .dstPitch = PITCH,
                       .WidthInBytes = ROW, .Height = 4};
    if (!strcmp(how, "pinned")) {
        c.srcMemoryType = CU_MEMORYTYPE_HOST;
        c.srcHost = pinned;
    }
    CHECK(cuMemcpy2D_v2(&c));
    order(how, NULL, b);
    CHECK(cuMemcpyDtoHAsync_v2(host_buf, e, ROW, b));
    finish(a, b, d, e);
    CHECK(cuMemFreeHost(pinned));
    return host_buf[0] == 9 ? 0 : 4;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s MISTAKE [host|event|pinned]\n", argv[0]);
        return 2;
    }
    setup();
    CUmodule mod;
    CHECK(cuModuleLoadData(&mod, "simcuda kernels"));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    const char *what = argv[1];
    const char *how = argc > 2 ? argv[2] : "";
    if (!strcmp(what, "host-func")) return host_func(how);
    if (!strcmp(what, "graph")) return graph(how);
    if (!strcmp(what, "launch-ex")) return launch_ex(how);
    if (!strcmp(what, "copy-2d")) return copy_nd(how, 2);
    if (!strcmp(what, "copy-3d")) return copy_nd(how, 3);
    if (!strcmp(what, "copy-2d-sync")) return copy_2d_sync(how);
    fprintf(stderr, "unknown mistake %s\n", what);
    return 2;
}
