//! The table of intercepted entry points and its lookups: one row per exact exported
//! variant, holding the real function's address once known and the shim's wrapper.
//!
//! Rows are generated from the single list in `exports/mod.rs` by its `hooks!` macro, which
//! also generates the exported wrapper functions themselves. This module sits below every
//! handler: it knows the rows only as the slice the wrappers and the `dlsym` door hand it
//! ([`install`]), never the module that generates them, so that handlers (the resolvers) can
//! look rows up without an import circle.

use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use crate::dlsym::{self as dl, RTLD_NEXT};

/// The rows, once a wrapper or a door has handed them over.
static ROWS: OnceLock<&'static [Hook]> = OnceLock::new();

/// Hands the table its rows. Called by every wrapper before it looks up a real function and by
/// the `dlsym` door before it looks a name up, so the rows are known before any row holds a
/// real address, and so before any lookup here can find one.
#[cold]
pub fn install(rows: &'static [Hook]) {
    if ROWS.get().is_none() {
        let _ = ROWS.set(rows);
    }
}

/// Every row (none before [`install`]).
fn rows() -> &'static [Hook] {
    ROWS.get().copied().unwrap_or(&[])
}

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
    /// process already uses, else in the libraries loaded after the shim. `rows` is the table
    /// `self` is a row of, installed before the first lookup.
    #[inline]
    pub fn real_or_lookup(&self, rows: &'static [Hook]) -> usize {
        let known = self.real();
        if known != 0 {
            return known;
        }
        install(rows);
        self.look_up()
    }

    #[cold]
    fn look_up(&self) -> usize {
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
            Lib::Runtime => dl::find_runtime_fn(self.name),
        };
        self.set_real(found);
        self.real()
    }
}

/// Looks up every getter and the real function of every driver entry point the shim exports,
/// once the driver is loaded: as tracing starts (inside the first intercepted call), and again
/// when the driver's handle becomes known (a driver opened with `RTLD_LOCAL` is out of reach
/// of the default lookup until then).
pub fn resolve_up_front() {
    if !dl::resolve_getters() {
        return;
    }
    for h in rows().iter().filter(|h| h.lib == Lib::Driver) {
        if h.real() == 0 {
            let _ = h.look_up();
        }
    }
}

/// Whether `addr` lies in `libcuda.so*` (see [`dl::note_libcuda`]); the first time its
/// handle becomes known, looks the driver's functions up.
pub fn in_libcuda(addr: *const c_void) -> bool {
    let (is_cuda, learned) = dl::note_libcuda(addr);
    if learned {
        resolve_up_front();
    }
    is_cuda
}

/// Finds a row by exported name.
pub fn by_name(name: &[u8]) -> Option<&'static Hook> {
    // Cheap filter first: every hooked name starts with "cu".
    if name.len() < 3 || name[0] != b'c' || name[1] != b'u' {
        return None;
    }
    rows().iter().find(|h| h.name.to_bytes() == name)
}

/// Fills in the real address of every driver row from the `libcuda` handle, once.
fn fill_driver_rows() {
    static FILLED: AtomicUsize = AtomicUsize::new(0);
    let handle = dl::libcuda();
    if handle.is_null() || FILLED.load(Ordering::Acquire) == handle as usize {
        return;
    }
    for h in rows().iter().filter(|h| h.lib == Lib::Driver) {
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
        in_libcuda(resolver as *const c_void);
    }
    fill_driver_rows();
    let rows = rows().iter().filter(|h| h.lib == Lib::Driver);
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
    rows()
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
