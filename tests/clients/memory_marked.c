// link: driver
// A training loop that marks its steps and takes two snapshots through the control API
// (shim/include/gpuleak.h), for the memory analysis: the first argument picks
//   leak     each step keeps one more 1 MiB buffer (freed at the end): growth, in marked steps;
//   plateau  the first 4 steps fill a cache, then it stays the same size: no growth.
// Every step also allocates and frees a varying number of scratch buffers, so the steps are
// not the timeline's buckets. Snapshots after steps 10 and 30 ("early", "late").
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_util.h"
#include "../../shim/include/gpuleak.h"

#define STEPS 40
#define MIB (1u << 20)

static CUdeviceptr kept[STEPS];
static int nkept;

__attribute__((noinline)) static void keep(void) {
    CHECK(cuMemAlloc_v2(&kept[nkept++], MIB));
}

__attribute__((noinline)) static void scratch(int n) {
    for (int i = 0; i < n; i++) {
        CUdeviceptr p = 0;
        CHECK(cuMemAlloc_v2(&p, 4096));
        CHECK(cuMemFree_v2(p));
    }
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "leak";
    setup();
    printf("api %s\n", gpuleak_mark ? "present" : "absent");
    for (int step = 0; step < STEPS; step++) {
        GPULEAK_MARK("step", (uint64_t)step);
        scratch(1 + step % 7);
        if (strcmp(mode, "leak") == 0 || step < 4) {
            keep();
        }
        if (step == 10 || step == 30) {
            printf("snapshot %llu\n", (unsigned long long)GPULEAK_SNAPSHOT(step == 10 ? "early" : "late"));
        }
    }
    for (int i = 0; i < nkept; i++) {
        CHECK(cuMemFree_v2(kept[i]));
    }
    return 0;
}
