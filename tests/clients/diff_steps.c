// link: driver
// Two runs to compare with `gpuleak diff`: `diff_steps base` and `diff_steps extra`, the same
// program but for one more leak site (extra_cache, 5000 bytes) in the extra run. Both take
// snapshot 1 after the first step and snapshot 2 after the second (through the control API):
// - keep_model() leaks 4096 bytes before snapshot 1 (unchanged between the snapshots);
// - grow_history() leaks 2048 bytes per step from one call site (grown: 2048, then 4096);
// - scratch_temp() holds 8192 bytes at snapshot 1 and frees them before snapshot 2 (gone).
#include <string.h>

#include "sim_util.h"
#include "../../shim/include/gpuleak.h"

__attribute__((noinline)) CUdeviceptr keep_model(size_t bytes) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc_v2(&p, bytes));
    return p;
}

__attribute__((noinline)) CUdeviceptr grow_history(size_t bytes) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc_v2(&p, bytes));
    return p;
}

__attribute__((noinline)) CUdeviceptr scratch_temp(size_t bytes) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc_v2(&p, bytes));
    return p;
}

__attribute__((noinline)) CUdeviceptr extra_cache(size_t bytes) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc_v2(&p, bytes));
    return p;
}

int main(int argc, char **argv) {
    int extra = argc > 1 && strcmp(argv[1], "extra") == 0;
    setup();

    printf("model 0x%llx\n", (unsigned long long)keep_model(4096));
    CUdeviceptr temp = scratch_temp(8192);
    // argc keeps the compiler from unrolling the loop into two call sites.
    for (int step = 0; step < argc; step++) {
        printf("history 0x%llx\n", (unsigned long long)grow_history(2048));
        if (step == 0) {
            printf("snapshot %llu\n", (unsigned long long)GPULEAK_SNAPSHOT("step 1"));
            CHECK(cuMemFree_v2(temp));
        }
    }
    if (extra) {
        printf("extra 0x%llx\n", (unsigned long long)extra_cache(5000));
    }
    printf("snapshot %llu\n", (unsigned long long)GPULEAK_SNAPSHOT("step 2"));
    return 0;
}
