//! Per-thread state of the hooks: the reentrancy guard and the runtime tag.

use std::cell::Cell;

use gpuleak_format::Api;

thread_local! {
    // Const-initialised `Cell`s of plain data: no destructor is ever registered for them, so
    // they are safe to touch from any context, thread exit included.
    static IN_HOOK: Cell<bool> = const { Cell::new(false) };
    static VIA: Cell<u16> = const { Cell::new(0) };
}

/// Proof that this thread is inside a driver hook; dropping it leaves.
pub struct HookGuard(());

impl Drop for HookGuard {
    fn drop(&mut self) {
        let _ = IN_HOOK.try_with(|c| c.set(false));
    }
}

/// Enters a driver hook, or `None` if this thread is already inside one (a driver call made
/// by the driver itself, which must neither be recorded nor recorded twice) or its
/// thread-locals are gone (thread exit).
#[inline]
pub fn enter() -> Option<HookGuard> {
    IN_HOOK
        .try_with(|c| if c.replace(true) { None } else { Some(HookGuard(())) })
        .ok()
        .flatten()
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
