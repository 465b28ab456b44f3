// link: driver
// Hosts that give the shim little stack. argv[1] picks one; each prints "key value" lines:
//   plain KB        a thread with a KB KiB stack that never calls CUDA (the program never does)
//   alloc KB        a thread with a KB KiB stack allocates and frees (after main allocated once)
//   deep KB N       the same thread recurses N frames first, then allocates
//   altstack        a signal handler on an 8 KiB alternate stack allocates (and leaks) 12288
//                   bytes; the page below the alternate stack is checked for writes
//   coroutine       a makecontext/swapcontext coroutine allocates (and leaks) from coro_site
//   jit             code mapped at run time, without unwind information, calls cuMemAlloc
//                   through a function pointer: with a frame-pointer frame, then without one and
//                   with data in RBP (x86-64 only; prints "jit unsupported" elsewhere)
//   hwm             the stack bytes below the caller's frame that an allocation and free used,
//                   measured on a painted thread stack: the thread's first, then one from a new
//                   call site, then one from that site again
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include "sim_util.h"

static int alloc_free(size_t size) {
    CUdeviceptr d;
    if (cuMemAlloc_v2(&d, size) != CUDA_SUCCESS) return 1;
    return cuMemFree_v2(d) != CUDA_SUCCESS;
}

static CUcontext ctx;

/* Runs fn(arg) on a thread with a kb KiB stack; prints "<what> <kb> <result>". KB counts from
 * glibc's 16 KiB minimum on x86-64; where the minimum is larger (128 KiB on arm64, for its
 * 64 KiB pages), the stack is that much larger, so "16" is always the smallest allowed. */
static int on_thread(const char *what, size_t kb, void *(*fn)(void *), void *arg) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    long min = sysconf(_SC_THREAD_STACK_MIN);
    size_t bytes = kb * 1024;
    if (min > 16384) bytes += (size_t)min - 16384;
    int rc = pthread_attr_setstacksize(&attr, bytes);
    if (rc) {
        printf("%s %zu setstacksize-error %d\n", what, kb, rc);
        return 1;
    }
    pthread_t t;
    rc = pthread_create(&t, &attr, fn, arg);
    pthread_attr_destroy(&attr);
    if (rc) {
        printf("%s %zu create-error %s\n", what, kb, rc == EINVAL ? "EINVAL" : strerror(rc));
        return 1;
    }
    void *result;
    pthread_join(t, &result);
    printf("%s %zu %s\n", what, kb, result ? "failed" : "ok");
    return result != NULL;
}

static void *nothing(void *arg) {
    return arg;
}

static void *allocating(void *arg) {
    (void)arg;
    cuCtxSetCurrent(ctx);
    return (void *)(intptr_t)(alloc_free(4096) | alloc_free(8192));
}

static int __attribute__((noinline)) recurse(int n) {
    volatile char pad[64];
    pad[0] = (char)n;
    if (n == 0) return alloc_free(4096);
    return recurse(n - 1) + pad[0] - (char)n;
}

static void *deep(void *arg) {
    cuCtxSetCurrent(ctx);
    return (void *)(intptr_t)recurse((int)(intptr_t)arg);
}

/* ---- alternate signal stack ---- */

#define ALT_SIZE 8192
#define CANARY_SIZE 4096
static volatile int handler_result = -1;

/* Leaks 12288 bytes, so that the report shows this allocation's stack. */
void __attribute__((noinline)) on_signal(int sig) {
    (void)sig;
    CUdeviceptr d;
    handler_result = cuMemAlloc_v2(&d, 3 * 4096) != CUDA_SUCCESS;
}

static int altstack(void) {
    unsigned char *region = mmap(NULL, CANARY_SIZE + ALT_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) return 3;
    memset(region, 0x5a, CANARY_SIZE);
    stack_t ss = {.ss_sp = region + CANARY_SIZE, .ss_size = ALT_SIZE, .ss_flags = 0};
    if (sigaltstack(&ss, NULL)) return 3;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR1, &sa, NULL);
    raise(SIGUSR1);
    size_t damaged = 0;
    for (size_t i = 0; i < CANARY_SIZE; i++) damaged += region[i] != 0x5a;
    printf("handler %d\n", handler_result);
    printf("canary damaged %zu\n", damaged);
    return 0;
}

/* ---- coroutine ---- */

static ucontext_t main_uc, coro_uc;
static volatile int coro_result = -1;

/* The allocation site the test looks for: the coroutine leaks 12345 bytes from here. */
void __attribute__((noinline)) coro_site(void) {
    CUdeviceptr d;
    coro_result = cuMemAlloc_v2(&d, 12345) != CUDA_SUCCESS;
}

void __attribute__((noinline)) coro_main(void) {
    coro_site();
    swapcontext(&coro_uc, &main_uc);
}

static int coroutine(void) {
    size_t size = 64 * 1024;
    void *stack = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stack == MAP_FAILED) return 3;
    getcontext(&coro_uc);
    coro_uc.uc_stack.ss_sp = stack;
    coro_uc.uc_stack.ss_size = size;
    coro_uc.uc_link = &main_uc;
    makecontext(&coro_uc, coro_main, 0);
    swapcontext(&main_uc, &coro_uc);
    printf("coroutine %d\n", coro_result);
    printf("coro_site %p\n", (void *)coro_site);
    return 0;
}

/* ---- JIT code ---- */

