//! Rotation of a bounded trace, and the checkpoint builder.
//!
//! **The switch** happens on the thread that finds the current segment full, under the files'
//! lock, in a handful of system calls: the next segment is created (named after the first,
//! `-000001`, `-000002`...), the writer's key is moved to it, and the sequence counter is read:
//! `cut`, the last number taken. Threads compare their block's key with the writer's before
//! each record and move to the new segment at their next one. A number is taken before the
//! key is compared, both sequentially consistent, so every record numbered after the cut is
//! written into the new segment; records numbered up to the cut are in the old one, or, when
//! their thread took the number before the switch and wrote it after (a free is numbered
//! before its driver call), in the new one.
//!
//! **The checkpoint** is then built by one thread of the shim's own, never a calling thread. It
//! first waits until no thread holds a number at or below the cut ([`super::hold`]), then
//! reads back what the trace holds of the history (the newest segment with a complete
//! checkpoint read whole, the later ones, and the records numbered up to the cut in the new
//! one), feeds it in order to [`Compactor`], and writes the result into blocks of the new
//! segment, its `Checkpoint` record last. Readers ignore a checkpoint without that record,
//! and pass over the new segment's own records numbered at or below it (they are in it).
//!
//! **Deletion** comes only after that: the segments before the newest complete checkpoint may
//! go, oldest first, while the files together pass the bound. A process killed at any moment
//! leaves the segment with the last complete checkpoint, or the first, and every one after it.
//!
//! A full disk deletes what may go first; what still does not fit is counted as lost, and
//! tried again a little later. A file size limit (`RLIMIT_FSIZE`) ends a segment early.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use gpuleak_format::checkpoint::{write_blocks, Compactor};
use gpuleak_format::series::MergeBySeq;
use gpuleak_format::{
    BlockCursor, BlockState, DecodeError, Entry, FileHeader, Segment, Trace, TraceId, BLOCK_SIZE, CHECKPOINT_TID,
    HEADER_SIZE,
};

use super::hold;
use super::segment::{Grow, ReadMap, SegFile};
use super::state::{key_of, unmap, Builder, Files, Job, Shared, Writer, CURRENT_KEY};

impl Writer {
    /// Starts the next segment (under the files' lock, on the calling thread) and hands its
    /// checkpoint to the builder. Never inlined into the block claim: its header buffers
    /// would enlarge the stack of every claim.
    #[cold]
    #[inline(never)]
    pub(super) fn rotate(&self, files: &mut Files) -> Result<(), Grow> {
        let sh = &*self.shared;
        let Some(bound) = sh.bound else { return Ok(()) };
        let number = files.current().number + 1;
        let mut header = Box::new([0u8; HEADER_SIZE]);
        FileHeader { ..sh.header }.write(&mut header);
        if !files.flagged {
            // The first file becomes segment 0 before segment 1 exists, so that a reader never
            // finds a segment 1 beside a whole trace.
            let mut first = header.clone();
            Segment {
                number: 0,
                trace_id: TraceId(sh.trace_id),
            }
            .write(&mut first);
            let seg0 = files.segs.front_mut().expect("a trace always has a file");
            if seg0.number == 0 && !seg0.write_at(&first[..], 0) {
                return Err(Grow::Failed(format!(
                    "cannot mark trace {} as the first of its segments",
                    seg0.path.to_string_lossy()
                )));
            }
            files.flagged = true;
        }
        Segment {
            number,
            trace_id: TraceId(sh.trace_id),
        }
        .write(&mut header);
        let mut name = self.path.clone();
        name.push(format!("-{number:06}"));
        let (mut next, _) = SegFile::create(&name, number, &header).map_err(|e| {
            if std::io::Error::last_os_error().raw_os_error() == Some(libc::ENOSPC) {
                Grow::NoSpace(e)
            } else {
                Grow::Failed(e)
            }
        })?;
        next.limit_blocks = bound.segment_blocks();
        next.checkpointed = false;
        // Room for the checkpoint, ahead of the threads' blocks: half again the last one.
        let reserve = files.last_checkpoint_blocks + files.last_checkpoint_blocks / 2 + 1;
        next.reserved = (1, 1 + reserve);
        next.next_block = 1 + reserve;
        let block0 = next
            .ensure(HEADER_SIZE as u64 + (4 + reserve) * BLOCK_SIZE as u64, 0)
            .and_then(|()| next.map(0, sh.zero_blocks));
        let block0 = match block0 {
            Ok(p) => p,
            Err(e) => {
                next.delete();
                return Err(e);
            }
        };
        files.segs.push_back(next);
        {
            let mut lw = self.last_words.lock().unwrap_or_else(|p| p.into_inner());
            unmap(std::mem::replace(&mut lw.ptr, block0));
            lw.cursor = BlockCursor {
                pos: 0,
                state: BlockState::default(),
            };
        }
        // The switch: the key first, then the counter (see the module documentation).
        self.key.store(key_of(self.generation, number), Ordering::SeqCst);
        CURRENT_KEY.store(key_of(self.generation, number), Ordering::Release);
        let cut = self.seq.load(Ordering::SeqCst).saturating_sub(1);
        if sh.builder.submit(&self.shared, Job { number, cut }) {
            files.building = true;
            files.cut = cut;
        } else {
            // No checkpoint will come: the segment grows without bound, and none is deleted.
            files.current().limit_blocks = u64::MAX;
        }
        Ok(())
    }
}

