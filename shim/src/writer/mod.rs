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

//!
//! # Bounded traces
//!
//! With a bound ([`Bound`], `GPULEAK_MAX_TRACE`), the trace is a series of files, segments:
//! when the current one has handed out its share of the bound, the next is created and
//! threads move to it at their next record ([`rotate`]); a builder thread writes at its start
//! a checkpoint of everything before (from the files, never from the calling threads), and
//! only once that checkpoint is complete may the oldest segments go.

mod bound;
mod file;
mod hold;
mod rotate;
mod segment;
mod spare;
mod state;

pub use bound::Bound;
pub use state::Writer;

use std::cell::Cell;
use std::collections::VecDeque;
use std::ffi::{OsStr, OsString};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use gpuleak_format::{
    BlockCursor, BlockState, Fields, FileHeader, NoRoom, RecordRef, Seq, BLOCK_SIZE, FORMAT_VERSION, HEADER_SIZE,
};
use segment::{Grow, SegFile};
use state::{key_of, unmap, Builder, DetachedBlock, Files, Shared, CURRENT_KEY};

/// Bumped in every forked child: blocks mapped before the fork belong to the parent's file.
pub static GENERATION: AtomicU64 = AtomicU64::new(0);

/// Encodes one record into a block through its cursor (`NoRoom`: the block is full).
type Append<'f> = dyn Fn(&mut BlockCursor, &mut [u8]) -> Result<(), NoRoom> + 'f;

struct ThreadBlock {
    ptr: Cell<*mut u8>,
    cursor: Cell<BlockCursor>,
    /// [`key_of`] the block's segment.
    key: Cell<u64>,
    tid: Cell<u32>,
    generation: Cell<u64>,
    holder: hold::Holder,
}

impl Drop for ThreadBlock {
    fn drop(&mut self) {
        self.holder.exit();
        // The thread is exiting: the room left in its block goes to the next thread.
        let p = self.ptr.replace(std::ptr::null_mut());
        if !spare::give(p, self.cursor.get(), self.key.get()) {
            unmap(p);
        }
    }
}

thread_local! {
    static LOCAL: ThreadBlock = const {
        ThreadBlock {
            ptr: Cell::new(std::ptr::null_mut()),
            cursor: Cell::new(BlockCursor { pos: 0, state: BlockState { seq: 0, time: 0, ptr: 0, ctx: 0, stream: 0, event: 0 } }),
            key: Cell::new(u64::MAX),
            tid: Cell::new(0),
            generation: Cell::new(u64::MAX),
            holder: hold::Holder::new(),
        }
    };
}

/// How the default trace name is built: `gpuleak.<program>.<pid>.trace`.
pub fn default_path(program: &OsStr, pid: u32) -> OsString {
    let mut p = OsString::from("gpuleak.");
    p.push(program);
    p.push(format!(".{pid}.trace"));
    p
}

/// A random trace id (never 0).
fn random_id() -> u64 {
    let mut bytes = [0u8; 8];
    let n = crate::sys::getrandom(&mut bytes, libc::GRND_NONBLOCK);
    let mut id = u64::from_ne_bytes(bytes);
    if n != 8 {
        let pid = u64::from(crate::sys::getpid());
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        id = now ^ pid.rotate_left(40) ^ 0x9e37_79b9_7f4a_7c15;
    }
    id.max(1)
}

/// The monotonic clock in nanoseconds.
fn now_ns() -> u64 {
    crate::sys::clock_ns(libc::CLOCK_MONOTONIC)
}

