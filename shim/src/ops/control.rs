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

/// `gpuleak_snapshot_generation`: the latest snapshot id (0: none), with no guard: it only
/// reads an atomic.
pub fn snapshot_generation() -> u64 {
    snapshot::count()
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

/// `gpuleak_trace_path`: the path of this process's trace file, NUL-terminated and valid until
/// the process exits; NULL when nothing is traced (`GPULEAK_DISABLE=1`, or the trace could not
/// be created). Starts the trace if no CUDA call has yet (as `gpuleak_snapshot` does). The
/// path is the tracer's, made absolute when the trace was created; kept once per process (a
/// forked child has its own trace).
pub fn trace_path() -> *const c_char {
    use std::os::unix::ffi::OsStrExt;
    use std::sync::Mutex;

    /// The path handed out, with the pid it belongs to.
    static FOUND: Mutex<Option<(u32, &'static CStr)>> = Mutex::new(None);

    let Some(g) = guard::enter() else {
        return std::ptr::null();
    };
    let Some(t) = tracer::get() else {
        return std::ptr::null();
    };
    drop(g);
    let pid = crate::sys::getpid();
    let Ok(mut found) = FOUND.lock() else {
        return std::ptr::null();
    };
    match *found {
        Some((p, path)) if p == pid => path.as_ptr(),
        _ => match std::ffi::CString::new(t.trace_path().as_bytes()) {
            Ok(path) => {
                // Leaked on purpose: the caller may keep the pointer for the life of the
                // process; at most one string per process (and per forked child).
                let path: &'static CStr = Box::leak(path.into_boxed_c_str());
                *found = Some((pid, path));
                path.as_ptr()
            }
            Err(_) => std::ptr::null(),
        },
    }
}

/// `gpuleak_window_begin`: opens a window (see `live::window_begin`), turning live accounting
/// on as [`live_bytes`] does; nothing when the shim is disabled.
pub fn window_begin(watch: u64) {
    if super::settings().disabled {
        return;
    }
    if super::flags() & LIVE == 0 {
        FLAGS.fetch_or(LIVE, Ordering::AcqRel);
    }
    live::window_begin(watch);
}

/// `gpuleak_window_stats`: writes up to `n` of the open window's counters to `out`; how many
/// it wrote (0 when the shim is disabled or `out` is NULL).
///
/// # Safety
/// `out` is NULL or valid for `n` writes of `u64`.
pub unsafe fn window_stats(out: *mut u64, n: i32) -> i32 {
    if out.is_null() || n <= 0 || super::settings().disabled {
        return 0;
    }
    let stats = live::window_stats();
    let n = stats.len().min(n as usize);
    for (i, v) in stats.iter().take(n).enumerate() {
        // SAFETY: the caller's contract: `out` is valid for `n` writes, and `i < n`.
        unsafe { out.add(i).write(*v) };
    }
    n as i32
}

/// `gpuleak_framework_record`: one record of kind 70 to 76 whose fields the caller encoded
/// (the Python package, from a framework's allocator state). The payload is decoded first
/// (`gpuleak_format::framework::parse`) and written again from its decoded fields, so that a
/// bad one never reaches the trace. 0 when written; -1 when nothing is traced; -2 when the
/// kind, length or fields are refused.
///
/// # Safety
/// `data` is NULL or valid for `len` reads.
pub unsafe fn framework_record(kind: u32, data: *const u8, len: usize) -> i32 {
    use gpuleak_format::framework::{parse, MAX_PAYLOAD};
    use gpuleak_format::Body;

    let Some(g) = guard::enter() else { return -1 };
    if tracer::get().is_none() {
        return -1;
    }
    let Ok(kind) = u8::try_from(kind) else { return -2 };
    if data.is_null() || len > MAX_PAYLOAD {
        return -2;
    }
    // SAFETY: the caller's contract: `data` is valid for `len` reads; it is only read here.
    let payload = unsafe { std::slice::from_raw_parts(data, len) };
    let Ok(body) = parse(kind, payload) else { return -2 };
    match &body {
        Body::FrameworkState(r) => tracer::event_fields(&g, &**r),
        Body::FrameworkSegment(r) => tracer::event_fields(&g, r),
        Body::FrameworkBlocks(r) => tracer::event_fields(&g, r),
        Body::FrameworkFrames(r) => tracer::event_fields(&g, &**r),
        Body::FrameworkStats(r) => tracer::event_fields(&g, r),
        Body::FrameworkOom(r) => tracer::event_fields(&g, r),
        Body::FrameworkEnd(r) => tracer::event_fields(&g, r),
        _ => return -2,
    }
    0
}
