/*
 * object_churn: stream and event calls at a call stack of F frames, each timed inside the
 * program in batches of BATCH calls so that creation and destruction are measured apart:
 *
 *   stream_create   cuStreamCreate            (hooked: the shim records it with a creation stack)
 *   stream_destroy  cuStreamDestroy_v2        (hooked: recorded, no stack)
 *   event_create    cuEventCreate             (hooked: creation stack)
 *   event_destroy   cuEventDestroy_v2         (hooked: recorded, no stack)
 *   record_sync     cuEventRecord + cuStreamSynchronize, per call (hooked: recorded, no stack)
 *   copy_async      cuMemcpyHtoDAsync_v2 of 4 bytes (hooked: recorded with its range, no stack)
 *   copy_batch      cuMemcpyBatchAsync_v2 of four 64-byte device copies (hooked: one record per
 *                   copy, no stack)
 *   prefetch        cuMemPrefetchAsync_v2 of 4 KiB of managed memory to device 0 (hooked:
 *                   recorded with its range and location, no stack)
 *   launch          cuLaunchKernel of the simulator's fill_u32 over one element, three
 *                   parameters (hooked: recorded with the parameters that may be device
 *                   pointers, no stack)
 *   graph_launch    cuGraphLaunch of a graph whose allocation node's 4 KiB its free node
 *                   frees (hooked: recorded, no stack; with GPULEAK_LIVE=1 the live gauges
 *                   also look the executable graph up and charge and release its memory)
 *   instantiate     cuGraphInstantiateWithFlags of a graph of GRAPH_NODES allocation nodes
 *                   and as many free nodes, destroyed after each call, untimed (hooked: the
 *                   shim lists the graph's memory nodes, one driver getter per node, and
 *                   records them with a stack)
 *   instantiate_work  the same of a captured graph of GRAPH_NODES fill_u32 kernels and as
 *                   many 4-byte device copies (hooked: the shim reads each kernel node's
 *                   parameters and each copy's descriptor, and records what they touch)
 *   capture_work    the capture of that graph (cuStreamBeginCapture_v2, GRAPH_NODES kernels
 *                   and copies, cuStreamEndCapture), destroyed after each, untimed (hooked:
 *                   each captured call asks the driver for its node and records it with a
 *                   stack)
 *
 *     object_churn [FRAMES=25] [CALLS=100000]
 *
 * Prints one line per measurement: `object_churn op=NAME calls=N ns_per_call=X cpu_ns_per_call=Y`
 * (wall clock and the thread's CPU time, see bench/frames.h).
 */
#include <string.h>

#include "simcuda.h"
#include "frames.h"

#define BATCH 500

static long calls = 100000;
static long failures;

/* Time spent, wall and CPU. */
struct spent {
    double wall, cpu;
};

static void add(struct spent *s, struct stamp a, struct stamp b) {
    s->wall += b.wall - a.wall;
    s->cpu += b.cpu - a.cpu;
}

static void report(const char *op, long n, struct spent s) {
    printf("object_churn op=%s calls=%ld ns_per_call=%.1f cpu_ns_per_call=%.1f\n", op, n, s.wall / (double)n,
           s.cpu / (double)n);
}

/* Creates and destroys `batches` x BATCH streams; adds the time of each half. */
static void streams(long batches, struct spent *create, struct spent *destroy) {
    static CUstream s[BATCH];
    for (long b = 0; b < batches; b++) {
        struct stamp t0 = stamp();
        for (int i = 0; i < BATCH; i++)
            if (cuStreamCreate(&s[i], 0) != CUDA_SUCCESS) failures++;
        struct stamp t1 = stamp();
        for (int i = 0; i < BATCH; i++)
            if (cuStreamDestroy_v2(s[i]) != CUDA_SUCCESS) failures++;
        struct stamp t2 = stamp();
        add(create, t0, t1);
        add(destroy, t1, t2);
    }
}

static void events(long batches, struct spent *create, struct spent *destroy) {
    static CUevent e[BATCH];
    for (long b = 0; b < batches; b++) {
        struct stamp t0 = stamp();
        for (int i = 0; i < BATCH; i++)
            if (cuEventCreate(&e[i], 0) != CUDA_SUCCESS) failures++;
        struct stamp t1 = stamp();
        for (int i = 0; i < BATCH; i++)
            if (cuEventDestroy_v2(e[i]) != CUDA_SUCCESS) failures++;
        struct stamp t2 = stamp();
        add(create, t0, t1);
        add(destroy, t1, t2);
    }
}

static struct spent record_sync(CUevent ev, CUstream st, long n) {
    struct spent s = {0, 0};
    struct stamp t0 = stamp();
    for (long i = 0; i < n; i++) {
        if (cuEventRecord(ev, st) != CUDA_SUCCESS) failures++;
        if (cuStreamSynchronize(st) != CUDA_SUCCESS) failures++;
    }
    add(&s, t0, stamp());
    return s;
}

