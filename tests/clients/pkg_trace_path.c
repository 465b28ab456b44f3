// link: driver
// gpuleak_trace_path through shim/include/gpuleak.h (weak symbols), with and without the shim:
// prints `parent PATH` after a CUDA call, then forks a child that makes its own CUDA call and
// prints `child PATH` (the child writes a trace of its own); `(null)` when the API is absent.
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>
#include "simcuda.h"
#include "../../shim/include/gpuleak.h"

static int cuda_call(void) {
    CUdevice dev;
    CUcontext ctx;
    CUdeviceptr p;
    if (cuInit(0) || cuDeviceGet(&dev, 0) || cuDevicePrimaryCtxRetain(&ctx, dev) || cuCtxSetCurrent(ctx)) return 3;
    if (cuMemAlloc_v2(&p, 4096) || cuMemFree_v2(p)) return 4;
    return 0;
}

static const char *or_null(const char *s) { return s ? s : "(null)"; }

int main(void) {
    int rc = cuda_call();
    if (rc) return rc;
    printf("parent %s\n", or_null(GPULEAK_TRACE_PATH()));
    /* Asked twice: the same answer. */
    const char *again = GPULEAK_TRACE_PATH();
    printf("again %s\n", or_null(again));
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) return 5;
    if (pid == 0) {
        rc = cuda_call();
        if (rc) _exit(rc);
        printf("child %s\n", or_null(GPULEAK_TRACE_PATH()));
        fflush(stdout);
        _exit(0);
    }
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status)) return 6;
    return 0;
}
