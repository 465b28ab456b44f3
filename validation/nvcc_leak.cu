// The nvcc workload of scripts/validate-gpu: a CUDA runtime program built with nvcc and the
// static runtime (`-cudart static`, nvcc's default), so it reaches the driver the way most
// CUDA C++ programs do: the runtime linked into the executable dlopens libcuda.so.1 and asks
// cuGetProcAddress for every entry point. `scripts/validate-gpu --build` compiles it here with
// NVIDIA's nvcc from PyPI (nothing is built on the GPU machine).
//
// What it does wrong, on purpose (argv[1] = N, default 6):
//   - leaks N allocations of 1 MiB (cudaMalloc, never freed)                      -> leak
//   - a kernel writes `shared` on stream a, then a copy on stream b reads it with
//     no event between them                                                       -> cross-stream-race
//   - frees `scratch` with cudaFreeAsync on stream b while its last use, a kernel
//     on stream a, is not ordered before the free                                 -> unordered-free
// and the same three things done right (freed; an event recorded on a and waited for by b),
// which must produce no finding. Prints "leaked_bytes BYTES" and exits 0, or names the first
// runtime call that failed and exits 3.
//
// With argv[1] = "arrays" (row nvcc-arrays) it copies to and from a CUDA array instead,
// correctly: a kernel on the blocking stream c writes a buffer, a synchronous copy from host
// memory into the array (cudaMemcpy2DToArray, on the legacy default stream, which waits for c)
// and one from the array into a second buffer (cudaMemcpy2DFromArray) come next, then a copy
// on the blocking stream d reads the first buffer and one on c the second: the legacy stream
// orders all of it, so no finding is expected, and no leak. With "arrays-race" (row
// nvcc-arrays-race) the streams are non-blocking and the array is filled from the buffer the
// kernel writes (device to array): one cross-stream-race expected. (The CUDA 13.0 static
// runtime asks the driver for none of the 1D array copies, cuMemcpyDtoA and the rest: its
// array copies reach cuMemcpy2D and cuMemcpy3D with an array side.)
//
// With "prefetch" (row nvcc-prefetch): a kernel on the blocking stream c writes a buffer, a
// prefetch of managed memory on the legacy default stream comes next (cudaMemPrefetchAsync,
// "standard default stream semantics"), then a copy on the blocking stream d reads the
// buffer: ordered by the legacy stream, so no finding is expected, and no leak.
//
// With "graph" (row nvcc-graph): a kernel launched with <<<...>>> is captured from the
// non-blocking stream a into a graph, which is replayed on a; an event recorded after the
// replay orders a copy on stream b that reads the kernel's buffer: no finding. With
// "graph-race" (row nvcc-graph-race) the copy does not wait: one cross-stream-race, between
// the copy and the graph launch's kernel node, which gpuleak finds only if it reads the
// pointer parameters of a kernel node the runtime gave a library's CUkernel.
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CHECK(call)                                                                        \
    do {                                                                                   \
        cudaError_t check_ = (call);                                                       \
        if (check_ != cudaSuccess) {                                                       \
            fprintf(stderr, "%s:%d: %s failed: %s (%d)\n", __FILE__, __LINE__, #call,     \
                    cudaGetErrorString(check_), (int)check_);                              \
            exit(3);                                                                       \
        }                                                                                  \
    } while (0)

static const size_t MIB = 1 << 20;
static const int WORDS = 1 << 16; // 256 KiB of unsigned words

__global__ void fill(unsigned *p, unsigned value, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) p[i] = value + i;
}

// Kept out of line so that each wrong and right case has its own call stack in the report.
__attribute__((noinline)) static void leak_buffers(int n) {
    for (int i = 0; i < n; i++) {
        void *p;
        CHECK(cudaMalloc(&p, MIB));
    }
}

__attribute__((noinline)) static void free_buffers(int n) {
    for (int i = 0; i < n; i++) {
        void *p;
        CHECK(cudaMalloc(&p, MIB));
        CHECK(cudaFree(p));
    }
}

__attribute__((noinline)) static void racy_copy(cudaStream_t a, cudaStream_t b, unsigned *host) {
    unsigned *shared;
    CHECK(cudaMalloc(&shared, WORDS * sizeof(unsigned)));
    fill<<<WORDS / 256, 256, 0, a>>>(shared, 1, WORDS);
    CHECK(cudaGetLastError());
    // Wrong: nothing orders the kernel on a before this copy on b.
    CHECK(cudaMemcpyAsync(host, shared, WORDS * sizeof(unsigned), cudaMemcpyDeviceToHost, b));
    CHECK(cudaDeviceSynchronize());
    CHECK(cudaFree(shared));
}

