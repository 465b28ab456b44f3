// link: driver
// Streams and events: creation flags and priorities, the three special streams, callbacks
// (which may call the driver), event timing, and destroyed handles; capture info; captures
// that other streams join through events; events over a whole context; external event nodes; graphs' user objects; stream
// memory operations; event nodes built by hand and executable graphs changed after
// instantiation.
#include <stddef.h>

#include "sim_util.h"

static int callback_calls;
static CUresult callback_inner;

static void callback(CUstream s, CUresult status, void *data) {
    (void)s, (void)status;
    CUcontext c;
    callback_inner = cuCtxGetCurrent(&c); /* the driver must not be locked here */
    callback_calls += *(int *)data;
}

static int streams(int argc, char **argv) {
    (void)argc, (void)argv;
    CUcontext ctx = setup();
    CUstream s, p;
    unsigned int flags = 99;
    int prio = 99, least = 99, greatest = 99;
    CUcontext owner = NULL;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamGetFlags(s, &flags));
    put_u64("flags", flags);
    CHECK(cuCtxGetStreamPriorityRange(&least, &greatest));
    printf("priority_range %d %d\n", least, greatest);
    CHECK(cuStreamCreateWithPriority(&p, 0, -100));
    CHECK(cuStreamGetPriority_ptsz(p, &prio));
    printf("clamped_priority %d\n", prio);
    CHECK(cuStreamGetCtx(s, &owner));
    printf("stream_ctx %d\n", owner == ctx);
    CUgreenCtx green = (CUgreenCtx)1;
    CHECK(cuStreamGetCtx_v2(CU_STREAM_PER_THREAD, &owner, &green));
    printf("special_stream_ctx %d %d\n", owner == ctx, green == NULL);
    put_result("query", cuStreamQuery(s));
    put_result("sync_null", cuStreamSynchronize(NULL));
    put_result("sync_legacy", cuStreamSynchronize(CU_STREAM_LEGACY));
    put_result("sync_per_thread", cuStreamSynchronize_ptsz(CU_STREAM_PER_THREAD));
    put_result("bad_flags", cuStreamCreate(&p, 0x10));
    int one = 1;
    put_result("callback", cuStreamAddCallback(s, callback, &one, 0));
    put_result("callback_ptsz", cuStreamAddCallback_ptsz(NULL, callback, &one, 0));
    printf("callback_calls %d inner %d\n", callback_calls, (int)callback_inner);
    CHECK(cuStreamDestroy_v2(s));
    put_result("sync_destroyed", cuStreamSynchronize(s));
    put_result("destroy_destroyed", cuStreamDestroy_v2(s));
    put_result("memset_on_destroyed", cuMemsetD8Async(0, 0, 0, s));
    put_result("sync_bogus", cuStreamSynchronize((CUstream)(uintptr_t)0xdeadbeef));
    return 0;
}

static int events(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUevent a, b, untimed;
    CUstream s;
    float ms = -1;
    CHECK(cuStreamCreate(&s, 0));
    CHECK(cuEventCreate(&a, CU_EVENT_DEFAULT));
    CHECK(cuEventCreate(&b, CU_EVENT_BLOCKING_SYNC));
    CHECK(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
    put_result("query_unrecorded", cuEventQuery(a));
    put_result("elapsed_unrecorded", cuEventElapsedTime(&ms, a, b));
    CHECK(cuEventRecord(a, s));
    CHECK(cuEventRecord_ptsz(b, CU_STREAM_PER_THREAD));
    CHECK(cuEventRecordWithFlags(untimed, NULL, CU_EVENT_RECORD_DEFAULT));
    put_result("wait", cuStreamWaitEvent(s, b, 0));
    put_result("wait_ptsz", cuStreamWaitEvent_ptsz(NULL, a, 0));
    put_result("query", cuEventQuery(b));
    put_result("synchronize", cuEventSynchronize(b));
    put_result("elapsed", cuEventElapsedTime(&ms, a, b));
    printf("elapsed_non_negative %d\n", ms >= 0.0f);
    put_result("elapsed_v2", cuEventElapsedTime_v2(&ms, a, b));
    put_result("elapsed_untimed", cuEventElapsedTime(&ms, a, untimed));
    put_result("interprocess_needs_disable_timing", cuEventCreate(&a, CU_EVENT_INTERPROCESS));
    CHECK(cuEventDestroy_v2(b));
    put_result("record_destroyed", cuEventRecord(b, s));
    put_result("wait_destroyed", cuStreamWaitEvent(s, b, 0));
    put_result("destroy_destroyed", cuEventDestroy_v2(b));
    return 0;
}

/* Events over a whole context (cuCtxRecordEvent, cuCtxWaitEvent): the event must be the
 * context's to record, may be another's to wait for, and neither works while a stream of the
 * context captures (the capture is invalidated) nor, for the wait, on an event of a capture. */
static int ctx_events(int argc, char **argv) {
    (void)argc, (void)argv;
    CUcontext ctx = setup();
    CUevent a, b, other;
    CUstream s;
    float ms = -1;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&a, CU_EVENT_DEFAULT));
    CHECK(cuEventCreate(&b, CU_EVENT_DEFAULT));
    put_result("record", cuCtxRecordEvent(ctx, a));
    put_result("record_current", cuCtxRecordEvent(NULL, b));
    put_result("elapsed", cuEventElapsedTime(&ms, a, b));
    put_result("wait", cuCtxWaitEvent(ctx, a));
    CUcontext second;
    CHECK(cuCtxCreate_v2(&second, 0, 0));
    CHECK(cuEventCreate(&other, CU_EVENT_DEFAULT));
    CHECK(cuCtxSetCurrent(ctx));
    put_result("record_foreign_event", cuCtxRecordEvent(ctx, other));
    put_result("wait_foreign_event", cuCtxWaitEvent(ctx, other));
    CUgraph g;
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    put_result("record_capturing", cuCtxRecordEvent(ctx, a));
    put_result("end_after_record", cuStreamEndCapture(s, &g));
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK(cuEventRecord(b, s));
    put_result("wait_capture_event", cuCtxWaitEvent(second, b));
    put_result("end_after_wait", cuStreamEndCapture(s, &g));
    CHECK(cuEventDestroy_v2(other));
    CHECK(cuCtxDestroy_v2(second));
    put_result("record_destroyed_ctx", cuCtxRecordEvent(second, a));
    CHECK(cuEventDestroy_v2(a));
    put_result("wait_destroyed_event", cuCtxWaitEvent(ctx, a));
    CHECK(cuEventDestroy_v2(b));
    CHECK(cuStreamDestroy_v2(s));
    return 0;
}

