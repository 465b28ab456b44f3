// link: driver
// A host function orders a pinned staging buffer's reuse across streams (XLA's transfers
// through host memory): a device-to-host copy into the buffer on stream a, a host function on
// a that sets a flag, the host waiting for the flag, then a host-to-device copy from the same
// buffer on stream b. Named by the first argument:
//   flag       through cuLaunchHostFunc (clean)
//   callback   through cuStreamAddCallback (clean)
//   v2         through cuLaunchHostFunc_v2 (clean)
//   ptsz       through cuLaunchHostFunc_ptsz, a being the per-thread default stream (clean)
//   none       no host function and no wait: the two copies race
//   capture    a host function captured into a graph, launched twice (it runs twice), and
//              one queued on another stream while the capture is under way (runs once)
//   refused    refused calls (a destroyed stream, a bad sync mode, bad callback flags, no
//              function): each result is printed and no program function runs
// Prints "key value" facts; returns 0 when the program's functions ran as CUDA says.
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "sim_util.h"

static atomic_int flag;
static atomic_int calls;

static void set_flag(void *f) { atomic_store((atomic_int *)f, 1); }

static void set_flag_cb(CUstream s, CUresult status, void *f) {
    (void)s;
    if (status == CUDA_SUCCESS) atomic_store((atomic_int *)f, 1);
}

static void count(void *c) { atomic_fetch_add((atomic_int *)c, 1); }

static void count_cb(CUstream s, CUresult status, void *c) {
    (void)s;
    (void)status;
    atomic_fetch_add((atomic_int *)c, 1);
}

__attribute__((noinline)) static CUstream make_stream(void) {
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    return s;
}

/* The host waits until the host function ran, as XLA's host side waits for its callback. */
static void wait_for_flag(void) {
    while (!atomic_load(&flag)) usleep(100);
}

static int staged(const char *how) {
    CUstream a = make_stream(), b = make_stream();
    CUdeviceptr d, e;
    CHECK(cuMemAlloc_v2(&d, 4096));
    CHECK(cuMemAlloc_v2(&e, 4096));
    unsigned init[4] = {7, 7, 7, 7};
    CHECK(cuMemcpyHtoD_v2(d, init, sizeof init));
    unsigned *staging;
    CHECK(cuMemHostAlloc((void **)&staging, 2 << 20, 0));
    CUstream on = !strcmp(how, "ptsz") ? NULL : a;
    if (!strcmp(how, "ptsz"))
        CHECK(cuMemcpyDtoHAsync_v2_ptsz(staging, d, sizeof init, NULL));
    else
        CHECK(cuMemcpyDtoHAsync_v2(staging, d, sizeof init, a));
    if (!strcmp(how, "flag")) CHECK(cuLaunchHostFunc(on, set_flag, &flag));
    if (!strcmp(how, "ptsz")) CHECK(cuLaunchHostFunc_ptsz(on, set_flag, &flag));
    if (!strcmp(how, "v2")) CHECK(cuLaunchHostFunc_v2(on, set_flag, &flag, 0));
    if (!strcmp(how, "callback")) CHECK(cuStreamAddCallback(on, set_flag_cb, &flag, 0));
    if (strcmp(how, "none")) wait_for_flag();
    CHECK(cuMemcpyHtoDAsync_v2(e, staging, sizeof init, b));
    unsigned out[4] = {0};
    CHECK(cuMemcpyDtoHAsync_v2(out, e, sizeof out, b));
    CHECK(cuStreamSynchronize(a));
    CHECK(cuStreamSynchronize(b));
    CHECK(cuStreamSynchronize_ptsz(NULL));
    CHECK(cuStreamDestroy_v2(a));
    CHECK(cuStreamDestroy_v2(b));
    CHECK(cuMemFreeHost(staging));
    CHECK(cuMemFree_v2(d));
    CHECK(cuMemFree_v2(e));
    put_u64("flag", (unsigned long long)atomic_load(&flag));
    put_u64("copied", out[3]);
    return out[3] == 7 ? 0 : 4;
}

static int capture(void) {
    CUstream a = make_stream(), b = make_stream(), cap = make_stream();
    atomic_int on_b = 0;
    CUgraph g;
    CUgraphExec exec;
    CHECK(cuStreamBeginCapture_v2(cap, CU_STREAM_CAPTURE_MODE_GLOBAL));
    CHECK(cuLaunchHostFunc(cap, count, &calls));
    CHECK(cuLaunchHostFunc(b, count, &on_b));
    CHECK(cuStreamEndCapture(cap, &g));
    CHECK(cuGraphInstantiateWithFlags(&exec, g, 0));
    put_u64("calls_before_launch", (unsigned long long)atomic_load(&calls));
    CHECK(cuGraphLaunch(exec, a));
    CHECK(cuGraphLaunch(exec, a));
    CHECK(cuStreamSynchronize(a));
    CHECK(cuStreamSynchronize(b));
    CHECK(cuGraphExecDestroy(exec));
    CHECK(cuGraphDestroy(g));
    CHECK(cuStreamDestroy_v2(a));
    CHECK(cuStreamDestroy_v2(b));
    CHECK(cuStreamDestroy_v2(cap));
    put_u64("calls", (unsigned long long)atomic_load(&calls));
    put_u64("calls_on_b", (unsigned long long)atomic_load(&on_b));
    return atomic_load(&calls) == 2 && atomic_load(&on_b) == 1 ? 0 : 4;
}

static int refused(void) {
    CUstream gone = make_stream();
    CHECK(cuStreamDestroy_v2(gone));
    CUstream a = make_stream();
    put_result("destroyed", cuLaunchHostFunc(gone, count, &calls));
    put_result("sync_mode", cuLaunchHostFunc_v2(a, count, &calls, 2));
    put_result("callback_flags", cuStreamAddCallback(a, count_cb, &calls, 1));
    put_result("no_function", cuLaunchHostFunc(a, NULL, &calls));
    CHECK(cuStreamSynchronize(a));
    CHECK(cuStreamDestroy_v2(a));
    put_u64("calls", (unsigned long long)atomic_load(&calls));
    return atomic_load(&calls) == 0 ? 0 : 4;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s flag|callback|v2|ptsz|none|capture|refused\n", argv[0]);
        return 2;
    }
    setup();
    const char *what = argv[1];
    if (!strcmp(what, "capture")) return capture();
    if (!strcmp(what, "refused")) return refused();
    if (!strcmp(what, "flag") || !strcmp(what, "callback") || !strcmp(what, "v2") ||
        !strcmp(what, "ptsz") || !strcmp(what, "none"))
        return staged(what);
    fprintf(stderr, "unknown case %s\n", what);
    return 2;
}
