/* sim_runtime_ext.h: the body of sim_runtime_ext_shared.c and sim_runtime_ext_static.c: the
 * runtime's per-thread stream variants, arrays, mipmapped arrays, 3D pitched memory, host
 * registration, stream capture and graphs, against the shared and the static simulated
 * runtime. Prints "key value" lines; never stops early, so that with an older driver every
 * line is still printed. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sim_util.h"

#define GRAPH_LO 0x5a0000000000ull
#define GRAPH_HI 0x5b0000000000ull

static unsigned char host_in[1 << 16], host_out[1 << 16];
static unsigned char registered[1 << 16] __attribute__((aligned(4096)));

static size_t free_now(void) {
    size_t free = 0, total = 0;
    cudaMemGetInfo(&free, &total);
    return free;
}

static void put(const char *key, cudaError_t e) { printf("%s %d\n", key, (int)e); }

static int in_graph_range(const void *p) {
    return (uintptr_t)p >= GRAPH_LO && (uintptr_t)p < GRAPH_HI;
}

static void per_thread_stream(size_t start) {
    void *p = NULL, *q = NULL;
    put("ptsz_malloc_async", cudaMallocAsync_ptsz(&p, 4096, 0));
    printf("ptsz_used %zu\n", start - free_now());
    put("ptsz_free_async", cudaFreeAsync_ptsz(p, 0));
    put("ptsz_sync", cudaStreamSynchronize(cudaStreamPerThread));
    printf("ptsz_released %d\n", free_now() == start);
    cudaMemPool_t pool = NULL;
    cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    cudaMemPoolCreate(&pool, &props);
    put("ptsz_malloc_from_pool", cudaMallocFromPoolAsync_ptsz(&q, 8192, pool, 0));
    printf("ptsz_pool_used %zu\n", start - free_now());
    put("ptsz_free_pool", cudaFreeAsync_ptsz(q, 0));
    put("ptsz_pool_destroy", cudaMemPoolDestroy(pool));
    cudaStream_t s = NULL;
    cudaStreamCreate(&s);
    put("ptsz_malloc_on_stream", cudaMallocAsync_ptsz(&p, 4096, s));
    put("ptsz_free_on_stream", cudaFreeAsync_ptsz(p, s));
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    put("ptsz_null_out", cudaMallocAsync_ptsz(NULL, 4096, 0));
    printf("ptsz_all_freed %d\n", free_now() == start);
}

static void arrays(size_t start) {
    struct cudaChannelFormatDesc float4 = {32, 32, 32, 32, cudaChannelFormatKindFloat};
    struct cudaChannelFormatDesc uchar1 = {8, 0, 0, 0, cudaChannelFormatKindUnsigned};
    cudaArray_t a = NULL, a3 = NULL, bad = NULL;
    put("malloc_array", cudaMallocArray(&a, &float4, 64, 32, cudaArrayDefault));
    printf("malloc_array_used %zu\n", start - free_now());
    put("free_array", cudaFreeArray(a));
    put("free_array_again", cudaFreeArray(a));
    put("free_array_null", cudaFreeArray(NULL));
    struct cudaChannelFormatDesc gap = {32, 0, 32, 0, cudaChannelFormatKindFloat};
    struct cudaChannelFormatDesc odd = {24, 0, 0, 0, cudaChannelFormatKindUnsigned};
    struct cudaChannelFormatDesc three = {8, 8, 8, 0, cudaChannelFormatKindSigned};
    struct cudaChannelFormatDesc mixed = {16, 32, 0, 0, cudaChannelFormatKindSigned};
    struct cudaChannelFormatDesc byte_float = {8, 0, 0, 0, cudaChannelFormatKindFloat};
    struct cudaChannelFormatDesc none = {32, 0, 0, 0, cudaChannelFormatKindNone};
    put("array_gap", cudaMallocArray(&bad, &gap, 16, 16, 0));
    put("array_odd_bits", cudaMallocArray(&bad, &odd, 16, 16, 0));
    put("array_three_channels", cudaMallocArray(&bad, &three, 16, 16, 0));
    put("array_mixed_sizes", cudaMallocArray(&bad, &mixed, 16, 16, 0));
    put("array_byte_float", cudaMallocArray(&bad, &byte_float, 16, 16, 0));
    put("array_kind_none", cudaMallocArray(&bad, &none, 16, 16, 0));
    put("array_null_desc", cudaMallocArray(&bad, NULL, 16, 16, 0));
    put("array_layered_flag", cudaMallocArray(&bad, &uchar1, 16, 16, cudaArrayLayered));
    put("array_zero_width", cudaMallocArray(&bad, &uchar1, 0, 16, 0));
    printf("bad_arrays_took_nothing %d\n", free_now() == start);

    struct cudaExtent e3 = {64, 64, 4};
    put("malloc_3d_array", cudaMalloc3DArray(&a3, &uchar1, e3, 0));
    printf("malloc_3d_array_used %zu\n", start - free_now());
    put("free_3d_array", cudaFreeArray(a3));
    struct cudaExtent layers = {16, 16, 3};
    put("malloc_3d_layered", cudaMalloc3DArray(&a3, &float4, layers, cudaArrayLayered));
    printf("malloc_3d_layered_used %zu\n", start - free_now());
    put("free_3d_layered", cudaFreeArray(a3));

    cudaMipmappedArray_t m = NULL;
    struct cudaExtent e2 = {64, 32, 0};
    put("malloc_mipmapped", cudaMallocMipmappedArray(&m, &float4, e2, 4, 0));
    printf("malloc_mipmapped_used %zu\n", start - free_now());
    put("free_mipmapped", cudaFreeMipmappedArray(m));
    put("free_mipmapped_again", cudaFreeMipmappedArray(m));
    put("free_mipmapped_null", cudaFreeMipmappedArray(NULL));
    /* No level is clamped to one, as the driver documents. */
    put("mipmapped_zero_levels", cudaMallocMipmappedArray(&m, &float4, e2, 0, 0));
    printf("mipmapped_zero_levels_used %zu\n", start - free_now());
    put("free_mipmapped_zero_levels", cudaFreeMipmappedArray(m));
    put("mipmapped_bad_desc", cudaMallocMipmappedArray(&m, &three, e2, 2, 0));

    struct cudaPitchedPtr pp;
    memset(&pp, 0, sizeof pp);
    struct cudaExtent bytes = {100, 10, 3};
    put("malloc_3d", cudaMalloc3D(&pp, bytes));
    printf("malloc_3d_pitch %zu %zu %zu\n", pp.pitch, pp.xsize, pp.ysize);
    printf("malloc_3d_used %zu\n", start - free_now());
    for (size_t i = 0; i < 100; i++) host_in[i] = (unsigned char)(i * 7 + 3);
    /* The last row of the last slice: row (depth - 1) * height + height - 1. */
    char *last_row = (char *)pp.ptr + (2 * 10 + 9) * pp.pitch;
    cudaError_t up = cudaMemcpy(last_row, host_in, 100, cudaMemcpyHostToDevice);
    cudaError_t down = cudaMemcpy(host_out, last_row, 100, cudaMemcpyDeviceToHost);
    printf("malloc_3d_roundtrip %d %d %d\n", (int)up, (int)down, !memcmp(host_in, host_out, 100));
    put("free_3d", cudaFree(pp.ptr));
    put("malloc_3d_null", cudaMalloc3D(NULL, bytes));
    printf("arrays_all_freed %d\n", free_now() == start);
}

