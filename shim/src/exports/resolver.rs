//! Door 3: the driver's resolvers. The runtime (shared and static), cuda-bindings and every
//! modern client get all driver functions from `cuGetProcAddress`; the wrapper asks the real
//! resolver with the caller's exact arguments, then hands out the wrapper of the exact
//! variant that came back (same name, same ABI), or the real pointer for anything untracked.

use std::ffi::{c_char, c_void, CStr};

use gpuleak_format::Api;

use crate::cuda::*;
use crate::table;

/// Replaces `*pfn` with the wrapper of the same variant, if tracked.
///
/// # Safety
/// `symbol` is NULL or a NUL-terminated name, and `pfn` NULL or a readable and writable place
/// into which a resolver call for `symbol` that succeeded just wrote the function it found
/// (`real_resolver`: the driver's resolver, which tells which driver it came from).
unsafe fn swap_in_wrapper(real_resolver: usize, symbol: *const c_char, pfn: *mut *mut c_void) {
    if pfn.is_null() || symbol.is_null() {
        return;
    }
    // SAFETY: the contract above, both checked not NULL: `pfn` holds the function the
    // resolver found, and `symbol` is a NUL-terminated name.
    let (found, name) = unsafe { (pfn.read() as usize, CStr::from_ptr(symbol).to_bytes()) };
    let wrapper = table::substitute_resolved(real_resolver, name, found);
    if wrapper != found {
        // SAFETY: the same place, written once more: the wrapper of the row whose real
        // function `found` is (matched by address), so of the identical signature.
        unsafe { pfn.write(wrapper as *mut c_void) };
    }
}

/// The address of the real resolver `api` (it identifies the driver; known: the wrapper
/// just called it).
fn real_resolver(api: Api) -> usize {
    api.name()
        .and_then(|n| table::by_name(n.as_bytes()))
        .map_or(0, |h| h.real())
}

/// `cuGetProcAddress` (CUDA 11.3 ABI, four arguments).
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `symbol` is NULL or a NUL-terminated name, and
/// `pfn` NULL or the program's place for one function pointer, which a successful call fills in.
pub unsafe fn get_proc_address(
    api: Api,
    real: impl FnOnce() -> CUresult,
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    _version: i32,
    _flags: u64,
) -> CUresult {
    let r = real();
    if r == CUDA_SUCCESS {
        // SAFETY: the contract above: the call succeeded, so the driver wrote the function it
        // found for `symbol` into `pfn` (when not NULL).
        unsafe { swap_in_wrapper(real_resolver(api), symbol, pfn) };
    }
    r
}

/// `cuGetProcAddress_v2` and `cuGetProcAddress_v2_ptsz` (five arguments, the last a
/// status pointer that may be NULL).
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `symbol` is NULL or a NUL-terminated name, and
/// `pfn` NULL or the program's place for one function pointer, which a successful call fills in.
pub unsafe fn get_proc_address_v2(
    api: Api,
    real: impl FnOnce() -> CUresult,
    symbol: *const c_char,
    pfn: *mut *mut c_void,
    _version: i32,
    _flags: u64,
    _status: *mut i32,
) -> CUresult {
    let r = real();
    if r == CUDA_SUCCESS {
        // SAFETY: as in `get_proc_address`.
        unsafe { swap_in_wrapper(real_resolver(api), symbol, pfn) };
    }
    r
}

/// Used by the runtime's `cudaGetDriverEntryPoint*`, whose answers are driver functions.
///
/// # Safety
/// As [`swap_in_wrapper`]'s: `pfn` is NULL or the place into which a successful
/// `cudaGetDriverEntryPoint*` call for `symbol` just wrote a driver function.
pub unsafe fn swap_driver_entry(symbol: *const c_char, pfn: *mut *mut c_void) {
    let resolver = table::by_name(b"cuGetProcAddress_v2").map_or(0, |h| h.real());
    // SAFETY: the contract above; the runtime's answer is found by the driver's own
    // resolver, named here.
    unsafe { swap_in_wrapper(resolver, symbol, pfn) };
}
