//! The exact API entry points a record can name, by stable number, and what each one means.
//!
//! Numbers are part of the format: append new entries, never renumber or reuse one. A reader
//! that meets a number it does not know still decodes the record and shows `api#N`.
//!
//! The list below is the one place an entry point is declared. Each line is
//! `NUMBER NAME (MEANING)`, and MEANING is one of
//!
//! - `OP` and flags: a driver entry point that does [`Op`] `OP` (`Alloc(KIND)`, `Free(KIND)`,
//!   `Copy(DST, SRC)` or an operation's name), flagged `async`, `peer`, `context_wide`,
//!   `batch` or `synchronizing` as [`Meaning`]'s fields say;
//! - `per_thread BASE`: the per-thread twin (`_ptsz` / `_ptds`) of `BASE`, which means what
//!   `BASE` means but reads stream 0 as the per-thread default stream;
//! - `runtime`: a runtime entry point (only ever a record's `via` tag).
//!
//! The accessors ([`Api::op`], [`Api::per_thread`], [`Api::base`], [`Api::mem_kind`], ...)
//! are `const` lookups. The analyzer derives what a record means from them; the shim's hook
//! table and the simulator's resolver rows are checked against them (the shim's rows at
//! compile time and by its tests, the simulator's by `tests/e2e/sim/resolver.rs`).

use std::fmt;

use crate::kind::MemKind;
use crate::meaning::{Family, Library, Op, Side};

/// One exact exported function variant (`cuMemAlloc_v2`, `cuMemFreeAsync_ptsz`,
/// `cudaMalloc`, ...), as a stable number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Api(pub u16);

/// What one entry point means, as the API list declares it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Meaning {
    /// The library that exports it.
    pub library: Library,
    /// What it does.
    pub op: Op,
    /// Stream-ordered: it queues work on a stream and returns before the work runs.
    pub asynchronous: bool,
    /// A copy between contexts (a peer copy).
    pub peer: bool,
    /// Its `stream` is a context or green context: an event recorded over all the context's
    /// work, or a wait of all its later work.
    pub context_wide: bool,
    /// A copy whose operations carry a batch's attributes (batch and attribute copies),
    /// which never waits for the host.
    pub batch: bool,
    /// A free that waits for the device first (`cudaFree` and `cudaFreeHost` are documented
    /// to synchronize; their driver calls are these).
    pub synchronizing: bool,
    /// The entry point a per-thread twin is of; the entry point itself otherwise.
    pub base: Api,
    /// A per-thread twin (`_ptsz` / `_ptds`): of a stream-ordered call, one that reads stream
    /// handle 0 as the calling thread's per-thread default stream; of the resolver, one that
    /// answers per-thread variants by default.
    pub per_thread: bool,
}

impl Meaning {
    /// An ordinary (not per-thread) entry point of `library` that does `op`.
    pub const fn new(api: Api, library: Library, op: Op) -> Meaning {
        Meaning {
            library,
            op,
            asynchronous: false,
            peer: false,
            context_wide: false,
            batch: false,
            synchronizing: false,
            base: api,
            per_thread: false,
        }
    }

    /// The per-thread twin of `base`, which means `of`: the same in all but the default stream.
    pub const fn per_thread_twin(base: Api, of: Meaning) -> Meaning {
        Meaning {
            base,
            per_thread: true,
            ..of
        }
    }
}

