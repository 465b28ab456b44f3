//! Reading a trace: blocks in file order, merged into one stream ordered by `seq`.
//!
//! Memory follows the number of blocks that are open at once (about the number of threads
//! that were writing at the same time), never the length of the trace.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::block::{FileHeader, Segment, BLOCK_HEADER_SIZE, BLOCK_MAGIC, CHECKPOINT_TID, HEADER_SIZE, MAGIC};
use crate::error::{DecodeError, ErrorKind};
use crate::fields::BlockState;
use crate::record::{Alloc, Body, Free, Record};
use crate::{FORMAT_VERSION, MIN_READ_VERSION};

/// A whole trace held in memory (or mapped).
#[derive(Clone)]
pub struct Trace<'a> {
    data: &'a [u8],
    header: FileHeader,
    segment: Option<Segment>,
}

/// A decoded record with where it came from.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry<'a> {
    /// OS thread id of the writer.
    pub tid: u32,
    /// File offset of the record.
    pub offset: u64,
    /// The record.
    pub record: Record<'a>,
}

impl<'a> Trace<'a> {
    /// Checks the header; everything else is decoded lazily.
    pub fn new(data: &'a [u8]) -> Result<Trace<'a>, DecodeError> {
        if data.is_empty() {
            return Err(DecodeError::new(0, ErrorKind::Empty));
        }
        if data.len() < 40 {
            // Only a file that starts as a trace does is a trace cut short.
            let n = data.len().min(MAGIC.len());
            if data[..n] != MAGIC[..n] {
                return Err(DecodeError::new(0, ErrorKind::BadMagic));
            }
            return Err(DecodeError::new(0, ErrorKind::Truncated("file header")));
        }
        if data[..8] != MAGIC {
            return Err(DecodeError::new(0, ErrorKind::BadMagic));
        }
        let u32_at = |o: usize| u32::from_le_bytes([data[o], data[o + 1], data[o + 2], data[o + 3]]);
        let version = u32_at(8);
        if !(MIN_READ_VERSION..=FORMAT_VERSION).contains(&version) {
            return Err(DecodeError::new(8, ErrorKind::UnsupportedVersion(version)));
        }
        if u32_at(12) as usize != HEADER_SIZE {
            return Err(DecodeError::new(12, ErrorKind::BadHeader("header size")));
        }
        let block_size = u32_at(16);
        if !(4096..=1 << 30).contains(&block_size) || !block_size.is_power_of_two() {
            return Err(DecodeError::new(16, ErrorKind::BadHeader("block size")));
        }
        let mut t = [0u8; 8];
        t.copy_from_slice(&data[32..40]);
        let header = FileHeader {
            version,
            block_size,
            pid: u32_at(24),
            start_unix_ns: u64::from_le_bytes(t),
        };
        let segment = Segment::read(data);
        if segment.is_none() && data.len() < 56 && data[20] & 1 != 0 {
            return Err(DecodeError::new(40, ErrorKind::Truncated("file header")));
        }
        Ok(Trace { data, header, segment })
    }

    /// A decoder over `data` with the header [`new`](Self::new) read from it before: for a
    /// file whose bytes may turn to zeros while it is read (a bounded trace's segment deleted
    /// by its writer), so that its blocks read as never started instead of the whole file
    /// turning into something that is not a trace.
    pub fn with_header(data: &'a [u8], header: FileHeader, segment: Option<Segment>) -> Trace<'a> {
        Trace { data, header, segment }
    }

    /// The file header.
    pub fn header(&self) -> &FileHeader {
        &self.header
    }

    /// Where this file stands in a segmented trace (`None`: a whole trace).
    pub fn segment(&self) -> Option<Segment> {
        self.segment
    }

    /// The blocks of the checkpoint at the start of this file (none in a whole trace or a
    /// first segment), and whether it is finished: it ends with a `Checkpoint` record.
    /// Readers ignore the blocks of an unfinished one (its writer stopped while writing it).
    pub fn checkpoint_blocks(&self) -> (Vec<usize>, bool) {
        let mut blocks = Vec::new();
        let mut finished = false;
        for i in 0..self.block_count() {
            let Ok(Some(b)) = self.block(i) else { continue };
            if b.tid() != CHECKPOINT_TID {
                continue;
            }
            blocks.push(i);
            finished |= ends_checkpoint(b).is_some();
        }
        (blocks, finished)
    }

    /// Number of block slots in the file (a partial last block counts).
    pub fn block_count(&self) -> usize {
        let body = self.data.len().saturating_sub(HEADER_SIZE);
        body.div_ceil(self.header.block_size as usize)
    }

    /// Opens block `index`: `Ok(None)` if it was never started.
    pub fn block(&self, index: usize) -> Result<Option<BlockReader<'a>>, DecodeError> {
        let bs = self.header.block_size as usize;
        let start = HEADER_SIZE + index * bs;
        let end = (start + bs).min(self.data.len());
        let bytes = &self.data[start..end];
        let off = start as u64;
        if bytes.len() < BLOCK_HEADER_SIZE {
            return if bytes.iter().all(|&b| b == 0) {
                Ok(None)
            } else {
                Err(DecodeError::new(off, ErrorKind::Truncated("block header")))
            };
        }
        let magic = u32::from_le_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]);
        if magic == 0 {
            return Ok(None);
        }
        if magic != BLOCK_MAGIC {
            return Err(DecodeError::new(off, ErrorKind::BadBlock));
        }
        let u64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&bytes[o..o + 8]);
            u64::from_le_bytes(b)
        };
        let tid = u32::from_le_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]);
        let base_seq = u64_at(8);
        let state = BlockState {
            seq: base_seq,
            time: u64_at(16),
            ..BlockState::default()
        };
        Ok(Some(BlockReader {
            bytes,
            offset: off,
            pos: BLOCK_HEADER_SIZE,
            state,
            tid,
            base_seq,
            done: false,
            checkpoint: tid == CHECKPOINT_TID,
        }))
    }

    /// Opens block `index` and decodes its first `n` records (fewer at its end or after its
    /// error) into `run` (emptied first), as [`Merged`] would when it admits the block: for a
    /// thread that decodes blocks ahead of the merge ([`Merged::decode_ahead`]).
    pub fn open_decoded(&self, index: usize, n: usize, mut run: Run<'a>) -> Opened<'a> {
        let mut block = self.block(index)?;
        Ok(block.as_mut().map(|b| {
            decode_run(b, &mut run, n.max(1));
            (b.clone(), run)
        }))
    }

    /// Every record, ordered by `seq`. A corrupted block yields one error and is dropped;
    /// the other blocks go on.
    pub fn records(&self) -> Merged<'a> {
        self.records_with(|_| {})
    }

    /// [`records`](Self::records), calling `scanned(offset)` with the file offset of each block
    /// after its header has been read (the merge first reads every block header), so that a
    /// reader of a large mapped file can hand the pages behind it back as the scan goes.
    pub fn records_with(&self, scanned: impl FnMut(u64)) -> Merged<'a> {
        self.merged(scanned, false)
    }

    /// The records of this segment's own blocks, without its checkpoint: what follows the
    /// segment before it in a series read from its start ([`crate::series`]).
    pub fn records_past_checkpoint(&self) -> Merged<'a> {
        self.merged(|_| {}, true)
    }

    fn merged(&self, mut scanned: impl FnMut(u64), skip_checkpoint: bool) -> Merged<'a> {
        // Blocks are claimed in file order but stamped with the seq of their first record, so
        // a thread that lost a race can start a block with a smaller seq than the one before.
        // Admitting blocks by base seq keeps the merge exact; a header costs 16 bytes here.
        let mut order = Vec::new();
        let mut header_errors = Vec::new();
        let block_size = u64::from(self.header.block_size);
        // A checkpoint's blocks (the first of a segment) are decoded here, in the same pass,
        // to see whether it was finished.
        let mut checkpoint = Vec::new();
        let mut as_of = None;
        for i in 0..self.block_count() {
            match self.block(i) {
                Ok(Some(b)) if b.tid() == CHECKPOINT_TID => {
                    order.push((b.base_seq, i));
                    checkpoint.push(i);
                    as_of = as_of.or(ends_checkpoint(b));
                }
                Ok(Some(b)) => order.push((b.base_seq, i)),
                Ok(None) => {}
                Err(e) => header_errors.push(e),
            }
            scanned(HEADER_SIZE as u64 + i as u64 * block_size);
        }
        let covered = match as_of {
            Some(seq) if !skip_checkpoint => Some(seq),
            _ => {
                order.retain(|(_, i)| !checkpoint.contains(i));
                None
            }
        };
        order.sort_unstable();
        header_errors.reverse();
        Merged {
            trace: self.clone(),
            covered,
            order,
            next_block: 0,
            header_errors,
            pending: None,
            heap: BinaryHeap::new(),
            cursors: Vec::new(),
            free: Vec::new(),
            spare: Vec::new(),
            ahead: None,
            run_hint: Arc::new(AtomicUsize::new(RUN_RECORDS)),
            lent: None,
            error: None,
        }
    }
}

