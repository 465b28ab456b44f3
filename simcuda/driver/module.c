/*
 * module.c: modules, libraries, kernels and cuLaunchKernel.
 *
 * An image is accepted when its bytes start with "simcuda"; whatever follows is ignored. Every
 * module and library contains the same two built-in kernels, executed on the host at launch:
 *   fill_u32(unsigned *p, unsigned value, unsigned n)   p[i] = value
 *   add_u32(unsigned *p, unsigned delta, unsigned n)    p[i] += delta
 *   check_u32(const unsigned *p, unsigned value, unsigned n)   assert(p[i] == value)
 * for i < min(n, gridDimX * blockDimX), as a one-dimensional kernel with a bounds check would.
 * check_u32 only reads: a failed assertion is CUDA_ERROR_ASSERT, returned at once (the real
 * driver reports a device-side assertion asynchronously).
 * Parameters arrive either as kernelParams or packed in the `extra` buffer at offsets 0, 8, 12.
 * A launch that would touch memory outside a live allocation returns CUDA_ERROR_ILLEGAL_ADDRESS
 * at once (the real driver reports it asynchronously and makes it sticky). A launch on a
 * capturing stream becomes a kernel node of the graph, which runs it at each graph launch
 * and keeps what the launch gave (function, dimensions, shared memory, parameters, context)
 * for cuGraphKernelNodeGetParams; kernel_node_make checks a kernel node's parameters as a
 * launch's for the graph functions (graphparams.c).
 * cuLaunchKernelEx takes the same launch from a CUlaunchConfig; its attributes are accepted
 * and ignored.
 */
#include <string.h>

#include "internal.h"

enum builtin { K_FILL, K_ADD, K_CHECK, K_COUNT };

static const char *const builtin_names[K_COUNT] = {"fill_u32", "add_u32", "check_u32"};
static const size_t param_offset[3] = {0, 8, 12};
static const size_t param_size[3] = {8, 4, 4};

struct kern;

struct module {
    struct hdr h;
    struct ctx *ctx;
    struct func *funcs[K_COUNT];
};

struct func {
    struct hdr h;
    enum builtin kernel;
    struct ctx *ctx;
    struct module *mod;  /* from cuModuleGetFunction */
    struct kern *kern;   /* from cuKernelGetFunction */
};

struct library {
    struct hdr h;
    struct kern *kerns[K_COUNT];
};

struct kern {
    struct hdr h;
    enum builtin kernel;
    struct library *lib;
};

static bool valid_image(const void *image) {
    return image && strncmp(image, "simcuda", 7) == 0;
}

static int builtin_by_name(const char *name) {
    for (int k = 0; k < K_COUNT; k++)
        if (strcmp(name, builtin_names[k]) == 0) return k;
    return -1;
}

void module_ctx_teardown(struct ctx *c) {
    for (size_t i = 0; i < obj_count(HK_MODULE); i++) {
        struct module *m = obj_at(HK_MODULE, i);
        if (m->ctx == c) m->h.alive = false;
    }
    for (size_t i = 0; i < obj_count(HK_FUNC); i++) {
        struct func *f = obj_at(HK_FUNC, i);
        if (f->ctx == c) f->h.alive = false;
    }
}

static CUresult module_load(CUmodule *out, const void *image) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    if (!out || !image) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_image(image)) return CUDA_ERROR_INVALID_IMAGE;
    struct module *m = obj_new(HK_MODULE, sizeof *m);
    if (!m) return CUDA_ERROR_OUT_OF_MEMORY;
    m->ctx = c;
    *out = (CUmodule)(uintptr_t)H(m);
    return CUDA_SUCCESS;
}

static CUresult module_unload(CUmodule h) {
    struct module *m = obj_get(HK_MODULE, (uint64_t)(uintptr_t)h);
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    m->h.alive = false;
    for (int k = 0; k < K_COUNT; k++)
        if (m->funcs[k]) m->funcs[k]->h.alive = false;
    return CUDA_SUCCESS;
}

