// link: driver
// External memory (memory of Vulkan, D3D or another process, imported through a shareable
// handle): the object, and a buffer mapped onto it that the program frees with cuMemFree (the
// simulator backs the object with its own memory; the "exporter" is a descriptor of /dev/null).
//
//   report_external clean  imports an object, maps a buffer, copies through it, frees the buffer
//                          with cuMemFree and destroys the object: nothing to report.
//   report_external leak   the same, neither freed nor destroyed: both unreleased.
#include <fcntl.h>
#include <stdint.h>
#include <unistd.h>
#include "sim_util.h"

#define OBJECT (1u << 20)
#define BUFFER (64u << 10)

__attribute__((noinline)) CUexternalMemory import_object(void) {
    CUDA_EXTERNAL_MEMORY_HANDLE_DESC desc;
    memset(&desc, 0, sizeof desc);
    desc.type = CU_EXTERNAL_MEMORY_HANDLE_TYPE_OPAQUE_FD;
    desc.handle.fd = open("/dev/null", O_RDONLY);
    desc.size = OBJECT;
    CUexternalMemory ext;
    CHECK(cuImportExternalMemory(&ext, &desc));
    return ext;
}

__attribute__((noinline)) CUdeviceptr map_buffer(CUexternalMemory ext) {
    CUDA_EXTERNAL_MEMORY_BUFFER_DESC desc;
    memset(&desc, 0, sizeof desc);
    desc.offset = 4096;
    desc.size = BUFFER;
    CUdeviceptr p;
    CHECK(cuExternalMemoryGetMappedBuffer(&p, ext, &desc));
    return p;
}

int main(int argc, char **argv) {
    int leak = argc > 1 && !strcmp(argv[1], "leak");
    setup();
    CUdeviceptr own;
    CHECK(cuMemAlloc_v2(&own, 4096));
    CUexternalMemory ext = import_object();
    CUdeviceptr p = map_buffer(ext);
    unsigned in[256], out[256];
    for (unsigned i = 0; i < 256; i++) in[i] = i * 11;
    CHECK(cuMemcpyHtoD_v2(p + BUFFER - sizeof in, in, sizeof in));
    CHECK(cuMemcpyDtoH_v2(out, p + BUFFER - sizeof in, sizeof out));
    printf("round trip: %d\n", !memcmp(in, out, sizeof in));
    put_result("past_the_buffer", cuMemcpyDtoH_v2(out, p + BUFFER - 4, 8));
    if (!leak) {
        CHECK(cuMemFree_v2(p));
        CHECK(cuDestroyExternalMemory(ext));
    }
    CHECK(cuMemFree_v2(own));
    return 0;
}