static void host_registration(void) {
    put("host_register", cudaHostRegister(registered, sizeof registered, cudaHostRegisterDefault));
    put("host_register_again", cudaHostRegister(registered, sizeof registered, 0));
    void *d = NULL;
    cudaMalloc(&d, sizeof registered);
    memset(registered, 0x5a, sizeof registered);
    cudaError_t up = cudaMemcpy(d, registered, sizeof registered, cudaMemcpyHostToDevice);
    cudaError_t down = cudaMemcpy(host_out, d, sizeof registered, cudaMemcpyDeviceToHost);
    printf("host_register_roundtrip %d %d %d\n", (int)up, (int)down,
           !memcmp(host_out, registered, sizeof registered));
    cudaFree(d);
    put("host_unregister", cudaHostUnregister(registered));
    put("host_unregister_again", cudaHostUnregister(registered));
}

/* A captured cudaMallocAsync, copy and cudaFreeAsync; then a capture that leaves its
 * allocation live. */
static void captured_graphs(size_t start) {
    cudaStream_t s = NULL;
    cudaStreamCreate(&s);
    void *g = NULL;
    cudaGraph_t graph = NULL;
    put("capture_begin", cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    put("capture_malloc_async", cudaMallocAsync(&g, 1 << 16, s));
    printf("capture_address_in_graph_range %d\n", in_graph_range(g));
    for (size_t i = 0; i < sizeof host_in; i++) host_in[i] = (unsigned char)(i * 13 + 5);
    put("capture_copy", cudaMemcpyAsync(g, host_in, sizeof host_in, cudaMemcpyHostToDevice, s));
    put("capture_copy_back", cudaMemcpyAsync(host_out, g, sizeof host_out, cudaMemcpyDeviceToHost, s));
    put("capture_free_async", cudaFreeAsync(g, s));
    put("capture_end", cudaStreamEndCapture(s, &graph));
    printf("capture_took_nothing %d\n", free_now() == start);

    cudaGraphExec_t exec = NULL;
    put("instantiate", cudaGraphInstantiate(&exec, graph, 0));
    memset(host_out, 0, sizeof host_out);
    put("launch", cudaGraphLaunch(exec, s));
    printf("launch_roundtrip %d\n", !memcmp(host_in, host_out, sizeof host_in));
    printf("launch_freed %d\n", free_now() == start);
    put("exec_destroy", cudaGraphExecDestroy(exec));
    put("exec_destroy_again", cudaGraphExecDestroy(exec));
    put("instantiate_with_flags",
        cudaGraphInstantiateWithFlags(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch));
    memset(host_out, 0, sizeof host_out);
    put("launch_ptsz_null_stream", cudaGraphLaunch_ptsz(exec, 0));
    printf("launch_ptsz_roundtrip %d\n", !memcmp(host_in, host_out, sizeof host_in));
    put("launch_again", cudaGraphLaunch(exec, s));
    put("exec_destroy_flags", cudaGraphExecDestroy(exec));
    put("graph_destroy", cudaGraphDestroy(graph));

    /* An allocation the graph does not free: each launch leaves it live until freed. */
    cudaGraph_t keep = NULL;
    void *k = NULL;
    cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal);
    put("keep_malloc_async", cudaMallocAsync(&k, 1 << 20, s));
    put("keep_capture_end", cudaStreamEndCapture(s, &keep));
    cudaGraphExec_t kexec = NULL;
    put("keep_instantiate", cudaGraphInstantiateWithFlags(&kexec, keep, 0));
    put("keep_launch", cudaGraphLaunch(kexec, s));
    printf("keep_launch_used %zu\n", start - free_now());
    put("keep_launch_while_live", cudaGraphLaunch(kexec, s));
    put("keep_free", cudaFree(k));
    printf("keep_freed %d\n", free_now() == start);
    put("keep_launch_after_free", cudaGraphLaunch(kexec, s));
    put("keep_free_async_ptsz", cudaFreeAsync_ptsz(k, 0));
    printf("keep_freed_again %d\n", free_now() == start);
    cudaGraphExecDestroy(kexec);
    cudaGraphDestroy(keep);
    put("capture_null_stream", cudaStreamBeginCapture(NULL, cudaStreamCaptureModeGlobal));
    cudaStreamDestroy(s);
}

