// link: driver
// External semaphores (cuImportExternalSemaphore) between two streams: a kernel on stream a
// writes a buffer, a copy on stream b reads it, ordered by what the first argument names:
//   binary            a signals an opaque (binary) semaphore, b waits for it;
//   timeline          a signals a timeline semaphore with 2, b waits for 2;
//   timeline-lower    the same, b waits for 1 (met by 2);
//   ptsz              "timeline" with a the calling thread's per-thread default stream, through
//                     the _ptsz entry points;
//   two               one call signals a binary and a timeline semaphore, one call waits for both;
//   graph-signal      a launches a graph captured from the kernel and a signal of 2, b waits
//                     for 2;
//   graph-value       the same with a value written (cuStreamWriteValue32) and waited for;
//   graph-wait        a runs the kernel and signals 2; b launches a graph captured from a
//                     wait for 2 and the read;
//   graph-nested      "graph-signal" with the graph launched into a second capture, whose
//                     graph a launches;
// and the mistakes, each one race:
//   none              no semaphore at all;
//   timeline-early    a signals 1 before the kernel, b waits for 1;
//   timeline-higher   a signals 2, b waits for 3 (which only another agent could signal);
//   timeline-ahead    a signals 1 before the kernel and 2 after it, b waits for 1 (met as
//                     soon as 1 is signaled, with the kernel still to run);
//   graph-higher      "graph-signal", b waiting for 3;
//   binary-taken      a signals once, b waits and reads, then a third stream c waits too
//                     and reads (the signal was b's: c's wait needs one of its own).
// "leak" imports a semaphore and never destroys it ("leak destroyed": it does); "refused"
// signals a destroyed semaphore and prints the result. Everything else is cleaned up, so a
// mistake is the only finding in its report.
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "simcuda.h"

#define CHECK(x)                                                                       \
    do {                                                                               \
        CUresult rc_ = (x);                                                            \
        if (rc_ != CUDA_SUCCESS) {                                                     \
            fprintf(stderr, "%s:%d %s failed with %d\n", __FILE__, __LINE__, #x, rc_); \
            exit(3);                                                                   \
        }                                                                              \
    } while (0)

#define N 1024

static CUfunction fill;
/* Page-locked, two buffers' worth (b reads into the first, c into the second): a copy into
 * it does not make the host wait. */
static unsigned *host_buf;

static void setup(void) {
    CUdevice dev;
    CUcontext ctx;
    CUmodule mod;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, "simcuda kernels"));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
}

/* An external semaphore of the given type, from a descriptor the driver takes over. */
__attribute__((noinline)) static CUexternalSemaphore make_semaphore(CUexternalSemaphoreHandleType type) {
    CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC desc;
    memset(&desc, 0, sizeof desc);
    desc.type = type;
    desc.handle.fd = open("/dev/null", O_RDONLY);
    if (desc.handle.fd < 0) exit(5);
    CUexternalSemaphore s;
    CHECK(cuImportExternalSemaphore(&s, &desc));
    return s;
}

__attribute__((noinline)) static CUdeviceptr make_buffer(void) {
    CUdeviceptr d;
    CHECK(cuMemAlloc_v2(&d, N * sizeof(unsigned)));
    return d;
}

/* fill_u32(d, value, N) on stream s: a kernel that writes d. */
static void produce(CUdeviceptr d, unsigned value, CUstream s) {
    unsigned n = N;
    void *params[] = {&d, &value, &n};
    CHECK(cuLaunchKernel(fill, N / 128, 1, 1, 128, 1, 1, 0, s, params, NULL));
}

static void signal_value(CUexternalSemaphore sem, unsigned long long value, CUstream s, int ptsz) {
    CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS p;
    memset(&p, 0, sizeof p);
    p.params.fence.value = value;
    if (ptsz)
        CHECK(cuSignalExternalSemaphoresAsync_ptsz(&sem, &p, 1, s));
    else
        CHECK(cuSignalExternalSemaphoresAsync(&sem, &p, 1, s));
}

