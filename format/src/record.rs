//! Every record kind and its field list.
//!
//! # Record layout
//!
//! ```text
//! kind   u8       record kind, never 0; written LAST (see crate::block), so a nonzero kind
//!                 means the whole record is present
//! len    varint   payload length in bytes
//! payload:
//!   seq   varint  sequence number minus the previous record's in this block
//!   time  varint  nanoseconds since trace start minus the previous record's in this block
//!   fields        the kind's fields below, in order, each as crate::fields describes
//!   ...           a newer writer may append fields; readers ignore bytes they do not know
//! ```
//!
//! A reader meets a kind it does not know as [`Body::Unknown`] and skips it by its length.
//! That is why a kind added after the first readers (43 and up) must not use the field types
//! coded against the block's running state ([`Ptr`], [`Stream`], [`Ctx`], [`Event`]: each is
//! written as the difference from the last one): a reader that skips such a record would not
//! update its state, and would misread every later pointer or handle in the block. Such kinds
//! carry handles and addresses as plain `u64`.

use std::borrow::Cow;

use crate::api::Api;
use crate::error::{DecodeError, ErrorKind};
use crate::fields::{Addrs, BlockState, Ctx, CuResult, Event, Field, MemLocation, Ptr, StackId, Stream, Value};
use crate::varint::{Dec, Enc, MAX_VARINT_LEN};

/// A record's position in the total order of one process's events.
///
/// Allocations take their number after the driver returned, frees before they call it, so a
/// free always sorts before a later allocation that reuses its address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Seq(pub u64);

/// A decoded or to-be-encoded record.
#[derive(Debug, Clone, PartialEq)]
pub struct Record<'a> {
    /// Total order within the process.
    pub seq: Seq,
    /// Nanoseconds since the trace started (monotonic clock).
    pub time_ns: u64,
    /// What happened.
    pub body: Body<'a>,
}

