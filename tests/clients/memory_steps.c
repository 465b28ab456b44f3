// link: driver
// Three training loops on the simulated driver, picked by the first argument, for the memory
// analysis (tests/e2e/memory.rs); every one frees everything before it exits:
//   staircase  each step keeps one more 1 MiB history buffer (freed only at teardown): growth;
//   plateau    the first 5 steps fill a 1 MiB-per-step cache, then it stays the same size:
//              warm-up, not growth;
//   steady     each step allocates and frees its scratch buffers: nothing to find.
// Every step also allocates and frees a 64 KiB scratch buffer (churn the floor must ignore).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_util.h"

#define STEPS 40
#define MIB (1u << 20)

static CUdeviceptr kept[STEPS];
static int nkept;

__attribute__((noinline)) static void keep_history(void) {
    CHECK(cuMemAlloc_v2(&kept[nkept++], MIB));
}

__attribute__((noinline)) static void fill_cache(void) {
    CHECK(cuMemAlloc_v2(&kept[nkept++], MIB));
}

__attribute__((noinline)) static void scratch(void) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc_v2(&p, 64 * 1024));
    CHECK(cuMemsetD8_v2(p, 0, 64 * 1024));
    CHECK(cuMemFree_v2(p));
}

__attribute__((noinline)) static void teardown(void) {
    for (int i = 0; i < nkept; i++) {
        CHECK(cuMemFree_v2(kept[i]));
    }
    nkept = 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "steady";
    setup();
    for (int step = 0; step < STEPS; step++) {
        scratch();
        if (strcmp(mode, "staircase") == 0) {
            keep_history();
        } else if (strcmp(mode, "plateau") == 0 && step < 5) {
            fill_cache();
        }
        scratch();
    }
    teardown();
    printf("%s done\n", mode);
    return 0;
}
