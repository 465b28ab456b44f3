//! Runtime entry points of a shared `libcudart`: interposed only to tag the driver records
//! they cause with the call the program made (`cudaMalloc` → `cuMemAlloc_v2`). They never
//! record anything themselves, so nothing is counted twice.

use std::ffi::{c_char, c_void};

use gpuleak_format::Api;

use crate::cuda::CUresult;
use crate::guard;

/// `cudaErrorInitializationError`, returned only if no runtime can be found at all.
pub const ERROR_INITIALIZATION: CUresult = 3;

macro_rules! tags {
    ($($(#[$doc:meta])* $name:ident ($($arg:ident : $ty:ident),*);)*) => {$(
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        pub fn $name<$($ty),*>(
            api: Api,
            real: impl FnOnce() -> CUresult,
            $(_: $ty),*
        ) -> CUresult {
            guard::with_via(api, real)
        }
    )*};
}

tags! {
    /// A runtime call with no arguments.
    tag0();
    /// A runtime call with one argument.
    tag1(a: A);
    /// A runtime call with two arguments.
    tag2(a: A, b: B);
    /// A runtime call with three arguments.
    tag3(a: A, b: B, c: C);
    /// A runtime call with four arguments.
    tag4(a: A, b: B, c: C, d: D);
    /// A runtime call with five arguments.
    tag5(a: A, b: B, c: C, d: D, e: E);
    /// A runtime call with six arguments.
    tag6(a: A, b: B, c: C, d: D, e: E, f: F);
}

/// `cudaGetDriverEntryPoint`: a driver function handed out by the runtime.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `symbol` is NULL or a NUL-terminated name, and `fp`
/// NULL or the program's place for one function pointer, which a successful call fills in with a
/// driver function.
pub unsafe fn entry_point(
    _api: Api,
    real: impl FnOnce() -> CUresult,
    symbol: *const c_char,
    fp: *mut *mut c_void,
    _flags: u64,
    _status: *mut i32,
) -> CUresult {
    // The fourth argument is passed on too: runtimes before 12.0 ignore it.
    let r = real();
    if r == 0 {
        // SAFETY: the contract above: the call succeeded, so the runtime wrote a driver
        // function for `symbol` into `fp` (when not NULL).
        unsafe { super::resolver::swap_driver_entry(symbol, fp) };
    }
    r
}

/// `cudaGetDriverEntryPointByVersion`.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `symbol` is NULL or a NUL-terminated name, and `fp`
/// NULL or the program's place for one function pointer, which a successful call fills in with a
/// driver function.
pub unsafe fn entry_point_by_version(
    _api: Api,
    real: impl FnOnce() -> CUresult,
    symbol: *const c_char,
    fp: *mut *mut c_void,
    _version: u32,
    _flags: u64,
    _status: *mut i32,
) -> CUresult {
    let r = real();
    if r == 0 {
        // SAFETY: the contract above: the call succeeded, so the runtime wrote a driver
        // function for `symbol` into `fp` (when not NULL).
        unsafe { super::resolver::swap_driver_entry(symbol, fp) };
    }
    r
}
