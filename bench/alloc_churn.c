/*
 * alloc_churn: N cuMemAlloc_v2 + cuMemFree_v2 pairs of a constant size at a call stack of F
 * frames, timed inside the program (start-up, context creation and a warm-up excluded).
 *
 *     alloc_churn [FRAMES=25] [PAIRS=200000] [SIZE=4096] [SITES=1]
 *
 * SITES=2 to 16 allocates through that many call sites in turn, so that no allocation stack
 * repeats the one before it (the stacks differ in their innermost frames): the unwinder cannot
 * copy the previous capture. It keeps the last captures of eight stacks, so up to eight sites
 * replay their own; more walk, confirming only the shared outer frames.
 *
 * Prints one line: `alloc_churn frames=F pairs=N ns_per_pair=X`.
 */
#include "simcuda.h"
#include "frames.h"

static long pairs = 200000;
static size_t size = 4096;
static long sites = 1;
static const long warmup = 2000;

/* Sixteen call sites; the empty asm after each call keeps it from becoming a tail call. */
#define SITE(name)                                                                                                     \
    __attribute__((noinline)) static CUresult name(CUdeviceptr *d) {                                                  \
        CUresult r = cuMemAlloc_v2(d, size);                                                                           \
        __asm__ volatile("" ::: "memory");                                                                             \
        return r;                                                                                                      \
    }
SITE(alloc_a)
SITE(alloc_b)
SITE(alloc_c)
SITE(alloc_d)
SITE(alloc_e)
SITE(alloc_f)
SITE(alloc_g)
SITE(alloc_h)
SITE(alloc_i)
SITE(alloc_j)
SITE(alloc_k)
SITE(alloc_l)
SITE(alloc_m)
SITE(alloc_n)
SITE(alloc_o)
SITE(alloc_p)

static CUresult alloc_at(long site, CUdeviceptr *d) {
    switch (site) {
    case 0: return alloc_a(d);
    case 1: return alloc_b(d);
    case 2: return alloc_c(d);
    case 3: return alloc_d(d);
    case 4: return alloc_e(d);
    case 5: return alloc_f(d);
    case 6: return alloc_g(d);
    case 7: return alloc_h(d);
    case 8: return alloc_i(d);
    case 9: return alloc_j(d);
    case 10: return alloc_k(d);
    case 11: return alloc_l(d);
    case 12: return alloc_m(d);
    case 13: return alloc_n(d);
    case 14: return alloc_o(d);
    default: return alloc_p(d);
    }
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
    if (sites < 1 || sites > 16) {
        fprintf(stderr, "alloc_churn: SITES must be 1 to 16\n");
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
