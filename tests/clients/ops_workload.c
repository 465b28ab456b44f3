// link: driver
// Workloads for the operations tests (issue 7); the first argument picks one. Every
// allocation prints "alloc <api> <result> <ptr> <size>" as the program saw it.
//   steps N MIB        N allocations of MIB MiB each, kept; exit 0 if all succeeded, 1 at
//                      the first failure ("out of memory at step K")
//   calls N            N calls of cuMemAlloc_v2 (4 KiB), each freed when it succeeded
//   hold [extra]       a known live state (site A: 3 x 1 MiB with the middle one freed, plus
//                      2 MiB; site B: 4 MiB; 2 streams, 1 event), prints "ready", then
//                      waits for stdin to close, frees site B and exits; "extra" also tries
//                      one more 1 MiB of device memory and 4 KiB of pinned host memory,
//                      tolerating their failure (budget and fault tests)
//   signal own|none    "own": installs its own SIGUSR2 handler first; one allocation,
//                      "ready", waits for a line on stdin, one more allocation, prints how
//                      often its handler ran
//   period MS          an allocation, MS milliseconds of sleep, another allocation
//   fork MS            an allocation, then a forked child does "period MS"; the parent waits
//                      for it and prints "child <pid>"
//   disposition SIG    an allocation (the shim reads its settings), then prints what signal
//                      SIG (a number or RTMIN+N) does now: "disposition ignored|default|handled"
#include <signal.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "simcuda.h"

static void out(const char *api, CUresult r, unsigned long long p, unsigned long long size) {
    printf("alloc %s %d 0x%llx %llu\n", api, (int)r, p, size);
    fflush(stdout);
}

static CUresult alloc(CUdeviceptr *d, size_t size) {
    *d = 0;
    CUresult r = cuMemAlloc_v2(d, size);
    out("cuMemAlloc_v2", r, r == CUDA_SUCCESS ? *d : 0, size);
    return r;
}

// Two distinct allocation sites for the per-site metrics.
__attribute__((noinline)) static CUresult site_a(CUdeviceptr *d, size_t size) { return alloc(d, size); }
__attribute__((noinline)) static CUresult site_b(CUdeviceptr *d, size_t size) { return alloc(d, size); }

static volatile sig_atomic_t handled;
static void on_usr2(int sig) {
    (void)sig;
    handled++;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

int main(int argc, char **argv) {
    if (argc < 2) return 2;
    const char *mode = argv[1];
    if (strcmp(mode, "signal") == 0 && argc > 2 && strcmp(argv[2], "own") == 0) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_usr2;
        sa.sa_flags = SA_RESTART;
        sigaction(SIGUSR2, &sa, NULL);
    }
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return 3;
    CUdeviceptr d;
    if (strcmp(mode, "steps") == 0 && argc > 3) {
        int n = atoi(argv[2]);
        size_t size = (size_t)atol(argv[3]) << 20;
        for (int i = 1; i <= n; i++) {
            if (alloc(&d, size) != CUDA_SUCCESS) {
                printf("out of memory at step %d\n", i);
                return 1;
            }
        }
        printf("all %d steps done\n", n);
        return 0;
    }
    if (strcmp(mode, "calls") == 0 && argc > 2) {
        int n = atoi(argv[2]);
        for (int i = 1; i <= n; i++) {
            if (alloc(&d, 4096) == CUDA_SUCCESS) cuMemFree_v2(d);
        }
        return 0;
    }
    if (strcmp(mode, "hold") == 0) {
        CUdeviceptr a[3], a2, b;
        for (int i = 0; i < 3; i++)
            if (site_a(&a[i], 1 << 20)) return 4;
        if (cuMemFree_v2(a[1])) return 4;
        if (site_a(&a2, 2 << 20) || site_b(&b, 4 << 20)) return 4;
        CUstream s1, s2;
        CUevent e;
        if (cuStreamCreate(&s1, 0) || cuStreamCreate(&s2, 0) || cuEventCreate(&e, 0)) return 4;
        // Two memory pools, one destroyed: one live.
        CUmemPoolProps props;
        memset(&props, 0, sizeof props);
        props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
        props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        CUmemoryPool p1, p2;
        if (cuMemPoolCreate(&p1, &props) || cuMemPoolCreate(&p2, &props) || cuMemPoolDestroy(p1)) return 4;
        if (argc > 2 && strcmp(argv[2], "extra") == 0) {
            void *h = NULL;
            CUdeviceptr x;
            CUresult r = cuMemAlloc_v2(&x, 1 << 20);
            out("cuMemAlloc_v2", r, r == CUDA_SUCCESS ? x : 0, 1 << 20);
            r = cuMemAllocHost_v2(&h, 4096);
            out("cuMemAllocHost_v2", r, (unsigned long long)(r == CUDA_SUCCESS ? (size_t)h : 0), 4096);
        }
        printf("ready\n");
        fflush(stdout);
        char buf[64];
        while (fgets(buf, sizeof buf, stdin)) {
        }
        cuMemFree_v2(b);
        return 0;
    }
    if (strcmp(mode, "signal") == 0) {
        if (alloc(&d, 4096)) return 4;
        printf("ready\n");
        fflush(stdout);
        char buf[64];
        if (!fgets(buf, sizeof buf, stdin)) return 5;
        if (alloc(&d, 8192)) return 4;
        printf("handler ran %d\n", (int)handled);
        return 0;
    }
    if (strcmp(mode, "fork") == 0 && argc > 2) {
        if (alloc(&d, 4096)) return 4;
        fflush(stdout);
        pid_t child = fork();
        if (child == 0) {
            if (alloc(&d, 4096)) _exit(4);
            sleep_ms(atol(argv[2]));
            if (alloc(&d, 8192)) _exit(4);
            fflush(stdout);
            _exit(0);
        }
        int status = 0;
        waitpid(child, &status, 0);
        printf("child %d\n", (int)child);
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
    }
    if (strcmp(mode, "disposition") == 0 && argc > 2) {
        if (alloc(&d, 4096)) return 4;
        struct sigaction now;
        int sig = strncmp(argv[2], "RTMIN+", 6) == 0 ? SIGRTMIN + atoi(argv[2] + 6) : atoi(argv[2]);
        if (sigaction(sig, NULL, &now) != 0) return 5;
        const char *what = "handled";
        if (!(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_IGN) what = "ignored";
        if (!(now.sa_flags & SA_SIGINFO) && now.sa_handler == SIG_DFL) what = "default";
        printf("disposition %s\n", what);
        return 0;
    }
    if (strcmp(mode, "period") == 0 && argc > 2) {
        if (alloc(&d, 4096)) return 4;
        sleep_ms(atol(argv[2]));
        if (alloc(&d, 8192)) return 4;
        return 0;
    }
    return 2;
}