/// The seq of the `Checkpoint` record a block holds (the end of the checkpoint it belongs to,
/// numbered as the last record it stands for), if it holds one.
fn ends_checkpoint(mut block: BlockReader<'_>) -> Option<u64> {
    block.find_map(|e| match e {
        Ok(Entry {
            record:
                Record {
                    seq,
                    body: Body::Checkpoint(_),
                    ..
                },
            ..
        }) => Some(seq.0),
        _ => None,
    })
}

/// Reads one block's records in order.
#[derive(Clone)]
pub struct BlockReader<'a> {
    bytes: &'a [u8],
    offset: u64,
    pos: usize,
    state: BlockState,
    tid: u32,
    base_seq: u64,
    done: bool,
    checkpoint: bool,
}

impl<'a> BlockReader<'a> {
    /// Whether the block belongs to a checkpoint (its header names [`CHECKPOINT_TID`]).
    pub fn in_checkpoint(&self) -> bool {
        self.checkpoint
    }

    /// Writer thread.
    pub fn tid(&self) -> u32 {
        self.tid
    }

    /// Lower bound of every seq in the block.
    pub fn base_seq(&self) -> u64 {
        self.base_seq
    }
}

impl<'a> BlockReader<'a> {
    /// The next record if it is an allocation or a free that [`crate::quick`] reads, written
    /// where `slot` keeps it (see [`crate::quick::decode_into`]); `false` leaves the block
    /// and the slot's owner as they were, for [`Record::decode`] to read (as
    /// [`Iterator::next`] does after it).
    #[inline(always)]
    fn next_quick(&mut self, slot: &mut impl EntrySlot<'a>) -> bool {
        if self.done {
            return false;
        }
        let Some(data) = self.bytes.get(self.pos..) else {
            return false;
        };
        slot.locate(self.tid, self.offset + self.pos as u64);
        match crate::quick::decode_into(data, &mut self.state, slot) {
            Some(n) => {
                self.pos += n;
                true
            }
            None => false,
        }
    }
}