static CUresult module_get_function(CUfunction *out, CUmodule h, const char *name) {
    struct module *m = obj_get(HK_MODULE, (uint64_t)(uintptr_t)h);
    if (!m) return CUDA_ERROR_INVALID_HANDLE;
    if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
    int k = builtin_by_name(name);
    if (k < 0) return CUDA_ERROR_NOT_FOUND;
    if (!m->funcs[k]) {
        struct func *f = obj_new(HK_FUNC, sizeof *f);
        if (!f) return CUDA_ERROR_OUT_OF_MEMORY;
        *f = (struct func){.h = f->h, .kernel = (enum builtin)k, .ctx = m->ctx, .mod = m};
        m->funcs[k] = f;
    }
    *out = (CUfunction)(uintptr_t)H(m->funcs[k]);
    return CUDA_SUCCESS;
}

static CUresult library_load(CUlibrary *out, const void *code) {
    if (!out || !code) return CUDA_ERROR_INVALID_VALUE;
    if (!valid_image(code)) return CUDA_ERROR_INVALID_IMAGE;
    struct library *l = obj_new(HK_LIB, sizeof *l);
    if (!l) return CUDA_ERROR_OUT_OF_MEMORY;
    *out = (CUlibrary)(uintptr_t)H(l);
    return CUDA_SUCCESS;
}

static CUresult library_unload(CUlibrary h) {
    struct library *l = obj_get(HK_LIB, (uint64_t)(uintptr_t)h);
    if (!l) return CUDA_ERROR_INVALID_HANDLE;
    l->h.alive = false;
    for (int k = 0; k < K_COUNT; k++)
        if (l->kerns[k]) l->kerns[k]->h.alive = false;
    for (size_t i = 0; i < obj_count(HK_FUNC); i++) {
        struct func *f = obj_at(HK_FUNC, i);
        if (f->kern && f->kern->lib == l) f->h.alive = false;
    }
    return CUDA_SUCCESS;
}

static CUresult library_get_kernel(CUkernel *out, CUlibrary h, const char *name) {
    struct library *l = obj_get(HK_LIB, (uint64_t)(uintptr_t)h);
    if (!l) return CUDA_ERROR_INVALID_HANDLE;
    if (!out || !name) return CUDA_ERROR_INVALID_VALUE;
    int k = builtin_by_name(name);
    if (k < 0) return CUDA_ERROR_NOT_FOUND;
    if (!l->kerns[k]) {
        struct kern *kn = obj_new(HK_KERNEL, sizeof *kn);
        if (!kn) return CUDA_ERROR_OUT_OF_MEMORY;
        kn->kernel = (enum builtin)k;
        kn->lib = l;
        l->kerns[k] = kn;
    }
    *out = (CUkernel)(uintptr_t)H(l->kerns[k]);
    return CUDA_SUCCESS;
}

/* A kernel is context-independent; its function is made once per context. */
static CUresult kernel_get_function(CUfunction *out, CUkernel h) {
    struct ctx *c;
    CUresult r = ctx_current(&c);
    if (r != CUDA_SUCCESS) return r;
    struct kern *kn = obj_get(HK_KERNEL, (uint64_t)(uintptr_t)h);
    if (!kn) return CUDA_ERROR_INVALID_HANDLE;
    if (!out) return CUDA_ERROR_INVALID_VALUE;
    for (size_t i = 0; i < obj_count(HK_FUNC); i++) {
        struct func *f = obj_at(HK_FUNC, i);
        if (f->h.alive && f->kern == kn && f->ctx == c) {
            *out = (CUfunction)(uintptr_t)H(f);
            return CUDA_SUCCESS;
        }
    }
    struct func *f = obj_new(HK_FUNC, sizeof *f);
    if (!f) return CUDA_ERROR_OUT_OF_MEMORY;
    *f = (struct func){.h = f->h, .kernel = kn->kernel, .ctx = c, .kern = kn};
    *out = (CUfunction)(uintptr_t)H(f);
    return CUDA_SUCCESS;
}

/* Accepts a CUfunction, or a CUkernel cast to one (as CUDA 12 allows). */
static int launchable(uint64_t handle, struct ctx **ctx) {
    struct func *f = obj_get(HK_FUNC, handle);
    if (f) {
        *ctx = f->ctx;
        return (int)f->kernel;
    }
    struct kern *kn = obj_get(HK_KERNEL, handle);
    *ctx = NULL;
    return kn ? (int)kn->kernel : -1;
}

/* As the real driver (580.159.04 on an H100, 2026-11-23): cuFuncGetParamInfo takes a
 * CUfunction only and cuKernelGetParamInfo a CUkernel only (either refuses the other with
 * CUDA_ERROR_INVALID_HANDLE), although a launch takes both. */
