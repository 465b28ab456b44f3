//! [`Method::LibUnwind`](crate::Method::LibUnwind): nongnu libunwind's `unw_backtrace`.
//!
//! Loaded with `dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL)` and never linked: libunwind
//! exports its own `_Unwind_*` functions, which would take over C++ exception unwinding for the
//! whole process if they entered the global scope.

use std::ffi::{c_int, c_void, CStr};
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::InitError;

type UnwBacktrace = unsafe extern "C" fn(buffer: *mut *mut c_void, size: c_int) -> c_int;

/// The `unw_backtrace` function pointer, 0 until [`load`] succeeds.
static BACKTRACE: AtomicUsize = AtomicUsize::new(0);
/// How many leading entries of `unw_backtrace` belong to this crate's own frames, measured by
/// [`crate::init`] against libgcc.
static LEAD: AtomicUsize = AtomicUsize::new(0);

/// Stack buffer size: captures asking for up to this many entries (including skipped ones) are
/// copied out of it; deeper requests go straight into `out` and lose their last few frames.
const BUFFER: usize = 256;

/// Loads libunwind (once; later calls reuse the handle).
pub(crate) fn load() -> Result<(), InitError> {
    if BACKTRACE.load(Ordering::Acquire) != 0 {
        return Ok(());
    }
    let missing = |what: &str| {
        // SAFETY: dlerror returns NULL or a NUL-terminated string valid until the next dl* call
        // on this thread, and it is copied out at once.
        let detail = unsafe {
            let error = libc::dlerror();
            if error.is_null() {
                String::from("no error reported")
            } else {
                CStr::from_ptr(error).to_string_lossy().into_owned()
            }
        };
        InitError::LibUnwindMissing {
            detail: format!("{what}: {detail}"),
        }
    };
    // SAFETY: both strings are NUL-terminated literals; the handle is never closed, so the
    // function pointer taken from it stays valid for the life of the process.
    let function = unsafe {
        let handle = libc::dlopen(c"libunwind.so.8".as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        if handle.is_null() {
            return Err(missing("dlopen(libunwind.so.8)"));
        }
        let function = libc::dlsym(handle, c"unw_backtrace".as_ptr());
        if function.is_null() {
            return Err(missing("dlsym(unw_backtrace)"));
        }
        function
    };
    BACKTRACE.store(function as usize, Ordering::Release);
    Ok(())
}

/// Sets how many leading entries to drop (see [`LEAD`]).
pub(crate) fn set_lead(lead: usize) {
    LEAD.store(lead, Ordering::Relaxed);
}

/// Captures with `unw_backtrace`, dropping this crate's own frames and `skip` more.
#[inline(never)]
pub(crate) fn capture(skip: usize, out: &mut [u64]) -> usize {
    let function = BACKTRACE.load(Ordering::Acquire);
    if function == 0 || out.is_empty() {
        return 0;
    }
    // SAFETY: a nonzero BACKTRACE was stored by `load` from dlsym("unw_backtrace"), whose
    // signature is `int unw_backtrace(void **buffer, int size)`, in a library never unloaded.
    let backtrace = unsafe { std::mem::transmute::<usize, UnwBacktrace>(function) };
    let drop = LEAD.load(Ordering::Relaxed).saturating_add(skip);
    let wanted = out.len().saturating_add(drop);
    if wanted <= BUFFER {
        let mut buffer = [MaybeUninit::<u64>::uninit(); BUFFER];
        // SAFETY: the buffer has room for `wanted` pointer-sized entries; unw_backtrace writes
        // at most `size` of them and returns how many.
        let got = unsafe { backtrace(buffer.as_mut_ptr().cast(), wanted as c_int) };
        let got = usize::try_from(got).unwrap_or(0).min(wanted);
        let kept = got.saturating_sub(drop);
        for (slot, entry) in out.iter_mut().zip(&buffer[drop.min(got)..got]) {
            // SAFETY: entries below `got` were written by unw_backtrace.
            *slot = unsafe { entry.assume_init() };
        }
        kept
    } else {
        let size = c_int::try_from(out.len()).unwrap_or(c_int::MAX);
        // SAFETY: `out` has room for `size` u64 entries, the same size as pointers here.
        let got = unsafe { backtrace(out.as_mut_ptr().cast(), size) };
        let got = usize::try_from(got).unwrap_or(0).min(out.len());
        if got <= drop {
            return 0;
        }
        out.copy_within(drop..got, 0);
        got - drop
    }
}
