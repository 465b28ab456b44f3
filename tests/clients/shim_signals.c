// link: driver
// Signal handlers and CUDA calls. The test makes the simulated driver raise SIGUSR1 inside
// chosen cuMemAlloc_v2 calls (SIMCUDA_FAIL=cuMemAlloc_v2:N:sig10).
//
//   shim_signals longjmp   the handler siglongjmps out of the driver call; then 1,000
//                          allocations of 12,345 bytes. Prints "jumped J".
//   shim_signals nested    the handler allocates and frees 777 bytes (inside the interrupted
//                          call); prints "handled H".
//   shim_signals outside   the same handler, raised by main between calls; prints "handled H".
//   shim_signals getters   one allocation, then "traced" on stderr, then calls whose hooks ask
//                          the driver's getters (stream-ordered allocations and frees, a
//                          capture): run under LD_DEBUG=symbols, no lookup may follow "traced".
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "sim_util.h"

static sigjmp_buf env;
static volatile sig_atomic_t handled;

static void jump(int sig) {
    (void)sig;
    siglongjmp(env, 1);
}

static void allocate(int sig) {
    (void)sig;
    CUdeviceptr p;
    if (cuMemAlloc_v2(&p, 777) == CUDA_SUCCESS) cuMemFree_v2(p);
    handled++;
}

static void alloc_free(size_t bytes) {
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, bytes));
    CHECK(cuMemFree_v2(p));
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "longjmp";
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = strcmp(mode, "longjmp") == 0 ? jump : allocate;
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGUSR1, &sa, NULL)) return 2;
    setup();
    if (strcmp(mode, "getters") == 0) {
        alloc_free(4096);
        fputs("traced\n", stderr);
        CUstream s;
        CUdeviceptr p;
        CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
        CHECK(cuMemAllocAsync(&p, 4096, s));
        CHECK(cuMemFreeAsync(p, s));
        CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL));
        CHECK(cuMemAllocAsync(&p, 4096, s));
        CHECK(cuMemFreeAsync(p, s));
        CUgraph g;
        CHECK(cuStreamEndCapture(s, &g));
        CUgraphExec e;
        CHECK(cuGraphInstantiateWithFlags(&e, g, 0));
        CHECK(cuGraphLaunch(e, s));
        CHECK(cuStreamSynchronize(s));
        CHECK(cuGraphExecDestroy(e));
        CHECK(cuGraphDestroy(g));
        CHECK(cuStreamDestroy(s));
        fputs("done\n", stderr);
        return 0;
    }
    if (strcmp(mode, "longjmp") == 0) {
        volatile int jumped = 0;
        for (volatile int i = 0; i < 20; i++) {
            if (sigsetjmp(env, 1) == 0) alloc_free(4096);
            else jumped++;
        }
        for (int i = 0; i < 1000; i++) alloc_free(12345);
        printf("jumped %d\n", jumped);
    } else {
        for (int i = 0; i < 20; i++) {
            alloc_free(4096);
            if (strcmp(mode, "outside") == 0 && i % 5 == 0) raise(SIGUSR1);
        }
        printf("handled %d\n", (int)handled);
    }
    return 0;
}
