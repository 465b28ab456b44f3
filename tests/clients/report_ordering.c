// link: driver
// One stream-ordering mistake per check named by the first argument, each with correctly
// ordered twins named by the second: ordered by an event ("event"), by host synchronization
// ("host"), or by the legacy default stream's implicit ordering ("legacy"); leaks have a
// "destroyed" twin, and unsynchronized work a "teardown" variant (the context torn down
// instead of exit). "handoff", "handoff-event" and "handoff-unsynced" hand the buffer from the
// thread that produced it to another through a mutex (after a stream synchronize, after an
// event synchronize, or before either). "weights" and "weights-event" have two streams run a
// kernel that only reads one buffer (unordered, and ordered by an event). "value" and
// "value-batch" order a race's streams by a value one writes and the other waits for (stream
// memory operations, single and batched); "value-early" writes the value before the kernel.
// "batch" reads the buffer with a batch of copies (cuMemcpyBatchAsync_v2), unordered: a race;
// "batch-event" orders it by an event; "batch-3d" and "batch-3d-event" likewise with a batch
// of 3D copies (cuMemcpy3DBatchAsync_v2), "attributes" and "attributes-event" with a copy with
// attributes (cuMemcpyWithAttributesAsync).
// "peer" reads the buffer with a synchronous peer copy (cuMemcpyPeer, serialized with all work,
// non-blocking streams included); "peer-async" with cuMemcpyPeerAsync on the other stream, a
// race.
// "ctx-event" orders the read by an event recorded over the whole context (cuCtxRecordEvent),
// "ctx-wait" by the context's wait for an event of the producer (cuCtxWaitEvent); for
// wait-on-unrecorded-event, "ctx" is the context's wait for an event nobody recorded (the
// mistake) and "ctx-event" its twin, recorded over the context.
// "pageable" and "pinned" end with an asynchronous copy into pageable memory (which the host
// waits for) or into pinned memory (which it does not), leaking their buffers.
// "library" and "library-event" launch the writing kernel as NVIDIA's runtime launches
// `<<<...>>>` kernels: a library's context-less kernel (cuLibraryGetKernel) cast to a
// CUfunction, whose parameters only cuKernelGetParamInfo describes.
// Every subcommand otherwise cleans up after itself (streams
// and events destroyed, memory freed, work waited for), so a mistake is the only finding in
// its report and a twin's report has none.
#include <pthread.h>
#include <stdint.h>
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

#define N 1024

static CUdevice dev;
static CUcontext ctx;
static CUfunction fill, assert_equal;
/* fill_u32 as a library's CUkernel, cast to the CUfunction a launch takes. */
static CUfunction fill_kernel;
static unsigned host_buf[N];

static void setup(void) {
    CUmodule mod;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    CHECK(cuModuleLoadData(&mod, "simcuda kernels"));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    CHECK(cuModuleGetFunction(&assert_equal, mod, "check_u32"));
    CUlibrary lib;
    CUkernel kernel;
    CHECK(cuLibraryLoadData(&lib, "simcuda kernels", NULL, NULL, 0, NULL, NULL, 0));
    CHECK(cuLibraryGetKernel(&kernel, lib, "fill_u32"));
    fill_kernel = (CUfunction)kernel;
}

__attribute__((noinline)) static CUstream make_stream(unsigned flags) {
    CUstream s;
    CHECK(cuStreamCreate(&s, flags));
    return s;
}

__attribute__((noinline)) static CUevent make_event(void) {
    CUevent e;
    CHECK(cuEventCreate(&e, CU_EVENT_DISABLE_TIMING));
    return e;
}

__attribute__((noinline)) static CUdeviceptr make_buffer(void) {
    CUdeviceptr d;
    CHECK(cuMemAlloc_v2(&d, N * sizeof(unsigned)));
    return d;
}

/* What produce launches: fill, or fill_kernel for "library". */
static CUfunction *writer = &fill;

/* fill_u32(d, value, N) on stream s: a kernel that writes d. */
static void produce(CUdeviceptr d, unsigned value, CUstream s) {
    unsigned n = N;
    void *params[] = {&d, &value, &n};
    CHECK(cuLaunchKernel(*writer, N / 128, 1, 1, 128, 1, 1, 0, s, params, NULL));
}

