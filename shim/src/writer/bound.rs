//! The bound on a trace's size (`GPULEAK_MAX_TRACE`) and the segments it divides into.

use gpuleak_format::{BLOCK_SIZE, HEADER_SIZE};

/// How many bytes a process's trace keeps on disk, all its segments together.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    max_bytes: u64,
}

impl Bound {
    /// `GPULEAK_MAX_TRACE` when unset: 2 GiB a process. No short run reaches it (a training
    /// loop without CUDA graphs writes about 1.6 GB an hour), and a node of eight processes
    /// keeps 16 GiB, a week long or a year.
    pub const DEFAULT: u64 = 2 << 30;
    /// The smallest bound: four segments of four blocks.
    pub const MIN: u64 = 1 << 20;
    /// The largest segment: reading a bounded trace costs what the bound holds, and a
    /// rotation rereads one segment.
    const MAX_SEGMENT: u64 = 1 << 30;

    /// A bound of `max_bytes` (at least [`Bound::MIN`]).
    pub fn new(max_bytes: u64) -> Bound {
        Bound {
            max_bytes: max_bytes.max(Self::MIN),
        }
    }

    /// The bound in bytes.
    pub fn max_bytes(&self) -> u64 {
        self.max_bytes
    }

    /// Blocks a segment hands out (block 0 included) before the next: a quarter of the
    /// bound, so that three full segments and the current one fit in it.
    pub fn segment_blocks(&self) -> u64 {
        let bytes = (self.max_bytes / 4).min(Self::MAX_SEGMENT);
        ((bytes.saturating_sub(HEADER_SIZE as u64)) / BLOCK_SIZE as u64).max(4)
    }
}