/// How to encode and decode one record kind's fields.
pub trait Fields<'a>: Sized {
    /// The record kind byte of this body.
    const KIND: u8;
    /// Appends every field.
    fn put(&self, e: &mut Enc<'_>, s: &mut BlockState);
    /// Reads every field.
    fn get(d: &mut Dec<'a>, s: &mut BlockState) -> Result<Self, DecodeError>;
}

/// The type a [`Body`] variant holds: the record itself, or a box of it for the rare records
/// whose size would otherwise make every `Body` large (`[boxed]` in [`records!`]). Every
/// decoded record is moved several times on its way through the merge and the replay, so
/// the size of `Body` is paid for each record of a trace.
macro_rules! body_slot {
    (boxed $t:ty) => { Box<$t> };
    ($t:ty) => { $t };
}

/// A record into what a [`Body`] variant holds; see [`body_slot!`].
macro_rules! into_slot {
    (boxed $e:expr) => {
        Box::new($e)
    };
    ($e:expr) => {
        $e
    };
}

macro_rules! records {
    ($(
        $(#[$m:meta])*
        $kind:literal $([$boxed:ident])? $name:ident $(<$lt:lifetime>)? {
            $( $(#[$fm:meta])* $field:ident : $ty:ty ),* $(,)?
        }
    )*) => {
        $(
            $(#[$m])*
            #[derive(Debug, Clone, PartialEq)]
            pub struct $name $(<$lt>)? { $( $(#[$fm])* pub $field: $ty ),* }

            impl $(<$lt>)? $name $(<$lt>)? {
                /// This record's kind byte.
                pub const KIND: u8 = $kind;
            }

            impl<'a> Fields<'a> for $name $(<$lt>)? {
                const KIND: u8 = $kind;
                #[allow(unused_variables)]
                #[inline]
                fn put(&self, e: &mut Enc<'_>, s: &mut BlockState) {
                    $( self.$field.put(e, s); )*
                }
                #[allow(unused_variables)]
                fn get(d: &mut Dec<'a>, s: &mut BlockState) -> Result<Self, DecodeError> {
                    Ok($name { $( $field: <$ty as Field<'a>>::get(d, s)?, )* })
                }
            }

            impl $(<$lt>)? $name $(<$lt>)? {
                /// Calls `f` with each field's name and value, in order.
                pub fn visit(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
                    $( f(stringify!($field), Field::value(&self.$field)); )*
                }
            }

            impl<'a> From<$name $(<$lt>)?> for Body<'a> {
                fn from(r: $name $(<$lt>)?) -> Body<'a> { Body::$name(into_slot!($($boxed)? r)) }
            }
        )*

        /// What a record says.
        #[derive(Debug, Clone, PartialEq)]
        pub enum Body<'a> {
            $( $(#[$m])* $name(body_slot!($($boxed)? $name $(<$lt>)?)), )*
            /// A kind this reader does not know, skipped by its length.
            Unknown {
                /// The kind byte.
                kind: u8,
                /// The fields after seq and time, undecoded.
                payload: &'a [u8],
            },
        }

        impl<'a> Body<'a> {
            /// The kind byte.
            #[inline]
            pub fn kind(&self) -> u8 {
                match self {
                    $( Body::$name(_) => $kind, )*
                    Body::Unknown { kind, .. } => *kind,
                }
            }

            /// The record's name, as shown by `gpuleak dump`.
            pub fn name(&self) -> &'static str {
                match self {
                    $( Body::$name(_) => stringify!($name), )*
                    Body::Unknown { .. } => "Unknown",
                }
            }

            /// Calls `f` with each field's name and value (nothing for unknown kinds).
            pub fn visit(&self, f: &mut dyn FnMut(&'static str, Value<'_>)) {
                match self {
                    $( Body::$name(r) => r.visit(f), )*
                    Body::Unknown { .. } => {}
                }
            }

            #[inline]
            fn put_fields(&self, e: &mut Enc<'_>, s: &mut BlockState) {
                match self {
                    $( Body::$name(r) => r.put(e, s), )*
                    Body::Unknown { payload, .. } => {
                        for b in payload.iter() {
                            e.byte(*b);
                        }
                    }
                }
            }

            fn get_fields(kind: u8, d: &mut Dec<'a>, s: &mut BlockState, payload: &'a [u8]) -> Result<Body<'a>, DecodeError> {
                Ok(match kind {
                    $( $kind => Body::$name(into_slot!($($boxed)? <$name>::get(d, s)?)), )*
                    _ => Body::Unknown { kind, payload },
                })
            }
        }
    };
}

records! {
    /// Who this process is; the first record of every trace.
    1 [boxed] ProcessInfo<'a> {
        /// Process id.
        pid: u32,
        /// Parent process id.
        ppid: u32,
        /// Path of the executable.
        exe: Cow<'a, str>,
        /// Command line.
        args: Vec<Cow<'a, str>>,
        /// Host name.
        hostname: Cow<'a, str>,
        /// Version of the shim that wrote the trace.
        shim_version: Cow<'a, str>,
        /// Unwinder in use (`dwarf`, `libunwind`, `fp`, `gcc`, `none`).
        unwinder: Cow<'a, str>,
        /// Maximum frames per stack.
        stack_depth: u32,
        /// Wall-clock time of the trace start, ns since the Unix epoch.
        start_unix_ns: u64,
    }

    /// A loaded object (executable or shared library) whose addresses stacks may contain.
    /// Written before the first stack that needs it; a later record for the same range
    /// replaces an earlier one (a library unloaded and another loaded in its place).
    2 [boxed] Module<'a> {
        /// Load bias: runtime address minus ELF virtual address.
        base: u64,
        /// Lowest mapped address.
        start: u64,
        /// One past the highest mapped address.
        end: u64,
        /// Path as the loader knows it.
        path: Cow<'a, str>,
        /// GNU build id (empty when the object has none).
        build_id: Cow<'a, [u8]>,
    }

    /// A call stack, written once and referred to by id.
    3 Stack<'a> {
        /// Its id (never 0).
        id: StackId,
        /// Return addresses, innermost first.
        frames: Addrs<'a>,
    }

    /// The process ended.
    4 Exit {
        /// Exit status, when `how` is 1.
        code: i32,
        /// 0: the process exited normally (exit(), return from main) and `code` is unknown:
        /// the shim writes this record when it is unloaded, where no exit status is known;
        /// 1: `code` is the exit status. Other values reserved.
        how: u32,
    }

    /// Events the shim could not record (counted, never silently).
    5 Lost {
        /// How many.
        count: u64,
        /// Why: 1 trace full or unwritable; 2 functions the driver's resolver handed out for a
        /// tracked name were a variant this shim does not know (a newer driver), so calls
        /// through them went unrecorded (`count` resolver answers, not calls); 3 calls made
        /// while their thread was inside another intercepted call (a signal handler that
        /// interrupted one, or the driver calling its own entry points), passed through
        /// unrecorded; other values reserved.
        reason: u32,
    }

    /// The records after this one in its block were written by thread `tid`. A block whose
    /// thread exited with room left is handed on to the next thread that needs one, so that a
    /// program of many short threads writes bytes in proportion to its records. Readers take
    /// it as framing ([`crate::reader`] changes the block's thread and yields no entry); a
    /// reader that does not know the kind skips it and keeps the block's first thread.
    6 Thread {
        /// OS thread id of the writer from here on.
        tid: u32,
    }

    /// An allocation of any family (the family follows from `api`: [`Api::mem_kind`]), successful or failed (a failed one has `result != 0` and
    /// is never an allocation).
    16 Alloc {
        /// Exact driver entry point.
        api: Api,
        /// Runtime call that led here (`cudaMalloc`...), or `Api::NONE`.
        via: Api,
        /// Driver result.
        result: CuResult,
        /// Current context at the call (0 if none).
        ctx: Ctx,
        /// Stream for stream-ordered allocations.
        stream: Stream,
        /// Address (or handle, for VMM physical memory and arrays).
        ptr: Ptr,
        /// Bytes the program asked for.
        size: u64,
        /// Allocation stack.
        stack: StackId,
        /// Per-API detail: pitch for pitched allocations, pool handle for pool allocations,
        /// flags for host and managed allocations, alignment for reservations, the location
        /// for `cuMemCreate` ([`crate::MemLocation`]), the mapped address for
        /// `cuMemRetainAllocationHandle`, the handle type for `cuMemImportFromShareableHandle`,
        /// the team's device count for `cuMulticastCreate`, the location of a graph
        /// allocation node (`cuGraphAddMemAllocNode`, `cuGraphAddNode[_v2]`; as for
        /// `cuMemCreate`; traces of the first shims that recorded these nodes have the device
        /// ordinal alone).
        aux: u64,
    }

    /// A free of any family, successful or failed (a failed free of an unknown or already
    /// freed pointer is how bad frees show).
    17 Free {
        /// Exact driver entry point.
        api: Api,
        /// Runtime call that led here, or `Api::NONE`.
        via: Api,
        /// Driver result.
        result: CuResult,
        /// Stream for stream-ordered frees.
        stream: Stream,
        /// Address or handle freed.
        ptr: Ptr,
        /// Size argument where the API has one (address ranges), else 0.
        size: u64,
        /// Free stack when captured (always for failed frees), else none.
        stack: StackId,
    }

    /// A physical handle mapped into a reserved range (`cuMemMap`).
    18 Map {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// Mapped address.
        ptr: Ptr,
        /// Mapped bytes.
        size: u64,
        /// Offset into the handle.
        offset: u64,
        /// Physical memory handle.
        handle: u64,
    }

    /// A mapping removed (`cuMemUnmap`).
    19 Unmap {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// Unmapped address.
        ptr: Ptr,
        /// Unmapped bytes.
        size: u64,
    }

    /// A context came into use: created, or a primary context retained.
    20 CtxCreate {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// The context.
        ctx: Ctx,
        /// Its device ordinal.
        device: i32,
        /// Creation flags.
        flags: u64,
    }

    /// A context torn down, or a primary context released or reset. Memory allocated in a
    /// destroyed context is gone with it.
    21 CtxDestroy {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// The context (0 when the API names a device instead).
        ctx: Ctx,
        /// Device ordinal (-1 when the API names a context).
        device: i32,
    }

    /// A stream created.
    32 StreamCreate {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// The new stream.
        stream: Stream,
        /// Creation flags (1: non-blocking).
        flags: u32,
        /// Priority.
        priority: i32,
        /// Creation stack, if captured.
        stack: StackId,
    }

    /// A stream destroyed.
    33 StreamDestroy {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// The stream.
        stream: Stream,
    }

    /// The host waited: for a stream, an event or a whole context (whichever is nonzero;
    /// all zero means the current context), or polled one successfully when the API is a
    /// query.
    34 Sync {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// Stream waited for.
        stream: Stream,
        /// Event waited for.
        event: Event,
        /// Context waited for.
        ctx: Ctx,
    }

    /// A stream made to wait for an event (`cuStreamWaitEvent`), or all later work of a
    /// context (`cuCtxWaitEvent`, `cuGreenCtxWaitEvent`).
    35 StreamWait {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// The waiting stream (for a context's wait, the context or green context).
        stream: Stream,
        /// The event.
        event: Event,
        /// Flags.
        flags: u32,
    }

    /// An event created.
    36 EventCreate {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// The event.
        event: Event,
        /// Flags.
        flags: u32,
        /// Creation stack, if captured.
        stack: StackId,
    }

    /// An event destroyed.
    37 EventDestroy {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// The event.
        event: Event,
    }

    /// An event recorded on a stream (or over a whole context: `cuCtxRecordEvent`,
    /// `cuGreenCtxRecordEvent`).
    38 EventRecord {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// The event.
        event: Event,
        /// The stream (for a context's record, the context or green context).
        stream: Stream,
        /// Flags.
        flags: u32,
    }

    /// A copy or memset (`src` is 0 for a memset).
    39 Copy {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// Stream (for synchronous APIs, the stream they implicitly use).
        stream: Stream,
        /// Destination address.
        dst: Ptr,
        /// Source address.
        src: u64,
        /// Bytes.
        bytes: u64,
        /// Call stack, if captured.
        stack: StackId,
    }

    /// A kernel launch.
    40 Launch<'a> {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// Stream.
        stream: Stream,
        /// `CUfunction` handle.
        function: u64,
        /// Device pointers found among the parameters.
        ptrs: Addrs<'a>,
        /// Call stack, if captured.
        stack: StackId,
    }

    /// A host function or callback queued on a stream.
    41 HostFn {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// Stream.
        stream: Stream,
    }

    /// Stream capture began (`begin` = 1) or ended (`begin` = 0).
    42 Capture {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// Stream.
        stream: Stream,
        /// 1 for begin, 0 for end.
        begin: u32,
        /// Capture mode, or the graph handle at the end.
        aux: u64,
    }

    /// A stream memory operation (`cuStreamWaitValue32/64`, `cuStreamWriteValue32/64`, and
    /// each operation of a `cuStreamBatchMemOp`, one record per operation in array order).
    /// Its stream and address are plain numbers, not the block's delta-coded handles, so that
    /// readers older than this kind skip it without losing their place (see the module
    /// documentation).
    43 MemOp {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// Stream (`CUstream`; 0 the legacy default stream, or the calling thread's
        /// per-thread default stream for `_ptsz` variants).
        stream: u64,
        /// The operation, numbered as `CUstreamBatchMemOpType`: 1 wait for a 32-bit value,
        /// 2 write one, 3 flush remote writes, 4 wait for a 64-bit value, 5 write one,
        /// 6 memory barrier; 0 for a batch the driver refused (its array is not read).
        op: u32,
        /// The memory location (0 for flushes and barriers).
        addr: u64,
        /// The value waited for or written.
        value: u64,
        /// The call's flags (a wait's condition, `CUstreamWaitValue_flags`; a write's
        /// `CUstreamWriteValue_flags`; a barrier's scope).
        flags: u32,
    }

    /// A step marker or other named point set by the program (`gpuleak_mark`).
    48 Mark<'a> {
        /// Marker name.
        name: Cow<'a, str>,
        /// A value (step number).
        value: u64,
    }

    /// A named region began (`begin` = 1) or ended (`begin` = 0).
    49 Region<'a> {
        /// Region name.
        name: Cow<'a, str>,
        /// 1 for begin, 0 for end.
        begin: u32,
    }

    /// A snapshot point: the live state at this record can be reported on its own.
    50 Snapshot<'a> {
        /// Snapshot number within the process.
        id: u64,
        /// Why (`signal`, `period`, `oom`, `api`).
        reason: Cow<'a, str>,
    }

    /// A Python code object (a function, a module body, a class body), described once the
    /// first time a stack holds one of its frames. `PyFrames` records name it by `id`.
    /// Python frames are resolved offline: the analyzer computes a frame's line from its
    /// instruction offset with `line_table` ([`crate::line_table`]).
    51 [boxed] PyCode<'a> {
        /// Its id within the process (never 0).
        id: u32,
        /// The interpreter's version as `major << 8 | minor` (`0x030b` for 3.11): the format of
        /// `line_table` (3.10: PEP 626 line table; 3.11 and later: PEP 657 location table).
        python: u32,
        /// `co_firstlineno`: the line the line table counts from.
        first_line: u32,
        /// `co_filename`.
        filename: Cow<'a, str>,
        /// `co_qualname` (3.11+), `co_name` on 3.10.
        qualname: Cow<'a, str>,
        /// The bytes of `co_linetable`.
        line_table: Cow<'a, [u8]>,
    }

    /// The Python frames of a stack written just before (a `Stack` with the same id), and
    /// where they go among its native frames.
    52 PyFrames<'a> {
        /// The `Stack` these frames belong to.
        stack: StackId,
        /// Triples `(position, code id, instruction offset)`, innermost Python frame first:
        /// the frame goes before native frame number `position` of the stack (the stack's
        /// length: after the last one), its code is the `PyCode` with that id, and the offset
        /// is in bytes from the start of the code's bytecode.
        frames: Addrs<'a>,
    }

    /// A stream-ordered memory pool's reserved and used memory, as the driver's getters
    /// `cuMemPoolGetAttribute(CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT / USED_MEM_CURRENT)` said
    /// after a successful `cuMemAllocAsync`, `cuMemAllocFromPoolAsync` or `cuMemFreeAsync`.
    /// The shim samples one such call in N on each thread (`GPULEAK_POOL_SAMPLE`) and writes
    /// a record only when either value changed since the thread's last one for that pool.
    /// Memory the pool reserves beyond what is used is invisible to the allocation records.
    53 PoolUsage {
        /// The pool (`CUmemoryPool`).
        pool: u64,
        /// Ordinal of the calling thread's device, or -1 when the driver did not say.
        device: i32,
        /// Bytes the pool holds from the device.
        reserved: u64,
        /// Bytes of it in live allocations.
        used: u64,
    }
    /// A stream-ordered memory pool came into being: created (`cuMemPoolCreate`), or a pool
    /// of another process imported (`cuMemPoolImportFromShareableHandle`). Either needs a
    /// `cuMemPoolDestroy`. A device's default pool has no such record.
    54 PoolCreate {
        /// Exact driver entry point.
        api: Api,
        /// Runtime call that led here (`cudaMemPoolCreate`), or `Api::NONE`.
        via: Api,
        /// Driver result.
        result: CuResult,
        /// The pool (`CUmemoryPool`; 0 when the call failed).
        pool: u64,
        /// Where its memory lives: the location's type (`CUmemLocationType`: 1 device, 2
        /// host, 3 host NUMA node, 4 the current thread's host NUMA node), 0 for an import.
        location_type: u32,
        /// The location's id (the device ordinal for a device pool), -1 for an import.
        location: i32,
        /// The most the pool may reserve (`maxSize`; 0: no limit), 0 for an import.
        max_size: u64,
        /// The shareable handle types it may be exported as (`handleTypes`), or for an
        /// import the handle type it was imported from.
        handle_types: u32,
        /// Creation stack.
        stack: StackId,
    }
    /// A stream-ordered memory pool destroyed (`cuMemPoolDestroy`). The driver releases what
    /// it reserved; allocations still outstanding stay valid until freed.
    55 PoolDestroy {
        /// Exact driver entry point.
        api: Api,
        /// Runtime call that led here (`cudaMemPoolDestroy`), or `Api::NONE`.
        via: Api,
        /// Driver result.
        result: CuResult,
        /// The pool.
        pool: u64,
        /// Call stack.
        stack: StackId,
    }
    /// Memory nodes of a graph being instantiated, listed by the shim from the graph itself
    /// (`cuGraphGetNodes`, `cuGraphMemAllocNodeGetParams`, `cuGraphMemFreeNodeGetParams`) after
    /// a successful instantiation, and written just before its [`GraphExec`] record: as many
    /// records as needed, at most [`GraphMem::MAX_NODES`] nodes of each kind in one.
    56 GraphMem<'a> {
        /// The executable graph (`CUgraphExec`) they belong to.
        exec: u64,
        /// Allocation nodes as triples `(address, bytes, location)`: the fixed address each
        /// launch allocates at, the size, and where the memory is, as
        /// [`crate::MemLocation::encode`] writes it (traces of the first shims that wrote this
        /// record have the device ordinal alone, as `u32`: [`GraphMem::location`] reads both).
        allocs: Addrs<'a>,
        /// Free nodes: the addresses they free (an allocation of this graph or of another).
        frees: Addrs<'a>,
    }
    /// A graph instantiated (`cuGraphInstantiate*`): an executable graph whose launches
    /// (`Launch` records of `cuGraphLaunch`, `function` = `exec`) allocate and free what its
    /// memory nodes say ([`GraphMem`] records just before this one).
    57 GraphExec {
        /// Exact driver entry point.
        api: Api,
        /// Runtime call that led here, or `Api::NONE`.
        via: Api,
        /// Driver result.
        result: CuResult,
        /// The executable graph (`CUgraphExec`; 0 when the call failed).
        exec: u64,
        /// The graph it was made from (`CUgraph`).
        graph: u64,
        /// Instantiation flags (`CUDA_GRAPH_INSTANTIATE_FLAG_*`; 1: auto-free on launch).
        flags: u64,
        /// Allocation nodes the shim found.
        alloc_nodes: u32,
        /// Free nodes the shim found.
        free_nodes: u32,
        /// 1 when the shim listed the graph's nodes; 0 when it could not (a driver without
        /// the getters, or a getter that failed), so the graph's memory nodes are unknown.
        nodes_known: u32,
        /// Call stack.
        stack: StackId,
    }
    /// Event nodes of a graph, listed by the shim with the driver's getters
    /// (`cuGraphGetNodes`, `cuGraphNodeGetType`, `cuGraphEventRecordNodeGetEvent`,
    /// `cuGraphEventWaitNodeGetEvent`, and `cuGraphChildGraphNodeGetGraph` for the nodes of
    /// child graphs at any depth): after a successful instantiation, just before its
    /// [`GraphExec`] record, and after a successful update that takes a graph's parameters,
    /// just before its [`GraphUpdate`] record. As many records as needed, at most
    /// [`GraphEvents::MAX_NODES`] nodes of each kind in one; one with none when the graph has
    /// none. No such record means the shim could not list them.
    58 GraphEvents<'a> {
        /// The executable graph (`CUgraphExec`) whose launches record and wait for them.
        exec: u64,
        /// Event record nodes as triples `(node, event, owner)`: the node (`CUgraphNode` of
        /// the graph listed), the event each launch records, and the child graph node of the
        /// listed graph's top level that holds the node (0 for a node at the top level; for
        /// a child graph's update, that child graph node).
        records: Addrs<'a>,
        /// Event wait nodes, as triples the same way: the event each launch waits for.
        waits: Addrs<'a>,
    }
    /// A successful or failed change to the event nodes of an executable graph (for
    /// `cuGraphExecNodeSetParams`, a successful one only: a failed call's parameters may be
    /// unreadable):
    /// `cuGraphExecEventRecordNodeSetEvent`, `cuGraphExecEventWaitNodeSetEvent` and
    /// `cuGraphExecNodeSetParams` given an event node's parameters set one node's event
    /// ([`GraphUpdate::NODE_EVENT`]); `cuGraphExecUpdate[_v2]` gives every node the
    /// parameters of the same node of another graph ([`GraphUpdate::GRAPH`]), and
    /// `cuGraphExecChildGraphNodeSetParams` (or `cuGraphExecNodeSetParams` given a child
    /// graph's) those of a child graph node's nodes ([`GraphUpdate::CHILD_GRAPH`]): the
    /// [`GraphEvents`] records just before this one list that graph's event nodes.
    59 GraphUpdate {
        /// Exact driver entry point.
        api: Api,
        /// Runtime call that led here, or `Api::NONE`.
        via: Api,
        /// Driver result.
        result: CuResult,
        /// What changed: [`GraphUpdate::NODE_EVENT`], [`GraphUpdate::GRAPH`] or
        /// [`GraphUpdate::CHILD_GRAPH`].
        what: u32,
        /// The executable graph.
        exec: u64,
        /// The node (of the graph the executable graph was made from) whose event, or whose
        /// child graph, changed; 0 for a whole graph's update.
        node: u64,
        /// The event the node now records or waits for ([`GraphUpdate::NODE_EVENT`]).
        event: u64,
        /// The graph whose parameters were taken (the update's graph, or the child graph).
        graph: u64,
        /// 1 when the shim listed that graph's event nodes in [`GraphEvents`] records just
        /// before this one (for [`GraphUpdate::NODE_PARAMS`], the node's entries in a
        /// [`GraphAccesses`] record); 0 when it did not (a failed call, or a getter missing
        /// or failing). Whether a graph's kernel, memcpy and memset nodes were listed is told
        /// by [`GraphAccesses`] records alone.
        listed: u32,
    }
    /// What the kernel, memcpy and memset nodes of a graph touch, listed by the shim with the
    /// driver's getters (`cuGraphKernelNodeGetParams`, `cuGraphMemcpyNodeGetParams`,
    /// `cuGraphMemsetNodeGetParams`; child graphs at any depth), at the same moments as
    /// [`GraphEvents`] (before the [`GraphExec`] or [`GraphUpdate`] record they belong to);
    /// and, for one node whose parameters an executable-graph setter changed
    /// (`cuGraphExecKernelNodeSetParams[_v2]`, `cuGraphExecMemcpyNodeSetParams`,
    /// `cuGraphExecMemsetNodeSetParams`, `cuGraphExecNodeSetParams`), what it touches now,
    /// read from the setter's parameters, before its [`GraphUpdate::NODE_PARAMS`] record.
    /// As many records as needed, at most [`GraphAccesses::MAX_ENTRIES`] entries in one; one
    /// with none when the graph has no such node. No such record means the shim could not
    /// list them.
    60 GraphAccesses<'a> {
        /// The executable graph (`CUgraphExec`) whose launches touch this memory.
        exec: u64,
        /// Entries as quadruples `(node, owner, address, length and mode)`, every node's
        /// entries one after another, nodes in the order the driver listed them: the node
        /// (`CUgraphNode` of the graph listed, or the node the setter named), the child graph
        /// node of the listed graph's top level that holds it (as in [`GraphEvents`]), the
        /// first byte touched, and the length with the mode in its top two bits
        /// ([`GraphAccesses::encode`]). Each node has at least one entry: a node that touches
        /// nothing the shim could tell (a kernel with no 8-byte parameter, a node whose
        /// parameters could not be read, a kernel node the device may update) has one entry
        /// with address and length 0.
        nodes: Addrs<'a>,
    }
    /// Where a graph node came from, so that findings can name it: a kernel launch, copy,
    /// memset, stream-ordered allocation or free captured into a graph (written just after
    /// that call's `Launch`, `Copy`, `Alloc` or `Free` record, while a capture was active,
    /// with the node the capture's dependencies then named), or a kernel, memcpy, memset,
    /// allocation or free node added by hand (`cuGraphAddKernelNode[_v2]`,
    /// `cuGraphAddMemcpyNode`, `cuGraphAddMemsetNode`, `cuGraphAddMemAllocNode`,
    /// `cuGraphAddMemFreeNode`, `cuGraphAddNode[_v2]`). A captured
    /// call that added no node (an empty copy) names the node before it, which its own call
    /// already named: readers keep a node's first record. `cuGraphDestroy` writes one with
    /// `node` 0: the graph's nodes are gone, and their handles may come back in another
    /// graph.
    61 GraphNode {
        /// The call that made the node (the captured call, or the `cuGraphAdd*` entry
        /// point), or `cuGraphDestroy`.
        api: Api,
        /// The graph it belongs to (`CUgraph`): the capture's graph, or the one named.
        graph: u64,
        /// The node (`CUgraphNode`), as `GraphAccesses` entries name it; 0 for a graph
        /// destroyed.
        node: u64,
        /// Its type (`CUgraphNodeType`): [`GraphNode::KERNEL`], [`GraphNode::MEMCPY`],
        /// [`GraphNode::MEMSET`], [`GraphNode::MEM_ALLOC`] or [`GraphNode::MEM_FREE`]; 0 for
        /// a graph destroyed.
        kind: u32,
        /// The call's stack, taken for every such call whatever `GPULEAK_SYNC_STACKS` says
        /// (captures and graph building happen once, replays many times).
        stack: StackId,
    }
    /// The dependencies between the nodes of a graph, listed by the shim with the driver's
    /// getters (`cuGraphGetEdges_v2`, else `cuGraphGetEdges`; `cuGraphChildGraphNodeGetGraph`
    /// for child graphs at any depth) after a successful instantiation, just before its
    /// [`GraphExec`] record (an update keeps an executable graph's topology, so none is
    /// listed then). As many records as needed, at most [`GraphEdges::MAX_ENTRIES`] entries
    /// in one; one with none when the graph has no edge. No such record means the shim
    /// could not list them (a driver without the getters, or a getter that failed), so the
    /// order between the graph's nodes is unknown.
    62 GraphEdges<'a> {
        /// The executable graph (`CUgraphExec`) made from the graph.
        exec: u64,
        /// Entries as triples `(what, from, to)`: [`GraphEdges::EDGE`], `to` depends on
        /// `from` (both nodes of one graph: the listed one or a child graph within it); or
        /// [`GraphEdges::CHILD`], `to` is a node of the graph that child graph node `from`
        /// holds. Nodes are `CUgraphNode` handles, as [`GraphAccesses`] entries name them.
        entries: Addrs<'a>,
    }
    /// The allocation and free nodes of a graph by node, so that the order between them and
    /// the nodes that use their memory can be judged ([`GraphEdges`]): listed by the shim with
    /// the same getters as [`GraphMem`], at the same moment (after a successful
    /// instantiation, just before its [`GraphExec`] record), when it could list every memory
    /// node. As many records as needed, at most [`GraphMemNodes::MAX_NODES`] nodes of each
    /// kind in one; none when the graph has no memory node.
    63 GraphMemNodes<'a> {
        /// The executable graph (`CUgraphExec`) made from the graph.
        exec: u64,
        /// Allocation nodes as quadruples `(node, owner, address, bytes)`: the node
        /// (`CUgraphNode`, as [`GraphAccesses`] entries name nodes), the child graph node of
        /// the listed graph's top level that holds it (0 at the top level), and the memory it
        /// allocates.
        allocs: Addrs<'a>,
        /// Free nodes as triples `(node, owner, address)`: the address each frees.
        frees: Addrs<'a>,
    }
    /// An external semaphore imported (`cuImportExternalSemaphore`: a Vulkan, D3D or
    /// another process's semaphore, through a shareable handle) or destroyed
    /// (`cuDestroyExternalSemaphore`, numbered before the call, like a free). What its
    /// signals and waits mean depends on the type the import names, which the driver has no
    /// getter for later.
    64 ExtSemaphore {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// The semaphore (`CUexternalSemaphore`; 0 when the import failed).
        semaphore: u64,
        /// For an import, the handle type (`CUexternalSemaphoreHandleType`: 1 to 3 binary
        /// semaphores, 4, 5, 9 and 10 fences and timeline semaphores, 6 NvSciSync, 7 and 8
        /// keyed mutexes), 0 if the descriptor was NULL; 0 for a destroy.
        handle_type: u32,
        /// For an import, the descriptor's flags; 0 for a destroy.
        flags: u32,
        /// The import's stack (with `GPULEAK_OBJECT_STACKS=1`), none for a destroy.
        stack: StackId,
    }
    /// One semaphore of a `cuSignalExternalSemaphoresAsync` or
    /// `cuWaitExternalSemaphoresAsync` call (each with `_ptsz`): one record per semaphore,
    /// in array order, read after a successful call; a refused call is one record with
    /// semaphore 0 (its arrays are not read).
    65 ExtSemaphoreOp {
        /// Exact driver entry point (signal or wait).
        api: Api,
        /// Driver result.
        result: CuResult,
        /// Stream (`CUstream`; 0 the legacy default stream, or the calling thread's
        /// per-thread default stream for the `_ptsz` variants).
        stream: u64,
        /// The semaphore.
        semaphore: u64,
        /// The fence value signaled or waited for (`params.fence.value`: fences and
        /// timeline semaphores).
        value: u64,
        /// The key released or acquired (`params.keyedMutex.key`: keyed mutexes).
        key: u64,
        /// The parameters' flags.
        flags: u32,
    }
    /// One range of a prefetch or discard of managed memory on a stream
    /// (`cuMemPrefetchAsync[_v2]`, `cuMemPrefetchBatchAsync`, `cuMemDiscardBatchAsync`,
    /// `cuMemDiscardAndPrefetchBatchAsync`, each with `_ptsz`): one record per range, in array
    /// order, read after a successful call; a refused batch is one record of no range (a
    /// refused single prefetch keeps its range).
    66 RangeOp {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// Stream (`CUstream`; 0 the legacy default stream, or the calling thread's
        /// per-thread default stream for the `_ptsz` variants).
        stream: u64,
        /// First byte of the range (plain, like every handle of a kind added after the
        /// delta registers: readers that skip this kind keep their state).
        ptr: u64,
        /// Bytes.
        bytes: u64,
        /// Where a prefetch moves the range ([`crate::MemLocation::encode`] of the location's
        /// type and id; a device ordinal, or -1 for the CPU, is a device or host location);
        /// 0 for a discard.
        location: u64,
        /// Call stack, if captured.
        stack: StackId,
    }
    /// The end of a checkpoint: the last record of the blocks with thread id
    /// [`crate::CHECKPOINT_TID`] at the start of a segment ([`crate::checkpoint`]). Those
    /// blocks hold the records of the history up to `as_of` that are still needed (live
    /// allocations and what they refer to), with their own sequence numbers; this record
    /// counts the others, which were dropped. A checkpoint without it is unfinished: readers
    /// ignore its blocks. Its sequence number is `as_of`.
    67 [boxed] Checkpoint<'a> {
        /// The last sequence number the checkpoint covers: records after it are in the
        /// segment's own blocks.
        as_of: u64,
        /// The segment this checkpoint starts.
        segment: u64,
        /// Records of the covered history kept in the checkpoint.
        kept: u64,
        /// Records of the covered history dropped (counted in `counts`).
        dropped: u64,
        /// Records of the covered history that could not be read (decoding errors).
        missing: u64,
        /// The dropped records counted, as quadruples `(kind, api, flags, count)`: the
        /// record kind, the API (0 for kinds without one), [`Checkpoint`]'s flags for how the
        /// analyzer counted the record, and how many.
        counts: Addrs<'a>,
    }

    /// Where the process stands in a distributed job, read from its launcher's environment
    /// at start (torchrun's `RANK`/`LOCAL_RANK`/`WORLD_SIZE`, Open MPI's, MVAPICH's, PMI's
    /// and Slurm's equivalents). Written once, after `ProcessInfo`, only when a rank was
    /// found. [`Rank::UNKNOWN`] stands for a value the launcher does not give.
    68 Rank<'a> {
        /// The process's rank in the job (0-based).
        rank: u64,
        /// Its rank on its node.
        local_rank: u64,
        /// How many processes the job has.
        world_size: u64,
        /// Which launcher's variables gave it: `torchrun`, `env` (`RANK` without torchrun's
        /// other variables), `openmpi`, `mvapich`, `pmi`, `pmix` or `slurm`.
        launcher: Cow<'a, str>,
    }

    /// One series of a checkpoint's history of live bytes ([`crate::checkpoint::history`]):
    /// what the dropped history's memory did over time, downsampled, so that a report's
    /// timeline, peak and growth cover the whole run. Written in a checkpoint's blocks after
    /// its kept records and before its [`Checkpoint`] record; a compactor fed one extends it.
    /// Readers that do not know the kind skip it; so does every reader outside the memory pass.
    69 [boxed] SiteHistory<'a> {
        /// Which series: [`SiteHistory::AXIS`], [`SiteHistory::DEVICE`], [`SiteHistory::SITE`]
        /// or [`SiteHistory::REST`].
        series: u64,
        /// A site's stack id, a device's number (two's complement of an `i64`: -1 pinned
        /// host memory, -2 a context the trace never named), else 0.
        key: u64,
        /// A site's API (its first allocation's), else [`Api::NONE`].
        api: Api,
        /// Memory events the history covers (allocations made or failed, releases, mappings).
        events: u64,
        /// Memory events per point (a power of two).
        width: u64,
        /// Index of the first point the series knows: before it, unknown (a site that was
        /// followed again after it had been left out).
        first: u64,
        /// The highest value: the process's peak live bytes (axis), the device's, the site's.
        high: u64,
        /// Sequence number and time at which the process or the device first reached `high`
        /// (0 for sites and the rest).
        high_seq: u64,
        /// See `high_seq`.
        high_time_ns: u64,
        /// Axis: nothing; a device: its allocations and frees; a site: its allocations,
        /// frees, bytes allocated, live bytes at the process's peak, device (as `key` gives
        /// one) and the sum of its frees' lifetimes (in sequence numbers); the rest: its live
        /// bytes at the process's peak.
        totals: Addrs<'a>,
        /// Axis: each point's last time (ns) and sequence number, in pairs; other series: each
        /// point's lowest, highest and last value, in triples, from point `first`.
        points: Addrs<'a>,
    }


    // Kinds 70 to 76: a framework's caching allocator seen from inside (PyTorch's
    // `torch.cuda.memory._snapshot()`), written by the Python package through
    // `gpuleak_framework_record`. One state is a FrameworkState, then its segments, blocks,
    // stats and frames in any order, then a FrameworkEnd; a state without its end (the process
    // died while writing it) is ignored by readers. crate::framework documents the layout.

    /// A framework's allocator state begins.
    70 [boxed] FrameworkState<'a> {
        /// State number within the process (from 1).
        id: u64,
        /// Layout version of records 70 to 76 ([`crate::framework::LAYOUT`]).
        layout: u32,
        /// The framework (`torch`).
        framework: Cow<'a, str>,
        /// Why it was written (`exit`, `snapshot`, `check`, `test`, `oom`, `api`).
        reason: Cow<'a, str>,
        /// The Snapshot record written with it (0: none).
        snapshot: u64,
    }

    /// One segment of the framework's allocator: a driver allocation it holds.
    71 FrameworkSegment {
        /// The state it belongs to.
        state: u64,
        /// Device ordinal.
        device: i32,
        /// First byte (plain `u64`: a kind added after the delta registers).
        address: u64,
        /// Bytes.
        size: u64,
        /// The stream it was allocated on.
        stream: u64,
        /// Its pool: 0 large, 1 small.
        pool: u32,
    }

    /// Blocks of one segment, in address order.
    72 FrameworkBlocks<'a> {
        /// The state it belongs to.
        state: u64,
        /// The segment's address.
        segment: u64,
        /// Five numbers per block: offset in the segment, size, size requested, state
        /// ([`crate::framework::BlockState`]) and frames id (a `FrameworkFrames`; 0 none).
        blocks: Addrs<'a>,
    }

    /// A Python stack of the framework's live blocks, written once per state and referred
    /// to by id.
    73 [boxed] FrameworkFrames<'a> {
        /// Its id within the state (never 0).
        id: u32,
        /// The state it belongs to.
        state: u64,
        /// Two strings per frame, innermost first: file name, function.
        names: Vec<Cow<'a, str>>,
        /// The line of each frame.
        lines: Addrs<'a>,
    }

    /// The framework's own counters for one device at the state.
    74 FrameworkStats {
        /// The state it belongs to.
        state: u64,
        /// Device ordinal.
        device: i32,
        /// Bytes in live tensors (`torch.cuda.memory_allocated()`).
        allocated: u64,
        /// Bytes the allocator holds (`torch.cuda.memory_reserved()`).
        reserved: u64,
        /// The highest `reserved` so far (`torch.cuda.max_memory_reserved()`).
        peak_reserved: u64,
    }

    /// The framework ran out of memory (its OOM observer), before it raised.
    75 FrameworkOom {
        /// The state written with it.
        state: u64,
        /// Device ordinal.
        device: i32,
        /// Bytes it asked for.
        requested: u64,
        /// Bytes the framework held on the device.
        device_allocated: u64,
        /// Bytes the device had free.
        device_free: u64,
    }

    /// A framework state is complete.
    76 FrameworkEnd {
        /// The state.
        state: u64,
        /// Segments written.
        segments: u32,
        /// Blocks written.
        blocks: u32,
    }

    /// A host function or stream callback queued on a stream (`cuLaunchHostFunc[_v2]`,
    /// `cuStreamAddCallback`, each with `_ptsz`) that the shim handed to the driver wrapped,
    /// so that the trace also shows when the driver starts running it ([`HostFnRan`] with the
    /// same `id`). Written instead of [`HostFn`] for such a call, also when the driver refused
    /// it; a call the shim passed on unwrapped (on a stream under capture, with no function)
    /// is a [`HostFn`] as before.
    77 HostFnQueued {
        /// Exact driver entry point.
        api: Api,
        /// Driver result.
        result: CuResult,
        /// Stream (`CUstream`; 0 the legacy default stream, or the calling thread's
        /// per-thread default stream for `_ptsz` variants), plain like every handle of a kind
        /// added after the delta registers.
        stream: u64,
        /// The host function's number within the process (from 1).
        id: u64,
    }

    /// The driver started running host function `id` ([`HostFnQueued`]): every operation
    /// queued on its stream before it is complete. Written by the shim on the thread the
    /// driver runs it on, just before the program's function is called; numbered before its
    /// [`HostFnQueued`] when the driver ran the function before the call that queued it
    /// returned.
    78 HostFnRan {
        /// The number of its [`HostFnQueued`].
        id: u64,
    }

    /// Device memory a CUDA library was handed as its workspace (a cuBLAS handle's
    /// `cublasSetWorkspace_v2`, a `cublasLtMatmul` call's `workspace` argument) by a call
    /// that succeeded. Written by the shim when the thread's (handle, workspace, size) for
    /// that function changes, not at every call. A framework keeps such a block allocated
    /// for the life of the process (PyTorch's cuBLAS workspaces): the analyzer counts a
    /// framework's block at this address as the library's workspace, not a tensor.
    79 LibWorkspace {
        /// Which library: [`LibWorkspace::CUBLAS`] or [`LibWorkspace::CUBLAS_LT`].
        library: u32,
        /// The workspace's first byte (plain `u64`: a kind added after the delta registers).
        ptr: u64,
        /// Its bytes, as the call gave them.
        size: u64,
    }
}

