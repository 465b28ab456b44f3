// link: driver
// Correct patterns of third-party libraries that once drew false findings, each with the
// mistake that must still be found. The first argument names the case.
//
// Managed memory freed, then a host array placed where it was (as the C library may place
// a NumPy array; here an mmap at the same address):
//   managed-registered: numba-cuda's way: the array page-locked in place
//     (cuMemHostRegister), copied to the device and back, unregistered: nothing to report;
//   managed-host: the array used as plain pageable memory by host-to-device and
//     device-to-host copies: nothing to report;
//   managed-memset: a memset of the freed managed pointer itself, which takes it as device
//     memory (refused by the simulator, which finds no memory there that a device can write;
//     a real driver may run it): use-after-free.
// A pinned buffer whose event is never recorded (cudarc records it only when it manages
// several streams), as in cudarc's test_htod_copy_pinned on the legacy default stream:
//   pinned-round-trip: the buffer copied to a stream-ordered device buffer and back into
//     pageable memory (which makes the host wait for the stream), the device buffer freed on
//     the stream, then the pinned buffer dropped: its event synchronized, cuMemFreeHost:
//     nothing to report;
//   pinned-round-trip-pending: the same with a kernel queued after the copy back, which the
//     wait on the unrecorded event does not wait for: wait-on-unrecorded-event.
// Every case cleans up after itself, so a mistake is the only finding of its report.
#define _GNU_SOURCE
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sim_util.h"

#define N 256
#define BYTES (N * sizeof(unsigned))

static CUfunction fill;

__attribute__((noinline)) static CUdeviceptr make_managed(void) {
    CUdeviceptr m;
    CHECK(cuMemAllocManaged(&m, BYTES, CU_MEM_ATTACH_GLOBAL));
    return m;
}

__attribute__((noinline)) static CUdeviceptr make_buffer(void) {
    CUdeviceptr d;
    CHECK(cuMemAlloc_v2(&d, BYTES));
    return d;
}

__attribute__((noinline)) static CUevent make_event(void) {
    CUevent e;
    CHECK(cuEventCreate(&e, CU_EVENT_BLOCKING_SYNC));
    return e;
}

/* A page of host memory where a managed allocation was, once it is freed: the managed
 * allocation's address (page-aligned) in *freed. Tries again if something else took the
 * address first. */
static void *host_page_over_freed_managed(CUdeviceptr *freed) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    for (int tries = 0; tries < 16; tries++) {
        CUdeviceptr m = make_managed();
        CHECK(cuMemsetD32_v2(m, 1, N));
        CHECK(cuMemFree_v2(m));
        void *want = (void *)(uintptr_t)m;
        void *got = mmap(want, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE,
                         -1, 0);
        if (got == want) {
            *freed = m;
            return got;
        }
        if (got != MAP_FAILED) munmap(got, page);
    }
    fprintf(stderr, "no host page could be placed where managed memory was freed\n");
    exit(4);
}

static int managed(const char *how) {
    CUdeviceptr freed;
    char *page = host_page_over_freed_managed(&freed);
    /* The array inside the freed range, not at its start. */
    unsigned *array = (unsigned *)(page + 256);
    for (unsigned i = 0; i < N / 2; i++) array[i] = 7;
    CUdeviceptr d = make_buffer();
    size_t bytes = BYTES / 2;
    if (!strcmp(how, "managed-memset")) {
        CUresult r = cuMemsetD32Async(freed, 0, N, NULL);
        CHECK(cuStreamSynchronize(NULL));
        printf("memset_after_free %d\n", (int)r);
    } else {
        int registered = !strcmp(how, "managed-registered");
        if (registered) CHECK(cuMemHostRegister_v2(array, bytes, 0));
        CHECK(cuMemcpyHtoD_v2(d, array, bytes));
        CHECK(launch_fill(fill, NULL, d, 9, N / 2, N / 2));
        CHECK(cuMemcpyDtoH_v2(array, d, bytes));
        /* A unified copy names both sides by address alone. */
        CHECK(cuMemcpyAsync(d, (CUdeviceptr)(uintptr_t)array, bytes, NULL));
        CHECK(cuStreamSynchronize(NULL));
        if (registered) CHECK(cuMemHostUnregister(array));
        printf("array %#lx\nfreed %#lx\nread_back %u\n", (unsigned long)(uintptr_t)array,
               (unsigned long)freed, array[N / 2 - 1]);
    }
    CHECK(cuMemFree_v2(d));
    munmap(page, (size_t)sysconf(_SC_PAGESIZE));
    return 0;
}

static int pinned_round_trip(const char *how) {
    static unsigned pageable[N];
    CUevent e = make_event();
    unsigned *pinned;
    CHECK(cuMemHostAlloc((void **)&pinned, BYTES, CU_MEMHOSTALLOC_WRITECOMBINED));
    /* as_mut_slice: the event synchronized before the host writes the buffer. */
    CHECK(cuEventSynchronize(e));
    for (unsigned i = 0; i < N; i++) pinned[i] = 5;
    /* clone_htod: a stream-ordered buffer, the stream waits for the pinned buffer's event,
     * then the copy. */
    CUdeviceptr d;
    CHECK(cuMemAllocAsync(&d, BYTES, NULL));
    CHECK(cuStreamWaitEvent(NULL, e, 0));
    CHECK(cuMemcpyHtoDAsync_v2(d, pinned, BYTES, NULL));
    /* clone_dtoh into a Vec: pageable memory, so the host waits for the stream. */
    CHECK(cuMemcpyDtoHAsync_v2(pageable, d, BYTES, NULL));
    if (!strcmp(how, "pinned-round-trip-pending")) CHECK(launch_fill(fill, NULL, d, 6, N, N));
    /* The drops: the device buffer freed on its stream, the pinned buffer's event
     * synchronized before cuMemFreeHost. */
    CHECK(cuMemFreeAsync(d, NULL));
    CHECK(cuEventSynchronize(e));
    CHECK(cuMemFreeHost(pinned));
    CHECK(cuEventDestroy_v2(e));
    printf("read_back %u\n", pageable[N - 1]);
    return 0;
}

int main(int argc, char **argv) {
    setup();
    fill = load_fill();
    const char *how = argc > 1 ? argv[1] : "";
    if (!strncmp(how, "managed-", 8)) return managed(how);
    if (!strncmp(how, "pinned-round-trip", 17)) return pinned_round_trip(how);
    fprintf(stderr, "unknown case %s\n", how);
    return 2;
}