/* check_u32(d, value, N) on stream s: a kernel that only reads d (an assertion). */
static void consume(CUdeviceptr d, unsigned value, CUstream s) {
    unsigned n = N;
    void *params[] = {&d, &value, &n};
    CHECK(cuLaunchKernel(assert_equal, N / 128, 1, 1, 128, 1, 1, 0, s, params, NULL));
}

static void finish(CUstream a, CUstream b) {
    CHECK(cuStreamSynchronize(a));
    CHECK(cuStreamSynchronize(b));
    CHECK(cuStreamDestroy_v2(a));
    CHECK(cuStreamDestroy_v2(b));
}

/* A kernel on stream a writes a buffer; a copy on stream b reads it. */
static int race(const char *how) {
    int legacy = !strcmp(how, "legacy");
    unsigned flags = legacy ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING;
    CUstream a = make_stream(flags), b = make_stream(flags);
    CUevent e = make_event();
    CUdeviceptr d = make_buffer();
    /* A flag in page-locked memory for the stream memory operations. */
    unsigned *flag;
    CHECK(cuMemAllocHost_v2((void **)&flag, sizeof *flag));
    *flag = 0;
    CUdeviceptr f = (CUdeviceptr)(uintptr_t)flag;
    if (!strcmp(how, "value-early")) CHECK(cuStreamWriteValue32_v2(a, f, 1, 0));
    if (!strncmp(how, "library", 7)) writer = &fill_kernel;
    produce(d, 7, a);
    if (!strcmp(how, "event")) {
        CHECK(cuEventRecord(e, a));
        CHECK(cuStreamWaitEvent(b, e, 0));
    } else if (!strcmp(how, "host")) {
        CHECK(cuStreamSynchronize(a));
    } else if (!strcmp(how, "value")) {
        CHECK(cuStreamWriteValue32_v2(a, f, 1, CU_STREAM_WRITE_VALUE_DEFAULT));
        CHECK(cuStreamWaitValue32_v2(b, f, 1, CU_STREAM_WAIT_VALUE_EQ));
    } else if (!strcmp(how, "value-batch")) {
        CUstreamBatchMemOpParams op;
        memset(&op, 0, sizeof op);
        op.writeValue.operation = CU_STREAM_MEM_OP_WRITE_VALUE_32;
        op.writeValue.address = f;
        op.writeValue.value = 1;
        CHECK(cuStreamBatchMemOp_v2(a, 1, &op, 0));
        op.waitValue.operation = CU_STREAM_MEM_OP_WAIT_VALUE_32;
        op.waitValue.flags = CU_STREAM_WAIT_VALUE_GEQ;
        CHECK(cuStreamBatchMemOp_v2(b, 1, &op, 0));
    } else if (!strcmp(how, "value-early")) {
        CHECK(cuStreamWaitValue32_v2(b, f, 1, CU_STREAM_WAIT_VALUE_EQ));
    }
    if (!strcmp(how, "ctx-event")) {
        CHECK(cuCtxRecordEvent(ctx, e));
        CHECK(cuStreamWaitEvent(b, e, 0));
    } else if (!strcmp(how, "ctx-wait")) {
        CHECK(cuEventRecord(e, a));
        CHECK(cuCtxWaitEvent(ctx, e));
    }
    if (!strcmp(how, "batch-event") || !strcmp(how, "batch-3d-event") ||
        !strcmp(how, "attributes-event") || !strcmp(how, "library-event")) {
        CHECK(cuEventRecord(e, a));
        CHECK(cuStreamWaitEvent(b, e, 0));
    }
    if (!strncmp(how, "peer", 4)) {
        /* The read is a copy to another context's buffer (here the same context's), read back
         * once the device is idle. */
        CUdeviceptr d2 = make_buffer();
        if (!strcmp(how, "peer"))
            CHECK(cuMemcpyPeer(d2, ctx, d, ctx, sizeof host_buf));
        else
            CHECK(cuMemcpyPeerAsync(d2, ctx, d, ctx, sizeof host_buf, b));
        CHECK(cuCtxSynchronize());
        CHECK(cuMemcpyDtoH_v2(host_buf, d2, sizeof host_buf));
        CHECK(cuMemFree_v2(d2));
    } else if (!strncmp(how, "batch-3d", 8)) {
        /* The read is a batch of 3D copies: the buffer as 4 rows of a quarter each, packed. */
        CUDA_MEMCPY3D_BATCH_OP op;
        memset(&op, 0, sizeof op);
        op.src.type = op.dst.type = CU_MEMCPY_OPERAND_TYPE_POINTER;
        op.src.op.ptr.ptr = d;
        op.dst.op.ptr.ptr = (CUdeviceptr)(uintptr_t)host_buf;
        op.extent = (CUextent3D){sizeof host_buf / 4, 4, 1};
        op.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
        CHECK(cuMemcpy3DBatchAsync_v2(1, &op, 0, b));
    } else if (!strncmp(how, "attributes", 10)) {
        CUmemcpyAttributes attr;
        memset(&attr, 0, sizeof attr);
        attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
        CHECK(cuMemcpyWithAttributesAsync((CUdeviceptr)(uintptr_t)host_buf, d, sizeof host_buf,
                                          &attr, b));
    } else if (!strncmp(how, "batch", 5)) {
        /* The read is a batch of copies (the buffer's two halves). */
        CUdeviceptr dsts[2] = {(CUdeviceptr)(uintptr_t)host_buf,
                               (CUdeviceptr)(uintptr_t)(host_buf + N / 2)};
        CUdeviceptr srcs[2] = {d, d + N / 2 * sizeof(unsigned)};
        size_t sizes[2] = {sizeof host_buf / 2, sizeof host_buf / 2}, idx = 0;
        CUmemcpyAttributes attr;
        memset(&attr, 0, sizeof attr);
        attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
        CHECK(cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 2, &attr, &idx, 1, b));
    } else {
        /* The legacy twin reads on the legacy default stream, which waits for blocking a. */
        CHECK(cuMemcpyDtoHAsync_v2(host_buf, d, sizeof host_buf, legacy ? NULL : b));
    }
    finish(a, b);
    CHECK(cuStreamSynchronize(NULL));
    CHECK(cuEventDestroy_v2(e));
    CHECK(cuMemFree_v2(d));
    CHECK(cuMemFreeHost(flag));
    return host_buf[N - 1] == 7 ? 0 : 4;
}