impl LibWorkspace {
    /// `library`: cuBLAS (`cublasSetWorkspace_v2`).
    pub const CUBLAS: u32 = 1;
    /// `library`: cuBLASLt (`cublasLtMatmul`).
    pub const CUBLAS_LT: u32 = 2;

    /// The library's name, as its documentation writes it (`None` for a number this reader
    /// does not know).
    pub fn library_name(library: u32) -> Option<&'static str> {
        match library {
            Self::CUBLAS => Some("cuBLAS"),
            Self::CUBLAS_LT => Some("cuBLASLt"),
            _ => None,
        }
    }
}

impl Rank<'_> {
    /// A value the launcher does not give.
    pub const UNKNOWN: u64 = u64::MAX;
}

impl SiteHistory<'_> {
    /// `series`: the axis (each point's time and sequence number) and the process's peak.
    pub const AXIS: u64 = 0;
    /// `series`: one device's live bytes.
    pub const DEVICE: u64 = 1;
    /// `series`: one site's live bytes.
    pub const SITE: u64 = 2;
    /// `series`: the live bytes of every site not followed alone.
    pub const REST: u64 = 3;
}

impl Checkpoint<'_> {
    /// Flag: the call failed (`result != 0`).
    pub const FAILED: u64 = 1;
    /// Flag: a stream-ordered allocation or free on a stream under capture (a graph node).
    pub const CAPTURED: u64 = 2;
    /// Flag: an allocation that was one more reference to memory already live (an IPC handle
    /// opened again, a pool pointer or VMM handle imported again).
    pub const AGAIN: u64 = 4;
    /// Flag: a free of memory a graph's allocation node names, with no launch's allocation
    /// live there.
    pub const GRAPH_FREE: u64 = 8;
    /// Flag (no record of its own): a live allocation that a later one at the same address
    /// replaced without a free the trace shows (a missed free).
    pub const REPLACED: u64 = 16;
    /// Flag: a launch of an executable graph whose memory nodes are unknown.
    pub const UNKNOWN_GRAPH: u64 = 32;
}

