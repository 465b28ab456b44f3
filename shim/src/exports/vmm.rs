//! Virtual memory management: address reservations, physical handles (created, retained,
//! imported, multicast), and their mappings.
//!
//! Handlers get the call the program made (`real`) and its arguments, as `memory`'s do; those
//! that read an input pointer are `unsafe`: the arguments must be the program's.

use std::ffi::c_void;

use gpuleak_format::{Api, CuResult, Map, MemLocation, Ptr, Stream, Unmap};

use super::memory::{record_alloc, record_free};
use crate::cuda::*;
use crate::{guard, ops, tracer};

/// `cuMemAddressReserve` (`aux` = alignment): address space only, no memory.
pub fn address_reserve(
    api: Api,
    real: impl FnOnce() -> CUresult,
    ptr: Out<CUdeviceptr>,
    size: usize,
    align: usize,
    _addr: CUdeviceptr,
    _flags: u64,
) -> CUresult {
    record_alloc(api, std::ptr::null_mut(), size as u64, align as u64, || {
        let r = real();
        (r, ptr.after(r).unwrap_or_default())
    })
}

/// `cuMemAddressFree`.
pub fn address_free(api: Api, real: impl FnOnce() -> CUresult, ptr: CUdeviceptr, size: usize) -> CUresult {
    record_free(api, std::ptr::null_mut(), ptr, size as u64, real)
}

/// `cuMemCreate`: physical memory, identified by its handle; `aux` is where the properties put
/// it ([`MemLocation`]: a device, not always the current one, or host memory).
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `prop` is NULL or the program's allocation
/// properties (a `CUmemAllocationProp` of any version).
pub unsafe fn create(
    api: Api,
    real: impl FnOnce() -> CUresult,
    handle: Out<CUmemGenericAllocationHandle>,
    size: usize,
    prop: *const c_void,
    _flags: u64,
) -> CUresult {
    // SAFETY: the contract above: NULL or the program's properties, readable while its call
    // runs (the driver reads them too); only their first 16 bytes, which every version of the structure has, are read.
    let location = unsafe { prop.cast::<CUmemAllocationPropHead>().as_ref() }
        .map_or(0, |p| MemLocation::encode(p.location_type, p.location_id));
    record_alloc(api, std::ptr::null_mut(), size as u64, location, || {
        let r = real();
        (r, handle.after(r).unwrap_or_default())
    })
}

/// `cuMemRetainAllocationHandle`: one more reference to the handle mapped at `addr` (the same
/// handle value), which needs a `cuMemRelease` of its own; recorded as an `Alloc` record of
/// that API (`ptr`: the handle, `aux`: the address), with no size.
pub fn retain(
    api: Api,
    real: impl FnOnce() -> CUresult,
    handle: Out<CUmemGenericAllocationHandle>,
    addr: *mut c_void,
) -> CUresult {
    let Some(g) = guard::enter() else {
        return real();
    };
    let (r, h) = {
        let r = real();
        (r, handle.after(r).unwrap_or_default())
    };
    tracer::alloc(&g, api, r, Stream(0), h, 0, addr as u64);
    if r == CUDA_SUCCESS {
        ops::retained(&g, api, h);
    }
    r
}

/// `cuMemImportFromShareableHandle`: a handle to memory another process (or this one)
/// created; `aux` is the handle type. No size: the memory is its exporter's.
pub fn import(
    api: Api,
    real: impl FnOnce() -> CUresult,
    handle: Out<CUmemGenericAllocationHandle>,
    _os_handle: *mut c_void,
    kind: u32,
) -> CUresult {
    record_alloc(api, std::ptr::null_mut(), 0, u64::from(kind), || {
        let r = real();
        (r, handle.after(r).unwrap_or_default())
    })
}

/// `cuMulticastCreate`: `size` is the most memory each device may bind to the object.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `prop` is NULL or the program's multicast
/// properties.
pub unsafe fn multicast_create(
    api: Api,
    real: impl FnOnce() -> CUresult,
    handle: Out<CUmemGenericAllocationHandle>,
    prop: *const CUmulticastObjectProp,
) -> CUresult {
    // SAFETY: the contract above: NULL or the program's properties, readable while its call
    // runs (the driver reads them too).
    let (size, devices) = unsafe { prop.as_ref() }.map_or((0, 0), |p| (p.size as u64, u64::from(p.num_devices)));
    record_alloc(api, std::ptr::null_mut(), size, devices, || {
        let r = real();
        (r, handle.after(r).unwrap_or_default())
    })
}

/// `cuMemRelease`: the memory lives on while a mapping of it remains.
pub fn release(api: Api, real: impl FnOnce() -> CUresult, handle: CUmemGenericAllocationHandle) -> CUresult {
    record_free(api, std::ptr::null_mut(), handle, 0, real)
}

/// `cuMemMap`.
pub fn map(
    api: Api,
    real: impl FnOnce() -> CUresult,
    ptr: CUdeviceptr,
    size: usize,
    offset: usize,
    handle: CUmemGenericAllocationHandle,
    _flags: u64,
) -> CUresult {
    let Some(g) = guard::enter() else {
        return real();
    };
    let r = real();
    let body = Map {
        api,
        result: CuResult(r),
        ptr: Ptr(ptr),
        size: size as u64,
        offset: offset as u64,
        handle,
    };
    tracer::event(&g, body);
    r
}

/// `cuMemUnmap`.
pub fn unmap(api: Api, real: impl FnOnce() -> CUresult, ptr: CUdeviceptr, size: usize) -> CUresult {
    let Some(g) = guard::enter() else {
        return real();
    };
    let pending = tracer::before(&g);
    let r = real();
    tracer::event_at(
        &g,
        pending,
        Unmap {
            api,
            result: CuResult(r),
            ptr: Ptr(ptr),
            size: size as u64,
        },
    );
    r
}