/* Two streams share read-only data (a model's weights, say): written and waited for once,
   then read by a kernel on each stream with no ordering between them, or (the twin) with an
   event between them. */
static int weights(const char *how) {
    CUstream a = make_stream(CU_STREAM_NON_BLOCKING), b = make_stream(CU_STREAM_NON_BLOCKING);
    CUevent e = make_event();
    CUdeviceptr d = make_buffer();
    produce(d, 5, a);
    CHECK(cuStreamSynchronize(a));
    consume(d, 5, a);
    if (!strcmp(how, "weights-event")) {
        CHECK(cuEventRecord(e, a));
        CHECK(cuStreamWaitEvent(b, e, 0));
    }
    consume(d, 5, b);
    finish(a, b);
    CHECK(cuEventDestroy_v2(e));
    CHECK(cuMemFree_v2(d));
    return 0;
}

/* A buffer handed from one host thread to another, which the trace cannot see. */
struct handoff {
    pthread_mutex_t lock;
    pthread_cond_t ready_cv;
    int ready;
    const char *how;
    CUdeviceptr d;
    CUstream a;
    CUevent e;
};

/* The producer: a kernel on stream a writes the buffer; the host then waits for it (or, in
   the mistake, does not) before handing the buffer over. */
static void *producer(void *arg) {
    struct handoff *h = arg;
    produce(h->d, 9, h->a);
    if (!strcmp(h->how, "handoff")) {
        CHECK(cuStreamSynchronize(h->a));
    } else if (!strcmp(h->how, "handoff-event")) {
        CHECK(cuEventRecord(h->e, h->a));
        CHECK(cuEventSynchronize(h->e));
    }
    pthread_mutex_lock(&h->lock);
    h->ready = 1;
    pthread_cond_signal(&h->ready_cv);
    pthread_mutex_unlock(&h->lock);
    return NULL;
}

/* The consumer is the main thread, already at work on stream b before the buffer exists (as
   a loop that processes one buffer after another is): it waits for the producer through the
   mutex, then reads the buffer with a copy on stream b. */
