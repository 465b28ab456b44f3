/* The part of a framework's native library that calls cuBLAS (as libtorch_cuda.so does):
 * linked with -lcublas, so its calls go through the PLT, where a preloaded library interposes
 * them. Built as libtorch_blas.so by tests/build.rs; the stand-in torch of
 * tests/python/fake_torch loads it with ctypes. Each function returns cuBLAS's status. */

#include <stddef.h>
#include <stdint.h>

#define EXPORT __attribute__((visibility("default")))

typedef int cublasStatus_t;

cublasStatus_t cublasSetWorkspace_v2(void *handle, void *workspace, size_t workspaceSizeInBytes);
cublasStatus_t cublasLtMatmul(void *lightHandle, void *computeDesc, const void *alpha, const void *A, void *Adesc,
                              const void *B, void *Bdesc, const void *beta, const void *C, void *Cdesc, void *D,
                              void *Ddesc, const void *algo, void *workspace, size_t workspaceSizeInBytes,
                              void *stream);

/* Hands `workspace` to the cuBLAS handle `handle`, as PyTorch does before every cuBLAS call. */
EXPORT int torch_blas_set_workspace(uint64_t handle, uint64_t workspace, uint64_t bytes) {
    return cublasSetWorkspace_v2((void *)(uintptr_t)handle, (void *)(uintptr_t)workspace, (size_t)bytes);
}

/* One cuBLASLt matmul with `workspace` as its workspace argument (no real matrices: the
 * stand-in computes nothing). */
EXPORT int torch_blas_lt_matmul(uint64_t handle, uint64_t workspace, uint64_t bytes) {
    static const float one = 1.0f, zero = 0.0f;
    return cublasLtMatmul((void *)(uintptr_t)handle, NULL, &one, NULL, NULL, NULL, NULL, &zero, NULL, NULL, NULL,
                          NULL, NULL, (void *)(uintptr_t)workspace, (size_t)bytes, NULL);
}
