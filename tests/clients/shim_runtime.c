// link: cudart-shared
// The runtime API, linked against the shared runtime (shim_runtime_static.c links the same
// code statically). Prints "alloc|free <runtime call> <result> <ptr> <size>"; leaks 555 bytes.
#include <stdio.h>
#include "simcuda.h"

int main(void) {
    void *d = NULL, *h = NULL, *m = NULL, *a = NULL, *p = NULL, *leak = NULL;
    size_t pitch = 0;
    cudaError_t r;
    cudaStream_t s;
    r = cudaMalloc(&d, 1 << 20); printf("alloc cudaMalloc %d %p %d\n", r, d, 1 << 20);
    r = cudaMallocHost(&h, 4096); printf("alloc cudaMallocHost %d %p 4096\n", r, h);
    r = cudaMallocManaged(&m, 8192, 1); printf("alloc cudaMallocManaged %d %p 8192\n", r, m);
    r = cudaMallocPitch(&p, &pitch, 100, 10); printf("alloc cudaMallocPitch %d %p 1000\n", r, p);
    if (cudaStreamCreate(&s)) return 3;
    r = cudaMallocAsync(&a, 2048, s); printf("alloc cudaMallocAsync %d %p 2048\n", r, a);
    r = cudaFreeAsync(a, s); printf("free cudaFreeAsync %d %p 0\n", r, a);
    cudaStreamSynchronize(s);
    cudaStreamDestroy(s);
    cudaIpcMemHandle_t ih; void *o = NULL; /* opened by value: the handle's 64 bytes pass through the shim's tag */
    if (cudaIpcGetMemHandle(&ih, d)) return 3;
    r = cudaIpcOpenMemHandle(&o, ih, cudaIpcMemLazyEnablePeerAccess); printf("alloc cudaIpcOpenMemHandle %d %p %d\n", r, o, 1 << 20);
    r = cudaIpcCloseMemHandle(o); printf("free cudaIpcCloseMemHandle %d %p 0\n", r, o);
    r = cudaFree(d); printf("free cudaFree %d %p 0\n", r, d);
    r = cudaFreeHost(h); printf("free cudaFreeHost %d %p 0\n", r, h);
    r = cudaFree(m); printf("free cudaFree %d %p 0\n", r, m);
    r = cudaFree(p); printf("free cudaFree %d %p 0\n", r, p);
    r = cudaMalloc(&leak, 555); printf("alloc cudaMalloc %d %p 555\n", r, leak);
    return 0;
}
