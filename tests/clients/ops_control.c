// link: driver
// The control API through shim/include/gpuleak.h (weak symbols): runs with and without the
// shim. Prints whether the API is present, the live bytes it reads and the snapshot id.
#include <stdio.h>
#include "simcuda.h"
#include "../../shim/include/gpuleak.h"

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return 3;
    printf("api %s\n", gpuleak_mark ? "present" : "absent");
    unsigned long long before = GPULEAK_LIVE_BYTES(0);
    CUdeviceptr a, b;
    GPULEAK_REGION_BEGIN("load");
    if (cuMemAlloc_v2(&a, 1 << 20) || cuMemAlloc_v2(&b, 3 << 20)) return 4;
    GPULEAK_REGION_END("load");
    for (unsigned long long step = 1; step <= 3; step++) GPULEAK_MARK("step", step);
    unsigned long long during = GPULEAK_LIVE_BYTES(0);
    unsigned long long all = GPULEAK_LIVE_BYTES(-1);
    unsigned long long id = GPULEAK_SNAPSHOT("after load");
    unsigned long long id2 = GPULEAK_SNAPSHOT(NULL);
    if (cuMemFree_v2(a)) return 4;
    unsigned long long after = GPULEAK_LIVE_BYTES(0);
    printf("live before %llu during %llu all %llu after %llu\n", before, during, all, after);
    printf("snapshots %llu %llu\n", id, id2);
    return 0;
}