impl GraphMemNodes<'_> {
    /// The most allocation nodes (and the most free nodes) one record lists, so that a record
    /// always fits in a block.
    pub const MAX_NODES: usize = 512;
}

impl GraphEdges<'_> {
    /// The most entries (triples) one record holds, so that a record always fits in a block.
    pub const MAX_ENTRIES: usize = 512;
    /// `what`: an edge; `to` starts after `from` has finished (an edge the driver marks as
    /// programmatic, which lets `to` start earlier, is listed as one too).
    pub const EDGE: u64 = 0;
    /// `what`: `to` belongs to the child graph of `from`.
    pub const CHILD: u64 = 1;
}

impl GraphNode {
    /// `kind`: a kernel node (`CU_GRAPH_NODE_TYPE_KERNEL`).
    pub const KERNEL: u32 = 0;
    /// `kind`: a memcpy node (`CU_GRAPH_NODE_TYPE_MEMCPY`).
    pub const MEMCPY: u32 = 1;
    /// `kind`: a memset node (`CU_GRAPH_NODE_TYPE_MEMSET`).
    pub const MEMSET: u32 = 2;
    /// `kind`: an allocation node (`CU_GRAPH_NODE_TYPE_MEM_ALLOC`).
    pub const MEM_ALLOC: u32 = 10;
    /// `kind`: a free node (`CU_GRAPH_NODE_TYPE_MEM_FREE`).
    pub const MEM_FREE: u32 = 11;
}

