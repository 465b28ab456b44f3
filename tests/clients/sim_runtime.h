/* sim_runtime.h: the body of sim_runtime_shared.c and sim_runtime_static.c, which run the same
 * runtime-API program linked against the shared and the static simulated runtime. Prints
 * "key value" lines. */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "simcuda.h"

#define BYTES (1 << 20)

static unsigned char in[BYTES], out[BYTES];

int main(void) {
    int version = 0, count = 0, device = -1;
    cudaRuntimeGetVersion(&version);
    printf("runtime_version %d\n", version);
    cudaDriverGetVersion(&version);
    printf("driver_version %d\n", version);
    cudaError_t e = cudaGetDeviceCount(&count);
    printf("device_count %d %d\n", (int)e, count);

    size_t free0 = 0, total = 0, free1 = 0, free2 = 0;
    cudaMemGetInfo(&free0, &total);
    void *d = NULL, *zero = (void *)1;
    printf("malloc %d\n", (int)cudaMalloc(&d, BYTES));
    e = cudaMalloc(&zero, 0);
    printf("malloc_zero %d %d\n", (int)e, zero == NULL);
    cudaMemGetInfo(&free1, &total);
    printf("used %zu\n", free0 - free1);

    for (int i = 0; i < BYTES; i++) in[i] = (unsigned char)(i * 31 + 1);
    cudaError_t up = cudaMemcpy(d, in, BYTES, cudaMemcpyHostToDevice);
    cudaError_t down = cudaMemcpy(out, d, BYTES, cudaMemcpyDeviceToHost);
    printf("roundtrip %d %d %d\n", (int)up, (int)down, !memcmp(in, out, BYTES));
    printf("memset %d\n", (int)cudaMemset(d, 0, BYTES));
    printf("bad_direction %d\n", (int)cudaMemcpy(out, d, 16, (enum cudaMemcpyKind)9));
    cudaError_t last = cudaGetLastError();
    printf("last_error %d then %d\n", (int)last, (int)cudaGetLastError());

    cudaStream_t s;
    void *a = NULL;
    cudaStreamCreate(&s);
    printf("malloc_async %d\n", (int)cudaMallocAsync(&a, 4096, s));
    printf("free_async %d\n", (int)cudaFreeAsync(a, s));
    printf("stream_sync %d\n", (int)cudaStreamSynchronize(s));
    printf("stream_destroy %d\n", (int)cudaStreamDestroy(s));

    printf("free %d\n", (int)cudaFree(d));
    printf("free_again %d\n", (int)cudaFree(d));
    printf("free_null %d\n", (int)cudaFree(NULL));
    cudaMemGetInfo(&free2, &total);
    printf("all_freed %d\n", free2 == free0);

    // The entry point the runtime hands out is the driver's exported cuMemAlloc_v2.
    void *entry = NULL;
    cudaDriverEntryPointQueryResult status = (cudaDriverEntryPointQueryResult)99;
    e = cudaGetDriverEntryPoint("cuMemAlloc", &entry, cudaEnableDefault, &status);
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    printf("entry_point %d %d %d\n", (int)e, (int)status, entry && entry == dlsym(lib, "cuMemAlloc_v2"));
    e = cudaGetDriverEntryPointByVersion("cuMemAllocAsync", &entry, 12000, cudaEnablePerThreadDefaultStream, &status);
    printf("entry_point_ptsz %d %d\n", (int)e, entry && entry == dlsym(lib, "cuMemAllocAsync_ptsz"));
    e = cudaGetDriverEntryPoint("cuNoSuchFunction", &entry, cudaEnableDefault, &status);
    printf("entry_point_unknown %d %d %d\n", (int)e, (int)status, entry == NULL);

    void *leak = NULL;
    cudaMalloc(&leak, 4096);
    cudaDeviceSynchronize();
    printf("device_reset %d\n", (int)cudaDeviceReset());
    cudaMemGetInfo(&free2, &total);
    printf("reset_freed %d\n", free2 == free0);
    printf("malloc_after_reset %d\n", (int)cudaMalloc(&d, 256));
    cudaGetDevice(&device);
    printf("device %d\n", device);
    printf("set_device_out_of_range %d\n", (int)cudaSetDevice(count));
    return 0;
}
