// link: dl
// Reaches the driver only through cuGetProcAddress, as the CUDA runtime and static nvcc
// programs do. With a .tsv argument, replays every (name, version, flags) request in it and
// prints "name version flags result status symbol module" (symbol and module from dladdr of
// the returned pointer); without, allocates through base names, ABI versions, both resolver
// ABIs and per-thread flags, printing "alloc|free <api> <result> <ptr> <size>" lines.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "simcuda.h"

typedef CUresult (*gpa4_t)(const char *, void **, int, cuuint64_t);
typedef CUresult (*gpa5_t)(const char *, void **, int, cuuint64_t, CUdriverProcAddressQueryResult *);

static const char *base(const char *p) {
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int replay(gpa5_t gpa, const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 5;
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#' || !strncmp(line, "name\t", 5)) continue;
        char name[256];
        int version;
        unsigned long long flags;
        if (sscanf(line, "%255[^\t]\t%d\t%llu", name, &version, &flags) != 3) continue;
        const char *sym = strcmp(name, "(empty)") ? name : "";
        void *fn = (void *)1;
        CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)99;
        CUresult r = gpa(sym, &fn, version, flags, &st);
        Dl_info info;
        const char *s = "-", *m = "-";
        if (fn && fn != (void *)1 && dladdr(fn, &info)) {
            s = info.dli_sname ? info.dli_sname : "?";
            m = info.dli_fname ? base(info.dli_fname) : "?";
        }
        printf("%s\t%d\t%llu\t%d\t%d\t%s\t%s\n", name, version, flags, (int)r, (int)st, fn ? s : "NULL", m);
    }
    fclose(f);
    return 0;
}

int main(int argc, char **argv) {
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) return 3;
    gpa5_t boot = (gpa5_t)dlsym(h, "cuGetProcAddress_v2");
    if (!boot) return 3;
    gpa5_t gpa5 = NULL;
    gpa4_t gpa4 = NULL;
    if (boot("cuGetProcAddress", (void **)&gpa5, 12000, 0, NULL)) return 4;
    if (gpa5("cuGetProcAddress", (void **)&gpa4, 11030, 0, NULL)) return 4;
    if (argc > 1) return replay(gpa5, argv[1]);

    CUresult (*init)(unsigned);
    CUresult (*devget)(CUdevice *, int);
    CUresult (*retain)(CUcontext *, CUdevice);
    CUresult (*setcur)(CUcontext);
    CUresult (*alloc)(CUdeviceptr *, size_t);
    CUresult (*freep)(CUdeviceptr);
    CUresult (*alloc_async)(CUdeviceptr *, size_t, CUstream);
    CUresult (*free_async)(CUdeviceptr, CUstream);
    CUresult (*host_alloc)(void **, size_t, unsigned);
    CUresult (*free_host)(void *);
    gpa4("cuInit", (void **)&init, 2000, 0);
    gpa4("cuDeviceGet", (void **)&devget, 2000, 0);
    gpa5("cuDevicePrimaryCtxRetain", (void **)&retain, 7000, 0, NULL);
    gpa5("cuCtxSetCurrent", (void **)&setcur, 4000, 0, NULL);
    gpa5("cuMemAlloc", (void **)&alloc, 3020, 0, NULL);
    gpa4("cuMemFree", (void **)&freep, 3020, 0);
    gpa5("cuMemAllocAsync", (void **)&alloc_async, 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL);
    gpa5("cuMemFreeAsync", (void **)&free_async, 11020, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, NULL);
    gpa4("cuMemHostAlloc", (void **)&host_alloc, 2020, 0);
    gpa4("cuMemFreeHost", (void **)&free_host, 2000, 0);
    CUdevice dev;
    CUcontext ctx;
    if (init(0) || devget(&dev, 0) || retain(&ctx, dev) || setcur(ctx)) return 6;
    CUdeviceptr a, b;
    void *p;
    CUresult r;
    r = alloc(&a, 4096); printf("alloc cuMemAlloc_v2 %d 0x%llx 4096\n", r, a);
    r = alloc_async(&b, 8192, CU_STREAM_PER_THREAD); printf("alloc cuMemAllocAsync_ptsz %d 0x%llx 8192\n", r, b);
    r = host_alloc(&p, 1024, 0); printf("alloc cuMemHostAlloc %d 0x%llx 1024\n", r, (unsigned long long)p);
    r = free_async(b, CU_STREAM_PER_THREAD); printf("free cuMemFreeAsync_ptsz %d 0x%llx 0\n", r, b);
    r = freep(a); printf("free cuMemFree_v2 %d 0x%llx 0\n", r, a);
    r = free_host(p); printf("free cuMemFreeHost %d 0x%llx 0\n", r, (unsigned long long)p);
    return 0;
}