__attribute__((noinline)) static void ordered_copy(cudaStream_t a, cudaStream_t b, unsigned *host) {
    unsigned *shared;
    cudaEvent_t done;
    CHECK(cudaMalloc(&shared, WORDS * sizeof(unsigned)));
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    fill<<<WORDS / 256, 256, 0, a>>>(shared, 2, WORDS);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(done, a));
    CHECK(cudaStreamWaitEvent(b, done, 0));
    CHECK(cudaMemcpyAsync(host, shared, WORDS * sizeof(unsigned), cudaMemcpyDeviceToHost, b));
    CHECK(cudaStreamSynchronize(b));
    CHECK(cudaEventDestroy(done));
    CHECK(cudaFree(shared));
}

__attribute__((noinline)) static void unordered_free(cudaStream_t a, cudaStream_t b) {
    unsigned *scratch;
    CHECK(cudaMallocAsync(&scratch, WORDS * sizeof(unsigned), a));
    fill<<<WORDS / 256, 256, 0, a>>>(scratch, 3, WORDS);
    CHECK(cudaGetLastError());
    // Wrong: the kernel on a may still be running when b frees the memory.
    CHECK(cudaFreeAsync(scratch, b));
    CHECK(cudaDeviceSynchronize());
}

__attribute__((noinline)) static void ordered_free(cudaStream_t a, cudaStream_t b) {
    unsigned *scratch;
    cudaEvent_t done;
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    CHECK(cudaMallocAsync(&scratch, WORDS * sizeof(unsigned), a));
    fill<<<WORDS / 256, 256, 0, a>>>(scratch, 4, WORDS);
    CHECK(cudaGetLastError());
    CHECK(cudaEventRecord(done, a));
    CHECK(cudaStreamWaitEvent(b, done, 0));
    CHECK(cudaFreeAsync(scratch, b));
    CHECK(cudaStreamSynchronize(b));
    CHECK(cudaEventDestroy(done));
}

// The "arrays" and "arrays-race" modes (see the top).
__attribute__((noinline)) static int array_copies(bool racy) {
    const size_t bytes = WORDS * sizeof(unsigned);
    cudaStream_t c, d;
    unsigned *buf, *back, *host;
    cudaArray_t arr;
    cudaChannelFormatDesc desc = cudaCreateChannelDesc<unsigned>();
    CHECK(cudaStreamCreateWithFlags(&c, racy ? cudaStreamNonBlocking : cudaStreamDefault));
    CHECK(cudaStreamCreateWithFlags(&d, racy ? cudaStreamNonBlocking : cudaStreamDefault));
    CHECK(cudaMalloc(&buf, bytes));
    CHECK(cudaMalloc(&back, bytes));
    CHECK(cudaMallocHost(&host, bytes));
    CHECK(cudaMallocArray(&arr, &desc, WORDS, 0));
    for (int i = 0; i < WORDS; i++) host[i] = 9;
    fill<<<WORDS / 256, 256, 0, c>>>(buf, 5, WORDS);
    CHECK(cudaGetLastError());
    if (racy) {
        // Wrong: the copy on the legacy stream reads buf, which the kernel on the
        // non-blocking stream c may still be writing.
        CHECK(cudaMemcpy2DToArray(arr, 0, 0, buf, bytes, bytes, 1, cudaMemcpyDeviceToDevice));
        CHECK(cudaDeviceSynchronize());
    } else {
        CHECK(cudaMemcpy2DToArray(arr, 0, 0, host, bytes, bytes, 1, cudaMemcpyHostToDevice));
        CHECK(cudaMemcpy2DFromArray(back, bytes, arr, 0, 0, bytes, 1, cudaMemcpyDeviceToDevice));
        CHECK(cudaMemcpyAsync(host, buf, bytes, cudaMemcpyDeviceToHost, d));
        CHECK(cudaStreamSynchronize(d));
        if (host[WORDS - 1] != 5u + WORDS - 1) {
            fprintf(stderr, "arrays: read %u, expected %u\n", host[WORDS - 1], 5u + WORDS - 1);
            return 4;
        }
        CHECK(cudaMemcpyAsync(host, back, bytes, cudaMemcpyDeviceToHost, c));
        CHECK(cudaStreamSynchronize(c));
        if (host[0] != 9) {
            fprintf(stderr, "arrays: the array's copy read %u, expected 9\n", host[0]);
            return 4;
        }
    }
    CHECK(cudaFreeArray(arr));
    CHECK(cudaFreeHost(host));
    CHECK(cudaFree(buf));
    CHECK(cudaFree(back));
    CHECK(cudaStreamDestroy(c));
    CHECK(cudaStreamDestroy(d));
    printf("leaked_bytes 0\n");
    return 0;
}

