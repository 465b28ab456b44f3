//! Values made once and never freed, published through an atomic pointer (the tracer, the
//! live table, the interpreter's description). A reference to one lives as long as the
//! process: the `unsafe` that turns the published pointer back into a reference is here,
//! once, with its reason, instead of at each value's module.
//!
//! Not `OnceLock`: a forked child forgets the parent's value (whose locks a thread that does
//! not exist in the child may hold) and makes another, and a thread that loses the race to
//! make one never waits for the winner.

use std::sync::atomic::{AtomicPtr, Ordering};

/// A `T` made at most once per process (a forked child may [`forget`](Leaked::forget) it and
/// make another), never freed. `T` is shared by every thread that gets it, and may be made on
/// one thread and dropped (a value that lost the race) on another: `Send + Sync`.
pub struct Leaked<T>(AtomicPtr<T>);

impl<T: Send + Sync> Leaked<T> {
    /// None yet.
    pub const fn new() -> Leaked<T> {
        Leaked(AtomicPtr::new(std::ptr::null_mut()))
    }

    /// The published value, if any.
    #[inline(always)]
    pub fn get(&self) -> Option<&'static T> {
        let p = self.0.load(Ordering::Acquire);
        // SAFETY: the pointer is NULL or was stored by `publish` or `make_once`: a leaked box,
        // never freed, written before that Release store, which this Acquire load sees.
        unsafe { p.as_ref() }
    }

    /// Publishes `value` (leaked), in place of any earlier one (itself never freed).
    pub fn publish(&self, value: T) -> &'static T {
        let v: &'static T = Box::leak(Box::new(value));
        self.0.store(v as *const T as *mut T, Ordering::Release);
        v
    }

    /// The published value, made with `make` and published first if there is none. When two
    /// threads make one at once, one value is published and the other dropped unseen.
    pub fn make_once(&self, make: impl FnOnce() -> T) -> &'static T {
        if let Some(v) = self.get() {
            return v;
        }
        let fresh = Box::into_raw(Box::new(make()));
        match self
            .0
            .compare_exchange(std::ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {
                // SAFETY: the box just published, never freed.
                unsafe { &*fresh }
            }
            Err(other) => {
                // SAFETY: `fresh` lost the race: never published, so no one else has it, and
                // it is freed once, here.
                drop(unsafe { Box::from_raw(fresh) });
                // SAFETY: `other` is non-NULL (the exchange from NULL failed) and was published
                // as in `get`.
                unsafe { &*other }
            }
        }
    }

    /// Unpublishes the value (in a forked child), which stays allocated; returns its pointer
    /// (NULL if none), for a caller that may use it mutably because no other thread exists.
    pub fn forget(&self) -> *mut T {
        self.0.swap(std::ptr::null_mut(), Ordering::AcqRel)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_value_wins_and_a_forgotten_one_is_made_again() {
        static VALUE: Leaked<u64> = Leaked::new();
        assert!(VALUE.get().is_none());
        let threads: Vec<_> = (0..4u64)
            .map(|t| std::thread::spawn(move || VALUE.make_once(|| t) as *const u64 as usize))
            .collect();
        let seen: Vec<usize> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        assert!(seen.windows(2).all(|w| w[0] == w[1]), "every thread sees the one value");
        assert_eq!(VALUE.get().map(|v| v as *const u64 as usize), Some(seen[0]));
        assert!(!VALUE.forget().is_null());
        assert!(VALUE.get().is_none());
        assert_eq!(*VALUE.make_once(|| 7), 7);
        assert_eq!(*VALUE.publish(8), 8);
        assert_eq!(VALUE.get(), Some(&8));
    }
}