/// Where [`BlockReader::next_quick`] writes an entry.
trait EntrySlot<'a>: crate::quick::Slot<'a> {
    /// The entry read next was written by thread `tid` at file offset `offset`.
    fn locate(&mut self, tid: u32, offset: u64);
}

/// The entries a [`RunSlot`] starts from: constants, copied from where the program's data
/// lies, not built on the stack first (see [`crate::quick::decode_into`]).
const BLANK_ALLOC: Result<Entry<'static>, DecodeError> = Ok(Entry {
    tid: 0,
    offset: 0,
    record: Record {
        seq: crate::record::Seq(0),
        time_ns: 0,
        body: Body::Alloc(crate::quick::BLANK_ALLOC),
    },
});
const BLANK_FREE: Result<Entry<'static>, DecodeError> = Ok(Entry {
    tid: 0,
    offset: 0,
    record: Record {
        seq: crate::record::Seq(0),
        time_ns: 0,
        body: Body::Free(crate::quick::BLANK_FREE),
    },
});

/// The place after the last entry of a run.
struct RunSlot<'r, 'a> {
    tid: u32,
    offset: u64,
    run: &'r mut Run<'a>,
}

impl<'a> EntrySlot<'a> for RunSlot<'_, 'a> {
    #[inline(always)]
    fn locate(&mut self, tid: u32, offset: u64) {
        (self.tid, self.offset) = (tid, offset);
    }
}

