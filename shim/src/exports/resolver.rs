//! Door 3: the driver's resolvers. The runtime (shared and static), cuda-bindings and every
//! modern client get all driver functions from `cuGetProcAddress`; the wrapper asks the real
//! resolver with the caller's exact arguments, then hands out the wrapper of the exact
//! variant that came back (same name, same ABI), or the real pointer for anything untracked.

use std::ffi::{c_char, c_void, CStr};

use gpuleak_format::Api;

use crate::cuda::*;
use crate::table;

/// Replaces `*pfn` with the wrapper of the same variant, if tracked.
unsafe fn swap_in_wrapper(real_resolver: usize, symbol: *const c_char, pfn: *mut *mut c_void) {
    if pfn.is_null() || symbol.is_null() {
        return;
    }
    // SAFETY: the resolver succeeded, so `pfn` holds the function it found; `symbol` is the
    // caller's NUL-terminated name.
    let (found, name) = unsafe { (pfn.read() as usize, CStr::from_ptr(symbol).to_bytes()) };
    let wrapper = table::substitute_resolved(real_resolver, name, found);
    if wrapper != found {
        // SAFETY: same out-parameter, now holding a function of the identical signature.
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
        // SAFETY: as the function's contract says, on success `pfn` was written.
        unsafe { swap_in_wrapper(real_resolver(api), symbol, pfn) };
    }
    r
}

/// `cuGetProcAddress_v2` and `cuGetProcAddress_v2_ptsz` (five arguments, the last a
/// status pointer that may be NULL).
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
        // SAFETY: as above.
        unsafe { swap_in_wrapper(real_resolver(api), symbol, pfn) };
    }
    r
}

/// Used by the runtime's `cudaGetDriverEntryPoint*`, whose answers are driver functions.
pub unsafe fn swap_driver_entry(symbol: *const c_char, pfn: *mut *mut c_void) {
    let resolver = table::by_name(b"cuGetProcAddress_v2").map_or(0, |h| h.real());
    // SAFETY: forwarded contract of the caller.
    unsafe { swap_in_wrapper(resolver, symbol, pfn) };
}
