/* A stand-in for cuBLAS and cuBLASLt (built as libcublas.so.13 by tests/build.rs): the two
 * functions through which a program hands the library a workspace, with cuBLAS's documented
 * signatures. Each returns the status that FAKE_CUBLAS_STATUS names (0, success, by default)
 * and does nothing else. */

#include <stddef.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))

typedef int cublasStatus_t;

static cublasStatus_t chosen_status(void) {
    const char *s = getenv("FAKE_CUBLAS_STATUS");
    return s ? atoi(s) : 0;
}

EXPORT cublasStatus_t cublasSetWorkspace_v2(void *handle, void *workspace, size_t workspaceSizeInBytes) {
    (void)handle;
    (void)workspace;
    (void)workspaceSizeInBytes;
    return chosen_status();
}

EXPORT cublasStatus_t cublasLtMatmul(void *lightHandle, void *computeDesc, const void *alpha, const void *A,
                                     void *Adesc, const void *B, void *Bdesc, const void *beta, const void *C,
                                     void *Cdesc, void *D, void *Ddesc, const void *algo, void *workspace,
                                     size_t workspaceSizeInBytes, void *stream) {
    (void)lightHandle;
    (void)computeDesc;
    (void)alpha;
    (void)A;
    (void)Adesc;
    (void)B;
    (void)Bdesc;
    (void)beta;
    (void)C;
    (void)Cdesc;
    (void)D;
    (void)Ddesc;
    (void)algo;
    (void)workspace;
    (void)workspaceSizeInBytes;
    (void)stream;
    return chosen_status();
}