static void wait_value(CUexternalSemaphore sem, unsigned long long value, CUstream s, int ptsz) {
    CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS p;
    memset(&p, 0, sizeof p);
    p.params.fence.value = value;
    if (ptsz)
        CHECK(cuWaitExternalSemaphoresAsync_ptsz(&sem, &p, 1, s));
    else
        CHECK(cuWaitExternalSemaphoresAsync(&sem, &p, 1, s));
}

/* A graph launched on `launch`, captured on a stream of its own: the kernel and then a
 * signal of 2 (or a write of 1 at `flag`), or ("graph-wait") a wait for 2 and then the read. */
static void graph(const char *how, CUexternalSemaphore sem, CUdeviceptr d, CUdeviceptr flag,
                  CUstream launch) {
    CUstream cs;
    CHECK(cuStreamCreate(&cs, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamBeginCapture_v2(cs, CU_STREAM_CAPTURE_MODE_RELAXED));
    if (!strcmp(how, "graph-wait")) {
        wait_value(sem, 2, cs, 0);
        CHECK(cuMemcpyDtoHAsync_v2(host_buf, d, N * sizeof(unsigned), cs));
    } else {
        produce(d, 7, cs);
        if (!strcmp(how, "graph-value"))
            CHECK(cuStreamWriteValue32_v2(cs, flag, 1, 0));
        else
            signal_value(sem, 2, cs, 0);
    }
    CUgraph g;
    CUgraphExec e;
    CHECK(cuStreamEndCapture(cs, &g));
    CHECK(cuGraphInstantiateWithFlags(&e, g, 0));
    CHECK(cuGraphDestroy(g));
    if (!strcmp(how, "graph-nested")) {
        /* The graph launched into another capture: the outer graph runs it. */
        CUgraphExec inner = e;
        CHECK(cuStreamBeginCapture_v2(cs, CU_STREAM_CAPTURE_MODE_RELAXED));
        CHECK(cuGraphLaunch(inner, cs));
        CHECK(cuStreamEndCapture(cs, &g));
        CHECK(cuGraphInstantiateWithFlags(&e, g, 0));
        CHECK(cuGraphDestroy(g));
        CHECK(cuGraphExecDestroy(inner));
    }
    CHECK(cuGraphLaunch(e, launch));
    CHECK(cuGraphExecDestroy(e));
    CHECK(cuStreamDestroy_v2(cs));
}

/* The graph modes: the graph's signal (or value) orders b's read after its kernel, or its
 * wait orders its read after a's kernel. */
static void through_graph(const char *how, CUexternalSemaphore sem, CUdeviceptr d, CUstream a,
                          CUstream b) {
    CUdeviceptr flag;
    CHECK(cuMemAlloc_v2(&flag, 8));
    if (!strcmp(how, "graph-wait")) {
        produce(d, 7, a);
        signal_value(sem, 2, a, 0);
        graph(how, sem, d, flag, b);
    } else {
        graph(how, sem, d, flag, a);
        if (!strcmp(how, "graph-value"))
            CHECK(cuStreamWaitValue32_v2(b, flag, 1, CU_STREAM_WAIT_VALUE_EQ));
        else
            wait_value(sem, !strcmp(how, "graph-higher") ? 3 : 2, b, 0);
        CHECK(cuMemcpyDtoHAsync_v2(host_buf, d, N * sizeof(unsigned), b));
    }
    CHECK(cuStreamSynchronize(a));
    CHECK(cuStreamSynchronize(b));
    CHECK(cuMemFree_v2(flag));
}

/* The other modes: a's kernel, then the semaphores the mode names, then b's read (and c's). */
static void direct(const char *how, CUexternalSemaphore sem, CUexternalSemaphore other,
                   CUdeviceptr d, CUstream a, CUstream b, CUstream c, int timeline, int ptsz) {
    if (!strcmp(how, "timeline-early") || !strcmp(how, "timeline-ahead")) signal_value(sem, 1, a, 0);
    produce(d, 7, a);
    if (!strcmp(how, "two")) {
        /* A binary and a timeline semaphore in one call each: b needs both. */
        CUexternalSemaphore both[2] = {sem, other};
        CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sp[2];
        CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS wp[2];
        memset(sp, 0, sizeof sp);
        memset(wp, 0, sizeof wp);
        sp[1].params.fence.value = wp[1].params.fence.value = 4;
        CHECK(cuSignalExternalSemaphoresAsync(both, sp, 2, a));
        CHECK(cuWaitExternalSemaphoresAsync(both, wp, 2, b));
    } else if (!strcmp(how, "timeline-early")) {
        wait_value(sem, 1, b, 0);
    } else if (strcmp(how, "none")) {
        signal_value(sem, timeline ? 2 : 0, ptsz ? NULL : a, ptsz);
        unsigned long long wanted = !strcmp(how, "timeline-lower") || !strcmp(how, "timeline-ahead") ? 1
                                    : !strcmp(how, "timeline-higher") ? 3
                                    : timeline ? 2 : 0;
        wait_value(sem, wanted, b, 0);
    }
    CHECK(cuMemcpyDtoHAsync_v2(host_buf, d, N * sizeof(unsigned), b));
    if (!strcmp(how, "binary-taken")) {
        /* Once b's wait took the signal, c's waits for another, which nobody gives here. */
        wait_value(sem, 0, c, 0);
        CHECK(cuMemcpyDtoHAsync_v2(host_buf + N, d, N * sizeof(unsigned), c));
    }
    CHECK(cuStreamSynchronize(a));
    CHECK(cuStreamSynchronize(b));
    CHECK(cuStreamSynchronize(c));
}

static int race(const char *how) {
    int ptsz = !strcmp(how, "ptsz");
    int in_graph = !strncmp(how, "graph", 5);
    /* In "ptsz", a is the per-thread default stream: CU_STREAM_PER_THREAD for the kernel,
     * NULL for the _ptsz entry points. */
    CUstream a = CU_STREAM_PER_THREAD, b, c;
    if (!ptsz) CHECK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&c, CU_STREAM_NON_BLOCKING));
    int timeline = !strncmp(how, "timeline", 8) || ptsz || in_graph;
    CUexternalSemaphore sem =
        make_semaphore(timeline ? CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD
                                : CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD);
    CUexternalSemaphore other = make_semaphore(CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD);
    CUdeviceptr d = make_buffer();
    CHECK(cuMemAllocHost_v2((void **)&host_buf, 2 * N * sizeof(unsigned)));
    if (in_graph)
        through_graph(how, sem, d, a, b);
    else
        direct(how, sem, other, d, a, b, c, timeline, ptsz);
    if (!ptsz) CHECK(cuStreamDestroy_v2(a));
    CHECK(cuStreamDestroy_v2(b));
    CHECK(cuStreamDestroy_v2(c));
    CHECK(cuDestroyExternalSemaphore(sem));
    CHECK(cuDestroyExternalSemaphore(other));
    CHECK(cuMemFree_v2(d));
    int ok = host_buf[N - 1] == 7;
    CHECK(cuMemFreeHost(host_buf));
    return ok ? 0 : 4;
}

static int leak(const char *how) {
    CUexternalSemaphore s = make_semaphore(CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD);
    if (!strcmp(how, "destroyed")) CHECK(cuDestroyExternalSemaphore(s));
    return 0;
}

/* A signal of a destroyed semaphore: the driver's answer reaches the program unchanged. */
static int refused(void) {
    CUexternalSemaphore s = make_semaphore(CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD);
    CHECK(cuDestroyExternalSemaphore(s));
    CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS p;
    memset(&p, 0, sizeof p);
    printf("signal %d\n", (int)cuSignalExternalSemaphoresAsync(&s, &p, 1, NULL));
    printf("destroy %d\n", (int)cuDestroyExternalSemaphore(s));
    return 0;
}

int main(int argc, char **argv) {
    setup();
    const char *what = argc > 1 ? argv[1] : "";
    const char *how = argc > 2 ? argv[2] : "";
    if (!strcmp(what, "leak")) return leak(how);
    if (!strcmp(what, "refused")) return refused();
    return race(what);
}
