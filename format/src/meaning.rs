//! The words the API list ([`crate::api`]) declares each entry point's meaning in: which
//! library exports it ([`Library`]), what it does ([`Op`], grouped in a [`Family`]), and for a
//! copy what memory each side is ([`Side`]).

use crate::kind::MemKind;

/// The library that exports an entry point.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Library {
    /// The driver (`libcuda.so`).
    Driver,
    /// The runtime (`libcudart.so`).
    Runtime,
}

/// What an entry point is about, a group of [`Op`]s.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// Memory made, freed, mapped or unmapped (`Alloc`, `Free`, `Map`, `Unmap` records).
    Memory,
    /// Stream-ordered memory pools themselves.
    Pool,
    /// Contexts, and the device's primary context.
    Context,
    /// Streams: their life, waits on them, work queued on them that is not a copy or launch.
    Stream,
    /// Events.
    Event,
    /// Copies and memsets.
    Copy,
    /// Kernel and graph launches.
    Launch,
    /// Graphs: built, instantiated, updated, destroyed.
    Graph,
    /// Stream memory operations (waits on and writes of a value).
    MemOp,
    /// Prefetches and discards of managed memory.
    Range,
    /// External semaphores.
    Semaphore,
    /// The driver's resolvers (`cuGetProcAddress`).
    Resolver,
    /// A runtime entry point, only ever a record's `via` tag.
    Runtime,
}

/// What memory a copy's side is, as far as the entry point's parameters say.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Side {
    /// A host pointer.
    Host,
    /// A `CUdeviceptr` that must be device memory.
    Device,
    /// A CUDA array.
    Array,
    /// An address of any memory (unified addressing), or a descriptor whose memory types the
    /// record does not carry.
    Unified,
}

/// What an entry point does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Op {
    /// Makes memory of a kind, or a reference to it (an `Alloc` record).
    Alloc(MemKind),
    /// Frees memory of a kind (a `Free` record).
    Free(MemKind),
    /// Maps physical memory into a reserved range.
    Map,
    /// Unmaps it.
    Unmap,
    /// Creates or imports a memory pool.
    PoolCreate,
    /// Destroys a memory pool.
    PoolDestroy,
    /// Trims a memory pool.
    PoolTrim,
    /// Creates or retains a context.
    CtxCreate,
    /// Destroys, releases or resets a context.
    CtxDestroy,
    /// Waits for all work of the current context.
    CtxSync,
    /// Creates a stream.
    StreamCreate,
    /// Destroys a stream.
    StreamDestroy,
    /// Waits for all work of a stream.
    StreamSync,
    /// Asks whether a stream's work is complete.
    StreamQuery,
    /// Makes a stream (or a context's streams) wait for an event.
    StreamWait,
    /// Queues a host function (a callback) on a stream.
    HostFunc,
    /// Begins a stream capture.
    CaptureBegin,
    /// Ends a stream capture.
    CaptureEnd,
    /// Creates an event.
    EventCreate,
    /// Destroys an event.
    EventDestroy,
    /// Records an event on a stream (or over a context's streams).
    EventRecord,
    /// Waits for an event on the host.
    EventSync,
    /// Asks whether an event has completed.
    EventQuery,
    /// Copies memory.
    Copy {
        /// The destination.
        dst: Side,
        /// The source.
        src: Side,
    },
    /// Sets device memory to a value.
    Memset,
    /// Launches a kernel.
    KernelLaunch,
    /// Launches an executable graph.
    GraphLaunch,
    /// Makes a stream wait until a memory location holds a value.
    WaitValue,
    /// Makes a stream write a value.
    WriteValue,
    /// A batch of value waits and writes.
    MemOpBatch,
    /// Prefetches managed memory.
    Prefetch,
    /// Discards managed memory.
    Discard,
    /// Discards managed memory, then prefetches it.
    DiscardAndPrefetch,
    /// Imports an external semaphore.
    SemaphoreImport,
    /// Destroys an external semaphore.
    SemaphoreDestroy,
    /// Signals external semaphores on a stream.
    SemaphoreSignal,
    /// Waits for external semaphores on a stream.
    SemaphoreWait,
    /// Adds a node to a graph by hand.
    GraphBuild,
    /// Destroys a graph.
    GraphDestroy,
    /// Instantiates a graph.
    GraphInstantiate,
    /// Changes an executable graph.
    GraphUpdate,
    /// Resolves a driver entry point by name.
    Resolve,
    /// A runtime call: the shim records the driver calls it makes, tagged with it.
    RuntimeCall,
}

impl Op {
    /// The family the operation belongs to.
    pub const fn family(self) -> Family {
        use Op::*;
        match self {
            Alloc(_) | Free(_) | Map | Unmap => Family::Memory,
            PoolCreate | PoolDestroy | PoolTrim => Family::Pool,
            CtxCreate | CtxDestroy | CtxSync => Family::Context,
            StreamCreate | StreamDestroy | StreamSync | StreamQuery | StreamWait | HostFunc | CaptureBegin
            | CaptureEnd => Family::Stream,
            EventCreate | EventDestroy | EventRecord | EventSync | EventQuery => Family::Event,
            Copy { .. } | Memset => Family::Copy,
            KernelLaunch | GraphLaunch => Family::Launch,
            WaitValue | WriteValue | MemOpBatch => Family::MemOp,
            Prefetch | Discard | DiscardAndPrefetch => Family::Range,
            SemaphoreImport | SemaphoreDestroy | SemaphoreSignal | SemaphoreWait => Family::Semaphore,
            GraphBuild | GraphDestroy | GraphInstantiate | GraphUpdate => Family::Graph,
            Resolve => Family::Resolver,
            RuntimeCall => Family::Runtime,
        }
    }
}
