// link: cublas
/* Calls cuBLAS's two workspace functions directly, linked with -lcublas against the stand-in
 * of tests/libraries (so the shim reaches the library's definitions through RTLD_NEXT): one
 * workspace handed three times, then the same address with another size, a cuBLASLt matmul
 * with a workspace, one without. Prints each status (the stand-in returns what
 * FAKE_CUBLAS_STATUS names). Makes no CUDA call. */

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

int cublasSetWorkspace_v2(void *handle, void *workspace, size_t workspaceSizeInBytes);
int cublasLtMatmul(void *lightHandle, void *computeDesc, const void *alpha, const void *A, void *Adesc, const void *B,
                   void *Bdesc, const void *beta, const void *C, void *Cdesc, void *D, void *Ddesc, const void *algo,
                   void *workspace, size_t workspaceSizeInBytes, void *stream);

static void *at(uintptr_t addr) { return (void *)addr; }

static int lt(void *workspace, size_t bytes) {
    static const float one = 1.0f, zero = 0.0f;
    return cublasLtMatmul(at(0xb1a7), NULL, &one, NULL, NULL, NULL, NULL, &zero, NULL, NULL, NULL, NULL, NULL,
                          workspace, bytes, NULL);
}

int main(void) {
    for (int i = 0; i < 3; i++) {
        printf("set %d\n", cublasSetWorkspace_v2(at(0xb1a5), at(0x7f0000000000), 32u << 20));
    }
    printf("set %d\n", cublasSetWorkspace_v2(at(0xb1a5), at(0x7f0000000000), 16u << 20));
    printf("lt %d\n", lt(at(0x7f0002000000), 1u << 20));
    printf("lt %d\n", lt(NULL, 0));
    return 0;
}
