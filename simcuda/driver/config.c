/*
 * config.c: the simulator's environment settings, fault injection, global lock, cuInit and the
 * error strings.
 *
 * Settings are read once, on the first call of any entry point. A bad value prints one line on
 * stderr and keeps the default, so a typo never silently changes what a test measures.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

#define DEFAULT_DEVICES 1
#define DEFAULT_MEM_BYTES (1ull << 30)
#define DEFAULT_DRIVER_VERSION 13050
#define MIN_MEM_BYTES (64ull << 10)
#define MAX_MEM_BYTES (1ull << 40)
#define MAX_FAULTS 32

struct sim_config g_cfg = {DEFAULT_DEVICES, DEFAULT_MEM_BYTES, DEFAULT_DRIVER_VERSION};

struct fault {
    char name[64];
    unsigned long nth;
    unsigned long calls;
    CUresult code;
    int signal; /* raise this signal instead of failing: the call then goes on as usual */
};

static struct fault faults[MAX_FAULTS];
static int nfaults;
static pthread_once_t config_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool initialized;

static void bad(const char *var, const char *value, const char *why) {
    fprintf(stderr, "simcuda: ignoring %s=%s: %s\n", var, value, why);
}

static bool parse_u64(const char *s, unsigned long long *out, char **end) {
    if (*s < '0' || *s > '9') return false;
    errno = 0;
    *out = strtoull(s, end, 10);
    return errno == 0;
}

static void load_devices(void) {
    const char *v = getenv("SIMCUDA_DEVICES");
    if (!v) return;
    unsigned long long n;
    char *end;
    if (!parse_u64(v, &n, &end) || *end || n > SIM_MAX_DEVICES) {
        bad("SIMCUDA_DEVICES", v, "expected a device count from 0 to 8");
        return;
    }
    g_cfg.devices = (int)n;
}

static void load_mem_bytes(void) {
    static const struct {
        const char *suffix;
        unsigned shift;
    } units[] = {{"", 0},     {"K", 10},   {"KiB", 10}, {"M", 20},   {"MiB", 20},
                 {"G", 30},   {"GiB", 30}, {"T", 40},   {"TiB", 40}};
    const char *v = getenv("SIMCUDA_MEM_BYTES");
    if (!v) return;
    unsigned long long n;
    char *end;
    if (!parse_u64(v, &n, &end)) {
        bad("SIMCUDA_MEM_BYTES", v, "expected bytes with an optional K/M/G/T or KiB/MiB/GiB/TiB");
        return;
    }
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (strcmp(end, units[i].suffix) != 0) continue;
        if (n > (MAX_MEM_BYTES >> units[i].shift)) break;
        n <<= units[i].shift;
        if (n < MIN_MEM_BYTES || n % HEAP_ALIGN != 0) break;
        g_cfg.mem_bytes = n;
        return;
    }
    bad("SIMCUDA_MEM_BYTES", v, "expected a multiple of 256 bytes from 64 KiB to 1 TiB");
}

static void load_driver_version(void) {
    const char *v = getenv("SIMCUDA_DRIVER_VERSION");
    if (!v) return;
    unsigned long long n;
    char *end;
    if (!parse_u64(v, &n, &end) || *end || n < 2000 || n > 99990) {
        bad("SIMCUDA_DRIVER_VERSION", v, "expected 1000 * major + 10 * minor, e.g. 12090");
        return;
    }
    g_cfg.driver_version = (int)n;
}

