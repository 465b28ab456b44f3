/*
 * legacy.c: the pre-3.2 entry points with 32-bit device pointers and sizes. They exist so that
 * a resolver request below the _v2 version gets the exact symbol the real driver would hand
 * out (and an interposer can be tested against it), but the simulator does not implement the
 * 32-bit ABI: every one returns CUDA_ERROR_NOT_SUPPORTED and touches nothing.
 */
#include "internal.h"

#define LEGACY() \
    do { \
        API_ENTER_NOINIT(); \
        return CUDA_ERROR_NOT_SUPPORTED; \
    } while (0)

#define UNUSED(x) (void)(x)

SIMCUDA_API CUresult cuDeviceTotalMem(unsigned int *bytes, CUdevice dev) {
    UNUSED(bytes), UNUSED(dev);
    LEGACY();
}

SIMCUDA_API CUresult cuMemGetInfo(unsigned int *free, unsigned int *total) {
    UNUSED(free), UNUSED(total);
    LEGACY();
}

SIMCUDA_API CUresult cuMemAlloc(CUdeviceptr_v1 *dptr, unsigned int bytesize) {
    UNUSED(dptr), UNUSED(bytesize);
    LEGACY();
}

SIMCUDA_API CUresult cuMemAllocPitch(CUdeviceptr_v1 *dptr, unsigned int *pPitch,
                                     unsigned int WidthInBytes, unsigned int Height,
                                     unsigned int ElementSizeBytes) {
    UNUSED(dptr), UNUSED(pPitch), UNUSED(WidthInBytes), UNUSED(Height), UNUSED(ElementSizeBytes);
    LEGACY();
}

SIMCUDA_API CUresult cuMemFree(CUdeviceptr_v1 dptr) {
    UNUSED(dptr);
    LEGACY();
}

SIMCUDA_API CUresult cuMemGetAddressRange(CUdeviceptr_v1 *pbase, unsigned int *psize,
                                          CUdeviceptr_v1 dptr) {
    UNUSED(pbase), UNUSED(psize), UNUSED(dptr);
    LEGACY();
}

SIMCUDA_API CUresult cuMemAllocHost(void **pp, unsigned int bytesize) {
    UNUSED(pp), UNUSED(bytesize);
    LEGACY();
}

SIMCUDA_API CUresult cuMemHostGetDevicePointer(CUdeviceptr_v1 *pdptr, void *p, unsigned int Flags) {
    UNUSED(pdptr), UNUSED(p), UNUSED(Flags);
    LEGACY();
}

SIMCUDA_API CUresult cuMemcpyHtoD(CUdeviceptr_v1 dstDevice, const void *srcHost,
                                  unsigned int ByteCount) {
    UNUSED(dstDevice), UNUSED(srcHost), UNUSED(ByteCount);
    LEGACY();
}

SIMCUDA_API CUresult cuMemcpyDtoH(void *dstHost, CUdeviceptr_v1 srcDevice, unsigned int ByteCount) {
    UNUSED(dstHost), UNUSED(srcDevice), UNUSED(ByteCount);
    LEGACY();
}

SIMCUDA_API CUresult cuMemcpyDtoD(CUdeviceptr_v1 dstDevice, CUdeviceptr_v1 srcDevice,
                                  unsigned int ByteCount) {
    UNUSED(dstDevice), UNUSED(srcDevice), UNUSED(ByteCount);
    LEGACY();
}

SIMCUDA_API CUresult cuMemcpyHtoDAsync(CUdeviceptr_v1 dstDevice, const void *srcHost,
                                       unsigned int ByteCount, CUstream hStream) {
    UNUSED(dstDevice), UNUSED(srcHost), UNUSED(ByteCount), UNUSED(hStream);
    LEGACY();
}

SIMCUDA_API CUresult cuMemcpyDtoHAsync(void *dstHost, CUdeviceptr_v1 srcDevice,
                                       unsigned int ByteCount, CUstream hStream) {
    UNUSED(dstHost), UNUSED(srcDevice), UNUSED(ByteCount), UNUSED(hStream);
    LEGACY();
}

SIMCUDA_API CUresult cuMemcpyDtoDAsync(CUdeviceptr_v1 dstDevice, CUdeviceptr_v1 srcDevice,
                                       unsigned int ByteCount, CUstream hStream) {
    UNUSED(dstDevice), UNUSED(srcDevice), UNUSED(ByteCount), UNUSED(hStream);
    LEGACY();
}

SIMCUDA_API CUresult cuMemsetD8(CUdeviceptr_v1 dstDevice, unsigned char uc, unsigned int N) {
    UNUSED(dstDevice), UNUSED(uc), UNUSED(N);
    LEGACY();
}

SIMCUDA_API CUresult cuMemsetD16(CUdeviceptr_v1 dstDevice, unsigned short us, unsigned int N) {
    UNUSED(dstDevice), UNUSED(us), UNUSED(N);
    LEGACY();
}

SIMCUDA_API CUresult cuMemsetD32(CUdeviceptr_v1 dstDevice, unsigned int ui, unsigned int N) {
    UNUSED(dstDevice), UNUSED(ui), UNUSED(N);
    LEGACY();
}

SIMCUDA_API CUresult cuArrayCreate(CUarray *pHandle, const CUDA_ARRAY_DESCRIPTOR_v1 *pAllocateArray) {
    UNUSED(pHandle), UNUSED(pAllocateArray);
    LEGACY();
}

SIMCUDA_API CUresult cuArray3DCreate(CUarray *pHandle,
                                     const CUDA_ARRAY3D_DESCRIPTOR_v1 *pAllocateArray) {
    UNUSED(pHandle), UNUSED(pAllocateArray);
    LEGACY();
}

SIMCUDA_API CUresult cuArrayGetDescriptor(CUDA_ARRAY_DESCRIPTOR_v1 *pArrayDescriptor,
                                          CUarray hArray) {
    UNUSED(pArrayDescriptor), UNUSED(hArray);
    LEGACY();
}

SIMCUDA_API CUresult cuArray3DGetDescriptor(CUDA_ARRAY3D_DESCRIPTOR_v1 *pArrayDescriptor,
                                            CUarray hArray) {
    UNUSED(pArrayDescriptor), UNUSED(hArray);
    LEGACY();
}