impl GraphEvents<'_> {
    /// The most event record nodes (and the most wait nodes) one record lists, so that a
    /// record always fits in a block.
    pub const MAX_NODES: usize = 512;
}

impl GraphUpdate {
    /// `what`: one node's event was set.
    pub const NODE_EVENT: u32 = 1;
    /// `what`: every node took the parameters of another graph's.
    pub const GRAPH: u32 = 2;
    /// `what`: a child graph node's nodes took the parameters of another graph's.
    pub const CHILD_GRAPH: u32 = 3;
    /// `what`: a kernel, memcpy or memset node's parameters were set (what it touches now is
    /// in the [`GraphAccesses`] record before this one when `listed` is 1).
    pub const NODE_PARAMS: u32 = 4;
    /// `what`: a node was enabled (`event` 1) or disabled (`event` 0) by
    /// `cuGraphNodeSetEnabled`; a disabled node does nothing when the graph runs.
    pub const NODE_ENABLED: u32 = 5;
}

impl GraphAccesses<'_> {
    /// The most entries (quadruples) one record holds, so that a record always fits in a
    /// block.
    pub const MAX_ENTRIES: usize = 512;
    /// Mode: a copy's source.
    pub const READ: u64 = 1;
    /// Mode: a copy's destination or a memset.
    pub const WRITE: u64 = 2;
    /// Mode: a kernel's 8-byte parameter, which may be an address it reads or writes
    /// (length 1).
    pub const KERNEL: u64 = 3;
    const MODE_SHIFT: u32 = 62;

    /// The fourth member of an entry: `length` (at most 2^62 - 1; longer is clamped) and
    /// `mode`.
    pub fn encode(length: u64, mode: u64) -> u64 {
        length.min((1 << Self::MODE_SHIFT) - 1) | (mode & 3) << Self::MODE_SHIFT
    }

    /// The length and mode an entry's fourth member holds.
    pub fn decode(v: u64) -> (u64, u64) {
        (v & ((1 << Self::MODE_SHIFT) - 1), v >> Self::MODE_SHIFT)
    }
}