impl<'a> crate::quick::Slot<'a> for RunSlot<'_, 'a> {
    #[inline(always)]
    fn blank(&mut self, alloc: bool) -> Option<&mut Record<'a>> {
        // Out of room (a run grown past what `decode_run` reserved), the record is read the
        // generic way, which pushes it.
        let slot = self.run.spare_capacity_mut().first_mut()?;
        // Past the run's length: a blank not kept is overwritten by the next entry or left
        // there, never dropped (an allocation or a free owns nothing).
        let Ok(e) = slot.write(if alloc { BLANK_ALLOC } else { BLANK_FREE }) else {
            return None;
        };
        (e.tid, e.offset) = (self.tid, self.offset);
        Some(&mut e.record)
    }

    #[inline(always)]
    fn keep(&mut self) {
        let len = self.run.len();
        // SAFETY: `blank` initialized the slot at `len`, the first of the run's spare
        // capacity (it answered only when there was one), and nothing touched the run since.
        unsafe { self.run.set_len(len + 1) };
    }
}

/// One entry on its own (the record-by-record reader's).
struct OneSlot<'a> {
    tid: u32,
    offset: u64,
    entry: Option<Result<Entry<'a>, DecodeError>>,
    kept: bool,
}

impl<'a> EntrySlot<'a> for OneSlot<'a> {
    #[inline(always)]
    fn locate(&mut self, tid: u32, offset: u64) {
        (self.tid, self.offset) = (tid, offset);
    }
}

impl<'a> crate::quick::Slot<'a> for OneSlot<'a> {
    #[inline(always)]
    fn blank(&mut self, alloc: bool) -> Option<&mut Record<'a>> {
        let Ok(e) = self.entry.insert(if alloc { BLANK_ALLOC } else { BLANK_FREE }) else {
            return None;
        };
        (e.tid, e.offset) = (self.tid, self.offset);
        Some(&mut e.record)
    }

    #[inline(always)]
    fn keep(&mut self) {
        self.kept = true;
    }
}

impl<'a> Iterator for BlockReader<'a> {
    type Item = Result<Entry<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        loop {
            let mut one = OneSlot {
                tid: 0,
                offset: 0,
                entry: None,
                kept: false,
            };
            if self.next_quick(&mut one) {
                return one.entry.filter(|_| one.kept);
            }
            let at = self.offset + self.pos as u64;
            return match Record::decode(&self.bytes[self.pos..], at, &mut self.state) {
                Ok(Some((record, n))) => {
                    self.pos += n;
                    if let Body::Thread(t) = record.body {
                        // Framing: the block was handed on to another thread.
                        self.tid = t.tid;
                        continue;
                    }
                    Some(Ok(Entry {
                        tid: self.tid,
                        offset: at,
                        record,
                    }))
                }
                Ok(None) => {
                    self.done = true;
                    None
                }
                Err(e) => {
                    self.done = true;
                    Some(Err(e))
                }
            };
        }
    }
}

/// Blocks merged by `seq`; see [`Trace::records`].
pub struct Merged<'a> {
    trace: Trace<'a>,
    /// With the file's finished checkpoint read: the last seq it stands for. A record of the
    /// file's own blocks numbered at or below it is already in the checkpoint (a record
    /// numbered before a rotation and written after it, into the new segment) and is passed
    /// over.
    covered: Option<u64>,
    /// Started blocks as (base seq, index), in admission order.
    order: Vec<(u64, usize)>,
    next_block: usize,
    /// Corrupted block headers, reported first.
    header_errors: Vec<DecodeError>,
    /// The next started block, opened but not yet admitted to the merge.
    /// With its first run when it was decoded ahead.
    pending: Option<(BlockReader<'a>, Option<Run<'a>>)>,
    /// (seq, the block's place in admission order, cursor slot) of each open block's next
    /// record, but the one lent: a checkpoint's last record shares its seq with the record it
    /// covers last, and comes after it.
    heap: BinaryHeap<Reverse<(u64, usize, usize)>>,
    /// The open blocks, each in a slot that stays put while the block is open, with its
    /// records decoded a run at a time: a record is lent from where it was decoded, and a
    /// batch reader ([`Merged::next_batch`]) takes a whole run that comes before every other
    /// block's next record without copying it.
    cursors: Vec<Option<Cursor<'a>>>,
    free: Vec<usize>,
    /// Emptied runs, to decode the next ones into.
    spare: Vec<Run<'a>>,
    /// Blocks opened and their first runs decoded elsewhere, in admission order
    /// ([`Merged::decode_ahead`]).
    ahead: Option<Box<dyn FnMut() -> Option<Opened<'a>> + Send + 'a>>,
    /// How many records a block decodes at a time now ([`Merged::run_hint`]).
    run_hint: Arc<AtomicUsize>,
    /// The slot whose record was handed out last: its block moves on at the next call.
    lent: Option<usize>,
    error: Option<DecodeError>,
}

