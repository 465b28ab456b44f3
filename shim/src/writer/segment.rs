//! One file of a trace: created exclusively with its header, grown ahead of use, its blocks
//! claimed and mapped one at a time, cut to what was used, and deleted (a bounded trace's old
//! segments) only while its name still leads to it.

use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};

use gpuleak_format::{BLOCK_SIZE, HEADER_SIZE};

use super::file::TraceFile;

/// A block of zeros, written over each new block outside tmpfs before it is mapped.
#[repr(align(4096))]
struct Zeros([u8; BLOCK_SIZE]);
static ZEROS: Zeros = Zeros([0; BLOCK_SIZE]);

pub(super) fn errno_text() -> String {
    std::io::Error::last_os_error().to_string()
}

/// Why a file could not grow.
pub(super) enum Grow {
    /// The file size limit (`RLIMIT_FSIZE`): a bounded trace starts a new segment.
    SizeLimit(String),
    /// A full disk or quota (`ENOSPC`, `EDQUOT`): a bounded trace deletes old segments.
    NoSpace(String),
    /// Anything else.
    Failed(String),
}

impl Grow {
    pub(super) fn text(&self) -> &str {
        match self {
            Grow::SizeLimit(s) | Grow::NoSpace(s) | Grow::Failed(s) => s,
        }
    }
}

/// One file of the trace, used under the writer's lock.
pub(super) struct SegFile {
    /// 0 for the first (or only) file.
    pub number: u64,
    /// The name it was linked under.
    pub path: OsString,
    pub file: TraceFile,
    /// Bytes reserved on disk.
    pub size: u64,
    /// The next block to hand out.
    pub next_block: u64,
    /// Blocks to hand out before the next rotation (`u64::MAX`: no bound).
    pub limit_blocks: u64,
    /// Whether its checkpoint is complete (always for the first segment): the segments
    /// before it may go.
    pub checkpointed: bool,
    /// Blocks set aside at its creation for its checkpoint (from block 1), reserved on disk
    /// so that a full disk cannot stop the checkpoint that lets old segments go: the next
    /// of them to write, and the end.
    pub reserved: (u64, u64),
}

/// `path`, then `path.1`, `path.2`, ...: the names a file may take, first free one wins.
fn candidate(path: &OsStr, attempt: u32) -> Result<CString, String> {
    let mut chosen = path.to_os_string();
    if attempt > 0 {
        chosen.push(format!(".{attempt}"));
    }
    CString::new(chosen.into_vec()).map_err(|_| "the trace path contains a NUL byte".to_string())
}

/// Writes the header at offset 0 of `fd`.
pub(super) fn write_header(fd: libc::c_int, header: &[u8; HEADER_SIZE]) -> bool {
    crate::sys::pwrite(fd, header, 0) == HEADER_SIZE as isize
}

/// The preferred way: an unnamed file in the trace's directory (`O_TMPFILE`), header written,
/// then linked under the first free name (`linkat` never replaces an existing name, link or
/// not). `Ok(None)` when the file system or kernel cannot do it: the caller falls back to
/// [`create_named`], which also reports why the directory cannot be used.
fn create_unnamed_then_link(
    path: &OsStr,
    header: &[u8; HEADER_SIZE],
) -> Result<Option<(libc::c_int, OsString)>, String> {
    let bytes = path.as_bytes();
    let dir: &[u8] = match bytes.iter().rposition(|&c| c == b'/') {
        Some(0) => b"/",
        Some(i) => &bytes[..i],
        None => b".",
    };
    let Ok(dir) = CString::new(dir) else { return Ok(None) };
    // O_TMPFILE creates an unnamed file in `dir`.
    let fd = crate::sys::open(&dir, libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC, 0o600);
    if fd < 0 {
        return Ok(None);
    }
    let close = crate::sys::close;
    if !write_header(fd, header) {
        let e = format!("cannot write trace {}: {}", path.to_string_lossy(), errno_text());
        close(fd);
        return Err(e);
    }
    let Ok(proc_path) = CString::new(format!("/proc/self/fd/{fd}")) else {
        close(fd);
        return Ok(None);
    };
    for attempt in 0..1000 {
        let name = candidate(path, attempt)?;
        // AT_SYMLINK_FOLLOW resolves the /proc link to the unnamed file, as open(2)
        // documents for O_TMPFILE files.
        let rc = crate::sys::linkat(&proc_path, &name, libc::AT_SYMLINK_FOLLOW);
        if rc == 0 {
            return Ok(Some((fd, OsString::from_vec(name.into_bytes()))));
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
            break;
        }
    }
    close(fd);
    Ok(None)
}

