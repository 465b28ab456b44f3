// link: driver
// Allocates from SITES call sites in turn (argv[1], 1 to 48, default 40), ROUNDS times (argv[2],
// default 10): the sites are functions at the same depth, called through one table, so their
// stacks differ only in the return address into the site. Site I allocates 4096 + 256 * I bytes
// and frees them. Prints `site I ADDRESS` (the site function's address) for every site.
#include <stdio.h>
#include <stdlib.h>
#include "simcuda.h"

#define SITE(name)                                                   \
    __attribute__((noinline)) static CUresult name(CUdeviceptr *d, size_t n) { \
        CUresult r = cuMemAlloc_v2(d, n);                            \
        __asm__ volatile("" ::: "memory");                           \
        return r;                                                    \
    }
#define SITE4(p) SITE(p##0) SITE(p##1) SITE(p##2) SITE(p##3)
#define SITE16(p) SITE4(p##0) SITE4(p##1) SITE4(p##2) SITE4(p##3)
SITE16(site_a)
SITE16(site_b)
SITE16(site_c)

#define REF4(p) p##0, p##1, p##2, p##3
#define REF16(p) REF4(p##0), REF4(p##1), REF4(p##2), REF4(p##3)
static CUresult (*const sites[])(CUdeviceptr *, size_t) = {REF16(site_a), REF16(site_b), REF16(site_c)};
#define MAX_SITES ((int)(sizeof sites / sizeof sites[0]))

__attribute__((noinline)) static CUresult alloc_at(int site, CUdeviceptr *d) {
    CUresult r = sites[site](d, 4096 + 256 * (size_t)site);
    __asm__ volatile("" ::: "memory");
    return r;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 40;
    int rounds = argc > 2 ? atoi(argv[2]) : 10;
    if (n < 1 || n > MAX_SITES || rounds < 1) {
        fprintf(stderr, "shim_sites: SITES must be 1 to %d, ROUNDS at least 1\n", MAX_SITES);
        return 2;
    }
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return 3;
    for (int i = 0; i < n; i++) printf("site %d %p\n", i, (void *)sites[i]);
    for (int r = 0; r < rounds; r++) {
        for (int i = 0; i < n; i++) {
            CUdeviceptr d;
            if (alloc_at(i, &d) != CUDA_SUCCESS || cuMemFree_v2(d) != CUDA_SUCCESS) return 1;
        }
    }
    cuDevicePrimaryCtxRelease_v2(dev);
    return 0;
}
