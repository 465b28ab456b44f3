//! Handlers of the allocation families a program allocates itself: device, pitched, managed,
//! host pinned, registered, stream-ordered and arrays, and the helpers every allocation
//! handler records with (`pools`, `vmm` and `imports` hold the rest).
//!
//! Every handler gets `real`, the call the program made (the driver function the handler is
//! named for, with the program's arguments), to make at most once, and the program's
//! arguments; out-parameters come as [`Out`], read only after the driver reported success.
//! Handlers that read the program's input pointers (descriptors) are `unsafe`: the
//! arguments must be the program's arguments to that driver function.

use std::ffi::c_void;

use gpuleak_format::{Api, Stream};

use super::pools::{is_tracked_pool, pool_of_pointer, pool_sample_next, sample_pool};
use crate::config::CUDA_ERROR_OUT_OF_MEMORY;
use crate::cuda::*;
use crate::{guard, ops, tracer};

/// Allocation recorded after the driver returned; `call` makes the real call and returns
/// (result, pointer or handle, aux, size recorded). `size` is what the program asked for
/// (0 where the call does not say). With an operations feature on (budget, fault injection,
/// live accounting: `ops::flags() != 0`) the call goes through `ops::alloc`, which may refuse
/// it without calling the driver.
#[inline]
pub(super) fn record_alloc_sized(
    api: Api,
    stream: CUstream,
    size: u64,
    aux: u64,
    call: impl FnOnce() -> (CUresult, u64, u64, u64),
) -> CUresult {
    let Some(g) = guard::enter() else {
        return call().0;
    };
    let f = ops::flags();
    if f != 0 {
        return ops::alloc(&g, f, api, Stream(stream as u64), size, aux, call);
    }
    let (r, ptr, aux, size) = call();
    tracer::alloc(&g, api, r, Stream(stream as u64), ptr, size, aux);
    if r == CUDA_ERROR_OUT_OF_MEMORY {
        ops::out_of_memory_plain(&g, api, size);
    }
    r
}

/// [`record_alloc_sized`] for calls that record the size the program asked for; `call`
/// returns (result, pointer or handle, aux).
#[inline]
fn record_alloc_with(
    api: Api,
    stream: CUstream,
    size: u64,
    aux: u64,
    call: impl FnOnce() -> (CUresult, u64, u64),
) -> CUresult {
    record_alloc_sized(api, stream, size, aux, || {
        let (r, ptr, aux) = call();
        (r, ptr, aux, size)
    })
}

/// [`record_alloc_with`] for calls whose aux is known before the call.
#[inline]
pub(super) fn record_alloc(
    api: Api,
    stream: CUstream,
    size: u64,
    aux: u64,
    call: impl FnOnce() -> (CUresult, u64),
) -> CUresult {
    record_alloc_with(api, stream, size, aux, || {
        let (r, ptr) = call();
        (r, ptr, aux)
    })
}

/// Free recorded with a sequence number taken before the driver call, so that it orders
/// before any allocation that reuses the address.
#[inline]
pub(super) fn record_free(
    api: Api,
    stream: CUstream,
    ptr: u64,
    size: u64,
    call: impl FnOnce() -> CUresult,
) -> CUresult {
    let Some(g) = guard::enter() else {
        return call();
    };
    let f = ops::flags();
    let pending = tracer::before(&g);
    let r = if f != 0 {
        ops::free(&g, f, api, Stream(stream as u64), ptr, call)
    } else {
        call()
    };
    tracer::free(&g, pending, api, r, Stream(stream as u64), ptr, size);
    r
}

/// `cuMemAlloc_v2`.
pub fn alloc(api: Api, real: impl FnOnce() -> CUresult, dptr: Out<CUdeviceptr>, size: usize) -> CUresult {
    record_alloc(api, std::ptr::null_mut(), size as u64, 0, || {
        let r = real();
        (r, dptr.after(r).unwrap_or_default())
    })
}

/// `cuMemAllocPitch_v2`: the program asked for width x height bytes; `aux` keeps the pitch.
pub fn alloc_pitch(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dptr: Out<CUdeviceptr>,
    pitch: Out<usize>,
    width: usize,
    height: usize,
    _elem: u32,
) -> CUresult {
    let size = (width as u64).saturating_mul(height as u64);
    record_alloc_with(api, std::ptr::null_mut(), size, 0, || {
        let r = real();
        (
            r,
            dptr.after(r).unwrap_or_default(),
            pitch.after(r).unwrap_or_default() as u64,
        )
    })
}

/// `cuMemAllocManaged` (`aux` = flags).
pub fn alloc_flags(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dptr: Out<CUdeviceptr>,
    size: usize,
    flags: u32,
) -> CUresult {
    record_alloc(api, std::ptr::null_mut(), size as u64, u64::from(flags), || {
        let r = real();
        (r, dptr.after(r).unwrap_or_default())
    })
}

/// `cuMemFree_v2`.
pub fn free(api: Api, real: impl FnOnce() -> CUresult, dptr: CUdeviceptr) -> CUresult {
    record_free(api, std::ptr::null_mut(), dptr, 0, real)
}

/// `cuMemAllocHost_v2`.
pub fn alloc_host(api: Api, real: impl FnOnce() -> CUresult, pp: Out<*mut c_void>, size: usize) -> CUresult {
    record_alloc(api, std::ptr::null_mut(), size as u64, 0, || {
        let r = real();
        (r, pp.after(r).map_or(0, |v| v as u64))
    })
}

