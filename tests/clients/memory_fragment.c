// link: driver
// Fragmentation on a 64 MiB simulated device (run with SIMCUDA_MEM_BYTES=64MiB), picked by
// the first argument; each fills the device with 1 MiB blocks from two sites, load_weights
// (kept) and scratch (freed), then asks for 4 MiB:
//   interleaved  weights and scratch alternate, so freeing the scratch leaves 1 MiB holes
//                pinned by the weights: the 4 MiB request fails with half the device free
//                (fragmentation, pinned by load_weights);
//   grouped      the weights first, then the scratch: the free memory is one range and the
//                request succeeds (nothing to find);
//   full         every block kept: the request fails because the device is full (an
//                out-of-memory that is not fragmentation).
// Prints "big N" with the request's result.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_util.h"

#define MIB (1u << 20)
#define BLOCKS 64

__attribute__((noinline)) static CUdeviceptr load_weights(void) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc_v2(&p, MIB));
    return p;
}

__attribute__((noinline)) static CUdeviceptr scratch(void) {
    CUdeviceptr p = 0;
    CHECK(cuMemAlloc_v2(&p, MIB));
    return p;
}

__attribute__((noinline)) static CUresult big_batch(CUdeviceptr *p) {
    return cuMemAlloc_v2(p, 4 * MIB);
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "interleaved";
    setup();
    CUdeviceptr weights[BLOCKS], temps[BLOCKS];
    int nw = 0, nt = 0;
    for (int i = 0; i < BLOCKS; i++) {
        int weight;
        if (strcmp(mode, "grouped") == 0) {
            weight = i < BLOCKS / 2;
        } else if (strcmp(mode, "full") == 0) {
            weight = 1;
        } else {
            weight = i % 2 == 0;
        }
        if (weight) {
            weights[nw++] = load_weights();
        } else {
            temps[nt++] = scratch();
        }
    }
    for (int i = 0; i < nt; i++) {
        CHECK(cuMemFree_v2(temps[i]));
    }
    CUdeviceptr big = 0;
    CUresult rc = big_batch(&big);
    printf("big %d\n", (int)rc);
    if (rc == CUDA_SUCCESS) {
        CHECK(cuMemFree_v2(big));
    }
    for (int i = 0; i < nw; i++) {
        CHECK(cuMemFree_v2(weights[i]));
    }
    return 0;
}
