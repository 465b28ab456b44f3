/* gpuleak.h: the control API of libgpuleak.so, for programs that want to mark their trace,
 * take snapshots or read live GPU memory while they run.
 *
 * Every function is declared weak: a program that includes this header links and runs
 * without gpuleak (no -lgpuleak, nothing to ship). When libgpuleak.so is not preloaded the
 * symbols are NULL, and the GPULEAK_* macros below do nothing (GPULEAK_LIVE_BYTES and
 * GPULEAK_SNAPSHOT give 0). Under LD_PRELOAD=libgpuleak.so they resolve to the shim.
 *
 *     #include "gpuleak.h"
 *
 *     for (uint64_t step = 0; step < steps; step++) {
 *         GPULEAK_MARK("step", step);
 *         GPULEAK_REGION_BEGIN("forward");
 *         forward();
 *         GPULEAK_REGION_END("forward");
 *         if (GPULEAK_LIVE_BYTES(0) > (8ull << 30)) GPULEAK_SNAPSHOT("over 8 GiB");
 *     }
 *
 * Calling a function directly requires the NULL check yourself:
 *
 *     if (gpuleak_mark) gpuleak_mark("step", step);
 *
 * Weak references are resolved when the program starts in position-independent executables
 * (gcc's and clang's default on current distributions) and in shared libraries. A non-PIE
 * executable (-no-pie) resolves them to NULL at link time, so the API stays absent there:
 * build it with -fPIE -pie, or look the functions up with dlsym(RTLD_DEFAULT, "gpuleak_mark").
 *
 * Build with any C99 or C++ compiler (gcc, clang); no library is needed at link time.
 * All functions are thread-safe, never fail, and make no CUDA call; names may be NULL.
 */
#ifndef GPULEAK_H
#define GPULEAK_H

#include <stdint.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__) || defined(__clang__)
#define GPULEAK_WEAK __attribute__((weak))
#else
#define GPULEAK_WEAK
#endif

/* Writes a Mark record (name and value, for example a training step) into the trace. */
GPULEAK_WEAK void gpuleak_mark(const char *name, uint64_t value);

/* Writes a Region record that begins (or ends) the named region of the program. */
GPULEAK_WEAK void gpuleak_region_begin(const char *name);
GPULEAK_WEAK void gpuleak_region_end(const char *name);

/* Device memory (device, managed, stream-ordered, VMM physical, arrays; not host pinned
 * memory) live on `device` now, in bytes the program asked for; all devices if `device`
 * is negative. Counted from the start when GPULEAK_LIVE=1, GPULEAK_LIMIT, GPULEAK_METRICS
 * or GPULEAK_OOM_SUMMARY=1 is set; otherwise from the first call of this function (memory
 * allocated before it is not counted). */
GPULEAK_WEAK uint64_t gpuleak_live_bytes(int device);

/* Writes a Snapshot record (reason "api" if NULL or empty): `gpuleak report --at ID`
 * shows the live state at that point. Returns the snapshot id (from 1), or 0 when nothing
 * is traced. */
GPULEAK_WEAK uint64_t gpuleak_snapshot(const char *reason);

/* The id of the latest Snapshot record written (0: none yet), whoever asked for it: the
 * snapshot signal, the period, an out-of-memory failure or gpuleak_snapshot. One atomic
 * load. The Python package polls it to write the frameworks' allocator state for the
 * snapshots the shim takes on its own. */
GPULEAK_WEAK uint64_t gpuleak_snapshot_generation(void);

/* The path of this process's trace file, valid until the process exits, or NULL when
 * nothing is traced (GPULEAK_DISABLE=1, or the file could not be created). Like
 * gpuleak_snapshot it starts the trace if no CUDA call has yet. The trace can be read while
 * the program runs: `gpuleak report --at A..B PATH` on two snapshots of this process shows
 * what changed between them (the Python package's gpuleak.check() does exactly that). */
GPULEAK_WEAK const char *gpuleak_trace_path(void);

/* Opens a window (closing the last one): allocations of every kind made from now on are
 * counted in it, cheaply, in the process (the pytest plugin opens one per test). With
 * `watch_bytes` non-zero, the allocation that takes the window's live bytes (bytes allocated
 * in it and still live) past it writes a Snapshot record right after its own, and again each
 * time they pass a quarter more than at the last one: the latest such snapshot holds at least
 * four fifths of the window's highest live bytes. Turns live accounting on. */
GPULEAK_WEAK void gpuleak_window_begin(uint64_t watch_bytes);

/* Writes up to `n` counters of the open window to `out`, in this order: allocations made in
 * it, bytes allocated in it, bytes allocated in it and still live, the highest those have
 * been, the id of the latest watch snapshot (0: none). Returns how many it wrote (0 for a
 * NULL `out` or with GPULEAK_DISABLE=1). */
GPULEAK_WEAK int gpuleak_window_stats(uint64_t *out, int n);

/* Writes one record of kind 70 to 76 (a framework's allocator state, docs/frameworks.md)
 * whose fields `data` holds, encoded as the trace format encodes them. The shim decodes them
 * first and refuses what it cannot decode. Returns 0 when written, -1 when nothing is traced,
 * -2 when refused. The Python package calls it; programs need not. */
GPULEAK_WEAK int gpuleak_framework_record(unsigned kind, const void *data, size_t len);

/* Writes up to `n` (address, size) pairs (`2 * n` words) of the device memory handed to
 * cuBLAS (`cublasSetWorkspace_v2`) and cuBLASLt (`cublasLtMatmul`) as workspaces so far, the
 * latest size per address. Returns how many pairs it wrote. The Python package leaves those
 * blocks out of the tensors it judges; programs need not call it. */
GPULEAK_WEAK int gpuleak_workspaces(uint64_t *out, int n);

#define GPULEAK_MARK(name, value) ((gpuleak_mark) ? gpuleak_mark((name), (value)) : (void)0)
#define GPULEAK_REGION_BEGIN(name) ((gpuleak_region_begin) ? gpuleak_region_begin(name) : (void)0)
#define GPULEAK_REGION_END(name) ((gpuleak_region_end) ? gpuleak_region_end(name) : (void)0)
#define GPULEAK_LIVE_BYTES(device) ((gpuleak_live_bytes) ? gpuleak_live_bytes(device) : (uint64_t)0)
#define GPULEAK_SNAPSHOT(reason) ((gpuleak_snapshot) ? gpuleak_snapshot(reason) : (uint64_t)0)
#define GPULEAK_SNAPSHOT_GENERATION() ((gpuleak_snapshot_generation) ? gpuleak_snapshot_generation() : (uint64_t)0)
#define GPULEAK_TRACE_PATH() ((gpuleak_trace_path) ? gpuleak_trace_path() : (const char *)0)
#define GPULEAK_WINDOW_BEGIN(watch_bytes) ((gpuleak_window_begin) ? gpuleak_window_begin(watch_bytes) : (void)0)
#define GPULEAK_WINDOW_STATS(out, n) ((gpuleak_window_stats) ? gpuleak_window_stats((out), (n)) : 0)

#ifdef __cplusplus
}
#endif

#endif /* GPULEAK_H */