static struct spent copy_async(CUdeviceptr d, CUstream st, long n) {
    static uint32_t host = 7;
    struct spent s = {0, 0};
    struct stamp t0 = stamp();
    for (long i = 0; i < n; i++)
        if (cuMemcpyHtoDAsync_v2(d, &host, sizeof host, st) != CUDA_SUCCESS) failures++;
    add(&s, t0, stamp());
    return s;
}

static struct spent copy_batch(CUdeviceptr d, CUstream st, long n) {
    CUdeviceptr dsts[4] = {d, d + 64, d + 128, d + 192};
    CUdeviceptr srcs[4] = {d + 2048, d + 2112, d + 2176, d + 2240};
    size_t sizes[4] = {64, 64, 64, 64};
    CUmemcpyAttributes attr;
    memset(&attr, 0, sizeof attr);
    attr.srcAccessOrder = CU_MEMCPY_SRC_ACCESS_ORDER_STREAM;
    size_t first = 0;
    struct spent s = {0, 0};
    struct stamp t0 = stamp();
    for (long i = 0; i < n; i++)
        if (cuMemcpyBatchAsync_v2(dsts, srcs, sizes, 4, &attr, &first, 1, st) != CUDA_SUCCESS)
            failures++;
    add(&s, t0, stamp());
    return s;
}

static struct spent prefetch(CUdeviceptr managed, CUstream st, long n) {
    const CUmemLocation gpu = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0};
    struct spent s = {0, 0};
    struct stamp t0 = stamp();
    for (long i = 0; i < n; i++)
        if (cuMemPrefetchAsync_v2(managed, 4096, gpu, 0, st) != CUDA_SUCCESS) failures++;
    add(&s, t0, stamp());
    return s;
}

static struct spent launch(CUfunction f, CUdeviceptr d, CUstream st, long n) {
    unsigned value = 1, count = 1;
    void *params[] = {&d, &value, &count};
    struct spent s = {0, 0};
    struct stamp t0 = stamp();
    for (long i = 0; i < n; i++)
        if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, st, params, NULL) != CUDA_SUCCESS) failures++;
    add(&s, t0, stamp());
    return s;
}

#define GRAPH_NODES 16

/* A graph of `nodes` allocation nodes of 4 KiB, each freed by a free node after it. */
static CUgraph memory_graph(int nodes) {
    CUgraph g;
    if (cuGraphCreate(&g, 0) != CUDA_SUCCESS) return NULL;
    for (int i = 0; i < nodes; i++) {
        CUDA_MEM_ALLOC_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        p.poolProps.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        p.poolProps.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        p.poolProps.location.id = 0;
        p.bytesize = 4096;
        CUgraphNode alloc, free_node;
        if (cuGraphAddMemAllocNode(&alloc, g, NULL, 0, &p) != CUDA_SUCCESS ||
            cuGraphAddMemFreeNode(&free_node, g, &alloc, 1, p.dptr) != CUDA_SUCCESS)
            failures++;
    }
    return g;
}

static struct spent graph_launch(CUgraphExec e, CUstream st, long batches) {
    struct spent s = {0, 0};
    for (long b = 0; b < batches; b++) {
        struct stamp t0 = stamp();
        for (int i = 0; i < BATCH; i++)
            if (cuGraphLaunch(e, st) != CUDA_SUCCESS) failures++;
        add(&s, t0, stamp());
        if (cuStreamSynchronize(st) != CUDA_SUCCESS) failures++;
    }
    return s;
}

/* A graph captured on `st`: `nodes` fill_u32 kernels over buf and as many 4-byte copies
 * within it. */
static CUgraph work_graph(CUfunction f, CUdeviceptr buf, CUstream st, int nodes) {
    CUgraph g;
    unsigned value = 1, n = 1;
    void *params[] = {&buf, &value, &n};
    if (cuStreamBeginCapture_v2(st, CU_STREAM_CAPTURE_MODE_RELAXED) != CUDA_SUCCESS) return NULL;
    for (int i = 0; i < nodes; i++)
        if (cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, st, params, NULL) != CUDA_SUCCESS ||
            cuMemcpyDtoDAsync_v2(buf + 8, buf, 4, st) != CUDA_SUCCESS)
            failures++;
    if (cuStreamEndCapture(st, &g) != CUDA_SUCCESS) return NULL;
    return g;
}

__attribute__((noinline)) static struct spent instantiations(CUgraph g, long n) {
    struct spent s = {0, 0};
    for (long i = 0; i < n; i++) {
        CUgraphExec e;
        struct stamp t0 = stamp();
        CUresult r = cuGraphInstantiateWithFlags(&e, g, 0);
        add(&s, t0, stamp());
        if (r != CUDA_SUCCESS || cuGraphExecDestroy(e) != CUDA_SUCCESS) failures++;
    }
    return s;
}