/* cuStreamGetCaptureInfo in its three ABIs: a capture's id, graph and current dependencies. */
static int capture_info(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUstreamCaptureStatus status = 99;
    cuuint64_t id = 99, first;
    CUgraph g = (CUgraph)1, ended;
    const CUgraphNode *deps = (const CUgraphNode *)1;
    const CUgraphEdgeData *edges = (const CUgraphEdgeData *)1;
    size_t n = 99;
    CHECK(cuStreamGetCaptureInfo_v3(s, &status, &id, &g, &deps, &edges, &n));
    printf("idle %d %llu %d %d %d %zu\n", (int)status, (unsigned long long)id, g == NULL,
           deps == NULL, edges == NULL, n);
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK(cuStreamGetCaptureInfo_v3(s, &status, &first, &g, &deps, &edges, &n));
    printf("begun %d %d %d %zu\n", (int)status, first != 0, g != NULL, n);
    CUdeviceptr p;
    CHECK(cuMemAllocAsync(&p, 4096, s));
    CHECK(cuStreamGetCaptureInfo_v2(s, &status, &id, &g, &deps, &n));
    CUgraphNodeType type = 99;
    CHECK(cuGraphNodeGetType(deps[0], &type));
    printf("after_alloc %d %d %zu %d\n", (int)status, id == first, n, (int)type);
    CHECK(cuStreamGetCaptureInfo_v3_ptsz(s, &status, &id, &g, &deps, &edges, &n));
    printf("edge_data %d %d %d\n", edges != NULL, edges[0].type, edges[0].to_port);
    put_result("edges_without_deps", cuStreamGetCaptureInfo_v3(s, &status, &id, &g, NULL, &edges, &n));
    put_result("no_status", cuStreamGetCaptureInfo(s, NULL, &id));
    CHECK(cuStreamEndCapture(s, &ended));
    printf("same_graph %d\n", ended == g);
    CHECK(cuStreamGetCaptureInfo_ptsz(s, &status, &id));
    printf("ended %d\n", (int)status);
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK(cuStreamGetCaptureInfo(s, &status, &id));
    printf("second_id_differs %d\n", id != first);
    CHECK(cuStreamEndCapture(s, &ended));
    CHECK(cuStreamGetCaptureInfo_v2(CU_STREAM_LEGACY, &status, &id, &g, &deps, &n));
    printf("legacy %d %zu\n", (int)status, n);
    put_result("bogus", cuStreamGetCaptureInfo((CUstream)(uintptr_t)0xdeadbeef, &status, &id));
    return 0;
}

/* Fork and join: a second stream joins a capture by waiting for an event recorded in it, adds
   its own work to the capture's graph, and leaves the capture when it ends. */