/// The fallback: the file created under its name (`O_EXCL | O_NOFOLLOW`), the header written
/// at once (a kill between the two leaves an empty file).
fn create_named(path: &OsStr, header: &[u8; HEADER_SIZE]) -> Result<(libc::c_int, OsString), String> {
    for attempt in 0..1000 {
        let name = candidate(path, attempt)?;
        // Creation exclusive, links refused.
        let fd = crate::sys::open(
            &name,
            libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600,
        );
        if fd >= 0 {
            if !write_header(fd, header) {
                let e = format!("cannot write trace {}: {}", path.to_string_lossy(), errno_text());
                crate::sys::close(fd);
                return Err(e);
            }
            return Ok((fd, OsString::from_vec(name.into_bytes())));
        }
        if std::io::Error::last_os_error().raw_os_error() != Some(libc::EEXIST) {
            break;
        }
    }
    Err(format!(
        "cannot create trace {}: {}",
        path.to_string_lossy(),
        errno_text()
    ))
}

/// `path` joined to the working directory when relative.
pub(super) fn absolute(path: &OsStr) -> OsString {
    if path.as_bytes().starts_with(b"/") {
        path.to_os_string()
    } else {
        std::env::current_dir()
            .map(|d| d.join(path).into_os_string())
            .unwrap_or_else(|_| path.to_os_string())
    }
}

impl SegFile {
    /// Creates a file exclusively (never following a symlink, never overwriting: an existing
    /// name gets a numeric suffix), mode 0600, with `header` written before the name appears
    /// (a process killed at any moment leaves no file, or one whose header reads). Returns it
    /// with whether it is on tmpfs.
    pub fn create(path: &OsStr, number: u64, header: &[u8; HEADER_SIZE]) -> Result<(SegFile, bool), String> {
        let (fd, chosen) = match create_unnamed_then_link(path, header)? {
            Some(created) => created,
            None => create_named(path, header)?,
        };
        let on_tmpfs = crate::sys::on_tmpfs(fd);
        let abs = absolute(&chosen);
        Ok((
            SegFile {
                number,
                file: TraceFile::new(fd, &abs),
                path: chosen,
                size: 0,
                // Block 0 is kept for last words.
                next_block: 1,
                limit_blocks: u64::MAX,
                checkpointed: true,
                reserved: (1, 1),
            },
            on_tmpfs,
        ))
    }

    /// Bytes in use: the header and every block handed out.
    pub fn used(&self) -> u64 {
        HEADER_SIZE as u64 + self.next_block * BLOCK_SIZE as u64
    }

    /// Makes the file at least `end` bytes, reserving disk space (and up to `ahead` bytes more
    /// in advance of use, while they fit).
    pub fn ensure(&mut self, end: u64, ahead: u64) -> Result<(), Grow> {
        let size = self.size;
        if size >= end {
            return Ok(());
        }
        let mut want = end.max(ahead.min(size.saturating_mul(2).min(size + (64 << 20))));
        let lim = crate::sys::getrlimit(libc::RLIMIT_FSIZE);
        if let Some(lim) = lim.filter(|l| l.rlim_cur != libc::RLIM_INFINITY) {
            if end > lim.rlim_cur {
                return Err(Grow::SizeLimit(format!(
                    "trace {} reached the file size limit (RLIMIT_FSIZE = {} bytes)",
                    self.path.to_string_lossy(),
                    lim.rlim_cur
                )));
            }
            want = want.min(lim.rlim_cur);
        }
        let fd = self.file.checked().map_err(Grow::Failed)?;
        // A descriptor just checked to be the trace's; offsets are within i64 by construction.
        let grow = |to: u64| crate::sys::posix_fallocate(fd, size, to - size);
        let mut rc = grow(want);
        if rc != 0 && want > end {
            // The growth ahead of use did not fit (a small file system or quota): only what is
            // needed now.
            want = end;
            rc = grow(want);
        }
        if rc != 0 {
            let e = std::io::Error::from_raw_os_error(rc);
            let text = format!("cannot grow trace {}: {e}", self.path.to_string_lossy());
            return Err(if rc == libc::ENOSPC || rc == libc::EDQUOT {
                Grow::NoSpace(text)
            } else if rc == libc::EFBIG {
                Grow::SizeLimit(text)
            } else {
                Grow::Failed(text)
            });
        }
        self.size = want;
        Ok(())
    }

