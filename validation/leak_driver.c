// link: driver
// The C workload of scripts/validate-gpu: driver-API calls only, built on the development
// machine with gcc against simcuda/include/simcuda.h (whose declarations follow the public CUDA
// driver API) and the tests' sim_util.h, linked to libcuda.so.1 by name, so it runs on the
// simulator and on a real driver.
//
// Leaks MIB allocations of 1 MiB (argv[1], default 10), creates a stream it never destroys,
// and queues an asynchronous copy on it that it never waits for (unsynchronized at exit).
// Prints "leaked_bytes N".
#include "sim_util.h" /* CHECK and setup(): tests/clients/sim_util.h */

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 10;
    setup();
    for (int i = 0; i < n; i++) {
        CUdeviceptr d;
        CHECK(cuMemAlloc_v2(&d, 1 << 20));
    }
    CUdeviceptr kept, freed;
    CHECK(cuMemAlloc_v2(&freed, 4096));
    CHECK(cuMemFree_v2(freed));
    CHECK(cuMemAlloc_v2(&kept, 4096));
    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    static unsigned char host[4096];
    CHECK(cuMemcpyHtoDAsync_v2(kept, host, sizeof host, s));
    printf("leaked_bytes %llu\n", (unsigned long long)n * (1 << 20) + 4096);
    return 0;
}
