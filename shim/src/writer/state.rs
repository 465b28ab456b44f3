//! The state a trace's writer shares with its rotation: the writer itself, its files and
//! what its checkpoint builder is handed. Below both the block writing ([`super`]) and the
//! rotation ([`super::rotate`]), which add their own methods to these types.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};

use gpuleak_format::{BlockCursor, BlockState, FileHeader, BLOCK_SIZE};

use super::bound::Bound;
use super::segment::SegFile;

/// The key of the current segment of this process's trace (for blocks handed on by exiting
/// threads, which no longer reach the writer).
pub(super) static CURRENT_KEY: AtomicU64 = AtomicU64::new(u64::MAX);

/// What a thread's block must carry to be written: the generation of the process and the
/// number of the segment it lies in.
pub(super) fn key_of(generation: u64, segment: u64) -> u64 {
    (generation << 32) | (segment & 0xffff_ffff)
}

/// The files of the trace, oldest first (the last hands out blocks), and the rotation's
/// state, under one lock.
pub(super) struct Files {
    pub(super) segs: VecDeque<SegFile>,
    /// A checkpoint is being built: no rotation until it is complete.
    pub(super) building: bool,
    /// Segment 0's header says it is a segment (written at the first rotation).
    pub(super) flagged: bool,
    /// After a full disk with nothing to delete: no block is tried before this time (ns).
    pub(super) retry_after: u64,
    /// Said once: records are being lost for want of space.
    pub(super) told_space: bool,
    /// The cut of the checkpoint being built.
    pub(super) cut: u64,
    /// Checkpoints ended (built or given up): what a waiting thread waits to see move.
    pub(super) ended: u64,
    /// Blocks the last checkpoint took (what the next one reserves, and half again).
    pub(super) last_checkpoint_blocks: u64,
}

impl Files {
    pub(super) fn current(&mut self) -> &mut SegFile {
        self.segs.back_mut().expect("a trace always has a file")
    }
}

/// What the writer shares with its checkpoint builder.
pub(super) struct Shared {
    pub(super) files: Mutex<Files>,
    pub(super) closed: AtomicBool,
    pub(super) failed: AtomicBool,
    /// Write each new block's zeros before mapping it (every file system but tmpfs).
    pub(super) zero_blocks: bool,
    /// The first segment's header, for the later ones.
    pub(super) header: FileHeader,
    /// Random, the same in every segment.
    pub(super) trace_id: u64,
    pub(super) bound: Option<Bound>,
    pub(super) builder: Builder,
    /// Signalled (with the files' lock) when a checkpoint is done.
    pub(super) built: Condvar,
}

impl Shared {
    pub(super) fn fail(&self, why: &str) {
        if !self.failed.swap(true, Ordering::AcqRel) {
            crate::diag::line(format_args!("{why}; recording stops here, the program continues"));
        }
    }
}

/// One trace: its file, or with a bound its segments.
pub struct Writer {
    pub(super) shared: Arc<Shared>,
    pub(super) path: OsString,
    /// The same, absolute (joined to the working directory of the moment it was created).
    pub(super) absolute: OsString,
    pub(super) generation: u64,
    /// [`key_of`] the current segment.
    pub(super) key: AtomicU64,
    /// The next sequence number.
    pub(super) seq: AtomicU64,
    /// Records that could not be written.
    pub lost: AtomicU64,
    /// The block shared by threads whose thread-locals are gone (thread and process exit:
    /// TLS destructors and `.fini_array` still free memory).
    pub(super) detached: Mutex<DetachedBlock>,
    /// Block 0 of the current segment, mapped at its creation and written only at unload
    /// ([`Writer::close`]).
    pub(super) last_words: Mutex<DetachedBlock>,
}

/// A block written under a lock rather than by one thread: the threads without thread-locals
/// share one, and block 0 of the current segment is another.
pub(super) struct DetachedBlock {
    pub(super) ptr: *mut u8,
    pub(super) cursor: BlockCursor,
    pub(super) key: u64,
}

impl DetachedBlock {
    pub(super) fn empty() -> Mutex<DetachedBlock> {
        Mutex::new(DetachedBlock {
            ptr: std::ptr::null_mut(),
            cursor: BlockCursor {
                pos: 0,
                state: BlockState::default(),
            },
            key: u64::MAX,
        })
    }
}

// SAFETY: the raw block pointer is only used under the mutex that owns it.
unsafe impl Send for DetachedBlock {}

/// Unmaps a block (nothing for a null pointer). Every caller passes a block it is giving up,
/// which nothing else refers to: a thread's own block (replaced, or at thread exit), the
/// detached block or block 0 (replaced under their locks), or a spare (taken out of the list
/// under its lock).
pub(super) fn unmap(p: *mut u8) {
    if !p.is_null() {
        // SAFETY: `p` is a BLOCK_SIZE mapping of the trace that the writer made (`claim`,
        // `Segment::map_block`), given up by its one holder (see above): no reference into it
        // outlives this call.
        unsafe { libc::munmap(p.cast(), BLOCK_SIZE) };
    }
}

/// A checkpoint to build: for segment `number`, of every record numbered up to `cut`.
pub(super) struct Job {
    pub(super) number: u64,
    pub(super) cut: u64,
}

/// The builder thread's mailbox.
#[derive(Default)]
pub(super) struct Builder {
    pub(super) job: Mutex<BuilderState>,
    pub(super) ready: Condvar,
}

/// What the mailbox holds: the next job, and whether the thread runs.
#[derive(Default)]
pub(super) struct BuilderState {
    pub(super) next: Option<Job>,
    pub(super) started: bool,
}