static bool is_allocation_function(const char *name) {
    static const char *const prefixes[] = {"cuMemAlloc",          "cuMemHostAlloc",
                                           "cuMemHostRegister",   "cuMemCreate",
                                           "cuArrayCreate",       "cuArray3DCreate",
                                           "cuMipmappedArrayCreate", "cuMemAddressReserve"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (strncmp(name, prefixes[i], strlen(prefixes[i])) == 0) return true;
    return false;
}

/* One SIMCUDA_FAIL entry: name:N[:code]. */
static void load_fault(char *spec) {
    char entry[128];
    snprintf(entry, sizeof entry, "%s", spec); /* for messages: spec is split in place */
    char *name = spec;
    char *nth = strchr(spec, ':');
    if (!nth) {
        bad("SIMCUDA_FAIL", entry, "expected name:N[:code]");
        return;
    }
    *nth++ = '\0';
    char *code = strchr(nth, ':');
    if (code) *code++ = '\0';
    unsigned long long n, c = 0;
    char *end;
    if (!resolver_exports(name)) {
        bad("SIMCUDA_FAIL", entry, "not an exported function of the simulated driver");
        return;
    }
    if (!parse_u64(nth, &n, &end) || *end || n == 0) {
        bad("SIMCUDA_FAIL", entry, "the call number N counts from 1");
        return;
    }
    int sig = 0;
    if (code && strncmp(code, "sig", 3) == 0) {
        if (!parse_u64(code + 3, &c, &end) || *end || c == 0 || c > 64) {
            bad("SIMCUDA_FAIL", entry, "expected sigN with a signal number N");
            return;
        }
        sig = (int)c;
        code = NULL;
    } else if (code && (!parse_u64(code, &c, &end) || *end || c == 0 || c > 100000)) {
        bad("SIMCUDA_FAIL", entry, "expected a non-zero CUresult number");
        return;
    }
    if (nfaults == MAX_FAULTS || strlen(name) >= sizeof faults[0].name) {
        bad("SIMCUDA_FAIL", entry, "too many entries or name too long");
        return;
    }
    struct fault *f = &faults[nfaults++];
    strcpy(f->name, name);
    f->nth = (unsigned long)n;
    f->signal = sig;
    f->code = code ? (CUresult)c
                   : (is_allocation_function(name) ? CUDA_ERROR_OUT_OF_MEMORY : CUDA_ERROR_UNKNOWN);
}

static void load_faults(void) {
    const char *v = getenv("SIMCUDA_FAIL");
    if (!v || !*v) return;
    char *copy = strdup(v);
    if (!copy) return;
    char *save = NULL;
    for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save))
        if (*tok) load_fault(tok);
    free(copy);
}

/* A child forked while another thread held the lock would otherwise inherit it locked. */
static void fork_prepare(void) { pthread_mutex_lock(&lock); }
static void fork_release(void) { pthread_mutex_unlock(&lock); }

static void load_all(void) {
    pthread_atfork(fork_prepare, fork_release, fork_release);
    load_devices();
    load_mem_bytes();
    load_driver_version();
    load_faults();
}

void sim_config_load(void) { pthread_once(&config_once, load_all); }

CUresult sim_fault(const char *fn) {
    sim_config_load();
    for (int i = 0; i < nfaults; i++) {
        if (strcmp(faults[i].name, fn) != 0) continue;
        unsigned long call = __atomic_add_fetch(&faults[i].calls, 1, __ATOMIC_RELAXED);
        if (call != faults[i].nth) continue;
        /* A signal that arrives inside the driver call, before it has done anything (a handler
         * may leave it by longjmp: nothing is held yet). */
        if (faults[i].signal) raise(faults[i].signal);
        else return faults[i].code;
    }
    return CUDA_SUCCESS;
}

CUresult sim_enter(const char *fn) {
    CUresult r = sim_fault(fn);
    if (r != CUDA_SUCCESS) return r;
    return sim_initialized() ? CUDA_SUCCESS : CUDA_ERROR_NOT_INITIALIZED;
}

bool sim_initialized(void) { return __atomic_load_n(&initialized, __ATOMIC_ACQUIRE); }

void sim_lock(void) { pthread_mutex_lock(&lock); }
void sim_unlock(void) { pthread_mutex_unlock(&lock); }