static int handoff(const char *how) {
    struct handoff h = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, how, 0, 0, 0};
    CUstream b = make_stream(CU_STREAM_NON_BLOCKING);
    h.a = make_stream(CU_STREAM_NON_BLOCKING);
    h.e = make_event();
    h.d = make_buffer();
    CHECK(cuMemsetD8Async(h.d, 0, N * sizeof(unsigned), b));
    CHECK(cuStreamSynchronize(b));
    pthread_t t;
    if (pthread_create(&t, NULL, producer, &h) != 0) return 5;
    pthread_mutex_lock(&h.lock);
    while (!h.ready) pthread_cond_wait(&h.ready_cv, &h.lock);
    pthread_mutex_unlock(&h.lock);
    CHECK(cuMemcpyDtoHAsync_v2(host_buf, h.d, sizeof host_buf, b));
    pthread_join(t, NULL);
    finish(h.a, b);
    CHECK(cuEventDestroy_v2(h.e));
    CHECK(cuMemFree_v2(h.d));
    /* Without the wait the copy may have read the buffer before the kernel wrote it. */
    return host_buf[N - 1] == 9 || !strcmp(how, "handoff-unsynced") ? 0 : 4;
}

/* A kernel on stream a uses memory that stream b frees. */
static int unordered_free(const char *how) {
    int legacy = !strcmp(how, "legacy");
    unsigned flags = legacy ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING;
    CUstream a = make_stream(flags), b = make_stream(flags);
    CUevent e = make_event();
    CUdeviceptr d;
    CHECK(cuMemAllocAsync(&d, N * sizeof(unsigned), a));
    produce(d, 1, a);
    if (!strcmp(how, "event")) {
        CHECK(cuEventRecord(e, a));
        CHECK(cuStreamWaitEvent(b, e, 0));
    } else if (!strcmp(how, "host")) {
        CHECK(cuStreamSynchronize(a));
    }
    /* The legacy twin frees on the legacy default stream, which waits for blocking a. */
    CHECK(cuMemFreeAsync(d, legacy ? NULL : b));
    finish(a, b);
    CHECK(cuStreamSynchronize(NULL));
    CHECK(cuEventDestroy_v2(e));
    return 0;
}

/* Work queued on a stream after the stream freed the memory it uses. The twins free last,
 * ordered after the use in each of the three ways. */
static int use_after_free(const char *how) {
    int legacy = !strcmp(how, "legacy");
    int mistake = !strcmp(how, "");
    unsigned flags = legacy ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING;
    CUstream a = make_stream(flags), b = make_stream(flags);
    CUevent e = make_event();
    CUdeviceptr d;
    CHECK(cuMemAllocAsync(&d, N * sizeof(unsigned), a));
    produce(d, 1, a);
    if (mistake) {
        CHECK(cuMemFreeAsync(d, a));
        /* The simulator checks every range at once and refuses this (a real driver accepts it
         * and the memset runs on memory the pool may have handed out again). */
        CUresult r = cuMemsetD32Async(d, 0, N, a);
        printf("memset_after_free %d\n", (int)r);
    } else {
        produce(d, 2, a);
        if (!strcmp(how, "event")) {
            CHECK(cuEventRecord(e, a));
            CHECK(cuStreamWaitEvent(b, e, 0));
            CHECK(cuMemFreeAsync(d, b));
        } else if (!strcmp(how, "host")) {
            CHECK(cuStreamSynchronize(a));
            CHECK(cuMemFree_v2(d));
        } else {
            CHECK(cuMemFreeAsync(d, NULL));
        }
    }
    finish(a, b);
    CHECK(cuStreamSynchronize(NULL));
    CHECK(cuEventDestroy_v2(e));
    return 0;
}

/* A stream waits for an event that nobody recorded, while a kernel is pending on another
 * stream, then queues work (on another buffer) that the wait was meant to order after it. */
static int unrecorded(const char *how) {
    int legacy = !strcmp(how, "legacy");
    CUstream a = make_stream(CU_STREAM_NON_BLOCKING), b = make_stream(CU_STREAM_NON_BLOCKING);
    CUevent e = make_event();
    CUdeviceptr d = make_buffer();
    CUstream producer = legacy ? NULL : a;
    produce(d, 5, producer);
    if (!strcmp(how, "ctx-event"))
        CHECK(cuCtxRecordEvent(ctx, e));
    else if (strcmp(how, "") && strcmp(how, "ctx"))
        CHECK(cuEventRecord(e, producer));
    CUdeviceptr next = make_buffer();
    if (!strcmp(how, "host")) {
        CHECK(cuEventSynchronize(e));
    } else if (!strncmp(how, "ctx", 3)) {
        CHECK(cuCtxWaitEvent(ctx, e));
    } else {
        CHECK(cuStreamWaitEvent(b, e, 0));
    }
    produce(next, 6, b);
    finish(a, b);
    CHECK(cuStreamSynchronize(NULL));
    CHECK(cuEventDestroy_v2(e));
    CHECK(cuMemFree_v2(d));
    CHECK(cuMemFree_v2(next));
    return 0;
}