/* The two graphs' instantiations, under their own names for callgrind's --toggle-collect (noipa:
 * never folded into one function). */
__attribute__((noipa)) static struct spent instantiate(CUgraph g, long n) {
    struct spent s = instantiations(g, n);
    __asm__ volatile("" ::: "memory"); /* not a tail call: keeps this frame */
    return s;
}

__attribute__((noipa)) static struct spent instantiate_work(CUgraph g, long n) {
    struct spent s = instantiations(g, n);
    __asm__ volatile("" ::: "memory");
    return s;
}

/* Captures of the work graph, each destroyed after it (noipa, for callgrind). */
__attribute__((noipa)) static struct spent capture_work(CUfunction f, CUdeviceptr buf, CUstream st, long n) {
    struct spent s = {0, 0};
    for (long i = 0; i < n; i++) {
        struct stamp t0 = stamp();
        CUgraph g = work_graph(f, buf, st, GRAPH_NODES);
        add(&s, t0, stamp());
        if (!g || cuGraphDestroy(g) != CUDA_SUCCESS) failures++;
    }
    __asm__ volatile("" ::: "memory");
    return s;
}

__attribute__((noinline)) static long churn(void) {
    long batches = calls / BATCH;
    if (batches < 1) batches = 1;
    long n = batches * BATCH;
    struct spent c = {0, 0}, d = {0, 0}, ignored_c = {0, 0}, ignored_d = {0, 0};

    streams(2, &ignored_c, &ignored_d); /* warm-up: starts the tracer, interns the stack */
    streams(batches, &c, &d);
    report("stream_create", n, c);
    report("stream_destroy", n, d);

    c = d = (struct spent){0, 0};
    events(2, &ignored_c, &ignored_d);
    events(batches, &c, &d);
    report("event_create", n, c);
    report("event_destroy", n, d);

    CUstream st;
    CUevent ev;
    if (cuStreamCreate(&st, 0) || cuEventCreate(&ev, 0)) return 1;
    record_sync(ev, st, 1000);
    report("record_sync", 2 * n, record_sync(ev, st, n));

    CUdeviceptr buf;
    CUmodule mod;
    CUfunction fill;
    if (cuMemAlloc_v2(&buf, 4096) || cuModuleLoadData(&mod, "simcuda kernels") ||
        cuModuleGetFunction(&fill, mod, "fill_u32"))
        return 1;
    copy_async(buf, st, 1000);
    report("copy_async", n, copy_async(buf, st, n));
    CUdeviceptr managed;
    if (cuMemAllocManaged(&managed, 4096, CU_MEM_ATTACH_GLOBAL)) return 1;
    copy_batch(buf, st, 1000);
    report("copy_batch", n, copy_batch(buf, st, n));
    prefetch(managed, st, 1000);
    report("prefetch", n, prefetch(managed, st, n));
    launch(fill, buf, st, 1000);
    report("launch", n, launch(fill, buf, st, n));
    cuStreamSynchronize(st);

    CUgraph one = memory_graph(1), many = memory_graph(GRAPH_NODES);
    CUgraphExec exec;
    if (!one || !many || cuGraphInstantiateWithFlags(&exec, one, 0)) return 1;
    graph_launch(exec, st, 2);
    report("graph_launch", n, graph_launch(exec, st, batches));
    cuGraphExecDestroy(exec);
    /* Instantiation costs the simulator far more than a launch: a tenth as many calls. */
    long m = n / 10 > 0 ? n / 10 : 1;
    instantiate(many, 100);
    report("instantiate", m, instantiate(many, m));
    CUgraph work = work_graph(fill, buf, st, GRAPH_NODES);
    if (!work) return 1;
    instantiate_work(work, 100);
    report("instantiate_work", m, instantiate_work(work, m));
    capture_work(fill, buf, st, 100);
    report("capture_work", m, capture_work(fill, buf, st, m));
    cuGraphDestroy(work);
    cuGraphDestroy(one);
    cuGraphDestroy(many);
    cuModuleUnload(mod);
    cuMemFree_v2(buf);
    cuEventDestroy_v2(ev);
    cuStreamDestroy_v2(st);
    return failures;
}

int main(int argc, char **argv) {
    int frames = (int)arg_long(argc, argv, 1, 25);
    calls = arg_long(argc, argv, 2, calls);
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "object_churn: no simulated device\n");
        return 3;
    }
    long f = descend(levels_for(frames));
    cuDevicePrimaryCtxRelease_v2(dev);
    if (f) {
        fprintf(stderr, "object_churn: %ld failed calls\n", f);
        return 1;
    }
    return 0;
}