/// The accessors of [`Meaning`]'s flags (`name: field`), each `false` for a number this
/// reader does not know.
macro_rules! flags {
    ($($(#[$doc:meta])* $name:ident: $field:ident,)*) => {
        $(
            $(#[$doc])*
            #[inline]
            pub const fn $name(self) -> bool {
                matches!(self.meaning(), Some(m) if m.$field)
            }
        )*
    };
}

macro_rules! apis {
    ($($id:literal $name:ident ($($meaning:tt)*)),* $(,)?) => {
        #[allow(non_upper_case_globals)]
        impl Api {
            /// No API (a record that was not made by an intercepted call).
            pub const NONE: Api = Api(0);
            $(
                #[doc = concat!("`", stringify!($name), "`: ", stringify!($($meaning)*), ".")]
                pub const $name: Api = Api($id);
            )*
            /// Every known API with its exported symbol name.
            pub const ALL: &'static [(Api, &'static str)] = &[$((Api($id), stringify!($name))),*];

            /// What the entry point means, as the list declares it; `None` for a number this
            /// reader does not know.
            #[inline]
            pub const fn meaning(self) -> Option<Meaning> {
                // One past the highest number declared.
                const LEN: usize = {
                    let mut len = 0;
                    $(if $id + 1 > len { len = $id + 1; })*
                    len
                };
                // Every meaning worked out at compile time (a twin's from its base's), by
                // number: asking costs one load, where a `match` of the numbers compiled to
                // a jump to one of hundreds of arms.
                const TABLE: [Option<Meaning>; LEN] = {
                    let mut table = [None; LEN];
                    $(table[$id] = Api($id).declared();)*
                    table
                };
                let i = self.0 as usize;
                if i < LEN {
                    TABLE[i]
                } else {
                    None
                }
            }

            /// The meaning as declared, worked out each time (see [`Api::meaning`]).
            const fn declared(self) -> Option<Meaning> {
                match self.0 {
                    $($id => Some(meaning!(Api($id); $($meaning)*)),)*
                    _ => None,
                }
            }
        }
    };
}

/// One entry's meaning, in the list's syntax: `per_thread BASE`, `runtime`, or an [`Op`]
/// followed by flags.
macro_rules! meaning {
    ($api:expr; per_thread $base:ident) => {
        match Api::$base.declared() {
            Some(of) => Meaning::per_thread_twin(Api::$base, of),
            None => panic!("a per-thread twin's base is not in the list"),
        }
    };
    ($api:expr; runtime) => {
        Meaning::new($api, Library::Runtime, Op::RuntimeCall)
    };
    ($api:expr; $op:ident $(($($arg:ident),*))? $(, $flag:ident)*) => {{
        #[allow(unused_mut)]
        let mut m = Meaning::new($api, Library::Driver, op!($op $(($($arg),*))?));
        $(flag!(m, $flag);)*
        m
    }};
}

/// An [`Op`] in the list's syntax: `Alloc(KIND)`, `Free(KIND)`, `Copy(DST, SRC)`, or its name.
macro_rules! op {
    (Alloc($kind:ident)) => {
        Op::Alloc(MemKind::$kind)
    };
    (Free($kind:ident)) => {
        Op::Free(MemKind::$kind)
    };
    (Copy($dst:ident, $src:ident)) => {
        Op::Copy {
            dst: Side::$dst,
            src: Side::$src,
        }
    };
    ($op:ident) => {
        Op::$op
    };
}

/// Sets one flag of the list's syntax on a [`Meaning`].
macro_rules! flag {
    ($m:ident, async) => {
        $m.asynchronous = true
    };
    ($m:ident, peer) => {
        $m.peer = true
    };
    ($m:ident, context_wide) => {
        $m.context_wide = true
    };
    ($m:ident, batch) => {
        $m.batch = true
    };
    ($m:ident, synchronizing) => {
        $m.synchronizing = true
    };
}

apis! {
    // Device memory.
    1 cuMemAlloc_v2 (Alloc(Device)),
    2 cuMemAllocPitch_v2 (Alloc(Device)),
    3 cuMemAllocManaged (Alloc(Managed)),
    4 cuMemFree_v2 (Free(Device), synchronizing),
    // Host pinned memory.
    5 cuMemAllocHost_v2 (Alloc(Host)),
    6 cuMemHostAlloc (Alloc(Host)),
    7 cuMemFreeHost (Free(Host), synchronizing),
    8 cuMemHostRegister_v2 (Alloc(HostRegistered)),
    9 cuMemHostUnregister (Free(HostRegistered)),
    // Stream-ordered memory.
    10 cuMemAllocAsync (Alloc(Async), async),
    11 cuMemAllocAsync_ptsz (per_thread cuMemAllocAsync),
    12 cuMemAllocFromPoolAsync (Alloc(Async), async),
    13 cuMemAllocFromPoolAsync_ptsz (per_thread cuMemAllocFromPoolAsync),
    14 cuMemFreeAsync (Free(Async), async),
    15 cuMemFreeAsync_ptsz (per_thread cuMemFreeAsync),
    // Virtual memory management.
    16 cuMemAddressReserve (Alloc(VmmReserve)),
    17 cuMemAddressFree (Free(VmmReserve)),
    18 cuMemCreate (Alloc(VmmPhysical)),
    19 cuMemRelease (Free(VmmPhysical)),
    20 cuMemMap (Map),
    21 cuMemUnmap (Unmap),
    // Arrays and IPC.
    22 cuArrayCreate_v2 (Alloc(Array)),
    23 cuArray3DCreate_v2 (Alloc(Array)),
    24 cuArrayDestroy (Free(Array)),
    25 cuIpcOpenMemHandle_v2 (Alloc(Ipc)),
    26 cuIpcCloseMemHandle (Free(Ipc)),
    27 cuMipmappedArrayCreate (Alloc(Array)),
    28 cuMipmappedArrayDestroy (Free(Array)),
    29 cuIpcOpenMemHandle (Alloc(Ipc)),
    // Handle references (added later): a retained reference to a mapped physical handle, a
    // physical handle imported from another process, a multicast object.
    30 cuMemRetainAllocationHandle (Alloc(VmmPhysical)),
    31 cuMemImportFromShareableHandle (Alloc(VmmImport)),
    32 cuMulticastCreate (Alloc(Multicast)),
    // A pointer imported from another process's memory pool, freed by cuMemFree[Async].
    33 cuMemPoolImportPointer (Alloc(PoolImport)),
    // Stream-ordered memory pools themselves (PoolCreate, PoolDestroy records): a pool created,
    // a pool imported from another process, a pool destroyed.
    34 cuMemPoolCreate (PoolCreate),
    35 cuMemPoolImportFromShareableHandle (PoolCreate),
    36 cuMemPoolDestroy (PoolDestroy),
    // Graph memory: an allocation node added to a graph by hand (an `Alloc` record of the node,
    // not memory: each launch of the instantiated graph allocates at its address).
    37 cuGraphAddMemAllocNode (Alloc(Graph)),
    // The generic node constructors (CUDA 12.2 and 12.3): an `Alloc` record like the above
    // when the node they add is an allocation node; nothing otherwise.
    38 cuGraphAddNode (Alloc(Graph)),
    39 cuGraphAddNode_v2 (Alloc(Graph)),
    // Contexts.
    40 cuCtxCreate_v2 (CtxCreate),
    41 cuCtxCreate_v3 (CtxCreate),
    42 cuCtxCreate_v4 (CtxCreate),
    43 cuCtxDestroy_v2 (CtxDestroy),
    44 cuDevicePrimaryCtxRetain (CtxCreate),
    45 cuDevicePrimaryCtxRelease_v2 (CtxDestroy),
    46 cuDevicePrimaryCtxReset_v2 (CtxDestroy),
    47 cuCtxSynchronize (CtxSync),
    48 cuCtxSynchronize_v2 (CtxSync),
    49 cuDevicePrimaryCtxRelease (CtxDestroy),
    50 cuDevicePrimaryCtxReset (CtxDestroy),
    // Streams and events (recorded by the stream-ordering checks).
    60 cuStreamCreate (StreamCreate),
    61 cuStreamCreateWithPriority (StreamCreate),
    62 cuStreamDestroy_v2 (StreamDestroy),
    63 cuStreamSynchronize (StreamSync),
    64 cuStreamSynchronize_ptsz (per_thread cuStreamSynchronize),
    65 cuStreamQuery (StreamQuery),
    66 cuStreamQuery_ptsz (per_thread cuStreamQuery),
    67 cuStreamWaitEvent (StreamWait, async),
    68 cuStreamWaitEvent_ptsz (per_thread cuStreamWaitEvent),
    69 cuEventCreate (EventCreate),
    70 cuEventDestroy_v2 (EventDestroy),
    71 cuEventRecord (EventRecord, async),
    72 cuEventRecord_ptsz (per_thread cuEventRecord),
    73 cuEventRecordWithFlags (EventRecord, async),
    74 cuEventRecordWithFlags_ptsz (per_thread cuEventRecordWithFlags),
    75 cuEventSynchronize (EventSync),
    76 cuEventQuery (EventQuery),
    77 cuStreamAddCallback (HostFunc, async),
    78 cuStreamAddCallback_ptsz (per_thread cuStreamAddCallback),
    79 cuLaunchHostFunc (HostFunc, async),
    80 cuLaunchHostFunc_ptsz (per_thread cuLaunchHostFunc),
    81 cuStreamBeginCapture_v2 (CaptureBegin),
    82 cuStreamBeginCapture_v2_ptsz (per_thread cuStreamBeginCapture_v2),
    83 cuStreamEndCapture (CaptureEnd),
    84 cuStreamEndCapture_ptsz (per_thread cuStreamEndCapture),
    85 cuStreamDestroy (StreamDestroy),
    86 cuEventDestroy (EventDestroy),
    87 cuStreamBeginCapture (CaptureBegin),
    88 cuStreamBeginCapture_ptsz (per_thread cuStreamBeginCapture),
    // Copies, memsets, launches.
    100 cuMemcpy (Copy(Unified, Unified)),
    101 cuMemcpyAsync (Copy(Unified, Unified), async),
    102 cuMemcpyHtoD_v2 (Copy(Device, Host)),
    103 cuMemcpyDtoH_v2 (Copy(Host, Device)),
    104 cuMemcpyDtoD_v2 (Copy(Device, Device)),
    105 cuMemcpyHtoDAsync_v2 (Copy(Device, Host), async),
    106 cuMemcpyDtoHAsync_v2 (Copy(Host, Device), async),
    107 cuMemcpyDtoDAsync_v2 (Copy(Device, Device), async),
    108 cuMemsetD8_v2 (Memset),
    109 cuMemsetD32_v2 (Memset),
    110 cuMemsetD8Async (Memset, async),
    111 cuMemsetD32Async (Memset, async),
    112 cuLaunchKernel (KernelLaunch, async),
    113 cuLaunchKernel_ptsz (per_thread cuLaunchKernel),
    114 cuMemcpy_ptds (per_thread cuMemcpy),
    115 cuMemcpyAsync_ptsz (per_thread cuMemcpyAsync),
    116 cuMemcpyHtoD_v2_ptds (per_thread cuMemcpyHtoD_v2),
    117 cuMemcpyDtoH_v2_ptds (per_thread cuMemcpyDtoH_v2),
    118 cuMemcpyDtoD_v2_ptds (per_thread cuMemcpyDtoD_v2),
    119 cuMemcpyHtoDAsync_v2_ptsz (per_thread cuMemcpyHtoDAsync_v2),
    120 cuMemcpyDtoHAsync_v2_ptsz (per_thread cuMemcpyDtoHAsync_v2),
    121 cuMemcpyDtoDAsync_v2_ptsz (per_thread cuMemcpyDtoDAsync_v2),
    122 cuMemsetD8_v2_ptds (per_thread cuMemsetD8_v2),
    123 cuMemsetD32_v2_ptds (per_thread cuMemsetD32_v2),
    124 cuMemsetD8Async_ptsz (per_thread cuMemsetD8Async),
    125 cuMemsetD32Async_ptsz (per_thread cuMemsetD32Async),
    126 cuMemsetD16_v2 (Memset),
    127 cuMemsetD16_v2_ptds (per_thread cuMemsetD16_v2),
    128 cuMemsetD16Async (Memset, async),
    129 cuMemsetD16Async_ptsz (per_thread cuMemsetD16Async),
    // Resolvers.
    150 cuGetProcAddress (Resolve),
    151 cuGetProcAddress_v2 (Resolve),
    152 cuGetProcAddress_v2_ptsz (per_thread cuGetProcAddress_v2),
    // Runtime entry points (only ever a record's `via` tag).
    200 cudaMalloc (runtime),
    201 cudaFree (runtime),
    202 cudaMallocAsync (runtime),
    203 cudaFreeAsync (runtime),
    204 cudaMallocManaged (runtime),
    205 cudaMallocHost (runtime),
    206 cudaHostAlloc (runtime),
    207 cudaFreeHost (runtime),
    208 cudaMallocPitch (runtime),
    209 cudaMallocFromPoolAsync (runtime),
    210 cudaDeviceReset (runtime),
    211 cudaGetDriverEntryPoint (runtime),
    212 cudaGetDriverEntryPointByVersion (runtime),
    // Stream-ordering entry points added after the first release (Copy, Launch records).
    213 cuLaunchKernelEx (KernelLaunch, async),
    214 cuLaunchKernelEx_ptsz (per_thread cuLaunchKernelEx),
    215 cuGraphLaunch (GraphLaunch, async),
    216 cuGraphLaunch_ptsz (per_thread cuGraphLaunch),
    217 cuMemcpy2D_v2 (Copy(Unified, Unified)),
    218 cuMemcpy2D_v2_ptds (per_thread cuMemcpy2D_v2),
    219 cuMemcpy2DUnaligned_v2 (Copy(Unified, Unified)),
    220 cuMemcpy2DUnaligned_v2_ptds (per_thread cuMemcpy2DUnaligned_v2),
    221 cuMemcpy2DAsync_v2 (Copy(Unified, Unified), async),
    222 cuMemcpy2DAsync_v2_ptsz (per_thread cuMemcpy2DAsync_v2),
    223 cuMemcpy3D_v2 (Copy(Unified, Unified)),
    224 cuMemcpy3D_v2_ptds (per_thread cuMemcpy3D_v2),
    225 cuMemcpy3DAsync_v2 (Copy(Unified, Unified), async),
    226 cuMemcpy3DAsync_v2_ptsz (per_thread cuMemcpy3DAsync_v2),
    227 cuLaunchHostFunc_v2 (HostFunc, async),
    228 cuLaunchHostFunc_v2_ptsz (per_thread cuLaunchHostFunc_v2),
    // Runtime entry points added later (a record's `via` tag).
    229 cudaMemPoolImportPointer (runtime),
    230 cudaIpcOpenMemHandle (runtime),
    231 cudaIpcCloseMemHandle (runtime),
    232 cudaMemPoolCreate (runtime),
    233 cudaMemPoolImportFromShareableHandle (runtime),
    234 cudaMemPoolDestroy (runtime),
    // Graph instantiation (GraphExec records).
    235 cuGraphInstantiate (GraphInstantiate),
    236 cuGraphInstantiate_v2 (GraphInstantiate),
    237 cuGraphInstantiateWithFlags (GraphInstantiate),
    238 cuGraphInstantiateWithParams (GraphInstantiate),
    239 cuGraphInstantiateWithParams_ptsz (per_thread cuGraphInstantiateWithParams),
    // Runtime entry points added later (a record's `via` tag): the per-thread default stream
    // variants, arrays, host registration, graph memory nodes and instantiation.
    240 cudaMallocAsync_ptsz (per_thread cudaMallocAsync),
    241 cudaFreeAsync_ptsz (per_thread cudaFreeAsync),
    242 cudaMallocFromPoolAsync_ptsz (per_thread cudaMallocFromPoolAsync),
    243 cudaMallocArray (runtime),
    244 cudaMalloc3DArray (runtime),
    245 cudaMallocMipmappedArray (runtime),
    246 cudaMalloc3D (runtime),
    247 cudaFreeArray (runtime),
    248 cudaFreeMipmappedArray (runtime),
    249 cudaHostRegister (runtime),
    250 cudaHostUnregister (runtime),
    251 cudaGraphAddMemAllocNode (runtime),
    252 cudaGraphAddNode (runtime),
    253 cudaGraphAddNode_v2 (runtime),
    254 cudaGraphInstantiate (runtime),
    255 cudaGraphInstantiateWithFlags (runtime),
    256 cudaGraphInstantiateWithParams (runtime),
    257 cudaGraphInstantiateWithParams_ptsz (per_thread cudaGraphInstantiateWithParams),
    // A pool trimmed (no record of its own: the shim samples the pool at once, a PoolUsage).
    258 cuMemPoolTrimTo (PoolTrim),
    // A capture into the program's own graph (12.3; Capture records).
    259 cuStreamBeginCaptureToGraph (CaptureBegin),
    260 cuStreamBeginCaptureToGraph_ptsz (per_thread cuStreamBeginCaptureToGraph),
    // Stream memory operations (MemOp records): waits on and writes of 32- and 64-bit values,
    // and batches of them; the first ABI (CUDA 8 and 9) and `_v2` (11.7), each with `_ptsz`.
    261 cuStreamWaitValue32 (WaitValue, async),
    262 cuStreamWaitValue32_ptsz (per_thread cuStreamWaitValue32),
    263 cuStreamWaitValue32_v2 (WaitValue, async),
    264 cuStreamWaitValue32_v2_ptsz (per_thread cuStreamWaitValue32_v2),
    265 cuStreamWaitValue64 (WaitValue, async),
    266 cuStreamWaitValue64_ptsz (per_thread cuStreamWaitValue64),
    267 cuStreamWaitValue64_v2 (WaitValue, async),
    268 cuStreamWaitValue64_v2_ptsz (per_thread cuStreamWaitValue64_v2),
    269 cuStreamWriteValue32 (WriteValue, async),
    270 cuStreamWriteValue32_ptsz (per_thread cuStreamWriteValue32),
    271 cuStreamWriteValue32_v2 (WriteValue, async),
    272 cuStreamWriteValue32_v2_ptsz (per_thread cuStreamWriteValue32_v2),
    273 cuStreamWriteValue64 (WriteValue, async),
    274 cuStreamWriteValue64_ptsz (per_thread cuStreamWriteValue64),
    275 cuStreamWriteValue64_v2 (WriteValue, async),
    276 cuStreamWriteValue64_v2_ptsz (per_thread cuStreamWriteValue64_v2),
    277 cuStreamBatchMemOp (MemOpBatch, async),
    278 cuStreamBatchMemOp_ptsz (per_thread cuStreamBatchMemOp),
    279 cuStreamBatchMemOp_v2 (MemOpBatch, async),
    280 cuStreamBatchMemOp_v2_ptsz (per_thread cuStreamBatchMemOp_v2),
    // Cooperative kernel launches (Launch records).
    281 cuLaunchCooperativeKernel (KernelLaunch, async),
    282 cuLaunchCooperativeKernel_ptsz (per_thread cuLaunchCooperativeKernel),
    // Batches of copies (12.8; `_v2` without the failure index, 13.0), a Copy record per copy.
    283 cuMemcpyBatchAsync (Copy(Unified, Unified), async, batch),
    284 cuMemcpyBatchAsync_ptsz (per_thread cuMemcpyBatchAsync),
    285 cuMemcpyBatchAsync_v2 (Copy(Unified, Unified), async, batch),
    286 cuMemcpyBatchAsync_v2_ptsz (per_thread cuMemcpyBatchAsync_v2),
    // Copies between contexts (Copy records; the synchronous ones are serialized with all
    // work of the contexts involved).
    287 cuMemcpyPeer (Copy(Device, Device), peer),
    288 cuMemcpyPeer_ptds (per_thread cuMemcpyPeer),
    289 cuMemcpyPeerAsync (Copy(Device, Device), async, peer),
    290 cuMemcpyPeerAsync_ptsz (per_thread cuMemcpyPeerAsync),
    291 cuMemcpy3DPeer (Copy(Unified, Unified), peer),
    292 cuMemcpy3DPeer_ptds (per_thread cuMemcpy3DPeer),
    293 cuMemcpy3DPeerAsync (Copy(Unified, Unified), async, peer),
    294 cuMemcpy3DPeerAsync_ptsz (per_thread cuMemcpy3DPeerAsync),
    // 2D memsets (Copy records with src 0).
    295 cuMemsetD2D8_v2 (Memset),
    296 cuMemsetD2D8_v2_ptds (per_thread cuMemsetD2D8_v2),
    297 cuMemsetD2D16_v2 (Memset),
    298 cuMemsetD2D16_v2_ptds (per_thread cuMemsetD2D16_v2),
    299 cuMemsetD2D32_v2 (Memset),
    300 cuMemsetD2D32_v2_ptds (per_thread cuMemsetD2D32_v2),
    301 cuMemsetD2D8Async (Memset, async),
    302 cuMemsetD2D8Async_ptsz (per_thread cuMemsetD2D8Async),
    303 cuMemsetD2D16Async (Memset, async),
    304 cuMemsetD2D16Async_ptsz (per_thread cuMemsetD2D16Async),
    305 cuMemsetD2D32Async (Memset, async),
    306 cuMemsetD2D32Async_ptsz (per_thread cuMemsetD2D32Async),
    // External memory (Vulkan, D3D or another process's, through a shareable handle): the
    // imported object, and buffers and mipmapped arrays mapped onto it, which the program
    // frees with cuMemFree and cuMipmappedArrayDestroy.
    307 cuImportExternalMemory (Alloc(External)),
    308 cuExternalMemoryGetMappedBuffer (Alloc(ExternalBuffer)),
    309 cuExternalMemoryGetMappedMipmappedArray (Alloc(ExternalArray)),
    310 cuDestroyExternalMemory (Free(External)),
    // Events over a whole context (12.5) or green context (12.4): an EventRecord of all the
    // context's work so far, and a StreamWait of all its later work; the record's `stream`
    // field holds the context (or green context) handle.
    311 cuCtxRecordEvent (EventRecord, async, context_wide),
    312 cuCtxWaitEvent (StreamWait, async, context_wide),
    313 cuGreenCtxRecordEvent (EventRecord, async, context_wide),
    314 cuGreenCtxWaitEvent (StreamWait, async, context_wide),
    // A stream of a green context (12.5; a StreamCreate record, always non-blocking).
    315 cuGreenCtxStreamCreate (StreamCreate),
    // Copies with attributes (13.2: one copy; a 3D one described like an operation of a 3D
    // batch) and batches of 3D copies (12.8; `_v2` without the failure index, 13.0): a Copy
    // record per copy.
    316 cuMemcpyWithAttributesAsync (Copy(Unified, Unified), async, batch),
    317 cuMemcpyWithAttributesAsync_ptsz (per_thread cuMemcpyWithAttributesAsync),
    318 cuMemcpy3DWithAttributesAsync (Copy(Unified, Unified), async, batch),
    319 cuMemcpy3DWithAttributesAsync_ptsz (per_thread cuMemcpy3DWithAttributesAsync),
    320 cuMemcpy3DBatchAsync (Copy(Unified, Unified), async, batch),
    321 cuMemcpy3DBatchAsync_ptsz (per_thread cuMemcpy3DBatchAsync),
    322 cuMemcpy3DBatchAsync_v2 (Copy(Unified, Unified), async, batch),
    323 cuMemcpy3DBatchAsync_v2_ptsz (per_thread cuMemcpy3DBatchAsync_v2),
    // Changes to the event nodes of an executable graph (GraphUpdate records): one node's
    // event (11.1; the generic setter, 12.2), the whole graph's parameters (10.2; `_v2` with a
    // result structure, 12.0) and a child graph node's (11.1).
    324 cuGraphExecEventRecordNodeSetEvent (GraphUpdate),
    325 cuGraphExecEventWaitNodeSetEvent (GraphUpdate),
    326 cuGraphExecUpdate (GraphUpdate),
    327 cuGraphExecUpdate_v2 (GraphUpdate),
    328 cuGraphExecChildGraphNodeSetParams (GraphUpdate),
    329 cuGraphExecNodeSetParams (GraphUpdate),
    // Changes to what an executable graph's kernel, memcpy and memset nodes touch
    // (GraphUpdate records, with GraphAccesses): one node's parameters (10.1; the kernel
    // setter's `_v2`, 12.0), and a node enabled or disabled (11.6).
    330 cuGraphExecKernelNodeSetParams (GraphUpdate),
    331 cuGraphExecKernelNodeSetParams_v2 (GraphUpdate),
    332 cuGraphExecMemcpyNodeSetParams (GraphUpdate),
    333 cuGraphExecMemsetNodeSetParams (GraphUpdate),
    334 cuGraphNodeSetEnabled (GraphUpdate),
    // Graph building (GraphNode records): kernel, memcpy and memset nodes added by hand
    // (10.0; the kernel node's `_v2`, 12.0), and a graph destroyed (10.0).
    335 cuGraphAddKernelNode (GraphBuild),
    336 cuGraphAddKernelNode_v2 (GraphBuild),
    337 cuGraphAddMemcpyNode (GraphBuild),
    338 cuGraphAddMemsetNode (GraphBuild),
    339 cuGraphDestroy (GraphDestroy),
    // A free node added by hand (11.4; GraphNode records, for findings about the order of
    // the graph's nodes with it).
    340 cuGraphAddMemFreeNode (GraphBuild),
    // External semaphores (10.0; Vulkan, D3D or another process's, through a shareable
    // handle): imported and destroyed (ExtSemaphore records), signaled and waited for on a
    // stream (ExtSemaphoreOp records, one per semaphore of the call), which orders streams
    // the way events do.
    341 cuImportExternalSemaphore (SemaphoreImport),
    342 cuDestroyExternalSemaphore (SemaphoreDestroy),
    343 cuSignalExternalSemaphoresAsync (SemaphoreSignal, async),
    344 cuSignalExternalSemaphoresAsync_ptsz (per_thread cuSignalExternalSemaphoresAsync),
    345 cuWaitExternalSemaphoresAsync (SemaphoreWait, async),
    346 cuWaitExternalSemaphoresAsync_ptsz (per_thread cuWaitExternalSemaphoresAsync),
    // Copies to and from CUDA arrays (3.2; Copy records, the array side's address 0): host to
    // array and back, array to array, device to array and back, synchronous on the default
    // stream, and host to array and back on a stream.
    347 cuMemcpyHtoA_v2 (Copy(Array, Host)),
    348 cuMemcpyHtoA_v2_ptds (per_thread cuMemcpyHtoA_v2),
    349 cuMemcpyAtoH_v2 (Copy(Host, Array)),
    350 cuMemcpyAtoH_v2_ptds (per_thread cuMemcpyAtoH_v2),
    351 cuMemcpyAtoA_v2 (Copy(Array, Array)),
    352 cuMemcpyAtoA_v2_ptds (per_thread cuMemcpyAtoA_v2),
    353 cuMemcpyDtoA_v2 (Copy(Array, Device)),
    354 cuMemcpyDtoA_v2_ptds (per_thread cuMemcpyDtoA_v2),
    355 cuMemcpyAtoD_v2 (Copy(Device, Array)),
    356 cuMemcpyAtoD_v2_ptds (per_thread cuMemcpyAtoD_v2),
    357 cuMemcpyHtoAAsync_v2 (Copy(Array, Host), async),
    358 cuMemcpyHtoAAsync_v2_ptsz (per_thread cuMemcpyHtoAAsync_v2),
    359 cuMemcpyAtoHAsync_v2 (Copy(Host, Array), async),
    360 cuMemcpyAtoHAsync_v2_ptsz (per_thread cuMemcpyAtoHAsync_v2),
    // Managed memory prefetched and discarded on a stream (RangeOp records, one per range):
    // a prefetch to a device ordinal or the CPU (8.0), to a location (12.2), batches of
    // prefetches (13.0), batches of discards and of discards then prefetches (13.0).
    361 cuMemPrefetchAsync (Prefetch, async),
    362 cuMemPrefetchAsync_ptsz (per_thread cuMemPrefetchAsync),
    363 cuMemPrefetchAsync_v2 (Prefetch, async),
    364 cuMemPrefetchAsync_v2_ptsz (per_thread cuMemPrefetchAsync_v2),
    365 cuMemPrefetchBatchAsync (Prefetch, async),
    366 cuMemPrefetchBatchAsync_ptsz (per_thread cuMemPrefetchBatchAsync),
    367 cuMemDiscardBatchAsync (Discard, async),
    368 cuMemDiscardBatchAsync_ptsz (per_thread cuMemDiscardBatchAsync),
    369 cuMemDiscardAndPrefetchBatchAsync (DiscardAndPrefetch, async),
    370 cuMemDiscardAndPrefetchBatchAsync_ptsz (per_thread cuMemDiscardAndPrefetchBatchAsync),
}

impl Api {
    /// The memory family an allocation or free API works on.
    #[inline]
    pub const fn mem_kind(self) -> Option<MemKind> {
        match self.op() {
            Some(Op::Alloc(kind) | Op::Free(kind)) => Some(kind),
            _ => None,
        }
    }

    /// What the entry point does.
    #[inline]
    pub const fn op(self) -> Option<Op> {
        match self.meaning() {
            Some(m) => Some(m.op),
            None => None,
        }
    }

    /// The group of operations it belongs to.
    #[inline]
    pub const fn family(self) -> Option<Family> {
        match self.op() {
            Some(op) => Some(op.family()),
            None => None,
        }
    }

    /// The library that exports it.
    #[inline]
    pub const fn library(self) -> Option<Library> {
        match self.meaning() {
            Some(m) => Some(m.library),
            None => None,
        }
    }

    flags! {
        /// Stream-ordered: it queues work on a stream and returns before the work runs.
        is_async: asynchronous,
        /// A per-thread twin (`_ptsz` / `_ptds`) of [`Api::base`].
        per_thread: per_thread,
        /// A copy between contexts.
        is_peer: peer,
        /// Its `stream` is a context or green context (an event recorded over, or a wait of, all
        /// the context's work).
        is_context_wide: context_wide,
        /// A batch or attribute copy, which never waits for the host.
        is_batch: batch,
        /// A free that waits for the device first.
        is_synchronizing: synchronizing,
    }

    /// The entry point a per-thread twin is of; the entry point itself otherwise (and for a
    /// number this reader does not know).
    #[inline]
    pub const fn base(self) -> Api {
        match self.meaning() {
            Some(m) => m.base,
            None => self,
        }
    }

    /// The exported symbol name, if this reader knows the number.
    pub fn name(self) -> Option<&'static str> {
        Api::ALL.iter().find(|(a, _)| *a == self).map(|(_, n)| *n)
    }

    /// Looks up an exported symbol name.
    pub fn from_name(name: &str) -> Option<Api> {
        Api::ALL.iter().find(|(_, n)| *n == name).map(|(a, _)| *a)
    }
}

