// link: driver
// Calls each stream-ordering entry point added after the first ones once, every exact variant
// (cuLaunchHostFunc, cuLaunchKernelEx, graph capture + cuGraphLaunch, cuMemcpy2D/3D, with
// _ptsz/_ptds), through exported symbols, and prints what the trace must show ("name value"
// lines: buffers, streams, the graph) and what the simulator computed. Calls on different
// streams are separated by a context synchronize and everything is freed and destroyed, so a
// correct analysis reports nothing.
#include <stdint.h>

#include "sim_util.h"

#define N 1024
#define ROW 64    /* bytes per row copied */
#define PITCH 256 /* device pitch of the 2D copies */

static int host_calls;

static void bump(void *counter) { (*(int *)counter)++; }

int main(void) {
    setup();
    CUmodule mod;
    CUfunction fill;
    CHECK(cuModuleLoadData(&mod, "simcuda kernels"));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    CUstream s, cap;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d, e;
    CHECK(cuMemAlloc_v2(&d, N * 4));
    CHECK(cuMemAlloc_v2(&e, N * 4));
    static unsigned host[N];
    put_ptr("d", d);
    put_ptr("e", e);
    put_ptr("s", (uintptr_t)s);
    put_ptr("host", (uintptr_t)host);

    /* cuLaunchKernelEx: fill_u32(d, 5, N) on s through kernelParams, then fill_u32(d, 6, N)
     * on the per-thread stream through the extra buffer. */
    unsigned value = 5, n = N;
    void *params[] = {&d, &value, &n};
    CUlaunchAttribute prio = {.id = CU_LAUNCH_ATTRIBUTE_PRIORITY, .value = {.priority = 0}};
    CUlaunchConfig cfg = {.gridDimX = N / 128, .gridDimY = 1, .gridDimZ = 1, .blockDimX = 128,
                          .blockDimY = 1, .blockDimZ = 1, .hStream = s, .attrs = &prio,
                          .numAttrs = 1};
    CHECK(cuLaunchKernelEx(&cfg, fill, params, NULL));
    CHECK(cuCtxSynchronize());
    char buf[16];
    unsigned six = 6;
    memcpy(buf, &d, 8);
    memcpy(buf + 8, &six, 4);
    memcpy(buf + 12, &n, 4);
    size_t size = sizeof buf;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                     CU_LAUNCH_PARAM_END};
    cfg.hStream = NULL;
    cfg.numAttrs = 0;
    cfg.attrs = NULL;
    CHECK(cuLaunchKernelEx_ptsz(&cfg, fill, NULL, extra));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpyDtoH_v2(host, d, sizeof host));
    put_u64("launch_ex_value", host[N - 1]);

    /* cuLaunchHostFunc: runs in stream order (at once on an idle stream). */
    CHECK(cuLaunchHostFunc(s, bump, &host_calls));
    CHECK(cuLaunchHostFunc_ptsz(NULL, bump, &host_calls));
    CHECK(cuCtxSynchronize());
    put_u64("host_calls", (unsigned long long)host_calls);

    /* (Also the regression test of a crash: a program linked with -lcuda that called the
     * resolver made the shim use libcuda's link map as a dlsym handle.)
     * CUDA 13.1's cuLaunchHostFunc_v2 (a fourth argument, the sync mode), which is what the
     * 13.1+ runtime gets when it resolves cuLaunchHostFunc at 13010, plain and per-thread; a
     * bad sync mode is refused. */
    {
        typedef CUresult (*host_v2_fn)(CUstream, CUhostFn, void *, unsigned);
        void *p = NULL, *pt = NULL;
        CHECK(cuGetProcAddress_v2("cuLaunchHostFunc", &p, 13010, CU_GET_PROC_ADDRESS_DEFAULT, NULL));
        CHECK(cuGetProcAddress_v2("cuLaunchHostFunc", &pt, 13010,
                                  CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL));
        put_u64("host_v2_resolved", p == (void *)cuLaunchHostFunc_v2 && pt == (void *)cuLaunchHostFunc_v2_ptsz);
        static int v2_calls;
        CHECK(((host_v2_fn)p)(s, bump, &v2_calls, 1));
        CHECK(((host_v2_fn)pt)(NULL, bump, &v2_calls, 0));
        put_u64("host_v2_bad_mode", (unsigned long long)((host_v2_fn)p)(s, bump, &v2_calls, 7));
        CHECK(cuCtxSynchronize());
        put_u64("host_v2_calls", (unsigned long long)v2_calls);
    }

    /* 2D copies: 4 rows of 64 bytes between packed host rows and device rows 256 apart,
     * starting at device row 1. */
    for (int i = 0; i < N; i++) host[i] = (unsigned)i;
    CUDA_MEMCPY2D c2 = {.srcMemoryType = CU_MEMORYTYPE_HOST, .srcHost = host, .srcPitch = ROW,
                        .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = d, .dstY = 1,
                        .dstPitch = PITCH, .WidthInBytes = ROW, .Height = 4};
    CHECK(cuMemsetD8_v2(d, 0, N * 4));
    CHECK(cuMemcpy2D_v2(&c2));
    CHECK(cuMemcpy2D_v2_ptds(&c2));
    /* Device rows back to the host (at host row 8 onwards), unaligned and per-thread. */
    CUDA_MEMCPY2D back = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = d, .srcY = 1,
                          .srcPitch = PITCH, .dstMemoryType = CU_MEMORYTYPE_HOST,
                          .dstHost = host + 512, .dstPitch = ROW, .WidthInBytes = ROW,
                          .Height = 4};
    CHECK(cuMemcpy2DUnaligned_v2(&back));
    CHECK(cuMemcpy2DUnaligned_v2_ptds(&back));
    printf("roundtrip_2d %d\n", memcmp(host, host + 512, 4 * ROW) == 0);
    /* Device to device on s and on the per-thread stream (unified addressing on the source). */
    CUDA_MEMCPY2D dd = {.srcMemoryType = CU_MEMORYTYPE_UNIFIED, .srcDevice = d,
                        .srcPitch = PITCH, .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = e,
                        .dstPitch = ROW, .WidthInBytes = ROW, .Height = 4};
    CHECK(cuMemcpy2DAsync_v2(&dd, s));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpy2DAsync_v2_ptsz(&dd, NULL));
    CHECK(cuCtxSynchronize());

    /* 3D copies: 2 slices of 4 rows, from slice 1 of 5-row slices 256 bytes a row to packed rows. */
    CUDA_MEMCPY3D c3 = {.srcMemoryType = CU_MEMORYTYPE_DEVICE, .srcDevice = d, .srcZ = 1,
                        .srcPitch = PITCH, .srcHeight = 5, .dstMemoryType = CU_MEMORYTYPE_DEVICE,
                        .dstDevice = e, .dstPitch = ROW, .dstHeight = 4, .WidthInBytes = ROW,
                        .Height = 4, .Depth = 2};
    CHECK(cuMemcpy3D_v2(&c3));
    CHECK(cuMemcpy3D_v2_ptds(&c3));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpy3DAsync_v2(&c3, s));
    CHECK(cuCtxSynchronize());
    CHECK(cuMemcpy3DAsync_v2_ptsz(&c3, NULL));
    CHECK(cuCtxSynchronize());
    /* A copy from an array (recorded with the array side 0), then one from the array
     * destroyed, which the driver refuses. */
    CUarray arr;
    CUDA_ARRAY_DESCRIPTOR ad = {.Width = 64, .Height = 4, .Format = CU_AD_FORMAT_UNSIGNED_INT8,
                                .NumChannels = 1};
    CHECK(cuArrayCreate_v2(&arr, &ad));
    CUDA_MEMCPY2D from_array = {.srcMemoryType = CU_MEMORYTYPE_ARRAY, .srcArray = arr,
                                .dstMemoryType = CU_MEMORYTYPE_DEVICE, .dstDevice = e,
                                .dstPitch = ROW, .WidthInBytes = ROW, .Height = 4};
    put_result("copy_from_array", cuMemcpy2D_v2(&from_array));
    CHECK(cuArrayDestroy(arr));
    put_result("copy_from_destroyed_array", cuMemcpy2D_v2(&from_array));

    /* A graph: fill_u32(e, 9, N) and a host function, captured on `cap`, launched on s and on
     * the per-thread stream: the kernel and the host function run at each launch. */
    CUgraph g;
    CUgraphExec exec;
    unsigned nine = 9;
    void *gparams[] = {&e, &nine, &n};
    CHECK(cuStreamBeginCapture_v2(cap, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuLaunchKernel(fill, N / 128, 1, 1, 128, 1, 1, 0, cap, gparams, NULL));
    CHECK(cuLaunchHostFunc(cap, bump, &host_calls));
    CHECK(cuStreamEndCapture(cap, &g));
    put_u64("captured_host_calls", (unsigned long long)host_calls);
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    put_ptr("exec", (uintptr_t)exec);
    CHECK(cuMemsetD32_v2(e, 0, N));
    /* The memset is queued on the legacy stream, which the non-blocking s does not follow:
     * the graph's kernel fills e too, so it must wait. */
    CHECK(cuCtxSynchronize());
    CHECK(cuGraphLaunch(exec, s));
    CHECK(cuStreamSynchronize(s));
    CHECK(cuMemcpyDtoH_v2(host, e, sizeof host));
    put_u64("graph_value", host[N - 1]);
    CHECK(cuGraphLaunch_ptsz(exec, NULL));
    CHECK(cuCtxSynchronize());
    put_u64("graph_host_calls", (unsigned long long)host_calls);
    CHECK(cuGraphExecDestroy(exec));
    CHECK(cuGraphDestroy(g));
    put_result("launch_destroyed", cuGraphLaunch(exec, s));

    CHECK(cuMemFree_v2(d));
    CHECK(cuMemFree_v2(e));
    CHECK(cuStreamDestroy_v2(s));
    CHECK(cuStreamDestroy_v2(cap));
    CHECK(cuModuleUnload(mod));
    return 0;
}
