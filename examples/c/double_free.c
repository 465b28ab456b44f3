// One bug: a device buffer freed twice on an error path (driver API).
#include <stdio.h>
#include "simcuda.h"

static CUresult upload(CUdeviceptr dst, const void *src, size_t n) {
    return cuMemcpyHtoD_v2(dst, src, n);
}

int main(void) {
    CUdevice dev;
    CUcontext ctx;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return 1;
    CUdeviceptr buf;
    if (cuMemAlloc_v2(&buf, 256)) return 1;
    char data[512] = {0};
    if (upload(buf, data, sizeof data) != CUDA_SUCCESS) { /* too large: the error path */
        cuMemFree_v2(buf);
    }
    cuMemFree_v2(buf); /* BUG: freed again */
    printf("done\n");
    return 0;
}
