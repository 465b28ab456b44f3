// link: cudart-shared
// A memory pool through the runtime (cudaMemPoolCreate, cudaMallocFromPoolAsync,
// cudaMemPoolDestroy), whose driver calls the runtime resolves with cuGetProcAddress. With
// "leak" the pool is never destroyed; with "clean" it is.
#include "sim_util.h"

__attribute__((noinline)) cudaError_t make_runtime_pool(cudaMemPool_t *pool) {
    cudaMemPoolProps props = pool_props(0, CU_MEM_HANDLE_TYPE_NONE);
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
