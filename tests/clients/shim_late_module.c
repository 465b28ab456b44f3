// link: driver
// Starts tracing with a driver call, then loads the runtime with dlopen and allocates
// through it: the runtime's frames belong to a library loaded after tracing began.
#include <dlfcn.h>
#include <stdio.h>
#include "simcuda.h"

int main(void) {
    if (cuInit(0)) return 3;
    void *rt = dlopen("libcudart.so.12", RTLD_NOW | RTLD_LOCAL);
    if (!rt) {
        fprintf(stderr, "%s\n", dlerror());
        return 4;
    }
    cudaError_t (*rt_malloc)(void **, size_t) = (cudaError_t(*)(void **, size_t))dlsym(rt, "cudaMalloc");
    void *p = NULL;
    cudaError_t r = rt_malloc(&p, 4321);
    printf("alloc cudaMalloc %d %p 4321\n", r, p);
    return 0;
}
