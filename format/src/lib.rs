//! The gpuleak trace format: the one contract between `libgpuleak.so`, which writes traces
//! inside the traced process, and the `gpuleak` analyzer, which reads them.
//!
//! A trace is a file header followed by fixed-size blocks, each owned by one writing thread
//! ([`block`]); a block holds length-prefixed, delta-encoded records ([`record`],
//! [`fields`]); readers merge the blocks into one stream ordered by sequence number
//! ([`reader`]). The layout is designed so that a process killed at any instruction leaves a
//! readable file, that old readers skip record kinds they do not know, and that steady
//! allocation churn costs about 12 bytes per event.
//!
//! ```
//! use gpuleak_format::*;
//!
//! // Write one block with one record...
//! let mut file = vec![0u8; HEADER_SIZE + BLOCK_SIZE];
//! let header = FileHeader { version: FORMAT_VERSION, block_size: BLOCK_SIZE as u32, pid: 7, start_unix_ns: 0 };
//! header.write((&mut file[..HEADER_SIZE]).try_into().unwrap());
//! let block = &mut file[HEADER_SIZE..];
//! let mut cursor = BlockCursor::start(block, 7, 0, 0);
//! let rec = Record { seq: Seq(1), time_ns: 10, body: Mark { name: "step".into(), value: 1 }.into() };
//! cursor.append(block, &rec).unwrap();
//!
//! // ...and read it back.
//! let trace = Trace::new(&file).unwrap();
//! let all: Vec<_> = trace.records().collect::<Result<_, _>>().unwrap();
//! assert_eq!(all[0].record, rec);
//! ```

pub mod api;
pub mod block;
pub mod captures;
pub mod checkpoint;
pub mod contexts;
pub mod error;
pub mod fields;
pub mod framework;
pub mod kind;
pub mod line_table;
pub mod meaning;
mod quick;
pub mod reader;
pub mod record;
pub mod series;
pub mod size;
pub mod space;
pub mod user_code;
pub mod varint;
pub mod vmm;

pub use api::{Api, Meaning};
pub use block::{
    BlockCursor, FileHeader, Segment, TraceId, BLOCK_HEADER_SIZE, BLOCK_MAGIC, BLOCK_SIZE, CHECKPOINT_TID,
    FLAG_SEGMENTED, HEADER_SIZE, MAGIC,
};
pub use error::{DecodeError, ErrorKind};
pub use fields::{Addrs, BlockState, Ctx, CuResult, Event, MemKind, MemLocation, Ptr, StackId, Stream, Value};
pub use meaning::{Family, Library, Op, Side};
pub use reader::{clear_run, BlockReader, Entry, Merged, Opened, Run, Trace};
pub use record::{
    Alloc, Body, Capture, Checkpoint, Copy, CtxCreate, CtxDestroy, EventCreate, EventDestroy, EventRecord, Exit,
    ExtSemaphore, ExtSemaphoreOp, Fields, FrameworkBlocks, FrameworkEnd, FrameworkFrames, FrameworkOom,
    FrameworkSegment, FrameworkState, FrameworkStats, Free, GraphAccesses, GraphEdges, GraphEvents, GraphExec,
    GraphMem, GraphMemNodes, GraphNode, GraphUpdate, HostFn, HostFnQueued, HostFnRan, Launch, LibWorkspace, Lost, Map,
    Mark, MemOp, Module, NoRoom, PoolCreate, PoolDestroy, PoolUsage, ProcessInfo, PyCode, PyFrames, RangeOp, Rank,
    Record, RecordRef, Region, Seq, SiteHistory, Snapshot, Stack, StreamCreate, StreamDestroy, StreamWait, Sync,
    Thread, Unmap,
};

/// Format version this crate writes.
pub const FORMAT_VERSION: u32 = 1;
/// Oldest format version this crate reads.
pub const MIN_READ_VERSION: u32 = 1;
