// link: dl
// Looks up each symbol named in argv[1] (one per line; "#" lines and blank lines skipped)
// with dlsym on dlopen("libcuda.so.1", RTLD_LOCAL), as cudarc and ctypes do, and prints
// "name <TAB> found|missing".
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s <names.txt>\n", argv[0]);
        return 2;
    }
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    FILE *in = fopen(argv[1], "r");
    if (!h || !in) {
        fprintf(stderr, "cannot open libcuda.so.1 or %s\n", argv[1]);
        return 3;
    }
    char line[256];
    while (fgets(line, sizeof line, in)) {
        line[strcspn(line, "\r\n")] = '\0';
        if (!line[0] || line[0] == '#') continue;
        printf("%s\t%s\n", line, dlsym(h, line) ? "found" : "missing");
    }
    return 0;
}
