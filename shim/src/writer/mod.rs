//! The trace file: a header, then 64 KiB blocks that threads claim one at a time and fill
//! through a shared mapping of the file.
//!
//! Records go straight into the page cache, so nothing is buffered in the process: a
//! SIGKILL, SIGSEGV or abort loses at most the record being written at that instant. The
//! file grows with `posix_fallocate` in advance of use, so a full disk or a file size limit
//! turns into one clear error here instead of a SIGBUS or SIGXFSZ in the program.
//!
//! The descriptor is the program's to close: [`file::TraceFile`] checks it before each use.
//! Block 0 is kept for last words: it is mapped at creation, so the `Lost` and `Exit` records
//! written at unload reach the file even when the disk is full or the descriptor is gone.

mod file;
mod spare;

use file::TraceFile;

use std::cell::Cell;
use std::ffi::{CString, OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

use gpuleak_format::{
    BlockCursor, BlockState, Fields, FileHeader, NoRoom, RecordRef, Seq, BLOCK_SIZE, FORMAT_VERSION, HEADER_SIZE,
};

/// Bumped in every forked child: blocks mapped before the fork belong to the parent's file.
pub static GENERATION: AtomicU64 = AtomicU64::new(0);

/// A block of zeros, written over each new block outside tmpfs before it is mapped.
#[repr(align(4096))]
struct Zeros([u8; BLOCK_SIZE]);
static ZEROS: Zeros = Zeros([0; BLOCK_SIZE]);

/// One trace file.
pub struct Writer {
    path: OsString,
    /// The same, absolute (joined to the working directory of the moment it was created).
    absolute: OsString,
    /// Write each new block's zeros before mapping it (every file system but tmpfs).
    zero_blocks: bool,
    generation: u64,
    next_block: AtomicU64,
    size: AtomicU64,
    /// The descriptor, used only under this lock (growing, zeroing, mapping, truncating).
    file: Mutex<TraceFile>,
    closed: AtomicBool,
    /// Records that could not be written.
    pub lost: AtomicU64,
    failed: AtomicBool,
    /// The block shared by threads whose thread-locals are gone (thread and process exit:
    /// TLS destructors and `.fini_array` still free memory).
    detached: Mutex<DetachedBlock>,
    /// Block 0, mapped at creation and written only at unload ([`Writer::close`]).
    last_words: Mutex<DetachedBlock>,
}

struct DetachedBlock {
    ptr: *mut u8,
    cursor: BlockCursor,
}

// SAFETY: the raw block pointer is only used under the mutex that owns it.
unsafe impl Send for DetachedBlock {}

/// Encodes one record into a block through its cursor (`NoRoom`: the block is full).
type Append<'f> = dyn Fn(&mut BlockCursor, &mut [u8]) -> Result<(), NoRoom> + 'f;

struct ThreadBlock {
    ptr: Cell<*mut u8>,
    cursor: Cell<BlockCursor>,
    generation: Cell<u64>,
    tid: Cell<u32>,
}

impl Drop for ThreadBlock {
    fn drop(&mut self) {
        // The thread is exiting: the room left in its block goes to the next thread.
        let p = self.ptr.replace(std::ptr::null_mut());
        if !spare::give(p, self.cursor.get(), self.generation.get()) {
            unmap(p);
        }
    }
}

thread_local! {
    static LOCAL: ThreadBlock = const {
        ThreadBlock {
            ptr: Cell::new(std::ptr::null_mut()),
            cursor: Cell::new(BlockCursor { pos: 0, state: BlockState { seq: 0, time: 0, ptr: 0, ctx: 0, stream: 0, event: 0 } }),
            generation: Cell::new(u64::MAX),
            tid: Cell::new(0),
        }
    };
}

fn unmap(p: *mut u8) {
    if !p.is_null() {
        // SAFETY: `p` is a BLOCK_SIZE mapping this thread made and no longer uses.
        unsafe { libc::munmap(p.cast(), BLOCK_SIZE) };
    }
}

fn errno_text() -> String {
    std::io::Error::last_os_error().to_string()
}

/// `path`, then `path.1`, `path.2`, ...: the names a trace may take, first free one wins.
fn candidate(path: &OsStr, attempt: u32) -> Result<CString, String> {
    let mut chosen = path.to_os_string();
    if attempt > 0 {
        chosen.push(format!(".{attempt}"));
    }
    CString::new(chosen.into_vec()).map_err(|_| "the trace path contains a NUL byte".to_string())
}

/// Writes the header at offset 0 of `fd`.
fn write_header(fd: libc::c_int, header: &[u8; HEADER_SIZE]) -> bool {
    // SAFETY: writes our header buffer to our own descriptor.
    unsafe { libc::pwrite(fd, header.as_ptr().cast(), HEADER_SIZE, 0) == HEADER_SIZE as isize }
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
    // SAFETY: `dir` is a valid C string; O_TMPFILE creates an unnamed file in it.
    let fd = unsafe { libc::open(dir.as_ptr(), libc::O_TMPFILE | libc::O_RDWR | libc::O_CLOEXEC, 0o600) };
    if fd < 0 {
        return Ok(None);
    }
    let close = |fd: libc::c_int| {
        // SAFETY: our own descriptor, closed once.
        unsafe { libc::close(fd) };
    };
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
        // SAFETY: both paths are valid C strings; AT_SYMLINK_FOLLOW resolves the /proc link to
        // the unnamed file, as open(2) documents for O_TMPFILE files.
        let rc = unsafe {
            libc::linkat(
                libc::AT_FDCWD,
                proc_path.as_ptr(),
                libc::AT_FDCWD,
                name.as_ptr(),
                libc::AT_SYMLINK_FOLLOW,
            )
        };
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
        // SAFETY: `name` is a valid C string; flags make creation exclusive and refuse links.
        let fd = unsafe {
            libc::open(
                name.as_ptr(),
                libc::O_RDWR | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
                0o600,
            )
        };
        if fd >= 0 {
            if !write_header(fd, header) {
                let e = format!("cannot write trace {}: {}", path.to_string_lossy(), errno_text());
                // SAFETY: our own descriptor, closed once.
                unsafe { libc::close(fd) };
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

/// How the default trace name is built: `gpuleak.<program>.<pid>.trace`.
pub fn default_path(program: &OsStr, pid: u32) -> OsString {
    let mut p = OsString::from("gpuleak.");
    p.push(program);
    p.push(format!(".{pid}.trace"));
    p
}

impl Writer {
    /// Creates the file exclusively (never following a symlink, never overwriting: an
    /// existing name gets a numeric suffix), mode 0600, with its header written before the
    /// name appears (a process killed at any moment leaves no file, or one whose header reads).
    pub fn create(path: &OsStr, pid: u32, start_unix_ns: u64) -> Result<Writer, String> {
        let mut header = [0u8; HEADER_SIZE];
        FileHeader {
            version: FORMAT_VERSION,
            block_size: BLOCK_SIZE as u32,
            pid,
            start_unix_ns,
        }
        .write(&mut header);
        let (fd, chosen) = match create_unnamed_then_link(path, &header)? {
            Some(created) => created,
            None => create_named(path, &header)?,
        };
        // SAFETY: fstatfs fills the struct we pass for our own descriptor.
        let on_tmpfs = unsafe {
            let mut st: libc::statfs = std::mem::zeroed();
            libc::fstatfs(fd, &mut st) == 0 && st.f_type == libc::TMPFS_MAGIC
        };
        let absolute = if chosen.as_bytes().starts_with(b"/") {
            chosen.clone()
        } else {
            std::env::current_dir()
                .map(|d| d.join(&chosen).into_os_string())
                .unwrap_or_else(|_| chosen.clone())
        };
        let empty = || {
            Mutex::new(DetachedBlock {
                ptr: std::ptr::null_mut(),
                cursor: BlockCursor {
                    pos: 0,
                    state: BlockState::default(),
                },
            })
        };
        let w = Writer {
            file: Mutex::new(TraceFile::new(fd, &absolute)),
            path: chosen,
            absolute,
            zero_blocks: !on_tmpfs,
            generation: GENERATION.load(Ordering::Acquire),
            // Block 0 is the last words' (mapped below).
            next_block: AtomicU64::new(1),
            size: AtomicU64::new(0),
            closed: AtomicBool::new(false),
            lost: AtomicU64::new(0),
            failed: AtomicBool::new(false),
            detached: empty(),
            last_words: empty(),
        };
        let reserved = w
            .ensure((HEADER_SIZE + 4 * BLOCK_SIZE) as u64)
            .and_then(|()| w.map_at(0).ok_or_else(|| "cannot map the trace".to_string()));
        match reserved {
            Ok(p) => {
                w.last_words.lock().unwrap_or_else(|p| p.into_inner()).ptr = p;
                Ok(w)
            }
            Err(e) => {
                w.file.lock().unwrap_or_else(|p| p.into_inner()).close_if_ours();
                Err(e)
            }
        }
    }

    /// The trace file's absolute path, as it was named when created.
    pub fn absolute_path(&self) -> &OsStr {
        &self.absolute
    }

    /// Makes the file at least `end` bytes, reserving disk space; fails on a full disk or a
    /// file size limit.
    fn ensure(&self, end: u64) -> Result<(), String> {
        if self.size.load(Ordering::Acquire) >= end {
            return Ok(());
        }
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        self.ensure_locked(&mut file, end)
    }

    /// [`ensure`](Self::ensure) under the file's lock.
    fn ensure_locked(&self, file: &mut TraceFile, end: u64) -> Result<(), String> {
        let size = self.size.load(Ordering::Acquire);
        if size >= end {
            return Ok(());
        }
        let mut want = end.max(size.saturating_mul(2).min(size + (64 << 20)));
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct we pass.
        if unsafe { libc::getrlimit(libc::RLIMIT_FSIZE, &mut lim) } == 0 && lim.rlim_cur != libc::RLIM_INFINITY {
            if end > lim.rlim_cur {
                return Err(format!(
                    "trace {} reached the file size limit (RLIMIT_FSIZE = {} bytes)",
                    self.path.to_string_lossy(),
                    lim.rlim_cur
                ));
            }
            want = want.min(lim.rlim_cur);
        }
        let fd = file.checked()?;
        let grow = |to: u64| {
            // SAFETY: a descriptor just checked to be the trace's; offsets are within i64 by
            // construction.
            unsafe { libc::posix_fallocate(fd, size as libc::off_t, (to - size) as libc::off_t) }
        };
        let mut rc = grow(want);
        if rc != 0 && want > end {
            // The growth ahead of use did not fit (a small file system or quota): only what is
            // needed now.
            want = end;
            rc = grow(want);
        }
        if rc != 0 {
            let e = std::io::Error::from_raw_os_error(rc);
            return Err(format!("cannot grow trace {}: {e}", self.path.to_string_lossy()));
        }
        self.size.store(want, Ordering::Release);
        Ok(())
    }

    /// Appends a record from the calling thread. Returns false if it was lost.
    #[inline]
    pub fn write(&self, rec: RecordRef<'_, '_>) -> bool {
        self.write_with(rec.seq, rec.time_ns, |cur, block| cur.append_ref(block, rec))
    }

    /// [`write`](Self::write) for a body known by its type (the hot hooks: no `Body` built).
    #[inline(always)]
    pub fn write_fields<'a, F: Fields<'a>>(&self, seq: Seq, time_ns: u64, body: &F) -> bool {
        self.write_with(seq, time_ns, |cur, block| cur.append_fields(block, seq, time_ns, body))
    }

    /// Appends with `append` (which encodes one record into a block through its cursor) into
    /// this thread's block, starting a new block when it is full.
    #[inline(always)]
    fn write_with(
        &self,
        seq: Seq,
        time_ns: u64,
        append: impl Fn(&mut BlockCursor, &mut [u8]) -> Result<(), NoRoom>,
    ) -> bool {
        let ok = LOCAL
            .try_with(|tb| {
                if (tb.generation.get() != self.generation || tb.ptr.get().is_null())
                    && !self.new_block(tb, seq, time_ns)
                {
                    return false;
                }
                let p = tb.ptr.get();
                // SAFETY: `p` is this thread's own mapping of BLOCK_SIZE bytes; no other
                // thread writes it.
                let block = unsafe { std::slice::from_raw_parts_mut(p, BLOCK_SIZE) };
                // SAFETY: this thread's own cursor, borrowed for this call only: records are
                // written inside a hook (which a nested driver call or a signal handler's
                // CUDA call passes through without recording) or at thread or process exit,
                // so a write never runs twice at once on one thread. In place, because the
                // cursor is 56 bytes and this is the hot path of every record.
                let cur = unsafe { &mut *tb.cursor.as_ptr() };
                if append(cur, block).is_ok() {
                    return true;
                }
                // The block is full (its cursor is replaced, never used again).
                if !self.new_block(tb, seq, time_ns) {
                    return false;
                }
                let p = tb.ptr.get();
                // SAFETY: as above, the new block.
                let block = unsafe { std::slice::from_raw_parts_mut(p, BLOCK_SIZE) };
                // SAFETY: as above.
                let cur = unsafe { &mut *tb.cursor.as_ptr() };
                append(cur, block).is_ok()
            })
            .unwrap_or_else(|_| self.write_detached(seq, time_ns, &append));
        if !ok {
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    /// Writes from a thread without thread-locals, into the shared detached block.
    #[cold]
    fn write_detached(&self, seq: Seq, time_ns: u64, append: &Append<'_>) -> bool {
        let mut d = self.detached.lock().unwrap_or_else(|p| p.into_inner());
        for _ in 0..2 {
            if !d.ptr.is_null() {
                // SAFETY: the detached block is BLOCK_SIZE bytes, written only under this lock.
                let block = unsafe { std::slice::from_raw_parts_mut(d.ptr, BLOCK_SIZE) };
                if append(&mut d.cursor, block).is_ok() {
                    return true;
                }
                unmap(std::mem::replace(&mut d.ptr, std::ptr::null_mut()));
            }
            match self.map_block() {
                Some(p) => {
                    // SAFETY: a fresh zeroed BLOCK_SIZE mapping.
                    let block = unsafe { std::slice::from_raw_parts_mut(p, BLOCK_SIZE) };
                    d.cursor = BlockCursor::start(block, gettid(), seq.0, time_ns);
                    d.ptr = p;
                }
                None => return false,
            }
        }
        false
    }

    /// Claims the next block of the file and maps it.
    fn map_block(&self) -> Option<*mut u8> {
        if self.failed.load(Ordering::Relaxed) || self.closed.load(Ordering::Acquire) {
            // After a failure (said once) or at exit (threads still running while `exit()`
            // runs the unload handlers: their records are counted, not announced).
            return None;
        }
        let index = self.next_block.fetch_add(1, Ordering::AcqRel);
        self.map_at(index)
    }

    /// Makes block `index` exist on disk and maps it.
    fn map_at(&self, index: u64) -> Option<*mut u8> {
        let offset = HEADER_SIZE as u64 + index * BLOCK_SIZE as u64;
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if self.closed.load(Ordering::Acquire) {
            return None;
        }
        if let Err(e) = self.ensure_locked(&mut file, offset + BLOCK_SIZE as u64) {
            self.fail(&e);
            return None;
        }
        let fd = match file.checked() {
            Ok(fd) => fd,
            Err(e) => {
                self.fail(&e);
                return None;
            }
        };
        if self.zero_blocks {
            // Written zeros first: the mapping's pages are then in the page cache with their
            // blocks written, and the first store to each costs a minor fault instead of the
            // file system's allocation of an unwritten extent, measured 12x dearer on ext4
            // (docs/performance.md, "Writing the trace"). tmpfs gains nothing from it.
            // SAFETY: writes BLOCK_SIZE bytes of a static zero buffer to the trace's
            // descriptor (checked just above), inside the file (`ensure_locked`).
            let n = unsafe { libc::pwrite(fd, ZEROS.0.as_ptr().cast(), BLOCK_SIZE, offset as libc::off_t) };
            if n != BLOCK_SIZE as isize {
                self.fail(&format!(
                    "cannot write trace {}: {}",
                    self.path.to_string_lossy(),
                    errno_text()
                ));
                return None;
            }
        }
        // SAFETY: maps BLOCK_SIZE bytes of the trace (its descriptor checked above) at a
        // page-aligned offset that `ensure_locked` made exist; only the claimer writes them.
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
            self.fail(&format!(
                "cannot map trace {}: {}",
                self.path.to_string_lossy(),
                errno_text()
            ));
            return None;
        }
        Some(p.cast::<u8>())
    }

    fn new_block(&self, tb: &ThreadBlock, first_seq: Seq, first_time_ns: u64) -> bool {
        if tb.generation.get() != self.generation {
            // A fork child's first record, or a thread's first ever.
            tb.tid.set(gettid());
        }
        unmap(tb.ptr.replace(std::ptr::null_mut()));
        tb.generation.set(self.generation);
        if !self.closed.load(Ordering::Acquire) {
            if let Some((p, cursor)) = spare::take(tb.tid.get(), first_seq, first_time_ns, self.generation) {
                tb.cursor.set(cursor);
                tb.ptr.set(p);
                return true;
            }
        }
        let Some(p) = self.map_block() else {
            return false;
        };
        // SAFETY: the fresh mapping is BLOCK_SIZE bytes, zero-filled by fallocate.
        let block = unsafe { std::slice::from_raw_parts_mut(p, BLOCK_SIZE) };
        tb.cursor
            .set(BlockCursor::start(block, tb.tid.get(), first_seq.0, first_time_ns));
        tb.ptr.set(p);
        true
    }

    fn fail(&self, why: &str) {
        if !self.failed.swap(true, Ordering::AcqRel) {
            crate::diag::line(format_args!("{why}; recording stops here, the program continues"));
        }
    }

    /// At process exit: writes `last` (the final records, in order), no more blocks after
    /// them, and cuts the file to the blocks in use. A record that finds no room in the
    /// calling thread's block, or no block at all (a full disk, a descriptor the program
    /// closed for good), goes to block 0, kept for this since the start.
    pub fn close(&self, last: &[RecordRef<'_, '_>]) {
        for (i, rec) in last.iter().enumerate() {
            if !self.write(*rec) {
                // Not lost after all (and not in the count a `Lost` among `last` carries).
                self.lost.fetch_sub(1, Ordering::Relaxed);
                self.write_last_words(&last[i..]);
                break;
            }
        }
        let mut file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        let used = HEADER_SIZE as u64 + self.next_block.load(Ordering::Acquire) * BLOCK_SIZE as u64;
        if used < self.size.load(Ordering::Acquire) {
            if let Ok(fd) = file.checked() {
                // SAFETY: the trace's descriptor (checked just above); every block handed out
                // lies below `used`.
                if unsafe { libc::ftruncate(fd, used as libc::off_t) } == 0 {
                    self.size.store(used, Ordering::Release);
                }
            }
        }
    }

    /// Writes `records` into block 0, which no thread was handed.
    fn write_last_words(&self, records: &[RecordRef<'_, '_>]) {
        let mut d = self.last_words.lock().unwrap_or_else(|p| p.into_inner());
        if d.ptr.is_null() {
            return;
        }
        // SAFETY: block 0's mapping, BLOCK_SIZE bytes, written only under this lock.
        let block = unsafe { std::slice::from_raw_parts_mut(d.ptr, BLOCK_SIZE) };
        if d.cursor.pos == 0 {
            let Some(first) = records.first() else { return };
            d.cursor = BlockCursor::start(block, gettid(), first.seq.0, first.time_ns);
        }
        for rec in records {
            if d.cursor.append_ref(block, *rec).is_err() {
                return;
            }
        }
    }

    /// In a forked child: forget the parent's file without touching it.
    pub fn abandon_in_child(&mut self) {
        self.file.get_mut().unwrap_or_else(|p| p.into_inner()).close_if_ours();
    }
}

fn gettid() -> u32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::syscall(libc::SYS_gettid) as u32 }
}
