//! One allocation the program made, as the replay passes it to the leak model, the memory pass
//! and the findings: below all of them.

use gpuleak_format::{Api, Ctx, MemKind, Ptr, Seq, StackId, Stream};

/// One allocation the program made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Allocation {
    /// Memory family.
    pub kind: MemKind,
    /// Exact driver entry point.
    pub api: Api,
    /// Runtime call that led here, or `Api::NONE`.
    pub via: Api,
    /// Address or handle.
    pub ptr: Ptr,
    /// Bytes the program asked for.
    pub size: u64,
    /// Allocation stack.
    pub stack: StackId,
    /// When, in the process's order.
    pub seq: Seq,
    /// When, in ns since the trace started.
    pub time_ns: u64,
    /// Current context at the call.
    pub ctx: Ctx,
    /// Stream of a stream-ordered allocation.
    pub stream: Stream,
    /// Calling thread.
    pub tid: u32,
}

impl Allocation {
    /// An allocation of nothing, to be written over field by field.
    pub const BLANK: Allocation = Allocation {
        kind: MemKind::Device,
        api: Api(0),
        via: Api(0),
        ptr: Ptr(0),
        size: 0,
        stack: StackId(0),
        seq: Seq(0),
        time_ns: 0,
        ctx: Ctx(0),
        stream: Stream(0),
        tid: 0,
    };

    /// Where the allocation came from, for explaining a later bad free.
    pub fn site(&self) -> AllocSite {
        AllocSite {
            kind: self.kind,
            api: self.api,
            size: self.size,
            stack: self.stack,
        }
    }
}

/// What an allocation was, in short.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocSite {
    /// Memory family.
    pub kind: MemKind,
    /// API that allocated it.
    pub api: Api,
    /// Bytes.
    pub size: u64,
    /// Allocation stack.
    pub stack: StackId,
}
