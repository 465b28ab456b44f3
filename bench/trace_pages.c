/*
 * trace_pages: what the first store to each page of a new trace block costs, the way the shim's
 * writer makes blocks (a file grown with posix_fallocate, 64 KiB blocks mapped MAP_SHARED one
 * after another and unmapped when full), with and without writing each block's zeros first
 * (pwrite) as the writer does outside tmpfs. Thread CPU time per 4 KiB page.
 *
 *     gcc -O2 -o target/bench/trace_pages bench/trace_pages.c
 *     target/bench/trace_pages DIR [MIB=256]
 *
 * DIR is where the scratch file goes (the file system under test); it is removed afterwards.
 * Prints `trace_pages fs=DIR mib=N mapped_only_ns=X zeros_first_ns=Y` per page.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

enum { BLOCK = 64 << 10, PAGE = 4096 };
static char zeros[BLOCK];

static double cpu_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return t.tv_sec * 1e9 + t.tv_nsec;
}

/* ns per page for blocks of `path` grown to `size`, with zeros written first or not. */
static double run(const char *path, size_t size, int zeros_first) {
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || posix_fallocate(fd, 0, (off_t)size) != 0) {
        perror(path);
        exit(1);
    }
    double t0 = cpu_ns();
    size_t pages = 0;
    for (size_t off = 0; off < size; off += BLOCK) {
        if (zeros_first && pwrite(fd, zeros, BLOCK, (off_t)off) != BLOCK) {
            perror("pwrite");
            exit(1);
        }
        char *p = mmap(NULL, BLOCK, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)off);
        if (p == MAP_FAILED) {
            perror("mmap");
            exit(1);
        }
        for (size_t i = 0; i < BLOCK; i += PAGE, pages++) p[i] = 1;
        munmap(p, BLOCK);
    }
    double ns = (cpu_ns() - t0) / (double)pages;
    close(fd);
    unlink(path);
    return ns;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: trace_pages DIR [MIB]\n");
        return 2;
    }
    size_t mib = argc > 2 ? (size_t)atol(argv[2]) : 256;
    char path[4096];
    snprintf(path, sizeof path, "%s/trace_pages.%d.tmp", argv[1], (int)getpid());
    double mapped = run(path, mib << 20, 0);
    double zeroed = run(path, mib << 20, 1);
    printf("trace_pages fs=%s mib=%zu mapped_only_ns=%.0f zeros_first_ns=%.0f\n", argv[1], mib, mapped, zeroed);
    return 0;
}
