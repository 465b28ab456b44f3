//! Memory another process or API made, mapped here: IPC handles, pool imports and external
//! memory (buffers and mipmapped arrays), whose size the driver tells only afterwards.
//!
//! Every handler is `unsafe` with the contract of `memory`'s: `real` is the driver function the
//! handler is named for, and the other arguments are the program's, passed through unchanged.

use std::ffi::c_void;

use gpuleak_format::Api;

use super::memory::{out, record_alloc, record_alloc_sized, record_free};
use crate::cuda::*;
use crate::tracer;

/// The size of the allocation mapped at `ptr`, as `cuMemGetAddressRange_v2` tells (0 if it
/// cannot): the calls that map another process's memory here do not say how much.
fn mapped_size(ptr: u64) -> u64 {
    // Not tracing (GPULEAK_DISABLE=1, or the tracer could not start): ask the driver nothing.
    if tracer::get().is_none() {
        return 0;
    }
    type GetAddressRange = unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, CUdeviceptr) -> CUresult;
    let Some(f) = crate::exports::dlsym::driver_fn(crate::exports::dlsym::Getter::cuMemGetAddressRange_v2) else {
        return 0;
    };
    // SAFETY: the driver's cuMemGetAddressRange_v2, found by name, with its C signature.
    let f: GetAddressRange = unsafe { std::mem::transmute::<usize, GetAddressRange>(f) };
    let (mut base, mut size): (CUdeviceptr, usize) = (0, 0);
    // SAFETY: both out-pointers are valid; `ptr` is the address the driver just returned, in
    // the context that is still current.
    if unsafe { f(&mut base, &mut size, ptr) } == CUDA_SUCCESS && base == ptr {
        size as u64
    } else {
        0
    }
}

/// Another process's memory mapped here by `call` (which returns the result and the address):
/// recorded with `aux` and the size the driver tells afterwards (the calls do not say it).
fn record_import(api: Api, aux: u64, call: impl FnOnce() -> (CUresult, u64)) -> CUresult {
    record_alloc_sized(api, std::ptr::null_mut(), 0, aux, || {
        let (r, ptr) = call();
        let size = if r == CUDA_SUCCESS { mapped_size(ptr) } else { 0 };
        (r, ptr, aux, size)
    })
}

/// `cuIpcOpenMemHandle[_v2]`: another process's memory mapped here (`aux` = flags).
pub unsafe fn ipc_open(
    api: Api,
    real: unsafe extern "C" fn(*mut CUdeviceptr, CUipcMemHandle, u32) -> CUresult,
    dptr: *mut CUdeviceptr,
    handle: CUipcMemHandle,
    flags: u32,
) -> CUresult {
    record_import(api, u64::from(flags), || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(dptr, handle, flags);
            (r, out(r, dptr))
        }
    })
}

/// `cuMemPoolImportPointer` (`aux` = the imported pool): another process's stream-ordered
/// allocation mapped here, freed by `cuMemFree` or `cuMemFreeAsync`.
pub unsafe fn pool_import(
    api: Api,
    real: unsafe extern "C" fn(*mut CUdeviceptr, CUmemoryPool, *mut c_void) -> CUresult,
    dptr: *mut CUdeviceptr,
    pool: CUmemoryPool,
    data: *mut c_void,
) -> CUresult {
    record_import(api, pool as u64, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(dptr, pool, data);
            (r, out(r, dptr))
        }
    })
}

/// `cuImportExternalMemory`: an external memory object (its handle, the size the descriptor
/// gives), not this process's memory.
pub unsafe fn external_import(
    api: Api,
    real: unsafe extern "C" fn(*mut CUexternalMemory, *const CUDA_EXTERNAL_MEMORY_HANDLE_DESC) -> CUresult,
    ext: *mut CUexternalMemory,
    desc: *const CUDA_EXTERNAL_MEMORY_HANDLE_DESC,
) -> CUresult {
    // SAFETY: the descriptor is the program's, valid for the call (the driver reads it too).
    let size = unsafe { desc.as_ref() }.map_or(0, |d| d.size);
    record_alloc(api, std::ptr::null_mut(), size, 0, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(ext, desc);
            (r, out(r, ext) as u64)
        }
    })
}

/// `cuExternalMemoryGetMappedBuffer` (`aux` = the object): a buffer of the object mapped at a
/// device address, which the program frees with `cuMemFree`.
pub unsafe fn external_buffer(
    api: Api,
    real: unsafe extern "C" fn(*mut CUdeviceptr, CUexternalMemory, *const CUDA_EXTERNAL_MEMORY_BUFFER_DESC) -> CUresult,
    dptr: *mut CUdeviceptr,
    ext: CUexternalMemory,
    desc: *const CUDA_EXTERNAL_MEMORY_BUFFER_DESC,
) -> CUresult {
    // SAFETY: as in `external_import`.
    let size = unsafe { desc.as_ref() }.map_or(0, |d| d.size);
    record_alloc(api, std::ptr::null_mut(), size, ext as u64, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(dptr, ext, desc);
            (r, out(r, dptr))
        }
    })
}

/// `cuExternalMemoryGetMappedMipmappedArray` (`aux` = the object): a mipmapped array of the
/// object, which the program frees with `cuMipmappedArrayDestroy`.
pub unsafe fn external_array(
    api: Api,
    real: unsafe extern "C" fn(
        *mut CUmipmappedArray,
        CUexternalMemory,
        *const CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC,
    ) -> CUresult,
    array: *mut CUmipmappedArray,
    ext: CUexternalMemory,
    desc: *const CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC,
) -> CUresult {
    // SAFETY: as in `external_import`.
    let size = unsafe { desc.as_ref() }.map_or(0, |d| mipmapped_bytes(&d.array_desc, d.num_levels));
    record_alloc(api, std::ptr::null_mut(), size, ext as u64, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(array, ext, desc);
            (r, out(r, array) as u64)
        }
    })
}

/// `cuDestroyExternalMemory`.
pub unsafe fn external_destroy(
    api: Api,
    real: unsafe extern "C" fn(CUexternalMemory) -> CUresult,
    ext: CUexternalMemory,
) -> CUresult {
    record_free(api, std::ptr::null_mut(), ext as u64, 0, || {
        // SAFETY: the program's own arguments, passed through.
        unsafe { real(ext) }
    })
}

/// `cuIpcCloseMemHandle`.
pub unsafe fn ipc_close(api: Api, real: unsafe extern "C" fn(CUdeviceptr) -> CUresult, dptr: CUdeviceptr) -> CUresult {
    record_free(api, std::ptr::null_mut(), dptr, 0, || {
        // SAFETY: the driver's own function with the program's own arguments, passed through
        // unchanged (it has no out-parameters).
        unsafe { real(dptr) }
    })
}
