// link: driver
// Stream-ordered pool: reserved versus used, picked by the first argument. On one stream,
// batch() takes 16 x 1 MiB with cuMemAllocAsync and frees them all (cuMemFreeAsync), the
// stream is synchronized, then tick() makes 8 pairs of 4 KiB:
//   keep  the device's pool has a release threshold of UINT64_MAX: the 16 MiB stay reserved
//         in the pool after the frees and the synchronisation, unused;
//   trim  the default threshold (0): the synchronisation gives them back to the device.
// Prints "reserved N used M" as the pool says at the end (before the last synchronisation).
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sim_util.h"

#define MIB (1u << 20)

__attribute__((noinline)) static CUdeviceptr batch(CUstream s) {
    CUdeviceptr p = 0;
    CHECK(cuMemAllocAsync(&p, MIB, s));
    return p;
}

__attribute__((noinline)) static CUdeviceptr tick(CUstream s) {
    CUdeviceptr p = 0;
    CHECK(cuMemAllocAsync(&p, 4096, s));
    return p;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "keep";
    setup();
    CUdevice dev;
    CUmemoryPool pool;
    CUstream s;
    CHECK(cuDeviceGet(&dev, 0));
    CHECK(cuDeviceGetMemPool(&pool, dev));
    if (strcmp(mode, "keep") == 0) {
        cuuint64_t threshold = UINT64_MAX;
        CHECK(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
    }
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUdeviceptr p[16];
    for (int i = 0; i < 16; i++) p[i] = batch(s);
    for (int i = 0; i < 16; i++) CHECK(cuMemFreeAsync(p[i], s));
    CHECK(cuStreamSynchronize(s));
    for (int i = 0; i < 8; i++) CHECK(cuMemFreeAsync(tick(s), s));
    cuuint64_t reserved = 0, used = 0;
    CHECK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved));
    CHECK(cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used));
    printf("reserved %llu used %llu\n", (unsigned long long)reserved, (unsigned long long)used);
    CHECK(cuStreamSynchronize(s));
    CHECK(cuStreamDestroy_v2(s));
    return 0;
}