/// Decoded records of one block, a block's error (which ends it) last.
pub type Run<'a> = Vec<Result<Entry<'a>, DecodeError>>;

/// Empties `run`, running the drop code of only the records that own something: an
/// allocation or a free (nearly every record of a long trace) owns nothing, and the drop code
/// of every other record kind, asked about each one, was a tenth of the decoding's
/// instructions.
#[inline]
pub fn clear_run(run: &mut Run<'_>) {
    // Left undropped, they would leak if they ever held anything.
    const _: () = assert!(!std::mem::needs_drop::<Alloc>() && !std::mem::needs_drop::<Free>());
    let len = run.len();
    let base = run.as_mut_ptr();
    // SAFETY: the length is set to 0 first, so that a drop that panics below leaks the rest
    // instead of dropping anything twice. Each of the `len` initialized entries is then
    // dropped once or, when it owns nothing (an allocation or a free: plain values, no
    // drop code of their own), left; the buffer is never read again before it is written.
    unsafe {
        run.set_len(0);
        for i in 0..len {
            let e = base.add(i);
            let owns_nothing = matches!(
                &*e,
                Ok(Entry {
                    record: Record {
                        body: Body::Alloc(_) | Body::Free(_),
                        ..
                    },
                    ..
                })
            );
            if !owns_nothing {
                std::ptr::drop_in_place(e);
            }
        }
    }
}

/// A block opened, with its first run decoded (`None`: a block never started).
pub type Opened<'a> = Result<Option<(BlockReader<'a>, Run<'a>)>, DecodeError>;

/// Decodes the next run of `block` into `run` (emptied first): at most `n` records, ending
/// early at the block's end or after its error.
fn decode_run<'a>(block: &mut BlockReader<'a>, run: &mut Run<'a>, n: usize) {
    clear_run(run);
    if run.capacity() > 2 * n {
        // A buffer of a time when fewer blocks were open.
        run.shrink_to(n);
    }
    // Room for the whole run at once: the quick reader's slots are then never short of it.
    run.reserve(n);
    while run.len() < n {
        let mut slot = RunSlot { tid: 0, offset: 0, run };
        if block.next_quick(&mut slot) {
            continue;
        }
        match block.next() {
            Some(r) => run.push(r),
            None => break,
        }
    }
}

/// Records decoded at once across the open blocks, about: each open block decodes its next
/// run of this many records divided among them, within [`RUN_MIN`] and [`RUN_MAX`], so that
/// memory stays about 2 MB however many threads wrote at once (a thread per open block).
const RUN_RECORDS: usize = 1 << 15;
const RUN_MIN: usize = 16;
/// The most records in one run, and so in one batch taken whole.
pub const RUN_MAX: usize = 4096;
/// The fewest records of a run handed over whole by [`Merged::next_batch`] (smaller ones are
/// copied into the batch, so that batches stay large).
const SWAP_MIN: usize = 256;

impl<'a> Merged<'a> {
    /// Opens the next block in admission order.
    fn fill_pending(&mut self) -> Option<DecodeError> {
        if let Some(e) = self.header_errors.pop() {
            return Some(e);
        }
        while self.pending.is_none() && self.next_block < self.order.len() {
            let (_, i) = self.order[self.next_block];
            self.next_block += 1;
            // Decoded ahead (in admission order), or opened here when the decoder is gone.
            let opened = match self.ahead.as_mut().and_then(|next| next()) {
                Some(opened) => opened.map(|b| b.map(|(b, run)| (b, Some(run)))),
                None => self.trace.block(i).map(|b| b.map(|b| (b, None))),
            };
            match opened {
                Ok(Some(b)) => self.pending = Some(b),
                Ok(None) => {}
                Err(e) => return Some(e),
            }
        }
        None
    }

