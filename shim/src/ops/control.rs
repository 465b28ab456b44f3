//! The C control API (`shim/include/gpuleak.h`): marks, regions, live bytes and snapshots
//! asked for by the program itself. The exported symbols are in `exports/mod.rs`; these are
//! their bodies. None of them panics or makes a CUDA call; all accept NULL names.

use std::borrow::Cow;
use std::ffi::{c_char, CStr};
use std::sync::atomic::Ordering;

use gpuleak_format::{Mark, Region};

use super::{live, snapshot, FLAGS, LIVE};
use crate::{guard, tracer};

/// A name the program passed (`NULL` reads as "").
///
/// # Safety
/// `name` is NULL or a NUL-terminated string valid for the call.
unsafe fn name_of<'a>(name: *const c_char) -> Cow<'a, str> {
    if name.is_null() {
        Cow::Borrowed("")
    } else {
        // SAFETY: the caller's contract.
        unsafe { CStr::from_ptr(name) }.to_string_lossy()
    }
}

/// `gpuleak_mark`: a Mark record.
///
/// # Safety
/// As [`name_of`].
pub unsafe fn mark(name: *const c_char, value: u64) {
    let Some(g) = guard::enter() else { return };
    // SAFETY: the caller's contract.
    let name = unsafe { name_of(name) };
    tracer::event(&g, Mark { name, value });
}

/// `gpuleak_region_begin` / `gpuleak_region_end`: a Region record.
///
/// # Safety
/// As [`name_of`].
pub unsafe fn region(name: *const c_char, begin: bool) {
    let Some(g) = guard::enter() else { return };
    // SAFETY: the caller's contract.
    let name = unsafe { name_of(name) };
    tracer::event(
        &g,
        Region {
            name,
            begin: u32::from(begin),
        },
    );
}

/// `gpuleak_snapshot`: a Snapshot record with the program's reason (`api` if NULL or
/// empty); its id, or 0 when nothing is traced.
///
/// # Safety
/// As [`name_of`].
pub unsafe fn snapshot(reason: *const c_char) -> u64 {
    let Some(g) = guard::enter() else { return 0 };
    // SAFETY: the caller's contract.
    let reason = unsafe { name_of(reason) };
    let reason = if reason.is_empty() {
        Cow::Borrowed("api")
    } else {
        reason
    };
    snapshot::write(&g, &reason)
}

/// `gpuleak_live_bytes`: device memory live on `device` (all devices if negative). Turns
/// live accounting on at the first call if no setting had (it then counts allocations made
/// from that call on); 0 when the shim is disabled.
pub fn live_bytes(device: i32) -> u64 {
    let f = super::flags();
    if super::settings().disabled {
        return 0;
    }
    if f & LIVE == 0 {
        FLAGS.fetch_or(LIVE, Ordering::AcqRel);
    }
    live::device_bytes(device)
}
