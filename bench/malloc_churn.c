/*
 * malloc_churn: the host-memory analogue of alloc_churn for heaptrack: N malloc + free pairs
 * of a constant size at a call stack of F frames, timed the same way.
 *
 *     malloc_churn [FRAMES=25] [PAIRS=200000] [SIZE=4096]
 *
 * Prints one line: `malloc_churn pairs=N ns_per_pair=X cpu_ns_per_pair=Y`.
 */
#include "frames.h"

static long pairs = 200000;
static size_t size = 4096;
static const long warmup = 2000;

static long run_pairs(long n) {
    long failures = 0;
    for (long i = 0; i < n; i++) {
        void *p = malloc(size);
        /* The pointer escapes, so the compiler cannot drop the malloc/free pair. */
        __asm__ volatile("" : : "r"(p) : "memory");
        if (!p) failures++;
        free(p);
    }
    return failures;
}

__attribute__((noinline)) static long churn(void) {
    long failures = run_pairs(warmup);
    struct stamp t0 = stamp();
    failures += run_pairs(pairs);
    struct stamp t1 = stamp();
    printf("malloc_churn pairs=%ld ns_per_pair=%.1f cpu_ns_per_pair=%.1f\n", pairs, (t1.wall - t0.wall) / (double)pairs,
           (t1.cpu - t0.cpu) / (double)pairs);
    return failures;
}

int main(int argc, char **argv) {
    int frames = (int)arg_long(argc, argv, 1, 25);
    pairs = arg_long(argc, argv, 2, pairs);
    size = (size_t)arg_long(argc, argv, 3, (long)size);
    long failures = descend(levels_for(frames));
    if (failures) {
        fprintf(stderr, "malloc_churn: %ld failed calls\n", failures);
        return 1;
    }
    return 0;
}
