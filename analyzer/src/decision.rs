//! What the leak model decided a record means, for the passes that follow its view of memory:
//! below the leak model ([`crate::model`]), which reports its decisions, and the memory pass
//! ([`crate::memory`]) and the replay driver ([`crate::replay`]), which observe them.
//!
//! A record alone does not say which allocation a free ends, whether a retained VMM handle is
//! gone, or that a context's teardown took its memory with it: only the leak model's live set
//! does. So the leak model reports each such decision, in order, to an [`Observer`] passed to
//! each [`crate::model::Model::apply`], and the memory pass keeps its timelines from them
//! rather than from the records; the two therefore always agree on what is live.

use gpuleak_format::{Api, CuResult, MemKind, SiteHistory, StackId};

use crate::allocation::Allocation;

/// Device number of pinned host memory.
pub const HOST: i32 = -1;
/// Device number of memory whose context the trace never named.
pub const UNKNOWN_DEVICE: i32 = -2;

/// One decision of the leak model, reported while it replays the record that caused it.
#[derive(Debug, Clone, Copy)]
pub enum Decision<'a> {
    /// An allocation became live (an allocation call, or a graph launch's allocation node).
    Allocated {
        /// The allocation.
        allocation: &'a Allocation,
        /// Device of its memory (see [`Observer::wants_memory`]).
        device: i32,
        /// Whether its stack belongs to a caching allocator (PyTorch, XLA, CuPy, RMM) and its
        /// memory is owned (see [`Observer::wants_memory`]).
        pool: bool,
    },
    /// A live allocation is gone: freed, released and unmapped, taken by a teardown, or
    /// replaced by a new allocation at its address (a free the trace missed).
    Freed {
        /// The allocation.
        allocation: &'a Allocation,
        /// Device of its memory, as reported when it was allocated.
        device: i32,
    },
    /// An allocation call failed (no allocation).
    Failed {
        /// The call.
        api: Api,
        /// Its error.
        result: CuResult,
        /// Memory family the call allocates.
        kind: MemKind,
        /// Bytes asked for.
        size: u64,
        /// Stack of the call.
        stack: StackId,
        /// Device the memory was asked of (see [`Observer::wants_memory`]).
        device: i32,
    },
    /// A VMM mapping was made (`bytes > 0`) or is gone (`bytes < 0`).
    Mapped {
        /// Device of the mapped handle's memory (0 when the handle is unknown).
        device: i32,
        /// Bytes mapped, negative when unmapped.
        bytes: i128,
    },
    /// A checkpoint's history of live bytes (its record, as read).
    History {
        /// The record.
        history: &'a SiteHistory<'a>,
        /// Whether it is a site's series and that site a caching allocator's (see
        /// [`Observer::wants_memory`]).
        pool: bool,
    },
    /// A context was torn down and took its allocations with it (each reported as
    /// [`Decision::Freed`] right after this).
    Teardown {
        /// The API that tore it down.
        api: Api,
    },
}

/// Receives the leak model's decisions.
pub trait Observer {
    /// Whether the decisions' memory facts (`device`, `pool`) are wanted. Working them out
    /// costs a look-up per allocation, so without it they are 0 and false.
    fn wants_memory(&self) -> bool;

    /// One decision, in the order the replay made them.
    fn decided(&mut self, decision: Decision<'_>);
}

/// An observer that wants nothing: the leak model alone.
#[derive(Debug, Clone, Copy, Default)]
pub struct Unobserved;

impl Observer for Unobserved {
    fn wants_memory(&self) -> bool {
        false
    }

    fn decided(&mut self, _: Decision<'_>) {}
}
