// link: driver
// A long run for a bounded trace: THREADS threads (argv[1], default 4) x STEPS steps (argv[2],
// default 20000). Each step allocates, launches a kernel, records and synchronizes an event
// and frees: a steady stream of records that fills segment after segment. Main leaks one
// allocation before the threads start (leak_first, 7777 bytes) and one after they end
// (leak_last, 8888 bytes), and creates a stream and an event it never destroys; each thread keeps one allocation of 4096 bytes every STEPS / 8
// steps (keep_step: a staircase) and frees every second one of them at the end, so that
// allocations made early in the run stay live across rotations and some are freed late.
// With a third argument "fork", thread 0 forks in the middle of its steps; the child allocates
// and leaks 5555 bytes, frees one allocation it made before exiting, and _exits.
// Prints "done FAILURES" at the end.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include "sim_util.h"

static CUcontext ctx;
static CUfunction fill;
static long steps = 20000;
static int do_fork;

static __attribute__((noinline)) CUdeviceptr leak_first(void) {
    CUdeviceptr d = 0;
    cuMemAlloc_v2(&d, 7777);
    return d;
}

static __attribute__((noinline)) CUdeviceptr leak_last(void) {
    CUdeviceptr d = 0;
    cuMemAlloc_v2(&d, 8888);
    return d;
}

static __attribute__((noinline)) CUdeviceptr keep_step(void) {
    CUdeviceptr d = 0;
    cuMemAlloc_v2(&d, 4096);
    return d;
}

static __attribute__((noinline)) CUdeviceptr in_child(size_t size) {
    CUdeviceptr d = 0;
    cuMemAlloc_v2(&d, size);
    return d;
}

static void *worker(void *arg) {
    long id = (long)arg;
    cuCtxSetCurrent(ctx);
    CUstream s;
    CUevent e;
    long failures = 0;
    if (cuStreamCreate(&s, 0) || cuEventCreate(&e, 0)) return (void *)1;
    CUdeviceptr kept[16];
    int nkept = 0;
    long every = steps / 8 > 0 ? steps / 8 : 1;
    for (long i = 0; i < steps; i++) {
        CUdeviceptr d;
        if (cuMemAlloc_v2(&d, 256 + (size_t)((id * 7 + i) % 16) * 256) != CUDA_SUCCESS) {
            failures++;
            continue;
        }
        unsigned value = (unsigned)i, n = 64;
        void *params[] = {&d, &value, &n};
        if (cuLaunchKernel(fill, 1, 1, 1, 64, 1, 1, 0, s, params, NULL)) failures++;
        if (cuEventRecord(e, s) || cuEventSynchronize(e)) failures++;
        if (cuMemFree_v2(d)) failures++;
        if (i % every == 0 && nkept < 16) kept[nkept++] = keep_step();
        if (do_fork && id == 0 && i == steps / 2) {
            fflush(stdout);
            pid_t c = fork();
            if (c == 0) {
                CUdeviceptr a = in_child(5555), b = in_child(6666);
                (void)a;
                cuMemFree_v2(b);
                _exit(0);
            }
            int st;
            waitpid(c, &st, 0);
            printf("child %d\n", (int)c);
        }
    }
    for (int k = 0; k < nkept; k += 2) cuMemFree_v2(kept[k]);
    cuEventDestroy(e);
    cuStreamDestroy(s);
    return (void *)failures;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    if (argc > 2) steps = atol(argv[2]);
    do_fork = argc > 3 && strcmp(argv[3], "fork") == 0;
    if (threads < 1 || threads > 64) return 2;
    ctx = setup();
    fill = load_fill();
    leak_first();
    /* Live objects from the start to the end: a stream and an event never destroyed. */
    CUstream kept_stream;
    CUevent kept_event;
    if (cuStreamCreate(&kept_stream, 0) || cuEventCreate(&kept_event, 0)) return 3;
    pthread_t t[64];
    for (long i = 0; i < threads; i++) pthread_create(&t[i], NULL, worker, (void *)i);
    long failures = 0;
    for (int i = 0; i < threads; i++) {
        void *f;
        pthread_join(t[i], &f);
        failures += (long)f;
    }
    leak_last();
    printf("done %ld\n", failures);
    return 0;
}