/* A stream (or an event) never destroyed. */
static int stream_leak(const char *how) {
    CUstream s = make_stream(CU_STREAM_NON_BLOCKING);
    if (strcmp(how, "")) CHECK(cuStreamDestroy_v2(s));
    return 0;
}

static int event_leak(const char *how) {
    CUevent e = make_event();
    if (strcmp(how, "")) CHECK(cuEventDestroy_v2(e));
    return 0;
}

/* Work queued on a stream that the host never waits for. */
static int unsynchronized(const char *how) {
    int legacy = !strcmp(how, "legacy");
    CUstream a = make_stream(legacy ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING);
    CUevent e = make_event();
    int pinned = !strcmp(how, "pinned");
    if (pinned || !strcmp(how, "pageable")) {
        /* The copy back is the last work, and its destination decides whether the host
           waited for it: an asynchronous copy into pageable memory returns once it is
           complete. Nothing is freed after it (a free would wait, or be work of its own), so
           the buffers leak. */
        CUdeviceptr src = make_buffer();
        produce(src, 3, a);
        void *dst = host_buf;
        if (pinned) CHECK(cuMemAllocHost_v2(&dst, sizeof host_buf));
        CHECK(cuMemcpyDtoHAsync_v2(dst, src, sizeof host_buf, a));
        CHECK(cuStreamDestroy_v2(a));
        CHECK(cuEventDestroy_v2(e));
        return 0;
    }
    CUdeviceptr d;
    CHECK(cuMemAllocAsync(&d, N * sizeof(unsigned), a));
    produce(d, 3, a);
    CHECK(cuMemcpyDtoHAsync_v2(host_buf, d, sizeof host_buf, a));
    /* The copy into pageable memory was waited for; the check after it is the work whose
       outcome nobody waits for (the free after it hands memory back and needs no wait). */
    consume(d, 3, a);
    CHECK(cuMemFreeAsync(d, a));
    if (!strcmp(how, "event")) {
        CHECK(cuEventRecord(e, a));
        CHECK(cuEventSynchronize(e));
    } else if (!strcmp(how, "host")) {
        CHECK(cuStreamSynchronize(a));
    } else if (legacy) {
        /* A blocking copy on the legacy default stream waits for blocking a. */
        CUdeviceptr small = make_buffer();
        CHECK(cuMemcpyDtoH_v2(host_buf, small, 4));
        CHECK(cuMemFree_v2(small));
    }
    CHECK(cuStreamDestroy_v2(a));
    CHECK(cuEventDestroy_v2(e));
    if (!strcmp(how, "teardown")) CHECK(cuDevicePrimaryCtxRelease_v2(dev));
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CHECK [event|host|legacy|destroyed|teardown]\n", argv[0]);
        return 2;
    }
    setup();
    const char *check = argv[1];
    const char *how = argc > 2 ? argv[2] : "";
    if (!strcmp(check, "cross-stream-race") && !strncmp(how, "handoff", 7)) return handoff(how);
    if (!strcmp(check, "cross-stream-race") && !strncmp(how, "weights", 7)) return weights(how);
    if (!strcmp(check, "cross-stream-race")) return race(how);
    if (!strcmp(check, "unordered-free")) return unordered_free(how);
    if (!strcmp(check, "use-after-free")) return use_after_free(how);
    if (!strcmp(check, "wait-on-unrecorded-event")) return unrecorded(how);
    if (!strcmp(check, "stream-leak")) return stream_leak(how);
    if (!strcmp(check, "event-leak")) return event_leak(how);
    if (!strcmp(check, "unsynchronized-at-exit")) return unsynchronized(how);
    fprintf(stderr, "unknown check %s\n", check);
    return 2;
}