/* A graph built with cudaGraphAddMemAllocNode, cudaGraphAddNode, cudaGraphAddNode_v2 and
 * cudaGraphAddMemFreeNode, instantiated with parameters. */
static void built_graphs(size_t start) {
    cudaGraph_t g = NULL;
    cudaGraph_t flagged = NULL;
    put("graph_create", cudaGraphCreate(&g, 0));
    put("graph_create_flags", cudaGraphCreate(&flagged, 1));

    cudaMemAllocNodeParams ap;
    memset(&ap, 0, sizeof ap);
    ap.poolProps = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
    ap.bytesize = 1 << 16;
    cudaGraphNode_t n1 = NULL, n2 = NULL, n3 = NULL, n4 = NULL;
    put("add_mem_alloc_node", cudaGraphAddMemAllocNode(&n1, g, NULL, 0, &ap));
    printf("alloc_node_address_in_graph_range %d\n", in_graph_range((void *)(uintptr_t)ap.dptr));

    cudaGraphNodeParams np;
    memset(&np, 0, sizeof np);
    np.type = cudaGraphNodeTypeMemAlloc;
    np.alloc.poolProps = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
    np.alloc.bytesize = 1 << 17;
    put("add_node_alloc", cudaGraphAddNode(&n2, g, &n1, 1, &np));
    printf("add_node_address_in_graph_range %d\n", in_graph_range((void *)(uintptr_t)np.alloc.dptr));

    cudaGraphNodeParams fp;
    memset(&fp, 0, sizeof fp);
    fp.type = cudaGraphNodeTypeMemFree;
    fp.free.dptr = ap.dptr;
    cudaGraphEdgeData edge;
    memset(&edge, 0, sizeof edge);
    put("add_node_v2_free", cudaGraphAddNode_v2(&n3, g, &n2, &edge, 1, &fp));
    put("add_mem_free_node", cudaGraphAddMemFreeNode(&n4, g, &n3, 1, (void *)(uintptr_t)np.alloc.dptr));
    put("add_mem_free_node_twice", cudaGraphAddMemFreeNode(&n4, g, &n3, 1, (void *)(uintptr_t)ap.dptr));
    cudaGraphNodeParams bad = np;
    bad.reserved2 = 1;
    put("add_node_reserved", cudaGraphAddNode(&n4, g, NULL, 0, &bad));

    cudaGraphExec_t exec = NULL;
    cudaGraphInstantiateParams ip;
    memset(&ip, 0, sizeof ip);
    ip.result_out = (cudaGraphInstantiateResult)7;
    put("instantiate_with_params", cudaGraphInstantiateWithParams(&exec, g, &ip));
    printf("instantiate_with_params_result %d\n", (int)ip.result_out);
    cudaStream_t s = NULL;
    cudaStreamCreate(&s);
    put("built_launch", cudaGraphLaunch(exec, s));
    printf("built_launch_freed %d\n", free_now() == start);
    put("built_exec_destroy", cudaGraphExecDestroy(exec));
    memset(&ip, 0, sizeof ip);
    ip.flags = cudaGraphInstantiateFlagUpload;
    ip.uploadStream = 0;
    put("instantiate_with_params_ptsz", cudaGraphInstantiateWithParams_ptsz(&exec, g, &ip));
    put("built_launch_ptsz", cudaGraphLaunch_ptsz(exec, 0));
    printf("built_launch_ptsz_freed %d\n", free_now() == start);
    put("built_exec_destroy_ptsz", cudaGraphExecDestroy(exec));
    put("built_graph_destroy", cudaGraphDestroy(g));

    /* One allocation node made with cudaGraphAddNode_v2 and never freed by the graph. */
    cudaGraph_t h = NULL;
    cudaGraphCreate(&h, 0);
    cudaGraphNodeParams lp;
    memset(&lp, 0, sizeof lp);
    lp.type = cudaGraphNodeTypeMemAlloc;
    lp.alloc.poolProps = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
    lp.alloc.bytesize = 1 << 18;
    put("add_node_v2_alloc", cudaGraphAddNode_v2(&n1, h, NULL, NULL, 0, &lp));
    put("live_instantiate", cudaGraphInstantiate(&exec, h, 0));
    put("live_launch", cudaGraphLaunch(exec, s));
    printf("live_launch_used %zu\n", start - free_now());
    put("live_free_async_ptsz", cudaFreeAsync_ptsz((void *)(uintptr_t)lp.alloc.dptr, 0));
    printf("live_freed %d\n", free_now() == start);
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(h);
    cudaStreamDestroy(s);
}

int main(void) {
    int count = 0;
    put("device_count", cudaGetDeviceCount(&count));
    size_t start = free_now();
    per_thread_stream(start);
    arrays(start);
    host_registration();
    captured_graphs(start);
    built_graphs(start);
    printf("all_freed %d\n", free_now() == start);
    cudaGetLastError();
    put("last_error_after_reset", cudaGetLastError());
    return 0;
}
