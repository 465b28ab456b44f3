/* sim_util.h: helpers shared by the simulator's self-test clients (sim_*.c).
 *
 * Clients print one fact per line, "key value", and leave every judgement to the Rust test,
 * so a failing test shows the whole story. CHECK is only for set-up steps that must work. */
#ifndef SIM_UTIL_H
#define SIM_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "simcuda.h"

#define CHECK(call)                                                                        \
    do {                                                                                   \
        CUresult check_ = (call);                                                          \
        if (check_ != CUDA_SUCCESS) {                                                      \
            fprintf(stderr, "%s:%d: %s failed with %d\n", __FILE__, __LINE__, #call,      \
                    (int)check_);                                                          \
            exit(3);                                                                       \
        }                                                                                  \
    } while (0)

/* CHECK for a runtime call: prints the call and its cudaError_t, and returns 1 from the
 * calling function (main). */
#define CHECK_RT(call)                                                                     \
    do {                                                                                   \
        cudaError_t check_rt_ = (call);                                                    \
        if (check_rt_ != cudaSuccess) {                                                    \
            fprintf(stderr, "%s:%d: %s -> %d\n", __FILE__, __LINE__, #call, (int)check_rt_); \
            return 1;                                                                      \
        }                                                                                  \
    } while (0)

/* cuInit, then the primary context of device 0 made current. */
static inline CUcontext setup(void) {
    CUdevice dev;
    CUcontext ctx;
    CHECK(cuInit(0));
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
    CHECK(cuCtxSetCurrent(ctx));
    return ctx;
}

/* The simulator's built-in fill_u32 kernel (p[i] = value for i < n). */
static inline CUfunction load_fill(void) {
    CUmodule mod;
    CUfunction fill;
    CHECK(cuModuleLoadData(&mod, "simcuda kernels"));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    return fill;
}

/* The arguments of a fill_u32 kernel node (p[i] = value for i < n), which its parameters
 * point into: they must outlive the node's creation. */
struct fill_args {
    CUdeviceptr p;
    unsigned value, n;
    void *params[3];
};

/* A kernel node's parameters for `fill` (the simulator's fill_u32) over n words of p, in
 * blocks of 256 threads, with its arguments in `a`. */
static inline CUDA_KERNEL_NODE_PARAMS_v2 fill_node(CUfunction fill, struct fill_args *a, CUdeviceptr p,
                                                   unsigned value, unsigned n) {
    CUDA_KERNEL_NODE_PARAMS_v2 k;
    memset(&k, 0, sizeof k);
    a->p = p;
    a->value = value;
    a->n = n;
    a->params[0] = &a->p;
    a->params[1] = &a->value;
    a->params[2] = &a->n;
    k.func = fill;
    k.gridDimX = (n + 255) / 256;
    k.gridDimY = k.gridDimZ = 1;
    k.blockDimX = 256;
    k.blockDimY = k.blockDimZ = 1;
    k.kernelParams = a->params;
    return k;
}

/* A launch of `fill` (fill_u32) on stream s: p[i] = value for i < n, over `words` threads in
 * blocks of 256 (n may be smaller, down to 0, for a launch that touches nothing). */
static inline CUresult launch_fill(CUfunction fill, CUstream s, CUdeviceptr p, unsigned value, unsigned n,
                                   unsigned words) {
    void *params[] = {&p, &value, &n};
    return cuLaunchKernel(fill, (words + 255) / 256, 1, 1, 256, 1, 1, 0, s, params, NULL);
}

/* A stream ordered by the legacy default stream (blocking) or not. */
static inline CUstream stream_of(int blocking) {
    CUstream s;
    CHECK(cuStreamCreate(&s, blocking ? CU_STREAM_DEFAULT : CU_STREAM_NON_BLOCKING));
    return s;
}

/* The read of a race or its twin: `bytes` of p copied into the pinned `out` on stream b, then
 * both streams waited for; returns out's last word (what the kernel on a wrote, when the read
 * came after it). */
static inline unsigned read_after(unsigned *out, CUdeviceptr p, size_t bytes, CUstream a, CUstream b) {
    CHECK(cuMemcpyDtoHAsync_v2(out, p, bytes, b));
    CHECK(cuStreamSynchronize(a));
    CHECK(cuStreamSynchronize(b));
    return out[bytes / sizeof *out - 1];
}

/* A device-to-device copy of `bytes` from src to dst, as a 3D descriptor (a memcpy node's
 * parameters). */
static inline CUDA_MEMCPY3D copy_node(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
    CUDA_MEMCPY3D c;
    memset(&c, 0, sizeof c);
    c.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    c.srcDevice = src;
    c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    c.dstDevice = dst;
    c.WidthInBytes = bytes;
    c.Height = 1;
    c.Depth = 1;
    return c;
}

/* Properties of a pool of pinned memory on device `dev`, shareable through `handles`. */
static inline CUmemPoolProps pool_props(int dev, CUmemAllocationHandleType handles) {
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = handles;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = dev;
    return props;
}

static inline size_t free_bytes(void) {
    size_t free = 0, total = 0;
    CHECK(cuMemGetInfo_v2(&free, &total));
    return free;
}

static inline void put_result(const char *key, CUresult r) { printf("%s %d\n", key, (int)r); }
static inline void put_u64(const char *key, unsigned long long v) { printf("%s %llu\n", key, v); }
static inline void put_ptr(const char *key, unsigned long long v) { printf("%s 0x%llx\n", key, v); }

/* Runs the subcommand named argv[1] from a table of {name, function}. */
struct subcommand {
    const char *name;
    int (*run)(int argc, char **argv);
};

static inline int dispatch(const struct subcommand *cmds, size_t n, int argc, char **argv) {
    for (size_t i = 0; argc > 1 && i < n; i++)
        if (strcmp(argv[1], cmds[i].name) == 0) return cmds[i].run(argc - 1, argv + 1);
    fprintf(stderr, "usage: %s <subcommand>; subcommands:", argv[0]);
    for (size_t i = 0; i < n; i++) fprintf(stderr, " %s", cmds[i].name);
    fprintf(stderr, "\n");
    return 2;
}

#define DISPATCH(cmds) dispatch(cmds, sizeof cmds / sizeof cmds[0], argc, argv)

#endif /* SIM_UTIL_H */
