/*
 * alloc_churn: N cuMemAlloc_v2 + cuMemFree_v2 pairs of a constant size at a call stack of F
 * frames, timed inside the program (start-up, context creation and a warm-up excluded).
 *
 *     alloc_churn [FRAMES=25] [PAIRS=200000] [SIZE=4096] [SITES=1]
 *
 * SITES=2 to 64 allocates through that many call sites in turn, so that no allocation stack
 * repeats the one before it (the stacks differ in their innermost frames): the unwinder cannot
 * copy the previous capture. It keeps the last captures of 32 stacks, so up to 32 sites replay
 * their own; with more, the sites whose memo was replaced walk, confirming only the shared outer
 * frames.
 *
 * Prints one line: `alloc_churn frames=F pairs=N ns_per_pair=X`.
 */
#include "simcuda.h"
#include "frames.h"

static long pairs = 200000;
static size_t size = 4096;
static long sites = 1;
static const long warmup = 2000;

/* One call site; the empty asm after the call keeps it from becoming a tail call. */
#define SITE(name)                                                                                                     \
    __attribute__((noinline)) static CUresult name(CUdeviceptr *d) {                                                  \
        CUresult r = cuMemAlloc_v2(d, size);                                                                           \
        __asm__ volatile("" ::: "memory");                                                                             \
        return r;                                                                                                      \
    }
/* SITE4 and SITE16 stamp out 4 and 16 sites; 64 in all, called through a table. */
#define SITE4(p) SITE(p##0) SITE(p##1) SITE(p##2) SITE(p##3)
#define SITE16(p) SITE4(p##0) SITE4(p##1) SITE4(p##2) SITE4(p##3)
SITE16(alloc_a)
SITE16(alloc_b)
SITE16(alloc_c)
SITE16(alloc_d)

#define REF4(p) p##0, p##1, p##2, p##3
#define REF16(p) REF4(p##0), REF4(p##1), REF4(p##2), REF4(p##3)
static CUresult (*const site_fns[])(CUdeviceptr *) = {REF16(alloc_a), REF16(alloc_b), REF16(alloc_c), REF16(alloc_d)};
#define MAX_SITES ((long)(sizeof site_fns / sizeof site_fns[0]))

/* An indirect call: every site is reached from the same caller frame, as through a switch. */
__attribute__((noinline)) static CUresult alloc_at(long site, CUdeviceptr *d) {
    CUresult r = site_fns[site](d);
    __asm__ volatile("" ::: "memory");
    return r;
}

static long run_pairs(long n) {
    long failures = 0;
    for (long i = 0; i < n; i++) {
        CUdeviceptr d;
        CUresult r = sites > 1 ? alloc_at(i % sites, &d) : cuMemAlloc_v2(&d, size);
        if (r != CUDA_SUCCESS) failures++;
        else if (cuMemFree_v2(d) != CUDA_SUCCESS) failures++;
    }
    return failures;
}

__attribute__((noinline)) static long churn(void) {
    /* The warm-up starts the tracer (trace file, module list, unwinder caches) and makes the
     * stack known; what follows is the steady state. */
    long failures = run_pairs(warmup);
    struct stamp t0 = stamp();
    failures += run_pairs(pairs);
    struct stamp t1 = stamp();
    printf("alloc_churn pairs=%ld ns_per_pair=%.1f cpu_ns_per_pair=%.1f\n", pairs, (t1.wall - t0.wall) / (double)pairs,
           (t1.cpu - t0.cpu) / (double)pairs);
    return failures;
}

int main(int argc, char **argv) {
    int frames = (int)arg_long(argc, argv, 1, 25);
    pairs = arg_long(argc, argv, 2, pairs);
    size = (size_t)arg_long(argc, argv, 3, (long)size);
    sites = arg_long(argc, argv, 4, sites);
    if (sites < 1 || sites > MAX_SITES) {
        fprintf(stderr, "alloc_churn: SITES must be 1 to %ld\n", MAX_SITES);
        return 2;
    }
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) {
        fprintf(stderr, "alloc_churn: no simulated device\n");
        return 3;
    }
    long failures = descend(levels_for(frames));
    cuDevicePrimaryCtxRelease_v2(dev);
    if (failures) {
        fprintf(stderr, "alloc_churn: %ld failed calls\n", failures);
        return 1;
    }
    return 0;
}