CUresult sim_init_locked(unsigned int flags) {
    if (flags != 0) return CUDA_ERROR_INVALID_VALUE;
    if (g_cfg.devices == 0) return CUDA_ERROR_NO_DEVICE;
    if (sim_initialized()) return CUDA_SUCCESS;
    for (int d = 0; d < g_cfg.devices; d++) {
        struct ctx *c = obj_new(HK_CTX, sizeof *c);
        if (!c) return CUDA_ERROR_OUT_OF_MEMORY;
        c->dev = d;
        c->primary = true;
        c->id = (unsigned long long)d + 1;
        g_dev[d].primary = c;
        g_dev[d].default_pool = pool_new_default(d);
        if (!g_dev[d].default_pool) return CUDA_ERROR_OUT_OF_MEMORY;
        g_dev[d].current_pool = g_dev[d].default_pool;
    }
    __atomic_store_n(&initialized, true, __ATOMIC_RELEASE);
    return CUDA_SUCCESS;
}

static const struct {
    CUresult code;
    const char *name;
    const char *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_DEINITIALIZED, "CUDA_ERROR_DEINITIALIZED", "driver shutting down"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE", "device kernel image is invalid"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_ALREADY_MAPPED, "CUDA_ERROR_ALREADY_MAPPED", "resource already mapped"},
    {CUDA_ERROR_NOT_MAPPED, "CUDA_ERROR_NOT_MAPPED", "resource not mapped"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_ILLEGAL_STATE, "CUDA_ERROR_ILLEGAL_STATE", "the operation is not permitted in the current state"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_READY, "CUDA_ERROR_NOT_READY", "device not ready"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS", "an illegal memory access was encountered"},
    {CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE, "CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE", "primary context active"},
    {CUDA_ERROR_CONTEXT_IS_DESTROYED, "CUDA_ERROR_CONTEXT_IS_DESTROYED", "context is destroyed"},
    {CUDA_ERROR_ASSERT, "CUDA_ERROR_ASSERT", "device-side assert triggered"},
    {CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED",
     "part or all of the requested memory range is already mapped"},
    {CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED",
     "pointer does not correspond to a registered memory region"},
    {CUDA_ERROR_NOT_PERMITTED, "CUDA_ERROR_NOT_PERMITTED", "operation not permitted"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED",
     "operation not permitted when stream is capturing"},
    {CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED",
     "operation failed due to a previous error during capture"},
    {CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE, "CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE",
     "the graph update was refused: it breaks a rule of executable graph update"},
    {CUDA_ERROR_UNKNOWN, "CUDA_ERROR_UNKNOWN", "unknown error"},
};

const char *sim_error_name(CUresult e) {
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == e) return errors[i].name;
    return NULL;
}

const char *sim_error_string(CUresult e) {
    for (size_t i = 0; i < sizeof errors / sizeof errors[0]; i++)
        if (errors[i].code == e) return errors[i].text;
    return NULL;
}

SIMCUDA_API CUresult cuInit(unsigned int Flags) {
    API_ENTER_NOINIT();
    API_LOCKED(sim_init_locked(Flags));
}

SIMCUDA_API CUresult cuDriverGetVersion(int *driverVersion) {
    API_ENTER_NOINIT();
    if (!driverVersion) return CUDA_ERROR_INVALID_VALUE;
    *driverVersion = g_cfg.driver_version;
    return CUDA_SUCCESS;
}

SIMCUDA_API CUresult cuGetErrorString(CUresult error, const char **pStr) {
    API_ENTER_NOINIT();
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    *pStr = sim_error_string(error);
    return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

SIMCUDA_API CUresult cuGetErrorName(CUresult error, const char **pStr) {
    API_ENTER_NOINIT();
    if (!pStr) return CUDA_ERROR_INVALID_VALUE;
    *pStr = sim_error_name(error);
    return *pStr ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* NVIDIA's private interfaces are never reproduced here. */
SIMCUDA_API CUresult cuGetExportTable(const void **ppExportTable, const void *pExportTableId) {
    API_ENTER_NOINIT();
    (void)pExportTableId;
    if (ppExportTable) *ppExportTable = NULL;
    return CUDA_ERROR_NOT_SUPPORTED;
}