static int capture_join(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUstream origin, side, other, elsewhere;
    CUevent fork, join, plain;
    CHECK(cuStreamCreate(&origin, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&side, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&other, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&elsewhere, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&fork, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&join, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&plain, CU_EVENT_DISABLE_TIMING));
    CUdeviceptr d;
    CHECK(cuMemAlloc_v2(&d, 4096));
    CHECK(cuMemsetD32_v2(d, 1, 1024));
    CHECK(cuEventRecord(plain, origin));

    CHECK(cuStreamBeginCapture_v2(origin, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuEventRecord(fork, origin));
    /* An event recorded before the capture began is an ordinary one: no join. */
    CHECK(cuStreamWaitEvent(other, plain, 0));
    CUstreamCaptureStatus status = 99;
    CHECK(cuStreamIsCapturing(other, &status));
    printf("plain_wait_joins %d\n", (int)status);
    CHECK(cuStreamWaitEvent(side, fork, 0));
    cuuint64_t origin_id, side_id;
    CHECK(cuStreamGetCaptureInfo(origin, &status, &origin_id));
    CHECK(cuStreamGetCaptureInfo(side, &status, &side_id));
    printf("joined %d %d\n", (int)status, side_id == origin_id);
    /* The side stream's work goes into the graph, not run now. */
    CHECK(cuMemsetD32Async(d, 7, 1024, side));
    CUdeviceptr scratch;
    CHECK(cuMemAllocAsync(&scratch, 4096, side));
    CHECK(cuMemFreeAsync(scratch, side));
    unsigned int first = 0;
    CHECK(cuMemcpyDtoH_v2(&first, d, sizeof first));
    printf("side_work_deferred %u\n", first);
    CHECK(cuEventRecord(join, side));
    CHECK(cuStreamWaitEvent(origin, join, 0));
    put_result("wait_from_legacy", cuStreamWaitEvent(NULL, fork, 0));
    CHECK(cuStreamBeginCapture_v2(elsewhere, CU_STREAM_CAPTURE_MODE_RELAXED));
    put_result("wait_from_another_capture", cuStreamWaitEvent(elsewhere, fork, 0));
    CUgraph other_graph;
    CHECK(cuStreamEndCapture(elsewhere, &other_graph));
    CUgraph g;
    put_result("end_on_joined", cuStreamEndCapture(side, &g));
    CHECK(cuStreamEndCapture(origin, &g));
    CHECK(cuStreamIsCapturing(side, &status));
    printf("side_after_end %d\n", (int)status);
    size_t nodes = 0;
    CHECK(cuGraphGetNodes(g, NULL, &nodes));
    printf("graph_nodes %zu\n", nodes);
    /* After the end the capture's events join nothing. */
    CHECK(cuStreamWaitEvent(other, fork, 0));
    CHECK(cuStreamIsCapturing(other, &status));
    printf("stale_event_joins %d\n", (int)status);
    CUgraphExec exec;
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    CHECK(cuGraphLaunch(exec, origin));
    CHECK(cuStreamSynchronize(origin));
    CHECK(cuMemcpyDtoH_v2(&first, d, sizeof first));
    printf("after_launch %u\n", first);

    /* A sync on a joined stream invalidates the whole capture. */
    CHECK(cuStreamBeginCapture_v2(origin, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuEventRecord(fork, origin));
    CHECK(cuStreamWaitEvent(side, fork, 0));
    put_result("sync_joined", cuStreamSynchronize(side));
    put_result("end_invalidated", cuStreamEndCapture(origin, &g));
    CHECK(cuStreamIsCapturing(side, &status));
    printf("side_after_invalidated_end %d\n", (int)status);
    CHECK(cuGraphExecDestroy(exec));
    CHECK(cuMemFree_v2(d));
    return 0;
}

/* A capture into a graph the program made, after one of its nodes. */
static int capture_to_graph(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CHECK(cuMemAlloc_v2(&d, 4096));
    CHECK(cuMemsetD32_v2(d, 1, 1024));
    CUgraph g, other, ended;
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphCreate(&other, 0));
    CUDA_MEM_ALLOC_NODE_PARAMS params;
    memset(&params, 0, sizeof params);
    params.poolProps = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
    params.bytesize = 4096;
    CUgraphNode first, foreign;
    CHECK(cuGraphAddMemAllocNode(&first, g, NULL, 0, &params));
    CHECK(cuGraphAddMemAllocNode(&foreign, other, NULL, 0, &params));
    put_result("foreign_dependency",
               cuStreamBeginCaptureToGraph(s, g, &foreign, NULL, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CUgraphEdgeData edge;
    memset(&edge, 0, sizeof edge);
    edge.type = 1;
    put_result("edge_data", cuStreamBeginCaptureToGraph(s, g, &first, &edge, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    edge.type = 0;
    CHECK(cuStreamBeginCaptureToGraph(s, g, &first, &edge, 1, CU_STREAM_CAPTURE_MODE_GLOBAL));
    put_result("begin_again", cuStreamBeginCaptureToGraph(s, g, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuMemsetD32Async(d, 7, 1024, s));
    unsigned int v = 0;
    CHECK(cuMemcpyDtoH_v2(&v, d, sizeof v));
    printf("deferred %u\n", v);
    CHECK(cuStreamEndCapture(s, &ended));
    size_t n = 0;
    CHECK(cuGraphGetNodes(g, NULL, &n));
    printf("same_graph %d %zu\n", ended == g, n);
    /* An invalidated capture into the program's graph leaves the graph to the program. */
    CHECK(cuStreamBeginCaptureToGraph_ptsz(s, other, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_RELAXED));
    put_result("sync_in_capture", cuStreamSynchronize(s));
    put_result("end_invalidated", cuStreamEndCapture(s, &ended));
    n = 0;
    put_result("graph_kept", cuGraphGetNodes(other, NULL, &n));
    put_result("legacy", cuStreamBeginCaptureToGraph(NULL, g, NULL, NULL, 0, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuGraphDestroy(g));
    CHECK(cuGraphDestroy(other));
    CHECK(cuMemFree_v2(d));
    return 0;
}

/* External event nodes: a record or wait with the external flag in a capture adds an event
 * node to the graph (invalid outside a capture), and each launch records the event. */
static int capture_external(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUstream s, s2;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING));
    CUevent start, ext, other;
    CHECK(cuEventCreate(&start, CU_EVENT_DEFAULT));
    CHECK(cuEventCreate(&ext, CU_EVENT_DEFAULT));
    CHECK(cuEventCreate(&other, CU_EVENT_DEFAULT));
    put_result("record_outside", cuEventRecordWithFlags(ext, s, CU_EVENT_RECORD_EXTERNAL));
    put_result("wait_outside", cuStreamWaitEvent(s, other, CU_EVENT_WAIT_EXTERNAL));
    put_result("wait_bad_flags", cuStreamWaitEvent(s, other, 2));
    CHECK(cuEventRecord(start, s));
    CHECK(cuEventRecord(other, s));
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuStreamWaitEvent(s, other, CU_EVENT_WAIT_EXTERNAL));
    CHECK(cuEventRecordWithFlags(ext, s, CU_EVENT_RECORD_EXTERNAL));
    CUgraph g;
    CHECK(cuStreamEndCapture(s, &g));
    CUgraphNode nodes[4];
    size_t n = 4;
    CHECK(cuGraphGetNodes(g, nodes, &n));
    CUgraphNodeType types[2] = {0, 0};
    for (size_t i = 0; i < n && i < 2; i++) CHECK(cuGraphNodeGetType(nodes[i], &types[i]));
    printf("nodes %zu %d %d\n", n, (int)types[0], (int)types[1]);
    float ms;
    put_result("before_launch", cuEventElapsedTime(&ms, start, ext));
    CUgraphExec x;
    CHECK(cuGraphInstantiateWithFlags(&x, g, 0));
    CHECK(cuGraphLaunch(x, s));
    put_result("after_launch", cuEventElapsedTime(&ms, start, ext));
    /* Not a capture's event: a wait for it joins no capture. */
    CHECK(cuStreamWaitEvent(s2, ext, 0));
    CUstreamCaptureStatus status;
    CHECK(cuStreamIsCapturing(s2, &status));
    printf("joined %d\n", (int)status);
    CHECK(cuGraphExecDestroy(x));
    CHECK(cuGraphDestroy(g));
    CHECK(cuEventDestroy_v2(start));
    CHECK(cuEventDestroy_v2(ext));
    CHECK(cuEventDestroy_v2(other));
    CHECK(cuStreamDestroy_v2(s));
    CHECK(cuStreamDestroy_v2(s2));
    return 0;
}

/* Stream memory operations: writes store their values, waits and batches are validated, and
 * the per-thread and first-ABI variants act alike. */
static int memops(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr d;
    CHECK(cuMemAlloc_v2(&d, 64));
    CHECK(cuMemsetD32_v2(d, 0, 16));
    CHECK(cuStreamWriteValue32_v2(s, d, 7, CU_STREAM_WRITE_VALUE_DEFAULT));
    CHECK(cuStreamWriteValue64_v2_ptsz(NULL, d + 8, 0x1122334455667788ull, 0));
    CHECK(cuStreamWriteValue32(s, d + 16, 9, CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER));
    CHECK(cuStreamWriteValue64_ptsz(s, d + 24, 5, 0));
    uint32_t w[8];
    CHECK(cuMemcpyDtoH_v2(w, d, sizeof w));
    printf("written %u %08x%08x %u %u\n", w[0], w[3], w[2], w[4], w[6]);
    CHECK(cuStreamWaitValue32_v2(s, d, 7, CU_STREAM_WAIT_VALUE_EQ | CU_STREAM_WAIT_VALUE_FLUSH));
    /* Not met: taken as met, for an idle device never sees a later write. */
    put_result("unmet_wait", cuStreamWaitValue64_v2(s, d + 8, ~0ull, CU_STREAM_WAIT_VALUE_EQ));
    put_result("bad_condition", cuStreamWaitValue32_v2(s, d, 1, 4));
    put_result("bad_write_flags", cuStreamWriteValue32_v2(s, d, 1, 2));
    put_result("misaligned", cuStreamWriteValue64_v2(s, d + 4, 1, 0));
    put_result("outside", cuStreamWriteValue32_v2(s, d + 64, 1, 0));
    put_result("null_address", cuStreamWaitValue32_v2(s, 0, 1, 0));
    /* Page-locked host memory is addressable too. */
    uint32_t *host;
    CHECK(cuMemAllocHost_v2((void **)&host, 8));
    host[0] = 0;
    CHECK(cuStreamWriteValue32_v2(s, (CUdeviceptr)(uintptr_t)host, 3, 0));
    printf("host_written %u\n", host[0]);
    CUstreamBatchMemOpParams ops[3];
    memset(ops, 0, sizeof ops);
    ops[0].writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
    ops[0].writeValue.address = d + 32;
    ops[0].writeValue.value = 11;
    ops[1].memoryBarrier.operation = CU_STREAM_MEM_OP_BARRIER;
    ops[2].waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
    ops[2].waitValue.address = d + 32;
    ops[2].waitValue.value = 11;
    CHECK(cuStreamBatchMemOp_v2(s, 3, ops, 0));
    /* The first ABI has no barrier; a bad operation anywhere refuses the whole batch. */
    ops[0].writeValue.value = 12;
    put_result("v1_barrier", cuStreamBatchMemOp(s, 3, ops, 0));
    put_result("count_zero", cuStreamBatchMemOp_v2_ptsz(s, 0, ops, 0));
    put_result("batch_flags", cuStreamBatchMemOp_ptsz(s, 1, ops, 1));
    CHECK(cuMemcpyDtoH_v2(w, d + 32, 4));
    printf("batch_written %u\n", w[0]);
    /* Captured: sim_semaphores.c. */
    CHECK(cuMemFreeHost(host));
    CHECK(cuMemFree_v2(d));
    CHECK(cuStreamDestroy_v2(s));
    return 0;
}

/* Whether event e has been recorded (since timing start was): cuEventElapsedTime fails with
 * CUDA_ERROR_INVALID_HANDLE for an event never recorded. */
static CUresult recorded(CUevent start, CUevent e) {
    float ms;
    return cuEventElapsedTime(&ms, start, e);
}

static CUevent timed_event(void) {
    CUevent e;
    CHECK(cuEventCreate(&e, CU_EVENT_DEFAULT));
    return e;
}

/* A graph of three nodes: memset d, record `rec`, wait for `wait` (each node after the last);
 * the record and wait nodes' handles in *r and *w. */
static CUgraph three_nodes(CUdeviceptr d, CUevent rec, CUevent wait, CUgraphNode *r,
                          CUgraphNode *w) {
    CUgraph g;
    CUgraphNode m;
    CHECK(cuGraphCreate(&g, 0));
    CUDA_MEMSET_NODE_PARAMS p = {.dst = d, .value = 7, .elementSize = 4, .width = 1024,
                                 .height = 1};
    CHECK(cuGraphAddMemsetNode(&m, g, NULL, 0, &p, NULL));
    CHECK(cuGraphAddEventRecordNode(r, g, &m, 1, rec));
    CHECK(cuGraphAddEventWaitNode(w, g, r, 1, wait));
    return g;
}

/* Event nodes built by hand and executable graphs changed after instantiation: the graph's
 * getters and setters, the executable graph's event setters, whole-graph updates (both ABIs)
 * and their refusals, child graph replacement, and the generic node structure. An event a
 * launch records is seen through cuEventElapsedTime from `start`. */
static int graph_events(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUevent start = timed_event(), a = timed_event(), b = timed_event(), c = timed_event();
    CUevent e = timed_event(), f = timed_event(), h = timed_event(), gone = timed_event();
    CHECK(cuEventDestroy_v2(gone));
    CHECK(cuEventRecord(start, s));
    CUdeviceptr d;
    CHECK(cuMemAlloc_v2(&d, 4096));
    CHECK(cuMemsetD32_v2(d, 0, 1024));

    /* Built by hand: a memset, a record of a after it, a wait for c after that. */
    CUgraphNode r, w, m, other_r, other_w, dummy;
    CUgraph g = three_nodes(d, a, c, &r, &w);
    CUgraph other = three_nodes(d, f, c, &other_r, &other_w);
    size_t n = 3;
    CUgraphNode nodes[3];
    CHECK(cuGraphGetNodes(g, nodes, &n));
    m = nodes[0];
    CUgraphNodeType types[3];
    for (int i = 0; i < 3; i++) CHECK(cuGraphNodeGetType(nodes[i], &types[i]));
    printf("types %zu %d %d %d\n", n, (int)types[0], (int)types[1], (int)types[2]);
    CUDA_MEMSET_NODE_PARAMS mp = {.dst = d, .value = 1, .elementSize = 3, .width = 4, .height = 1};
    put_result("memset_bad_element", cuGraphAddMemsetNode(&dummy, g, NULL, 0, &mp, NULL));
    mp.elementSize = 4, mp.height = 2, mp.pitch = 8;
    put_result("memset_pitch_too_small", cuGraphAddMemsetNode(&dummy, g, NULL, 0, &mp, NULL));
    put_result("record_no_graph", cuGraphAddEventRecordNode(&dummy, NULL, NULL, 0, a));
    put_result("record_destroyed_event", cuGraphAddEventRecordNode(&dummy, g, NULL, 0, gone));
    put_result("record_no_out", cuGraphAddEventRecordNode(NULL, g, NULL, 0, a));
    put_result("wait_foreign_dependency", cuGraphAddEventWaitNode(&dummy, g, &other_r, 1, a));
    put_result("wait_null_event", cuGraphAddEventWaitNode(&dummy, g, NULL, 0, NULL));

    /* Getters and setters in the graph; the wrong kind of node is refused. */
    CUevent got = NULL, got2 = NULL;
    CUresult rg = cuGraphEventRecordNodeGetEvent(r, &got);
    CUresult wg = cuGraphEventWaitNodeGetEvent(w, &got2);
    printf("get %d %d %d %d\n", (int)rg, got == a, (int)wg, got2 == c);
    put_result("record_get_on_wait", cuGraphEventRecordNodeGetEvent(w, &got));
    put_result("wait_get_on_record", cuGraphEventWaitNodeGetEvent(r, &got));
    put_result("record_set_on_memset", cuGraphEventRecordNodeSetEvent(m, b));
    put_result("wait_set_on_record", cuGraphEventWaitNodeSetEvent(r, b));
    put_result("record_set_destroyed_event", cuGraphEventRecordNodeSetEvent(r, gone));
    put_result("wait_set", cuGraphEventWaitNodeSetEvent(w, a));
    CHECK(cuGraphEventWaitNodeGetEvent(w, &got));
    printf("wait_set_got %d\n", got == a);

    /* Each launch records the record node's event. */
    CUgraphExec x;
    CHECK(cuGraphInstantiateWithFlags(&x, g, 0));
    printf("before_launch %d\n", (int)recorded(start, a));
    CHECK(cuGraphLaunch(x, s));
    unsigned int v = 0;
    CHECK(cuMemcpyDtoH_v2(&v, d, sizeof v));
    printf("launch %d %u\n", (int)recorded(start, a), v);
    /* A change in the graph leaves the executable graph as it was instantiated. */
    put_result("record_set", cuGraphEventRecordNodeSetEvent(r, b));
    CHECK(cuGraphEventRecordNodeGetEvent(r, &got));
    printf("record_set_got %d\n", got == b);
    CHECK(cuGraphLaunch(x, s));
    printf("graph_set_not_in_exec %d\n", (int)recorded(start, b));

    /* The executable graph's own event setters. */
    put_result("exec_record_set", cuGraphExecEventRecordNodeSetEvent(x, r, e));
    CHECK(cuGraphLaunch(x, s));
    printf("exec_record_set_launch %d\n", (int)recorded(start, e));
    put_result("exec_wait_set", cuGraphExecEventWaitNodeSetEvent(x, w, b));
    put_result("exec_record_set_on_wait", cuGraphExecEventRecordNodeSetEvent(x, w, e));
    put_result("exec_wait_set_on_record", cuGraphExecEventWaitNodeSetEvent(x, r, e));
    put_result("exec_record_set_on_memset", cuGraphExecEventRecordNodeSetEvent(x, m, e));
    put_result("exec_record_set_foreign_node", cuGraphExecEventRecordNodeSetEvent(x, other_r, e));
    put_result("exec_record_set_destroyed_event", cuGraphExecEventRecordNodeSetEvent(x, r, gone));
    put_result("exec_record_set_no_exec", cuGraphExecEventRecordNodeSetEvent(NULL, r, e));

    /* A whole-graph update from g (whose record node now records b). */
    CUgraphExecUpdateResultInfo info = {.result = 99, .errorNode = m, .errorFromNode = m};
    CUresult ur = cuGraphExecUpdate_v2(x, g, &info);
    printf("update %d %d %d %d\n", (int)ur, (int)info.result, info.errorNode == NULL,
           info.errorFromNode == NULL);
    CHECK(cuGraphLaunch(x, s));
    printf("update_launch %d\n", (int)recorded(start, b));
    /* From another graph of the same shape: its parameters, not its node handles. */
    ur = cuGraphExecUpdate_v2(x, other, &info);
    printf("update_other %d %d\n", (int)ur, (int)info.result);
    CHECK(cuGraphLaunch(x, s));
    printf("update_other_launch %d\n", (int)recorded(start, f));
    put_result("other_graph_node", cuGraphExecEventRecordNodeSetEvent(x, other_r, a));
    put_result("original_node", cuGraphExecEventRecordNodeSetEvent(x, r, a));

    /* Refused updates change nothing: the executable graph still records a, never h. */
    CUgraph fewer, swapped;
    CUgraphNode fm, fr, sm, sw, sr;
    CHECK(cuGraphCreate(&fewer, 0));
    CUDA_MEMSET_NODE_PARAMS p7 = {.dst = d, .value = 7, .elementSize = 4, .width = 1024,
                                  .height = 1};
    CHECK(cuGraphAddMemsetNode(&fm, fewer, NULL, 0, &p7, NULL));
    CHECK(cuGraphAddEventRecordNode(&fr, fewer, &fm, 1, h));
    CHECK(cuGraphCreate(&swapped, 0));
    CHECK(cuGraphAddMemsetNode(&sm, swapped, NULL, 0, &p7, NULL));
    CHECK(cuGraphAddEventWaitNode(&sw, swapped, &sm, 1, h));
    CHECK(cuGraphAddEventRecordNode(&sr, swapped, &sw, 1, h));
    ur = cuGraphExecUpdate_v2(x, fewer, &info);
    printf("update_topology %d %d %d\n", (int)ur, (int)info.result, info.errorNode == NULL);
    ur = cuGraphExecUpdate_v2(x, swapped, &info);
    printf("update_type %d %d %d\n", (int)ur, (int)info.result, info.errorNode == sw);
    CUgraphNode error_node = m;
    CUgraphExecUpdateResult result = 99;
    ur = cuGraphExecUpdate(x, swapped, &error_node, &result);
    printf("update_v1_type %d %d %d\n", (int)ur, (int)result, error_node == sw);
    CHECK(cuGraphLaunch(x, s));
    printf("refused_unchanged %d\n", (int)recorded(start, h));
    put_result("update_no_info", cuGraphExecUpdate_v2(x, g, NULL));
    put_result("update_v1_no_result", cuGraphExecUpdate(x, g, &error_node, NULL));
    put_result("update_no_exec", cuGraphExecUpdate_v2(NULL, g, &info));
    put_result("update_no_graph", cuGraphExecUpdate_v2(x, NULL, &info));
    ur = cuGraphExecUpdate(x, g, &error_node, &result);
    printf("update_v1 %d %d %d\n", (int)ur, (int)result, error_node == NULL);

    /* Memory nodes cannot change: an allocation elsewhere is refused. */
    CUDA_MEM_ALLOC_NODE_PARAMS ap;
    memset(&ap, 0, sizeof ap);
    ap.poolProps = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
    ap.bytesize = 4096;
    CUgraph mg, mg2;
    CUgraphNode an, an2;
    CUgraphExec mx;
    CHECK(cuGraphCreate(&mg, 0));
    CHECK(cuGraphAddMemAllocNode(&an, mg, NULL, 0, &ap));
    CHECK(cuGraphAddMemFreeNode(&dummy, mg, &an, 1, ap.dptr));
    CHECK(cuGraphCreate(&mg2, 0));
    CHECK(cuGraphAddMemAllocNode(&an2, mg2, NULL, 0, &ap));
    CHECK(cuGraphAddMemFreeNode(&dummy, mg2, &an2, 1, ap.dptr));
    CHECK(cuGraphInstantiateWithFlags(&mx, mg, 0));
    ur = cuGraphExecUpdate_v2(mx, mg2, &info);
    printf("update_memory %d %d %d\n", (int)ur, (int)info.result, info.errorNode == an2);
    ur = cuGraphExecUpdate_v2(mx, mg, &info);
    printf("update_memory_same %d %d\n", (int)ur, (int)info.result);
    put_result("memory_launch", cuGraphLaunch(mx, s));

    /* Child graphs: the nodes a child graph node brought are replaced as a whole. */
    CUevent k = timed_event(), l = timed_event();
    CUgraph child, child2, child_type, child_count, parent, inner;
    CUgraphNode cr, cr2, pm, pc, ir, found, other_child;
    CHECK(cuGraphCreate(&child, 0));
    CHECK(cuGraphAddEventRecordNode(&cr, child, NULL, 0, c));
    CHECK(cuGraphCreate(&child2, 0));
    CHECK(cuGraphAddEventRecordNode(&cr2, child2, NULL, 0, k));
    CHECK(cuGraphCreate(&child_type, 0));
    CHECK(cuGraphAddEventWaitNode(&dummy, child_type, NULL, 0, k));
    CHECK(cuGraphCreate(&child_count, 0));
    CHECK(cuGraphAddEventRecordNode(&dummy, child_count, NULL, 0, k));
    CHECK(cuGraphAddEventRecordNode(&dummy, child_count, &dummy, 1, k));
    CHECK(cuGraphCreate(&parent, 0));
    CHECK(cuGraphAddMemsetNode(&pm, parent, NULL, 0, &p7, NULL));
    CHECK(cuGraphAddChildGraphNode(&pc, parent, &pm, 1, child));
    CHECK(cuGraphAddChildGraphNode(&other_child, other, NULL, 0, child));
    CUgraphExec px;
    CHECK(cuGraphInstantiateWithFlags(&px, parent, 0));
    put_result("child_set", cuGraphExecChildGraphNodeSetParams(px, pc, child2));
    CHECK(cuGraphLaunch(px, s));
    printf("child_set_launch %d\n", (int)recorded(start, k));
    put_result("child_set_type_changed", cuGraphExecChildGraphNodeSetParams(px, pc, child_type));
    put_result("child_set_count_changed", cuGraphExecChildGraphNodeSetParams(px, pc, child_count));
    put_result("child_set_on_memset", cuGraphExecChildGraphNodeSetParams(px, pm, child2));
    put_result("child_set_foreign_node",
               cuGraphExecChildGraphNodeSetParams(px, other_child, child2));
    put_result("child_set_no_graph", cuGraphExecChildGraphNodeSetParams(px, pc, NULL));
    /* The child's own nodes name their counterparts in the executable graph. */
    CHECK(cuGraphChildGraphNodeGetGraph(pc, &inner));
    n = 1;
    CHECK(cuGraphGetNodes(inner, &ir, &n));
    CUresult fr_ = cuGraphNodeFindInClone(&found, cr, inner);
    printf("find_in_clone %d %d\n", (int)fr_, found == ir);
    put_result("find_in_clone_foreign", cuGraphNodeFindInClone(&found, m, inner));
    put_result("child_node_exec_set", cuGraphExecEventRecordNodeSetEvent(px, ir, l));
    CHECK(cuGraphLaunch(px, s));
    printf("child_node_launch %d\n", (int)recorded(start, l));

    /* The generic structure: cuGraphAddNode, cuGraphNodeSetParams, cuGraphExecNodeSetParams. */
    CUevent q = timed_event(), t = timed_event();
    printf("params_offset %zu %zu\n", offsetof(CUgraphNodeParams, eventRecord),
           offsetof(CUgraphNodeParams, eventWait));
    CUgraphNodeParams gp;
    memset(&gp, 0, sizeof gp);
    CUgraph gg;
    CUgraphNode gr, gw, gm;
    CHECK(cuGraphCreate(&gg, 0));
    CHECK(cuGraphAddMemsetNode(&gm, gg, NULL, 0, &p7, NULL));
    gp.type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
    gp.eventRecord.event = a;
    put_result("add_node_record", cuGraphAddNode(&gr, gg, &gm, 1, &gp));
    gp.type = CU_GRAPH_NODE_TYPE_WAIT_EVENT;
    gp.eventWait.event = c;
    put_result("add_node_wait", cuGraphAddNode_v2(&gw, gg, &gr, NULL, 1, &gp));
    CHECK(cuGraphNodeGetType(gr, &types[0]));
    CHECK(cuGraphNodeGetType(gw, &types[1]));
    printf("add_node_types %d %d\n", (int)types[0], (int)types[1]);
    gp.eventWait.event = gone;
    put_result("add_node_destroyed_event", cuGraphAddNode(&dummy, gg, NULL, 0, &gp));
    gp.eventWait.event = c;
    gp.reserved2 = 1;
    put_result("add_node_reserved", cuGraphAddNode(&dummy, gg, NULL, 0, &gp));
    gp.reserved2 = 0;
    gp.type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
    gp.eventRecord.event = q;
    put_result("node_set_params", cuGraphNodeSetParams(gr, &gp));
    CHECK(cuGraphEventRecordNodeGetEvent(gr, &got));
    printf("node_set_params_got %d\n", got == q);
    put_result("node_set_params_wrong_type", cuGraphNodeSetParams(gw, &gp));
    gp.type = CU_GRAPH_NODE_TYPE_MEMSET;
    put_result("node_set_params_memset", cuGraphNodeSetParams(gm, &gp));
    CUgraphExec gx;
    CHECK(cuGraphInstantiateWithFlags(&gx, gg, 0));
    gp.type = CU_GRAPH_NODE_TYPE_EVENT_RECORD;
    gp.eventRecord.event = t;
    put_result("exec_node_set_params", cuGraphExecNodeSetParams(gx, gr, &gp));
    CHECK(cuGraphLaunch(gx, s));
    printf("exec_node_set_params_launch %d %d\n", (int)recorded(start, t), (int)recorded(start, q));
    gp.type = CU_GRAPH_NODE_TYPE_WAIT_EVENT;
    gp.eventWait.event = a;
    put_result("exec_node_set_params_wait", cuGraphExecNodeSetParams(gx, gw, &gp));
    put_result("exec_node_set_params_wrong_type", cuGraphExecNodeSetParams(gx, gr, &gp));
    put_result("exec_node_set_params_foreign_node", cuGraphExecNodeSetParams(gx, r, &gp));
    gp.type = CU_GRAPH_NODE_TYPE_MEMSET;
    put_result("exec_node_set_params_memset", cuGraphExecNodeSetParams(gx, gm, &gp));
    gp.type = CU_GRAPH_NODE_TYPE_GRAPH;
    gp.graph.graph = child;
    put_result("exec_node_set_params_child", cuGraphExecNodeSetParams(px, pc, &gp));
    /* Launched into a capture, the executable graph's nodes are the capture's, events and all. */
    CUstream cap;
    CUgraph captured;
    CHECK(cuStreamCreate(&cap, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamBeginCapture_v2(cap, CU_STREAM_CAPTURE_MODE_RELAXED));
    CHECK(cuGraphLaunch(gx, cap));
    CHECK(cuStreamEndCapture(cap, &captured));
    n = 3;
    CHECK(cuGraphGetNodes(captured, nodes, &n));
    for (size_t i = 0; i < n; i++) CHECK(cuGraphNodeGetType(nodes[i], &types[i]));
    CHECK(cuGraphEventRecordNodeGetEvent(nodes[1], &got));
    printf("captured_launch %zu %d %d %d %d\n", n, (int)types[0], (int)types[1], (int)types[2],
           got == t);
    CHECK(cuGraphDestroy(captured));
    CHECK(cuStreamDestroy_v2(cap));

    CHECK(cuGraphExecDestroy(gx));
    CHECK(cuGraphExecDestroy(px));
    CHECK(cuGraphExecDestroy(mx));
    CHECK(cuGraphExecDestroy(x));
    CUgraph graphs[] = {g, other, fewer, swapped, mg, mg2, child, child2, child_type, child_count,
                        parent, gg};
    for (size_t i = 0; i < sizeof graphs / sizeof graphs[0]; i++) CHECK(cuGraphDestroy(graphs[i]));
    CHECK(cuMemFree_v2(d));
    CHECK(cuStreamDestroy_v2(s));
    return 0;
}

static int destroyed;

static void destroy(void *data) { destroyed += *(int *)data; }

/* User objects: the destructor runs when the last reference goes, whoever held it (the
 * program, a graph, or an executable graph made from a graph that held one). */
static int user_objects(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    int one = 1;
    CUuserObject a, b;
    CUgraph g, child, parent;
    CUgraphExec e;
    CUgraphNode n;
    put_result("create_no_flag", cuUserObjectCreate(&a, &one, destroy, 1, 0));
    put_result("create_no_refs", cuUserObjectCreate(&a, &one, destroy, 0, 1));
    CHECK(cuUserObjectCreate(&a, &one, destroy, 2, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CHECK(cuUserObjectRelease(a, 1));
    put_u64("after_one_of_two", destroyed);
    CHECK(cuUserObjectRetain(a, 1));
    CHECK(cuUserObjectRelease(a, 2));
    put_u64("after_the_last", destroyed);
    put_result("release_destroyed", cuUserObjectRelease(a, 1));
    /* Moved into a graph, kept by the executable graph after the graph goes. */
    CHECK(cuUserObjectCreate(&a, &one, destroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CHECK(cuGraphCreate(&g, 0));
    put_result("graph_retain_bad_flags", cuGraphRetainUserObject(g, a, 1, 2));
    CHECK(cuGraphRetainUserObject(g, a, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CHECK(cuGraphInstantiateWithFlags(&e, g, 0));
    CHECK(cuGraphDestroy(g));
    put_u64("graph_destroyed", destroyed);
    CHECK(cuGraphExecDestroy(e));
    put_u64("exec_destroyed", destroyed);
    /* A graph's own reference (not moved), released by the graph, then the program's. */
    CHECK(cuUserObjectCreate(&b, &one, destroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CHECK(cuGraphCreate(&g, 0));
    CHECK(cuGraphRetainUserObject(g, b, 2, 0));
    put_result("graph_release_too_many", cuGraphReleaseUserObject(g, b, 3));
    CHECK(cuGraphReleaseUserObject(g, b, 2));
    put_u64("graph_released", destroyed);
    CHECK(cuUserObjectRelease(b, 1));
    put_u64("program_released", destroyed);
    put_result("graph_release_unheld", cuGraphReleaseUserObject(g, b, 1));
    CHECK(cuGraphDestroy(g));
    /* Held by a child graph moved into its parent: the parent's executable graph keeps it. */
    CHECK(cuUserObjectCreate(&a, &one, destroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CHECK(cuGraphCreate(&child, 0));
    CHECK(cuGraphCreate(&parent, 0));
    CHECK(cuGraphRetainUserObject(child, a, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CUgraphNodeParams p;
    memset(&p, 0, sizeof p);
    p.type = CU_GRAPH_NODE_TYPE_GRAPH;
    p.graph.graph = child;
    p.graph.ownership = CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE;
    CHECK(cuGraphAddNode(&n, parent, NULL, 0, &p));
    CHECK(cuGraphInstantiateWithFlags(&e, parent, 0));
    CHECK(cuGraphDestroy(parent));
    put_u64("parent_destroyed", destroyed);
    CHECK(cuGraphExecDestroy(e));
    put_u64("parent_exec_destroyed", destroyed);
    /* A whole-graph update swaps the executable graph's references for the new graph's. */
    CUgraph old_graph, new_graph;
    CHECK(cuUserObjectCreate(&a, &one, destroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CHECK(cuUserObjectCreate(&b, &one, destroy, 1, CU_USER_OBJECT_NO_DESTRUCTOR_SYNC));
    CHECK(cuGraphCreate(&old_graph, 0));
    CHECK(cuGraphCreate(&new_graph, 0));
    CHECK(cuGraphRetainUserObject(old_graph, a, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CHECK(cuGraphRetainUserObject(new_graph, b, 1, CU_GRAPH_USER_OBJECT_MOVE));
    CHECK(cuGraphInstantiateWithFlags(&e, old_graph, 0));
    CHECK(cuGraphDestroy(old_graph));
    put_u64("before_update", destroyed);
    CUgraphExecUpdateResultInfo info;
    CHECK(cuGraphExecUpdate_v2(e, new_graph, &info));
    put_u64("update_released_old", destroyed);
    CHECK(cuGraphDestroy(new_graph));
    put_u64("update_holds_new", destroyed);
    CHECK(cuGraphExecDestroy(e));
    put_u64("updated_exec_destroyed", destroyed);
    return 0;
}

int main(int argc, char **argv) {
    static const struct subcommand cmds[] = {
        {"streams", streams},
        {"events", events},
        {"ctx-events", ctx_events},
        {"capture-info", capture_info},
        {"capture-join", capture_join},
        {"capture-to-graph", capture_to_graph},
        {"memops", memops},
        {"capture-external", capture_external},
        {"user-objects", user_objects},
        {"graph-events", graph_events}};
    return DISPATCH(cmds);
}
