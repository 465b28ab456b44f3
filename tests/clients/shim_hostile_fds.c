// link: driver
// A program that takes the descriptor table back from whatever was loaded into it, as daemons
// and sandboxes do, then writes a file of its own while it keeps allocating.
//
//   shim_hostile_fds MODE OUT
//
// MODE: "none" (the twin: touches no descriptor), "close-range" (close_range(3, ~0U, 0)),
// "close-loop" (close() of every number from 3 to 1023, a daemon's loop), "dup2" (dup2() of
// OUT's descriptor over the trace's), "rename" (the trace renamed, then close_range: the trace
// cannot be reopened by its path). It allocates a little, does MODE, opens OUT, and writes
// 100,000 numbered lines with an allocation and a free every 5 lines; then it reads OUT back
// and prints "lines N good M" and, for "rename", "moved PATH".
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sim_util.h"

#define LINES 100000

/* The descriptor open on the trace (GPULEAK_OUTPUT), found by device and inode, or -1. */
static int trace_fd(void) {
    const char *path = getenv("GPULEAK_OUTPUT");
    struct stat want, st;
    if (!path || stat(path, &want) != 0) return -1;
    DIR *d = opendir("/proc/self/fd");
    int found = -1;
    struct dirent *e;
    while (d && (e = readdir(d))) {
        int fd = atoi(e->d_name);
        if (fd > 2 && fd != dirfd(d) && fstat(fd, &st) == 0 && st.st_dev == want.st_dev &&
            st.st_ino == want.st_ino)
            found = fd;
    }
    if (d) closedir(d);
    return found;
}

static void alloc_free(void) {
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, 4096));
    CHECK(cuMemFree_v2(p));
}

int main(int argc, char **argv) {
    if (argc < 3) return 2;
    const char *mode = argv[1];
    setup();
    CUdeviceptr kept;
    CHECK(cuMemAlloc_v2(&kept, 1 << 20)); /* leaked: the report must still see it */
    for (int i = 0; i < 10; i++) alloc_free();

    char moved[PATH_MAX];
    int tfd = trace_fd();
    if (!strcmp(mode, "rename")) {
        snprintf(moved, sizeof moved, "%s.moved", getenv("GPULEAK_OUTPUT"));
        if (tfd < 0 || rename(getenv("GPULEAK_OUTPUT"), moved) != 0) return 4;
        printf("moved %s\n", moved);
    }
    if (!strcmp(mode, "close-range") || !strcmp(mode, "rename")) {
        if (syscall(SYS_close_range, 3u, ~0u, 0) != 0) return 5;
    } else if (!strcmp(mode, "close-loop")) {
        for (int fd = 3; fd < 1024; fd++) close(fd);
    }
    int out = open(argv[2], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0) return 6;
    if (!strcmp(mode, "dup2")) {
        if (tfd < 0 || dup2(out, tfd) != tfd) return 7;
    }
    char line[64];
    for (int i = 0; i < LINES; i++) {
        int n = snprintf(line, sizeof line, "line %06d of the program's own file\n", i);
        if (write(out, line, n) != n) return 8;
        if (i % 5 == 0) alloc_free();
    }
    close(out);

    FILE *f = fopen(argv[2], "r");
    if (!f) return 9;
    int lines = 0, good = 0;
    char want[64], got[128];
    while (fgets(got, sizeof got, f)) {
        snprintf(want, sizeof want, "line %06d of the program's own file\n", lines);
        good += !strcmp(got, want);
        lines++;
    }
    fclose(f);
    printf("lines %d good %d\n", lines, good);
    return 0;
}