// The "prefetch" mode (see the top).
__attribute__((noinline)) static int prefetch_on_legacy() {
    const size_t bytes = WORDS * sizeof(unsigned);
    cudaStream_t c, d;
    unsigned *buf, *managed, *host;
    int device;
    CHECK(cudaGetDevice(&device));
    CHECK(cudaStreamCreateWithFlags(&c, cudaStreamDefault));
    CHECK(cudaStreamCreateWithFlags(&d, cudaStreamDefault));
    CHECK(cudaMalloc(&buf, bytes));
    CHECK(cudaMallocManaged(&managed, bytes));
    CHECK(cudaMallocHost(&host, bytes));
    fill<<<WORDS / 256, 256, 0, c>>>(buf, 6, WORDS);
    CHECK(cudaGetLastError());
    cudaMemLocation gpu = {};
    gpu.type = cudaMemLocationTypeDevice;
    gpu.id = device;
    CHECK(cudaMemPrefetchAsync(managed, bytes, gpu, 0, 0));
    CHECK(cudaMemcpyAsync(host, buf, bytes, cudaMemcpyDeviceToHost, d));
    CHECK(cudaStreamSynchronize(d));
    if (host[WORDS - 1] != 6u + WORDS - 1) {
        fprintf(stderr, "prefetch: read %u, expected %u\n", host[WORDS - 1], 6u + WORDS - 1);
        return 4;
    }
    CHECK(cudaFree(managed));
    CHECK(cudaFreeHost(host));
    CHECK(cudaFree(buf));
    CHECK(cudaStreamDestroy(c));
    CHECK(cudaStreamDestroy(d));
    printf("leaked_bytes 0\n");
    return 0;
}

// The "graph" and "graph-race" modes (see the top).
__attribute__((noinline)) static int graph_replay(bool racy) {
    const size_t bytes = WORDS * sizeof(unsigned);
    cudaStream_t a, b;
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    cudaEvent_t done;
    unsigned *buf, *host;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    CHECK(cudaMalloc(&buf, bytes));
    CHECK(cudaMallocHost(&host, bytes));
    CHECK(cudaStreamBeginCapture(a, cudaStreamCaptureModeThreadLocal));
    fill<<<WORDS / 256, 256, 0, a>>>(buf, 8, WORDS);
    CHECK(cudaGetLastError());
    CHECK(cudaStreamEndCapture(a, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    CHECK(cudaGraphLaunch(exec, a));
    if (!racy) {
        CHECK(cudaEventRecord(done, a));
        CHECK(cudaStreamWaitEvent(b, done, 0));
    }
    // Wrong when racy: nothing orders the replayed kernel on a before this copy on b.
    CHECK(cudaMemcpyAsync(host, buf, bytes, cudaMemcpyDeviceToHost, b));
    CHECK(cudaDeviceSynchronize());
    int bad = host[WORDS - 1] != 8u + WORDS - 1;
    if (bad) fprintf(stderr, "graph replay read %u, expected %u\n", host[WORDS - 1], 8u + WORDS - 1);
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    CHECK(cudaEventDestroy(done));
    CHECK(cudaFreeHost(host));
    CHECK(cudaFree(buf));
    CHECK(cudaStreamDestroy(a));
    CHECK(cudaStreamDestroy(b));
    // The racy copy may read before the kernel ran: only the ordered one is checked.
    if (bad && !racy) return 4;
    printf("leaked_bytes 0\n");
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "graph")) return graph_replay(false);
    if (argc > 1 && !strcmp(argv[1], "graph-race")) return graph_replay(true);
    if (argc > 1 && !strcmp(argv[1], "prefetch")) return prefetch_on_legacy();
    if (argc > 1 && !strcmp(argv[1], "arrays")) return array_copies(false);
    if (argc > 1 && !strcmp(argv[1], "arrays-race")) return array_copies(true);
    int n = argc > 1 ? atoi(argv[1]) : 6;
    cudaStream_t a, b;
    unsigned *host;
    CHECK(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking));
    CHECK(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking));
    CHECK(cudaMallocHost(&host, WORDS * sizeof(unsigned)));

    leak_buffers(n);
    free_buffers(n);
    racy_copy(a, b, host);
    ordered_copy(a, b, host);
    if (host[WORDS - 1] != 2u + WORDS - 1) {
        fprintf(stderr, "ordered copy read %u, expected %u\n", host[WORDS - 1], 2u + WORDS - 1);
        return 4;
    }
    unordered_free(a, b);
    ordered_free(a, b);

    CHECK(cudaFreeHost(host));
    CHECK(cudaStreamDestroy(a));
    CHECK(cudaStreamDestroy(b));
    printf("leaked_bytes %zu\n", (size_t)n * MIB);
    return 0;
}