/// `cuMemHostAlloc` (`aux` = flags).
pub fn host_alloc(
    api: Api,
    real: impl FnOnce() -> CUresult,
    pp: Out<*mut c_void>,
    size: usize,
    flags: u32,
) -> CUresult {
    record_alloc(api, std::ptr::null_mut(), size as u64, u64::from(flags), || {
        let r = real();
        (r, pp.after(r).map_or(0, |v| v as u64))
    })
}

/// `cuMemFreeHost`, `cuMemHostUnregister`.
pub fn free_host(api: Api, real: impl FnOnce() -> CUresult, p: *mut c_void) -> CUresult {
    record_free(api, std::ptr::null_mut(), p as u64, 0, real)
}

/// `cuMemHostRegister_v2`: the program's own memory, page-locked in place.
pub fn host_register(api: Api, real: impl FnOnce() -> CUresult, p: *mut c_void, size: usize, flags: u32) -> CUresult {
    record_alloc(api, std::ptr::null_mut(), size as u64, u64::from(flags), || {
        let r = real();
        (r, if r == CUDA_SUCCESS { p as u64 } else { 0 })
    })
}

/// `cuMemAllocAsync[_ptsz]`.
pub fn alloc_async(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dptr: Out<CUdeviceptr>,
    size: usize,
    stream: CUstream,
) -> CUresult {
    let r = record_alloc(api, stream, size as u64, 0, || {
        let r = real();
        (r, dptr.after(r).unwrap_or_default())
    });
    super::graph_nodes::after_memory(api, r, stream);
    sample_pool(r, 0);
    r
}

/// `cuMemAllocFromPoolAsync[_ptsz]` (`aux` = pool).
pub fn alloc_pool(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dptr: Out<CUdeviceptr>,
    size: usize,
    pool: CUmemoryPool,
    stream: CUstream,
) -> CUresult {
    let r = record_alloc(api, stream, size as u64, pool as u64, || {
        let r = real();
        (r, dptr.after(r).unwrap_or_default())
    });
    super::graph_nodes::after_memory(api, r, stream);
    sample_pool(r, pool as u64);
    r
}

/// `cuMemFreeAsync[_ptsz]`.
pub fn free_async(api: Api, real: impl FnOnce() -> CUresult, dptr: CUdeviceptr, stream: CUstream) -> CUresult {
    // A sample after this free should read the pool the memory came from, which only the
    // pointer still names before the free.
    let pool = if pool_sample_next() { pool_of_pointer(dptr) } else { 0 };
    // Only a pool the shim saw created and not destroyed: a pool destroyed while allocations
    // were outstanding goes away with the last one's free, so its handle must not be asked
    // about after this call. Any other pool (the default one) is found again by the device.
    let pool = if is_tracked_pool(pool) { pool } else { 0 };
    let r = record_free(api, stream, dptr, 0, real);
    super::graph_nodes::after_memory(api, r, stream);
    sample_pool(r, pool);
    r
}

/// `cuArrayCreate_v2`: `size` is the bytes the array's dimensions need.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `desc` is NULL or the program's array descriptor.
pub unsafe fn array_create(
    api: Api,
    real: impl FnOnce() -> CUresult,
    array: Out<CUarray>,
    desc: *const CUDA_ARRAY_DESCRIPTOR,
) -> CUresult {
    // SAFETY: the contract above: NULL or the program's descriptor, readable while its call
    // runs (the driver reads it too).
    let size = unsafe { desc.as_ref() }.map_or(0, |d| array_bytes(d.width, d.height, 1, d.format, d.num_channels));
    record_alloc(api, std::ptr::null_mut(), size, 0, || {
        let r = real();
        (r, array.after(r).unwrap_or_default() as u64)
    })
}

/// `cuArray3DCreate_v2`.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `desc` is NULL or the program's array descriptor.
pub unsafe fn array3d_create(
    api: Api,
    real: impl FnOnce() -> CUresult,
    array: Out<CUarray>,
    desc: *const CUDA_ARRAY3D_DESCRIPTOR,
) -> CUresult {
    // SAFETY: the contract above: NULL or the program's descriptor, readable while its call
    // runs (the driver reads it too).
    let size =
        unsafe { desc.as_ref() }.map_or(0, |d| array_bytes(d.width, d.height, d.depth, d.format, d.num_channels));
    record_alloc(api, std::ptr::null_mut(), size, 0, || {
        let r = real();
        (r, array.after(r).unwrap_or_default() as u64)
    })
}

/// `cuMipmappedArrayCreate`: one allocation of every level's bytes, at the handle.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `desc` is NULL or the program's array descriptor.
pub unsafe fn mipmapped_create(
    api: Api,
    real: impl FnOnce() -> CUresult,
    array: Out<CUmipmappedArray>,
    desc: *const CUDA_ARRAY3D_DESCRIPTOR,
    levels: u32,
) -> CUresult {
    // SAFETY: the contract above: NULL or the program's descriptor, readable while its call
    // runs (the driver reads it too).
    let size = unsafe { desc.as_ref() }.map_or(0, |d| mipmapped_bytes(d, levels));
    record_alloc(api, std::ptr::null_mut(), size, 0, || {
        let r = real();
        (r, array.after(r).unwrap_or_default() as u64)
    })
}

/// `cuArrayDestroy`, `cuMipmappedArrayDestroy`.
pub fn array_destroy(api: Api, real: impl FnOnce() -> CUresult, array: CUarray) -> CUresult {
    record_free(api, std::ptr::null_mut(), array as u64, 0, real)
}
