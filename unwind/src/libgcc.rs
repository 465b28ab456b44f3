//! [`Method::Gcc`](crate::Method::Gcc): libgcc's `_Unwind_Backtrace`, the reference the other
//! methods are tested against. Always present (Rust's standard library links libgcc_s on
//! Linux), correct everywhere, and slow: it interprets the CFI of every frame on every call.

use std::ffi::{c_int, c_void};

#[repr(C)]
struct UnwindContext {
    _private: [u8; 0],
}

type TraceFn = extern "C" fn(context: *mut UnwindContext, arg: *mut c_void) -> c_int;

const URC_NO_REASON: c_int = 0;
const URC_END_OF_STACK: c_int = 5;

extern "C" {
    fn _Unwind_Backtrace(trace: TraceFn, arg: *mut c_void) -> c_int;
    fn _Unwind_GetIP(context: *mut UnwindContext) -> usize;
    fn _Unwind_GetCFA(context: *mut UnwindContext) -> usize;
}

struct Trace<'a> {
    out: &'a mut [u64],
    /// Where to write each frame's CFA beside its return address, if wanted.
    cfas: Option<&'a mut [u64]>,
    n: usize,
    skip: usize,
    /// The stack pointer inside `capture`. `_Unwind_GetCFA` of a frame is that frame's own
    /// stack pointer at its call (its callee's CFA), so the frames of `capture` and of the
    /// functions it called report at most this value, and its caller more, whatever the
    /// compiler inlined.
    capture_sp: u64,
}

extern "C" fn on_frame(context: *mut UnwindContext, arg: *mut c_void) -> c_int {
    // SAFETY: `arg` is the `Trace` that `capture` passed to _Unwind_Backtrace, exclusively ours
    // for the duration of that call.
    let trace = unsafe { &mut *arg.cast::<Trace<'_>>() };
    // SAFETY: libgcc passes a valid context for the frame being reported.
    let (ip, cfa) = unsafe { (_Unwind_GetIP(context) as u64, _Unwind_GetCFA(context) as u64) };
    if cfa <= trace.capture_sp {
        return URC_NO_REASON;
    }
    // libgcc reports one last frame with IP 0 after a frame whose return address is undefined
    // (the thread's outermost frame); it is not a frame.
    if ip == 0 {
        return URC_END_OF_STACK;
    }
    if trace.skip > 0 {
        trace.skip -= 1;
        return URC_NO_REASON;
    }
    let Some(slot) = trace.out.get_mut(trace.n) else {
        return URC_END_OF_STACK;
    };
    *slot = ip;
    if let Some(c) = trace.cfas.as_deref_mut().and_then(|c| c.get_mut(trace.n)) {
        *c = cfa;
    }
    trace.n += 1;
    if trace.n == trace.out.len() {
        URC_END_OF_STACK
    } else {
        URC_NO_REASON
    }
}

/// Captures the frames above the `capture` whose stack pointer is `capture_sp`; with `cfas`,
/// also each frame's `_Unwind_GetCFA` (at most as many as both slices hold).
#[inline(never)]
pub(crate) fn capture(capture_sp: u64, skip: usize, out: &mut [u64], cfas: Option<&mut [u64]>) -> usize {
    let len = cfas.as_deref().map_or(out.len(), |c| c.len().min(out.len()));
    let out = &mut out[..len];
    if out.is_empty() {
        return 0;
    }
    let mut trace = Trace {
        out,
        cfas,
        n: 0,
        skip,
        capture_sp,
    };
    // SAFETY: `on_frame` has the signature libgcc calls and `trace` outlives the call; the
    // return code only says why the walk ended, which `trace.n` already reflects.
    unsafe {
        _Unwind_Backtrace(on_frame, (&mut trace as *mut Trace<'_>).cast());
    }
    trace.n
}
