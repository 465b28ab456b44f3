//! The file and block layout, and the write side that the shim uses.
//!
//! # File layout
//!
//! ```text
//! offset 0      file header, HEADER_SIZE (4096) bytes, little-endian:
//!   0   magic         8 bytes  "GPULEAK\0"
//!   8   version       u32      FORMAT_VERSION
//!   12  header_size   u32      4096
//!   16  block_size    u32      BLOCK_SIZE (65536)
//!   20  flags         u32      FLAG_SEGMENTED, or 0
//!   24  pid           u32
//!   28  reserved      u32
//!   32  start_unix_ns u64      wall clock at trace start
//!   40  segment       u64      with FLAG_SEGMENTED: the segment's number (0 the first)
//!   48  trace_id      u64      with FLAG_SEGMENTED: random, the same in every segment of
//!                              one process's trace
//!   56  zero to the end of the header
//! ```
//!
//! Without `FLAG_SEGMENTED` (every trace written before segments existed, and every
//! unbounded one) bytes 40 to 56 are zero and mean nothing. A segmented trace is a series of
//! files: the first keeps the trace's name, the later ones add `-000001`, `-000002`... Each
//! segment after the first starts with a checkpoint ([`crate::checkpoint`]): blocks whose
//! thread id is [`CHECKPOINT_TID`], holding the records of the history before it that a
//! report still needs, with their own sequence numbers, and ending with a
//! [`crate::Checkpoint`] record. Readers ignore a checkpoint that lacks that record.
//!
//! ```text
//! offset 4096   block 0, then block 1, ... each block_size bytes
//! ```
//!
//! # Block layout
//!
//! ```text
//!   0   magic     u32  BLOCK_MAGIC, written LAST: zero means the block was never started
//!   4   tid       u32  OS thread id of the thread that starts this block (a `Thread` record
//!                      inside it names the next one, when the block is handed on)
//!   8   base_seq  u64  seq of the block's first record (readers admit blocks in this order)
//!   16  base_time u64  the delta registers' starting time
//!   24  records (see crate::record), then zero bytes
//! ```
//!
//! Blocks belong to one thread at a time (a thread that exits with room left hands its block
//! on, after every record in it), so a thread appends without synchronisation, and a
//! process killed at any instruction leaves every block readable up to its last complete
//! record: a record's kind byte is stored only after the rest of it, and an unwritten kind
//! byte is zero. Readers merge blocks by `seq` ([`crate::reader`]).

use std::sync::atomic::{compiler_fence, Ordering};

use crate::fields::BlockState;
use crate::record::{encode_in_place, Fields, NoRoom, Record, RecordRef, Seq};

/// Magic bytes at the start of every trace.
pub const MAGIC: [u8; 8] = *b"GPULEAK\0";
/// Size of the file header.
pub const HEADER_SIZE: usize = 4096;
/// Size of a block.
pub const BLOCK_SIZE: usize = 65536;
/// Size of a block header.
pub const BLOCK_HEADER_SIZE: usize = 24;
/// Marks a started block ("GBLK" in little-endian).
pub const BLOCK_MAGIC: u32 = u32::from_le_bytes(*b"GBLK");
/// The header's `flags` bit of a file that is one segment of a bounded trace.
pub const FLAG_SEGMENTED: u32 = 1;
/// The thread id of a checkpoint's blocks (no OS thread has it). `Thread` records inside
/// them give each record its own thread.
pub const CHECKPOINT_TID: u32 = 0;

/// The random id that all segments of one process's trace share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TraceId(pub u64);

/// Where a file stands in a segmented trace: the header fields that `FLAG_SEGMENTED` turns on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    /// 0 for the first segment, then 1, 2...
    pub number: u64,
    /// Shared by all segments of the trace.
    pub trace_id: TraceId,
}

impl Segment {
    /// Marks a header written by [`FileHeader::write`] as this segment's.
    pub fn write(&self, out: &mut [u8; HEADER_SIZE]) {
        let flags = u32::from_le_bytes([out[20], out[21], out[22], out[23]]) | FLAG_SEGMENTED;
        out[20..24].copy_from_slice(&flags.to_le_bytes());
        out[40..48].copy_from_slice(&self.number.to_le_bytes());
        out[48..56].copy_from_slice(&self.trace_id.0.to_le_bytes());
    }

