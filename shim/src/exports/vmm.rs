//! Virtual memory management: address reservations, physical handles (created, retained,
//! imported, multicast), and their mappings.
//!
//! Every handler is `unsafe` with the contract of `memory`'s: `real` is the driver function the
//! handler is named for, and the other arguments are the program's, passed through unchanged.

use std::ffi::c_void;

use gpuleak_format::{Api, CuResult, Map, MemLocation, Ptr, Stream, Unmap};

use super::memory::{out, record_alloc, record_free};
use crate::cuda::*;
use crate::{guard, ops, tracer};

/// `cuMemAddressReserve` (`aux` = alignment): address space only, no memory.
pub unsafe fn address_reserve(
    api: Api,
    real: unsafe extern "C" fn(*mut CUdeviceptr, usize, usize, CUdeviceptr, u64) -> CUresult,
    ptr: *mut CUdeviceptr,
    size: usize,
    align: usize,
    addr: CUdeviceptr,
    flags: u64,
) -> CUresult {
    record_alloc(api, std::ptr::null_mut(), size as u64, align as u64, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(ptr, size, align, addr, flags);
            (r, out(r, ptr))
        }
    })
}

/// `cuMemAddressFree`.
pub unsafe fn address_free(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, usize) -> CUresult,
    ptr: CUdeviceptr,
    size: usize,
) -> CUresult {
    record_free(api, std::ptr::null_mut(), ptr, size as u64, || {
        // SAFETY: the driver's own function with the program's own arguments, passed through
        // unchanged (it has no out-parameters).
        unsafe { real(ptr, size) }
    })
}

/// `cuMemCreate`: physical memory, identified by its handle; `aux` is where the properties put
/// it ([`MemLocation`]: a device, not always the current one, or host memory).
pub unsafe fn create(
    api: Api,
    real: unsafe extern "C" fn(*mut CUmemGenericAllocationHandle, usize, *const c_void, u64) -> CUresult,
    handle: *mut CUmemGenericAllocationHandle,
    size: usize,
    prop: *const c_void,
    flags: u64,
) -> CUresult {
    // SAFETY: the properties are the program's, valid for the call (the driver reads them too);
    // only their first 16 bytes, which every version of the structure has, are read.
    let location = unsafe { prop.cast::<CUmemAllocationPropHead>().as_ref() }
        .map_or(0, |p| MemLocation::encode(p.location_type, p.location_id));
    record_alloc(api, std::ptr::null_mut(), size as u64, location, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(handle, size, prop, flags);
            (r, out(r, handle))
        }
    })
}

/// `cuMemRetainAllocationHandle`: one more reference to the handle mapped at `addr` (the same
/// handle value), which needs a `cuMemRelease` of its own; recorded as an `Alloc` record of
/// that API (`ptr`: the handle, `aux`: the address), with no size.
pub unsafe fn retain(
    api: Api,
    real: unsafe extern "C" fn(*mut CUmemGenericAllocationHandle, *mut c_void) -> CUresult,
    handle: *mut CUmemGenericAllocationHandle,
    addr: *mut c_void,
) -> CUresult {
    let Some(g) = guard::enter() else {
        // SAFETY: passed through.
        return unsafe { real(handle, addr) };
    };
    // SAFETY: passed through; the out-parameter is read only after the driver reported success.
    let (r, h) = unsafe {
        let r = real(handle, addr);
        (r, out(r, handle))
    };
    tracer::alloc(&g, api, r, Stream(0), h, 0, addr as u64);
    if r == CUDA_SUCCESS {
        ops::retained(&g, api, h);
    }
    r
}

/// `cuMemImportFromShareableHandle`: a handle to memory another process (or this one)
/// created; `aux` is the handle type. No size: the memory is its exporter's.
pub unsafe fn import(
    api: Api,
    real: unsafe extern "C" fn(*mut CUmemGenericAllocationHandle, *mut c_void, u32) -> CUresult,
    handle: *mut CUmemGenericAllocationHandle,
    os_handle: *mut c_void,
    kind: u32,
) -> CUresult {
    record_alloc(api, std::ptr::null_mut(), 0, u64::from(kind), || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(handle, os_handle, kind);
            (r, out(r, handle))
        }
    })
}

/// `cuMulticastCreate`: `size` is the most memory each device may bind to the object.
pub unsafe fn multicast_create(
    api: Api,
    real: unsafe extern "C" fn(*mut CUmemGenericAllocationHandle, *const CUmulticastObjectProp) -> CUresult,
    handle: *mut CUmemGenericAllocationHandle,
    prop: *const CUmulticastObjectProp,
) -> CUresult {
    // SAFETY: the properties are the program's, valid for the call (the driver reads them too).
    let (size, devices) = unsafe { prop.as_ref() }.map_or((0, 0), |p| (p.size as u64, u64::from(p.num_devices)));
    record_alloc(api, std::ptr::null_mut(), size, devices, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(handle, prop);
            (r, out(r, handle))
        }
    })
}

/// `cuMemRelease`: the memory lives on while a mapping of it remains.
pub unsafe fn release(
    api: Api,
    real: unsafe extern "C" fn(CUmemGenericAllocationHandle) -> CUresult,
    handle: CUmemGenericAllocationHandle,
) -> CUresult {
    record_free(api, std::ptr::null_mut(), handle, 0, || {
        // SAFETY: the driver's own function with the program's own arguments, passed through
        // unchanged (it has no out-parameters).
        unsafe { real(handle) }
    })
}

/// `cuMemMap`.
pub unsafe fn map(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, usize, usize, CUmemGenericAllocationHandle, u64) -> CUresult,
    ptr: CUdeviceptr,
    size: usize,
    offset: usize,
    handle: CUmemGenericAllocationHandle,
    flags: u64,
) -> CUresult {
    let Some(g) = guard::enter() else {
        // SAFETY: passed through.
        return unsafe { real(ptr, size, offset, handle, flags) };
    };
    // SAFETY: passed through.
    let r = unsafe { real(ptr, size, offset, handle, flags) };
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
pub unsafe fn unmap(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, usize) -> CUresult,
    ptr: CUdeviceptr,
    size: usize,
) -> CUresult {
    let Some(g) = guard::enter() else {
        // SAFETY: passed through.
        return unsafe { real(ptr, size) };
    };
    let pending = tracer::before(&g);
    // SAFETY: passed through.
    let r = unsafe { real(ptr, size) };
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