impl fmt::Display for Api {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.name() {
            Some(n) => f.write_str(n),
            None if *self == Api::NONE => f.write_str("-"),
            None => write!(f, "api#{}", self.0),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_of_meanings_says_what_the_list_declares_for_every_number() {
        for n in 0..=u16::MAX {
            assert_eq!(Api(n).meaning(), Api(n).declared(), "{n}");
        }
        assert!(Api::ALL.iter().all(|(api, _)| api.meaning().is_some()));
    }

    #[test]
    fn numbers_and_names_are_unique() {
        let mut ids: Vec<u16> = Api::ALL.iter().map(|(a, _)| a.0).collect();
        ids.sort();
        ids.dedup();
        assert_eq!(ids.len(), Api::ALL.len());
        let mut names: Vec<&str> = Api::ALL.iter().map(|(_, n)| *n).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), Api::ALL.len());
        assert_eq!(Api::from_name("cuMemAlloc_v2"), Some(Api::cuMemAlloc_v2));
        assert_eq!(Api(9999).to_string(), "api#9999");
    }

    #[test]
    fn every_api_has_a_meaning_and_its_library_is_the_one_its_name_says() {
        for (api, name) in Api::ALL {
            let m = api.meaning().unwrap_or_else(|| panic!("{name}"));
            let runtime = name.starts_with("cuda");
            assert_eq!(m.library == Library::Runtime, runtime, "{name}");
            assert_eq!(m.op == Op::RuntimeCall, runtime, "{name}");
        }
        assert_eq!(Api(9999).meaning(), None);
        assert_eq!(Api(9999).base(), Api(9999));
        assert!(!Api(9999).per_thread());
    }

    #[test]
    fn every_per_thread_twin_is_named_after_its_base_and_means_what_it_means() {
        for (api, name) in Api::ALL {
            let named = name.strip_suffix("_ptsz").or_else(|| name.strip_suffix("_ptds"));
            assert_eq!(api.per_thread(), named.is_some(), "{name}");
            let base = api.base();
            match named {
                Some(base_name) => {
                    assert_eq!(base.name(), Some(base_name), "{name}");
                    assert!(!base.per_thread(), "{name}");
                    let (m, b) = (api.meaning().unwrap(), base.meaning().unwrap());
                    assert_eq!(
                        Meaning {
                            base: b.base,
                            per_thread: false,
                            ..m
                        },
                        b,
                        "{name}"
                    );
                }
                None => assert_eq!(base, *api, "{name}"),
            }
        }
        assert_eq!(Api::cuMemsetD8Async_ptsz.base(), Api::cuMemsetD8Async);
        assert!(Api::cuMemsetD8Async_ptsz.is_async());
        assert_eq!(Api::cuMemsetD8Async_ptsz.family(), Some(Family::Copy));
        assert_eq!(Api::cuMemFreeAsync_ptsz.mem_kind(), Some(MemKind::Async));
    }
}
