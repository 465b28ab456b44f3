// link: driver
// Windows of the control API (gpuleak_window_begin, gpuleak_window_stats): what allocations
// made since the window opened add up to, and the watch's snapshots. Runs with and without the
// shim; prints each window's five counters.
#include <stdint.h>
#include <stdio.h>
#include "simcuda.h"
#include "../../shim/include/gpuleak.h"

#define MIB (1ull << 20)

static void print(const char *when) {
    uint64_t s[5] = {0, 0, 0, 0, 0};
    int n = GPULEAK_WINDOW_STATS(s, 5);
    printf("%s: %d allocations %llu bytes %llu live %llu peak %llu watch %llu\n", when, n, (unsigned long long)s[0],
           (unsigned long long)(s[1] / MIB), (unsigned long long)(s[2] / MIB), (unsigned long long)(s[3] / MIB),
           (unsigned long long)s[4]);
}

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return 3;
    CUdeviceptr old, a, b, c, d, e, f;
    if (cuMemAlloc_v2(&old, MIB)) return 4;
    GPULEAK_WINDOW_BEGIN(0);
    if (cuMemAlloc_v2(&a, 2 * MIB) || cuMemAlloc_v2(&b, MIB)) return 4;
    // Frees of memory allocated before the window (the first one before accounting began) do
    // not lower what the window holds.
    if (cuMemFree_v2(a) || cuMemFree_v2(old)) return 4;
    print("first");
    GPULEAK_WINDOW_BEGIN(4 * MIB);
    print("second, opened");
    if (cuMemFree_v2(b)) return 4;
    // 3, 5 (past 4: a snapshot), 6 (not past 5 + 5/4), 8 MiB (past 6.25: a snapshot).
    if (cuMemAlloc_v2(&c, 3 * MIB) || cuMemAlloc_v2(&d, 2 * MIB) || cuMemAlloc_v2(&e, MIB) || cuMemAlloc_v2(&f, 2 * MIB))
        return 4;
    print("second");
    if (cuMemFree_v2(c) || cuMemFree_v2(d) || cuMemFree_v2(e) || cuMemFree_v2(f)) return 4;
    print("second, freed");
    return 0;
}
