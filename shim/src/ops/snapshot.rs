//! Snapshot records (`Snapshot{id, reason}`): points at which the analyzer can show the
//! live state. Written on the snapshot signal (`signal`), every period (`period`), on an
//! out-of-memory failure (`oom`) and when the program calls `gpuleak_snapshot` (its reason,
//! `api` by default).
//!
//! The signal handler only sets a bit ([`super::SNAPSHOT_DUE`], one atomic `or`, which is
//! async-signal-safe) and calls the handler the program had installed before, if any; the
//! record is written by the next intercepted call or by the background thread, whichever
//! comes first.

use std::sync::atomic::{AtomicI32, AtomicU64, AtomicUsize, Ordering};

use gpuleak_format::Snapshot;

use super::settings::{FLAGS, SNAPSHOT_DUE};
use crate::guard::HookGuard;
use crate::tracer;

/// The last snapshot id written (ids count from 1 in each process).
static LAST_ID: AtomicU64 = AtomicU64::new(0);
/// Signals received and not yet written as snapshots.
static PENDING_SIGNALS: AtomicU64 = AtomicU64::new(0);
/// Period snapshots due.
static PENDING_PERIOD: AtomicU64 = AtomicU64::new(0);

/// Writes a snapshot record now; its id, or 0 if nothing is being traced.
pub fn write(g: &HookGuard, reason: &str) -> u64 {
    if tracer::get().is_none() {
        return 0;
    }
    let id = LAST_ID.fetch_add(1, Ordering::AcqRel) + 1;
    tracer::event(
        g,
        Snapshot {
            id,
            reason: reason.into(),
        },
    );
    id
}

/// Snapshots taken so far.
pub fn count() -> u64 {
    LAST_ID.load(Ordering::Relaxed)
}

/// Asks for a period snapshot (from the background thread, which writes it at once).
pub fn period_due() {
    PENDING_PERIOD.fetch_add(1, Ordering::AcqRel);
    FLAGS.fetch_or(SNAPSHOT_DUE, Ordering::AcqRel);
}

/// Writes the snapshots asked for by the signal or the period, if another thread has not
/// already.
pub fn write_due(g: &HookGuard) {
    if FLAGS.fetch_and(!SNAPSHOT_DUE, Ordering::AcqRel) & SNAPSHOT_DUE == 0 {
        return;
    }
    // Several signals before one write are one snapshot: the state is the same.
    if PENDING_SIGNALS.swap(0, Ordering::AcqRel) > 0 {
        write(g, "signal");
    }
    if PENDING_PERIOD.swap(0, Ordering::AcqRel) > 0 {
        write(g, "period");
    }
}

/// In a forked child: ids start over with the child's trace; pending requests were the
/// parent's.
pub fn forget_in_child() {
    LAST_ID.store(0, Ordering::Relaxed);
    PENDING_SIGNALS.store(0, Ordering::Relaxed);
    PENDING_PERIOD.store(0, Ordering::Relaxed);
    FLAGS.fetch_and(!SNAPSHOT_DUE, Ordering::AcqRel);
}

// ---------------------------------------------------------------------------------------
// The signal.

/// The program's handler that was installed before ours (chained to): its address (0:
/// none) and its `sa_flags`, written once before our handler is installed.
static PREVIOUS_HANDLER: AtomicUsize = AtomicUsize::new(0);
static PREVIOUS_FLAGS: AtomicI32 = AtomicI32::new(0);

extern "C" fn on_signal(sig: libc::c_int, info: *mut libc::siginfo_t, uctx: *mut libc::c_void) {
    // Async-signal-safe: atomic operations only, no locks, no allocation, errno untouched.
    PENDING_SIGNALS.fetch_add(1, Ordering::AcqRel);
    FLAGS.fetch_or(SNAPSHOT_DUE, Ordering::AcqRel);
    let handler = PREVIOUS_HANDLER.load(Ordering::Acquire);
    if handler == libc::SIG_DFL || handler == libc::SIG_IGN {
        return;
    }
    if PREVIOUS_FLAGS.load(Ordering::Acquire) & libc::SA_SIGINFO != 0 {
        type Action = extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut libc::c_void);
        // SAFETY: the program installed this address as an SA_SIGINFO handler.
        let f: Action = unsafe { std::mem::transmute::<usize, Action>(handler) };
        f(sig, info, uctx);
    } else {
        type Handler = extern "C" fn(libc::c_int);
        // SAFETY: the program installed this address as a plain handler.
        let f: Handler = unsafe { std::mem::transmute::<usize, Handler>(handler) };
        f(sig);
    }
}

/// Installs the snapshot signal's handler, chaining to the program's own if it has one;
/// false if none was installed.
///
/// A signal the process ignores (`nohup` ignores SIGHUP) stays ignored: a handler would
/// end the ignoring in every program it execs, which `exec` resets to the default action.
pub fn install_signal(sig: i32) -> bool {
    let Some(old) = crate::sys::signal_disposition(sig) else {
        crate::diag::line(format_args!(
            "cannot read the handler of signal {sig}; no snapshots on it"
        ));
        return false;
    };
    if old.sa_flags & libc::SA_SIGINFO == 0 && old.sa_sigaction == libc::SIG_IGN {
        crate::diag::line(format_args!(
            "GPULEAK_SNAPSHOT_SIGNAL: this process ignores signal {sig} (as under nohup); it stays ignored and writes no snapshots"
        ));
        return false;
    }
    PREVIOUS_FLAGS.store(old.sa_flags, Ordering::Release);
    PREVIOUS_HANDLER.store(old.sa_sigaction, Ordering::Release);
    // SAFETY: an all-zero sigaction is a valid starting value.
    let mut act: libc::sigaction = unsafe { std::mem::zeroed() };
    act.sa_sigaction = on_signal as *const () as usize;
    act.sa_mask = old.sa_mask;
    act.sa_flags = libc::SA_SIGINFO | libc::SA_RESTART | (old.sa_flags & libc::SA_ONSTACK);
    // SAFETY: installs a handler that is async-signal-safe; `act` is fully initialised.
    if unsafe { libc::sigaction(sig, &act, std::ptr::null_mut()) } != 0 {
        crate::diag::line(format_args!(
            "cannot install a handler for signal {sig}; no snapshots on it"
        ));
        return false;
    }
    true
}
