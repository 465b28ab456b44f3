// link: dl
// Replays resolver requests: argv[1] is a resolver-requests .tsv file ("-" reads stdin):
// "#" lines and the "name version flags" header are skipped, "(empty)" is the empty string.
// argv[2] picks the resolver: v2 (cuGetProcAddress_v2, default), v1 (the 4-argument
// cuGetProcAddress) or ptsz (cuGetProcAddress_v2_ptsz), each taken with dlsym from
// dlopen("libcuda.so.1"). Prints one line per request:
//   name <TAB> version <TAB> flags <TAB> result <TAB> status <TAB> symbol
// status is "-" for v1; symbol is dladdr's name of the returned pointer, or "-" for NULL.
// Exits 1 if a returned pointer differs from dlsym of the symbol it claims to be.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "simcuda.h"

typedef CUresult (*resolver4)(const char *, void **, int, cuuint64_t);
typedef CUresult (*resolver5)(const char *, void **, int, cuuint64_t,
                              CUdriverProcAddressQueryResult *);

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s <requests.tsv|-> [v2|v1|ptsz]\n", argv[0]);
        return 2;
    }
    const char *abi = argc > 2 ? argv[2] : "v2";
    const char *entry = !strcmp(abi, "v1")     ? "cuGetProcAddress"
                        : !strcmp(abi, "ptsz") ? "cuGetProcAddress_v2_ptsz"
                                               : "cuGetProcAddress_v2";
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen libcuda.so.1: %s\n", dlerror());
        return 3;
    }
    void *resolver = dlsym(h, entry);
    if (!resolver) {
        fprintf(stderr, "dlsym %s: %s\n", entry, dlerror());
        return 3;
    }
    FILE *in = strcmp(argv[1], "-") ? fopen(argv[1], "r") : stdin;
    if (!in) {
        perror(argv[1]);
        return 3;
    }
    int mismatches = 0;
    char line[512];
    while (fgets(line, sizeof line, in)) {
        char name[256];
        int version;
        unsigned long long flags;
        if (line[0] == '#' || !strncmp(line, "name\t", 5)) continue;
        if (sscanf(line, "%255[^\t]\t%d\t%llu", name, &version, &flags) != 3) continue;
        const char *symbol = strcmp(name, "(empty)") ? name : "";
        void *fn = NULL;
        CUresult r;
        char status[16] = "-";
        if (!strcmp(abi, "v1")) {
            r = ((resolver4)resolver)(symbol, &fn, version, flags);
        } else {
            CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)99;
            r = ((resolver5)resolver)(symbol, &fn, version, flags, &st);
            snprintf(status, sizeof status, "%d", (int)st);
        }
        const char *got = "-";
        Dl_info info;
        if (fn) {
            got = dladdr(fn, &info) && info.dli_sname ? info.dli_sname : "?";
            if (dlsym(h, got) != fn) {
                fprintf(stderr, "MISMATCH %s %d %llu: %s is not dlsym's %s\n", name, version,
                        flags, got, got);
                mismatches++;
            }
        }
        printf("%s\t%d\t%llu\t%d\t%s\t%s\n", name, version, flags, (int)r, status, got);
    }
    return mismatches ? 1 : 0;
}
