// link: cudart-shared
// A memory pool through the runtime (cudaMemPoolCreate, cudaMallocFromPoolAsync,
// cudaMemPoolDestroy), whose driver calls the runtime resolves with cuGetProcAddress. With
// "leak" the pool is never destroyed; with "clean" it is.
#include <stdio.h>
#include <string.h>
#include "simcuda.h"

#define CHECK_RT(call)                                                        \
    do {                                                                      \
        cudaError_t e_ = (call);                                              \
        if (e_ != cudaSuccess) {                                              \
            fprintf(stderr, "%s:%d: %s -> %d\n", __FILE__, __LINE__, #call, (int)e_); \
            return 1;                                                         \
        }                                                                     \
    } while (0)

__attribute__((noinline)) cudaError_t make_runtime_pool(cudaMemPool_t *pool) {
    cudaMemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = 0;
    return cudaMemPoolCreate(pool, &props);
}

int main(int argc, char **argv) {
    int leak = argc > 1 && strcmp(argv[1], "leak") == 0;
    cudaMemPool_t pool;
    CHECK_RT(make_runtime_pool(&pool));
    void *p = NULL;
    CHECK_RT(cudaMallocFromPoolAsync(&p, 1 << 20, pool, cudaStreamPerThread));
    CHECK_RT(cudaFreeAsync(p, cudaStreamPerThread));
    CHECK_RT(cudaStreamSynchronize(cudaStreamPerThread));
    if (!leak) CHECK_RT(cudaMemPoolDestroy(pool));
    puts("done");
    return 0;
}
