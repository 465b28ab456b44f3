// link: driver
// Modules, libraries and the built-in kernels fill_u32 / add_u32 / check_u32, launched with kernelParams,
// with the `extra` buffer, and as a CUkernel.
#include <stdint.h>

#include "sim_util.h"

#define COUNT 1000

static unsigned int read_at(CUdeviceptr p, unsigned int i) {
    unsigned int v;
    CHECK(cuMemcpyDtoH_v2(&v, p + 4ull * i, sizeof v));
    return v;
}

static int modules(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUmodule mod, bad;
    CUfunction fill, add, missing;
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, 4 * COUNT));
    CHECK(cuMemsetD32_v2(p, 0, COUNT));
    put_result("load_bad_image", cuModuleLoadData(&bad, "not an image"));
    CHECK(cuModuleLoadData(&mod, "simcuda module"));
    CHECK(cuModuleGetFunction(&fill, mod, "fill_u32"));
    CHECK(cuModuleGetFunction(&add, mod, "add_u32"));
    put_result("missing_function", cuModuleGetFunction(&missing, mod, "nope"));
    const char *name = NULL;
    CHECK(cuFuncGetName(&name, add));
    printf("name %s\n", name);
    size_t offset = 0, size = 0;
    for (size_t i = 0; i < 3; i++) {
        CHECK(cuFuncGetParamInfo(fill, i, &offset, &size));
        printf("param %zu %zu %zu\n", i, offset, size);
    }
    put_result("param_out_of_range", cuFuncGetParamInfo(fill, 3, &offset, &size));
    CUmoduleLoadingMode mode;
    CHECK(cuModuleGetLoadingMode(&mode));
    put_u64("loading_mode", mode);

    // 4 blocks of 128 threads cover 512 of the 1000 elements.
    unsigned int value = 7, n = COUNT;
    void *params[] = {&p, &value, &n};
    put_result("launch_fill", cuLaunchKernel(fill, 4, 1, 1, 128, 1, 1, 0, NULL, params, NULL));
    printf("fill %u %u %u\n", read_at(p, 0), read_at(p, 511), read_at(p, 512));

    // add_u32 through the extra buffer, on the per-thread stream, over all elements.
    unsigned char buf[16];
    unsigned int delta = 5;
    memcpy(buf, &p, 8);
    memcpy(buf + 8, &delta, 4);
    memcpy(buf + 12, &n, 4);
    size_t buf_size = sizeof buf;
    void *extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, buf, CU_LAUNCH_PARAM_BUFFER_SIZE, &buf_size,
                     CU_LAUNCH_PARAM_END};
    put_result("launch_add", cuLaunchKernel_ptsz(add, 8, 1, 1, 128, 1, 1, 0, CU_STREAM_PER_THREAD,
                                                 NULL, extra));
    printf("add %u %u %u\n", read_at(p, 0), read_at(p, 511), read_at(p, 999));

    // check_u32 only reads: it passes over the first 512 elements (12), asserts over all 1000.
    CUfunction check;
    CHECK(cuModuleGetFunction(&check, mod, "check_u32"));
    unsigned int expected = 12;
    void *check_params[] = {&p, &expected, &n};
    put_result("launch_check_holds", cuLaunchKernel(check, 4, 1, 1, 128, 1, 1, 0, NULL, check_params, NULL));
    put_result("launch_check_fails", cuLaunchKernel(check, 8, 1, 1, 128, 1, 1, 0, NULL, check_params, NULL));
    printf("check_wrote_nothing %u %u %u\n", read_at(p, 0), read_at(p, 511), read_at(p, 999));

    unsigned int too_many = COUNT + 1;
    void *oob[] = {&p, &value, &too_many};
    put_result("launch_out_of_bounds", cuLaunchKernel(fill, 8, 1, 1, 128, 1, 1, 0, NULL, oob, NULL));
    printf("out_of_bounds_wrote_nothing %d\n", read_at(p, 0) == 12);
    put_result("launch_too_many_threads", cuLaunchKernel(fill, 1, 1, 1, 2048, 1, 1, 0, NULL, params, NULL));
    put_result("launch_no_params", cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, NULL, NULL));
    CHECK(cuModuleUnload(mod));
    put_result("launch_unloaded", cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    put_result("unload_twice", cuModuleUnload(mod));
    return 0;
}

static int libraries(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUlibrary lib, bad;
    CUkernel kern, kern_again;
    CUfunction f, f_again;
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, 4 * COUNT));
    put_result("load_bad_image", cuLibraryLoadData(&bad, "SIMCUDA", NULL, NULL, 0, NULL, NULL, 0));
    CHECK(cuLibraryLoadData(&lib, "simcuda library", NULL, NULL, 0, NULL, NULL, 0));
    CHECK(cuLibraryGetKernel(&kern, lib, "fill_u32"));
    CHECK(cuLibraryGetKernel(&kern_again, lib, "fill_u32"));
    printf("same_kernel %d\n", kern == kern_again);
    CHECK(cuKernelGetFunction(&f, kern));
    CHECK(cuKernelGetFunction(&f_again, kern));
    printf("same_function %d\n", f == f_again);
    size_t offset = 0;
    CHECK(cuKernelGetParamInfo(kern, 2, &offset, NULL));
    put_u64("kernel_param2_offset", offset);
    // As the real driver: each getter takes its own kind of handle only.
    put_result("func_param_of_kernel", cuFuncGetParamInfo((CUfunction)kern, 0, &offset, NULL));
    put_result("kernel_param_of_function", cuKernelGetParamInfo((CUkernel)f, 0, &offset, NULL));
    unsigned int value = 9, n = COUNT;
    void *params[] = {&p, &value, &n};
    put_result("launch_function", cuLaunchKernel(f, 1, 1, 1, 1024, 1, 1, 0, NULL, params, NULL));
    value = 11;
    put_result("launch_kernel_handle",
               cuLaunchKernel((CUfunction)kern, 1, 1, 1, 10, 1, 1, 0, NULL, params, NULL));
    printf("values %u %u %u\n", read_at(p, 0), read_at(p, 10), read_at(p, 999));
    CHECK(cuLibraryUnload(lib));
    put_result("launch_after_unload", cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, params, NULL));
    put_result("get_kernel_after_unload", cuLibraryGetKernel(&kern, lib, "add_u32"));
    return 0;
}

int main(int argc, char **argv) {
    static const struct subcommand cmds[] = {{"modules", modules}, {"libraries", libraries}};
    return DISPATCH(cmds);
}
