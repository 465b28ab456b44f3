/*
 * frames.h: the call-stack shape shared by the benchmark workloads.
 *
 * A workload asks for a total number of frames F at its allocation call site, counted the
 * way an unwinder sees them from the caller of the CUDA (or malloc) function outward:
 *
 *     run_pairs() etc. 1 frame, the loop that makes the calls
 *     churn()          1
 *     descend() x k    k real frames
 *     main()           1
 *     __libc_start_call_main, __libc_start_main, _start   3 (glibc x86-64)
 *
 * so k = F - 6. `bench/run` checks the number against the stack recorded in the trace and
 * prints what it found, since the libc part depends on the C library.
 *
 * The frames must be real: descend() is noinline, and the empty asm after the recursive
 * call makes the result depend on work done after the call, so the compiler can neither
 * turn the call into a jump (sibling call) nor the recursion into a loop (GCC's tail-recursion
 * pass handles `return f(n - 1) + 1` with an accumulator). The workloads are also built with
 * -fno-optimize-sibling-calls -fno-inline as a second line of defence.
 */
#ifndef BENCH_FRAMES_H
#define BENCH_FRAMES_H

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define FIXED_FRAMES 6 /* call site + churn + main + 3 libc start-up frames */

/* Wall clock. */
static inline double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* CPU time of the calling thread: what this thread itself spent, user and kernel, without the
 * time other processes of a busy machine took from it. It also leaves out work a tool hands
 * to another process (heaptrack's interpreter), so the wall clock stays the headline. */
static inline double cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

/* A wall + CPU time stamp. */
struct stamp {
    double wall, cpu;
};

static inline struct stamp stamp(void) {
    struct stamp s = {now_ns(), cpu_ns()};
    return s;
}

/* The workload's innermost frame; defined by each workload. */
__attribute__((noinline)) static long churn(void);

/* `levels` frames of descend(), then churn(). */
__attribute__((noinline)) static long descend(int levels) {
    long r = levels > 1 ? descend(levels - 1) : churn();
    __asm__ volatile("" : "+r"(r) : : "memory");
    return r;
}

/* Levels of descend() needed for `frames` frames at the call site (at least 1). */
static int levels_for(int frames) {
    int k = frames - FIXED_FRAMES;
    return k < 1 ? 1 : k;
}

static long arg_long(int argc, char **argv, int i, long dflt) {
    if (argc <= i) return dflt;
    char *end;
    long v = strtol(argv[i], &end, 10);
    if (*end != '\0' || v < 0) {
        fprintf(stderr, "bad argument %s\n", argv[i]);
        exit(2);
    }
    return v;
}

#endif
