// link: driver-cwd
// Meant to be copied and made setuid root by a test (linked with a RUNPATH of its working
// directory, where the copy finds libcuda.so.1 and a preloaded shim: secure-execution mode
// ignores LD_LIBRARY_PATH and preload paths with a slash). Allocates and frees, then prints
// what a shim could have changed in the process: its SIGUSR2 disposition and thread count.
#include <signal.h>
#include <unistd.h>
#include "sim_util.h"

static int threads(void) {
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    int n = -1;
    while (f && fgets(line, sizeof line, f)) {
        if (sscanf(line, "Threads: %d", &n) == 1) break;
    }
    if (f) fclose(f);
    return n;
}

int main(void) {
    setup();
    CUdeviceptr p[3];
    for (int i = 0; i < 3; i++) CHECK(cuMemAlloc_v2(&p[i], 4096));
    for (int i = 0; i < 3; i++) CHECK(cuMemFree_v2(p[i]));
    struct sigaction old;
    sigaction(SIGUSR2, NULL, &old);
    printf("euid %d\n", (int)geteuid());
    printf("allocated 3 freed 3\n");
    printf("SIGUSR2 %s\n", old.sa_handler == SIG_DFL ? "default" : "changed");
    printf("threads %d\n", threads());
    return 0;
}
