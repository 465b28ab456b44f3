// link: none
// A program that never touches CUDA (but does use dlsym, as many programs do).
#include <dlfcn.h>
#include <stdio.h>

int main(void) {
    void *p = dlsym(RTLD_DEFAULT, "printf");
    void *cu = dlsym(RTLD_DEFAULT, "cuMemAlloc_v2");
    printf("printf %s, cuMemAlloc_v2 %s\n", p ? "found" : "missing", cu ? "found" : "missing");
    return 0;
}