    /// The blocks this merge will open, in the order it opens them (their indices in the
    /// file): what a thread decoding ahead ([`decode_ahead`](Self::decode_ahead)) opens, in
    /// the same order.
    pub fn admission_order(&self) -> Vec<usize> {
        self.order[self.next_block..].iter().map(|&(_, i)| i).collect()
    }

    /// How many records a block decodes at a time now (it falls as more blocks are open at
    /// once, so that decoded records stay about 3 MB): the `n` for [`Trace::open_decoded`] on
    /// a thread decoding ahead, read as it goes. Unlike the merge's own runs, it may exceed
    /// [`RUN_MAX`] while few blocks are open, so that such a thread decodes whole blocks.
    pub fn run_hint(&self) -> Arc<AtomicUsize> {
        Arc::clone(&self.run_hint)
    }

    /// Takes each block to open from `next`, which gives the blocks of
    /// [`admission_order`](Self::admission_order), in that order, each as
    /// [`Trace::open_decoded`] gives it (so that other threads can open and decode them
    /// ahead); when `next` gives `None` (the threads are gone), the merge opens the rest
    /// itself.
    pub fn decode_ahead(&mut self, next: impl FnMut() -> Option<Opened<'a>> + Send + 'a) {
        self.ahead = Some(Box::new(next));
    }

    /// How many records a thread decoding ahead decodes of each block now.
    fn ahead_len(&self) -> usize {
        (RUN_RECORDS / (self.cursors.len() - self.free.len()).max(1)).max(RUN_MIN)
    }

    /// How many records an open block decodes at a time now.
    fn run_len(&self) -> usize {
        let open = (self.cursors.len() - self.free.len()).max(1);
        (RUN_RECORDS / open).clamp(RUN_MIN, RUN_MAX)
    }

    /// Puts a block's next record into the heap; returns an error from the block.
    fn admit(&mut self, mut block: BlockReader<'a>, run: Option<Run<'a>>, rank: usize) -> Option<DecodeError> {
        let mut run = run.unwrap_or_else(|| {
            let mut run = self.spare.pop().unwrap_or_default();
            decode_run(&mut block, &mut run, self.run_len());
            run
        });
        let key = match run.first() {
            Some(Ok(first)) => first.record.seq.0,
            Some(Err(_)) => {
                let Some(Err(e)) = run.pop() else { return None };
                self.spare.push(run);
                return Some(e);
            }
            None => {
                self.spare.push(run);
                return None;
            }
        };
        let cursor = Cursor {
            block,
            run,
            at: 0,
            rank,
        };
        let slot = match self.free.pop() {
            Some(s) => {
                self.cursors[s] = Some(cursor);
                s
            }
            None => {
                self.cursors.push(Some(cursor));
                self.cursors.len() - 1
            }
        };
        self.heap.push(Reverse((key, rank, slot)));
        self.run_hint.store(self.ahead_len(), Ordering::Relaxed);
        None
    }

    /// Moves the block in `slot` past the record handed out last, decoding its next run when
    /// this one is used up (the block closes at its end or its error: the error surfaces on
    /// the following call). Returns the next record's seq and the block's rank, to go into
    /// the heap.
    fn step(&mut self, slot: usize) -> Option<(u64, usize)> {
        let n = self.run_len();
        let cursor = self.cursors[slot].as_mut()?;
        cursor.at += 1;
        if cursor.at >= cursor.run.len() {
            decode_run(&mut cursor.block, &mut cursor.run, n);
            cursor.at = 0;
        }
        if let Some(Ok(next)) = cursor.run.get(cursor.at) {
            return Some((next.record.seq.0, cursor.rank));
        }
        // The block's end, or its error (always the last of a run).
        if let Some(mut c) = self.cursors[slot].take() {
            if let Some(Err(e)) = c.run.pop() {
                self.error = Some(e);
            }
            self.spare.push(c.run);
        }
        self.free.push(slot);
        self.run_hint.store(self.ahead_len(), Ordering::Relaxed);
        None
    }