impl Writer {
    /// Creates the trace's first file exclusively (never following a symlink, never
    /// overwriting: an existing name gets a numeric suffix), mode 0600, with its header
    /// written before the name appears (a process killed at any moment leaves no file, or one
    /// whose header reads). With `bound`, the trace rotates through segments.
    pub fn create(path: &OsStr, pid: u32, start_unix_ns: u64, bound: Option<Bound>) -> Result<Writer, String> {
        let header = FileHeader {
            version: FORMAT_VERSION,
            block_size: BLOCK_SIZE as u32,
            pid,
            start_unix_ns,
        };
        let mut bytes = [0u8; HEADER_SIZE];
        header.write(&mut bytes);
        let (mut first, on_tmpfs) = SegFile::create(path, 0, &bytes)?;
        if let Some(b) = &bound {
            first.limit_blocks = b.segment_blocks();
        }
        let reserved = first
            .ensure((HEADER_SIZE + 4 * BLOCK_SIZE) as u64, 0)
            .and_then(|()| first.map(0, !on_tmpfs));
        let block0 = match reserved {
            Ok(p) => p,
            Err(e) => {
                first.file.close_if_ours();
                return Err(e.text().to_string());
            }
        };
        let generation = GENERATION.load(Ordering::Acquire);
        let chosen = first.path.clone();
        let absolute = segment::absolute(&chosen);
        let shared = Arc::new(Shared {
            files: Mutex::new(Files {
                segs: VecDeque::from([first]),
                building: false,
                flagged: false,
                retry_after: 0,
                told_space: false,
                cut: 0,
                ended: 0,
                last_checkpoint_blocks: 0,
            }),
            closed: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            zero_blocks: !on_tmpfs,
            header,
            trace_id: random_id(),
            bound,
            builder: Builder::default(),
            built: Condvar::new(),
        });
        let w = Writer {
            shared,
            path: chosen,
            absolute,
            generation,
            key: AtomicU64::new(key_of(generation, 0)),
            seq: AtomicU64::new(1),
            lost: AtomicU64::new(0),
            detached: DetachedBlock::empty(),
            last_words: DetachedBlock::empty(),
        };
        w.last_words.lock().unwrap_or_else(|p| p.into_inner()).ptr = block0;
        CURRENT_KEY.store(key_of(generation, 0), Ordering::Release);
        Ok(w)
    }

    /// The trace file's absolute path (the first segment's), as it was named when created.
    pub fn absolute_path(&self) -> &OsStr {
        &self.absolute
    }