/* Maps `code` executable and calls it as f(cuMemAlloc_v2, &d, 4096) three times, freeing each
 * allocation; returns the failures. */
static int run_jit(const unsigned char *code, size_t len) {
    /* The code ends its page, as code in a JIT's buffer may: nothing after it is mapped. */
    unsigned char *pages = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (pages == MAP_FAILED) return 100;
    munmap(pages + 4096, 4096);
    unsigned char *at = pages + 4096 - len;
    memcpy(at, code, len);
    if (mprotect(pages, 4096, PROT_READ | PROT_EXEC)) return 100;
    typedef CUresult (*alloc_fn)(CUdeviceptr *, size_t);
    typedef CUresult (*jitted)(alloc_fn, CUdeviceptr *, size_t);
    jitted f = (jitted)(void *)at;
    int failures = 0;
    for (int i = 0; i < 3; i++) {
        CUdeviceptr d;
        failures += f(cuMemAlloc_v2, &d, 4096) != CUDA_SUCCESS;
        failures += cuMemFree_v2(d) != CUDA_SUCCESS;
    }
    munmap(pages, 4096);
    return failures;
}

static int jit(void) {
#if defined(__x86_64__)
    /* A frame-pointer frame: push rbp; mov rbp, rsp; mov rax, rdi; mov rdi, rsi; mov rsi, rdx;
     * call rax; pop rbp; ret. */
    static const unsigned char framed[] = {0x55, 0x48, 0x89, 0xe5, 0x48, 0x89, 0xf8, 0x48, 0x89,
                                           0xf7, 0x48, 0x89, 0xd6, 0xff, 0xd0, 0x5d, 0xc3};
    /* No frame pointer, RBP used for data (0xbeef): push rbp; mov rbp, 0xbeef; mov rax, rdi;
     * mov rdi, rsi; mov rsi, rdx; call rax; pop rbp; ret. */
    static const unsigned char frameless[] = {0x55, 0x48, 0xc7, 0xc5, 0xef, 0xbe, 0x00, 0x00, 0x48, 0x89, 0xf8,
                                              0x48, 0x89, 0xf7, 0x48, 0x89, 0xd6, 0xff, 0xd0, 0x5d, 0xc3};
    printf("jit framed %d\n", run_jit(framed, sizeof framed));
    printf("jit frameless %d\n", run_jit(frameless, sizeof frameless));
#else
    printf("jit unsupported\n");
#endif
    return 0;
}

/* ---- stack high-water mark ---- */

#define HWM_STACK (256 * 1024)
#define PAINT 0xa5

/* The bytes below `here` that the call used: the distance to the lowest byte of the painted
 * stack that is no longer paint. */
static size_t __attribute__((noinline)) used_below(unsigned char *stack, unsigned char *here) {
    unsigned char *p = stack;
    while (p < here && *p == PAINT) p++;
    return (size_t)(here - p);
}

/* One allocation and free from one call site, so that a second call is warm. */
static int __attribute__((noinline)) one_alloc(void) {
    CUdeviceptr d;
    if (cuMemAlloc_v2(&d, 4096) != CUDA_SUCCESS) return 1;
    return cuMemFree_v2(d) != CUDA_SUCCESS;
}

static void *measure(void *arg) {
    unsigned char *stack = arg;
    volatile unsigned char marker = 0;
    unsigned char *here = (unsigned char *)&marker;
    cuCtxSetCurrent(ctx);
    size_t used[3];
    for (int i = 0; i < 3; i++) {
        /* The whole stack below this frame was painted before the thread started; paint it
         * again before each later call (up to a little below this frame, above what memset
         * itself uses). */
        if (i > 0) memset(stack, PAINT, (size_t)(here - 256 - stack));
        if (i == 0 ? alloc_free(4096) : one_alloc()) return (void *)1;
        used[i] = used_below(stack, here);
    }
    /* The thread's first allocation (every frame new to the unwinder, and the driver's own
     * first call on the thread), one from a new call site (one new frame), and one from the
     * same site again (warm). */
    printf("hwm first %zu\n", used[0]);
    printf("hwm site %zu\n", used[1]);
    printf("hwm warm %zu\n", used[2]);
    return NULL;
}

static int hwm(void) {
    unsigned char *stack = mmap(NULL, HWM_STACK, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stack == MAP_FAILED) return 3;
    memset(stack, PAINT, HWM_STACK);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstack(&attr, stack, HWM_STACK);
    pthread_t t;
    if (pthread_create(&t, &attr, measure, stack)) return 3;
    void *result;
    pthread_join(t, &result);
    return result ? 4 : 0;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "alloc";
    size_t kb = argc > 2 ? (size_t)atol(argv[2]) : 16;
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (!strcmp(mode, "plain")) return on_thread("plain", kb, nothing, NULL);
    ctx = setup();
    if (alloc_free(1024)) return 3;
    if (!strcmp(mode, "alloc")) return on_thread("alloc", kb, allocating, NULL);
    if (!strcmp(mode, "deep")) {
        long depth = argc > 3 ? atol(argv[3]) : 150;
        return on_thread("deep", kb, deep, (void *)(intptr_t)depth);
    }
    if (!strcmp(mode, "altstack")) return altstack();
    if (!strcmp(mode, "coroutine")) return coroutine();
    if (!strcmp(mode, "jit")) return jit();
    if (!strcmp(mode, "hwm")) return hwm();
    fprintf(stderr, "unknown mode %s\n", mode);
    return 2;
}
