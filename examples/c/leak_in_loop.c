// One bug: a scratch buffer allocated on every training step and never freed.
// Built against the simulated runtime by scripts/demo (or against a real libcudart with
// -I<cuda>/include -lcudart, after replacing the include below with <cuda_runtime.h>).
#include <stdio.h>
#include "simcuda.h"

#define STEPS 5

static int train_step(int step, float *weights) {
    void *scratch = NULL;
    if (cudaMalloc(&scratch, 1 << 20) != cudaSuccess) return 1; /* BUG: never freed */
    if (cudaMemset(scratch, 0, 1 << 20) != cudaSuccess) return 1;
    return cudaMemset(weights, step, 4096) != cudaSuccess;
}

int main(void) {
    float *weights = NULL;
    if (cudaMalloc((void **)&weights, 4096) != cudaSuccess) return 1;
    for (int step = 0; step < STEPS; step++) {
        if (train_step(step, weights)) return 1;
    }
    cudaFree(weights);
    printf("trained %d steps\n", STEPS);
    return 0;
}
