//! Memory another process or API made, mapped here: IPC handles, pool imports and external
//! memory (buffers and mipmapped arrays), whose size the driver tells only afterwards.
//!
//! Handlers get the call the program made (`real`) and its arguments, as `memory`'s do; those
//! that read an input pointer are `unsafe`: the arguments must be the program's.

use std::ffi::c_void;

use gpuleak_format::Api;

use super::memory::{record_alloc, record_alloc_sized, record_free};
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
    let Some(f) = crate::dlsym::driver_fn(crate::dlsym::Getter::cuMemGetAddressRange_v2) else {
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
pub fn ipc_open(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dptr: Out<CUdeviceptr>,
    _handle: CUipcMemHandle,
    flags: u32,
) -> CUresult {
    record_import(api, u64::from(flags), || {
        let r = real();
        (r, dptr.after(r).unwrap_or_default())
    })
}

/// `cuMemPoolImportPointer` (`aux` = the imported pool): another process's stream-ordered
/// allocation mapped here, freed by `cuMemFree` or `cuMemFreeAsync`.
pub fn pool_import(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dptr: Out<CUdeviceptr>,
    pool: CUmemoryPool,
    _data: *mut c_void,
) -> CUresult {
    record_import(api, pool as u64, || {
        let r = real();
        (r, dptr.after(r).unwrap_or_default())
    })
}

/// `cuImportExternalMemory`: an external memory object (its handle, the size the descriptor
/// gives), not this process's memory.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `desc` is NULL or the program's handle descriptor.
pub unsafe fn external_import(
    api: Api,
    real: impl FnOnce() -> CUresult,
    ext: Out<CUexternalMemory>,
    desc: *const CUDA_EXTERNAL_MEMORY_HANDLE_DESC,
) -> CUresult {
    // SAFETY: the contract above: NULL or the program's descriptor, readable while its call
    // runs (the driver reads it too).
    let size = unsafe { desc.as_ref() }.map_or(0, |d| d.size);
    record_alloc(api, std::ptr::null_mut(), size, 0, || {
        let r = real();
        (r, ext.after(r).unwrap_or_default() as u64)
    })
}

/// `cuExternalMemoryGetMappedBuffer` (`aux` = the object): a buffer of the object mapped at a
/// device address, which the program frees with `cuMemFree`.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `desc` is NULL or the program's buffer descriptor.
pub unsafe fn external_buffer(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dptr: Out<CUdeviceptr>,
    ext: CUexternalMemory,
    desc: *const CUDA_EXTERNAL_MEMORY_BUFFER_DESC,
) -> CUresult {
    // SAFETY: the contract above, as in `external_import`.
    let size = unsafe { desc.as_ref() }.map_or(0, |d| d.size);
    record_alloc(api, std::ptr::null_mut(), size, ext as u64, || {
        let r = real();
        (r, dptr.after(r).unwrap_or_default())
    })
}

/// `cuExternalMemoryGetMappedMipmappedArray` (`aux` = the object): a mipmapped array of the
/// object, which the program frees with `cuMipmappedArrayDestroy`.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `desc` is NULL or the program's mipmapped-array
/// descriptor.
pub unsafe fn external_array(
    api: Api,
    real: impl FnOnce() -> CUresult,
    array: Out<CUmipmappedArray>,
    ext: CUexternalMemory,
    desc: *const CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC,
) -> CUresult {
    // SAFETY: the contract above, as in `external_import`.
    let size = unsafe { desc.as_ref() }.map_or(0, |d| mipmapped_bytes(&d.array_desc, d.num_levels));
    record_alloc(api, std::ptr::null_mut(), size, ext as u64, || {
        let r = real();
        (r, array.after(r).unwrap_or_default() as u64)
    })
}

/// `cuDestroyExternalMemory`.
pub fn external_destroy(api: Api, real: impl FnOnce() -> CUresult, ext: CUexternalMemory) -> CUresult {
    record_free(api, std::ptr::null_mut(), ext as u64, 0, real)
}

/// `cuIpcCloseMemHandle`.
pub fn ipc_close(api: Api, real: impl FnOnce() -> CUresult, dptr: CUdeviceptr) -> CUresult {
    record_free(api, std::ptr::null_mut(), dptr, 0, real)
}
