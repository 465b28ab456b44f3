//! The trace's descriptor, checked before every use.
//!
//! The shim lives in someone else's process, and that process owns the descriptor table: it
//! may close every descriptor above 2 (`close_range`, `closefrom`, a daemon's close loop,
//! Python's `os.closerange`) and then open a file of its own, which gets the trace's number, or
//! `dup2` a descriptor over it. A writer that went on using the number would grow, map, zero
//! and finally truncate the program's file. So the descriptor is kept at a high number with
//! close-on-exec, its identity (device and inode) is recorded, and before each use it is
//! checked: a descriptor that is no longer the trace is left alone (it is the program's now)
//! and the trace is opened again by its absolute path, which must lead to the same file.

use std::ffi::{CString, OsStr};
use std::os::unix::ffi::OsStrExt;

/// The lowest number the descriptor is moved to, for the usual limit of 1,024 descriptors: a
/// program's own files take the lowest free numbers, so they reach it only after opening
/// hundreds, and a program that `dup2`s onto a chosen number rarely chooses one so high.
const HIGH_FD: libc::c_int = 768;

/// The trace file's descriptor and what it must lead to.
pub struct TraceFile {
    fd: libc::c_int,
    dev: u64,
    ino: u64,
    /// The absolute path the file was linked under, for opening it again.
    absolute: CString,
}

/// Device and inode of what `fd` refers to, if it is open.
fn identity(fd: libc::c_int) -> Option<(u64, u64)> {
    crate::fd::FileId::of(fd).map(|id| (id.dev, id.ino))
}

/// Moves `fd` to a high number with close-on-exec (closing the low one); where that is
/// impossible (a small descriptor limit), keeps `fd`.
fn raise(fd: libc::c_int) -> libc::c_int {
    let soft = if let Some(lim) = crate::sys::getrlimit(libc::RLIMIT_NOFILE) {
        lim.rlim_cur.min(libc::c_int::MAX as u64) as libc::c_int
    } else {
        1024
    };
    // Three quarters of the limit, at most HIGH_FD: a limit of 64 gives 48.
    let low = HIGH_FD.min(soft / 4 * 3);
    if fd >= low {
        return fd;
    }
    let high = crate::sys::dup_at_least(fd, low);
    if high < 0 {
        return fd;
    }
    crate::sys::close(fd);
    high
}

impl TraceFile {
    /// Takes over `fd`, the trace just created and linked at `absolute`.
    pub fn new(fd: libc::c_int, absolute: &OsStr) -> TraceFile {
        let fd = raise(fd);
        let (dev, ino) = identity(fd).unwrap_or((0, 0));
        TraceFile {
            fd,
            dev,
            ino,
            absolute: CString::new(absolute.as_bytes()).unwrap_or_default(),
        }
    }

    /// The descriptor, now, if it still leads to the trace, else the trace opened again by its
    /// path (the old number is the program's: never touched again). `Err` says why the trace
    /// can no longer be reached.
    pub fn checked(&mut self) -> Result<libc::c_int, String> {
        if self.fd >= 0 && identity(self.fd) == Some((self.dev, self.ino)) {
            return Ok(self.fd);
        }
        self.fd = -1;
        let path = self.absolute.to_string_lossy();
        if self.absolute.as_bytes().is_empty() {
            return Err("the program closed the trace's descriptor and the trace has no path to open it again".into());
        }
        // O_NOFOLLOW refuses a link put in the file's place.
        let fd = crate::sys::open(&self.absolute, libc::O_RDWR | libc::O_CLOEXEC | libc::O_NOFOLLOW, 0);
        if fd < 0 {
            return Err(format!(
                "the program closed the trace's descriptor and {path} cannot be opened again ({})",
                std::io::Error::last_os_error()
            ));
        }
        if identity(fd) != Some((self.dev, self.ino)) {
            crate::sys::close(fd);
            return Err(format!(
                "the program closed the trace's descriptor and {path} is now another file"
            ));
        }
        self.fd = raise(fd);
        Ok(self.fd)
    }

    /// Closes the descriptor if it is still the trace's (in a forked child, whose copy of the
    /// table may have been reused by the parent's program before the fork).
    pub fn close_if_ours(&mut self) {
        if self.fd >= 0 && identity(self.fd) == Some((self.dev, self.ino)) {
            // Our own descriptor (checked just above), closed once.
            crate::sys::close(self.fd);
        }
        self.fd = -1;
    }
}