impl Builder {
    /// Hands `job` to the builder thread, starting it the first time; false if it cannot
    /// start (said once).
    fn submit(&self, shared: &Arc<Shared>, job: Job) -> bool {
        let mut st = self.job.lock().unwrap_or_else(|p| p.into_inner());
        st.next = Some(job);
        if !st.started {
            let sh = Arc::clone(shared);
            let spawned = std::thread::Builder::new()
                .name("gpuleak-checkpoint".into())
                .spawn(move || run(&sh));
            match spawned {
                Ok(_) => st.started = true,
                Err(e) => {
                    st.next = None;
                    crate::diag::line(format_args!(
                        "cannot start the thread that writes the trace's checkpoints: {e}; the trace is no longer bounded"
                    ));
                    return false;
                }
            }
        }
        drop(st);
        self.ready.notify_one();
        true
    }
}

/// The builder thread: one checkpoint at a time, for as long as the process runs.
fn run(sh: &Shared) {
    crate::sys::block_all_signals();
    // Below the program's threads: on a busy machine the checkpoint waits, not the program.
    crate::sys::set_thread_nice(10);
    loop {
        let job = {
            let mut st = sh.builder.job.lock().unwrap_or_else(|p| p.into_inner());
            loop {
                if let Some(job) = st.next.take() {
                    break job;
                }
                st = sh.builder.ready.wait(st).unwrap_or_else(|p| p.into_inner());
            }
        };
        // A fault in the builder must not leave threads waiting for it: the trace stops
        // rotating instead.
        let done = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| build(sh, &job)));
        let mut files = sh.files.lock().unwrap_or_else(|p| p.into_inner());
        files.building = false;
        files.ended += 1;
        sh.built.notify_all();
        let Ok(done) = done else {
            files.current().limit_blocks = u64::MAX;
            return;
        };
        if let Some(bytes) = done {
            files.last_checkpoint_blocks = bytes / BLOCK_SIZE as u64;
        }
        if let (Some(bytes), Some(seg)) = (done, files.segs.iter_mut().find(|s| s.number == job.number)) {
            seg.checkpointed = true;
            // A checkpoint that takes half a segment or more (a very large live set) would
            // make every segment little more than its checkpoint: the segment grows instead.
            let blocks = bytes / BLOCK_SIZE as u64;
            if let Some(b) = sh.bound {
                seg.limit_blocks = b.segment_blocks().max(2 * blocks + 2);
            }
            let mut gone = trim(sh, &mut files);
            drop(files);
            gone.iter_mut().for_each(SegFile::delete);
        }
    }
}

/// Takes out the oldest segments that may go (those before the newest complete checkpoint)
/// while the files together pass the bound; the caller deletes them once it has let go of the
/// lock (punching a file's blocks out takes a while, and every block claim waits on the lock).
fn trim(sh: &Shared, files: &mut Files) -> Vec<SegFile> {
    let mut gone = Vec::new();
    let Some(bound) = sh.bound else { return gone };
    let nominal = bound.segment_blocks() * BLOCK_SIZE as u64 + HEADER_SIZE as u64;
    loop {
        let current = files.segs.back().map_or(0, |s| s.size.max(nominal));
        let closed: u64 = files.segs.iter().rev().skip(1).map(|s| s.size).sum();
        if closed.saturating_add(current) <= bound.max_bytes() {
            return gone;
        }
        match take_oldest(files) {
            Some(seg) => gone.push(seg),
            None => return gone,
        }
    }
}

/// The oldest segment, out of the list, if a later one has a complete checkpoint.
fn take_oldest(files: &mut Files) -> Option<SegFile> {
    let newest_checkpoint = files.segs.iter().rposition(|s| s.checkpointed).unwrap_or(0);
    if newest_checkpoint == 0 {
        return None;
    }
    files.segs.pop_front()
}

