//! The table of intercepted entry points: one row per exact exported variant, holding the
//! real function's address once known and the shim's wrapper.
//!
//! Rows are generated from the single list in `exports/mod.rs` by [`driver_hooks!`] (and
//! `runtime_hooks!`), which also generates the exported wrapper functions themselves.

use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::dl;

/// Which library a hooked function lives in.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Lib {
    /// `libcuda.so*`: handed out by `dlsym` and the resolvers.
    Driver,
    /// `libcudart.so*`: only tags driver records.
    Runtime,
}

/// One intercepted function.
pub struct Hook {
    /// Exported symbol name.
    pub name: &'static CStr,
    /// Library it belongs to.
    pub lib: Lib,
    wrapper: *const (),
    real: AtomicUsize,
}

// SAFETY: `wrapper` is the address of a function with static lifetime, never written after
// construction; `real` is atomic.
unsafe impl Sync for Hook {}

impl Hook {
    /// A row; used by the generating macros only.
    pub const fn new(name: &'static CStr, lib: Lib, wrapper: *const ()) -> Hook {
        Hook {
            name,
            lib,
            wrapper,
            real: AtomicUsize::new(0),
        }
    }

    /// Address of the shim's wrapper.
    pub fn wrapper(&self) -> usize {
        self.wrapper as usize
    }

    /// Address of the real function if known.
    pub fn real(&self) -> usize {
        self.real.load(Ordering::Acquire)
    }

    /// Records the real function (first writer wins: one driver per process).
    pub fn set_real(&self, addr: usize) {
        if addr != 0 && addr != self.wrapper() {
            let _ = self.real.compare_exchange(0, addr, Ordering::AcqRel, Ordering::Acquire);
        }
    }

    /// The real function, looking it up if no door has seen it yet: in the `libcuda` the
    /// process already uses, else in the libraries loaded after the shim.
    pub fn real_or_lookup(&self) -> usize {
        let known = self.real();
        if known != 0 {
            return known;
        }
        let found = match self.lib {
            Lib::Driver => {
                let handle = dl::libcuda();
                let mut p = if handle.is_null() {
                    std::ptr::null_mut()
                } else {
                    dl::real_dlsym(handle, self.name)
                };
                if p.is_null() {
                    p = dl::real_dlsym(RTLD_NEXT, self.name);
                }
                p as usize
            }
            Lib::Runtime => crate::exports::runtime::find_real(self.name),
        };
        self.set_real(found);
        self.real()
    }
}

const RTLD_NEXT: *mut c_void = -1isize as *mut c_void;

/// Looks up the real function of every driver row no door has seen yet (at the start of
/// tracing: see [`dl::resolve_up_front`]).
pub fn resolve_driver_rows() {
    for h in crate::exports::HOOKS.iter().filter(|h| h.lib == Lib::Driver) {
        let _ = h.real_or_lookup();
    }
}

/// Finds a row by exported name.
pub fn by_name(name: &[u8]) -> Option<&'static Hook> {
    // Cheap filter first: every hooked name starts with "cu".
    if name.len() < 3 || name[0] != b'c' || name[1] != b'u' {
        return None;
    }
    crate::exports::HOOKS.iter().find(|h| h.name.to_bytes() == name)
}

/// Fills in the real address of every driver row from the `libcuda` handle, once.
fn fill_driver_rows() {
    static FILLED: AtomicUsize = AtomicUsize::new(0);
    let handle = dl::libcuda();
    if handle.is_null() || FILLED.load(Ordering::Acquire) == handle as usize {
        return;
    }
    for h in crate::exports::HOOKS.iter().filter(|h| h.lib == Lib::Driver) {
        if h.real() == 0 {
            h.set_real(dl::real_dlsym(handle, h.name) as usize);
        }
    }
    FILLED.store(handle as usize, Ordering::Release);
}

/// Count of resolver answers for tracked names that matched no known variant (a coverage
/// hole: a variant newer than this shim).
pub static UNKNOWN_VARIANTS: AtomicUsize = AtomicUsize::new(0);

/// Maps a function pointer that a resolver returned to the wrapper of the same exact
/// variant, or returns it unchanged. `resolver` is the real resolver's address, which
/// identifies the driver.
pub fn substitute_resolved(resolver: usize, symbol: &[u8], addr: usize) -> usize {
    if addr == 0 {
        return 0;
    }
    if dl::libcuda().is_null() {
        dl::in_libcuda(resolver as *const c_void);
    }
    fill_driver_rows();
    let rows = crate::exports::HOOKS.iter().filter(|h| h.lib == Lib::Driver);
    for h in rows {
        if h.real() == addr {
            return h.wrapper();
        }
    }
    if is_tracked_base(symbol) && addr != 0 {
        UNKNOWN_VARIANTS.fetch_add(1, Ordering::Relaxed);
    }
    addr
}

/// Whether a resolver request's base name is one whose variants the shim tracks.
fn is_tracked_base(symbol: &[u8]) -> bool {
    crate::exports::HOOKS
        .iter()
        .filter(|h| h.lib == Lib::Driver)
        .any(|h| base_name(h.name.to_bytes()) == symbol)
}

/// `cuMemAlloc_v2` → `cuMemAlloc`, `cuMemFreeAsync_ptsz` → `cuMemFreeAsync`.
pub fn base_name(name: &[u8]) -> &[u8] {
    let mut n = name;
    for suffix in [&b"_ptsz"[..], b"_ptds"] {
        if let Some(s) = n.strip_suffix(suffix) {
            n = s;
        }
    }
    if let Some(pos) = n.iter().rposition(|&c| c == b'_') {
        let tail = &n[pos + 1..];
        if tail.len() >= 2 && tail[0] == b'v' && tail[1..].iter().all(u8::is_ascii_digit) {
            return &n[..pos];
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_names_drop_version_and_stream_suffixes() {
        assert_eq!(base_name(b"cuMemAlloc_v2"), b"cuMemAlloc");
        assert_eq!(base_name(b"cuMemFreeAsync_ptsz"), b"cuMemFreeAsync");
        assert_eq!(base_name(b"cuGetProcAddress_v2_ptsz"), b"cuGetProcAddress");
        assert_eq!(base_name(b"cuMemcpyHtoD_v2_ptds"), b"cuMemcpyHtoD");
        assert_eq!(base_name(b"cuMemHostAlloc"), b"cuMemHostAlloc");
    }
}