    /// Whether nothing but the open blocks' records can come next: no error to report first,
    /// and the next block to admit (if any) opened.
    fn settled(&self) -> bool {
        self.error.is_none()
            && self.header_errors.is_empty()
            && (self.pending.is_some() || self.next_block == self.order.len())
    }

    /// Whether the record of the block in `slot`, with `key`, is the one the merge hands out
    /// next once the merge is [`settled`](Self::settled): nothing in the heap comes before
    /// it, no block waits to be admitted before it, and it is not one the checkpoint already
    /// stands for.
    fn comes_next(&self, slot: usize, (seq, rank): (u64, usize)) -> bool {
        self.heap.peek().is_none_or(|Reverse((s, r, _))| (seq, rank) < (*s, *r))
            && self.pending.as_ref().is_none_or(|(p, _)| p.base_seq > seq)
            && !(self.covered.is_some_and(|c| seq <= c)
                && self.cursors[slot].as_ref().is_some_and(|c| !c.block.in_checkpoint()))
    }

    /// The slot whose block holds the next record (lent: out of the heap), or the next error.
    fn next_slot(&mut self) -> Option<Result<usize, DecodeError>> {
        if let Some(slot) = self.lent.take() {
            if let Some(key) = self.step(slot) {
                // Most records follow the one before in the same block (one thread writes most
                // of a trace): those skip the heap.
                if self.settled() && self.comes_next(slot, key) {
                    self.lent = Some(slot);
                    return Some(Ok(slot));
                }
                self.heap.push(Reverse((key.0, key.1, slot)));
            }
        }
        if let Some(e) = self.error.take() {
            return Some(Err(e));
        }
        loop {
            if let Some(e) = self.fill_pending() {
                return Some(Err(e));
            }
            // Admit the next block while it could hold the smallest seq.
            let admit = match (&self.pending, self.heap.peek()) {
                (Some((p, _)), Some(Reverse((min, _, _)))) => p.base_seq <= *min,
                (Some(_), None) => true,
                (None, _) => false,
            };
            if admit {
                let (block, run) = self.pending.take()?;
                if let Some(e) = self.admit(block, run, self.next_block) {
                    return Some(Err(e));
                }
                continue;
            }
            let Reverse((seq, _, slot)) = self.heap.pop()?;
            let cursor = self.cursors[slot].as_ref()?;
            let repeated = self.covered.is_some_and(|c| seq <= c) && !cursor.block.in_checkpoint();
            if repeated {
                if let Some((seq, rank)) = self.step(slot) {
                    self.heap.push(Reverse((seq, rank, slot)));
                }
                if let Some(e) = self.error.take() {
                    return Some(Err(e));
                }
                continue;
            }
            self.lent = Some(slot);
            return Some(Ok(slot));
        }
    }