/// Deletes the oldest segment if a later one has a complete checkpoint (under the lock: a
/// full disk, where nothing goes on until it is done); false if none may go.
pub(super) fn delete_oldest(files: &mut Files) -> bool {
    match take_oldest(files) {
        Some(mut oldest) => {
            oldest.delete();
            true
        }
        None => false,
    }
}

/// Builds the checkpoint of `job`; returns its size in bytes once written, `None` if it
/// could not be (the process is exiting, a file could not be read or written).
fn build(sh: &Shared, job: &Job) -> Option<u64> {
    // Every number up to the cut written, in one segment or the other.
    if !hold::wait_below(job.cut, || sh.closed.load(Ordering::Acquire)) {
        return None;
    }
    // The history on disk: from the newest segment with a complete checkpoint (or the first)
    // to the new one, mapped under the lock (a mapping outlives a deletion).
    let maps: Vec<ReadMap> = {
        let mut files = sh.files.lock().unwrap_or_else(|p| p.into_inner());
        let from = files
            .segs
            .iter()
            .rposition(|s| s.checkpointed && s.number < job.number)?;
        let mut maps = Vec::new();
        for seg in files.segs.iter_mut().skip(from) {
            if seg.number < job.number {
                // Done with: no block of it is handed out again.
                seg.cut_to_used();
            }
            let used = seg.used();
            maps.push(seg.map_for_reading(used)?);
            if seg.number == job.number {
                break;
            }
        }
        maps
    };
    let traces: Vec<Trace<'_>> = maps
        .iter()
        .map(|m| Trace::new(m.bytes()))
        .collect::<Result<_, _>>()
        .ok()?;
    let (last, history) = traces.split_last()?;
    let mut streams: Vec<Box<dyn Iterator<Item = Result<Entry<'_>, DecodeError>> + '_>> = Vec::new();
    for (i, t) in history.iter().enumerate() {
        streams.push(if i == 0 {
            Box::new(t.records())
        } else {
            Box::new(t.records_past_checkpoint())
        });
    }
    streams.push(Box::new(numbered_up_to(last, job.cut).into_iter().map(Ok)));
    let mut compactor = Compactor::new();
    for entry in MergeBySeq::new(streams) {
        match entry {
            Ok(e) if e.record.seq.0 <= job.cut => compactor.add(e.tid, &e.record),
            Ok(_) => {}
            Err(_) => compactor.decode_error(),
        }
    }
    drop(traces);
    drop(maps);
    let compacted = compactor.finish(job.number);
    let mut bytes = Vec::new();
    write_blocks(&compacted, &mut bytes);
    drop(compacted);
    for chunk in bytes.chunks(BLOCK_SIZE) {
        let mut files = sh.files.lock().unwrap_or_else(|p| p.into_inner());
        if sh.closed.load(Ordering::Acquire) {
            return None;
        }
        let seg = files.segs.back_mut().filter(|s| s.number == job.number)?;
        // The blocks reserved for it first, then new ones.
        let reserved = seg.reserved.0 < seg.reserved.1;
        let index = if reserved { seg.reserved.0 } else { seg.next_block };
        let offset = HEADER_SIZE as u64 + index * BLOCK_SIZE as u64;
        seg.ensure(offset + BLOCK_SIZE as u64, 0).ok()?;
        // The block's magic last: a block cut short by a kill is never read as started.
        if !seg.write_at(&chunk[4..], offset + 4) || !seg.write_at(&chunk[..4], offset) {
            return None;
        }
        if reserved {
            seg.reserved.0 += 1;
        } else {
            seg.next_block = index + 1;
        }
    }
    Some(bytes.len() as u64)
}

/// The records of `trace`'s own blocks (not a checkpoint's) numbered at or below `cut`, in
/// order: the ones numbered before the rotation and written after it. Blocks are still being
/// written: each is read up to its first record past the cut (every record after it in the
/// block is numbered later) or to where its writer has got.
fn numbered_up_to<'a>(trace: &Trace<'a>, cut: u64) -> Vec<Entry<'a>> {
    let mut out = Vec::new();
    for i in 0..trace.block_count() {
        let Ok(Some(block)) = trace.block(i) else { continue };
        if block.tid() == CHECKPOINT_TID || block.base_seq() > cut {
            continue;
        }
        // Numbers rise through a block: one that does not is a record still being written.
        let mut last = 0;
        for entry in block {
            match entry {
                Ok(e) if e.record.seq.0 <= cut && e.record.seq.0 > last => {
                    last = e.record.seq.0;
                    out.push(e);
                }
                _ => break,
            }
        }
    }
    out.sort_by_key(|e| e.record.seq.0);
    out
}
