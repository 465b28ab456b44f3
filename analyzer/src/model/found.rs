//! What a replay finds: allocations, leak groups, bad frees and totals.

use std::collections::HashMap;

use gpuleak_format::{Api, Ctx, CuResult, DecodeError, MemKind, Ptr, Seq, StackId};

use super::{Freed, Modules};
pub use crate::allocation::{AllocSite, Allocation};

/// When leaked memory was found still held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeakAt {
    /// Live at the end of the trace.
    Exit,
    /// Still live when its context was torn down (the driver freed it then).
    Teardown {
        /// The call that tore the context down.
        api: Api,
        /// The context.
        ctx: Ctx,
    },
}

impl LeakAt {
    /// `exit` or `teardown`.
    pub fn name(self) -> &'static str {
        match self {
            LeakAt::Exit => "exit",
            LeakAt::Teardown { .. } => "teardown",
        }
    }
}

/// Allocations from one stack, of one family, found live at the same kind of moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeakGroup {
    /// Allocation stack shared by the group.
    pub stack: StackId,
    /// Memory family.
    pub kind: MemKind,
    /// Exit or teardown (for teardown, the first one met).
    pub at: LeakAt,
    /// Bytes asked for, summed.
    pub bytes: u64,
    /// Number of allocations.
    pub allocations: u64,
    /// The earliest allocation of the group.
    pub first: Allocation,
    /// VMM handles among them that were released but are still mapped.
    pub released_but_mapped: u64,
    /// References the group's VMM handles took with `cuMemRetainAllocationHandle` (or by
    /// importing a handle this process already held); for IPC mappings and imported pool
    /// pointers, the openings (imports) of the same memory beyond the first.
    pub retains: u64,
    /// Release calls the group still needed at the end (`cuMemRelease` for VMM handles,
    /// `cuIpcCloseMemHandle` for IPC mappings, `cuMemFree[Async]` for imported pool
    /// pointers): one per creation, import or opening and one per retain, less those made.
    pub releases_due: u64,
    /// Whether a framework's allocator held these allocations at its last state (their bytes
    /// are its tensors or its cache: `crate::frameworks` judges them).
    pub framework: bool,
}

/// Why a free was bad.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadFreeCause {
    /// No allocation of the free's family is known at that address.
    NeverAllocated,
    /// The address was freed before (a VMM handle: released before).
    DoubleFree(Freed),
    /// The address is live, but in another family than the free function's.
    WrongFamily(AllocSite),
}

/// Frees of pointers that were not live, folded by (API, free stack, cause, allocation stack).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadFree {
    /// The free's exact entry point.
    pub api: Api,
    /// Runtime call that led here.
    pub via: Api,
    /// Address or handle of the first occurrence.
    pub ptr: Ptr,
    /// Driver result of the first occurrence.
    pub result: CuResult,
    /// Stack of the free.
    pub stack: StackId,
    /// Why it was bad (for the first occurrence).
    pub cause: BadFreeCause,
    /// Occurrences.
    pub count: u64,
    /// Sequence number of the first occurrence.
    pub seq: Seq,
    /// Thread of the first occurrence.
    pub tid: u32,
}

/// Who the process was.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Process {
    /// Process id.
    pub pid: u32,
    /// Parent process id.
    pub ppid: u32,
    /// Executable path.
    pub exe: String,
    /// Command line.
    pub args: Vec<String>,
    /// Wall clock when the shim started in it (nanoseconds since the Unix epoch; 0 unknown).
    pub start_unix_ns: u64,
    /// The host it ran on.
    pub hostname: String,
    /// Its place in a distributed job, from the trace's `Rank` record.
    pub rank: Option<Rank>,
}

/// A process's place in a distributed job, as its launcher's environment gave it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Rank {
    /// Rank in the job.
    pub rank: u64,
    /// Rank on its node, when the launcher says.
    pub local_rank: Option<u64>,
    /// Processes in the job, when the launcher says.
    pub world_size: Option<u64>,
    /// The launcher whose variables gave it (`torchrun`, `openmpi`, `slurm`...).
    pub launcher: String,
}

/// Calls counted over the whole run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counts {
    /// Successful allocations of every family.
    pub allocations: u64,
    /// Successful frees of every family.
    pub frees: u64,
    /// Allocation calls that failed.
    pub failed_allocations: u64,
    /// Free calls that failed.
    pub failed_frees: u64,
    /// Allocation nodes of graphs: stream-ordered allocations made under stream capture and
    /// `cuGraphAddMemAllocNode` and `cuGraphAddNode[_v2]` calls (no memory; each launch of the
    /// graph allocates it).
    pub graph_allocations: u64,
    /// Successful launches of executable graphs with memory nodes the trace lists (their
    /// allocations and frees are counted with the others).
    pub graph_launches: u64,
    /// Successful launches of executable graphs whose memory nodes are unknown (the shim could
    /// not list them, or the trace has no instantiation of the graph while it has
    /// allocation nodes): what they allocated is not counted.
    pub unknown_graph_launches: u64,
    /// Successful frees, outside capture, of an address an allocation node names while no
    /// launch the trace modelled allocated it (memory of a graph whose nodes are unknown).
    pub graph_frees: u64,
    /// Successful `cuMemRetainAllocationHandle` calls (and imports of a handle already held):
    /// references, not allocations.
    pub retains: u64,
    /// Allocations that reused an address the model still held live (a free the trace
    /// missed): the older allocation is dropped.
    pub missed_frees: u64,
    /// Records replayed.
    pub records: u64,
}

/// What the leak model found in a replay (the whole replay's result is [`crate::replay::Replay`]).
#[derive(Debug, Clone, Default)]
pub struct LeakReplay {
    /// From the `ProcessInfo` record.
    pub process: Option<Process>,
    /// Whether the trace has an `Exit` record (the process exited normally).
    pub exited: bool,
    /// Exit status, when the `Exit` record knows it.
    pub exit_code: Option<i32>,
    /// Calls.
    pub counts: Counts,
    /// Highest live owned bytes (see [`is_owned_memory`]) at any point.
    pub peak_bytes: u64,
    /// When the peak was first reached, ns since the trace start.
    pub peak_time_ns: u64,
    /// Leaks, at teardown and at exit, folded by stack, family and moment.
    pub leaks: Vec<LeakGroup>,
    /// Bad frees, in order of first occurrence.
    pub bad_frees: Vec<BadFree>,
    /// Memory pools created or imported and never destroyed, oldest first.
    pub pool_leaks: Vec<super::PoolLeak>,
    /// Every stack, by id (return addresses, innermost first).
    pub stacks: HashMap<StackId, Vec<u64>>,
    /// Loaded objects.
    pub modules: Modules,
    /// Events the shim could not record (trace full or unwritable).
    pub lost_events: u64,
    /// Resolver answers for tracked functions that were variants the shim did not know
    /// (`Lost` reason 2): calls through them went unrecorded.
    pub unknown_variants: u64,
    /// Calls passed through unrecorded because their thread was inside another intercepted
    /// call (`Lost` reason 3: signal handlers that interrupted one).
    pub nested_calls: u64,
    /// Decoding errors (the first few); the records around them were replayed.
    pub errors: Vec<DecodeError>,
    /// Number of decoding errors in all.
    pub error_count: u64,
    /// The frameworks' allocator states (records 70 to 76).
    pub frameworks: crate::frameworks::States,
}
