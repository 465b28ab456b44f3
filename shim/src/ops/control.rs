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

/// `gpuleak_trace_path`: the path of this process's trace file, NUL-terminated and valid until
/// the process exits; NULL when nothing is traced (`GPULEAK_DISABLE=1`, or the trace could not
/// be created). Starts the trace if no CUDA call has yet (as `gpuleak_snapshot` does).
///
/// The tracer does not hand out its path, so the file is found among the process's open
/// descriptors: the one whose header has the trace magic and this process's pid (a forked
/// child still holds its parent's trace open, with the parent's pid in the header). Found once
/// per process and kept.
pub fn trace_path() -> *const c_char {
    use std::sync::Mutex;

    /// The path found, with the pid it was found in (a forked child looks again).
    static FOUND: Mutex<Option<(u32, &'static CStr)>> = Mutex::new(None);

    let Some(g) = guard::enter() else {
        return std::ptr::null();
    };
    if tracer::get().is_none() {
        return std::ptr::null();
    }
    drop(g);
    // SAFETY: getpid has no preconditions and cannot fail.
    let pid = unsafe { libc::getpid() } as u32;
    let Ok(mut found) = FOUND.lock() else {
        return std::ptr::null();
    };
    match *found {
        Some((p, path)) if p == pid => path.as_ptr(),
        _ => match open_trace_of(pid) {
            Some(path) => {
                // Leaked on purpose: the caller may keep the pointer for the life of the
                // process; at most one string per process (and per forked child).
                let path: &'static CStr = Box::leak(path.into_boxed_c_str());
                *found = Some((pid, path));
                path.as_ptr()
            }
            None => std::ptr::null(),
        },
    }
}

/// The path of the open file that is `pid`'s trace, if any.
fn open_trace_of(pid: u32) -> Option<std::ffi::CString> {
    use std::os::unix::ffi::OsStrExt;
    use std::os::unix::fs::FileExt;

    for entry in std::fs::read_dir("/proc/self/fd").ok()?.flatten() {
        // Only regular files are opened: opening a FIFO or a device could block or act.
        let Ok(meta) = std::fs::metadata(entry.path()) else {
            continue;
        };
        if !meta.is_file() || meta.len() < 28 {
            continue;
        }
        // Reopened through /proc, so the read never moves the descriptor's own offset.
        let Ok(file) = std::fs::File::open(entry.path()) else {
            continue;
        };
        let mut header = [0u8; 28];
        if file.read_exact_at(&mut header, 0).is_err() {
            continue;
        }
        if header[..8] != gpuleak_format::MAGIC || header[24..28] != pid.to_le_bytes() {
            continue;
        }
        let Ok(target) = std::fs::read_link(entry.path()) else {
            continue;
        };
        if let Some(path) = name_of_inode(&target, &meta) {
            return std::ffi::CString::new(path.as_os_str().as_bytes()).ok();
        }
    }
    None
}

/// The name under which the file `meta` describes is linked, from what `/proc/self/fd` says:
/// that path when it is still the file's name; else, since the writer creates the trace
/// unnamed (`O_TMPFILE`, shown as `DIR/#INODE (deleted)`) and then links it, the entry of the
/// same directory with the same inode.
fn name_of_inode(target: &std::path::Path, meta: &std::fs::Metadata) -> Option<std::path::PathBuf> {
    use std::os::unix::fs::MetadataExt;

    let same = |m: &std::fs::Metadata| m.dev() == meta.dev() && m.ino() == meta.ino();
    if std::fs::symlink_metadata(target).is_ok_and(|m| same(&m)) {
        return Some(target.to_path_buf());
    }
    let dir = target.parent()?;
    std::fs::read_dir(dir)
        .ok()?
        .flatten()
        .find(|e| std::fs::symlink_metadata(e.path()).is_ok_and(|m| same(&m)))
        .map(|e| e.path())
}