static CUresult param_info(enum hkind kind, uint64_t handle, size_t index, size_t *offset, size_t *size) {
    if (!obj_get(kind, handle)) return CUDA_ERROR_INVALID_HANDLE;
    if (!offset || index >= 3) return CUDA_ERROR_INVALID_VALUE;
    *offset = param_offset[index];
    if (size) *size = param_size[index];
    return CUDA_SUCCESS;
}

static CUresult name_of(const char **name, uint64_t handle) {
    struct ctx *unused;
    int k = launchable(handle, &unused);
    if (k < 0) return CUDA_ERROR_INVALID_HANDLE;
    if (!name) return CUDA_ERROR_INVALID_VALUE;
    *name = builtin_names[k];
    return CUDA_SUCCESS;
}

struct launch_args {
    CUdeviceptr p;
    unsigned int value;
    unsigned int n;
};

static CUresult unpack_args(void **params, void **extra, struct launch_args *a) {
    if (params && !extra) {
        memcpy(&a->p, params[0], sizeof a->p);
        memcpy(&a->value, params[1], sizeof a->value);
        memcpy(&a->n, params[2], sizeof a->n);
        return CUDA_SUCCESS;
    }
    if (!extra || params) return CUDA_ERROR_INVALID_VALUE;
    const char *buf = NULL;
    size_t size = 0;
    for (size_t i = 0; extra[i] != CU_LAUNCH_PARAM_END; i += 2) {
        if (extra[i] == CU_LAUNCH_PARAM_BUFFER_POINTER)
            buf = extra[i + 1];
        else if (extra[i] == CU_LAUNCH_PARAM_BUFFER_SIZE)
            size = *(size_t *)extra[i + 1];
        else
            return CUDA_ERROR_INVALID_VALUE;
    }
    if (!buf || size < param_offset[2] + param_size[2]) return CUDA_ERROR_INVALID_VALUE;
    memcpy(&a->p, buf + param_offset[0], sizeof a->p);
    memcpy(&a->value, buf + param_offset[1], sizeof a->value);
    memcpy(&a->n, buf + param_offset[2], sizeof a->n);
    return CUDA_SUCCESS;
}

static CUresult run_kernel(enum builtin k, const struct launch_args *a, uint64_t count) {
    if (count == 0) return CUDA_SUCCESS;
    if (a->p % 4 != 0) return CUDA_ERROR_ILLEGAL_ADDRESS;
    size_t n = (size_t)count * 4;
    enum xmode mode = k == K_CHECK ? X_DEV_READ : X_DEV_WRITE;
    bool asserted = false;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t off = 0; off < n;) {
            char *h;
            size_t c;
            if (xlate(a->p + off, n - off, mode, &h, &c) != CUDA_SUCCESS || c % 4 != 0)
                return CUDA_ERROR_ILLEGAL_ADDRESS;
            for (size_t i = 0; pass == 1 && i < c; i += 4) {
                unsigned int v = a->value;
                if (k == K_CHECK) {
                    memcpy(&v, h + i, sizeof v);
                    asserted |= v != a->value;
                    continue;
                }
                if (k == K_ADD) {
                    memcpy(&v, h + i, sizeof v);
                    v += a->value;
                }
                memcpy(h + i, &v, sizeof v);
            }
            off += c;
        }
    }
    return asserted ? CUDA_ERROR_ASSERT : CUDA_SUCCESS;
}

static bool valid_dims(const unsigned int grid[3], const unsigned int block[3]) {
    return grid[0] && grid[1] && grid[2] && block[0] && block[1] && block[2] &&
           (uint64_t)block[0] * block[1] * block[2] <= 1024;
}

static CUresult launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
                       unsigned int bx, unsigned int by, unsigned int bz, unsigned int shmem,
                       CUstream s, void **params, void **extra, bool ptsz) {
    struct ctx *owner;
    int k = launchable((uint64_t)(uintptr_t)f, &owner);
    if (k < 0) return CUDA_ERROR_INVALID_HANDLE;
    const unsigned int grid[3] = {gx, gy, gz}, block[3] = {bx, by, bz};
    if (!valid_dims(grid, block)) return CUDA_ERROR_INVALID_VALUE;
    struct launch_args a;
    CUresult r = unpack_args(params, extra, &a);
    if (r != CUDA_SUCCESS) return r;
    struct sref ref;
    r = stream_ref(s, ptsz, &ref);
    if (r != CUDA_SUCCESS) return r;
    if (owner && owner != ref.ctx) return CUDA_ERROR_INVALID_HANDLE;
    uint64_t threads = (uint64_t)gx * bx;
    if (ref.capturing) {
        struct node n = {.kind = N_KERNEL, .ctx = ref.ctx, .kernel = k,
                         .kparams = {a.p, a.value, a.n}, .func = (uint64_t)(uintptr_t)f,
                         .grid = {gx, gy, gz}, .block = {bx, by, bz}, .shmem = shmem};
        return stream_capture_node(&ref, &n);
    }
    return run_kernel((enum builtin)k, &a, a.n < threads ? a.n : threads);
}