    /// Takes the next sequence number, held by the calling thread until its record is
    /// written ([`hold`]: a rotation's checkpoint waits for the numbers before its cut).
    #[inline]
    pub fn take_seq(&self) -> u64 {
        // SeqCst: a rotation stores the new segment, then reads this counter; a number taken
        // after that read is written after the switch (see `rotate`).
        let take = || self.seq.fetch_add(1, Ordering::SeqCst);
        LOCAL
            .try_with(|tb| tb.holder.take(take))
            .unwrap_or_else(|_| hold::take_orphan(take))
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
    /// this thread's block, starting a new block when it is full or its segment is no longer
    /// the current one; then lets go of the record's sequence number.
    #[inline(always)]
    fn write_with(
        &self,
        seq: Seq,
        time_ns: u64,
        append: impl Fn(&mut BlockCursor, &mut [u8]) -> Result<(), NoRoom>,
    ) -> bool {
        let ok = LOCAL
            .try_with(|tb| {
                let ok = self.write_local(tb, seq, time_ns, &append);
                tb.holder.written();
                ok
            })
            .unwrap_or_else(|_| {
                let ok = self.write_detached(seq, time_ns, &append);
                hold::orphan_written();
                ok
            });
        if !ok {
            self.lost.fetch_add(1, Ordering::Relaxed);
        }
        ok
    }

    #[inline(always)]
    fn write_local(
        &self,
        tb: &ThreadBlock,
        seq: Seq,
        time_ns: u64,
        append: &impl Fn(&mut BlockCursor, &mut [u8]) -> Result<(), NoRoom>,
    ) -> bool {
        // SeqCst: pairs with the rotation's store of the key and read of the counter.
        if (tb.key.get() != self.key.load(Ordering::SeqCst) || tb.ptr.get().is_null())
            && !self.new_block(tb, seq, time_ns)
        {
            return false;
        }
        let p = tb.ptr.get();
        // SAFETY: `p` is the BLOCK_SIZE mapping this thread's `ThreadBlock` holds: each block
        // has one holder (handed out once by `claim`, or taken from the spares under their
        // lock), so nothing else refers to it (the builder reads the file through a mapping
        // of its own).
        let block = unsafe { std::slice::from_raw_parts_mut(p, BLOCK_SIZE) };
        // SAFETY: this thread's own cursor, borrowed for this call only: records are written
        // inside a hook (which a nested driver call or a signal handler's CUDA call passes
        // through without recording) or at thread or process exit, so a write never runs
        // twice at once on one thread. In place, because the cursor is 56 bytes and this is
        // the hot path of every record.
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
    }

    /// Writes from a thread without thread-locals, into the shared detached block.
    #[cold]
    fn write_detached(&self, seq: Seq, time_ns: u64, append: &Append<'_>) -> bool {
        let mut d = self.detached.lock().unwrap_or_else(|p| p.into_inner());
        for _ in 0..2 {
            if !d.ptr.is_null() && d.key == self.key.load(Ordering::SeqCst) {
                // SAFETY: the detached block's BLOCK_SIZE mapping, held and written only under
                // this lock.
                let block = unsafe { std::slice::from_raw_parts_mut(d.ptr, BLOCK_SIZE) };
                if append(&mut d.cursor, block).is_ok() {
                    return true;
                }
            }
            unmap(std::mem::replace(&mut d.ptr, std::ptr::null_mut()));
            match self.claim(None) {
                Some((p, key)) => {
                    // SAFETY: a BLOCK_SIZE mapping just claimed, which nothing else has.
                    let block = unsafe { std::slice::from_raw_parts_mut(p, BLOCK_SIZE) };
                    d.cursor = BlockCursor::start(block, gettid(), seq.0, time_ns);
                    d.ptr = p;
                    d.key = key;
                }
                None => return false,
            }
        }
        false
    }

    /// Claims the next block of the current segment and maps it, rotating first when the
    /// segment has handed out its share of the bound; returns it with its segment's key.
    ///
    /// `oldest` is the oldest number the calling thread holds (`None`: a thread without
    /// thread-locals). A thread that holds none at or below the cut of the checkpoint being
    /// built may wait for it (the builder waits for the others): when a file size limit or a
    /// full disk stops the current segment (the checkpoint lets old segments go, or a new one
    /// start), and when a program writes records faster than the builder reads them back (only
    /// tight synthetic loops do, tens of MB of trace a second), once the current segment has
    /// reached its share. Otherwise a record that finds no room is counted as lost.
    #[inline(never)]
    fn claim(&self, oldest: Option<u64>) -> Option<(*mut u8, u64)> {
        let sh = &*self.shared;
        if sh.failed.load(Ordering::Relaxed) || sh.closed.load(Ordering::Acquire) {
            // After a failure (said once) or at exit (threads still running while `exit()`
            // runs the unload handlers: their records are counted, not announced).
            return None;
        }
        let mut files = sh.files.lock().unwrap_or_else(|p| p.into_inner());
        if sh.closed.load(Ordering::Acquire) {
            return None;
        }
        let Some(bound) = sh.bound else {
            return self.claim_in_current(&mut files).map_err(|e| sh.fail(e.text())).ok();
        };
        // A thread may wait for the checkpoint being built (see above).
        let may_wait = |files: &Files| files.building && oldest.is_some_and(|o| o > files.cut);
        let wait = |files| self.wait_for_checkpoint(files);
        // At its share: the current segment and the one before it (kept until the checkpoint is
        // written) stay within one segment over the bound.
        let cap = files.current().limit_blocks.max(bound.segment_blocks());
        if may_wait(&files) && files.current().next_block >= cap {
            files = wait(files);
        }
        if files.retry_after != 0 {
            if now_ns() < files.retry_after {
                return None;
            }
            files.retry_after = 0;
        }
        for _ in 0..8 {
            if sh.closed.load(Ordering::Acquire) {
                return None;
            }
            let cur = files.current();
            let mut outcome = Ok(());
            if cur.next_block >= cur.limit_blocks && !files.building {
                outcome = self.rotate(&mut files);
            }
            let outcome = outcome.and_then(|()| self.claim_in_current(&mut files));
            let e = match outcome {
                Ok(claimed) => return Some(claimed),
                Err(e) => e,
            };
            match e {
                // A file size limit: the segment ends here; a new one starts once the
                // checkpoint being built is done.
                Grow::SizeLimit(_) if files.current().next_block > 1 && !files.building => {
                    let cur = files.current();
                    cur.limit_blocks = cur.next_block;
                }
                // A full disk: the oldest segments that may go make room.
                Grow::NoSpace(_) if rotate::delete_oldest(&mut files) => {}
                Grow::SizeLimit(_) | Grow::NoSpace(_) if may_wait(&files) => files = wait(files),
                Grow::SizeLimit(e) | Grow::NoSpace(e) => {
                    if !files.told_space {
                        files.told_space = true;
                        crate::diag::line(format_args!(
                            "{e}; records are counted as lost until there is room again (the program continues)"
                        ));
                    }
                    files.retry_after = now_ns() + 100_000_000;
                    return None;
                }
                Grow::Failed(e) => {
                    drop(files);
                    sh.fail(&e);
                    return None;
                }
            }
        }
        None
    }

    /// Waits (at most a minute) for the checkpoint being built to end. Not for the next one
    /// too: its cut may be above a number the caller holds, which that one waits for.
    fn wait_for_checkpoint<'a>(&'a self, files: MutexGuard<'a, Files>) -> MutexGuard<'a, Files> {
        let ended = files.ended;
        let (files, _) = self
            .shared
            .built
            .wait_timeout_while(files, std::time::Duration::from_secs(60), |f| f.ended == ended)
            .unwrap_or_else(|p| p.into_inner());
        files
    }

    /// Claims and maps the next block of the current segment, under the files' lock.
    fn claim_in_current(&self, files: &mut Files) -> Result<(*mut u8, u64), Grow> {
        let zero = self.shared.zero_blocks;
        let bounded = self.shared.bound.is_some();
        let cur = files.current();
        let index = cur.next_block;
        let end = HEADER_SIZE as u64 + (index + 1) * BLOCK_SIZE as u64;
        let ahead = if bounded {
            HEADER_SIZE as u64 + cur.limit_blocks.saturating_mul(BLOCK_SIZE as u64)
        } else {
            u64::MAX
        };
        cur.ensure(end, ahead)?;
        let p = cur.map(index, zero)?;
        cur.next_block = index + 1;
        Ok((p, key_of(self.generation, cur.number)))
    }

    fn new_block(&self, tb: &ThreadBlock, first_seq: Seq, first_time_ns: u64) -> bool {
        if tb.generation.get() != self.generation {
            // A fork child's first record, or a thread's first ever.
            tb.tid.set(gettid());
            tb.generation.set(self.generation);
        }
        unmap(tb.ptr.replace(std::ptr::null_mut()));
        tb.key.set(u64::MAX);
        if !self.shared.closed.load(Ordering::Acquire) {
            let key = self.key.load(Ordering::SeqCst);
            if let Some((p, cursor)) = spare::take(tb.tid.get(), first_seq, first_time_ns, key) {
                tb.cursor.set(cursor);
                tb.ptr.set(p);
                tb.key.set(key);
                return true;
            }
        }
        let Some((p, key)) = self.claim(Some(tb.holder.oldest())) else {
            return false;
        };
        // SAFETY: a BLOCK_SIZE mapping just claimed for this thread, which nothing else has.
        let block = unsafe { std::slice::from_raw_parts_mut(p, BLOCK_SIZE) };
        tb.cursor
            .set(BlockCursor::start(block, tb.tid.get(), first_seq.0, first_time_ns));
        tb.ptr.set(p);
        tb.key.set(key);
        true
    }

    /// At process exit: writes `last` (the final records, in order), no more blocks after
    /// them, and cuts the current file to the blocks in use. A record that finds no room in
    /// the calling thread's block, or no block at all (a full disk, a descriptor the program
    /// closed for good), goes to block 0, kept for this since the file's start.
    pub fn close(&self, last: &[RecordRef<'_, '_>]) {
        for (i, rec) in last.iter().enumerate() {
            if !self.write(*rec) {
                // Not lost after all (and not in the count a `Lost` among `last` carries).
                self.lost.fetch_sub(1, Ordering::Relaxed);
                self.write_last_words(&last[i..]);
                break;
            }
        }
        let mut files = self.shared.files.lock().unwrap_or_else(|p| p.into_inner());
        if self.shared.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        files.current().cut_to_used();
    }

    /// Writes `records` into block 0 of the current file, which no thread was handed.
    fn write_last_words(&self, records: &[RecordRef<'_, '_>]) {
        let mut d = self.last_words.lock().unwrap_or_else(|p| p.into_inner());
        if d.ptr.is_null() {
            return;
        }
        // SAFETY: block 0's BLOCK_SIZE mapping, held and written only under this lock.
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

    /// In a forked child: forget the parent's files without touching them. A lock some
    /// thread of the parent held at the fork stays held here: its descriptors are left open
    /// (close-on-exec, a few) rather than waited for.
    pub fn abandon_in_child(&mut self) {
        let files = match self.shared.files.try_lock() {
            Ok(f) => Some(f),
            Err(std::sync::TryLockError::Poisoned(p)) => Some(p.into_inner()),
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        if let Some(mut files) = files {
            for s in files.segs.iter_mut() {
                s.file.close_if_ours();
            }
        }
    }
}

/// In a forked child, before anything else: the numbers the parent's threads held are gone
/// with them; the calling thread keeps its slot, holding nothing.
pub fn in_forked_child() {
    hold::in_forked_child();
    let _ = LOCAL.try_with(|tb| tb.holder.keep_in_child());
}

fn gettid() -> u32 {
    crate::sys::gettid() as u32
}