    /// The segment a header names, if it has `FLAG_SEGMENTED` (`None` for a header shorter
    /// than 56 bytes).
    pub fn read(header: &[u8]) -> Option<Segment> {
        let h = header.get(..56)?;
        let u64_at = |o: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&h[o..o + 8]);
            u64::from_le_bytes(b)
        };
        let flags = u32::from_le_bytes([h[20], h[21], h[22], h[23]]);
        (flags & FLAG_SEGMENTED != 0).then(|| Segment {
            number: u64_at(40),
            trace_id: TraceId(u64_at(48)),
        })
    }
}

/// The fixed fields of a trace file's header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileHeader {
    /// Format version the file was written with.
    pub version: u32,
    /// Block size.
    pub block_size: u32,
    /// Writer's process id.
    pub pid: u32,
    /// Wall clock at trace start, ns since the Unix epoch.
    pub start_unix_ns: u64,
}

impl FileHeader {
    /// Serialises the header into the first `HEADER_SIZE` bytes of a new file.
    pub fn write(&self, out: &mut [u8; HEADER_SIZE]) {
        out.fill(0);
        out[0..8].copy_from_slice(&MAGIC);
        out[8..12].copy_from_slice(&self.version.to_le_bytes());
        out[12..16].copy_from_slice(&(HEADER_SIZE as u32).to_le_bytes());
        out[16..20].copy_from_slice(&self.block_size.to_le_bytes());
        out[24..28].copy_from_slice(&self.pid.to_le_bytes());
        out[32..40].copy_from_slice(&self.start_unix_ns.to_le_bytes());
    }
}

/// A thread's position in the block it owns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockCursor {
    /// Next free byte in the block.
    pub pos: usize,
    /// Delta registers.
    pub state: BlockState,
}

impl BlockCursor {
    /// Starts a block in `block` (at least `BLOCK_HEADER_SIZE` bytes, all zero): writes the
    /// header and commits it.
    pub fn start(block: &mut [u8], tid: u32, base_seq: u64, base_time: u64) -> BlockCursor {
        block[4..8].copy_from_slice(&tid.to_le_bytes());
        block[8..16].copy_from_slice(&base_seq.to_le_bytes());
        block[16..24].copy_from_slice(&base_time.to_le_bytes());
        commit_bytes(&mut block[0..4], &BLOCK_MAGIC.to_le_bytes());
        BlockCursor {
            pos: BLOCK_HEADER_SIZE,
            state: BlockState {
                seq: base_seq,
                time: base_time,
                ..BlockState::default()
            },
        }
    }

    /// Appends a committed record, or reports that the block is full.
    #[inline]
    pub fn append(&mut self, block: &mut [u8], rec: &Record<'_>) -> Result<(), NoRoom> {
        self.append_ref(block, rec.as_ref())
    }

    /// [`append`](Self::append) for a body known by its type: the same bytes, without
    /// building a [`crate::Body`]. After `NoRoom` the cursor must not be used again (start a
    /// new block).
    #[inline]
    pub fn append_fields<'a, F: Fields<'a>>(
        &mut self,
        block: &mut [u8],
        seq: Seq,
        time_ns: u64,
        body: &F,
    ) -> Result<(), NoRoom> {
        let out = block.get_mut(self.pos..).ok_or(NoRoom)?;
        let n = encode_in_place(seq, time_ns, &mut self.state, out, |e, s| body.put(e, s))?;
        commit_byte(&mut out[0], F::KIND);
        self.pos += n;
        Ok(())
    }

    /// [`append`](Self::append) for a borrowed record.
    #[inline]
    pub fn append_ref(&mut self, block: &mut [u8], rec: RecordRef<'_, '_>) -> Result<(), NoRoom> {
        let out = block.get_mut(self.pos..).ok_or(NoRoom)?;
        let n = rec.encode(&mut self.state, out)?;
        commit_byte(&mut out[0], rec.body.kind());
        self.pos += n;
        Ok(())
    }
}

/// Stores `value` into `slot` only after every earlier store of this thread, so that a
/// reader of a crashed process's file never sees the marker without what it guards.
fn commit_bytes(slot: &mut [u8], value: &[u8]) {
    for (dst, src) in slot.iter_mut().zip(value) {
        commit_byte(dst, *src);
    }
}

/// [`commit_bytes`] for one byte (a record's kind).
#[inline(always)]
fn commit_byte(slot: &mut u8, value: u8) {
    compiler_fence(Ordering::Release);
    // SAFETY: `slot` is a valid, exclusive reference; the volatile store only keeps the
    // compiler from moving or merging it with the stores the fence above orders.
    unsafe { std::ptr::write_volatile(slot, value) };
}