CUresult kernel_run_node(const struct node *n) {
    struct launch_args a = {.p = n->kparams[0], .value = (unsigned int)n->kparams[1],
                            .n = (unsigned int)n->kparams[2]};
    uint64_t threads = (uint64_t)n->grid[0] * n->block[0];
    return run_kernel((enum builtin)n->kernel, &a, a.n < threads ? a.n : threads);
}

/* The function is `func` (a CUfunction, or a CUkernel cast to one) or, when it is NULL, the
 * CUkernel `kern`. A CUfunction runs in its own context, which must be usable; a kernel in
 * `ctx` (with `kern`) or the current context. */
CUresult kernel_node_make(const struct kernel_desc *d, struct node *n) {
    struct ctx *owner = NULL;
    int k;
    if (d->func) {
        k = launchable((uint64_t)(uintptr_t)d->func, &owner);
    } else {
        struct kern *kn = obj_get(HK_KERNEL, (uint64_t)(uintptr_t)d->kern);
        k = kn ? (int)kn->kernel : -1;
    }
    if (k < 0 || !valid_dims(d->grid, d->block)) return CUDA_ERROR_INVALID_VALUE;
    struct launch_args a;
    if (unpack_args(d->params, d->extra, &a) != CUDA_SUCCESS) return CUDA_ERROR_INVALID_VALUE;
    struct ctx *c = owner;
    if (c && !ctx_usable(c)) return CUDA_ERROR_INVALID_VALUE;
    if (!c) {
        CUresult r = ctx_resolve(d->func ? NULL : d->ctx, &c);
        if (r != CUDA_SUCCESS) return r;
    }
    *n = (struct node){.kind = N_KERNEL, .ctx = c, .kernel = k, .kparams = {a.p, a.value, a.n},
                       .func = (uint64_t)(uintptr_t)d->func,
                       .kern = d->func ? 0 : (uint64_t)(uintptr_t)d->kern,
                       .grid = {d->grid[0], d->grid[1], d->grid[2]},
                       .block = {d->block[0], d->block[1], d->block[2]}, .shmem = d->shmem};
    return CUDA_SUCCESS;
}

static CUresult launch_ex(const CUlaunchConfig *c, CUfunction f, void **params, void **extra,
                          bool ptsz) {
    if (!c || (c->numAttrs && !c->attrs)) return CUDA_ERROR_INVALID_VALUE;
    return launch(f, c->gridDimX, c->gridDimY, c->gridDimZ, c->blockDimX, c->blockDimY,
                  c->blockDimZ, c->sharedMemBytes, c->hStream, params, extra, ptsz);
}

SIMCUDA_API CUresult cuModuleLoadData(CUmodule *module, const void *image) {
    API_ENTER();
    API_LOCKED(module_load(module, image));
}

SIMCUDA_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image,
                                        unsigned int numOptions, CUjit_option *options,
                                        void **optionValues) {
    API_ENTER();
    if (numOptions && (!options || !optionValues)) return CUDA_ERROR_INVALID_VALUE;
    API_LOCKED(module_load(module, image));
}

SIMCUDA_API CUresult cuModuleUnload(CUmodule hmod) {
    API_ENTER();
    API_LOCKED(module_unload(hmod));
}

SIMCUDA_API CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name) {
    API_ENTER();
    API_LOCKED(module_get_function(hfunc, hmod, name));
}

