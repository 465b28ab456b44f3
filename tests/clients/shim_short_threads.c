// link: driver
// THREADS short threads (argv[1]), BATCH at a time (argv[2], default 1), each making one
// allocation and freeing it, then exiting; each prints "tid N" (its OS thread id).
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sim_util.h"

static CUcontext ctx;
static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;

static void *worker(void *arg) {
    (void)arg;
    CHECK(cuCtxSetCurrent(ctx));
    CUdeviceptr p;
    CHECK(cuMemAlloc_v2(&p, 4096));
    CHECK(cuMemFree_v2(p));
    pthread_mutex_lock(&out);
    printf("tid %ld\n", (long)syscall(SYS_gettid));
    pthread_mutex_unlock(&out);
    return NULL;
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 1000;
    int batch = argc > 2 ? atoi(argv[2]) : 1;
    if (batch < 1 || batch > 64) return 2;
    ctx = setup();
    pthread_t t[64];
    for (int done = 0; done < threads; done += batch) {
        int n = threads - done < batch ? threads - done : batch;
        for (int i = 0; i < n; i++)
            if (pthread_create(&t[i], NULL, worker, NULL)) return 4;
        for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
    }
    return 0;
}