    /// Maps block `index`, which [`ensure`](Self::ensure) made exist, zeroing it first with
    /// `zero` (every file system but tmpfs).
    pub fn map(&mut self, index: u64, zero: bool) -> Result<*mut u8, Grow> {
        let offset = HEADER_SIZE as u64 + index * BLOCK_SIZE as u64;
        let fd = self.file.checked().map_err(Grow::Failed)?;
        if zero {
            // Written zeros first: the mapping's pages are then in the page cache with their
            // blocks written, and the first store to each costs a minor fault instead of the
            // file system's allocation of an unwritten extent, measured 12x dearer on ext4
            // (docs/history/performance.md, "Writing the trace"). tmpfs gains nothing from it.
            // BLOCK_SIZE bytes of zeros to the trace's descriptor (checked just above), inside
            // the file (`ensure`).
            let n = crate::sys::pwrite(fd, &ZEROS.0[..BLOCK_SIZE], offset);
            if n != BLOCK_SIZE as isize {
                let text = format!("cannot write trace {}: {}", self.path.to_string_lossy(), errno_text());
                let e = std::io::Error::last_os_error().raw_os_error();
                return Err(if matches!(e, Some(libc::ENOSPC) | Some(libc::EDQUOT)) {
                    Grow::NoSpace(text)
                } else {
                    Grow::Failed(text)
                });
            }
        }
        // SAFETY: a new shared mapping at no address hint (no existing memory changes) of
        // BLOCK_SIZE bytes of the trace (its descriptor checked above) at a page-aligned offset
        // that `ensure` made exist; only the claimer writes them.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                BLOCK_SIZE,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED,
                fd,
                offset as libc::off_t,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(Grow::Failed(format!(
                "cannot map trace {}: {}",
                self.path.to_string_lossy(),
                errno_text()
            )));
        }
        Ok(p.cast::<u8>())
    }

    /// Cuts the file to the blocks handed out.
    pub fn cut_to_used(&mut self) {
        let used = self.used();
        if used < self.size {
            if let Ok(fd) = self.file.checked() {
                // The trace's descriptor (checked just above); every block handed out lies
                // below `used`.
                if crate::sys::ftruncate(fd, used) == 0 {
                    self.size = used;
                }
            }
        }
    }

    /// Maps the file's first `len` bytes read-only, for the checkpoint's builder (a mapping
    /// outlives the descriptor and the name). `None` if it cannot.
    pub fn map_for_reading(&mut self, len: u64) -> Option<ReadMap> {
        let fd = self.file.checked().ok()?;
        let len = usize::try_from(len).ok()?;
        if len == 0 {
            return None;
        }
        // SAFETY: a new read-only shared mapping of our own file (descriptor checked above), at
        // no address hint: no existing memory changes. The builder reads at most `len` bytes,
        // inside the file while it reads: nothing cuts a segment below the blocks it handed
        // out, and the only deletion that cuts a file to nothing (`delete`, where holes cannot
        // be punched) takes segments older than a checkpointed one, never those a build maps
        // (from the newest checkpointed one on).
        let p = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, fd, 0) };
        (p != libc::MAP_FAILED).then(|| ReadMap { ptr: p.cast(), len })
    }

    /// Writes `bytes` at `offset` (inside the file) through the checked descriptor.
    pub fn write_at(&mut self, bytes: &[u8], offset: u64) -> bool {
        let Ok(fd) = self.file.checked() else { return false };
        let n = crate::sys::pwrite(fd, bytes, offset);
        n == bytes.len() as isize
    }

    /// Deletes the file, if its name still leads to it, and closes it. Its space on disk is
    /// given back at once: a thread that wrote into it and has been idle since still maps its
    /// last block (it moves on at its next record, and never writes there again), which would
    /// keep the whole file on disk. So once its name is gone its blocks are punched out (read as zeros from
    /// then on), or, where the file system cannot, the file is cut to nothing: no mapping of
    /// it is ever touched again.
    pub fn delete(&mut self) {
        if let Ok(fd) = self.file.checked() {
            // The name first, so that a reader listing the directory no longer finds a file
            // about to read as zeros.
            let ours = crate::fd::FileId::of(fd);
            if let (Some(ours), Ok(c)) = (ours, CString::new(absolute(&self.path).into_vec())) {
                let same = crate::sys::lstat(&c).is_some_and(|st| st.st_dev == ours.dev && st.st_ino == ours.ino);
                if same {
                    // Our own segment (checked just above).
                    crate::sys::unlink(&c);
                }
            }
            // Our own descriptor (checked just above); the range is the whole file.
            if !crate::sys::punch_hole(fd, 0, self.size) {
                crate::sys::ftruncate(fd, 0);
            }
        }
        self.file.close_if_ours();
        self.size = 0;
    }
}

/// A read-only mapping of a segment, unmapped when dropped.
pub(super) struct ReadMap {
    ptr: *const u8,
    len: usize,
}

impl ReadMap {
    pub fn bytes(&self) -> &[u8] {
        // SAFETY: a live read-only mapping of `len` bytes, unmapped only when `self` drops, after
        // this borrow ends. Threads may still be writing the newest segment's open blocks
        // through mappings of their own: the builder decodes these bytes with every check of
        // an untrusted trace, and uses only records up to a cut that are all written.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl Drop for ReadMap {
    fn drop(&mut self) {
        // SAFETY: the mapping `map_for_reading` made, unmapped once, here; every slice of it
        // (`bytes`) borrowed `self` and has ended.
        unsafe { libc::munmap(self.ptr as *mut libc::c_void, self.len) };
    }
}

// SAFETY: a read-only mapping, used by one thread at a time.
unsafe impl Send for ReadMap {}
