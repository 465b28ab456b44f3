//! Per-thread state of the hooks: the reentrancy guard and the runtime tag.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

use gpuleak_format::Api;

thread_local! {
    // Const-initialised `Cell`s of plain data: no destructor is ever registered for them, so
    // they are safe to touch from any context, thread exit included.
    /// The stack address at which this thread entered a hook; 0 outside every hook.
    static IN_HOOK: Cell<usize> = const { Cell::new(0) };
    static VIA: Cell<u16> = const { Cell::new(0) };
}

/// Calls passed through unrecorded because their thread was inside another hook: a signal
/// handler's CUDA call that interrupted one (or the driver calling its own entry points).
/// Written as a `Lost` record (reason 3) at exit.
pub static NESTED: AtomicU64 = AtomicU64::new(0);

/// Proof that this thread is inside a driver hook; dropping it leaves.
pub struct HookGuard(());

impl Drop for HookGuard {
    fn drop(&mut self) {
        let _ = IN_HOOK.try_with(|c| c.set(0));
    }
}

/// An address in the caller's stack frame.
#[inline(always)]
fn stack_here() -> usize {
    let marker = 0u8;
    std::hint::black_box(&marker) as *const u8 as usize
}

/// Enters a driver hook, or `None` if this thread is already inside one (a driver call made
/// by the driver itself or by a signal handler that interrupted a hook, which must neither be
/// recorded nor recorded twice: counted in [`NESTED`]) or its thread-locals are gone (thread
/// exit). A hook that was left without returning (a `longjmp` out of a signal handler that
/// interrupted it) does not keep the thread out of every later hook.
#[inline]
pub fn enter() -> Option<HookGuard> {
    let here = stack_here();
    IN_HOOK
        .try_with(|c| {
            let held = c.get();
            if held == 0 || abandoned(held, here) {
                c.set(here);
                Some(HookGuard(()))
            } else {
                NESTED.fetch_add(1, Ordering::Relaxed);
                None
            }
        })
        .ok()
        .flatten()
}

/// Whether the hook entered at stack address `held` was abandoned, seen from a new call at
/// `here`. A call made inside a hook, by the driver or by a signal handler on the same stack,
/// runs deeper (stacks grow down on every target the shim builds for); a call at or above the
/// hook's own entry (the same depth: the next call of a loop a handler jumped back to) means
/// that frame is gone. A signal handler on an alternate stack may lie
/// anywhere, so there the hook is taken to be still running.
#[cold]
fn abandoned(held: usize, here: usize) -> bool {
    if here < held {
        return false;
    }
    !crate::sys::on_alternate_signal_stack()
}

/// The runtime call this thread is inside, if any.
#[inline]
pub fn via() -> Api {
    Api(VIA.try_with(Cell::get).unwrap_or(0))
}

/// Runs `f` tagged as being inside runtime call `api` (restoring the outer tag after).
#[inline]
pub fn with_via<R>(api: Api, f: impl FnOnce() -> R) -> R {
    let prev = VIA.try_with(|c| c.replace(api.0)).ok();
    let r = f();
    if let Some(p) = prev {
        let _ = VIA.try_with(|c| c.set(p));
    }
    r
}
