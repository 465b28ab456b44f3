// link: driver
// Counts the C library's malloc family called from inside libgpuleak.so once tracing has
// started: the program's own malloc (an executable's definition wins over the C library's for
// every library) forwards to glibc's and counts calls whose return address lies in the shim.
// It makes 2,048 allocations from 2,048 distinct call stacks (new stacks to intern) on two
// threads, then prints "shim mallocs N".
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "sim_util.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);

static uintptr_t shim_lo, shim_hi;
static volatile int armed;
static unsigned long shim_calls;

static void count(void *ra) {
    uintptr_t a = (uintptr_t)ra;
    if (armed && a >= shim_lo && a < shim_hi) __atomic_add_fetch(&shim_calls, 1, __ATOMIC_RELAXED);
}

void *malloc(size_t n) {
    count(__builtin_return_address(0));
    return __libc_malloc(n);
}
void *calloc(size_t n, size_t m) {
    count(__builtin_return_address(0));
    return __libc_calloc(n, m);
}
void *realloc(void *p, size_t n) {
    count(__builtin_return_address(0));
    return __libc_realloc(p, n);
}
int posix_memalign(void **out, size_t align, size_t n) {
    count(__builtin_return_address(0));
    *out = __libc_memalign(align, n);
    return *out ? 0 : 12;
}
void *aligned_alloc(size_t align, size_t n) {
    count(__builtin_return_address(0));
    return __libc_memalign(align, n);
}

static int find_shim(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    (void)data;
    if (!strstr(info->dlpi_name, "libgpuleak")) return 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD) continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (!shim_lo || lo < shim_lo) shim_lo = lo;
        if (hi > shim_hi) shim_hi = hi;
    }
    return 1;
}

static CUcontext ctx;

static void nest(unsigned bits, int level);
static __attribute__((noinline)) void left(unsigned bits, int level) {
    nest(bits, level);
    __asm__ volatile("" ::: "memory");
}
static __attribute__((noinline)) void right(unsigned bits, int level) {
    nest(bits, level);
    __asm__ volatile("" ::: "memory");
}
/* A call stack of its own for each value of the low `level` bits of `bits`. */
static __attribute__((noinline)) void nest(unsigned bits, int level) {
    if (level == 0) {
        CUdeviceptr p;
        CHECK(cuMemAlloc_v2(&p, 256));
        CHECK(cuMemFree_v2(p));
    } else if (bits & 1) {
        left(bits >> 1, level - 1);
    } else {
        right(bits >> 1, level - 1);
    }
    __asm__ volatile("" ::: "memory");
}

static void *worker(void *arg) {
    CHECK(cuCtxSetCurrent(ctx));
    unsigned base = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < 1024; i++) nest(base + i, 11);
    return NULL;
}

int main(void) {
    ctx = setup();
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, 256)); /* tracing starts here */
    CHECK(cuMemFree_v2(p));
    dl_iterate_phdr(find_shim, NULL);
    if (!shim_lo) return 4;
    pthread_t t;
    armed = 1;
    worker((void *)0);
    if (pthread_create(&t, NULL, worker, (void *)(uintptr_t)1024)) return 5;
    pthread_join(t, NULL);
    armed = 0;
    printf("shim mallocs %lu\n", shim_calls);
    return 0;
}
