// link: driver
// Granted versus requested bytes, picked by the first argument: 64 live cuMemAlloc_v2
// allocations from one site, then all freed:
//   odd   1000 bytes each: the driver rounds each up to 256 bytes (1024 granted, 64,000 asked
//         for, 65,536 granted);
//   even  1024 bytes each: granted = asked for.
// Prints "gap N": the distance between two consecutive allocations, which on the simulator's
// first-fit heap is what it granted the first.
#include <stdio.h>
#include <string.h>

#include "sim_util.h"

#define COUNT 64

__attribute__((noinline)) static CUdeviceptr buffers(size_t size) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc_v2(&p, size));
    return p;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "odd";
    size_t size = strcmp(mode, "even") == 0 ? 1024 : 1000;
    setup();
    CUdeviceptr p[COUNT];
    for (int i = 0; i < COUNT; i++) p[i] = buffers(size);
    printf("gap %llu\n", (unsigned long long)(p[1] - p[0]));
    for (int i = 0; i < COUNT; i++) CHECK(cuMemFree_v2(p[i]));
    return 0;
}