impl GraphMem<'_> {
    /// The most allocation nodes (and the most free nodes) one record lists, so that a record
    /// always fits in a block.
    pub const MAX_NODES: usize = 512;

    /// What each launch of a graph with these memory nodes does to memory that outlives it:
    /// the allocation triples no free node of the same graph frees (an allocation freed
    /// within the launch lives only while the graph runs), and the free nodes of memory the
    /// graph does not allocate itself. A trailing partial triple is ignored.
    pub fn lasting(allocs: &[u64], frees: &[u64]) -> (Vec<[u64; 3]>, Vec<u64>) {
        let triples = || allocs.chunks_exact(3).map(|t| [t[0], t[1], t[2]]);
        let freed: std::collections::HashSet<u64> = frees.iter().copied().collect();
        let own: std::collections::HashSet<u64> = triples().map(|t| t[0]).collect();
        (
            triples().filter(|t| !freed.contains(&t[0])).collect(),
            frees.iter().copied().filter(|f| !own.contains(f)).collect(),
        )
    }

    /// Where an allocation node's memory is, from the third member of its triple.
    pub fn location(v: u64) -> MemLocation {
        if v >> 32 == 0 {
            MemLocation::Device(v as u32 as i32)
        } else {
            MemLocation::decode(v)
        }
    }
}

impl MemOp {
    /// `op`: a wait for a 32-bit value (`CU_STREAM_MEM_OP_WAIT_VALUE_32`).
    pub const WAIT_32: u32 = 1;
    /// `op`: a write of a 32-bit value.
    pub const WRITE_32: u32 = 2;
    /// `op`: a wait for a 64-bit value.
    pub const WAIT_64: u32 = 4;
    /// `op`: a write of a 64-bit value.
    pub const WRITE_64: u32 = 5;
    /// `op`: an atomic reduction (CUDA 13.1, `CU_STREAM_MEM_OP_ATOMIC_REDUCTION`).
    pub const REDUCTION: u32 = 8;
}

impl GraphExec {
    /// The flag of `GraphExec::flags` that frees a launch's unfreed allocations at the next
    /// launch (`CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH`).
    pub const AUTO_FREE_ON_LAUNCH: u64 = 1;
}

/// Why a record could not be encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoRoom;

/// A record whose body is borrowed: what writers pass around, so that the (large) body is
/// never moved on the way to the encoder.
#[derive(Debug, Clone, Copy)]
pub struct RecordRef<'r, 'a> {
    /// Total order within the process.
    pub seq: Seq,
    /// Nanoseconds since the trace started.
    pub time_ns: u64,
    /// What happened.
    pub body: &'r Body<'a>,
}

impl<'a> Record<'a> {
    /// The same record, borrowed.
    pub fn as_ref(&self) -> RecordRef<'_, 'a> {
        RecordRef {
            seq: self.seq,
            time_ns: self.time_ns,
            body: &self.body,
        }
    }

    /// Encodes into `out`; see [`RecordRef::encode`].
    pub fn encode(&self, state: &mut BlockState, out: &mut [u8]) -> Result<usize, NoRoom> {
        self.as_ref().encode(state, out)
    }
}

impl RecordRef<'_, '_> {
    /// Encodes into `out`, updating `state`, and returns the number of bytes used. The kind
    /// byte `out[0]` is left 0 for the caller to commit; see [`crate::block::commit`].
    /// Returns `NoRoom` (and leaves `state` unchanged) if the record does not fit.
    #[inline]
    pub fn encode(&self, state: &mut BlockState, out: &mut [u8]) -> Result<usize, NoRoom> {
        let mut next = *state;
        let n = encode_in_place(self.seq, self.time_ns, &mut next, out, |e, s| {
            self.body.put_fields(e, s)
        })?;
        *state = next;
        Ok(n)
    }
}