    /// The record at the head of the lent block.
    fn lent_entry(&mut self, slot: usize) -> Option<&mut Entry<'a>> {
        let cursor = self.cursors[slot].as_mut()?;
        match cursor.run.get_mut(cursor.at) {
            Some(Ok(e)) => Some(e),
            _ => None,
        }
    }

    /// The next record, lent where it was decoded (mutable, so that a caller can rebase its
    /// offset), or the next error; see [`Trace::records`]. The [`Iterator`] gives a copy of
    /// the same.
    pub fn next_mut(&mut self) -> Option<Result<&mut Entry<'a>, DecodeError>> {
        match self.next_slot()? {
            Ok(slot) => self.lent_entry(slot).map(Ok),
            Err(e) => Some(Err(e)),
        }
    }

    /// Appends the next records and errors to `out`, in the order [`next_mut`](Self::next_mut)
    /// gives them, until `out` holds `max` or the merge ends (false when nothing was added);
    /// or hands over a whole run, which may be longer (see below).
    /// A decoded run that comes whole before every other block's next record, taken into an
    /// empty `out`, is handed over as it is (`out`'s own buffer takes its place), and the call
    /// returns with it: a trace written by one thread is read without copying a record.
    pub fn next_batch(&mut self, out: &mut Run<'a>, max: usize) -> bool {
        let start = out.len();
        while out.len() < max {
            let slot = match self.next_slot() {
                None => break,
                Some(Err(e)) => {
                    out.push(Err(e));
                    continue;
                }
                Some(Ok(slot)) => slot,
            };
            // The lent record comes next; so do those after it in its run while they come
            // before every other block's next record.
            let settled = self.settled();
            let Some(cursor) = self.cursors[slot].as_ref() else {
                break;
            };
            let (at, rank, len) = (cursor.at, cursor.rank, cursor.run.len());
            let mut end = at + 1;
            // A whole run may go into an empty `out` however long it is.
            let whole = at == 0 && out.is_empty() && len >= SWAP_MIN;
            let room = if whole { len } else { max - out.len() };
            if settled {
                // `comes_next`, as one range of sequence numbers worked out once (nothing it
                // compares against changes while the run is scanned): below the heap's first
                // (at the same number, a block of lower rank comes first) and the block
                // waiting to be admitted, above what the checkpoint stands for.
                let first = self
                    .heap
                    .peek()
                    .map_or(u128::MAX, |Reverse((s, r, _))| u128::from(*s) + u128::from(rank < *r));
                let pending = self.pending.as_ref().map_or(u128::MAX, |(p, _)| u128::from(p.base_seq));
                let below = first.min(pending);
                let covered = self
                    .covered
                    .filter(|_| self.cursors[slot].as_ref().is_some_and(|c| !c.block.in_checkpoint()));
                let above = covered.map_or(0, |c| u128::from(c) + 1);
                let run = self.cursors[slot].as_ref().map_or(&[][..], |c| &c.run[..]);
                let stop = len.min(at + room).max(end);
                end += run.get(end..stop).map_or(0, |rest| {
                    rest.iter()
                        .take_while(|r| matches!(r, Ok(e) if (above..below).contains(&u128::from(e.record.seq.0))))
                        .count()
                });
            }
            let Some(cursor) = self.cursors[slot].as_mut() else {
                break;
            };
            if whole && end == len {
                // The whole run: handed over, not copied. The block decodes its next run into
                // `out`'s old buffer when it moves on (`step` finds this one used up).
                std::mem::swap(out, &mut cursor.run);
                cursor.run.clear();
                cursor.at = 0;
                return true;
            }
            let end = end.min(at + max - out.len());
            out.extend(cursor.run[at..end].iter().cloned());
            cursor.at = end - 1;
        }
        out.len() > start
    }

    /// Gives back a buffer that [`next_batch`](Self::next_batch) handed over, emptied, to
    /// decode into again.
    pub fn give_back(&mut self, mut run: Run<'a>) {
        run.clear();
        if self.spare.len() < 4 {
            self.spare.push(run);
        }
    }
}

/// An open block with its next records.
struct Cursor<'a> {
    block: BlockReader<'a>,
    /// Its decoded records; the one at `at` is the next (or, lent, the one handed out last).
    run: Run<'a>,
    at: usize,
    /// The block's place in admission order.
    rank: usize,
}

impl<'a> Iterator for Merged<'a> {
    type Item = Result<Entry<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_mut().map(|r| r.map(|e| e.clone()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorKind;

    /// Every kind of record, and an error, cleared from a run and the run filled again: the
    /// entries that own memory (a process's arguments, boxed kinds) are dropped, allocations
    /// and frees are left, and the buffer takes new entries. (`valgrind --leak-check=full` on
    /// this test's binary finds nothing lost.)
    #[test]
    fn a_cleared_run_is_empty_and_takes_new_entries() {
        let entries: Run<'static> = crate::record::tests::sample_records()
            .into_iter()
            .map(|record| {
                Ok(Entry {
                    tid: 1,
                    offset: 40,
                    record,
                })
            })
            .chain(std::iter::once(Err(DecodeError::new(7, ErrorKind::BadBlock))))
            .collect();
        assert!(entries.iter().any(|e| matches!(
            e,
            Ok(Entry {
                record: Record {
                    body: Body::Alloc(_),
                    ..
                },
                ..
            })
        )));
        let mut run = entries.clone();
        let capacity = run.capacity();
        clear_run(&mut run);
        assert!(run.is_empty());
        assert_eq!(run.capacity(), capacity);
        run.extend(entries.iter().cloned());
        assert_eq!(run, entries);
        clear_run(&mut run);
        assert!(run.is_empty());
    }
}
