// link: driver
// External semaphores and captured synchronization: imports and their checks, signals and
// waits and theirs, and signals, waits and stream memory operations under capture, which
// become graph nodes (types 8, 9 and 12) that every launch runs.
#include <fcntl.h>
#include <unistd.h>

#include "sim_util.h"

/* An import of `type` from a fresh descriptor; the descriptor is left in *fd. */
static CUresult import(CUexternalSemaphore *s, CUexternalSemaphoreHandleType type, unsigned flags,
                       int *fd) {
    CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC desc;
    memset(&desc, 0, sizeof desc);
    desc.type = type;
    desc.flags = flags;
    desc.handle.fd = *fd = open("/dev/null", O_RDONLY);
    return cuImportExternalSemaphore(s, &desc);
}

/* Whether descriptor fd is still open. */
static int is_open(int fd) {
    return fcntl(fd, F_GETFD) >= 0;
}

static int semaphores(int argc, char **argv) {
    (void)argc, (void)argv;
    setup();
    CUexternalSemaphore bin, tl, bad;
    int fd;
    put_result("import_binary", import(&bin, CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD, 0, &fd));
    put_u64("binary_fd_taken", !is_open(fd));
    put_result("import_timeline", import(&tl, CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_TIMELINE_SEMAPHORE_FD, 0, &fd));
    put_result("import_win32", import(&bad, CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_WIN32, 0, &fd));
    put_u64("refused_fd_kept", is_open(fd));
    close(fd);
    put_result("import_unknown_type", import(&bad, (CUexternalSemaphoreHandleType)11, 0, &fd));
    close(fd);
    put_result("import_flags", import(&bad, CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD, 1, &fd));
    close(fd);
    CUDA_EXTERNAL_SEMAPHORE_HANDLE_DESC closed;
    memset(&closed, 0, sizeof closed);
    closed.type = CU_EXTERNAL_SEMAPHORE_HANDLE_TYPE_OPAQUE_FD;
    closed.handle.fd = fd;
    put_result("import_closed_fd", cuImportExternalSemaphore(&bad, &closed));
    put_result("import_null", cuImportExternalSemaphore(&bad, NULL));

    CUstream s;
    CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    CUexternalSemaphore both[2] = {bin, tl};
    CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS sp[2];
    CUDA_EXTERNAL_SEMAPHORE_WAIT_PARAMS wp[2];
    memset(sp, 0, sizeof sp);
    memset(wp, 0, sizeof wp);
    sp[1].params.fence.value = wp[1].params.fence.value = 3;
    put_result("signal", cuSignalExternalSemaphoresAsync(both, sp, 2, s));
    put_result("wait", cuWaitExternalSemaphoresAsync(both, wp, 2, s));
    put_result("signal_ptsz", cuSignalExternalSemaphoresAsync_ptsz(both, sp, 2, NULL));
    put_result("wait_ptsz", cuWaitExternalSemaphoresAsync_ptsz(both, wp, 2, NULL));
    put_result("count_zero", cuSignalExternalSemaphoresAsync(NULL, NULL, 0, s));
    put_result("null_arrays", cuWaitExternalSemaphoresAsync(NULL, NULL, 1, s));
    sp[1].flags = 1;
    put_result("signal_flags", cuSignalExternalSemaphoresAsync(both, sp, 2, s));
    sp[1].flags = 0;

    /* Under capture: one node per semaphore, then per memory operation. */
    CUdeviceptr d;
    CHECK(cuMemAlloc_v2(&d, 64));
    CHECK(cuMemsetD32_v2(d, 0, 16));
    CHECK(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_RELAXED));
    put_result("captured_signal", cuSignalExternalSemaphoresAsync(both, sp, 2, s));
    put_result("captured_wait", cuWaitExternalSemaphoresAsync(&tl, &wp[1], 1, s));
    put_result("captured_write", cuStreamWriteValue32_v2(s, d, 42, 0));
    put_result("captured_value_wait", cuStreamWaitValue32_v2(s, d, 42, CU_STREAM_WAIT_VALUE_EQ));
    CUgraph g;
    CHECK(cuStreamEndCapture(s, &g));
    uint32_t v;
    CHECK(cuMemcpyDtoH_v2(&v, d, 4));
    put_u64("written_before_launch", v);
    CUgraphNode nodes[8];
    size_t n = 8;
    CHECK(cuGraphGetNodes(g, nodes, &n));
    printf("captured_types");
    for (size_t i = 0; i < n; i++) {
        CUgraphNodeType t;
        CHECK(cuGraphNodeGetType(nodes[i], &t));
        printf(" %d", (int)t);
    }
    printf("\n");
    CUgraphExec e;
    CHECK(cuGraphInstantiateWithFlags(&e, g, 0));
    put_result("launch", cuGraphLaunch(e, s));
    CHECK(cuStreamSynchronize(s));
    CHECK(cuMemcpyDtoH_v2(&v, d, 4));
    put_u64("written_by_launch", v);
    /* A semaphore destroyed before a launch: the launch's node does nothing. */
    CHECK(cuDestroyExternalSemaphore(bin));
    put_result("launch_destroyed", cuGraphLaunch(e, s));
    put_result("signal_destroyed", cuSignalExternalSemaphoresAsync(&bin, sp, 1, s));
    put_result("destroy_again", cuDestroyExternalSemaphore(bin));
    CHECK(cuGraphExecDestroy(e));
    CHECK(cuGraphDestroy(g));
    CHECK(cuDestroyExternalSemaphore(tl));
    CHECK(cuMemFree_v2(d));
    CHECK(cuStreamDestroy_v2(s));
    return 0;
}

int main(int argc, char **argv) {
    static const struct subcommand cmds[] = {{"semaphores", semaphores}};
    return DISPATCH(cmds);
}