SIMCUDA_API CUresult cuModuleGetLoadingMode(CUmoduleLoadingMode *mode) {
    API_ENTER();
    if (!mode) return CUDA_ERROR_INVALID_VALUE;
    *mode = CU_MODULE_LAZY_LOADING;
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuLibraryLoadData(CUlibrary *library, const void *code,
                                       CUjit_option *jitOptions, void **jitOptionsValues,
                                       unsigned int numJitOptions, CUlibraryOption *libraryOptions,
                                       void **libraryOptionValues,
                                       unsigned int numLibraryOptions) {
    API_ENTER();
    if ((numJitOptions && (!jitOptions || !jitOptionsValues)) ||
        (numLibraryOptions && (!libraryOptions || !libraryOptionValues)))
        return CUDA_ERROR_INVALID_VALUE;
    API_LOCKED(library_load(library, code));
}

SIMCUDA_API CUresult cuLibraryUnload(CUlibrary library) {
    API_ENTER();
    API_LOCKED(library_unload(library));
}

SIMCUDA_API CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name) {
    API_ENTER();
    API_LOCKED(library_get_kernel(pKernel, library, name));
}

SIMCUDA_API CUresult cuKernelGetFunction(CUfunction *pFunc, CUkernel kernel) {
    API_ENTER();
    API_LOCKED(kernel_get_function(pFunc, kernel));
}

SIMCUDA_API CUresult cuFuncGetParamInfo(CUfunction func, size_t paramIndex, size_t *paramOffset,
                                        size_t *paramSize) {
    API_ENTER();
    API_LOCKED(param_info(HK_FUNC, (uint64_t)(uintptr_t)func, paramIndex, paramOffset, paramSize));
}

SIMCUDA_API CUresult cuKernelGetParamInfo(CUkernel kernel, size_t paramIndex, size_t *paramOffset,
                                          size_t *paramSize) {
    API_ENTER();
    API_LOCKED(param_info(HK_KERNEL, (uint64_t)(uintptr_t)kernel, paramIndex, paramOffset, paramSize));
}

SIMCUDA_API CUresult cuFuncGetName(const char **name, CUfunction hfunc) {
    API_ENTER();
    API_LOCKED(name_of(name, (uint64_t)(uintptr_t)hfunc));
}

SIMCUDA_API CUresult cuKernelGetName(const char **name, CUkernel hfunc) {
    API_ENTER();
    API_LOCKED(name_of(name, (uint64_t)(uintptr_t)hfunc));
}

SIMCUDA_API CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                    unsigned int gridDimZ, unsigned int blockDimX,
                                    unsigned int blockDimY, unsigned int blockDimZ,
                                    unsigned int sharedMemBytes, CUstream hStream,
                                    void **kernelParams, void **extra) {
    API_ENTER();
    API_LOCKED(launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                      sharedMemBytes, hStream, kernelParams, extra, false));
}

SIMCUDA_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                         unsigned int gridDimY, unsigned int gridDimZ,
                                         unsigned int blockDimX, unsigned int blockDimY,
                                         unsigned int blockDimZ, unsigned int sharedMemBytes,
                                         CUstream hStream, void **kernelParams, void **extra) {
    API_ENTER();
    API_LOCKED(launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                      sharedMemBytes, hStream, kernelParams, extra, true));
}

/* Cooperative launches: the same, without the extra buffer (built-in kernels never sync
 * across the grid, so there is no limit on the grid to check). */
SIMCUDA_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
                                               unsigned int gridDimY, unsigned int gridDimZ,
                                               unsigned int blockDimX, unsigned int blockDimY,
                                               unsigned int blockDimZ, unsigned int sharedMemBytes,
                                               CUstream hStream, void **kernelParams) {
    API_ENTER();
    API_LOCKED(launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                      sharedMemBytes, hStream, kernelParams, NULL, false));
}

SIMCUDA_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
                                                    unsigned int gridDimY, unsigned int gridDimZ,
                                                    unsigned int blockDimX, unsigned int blockDimY,
                                                    unsigned int blockDimZ,
                                                    unsigned int sharedMemBytes, CUstream hStream,
                                                    void **kernelParams) {
    API_ENTER();
    API_LOCKED(launch(f, gridDimX, gridDimY, gridDimZ, blockDimX, blockDimY, blockDimZ,
                      sharedMemBytes, hStream, kernelParams, NULL, true));
}

SIMCUDA_API CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f,
                                      void **kernelParams, void **extra) {
    API_ENTER();
    API_LOCKED(launch_ex(config, f, kernelParams, extra, false));
}

SIMCUDA_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
                                           void **kernelParams, void **extra) {
    API_ENTER();
    API_LOCKED(launch_ex(config, f, kernelParams, extra, true));
}
