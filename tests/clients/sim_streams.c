// link: driver
// Streams and events: creation flags and priorities, the three special streams, callbacks
// (which may call the driver), event timing, and destroyed handles.
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

int main(int argc, char **argv) {
    static const struct subcommand cmds[] = {{"streams", streams}, {"events", events}};
    return DISPATCH(cmds);
}