/// Encodes a record whose fields `put` writes into `out` (kind byte left 0), updating `state`
/// in place, and returns the bytes used. After `NoRoom`, `state` is unspecified: the block
/// is full and its cursor is not used again. The one encoder behind [`RecordRef::encode`]
/// and the typed path of the writers ([`crate::block::BlockCursor::append_fields`]).
#[inline(always)]
pub(crate) fn encode_in_place(
    seq: Seq,
    time_ns: u64,
    next: &mut BlockState,
    out: &mut [u8],
    put: impl FnOnce(&mut Enc<'_>, &mut BlockState),
) -> Result<usize, NoRoom> {
    {
        // The payload goes at offset 2, after the kind and a one-byte length; a longer
        // length shifts the payload once (rare: only stacks and module records get long).
        let n = {
            let Some(payload_buf) = out.get_mut(2..) else {
                return Err(NoRoom);
            };
            let mut e = Enc::new(payload_buf);
            e.u(seq.0.wrapping_sub(next.seq));
            e.u(time_ns.wrapping_sub(next.time));
            next.seq = seq.0;
            next.time = time_ns;
            put(&mut e, next);
            e.finish().ok_or(NoRoom)?
        };
        if n < 0x80 {
            // The common case: a one-byte length, the payload already in place (and it fit).
            out[0] = 0;
            out[1] = n as u8;
            return Ok(2 + n);
        }
        let mut len_buf = [0u8; MAX_VARINT_LEN];
        let mut le = Enc::new(&mut len_buf);
        le.u(n as u64);
        let len_len = le.finish().ok_or(NoRoom)?;
        let total = 1 + len_len + n;
        if total > out.len() {
            return Err(NoRoom);
        }
        if len_len > 1 {
            out.copy_within(2..2 + n, 1 + len_len);
        }
        out[0] = 0;
        out[1..1 + len_len].copy_from_slice(&len_buf[..len_len]);
        Ok(total)
    }
}

impl<'a> Record<'a> {
    /// Decodes the record at the start of `data` (which begins at file offset `base`).
    /// Returns `Ok(None)` at a zero kind byte (the end of a block's records).
    ///
    /// This reads each field through its kind's [`Fields::get`]: the path that names what is
    /// wrong. The trace reader tries its quicker reader of allocations and frees first
    /// (`crate::quick`, which reads what this reads).
    pub fn decode(
        data: &'a [u8],
        base: u64,
        state: &mut BlockState,
    ) -> Result<Option<(Record<'a>, usize)>, DecodeError> {
        let mut d = Dec::new(data, base);
        let kind = match d.byte() {
            Ok(0) | Err(_) => return Ok(None),
            Ok(k) => k,
        };
        let len_at = d.offset();
        let len = d.u()?;
        let header = (d.offset() - base) as usize;
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if len > data.len() - header {
            return Err(DecodeError::new(len_at, ErrorKind::Truncated("record")));
        }
        let payload = &data[header..header + len];
        let mut p = Dec::new(payload, base + header as u64);
        let overrun = |e: DecodeError| match e.kind {
            ErrorKind::Truncated(_) => DecodeError::new(len_at - 1, ErrorKind::RecordOverrun),
            _ => e,
        };
        let seq = state.seq.wrapping_add(p.u().map_err(overrun)?);
        let time_ns = state.time.wrapping_add(p.u().map_err(overrun)?);
        state.seq = seq;
        state.time = time_ns;
        let rest = &payload[payload.len() - p.remaining()..];
        let body = Body::get_fields(kind, &mut p, state, rest).map_err(overrun)?;
        Ok(Some((
            Record {
                seq: Seq(seq),
                time_ns,
                body,
            },
            header + len,
        )))
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// Readers move every decoded record a few times (into the merge's slot, into a batch):
    /// a kind larger than an allocation's is boxed (`[boxed]` in the list) to keep it small.
    #[test]
    fn a_body_is_no_larger_than_an_allocation_and_its_tag() {
        assert!(std::mem::size_of::<Body<'_>>() <= std::mem::size_of::<Alloc>() + 8);
    }

    pub(crate) fn sample_records() -> Vec<Record<'static>> {
        let frames: Vec<u64> = (0..25).map(|i| 0x5555_0000_1000 + i * 0x40).collect();
        let bodies: Vec<Body<'static>> = vec![
            ProcessInfo {
                pid: 42,
                ppid: 1,
                exe: "/bin/app".into(),
                args: vec!["app".into(), "--x".into()],
                hostname: "h".into(),
                shim_version: "0.1.0".into(),
                unwinder: "dwarf".into(),
                stack_depth: 64,
                start_unix_ns: 1_700_000_000_000_000_000,
            }
            .into(),
            Module {
                base: 0x5555_0000_0000,
                start: 0x5555_0000_0000,
                end: 0x5555_0010_0000,
                path: "/bin/app".into(),
                build_id: Cow::Borrowed(&[1, 2, 3]),
            }
            .into(),
            Stack {
                id: StackId(1),
                frames: Addrs(Cow::Owned(frames)),
            }
            .into(),
            Alloc {
                api: Api::cuMemAlloc_v2,
                via: Api::cudaMalloc,
                result: CuResult::SUCCESS,
                ctx: Ctx(0x1234_5678),
                stream: Stream(0),
                ptr: Ptr(0x7000_0000_0000),
                size: 1 << 20,
                stack: StackId(1),
                aux: 0,
            }
            .into(),
            Free {
                api: Api::cuMemFree_v2,
                via: Api::NONE,
                result: CuResult::SUCCESS,
                stream: Stream(0),
                ptr: Ptr(0x7000_0000_0000),
                size: 0,
                stack: StackId::NONE,
            }
            .into(),
            Map {
                api: Api::cuMemMap,
                result: CuResult(0),
                ptr: Ptr(0x6000_0000_0000),
                size: 2 << 20,
                offset: 0,
                handle: 7,
            }
            .into(),
            CtxCreate {
                api: Api::cuDevicePrimaryCtxRetain,
                result: CuResult(0),
                ctx: Ctx(0x1234_5678),
                device: 0,
                flags: 0,
            }
            .into(),
            Sync {
                api: Api::cuStreamSynchronize,
                result: CuResult(0),
                stream: Stream(0xdead),
                event: Event(0),
                ctx: Ctx(0),
            }
            .into(),
            Launch {
                api: Api::cuLaunchKernel,
                result: CuResult(0),
                stream: Stream(0xdead),
                function: 9,
                ptrs: Addrs(Cow::Owned(vec![1, 2])),
                stack: StackId::NONE,
            }
            .into(),
            MemOp {
                api: Api::cuStreamWaitValue64_v2,
                result: CuResult(0),
                stream: 0xdead,
                op: MemOp::WAIT_64,
                addr: 0x7f00_0000_1000,
                value: u64::MAX - 1,
                flags: 1 << 30,
            }
            .into(),
            Mark {
                name: "step".into(),
                value: 3,
            }
            .into(),
            PyCode {
                id: 1,
                python: 0x030b,
                first_line: 12,
                filename: "/src/train.py".into(),
                qualname: "Model.step".into(),
                line_table: Cow::Owned(vec![0x80, 0x00, 0xd8, 0x04, 0x05]),
            }
            .into(),
            PyFrames {
                stack: StackId(1),
                frames: Addrs(Cow::Owned(vec![3, 1, 24, 5, 1, 0])),
            }
            .into(),
            PoolUsage {
                pool: 0x5150_0000_0001,
                device: 1,
                reserved: 32 << 20,
                used: 3 << 20,
            }
            .into(),
            PoolUsage {
                pool: 0x5150_0000_0002,
                device: -1,
                reserved: 0,
                used: 0,
            }
            .into(),
            PoolCreate {
                api: Api::cuMemPoolCreate,
                via: Api::cudaMemPoolCreate,
                result: CuResult(0),
                pool: 0x5150_0000_0003,
                location_type: 1,
                location: 2,
                max_size: 1 << 30,
                handle_types: 1,
                stack: StackId(1),
            }
            .into(),
            PoolCreate {
                api: Api::cuMemPoolImportFromShareableHandle,
                via: Api::NONE,
                result: CuResult(1),
                pool: 0,
                location_type: 0,
                location: -1,
                max_size: 0,
                handle_types: 1,
                stack: StackId::NONE,
            }
            .into(),
            PoolDestroy {
                api: Api::cuMemPoolDestroy,
                via: Api::NONE,
                result: CuResult(0),
                pool: 0x5150_0000_0003,
                stack: StackId(1),
            }
            .into(),
            GraphMem {
                exec: 0x5ce0_0000_0007,
                allocs: Addrs(Cow::Owned(vec![0x5a00_0000_0000, 4 << 20, 1, 0x5a00_0040_0000, 256, 0])),
                frees: Addrs(Cow::Owned(vec![0x5a00_0040_0000])),
            }
            .into(),
            GraphExec {
                api: Api::cuGraphInstantiateWithFlags,
                via: Api::NONE,
                result: CuResult(0),
                exec: 0x5ce0_0000_0007,
                graph: 0x5ce0_0000_0006,
                flags: GraphExec::AUTO_FREE_ON_LAUNCH,
                alloc_nodes: 2,
                free_nodes: 1,
                nodes_known: 1,
                stack: StackId(1),
            }
            .into(),
            GraphEvents {
                exec: 0x5ce0_0000_0007,
                records: Addrs(Cow::Owned(vec![0x5e00_0000_0001, 0x5ee0_0000_0001, 0])),
                waits: Addrs(Cow::Owned(vec![0x5e00_0000_0002, 0x5ee0_0000_0002, 0x5e00_0000_0003])),
            }
            .into(),
            GraphUpdate {
                api: Api::cuGraphExecUpdate_v2,
                via: Api::NONE,
                result: CuResult(0),
                what: GraphUpdate::GRAPH,
                exec: 0x5ce0_0000_0007,
                node: 0,
                event: 0,
                graph: 0x5ce0_0000_0008,
                listed: 1,
            }
            .into(),
            GraphAccesses {
                exec: 0x5ce0_0000_0007,
                nodes: Addrs(Cow::Owned(vec![
                    0x5e00_0000_0004,
                    0,
                    0x7f00_0000_0000,
                    GraphAccesses::encode(1, GraphAccesses::KERNEL),
                    0x5e00_0000_0005,
                    0x5e00_0000_0003,
                    0,
                    0,
                ])),
            }
            .into(),
            GraphNode {
                api: Api::cuLaunchKernel,
                graph: 0x5ce0_0000_0006,
                node: 0x5e00_0000_0004,
                kind: GraphNode::KERNEL,
                stack: StackId(1),
            }
            .into(),
            GraphEdges {
                exec: 0x5ce0_0000_0007,
                entries: Addrs(Cow::Owned(vec![
                    GraphEdges::EDGE,
                    0x5e00_0000_0004,
                    0x5e00_0000_0005,
                    GraphEdges::CHILD,
                    0x5e00_0000_0003,
                    0x5e00_0000_0006,
                ])),
            }
            .into(),
            ExtSemaphore {
                api: Api::cuImportExternalSemaphore,
                result: CuResult(0),
                semaphore: 0x5e5e_0000_0001,
                handle_type: 9,
                flags: 0,
                stack: StackId(1),
            }
            .into(),
            ExtSemaphoreOp {
                api: Api::cuWaitExternalSemaphoresAsync_ptsz,
                result: CuResult(0),
                stream: 0xdead,
                semaphore: 0x5e5e_0000_0001,
                value: u64::MAX - 3,
                key: 7,
                flags: 1,
            }
            .into(),
            RangeOp {
                api: Api::cuMemPrefetchBatchAsync_ptsz,
                result: CuResult(0),
                stream: 0x5100,
                ptr: 0x7f00_0000_1000,
                bytes: u64::MAX,
                location: MemLocation::encode(1, 3),
                stack: StackId(2),
            }
            .into(),
            Checkpoint {
                as_of: 1 << 40,
                segment: 3,
                kept: 12,
                dropped: 1_000_000,
                missing: 0,
                counts: Addrs(Cow::Owned(vec![16, 5, Checkpoint::FAILED, 7, 17, 9, 0, 999_993])),
            }
            .into(),
            SiteHistory {
                series: SiteHistory::SITE,
                key: 3,
                api: Api::cuMemAlloc_v2,
                events: 1 << 33,
                width: 1 << 26,
                first: 1,
                high: 40 << 20,
                high_seq: 0,
                high_time_ns: 0,
                totals: Addrs(Cow::Owned(vec![40, 0, 40 << 20, 40 << 20, 0, 0])),
                points: Addrs(Cow::Owned(vec![1 << 20, 2 << 20, 2 << 20, 2 << 20, 40 << 20, 40 << 20])),
            }
            .into(),
            Rank {
                rank: 7,
                local_rank: Rank::UNKNOWN,
                world_size: 8,
                launcher: "torchrun".into(),
            }
            .into(),
            LibWorkspace {
                library: LibWorkspace::CUBLAS,
                ptr: 0x7f00_0200_0000,
                size: 32 << 20,
            }
            .into(),
            FrameworkState {
                id: 1,
                layout: crate::framework::LAYOUT,
                framework: "torch".into(),
                reason: "exit".into(),
                snapshot: 0,
            }
            .into(),
            FrameworkSegment {
                state: 1,
                device: 0,
                address: 0x7f00_0020_0000,
                size: 2 << 20,
                stream: 0,
                pool: 1,
            }
            .into(),
            FrameworkBlocks {
                state: 1,
                segment: 0x7f00_0020_0000,
                blocks: Addrs(Cow::Owned(vec![
                    0,
                    512,
                    400,
                    1,
                    1,
                    512,
                    (2 << 20) - 512,
                    (2 << 20) - 512,
                    3,
                    0,
                ])),
            }
            .into(),
            FrameworkFrames {
                id: 1,
                state: 1,
                names: vec!["train.py".into(), "step".into()],
                lines: Addrs(Cow::Owned(vec![18])),
            }
            .into(),
            FrameworkStats {
                state: 1,
                device: 0,
                allocated: 512,
                reserved: 2 << 20,
                peak_reserved: 4 << 20,
            }
            .into(),
            FrameworkOom {
                state: 1,
                device: -1,
                requested: u64::MAX,
                device_allocated: 1,
                device_free: 0,
            }
            .into(),
            FrameworkEnd {
                state: 1,
                segments: 1,
                blocks: 2,
            }
            .into(),
            HostFnQueued {
                api: Api::cuLaunchHostFunc_v2_ptsz,
                result: CuResult(0),
                stream: 0x5100,
                id: u64::MAX,
            }
            .into(),
            HostFnRan { id: 1 }.into(),
            Thread { tid: u32::MAX }.into(),
            Exit { code: -1, how: 0 }.into(),
        ];
        bodies
            .into_iter()
            .enumerate()
            .map(|(i, body)| Record {
                seq: Seq(i as u64 * 3),
                time_ns: i as u64 * 1000,
                body,
            })
            .collect()
    }

    /// Appends `r` through the typed path where its body type is one the test names.
    fn append_typed(c: &mut crate::BlockCursor, block: &mut [u8], r: &Record<'_>) -> Result<(), NoRoom> {
        match &r.body {
            Body::Launch(b) => c.append_fields(block, r.seq, r.time_ns, b),
            Body::Mark(b) => c.append_fields(block, r.seq, r.time_ns, b),
            Body::Stack(b) => c.append_fields(block, r.seq, r.time_ns, b),
            Body::Sync(b) => c.append_fields(block, r.seq, r.time_ns, b),
            Body::ProcessInfo(b) => c.append_fields(block, r.seq, r.time_ns, &**b),
            other => panic!("no typed case for {}", other.name()),
        }
    }

    #[test]
    fn pool_and_graph_records_round_trip_and_a_truncated_one_is_an_error_never_a_panic() {
        for r in sample_records().into_iter().filter(|r| {
            matches!(
                r.body,
                Body::PoolUsage(_)
                    | Body::PoolCreate(_)
                    | Body::PoolDestroy(_)
                    | Body::GraphMem(_)
                    | Body::GraphExec(_)
                    | Body::GraphEvents(_)
                    | Body::GraphUpdate(_)
                    | Body::GraphAccesses(_)
                    | Body::GraphNode(_)
                    | Body::GraphEdges(_)
                    | Body::ExtSemaphore(_)
                    | Body::ExtSemaphoreOp(_)
                    | Body::HostFnQueued(_)
                    | Body::HostFnRan(_)
            )
        }) {
            let mut buf = vec![0u8; 128];
            let n = r.encode(&mut BlockState::default(), &mut buf).unwrap();
            buf[0] = r.body.kind();
            buf[n] = 0;
            let (back, used) = Record::decode(&buf[..n + 1], 0, &mut BlockState::default())
                .unwrap()
                .unwrap();
            assert_eq!((back, used), (r.clone(), n));
            for cut in 0..(n - 2) {
                let mut short = buf[..n].to_vec();
                short[1] = cut as u8;
                short.truncate(2 + cut);
                short.push(0);
                let got = Record::decode(&short, 100, &mut BlockState::default());
                assert!(got.is_err(), "{} cut to {cut} bytes decoded: {got:?}", r.body.name());
            }
        }
    }

    #[test]
    fn truncated_python_records_are_errors_with_an_offset_never_panics() {
        for r in sample_records()
            .into_iter()
            .filter(|r| matches!(r.body, Body::PyCode(_) | Body::PyFrames(_)))
        {
            let mut buf = vec![0u8; 256];
            let n = r.encode(&mut BlockState::default(), &mut buf).unwrap();
            buf[0] = r.body.kind();
            // Every shorter payload length (the record's own length byte says less than the
            // fields need) is an error, never a panic or a wrong record.
            for cut in 0..(n - 2) {
                assert!(n < 128 + 2, "one length byte");
                let mut short = buf[..n].to_vec();
                short[1] = cut as u8;
                short.truncate(2 + cut);
                short.push(0);
                let got = Record::decode(&short, 100, &mut BlockState::default());
                let err = got.expect_err(&format!("{} cut to {cut} bytes decoded", r.body.name()));
                assert!(err.offset >= 100, "{err:?}");
            }
        }
    }

    #[test]
    fn typed_appends_write_the_bytes_of_body_appends_up_to_a_full_block() {
        let typed: Vec<Record<'static>> = sample_records()
            .into_iter()
            .filter(|r| {
                matches!(
                    r.body,
                    Body::Launch(_) | Body::Mark(_) | Body::Stack(_) | Body::Sync(_) | Body::ProcessInfo(_)
                )
            })
            .collect();
        assert!(
            typed.iter().any(|r| matches!(r.body, Body::Stack(_))),
            "a record with a multi-byte length"
        );
        let mut a = vec![0u8; crate::BLOCK_SIZE];
        let mut b = vec![0u8; crate::BLOCK_SIZE];
        let mut ca = crate::BlockCursor::start(&mut a, 7, 0, 0);
        let mut cb = crate::BlockCursor::start(&mut b, 7, 0, 0);
        let mut appended = 0;
        for (i, r) in typed.iter().cycle().enumerate() {
            let r = Record {
                seq: Seq(i as u64 + 1),
                time_ns: i as u64 * 7,
                body: r.body.clone(),
            };
            let ra = ca.append(&mut a, &r);
            let rb = append_typed(&mut cb, &mut b, &r);
            assert_eq!(ra, rb, "record {i}");
            if ra.is_err() {
                break;
            }
            appended += 1;
        }
        assert!(appended > 100, "{appended}");
        assert_eq!(ca.pos, cb.pos);
        assert!(a == b, "the two blocks differ");
    }

    #[test]
    fn every_sample_round_trips_in_one_buffer() {
        let recs = sample_records();
        let mut buf = vec![0u8; 4096];
        let mut st = BlockState::default();
        let mut pos = 0;
        for r in &recs {
            let n = r.encode(&mut st, &mut buf[pos..]).unwrap();
            buf[pos] = r.body.kind();
            pos += n;
        }
        let mut st = BlockState::default();
        let mut pos2 = 0;
        let mut out = Vec::new();
        while let Some((r, n)) = Record::decode(&buf[pos2..], pos2 as u64, &mut st).unwrap() {
            out.push(r);
            pos2 += n;
        }
        assert_eq!(pos2, pos);
        assert_eq!(out, recs);
    }

    #[test]
    fn a_graph_node_location_is_read_from_both_shims() {
        assert_eq!(GraphMem::location(MemLocation::encode(1, 2)), MemLocation::Device(2));
        assert_eq!(GraphMem::location(MemLocation::encode(3, 1)), MemLocation::Host);
        assert_eq!(GraphMem::location(MemLocation::encode(9, 0)), MemLocation::Unknown);
        assert_eq!(
            GraphMem::location(0),
            MemLocation::Device(0),
            "the first shims: a bare ordinal"
        );
        assert_eq!(GraphMem::location(3), MemLocation::Device(3));
        assert_eq!(GraphMem::location(u64::from(u32::MAX)), MemLocation::Device(-1));
    }

    #[test]
    fn what_outlives_a_launch_leaves_out_what_the_graph_frees_itself() {
        let (allocs, frees) = GraphMem::lasting(&[0x10, 64, 0, 0x20, 32, 0, 0x30], &[0x20, 0x99]);
        assert_eq!(
            allocs,
            [[0x10, 64, 0]],
            "0x20 is freed within the launch; 0x30 is partial"
        );
        assert_eq!(frees, [0x99], "0x20 is the graph's own");
    }

    #[test]
    fn no_room_leaves_state_untouched() {
        let recs = sample_records();
        let mut st = BlockState::default();
        let before = st;
        let mut tiny = [0u8; 8];
        assert_eq!(recs[2].encode(&mut st, &mut tiny), Err(NoRoom));
        assert_eq!(st, before);
    }

    /// Every kind from 43 on, met by a reader that does not know it (its kind byte replaced by
    /// one no reader knows), is skipped without changing how the records after it decode.
    #[test]
    fn kinds_added_later_can_be_skipped_by_readers_that_do_not_know_them() {
        let around = |seq: u64, ptr: u64| Record {
            seq: Seq(seq),
            time_ns: seq,
            body: Alloc {
                api: Api::cuMemAllocAsync,
                via: Api::NONE,
                result: CuResult(0),
                ctx: Ctx(0x5c00_0000_0000 + ptr),
                stream: Stream(0x5d00_0000_0000 + ptr),
                ptr: Ptr(0x7000_0000_0000 + ptr),
                size: 4096,
                stack: StackId::NONE,
                aux: 0,
            }
            .into(),
        };
        let later: Vec<Record<'static>> = sample_records().into_iter().filter(|r| r.body.kind() >= 43).collect();
        assert!(later.iter().any(|r| r.body.kind() == MemOp::KIND));
        for r in later {
            let mut buf = vec![0u8; 4096];
            let mut st = BlockState::default();
            let mut at = 0;
            let mut starts = vec![];
            for rec in [around(1, 0x100), r.clone(), around(3, 0x900)] {
                starts.push(at);
                at += rec.encode(&mut st, &mut buf[at..]).unwrap();
            }
            for (i, rec) in [&around(1, 0x100), &r, &around(3, 0x900)].iter().enumerate() {
                buf[starts[i]] = rec.body.kind();
            }
            buf[starts[1]] = 250;
            let mut st = BlockState::default();
            let mut at = 0;
            let mut seen = vec![];
            while let Some((rec, n)) = Record::decode(&buf[at..], at as u64, &mut st).unwrap() {
                seen.push(rec);
                at += n;
            }
            assert_eq!(seen.len(), 3, "{}", r.body.name());
            assert_eq!(seen[1].body.kind(), 250);
            assert_eq!(seen[2], around(3, 0x900), "after an unknown {}", r.body.name());
        }
    }

    #[test]
    fn unknown_kinds_are_skipped_by_length() {
        let mut buf = vec![0u8; 64];
        let mut st = BlockState::default();
        let unknown = Record {
            seq: Seq(1),
            time_ns: 5,
            body: Body::Unknown {
                kind: 200,
                payload: &[9, 9, 9],
            },
        };
        let n = unknown.encode(&mut st, &mut buf).unwrap();
        buf[0] = 200;
        let mark = Record {
            seq: Seq(2),
            time_ns: 6,
            body: Mark {
                name: "m".into(),
                value: 1,
            }
            .into(),
        };
        let m = mark.encode(&mut st, &mut buf[n..]).unwrap();
        buf[n] = Mark::KIND;
        let mut st = BlockState::default();
        let (a, an) = Record::decode(&buf, 0, &mut st).unwrap().unwrap();
        assert_eq!(
            a.body,
            Body::Unknown {
                kind: 200,
                payload: &[9, 9, 9]
            }
        );
        let (b, bn) = Record::decode(&buf[an..], an as u64, &mut st).unwrap().unwrap();
        assert_eq!(b, mark);
        assert_eq!(an + bn, n + m);
    }

    #[test]
    fn steady_churn_costs_under_16_bytes_per_event() {
        let mut buf = vec![0u8; 1 << 16];
        let mut st = BlockState::default();
        let mut pos = 0;
        let mut seq = 0;
        let events = 2000u64;
        for i in 0..events / 2 {
            let ptr = Ptr(0x7000_0000_0000 + (i % 7) * (1 << 20));
            for body in [
                Body::Alloc(Alloc {
                    api: Api::cuMemAlloc_v2,
                    via: Api::NONE,
                    result: CuResult(0),
                    ctx: Ctx(0x5555_1234_0000),
                    stream: Stream(0),
                    ptr,
                    size: 1 << 20,
                    stack: StackId(3 + (i % 5) as u32),
                    aux: 0,
                }),
                Body::Free(Free {
                    api: Api::cuMemFree_v2,
                    via: Api::NONE,
                    result: CuResult(0),
                    stream: Stream(0),
                    ptr,
                    size: 0,
                    stack: StackId::NONE,
                }),
            ] {
                seq += 3;
                let r = Record {
                    seq: Seq(seq),
                    time_ns: seq * 150,
                    body,
                };
                pos += r.encode(&mut st, &mut buf[pos..]).unwrap();
            }
        }
        let per_event = pos as f64 / events as f64;
        assert!(per_event < 16.0, "{per_event} bytes per event");
    }
}
