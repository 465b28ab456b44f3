//! The exact API entry points a record can name, by stable number.
//!
//! Numbers are part of the format: append new entries, never renumber or reuse one. A reader
//! that meets a number it does not know still decodes the record and shows `api#N`.

use std::fmt;

use crate::kind::MemKind;

/// One exact exported function variant (`cuMemAlloc_v2`, `cuMemFreeAsync_ptsz`,
/// `cudaMalloc`, ...), as a stable number.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
pub struct Api(pub u16);

macro_rules! apis {
    ($($id:literal $name:ident),* $(,)?) => {
        #[allow(non_upper_case_globals)]
        impl Api {
            /// No API (a record that was not made by an intercepted call).
            pub const NONE: Api = Api(0);
            $(
                #[doc = concat!("`", stringify!($name), "`")]
                pub const $name: Api = Api($id);
            )*
            /// Every known API with its exported symbol name.
            pub const ALL: &'static [(Api, &'static str)] = &[$((Api($id), stringify!($name))),*];
        }
    };
}

apis! {
    // Device memory.
    1 cuMemAlloc_v2,
    2 cuMemAllocPitch_v2,
    3 cuMemAllocManaged,
    4 cuMemFree_v2,
    // Host pinned memory.
    5 cuMemAllocHost_v2,
    6 cuMemHostAlloc,
    7 cuMemFreeHost,
    8 cuMemHostRegister_v2,
    9 cuMemHostUnregister,
    // Stream-ordered memory.
    10 cuMemAllocAsync,
    11 cuMemAllocAsync_ptsz,
    12 cuMemAllocFromPoolAsync,
    13 cuMemAllocFromPoolAsync_ptsz,
    14 cuMemFreeAsync,
    15 cuMemFreeAsync_ptsz,
    // Virtual memory management.
    16 cuMemAddressReserve,
    17 cuMemAddressFree,
    18 cuMemCreate,
    19 cuMemRelease,
    20 cuMemMap,
    21 cuMemUnmap,
    // Arrays and IPC.
    22 cuArrayCreate_v2,
    23 cuArray3DCreate_v2,
    24 cuArrayDestroy,
    25 cuIpcOpenMemHandle_v2,
    26 cuIpcCloseMemHandle,
    27 cuMipmappedArrayCreate,
    28 cuMipmappedArrayDestroy,
    29 cuIpcOpenMemHandle,
    // Handle references (added later): a retained reference to a mapped physical handle, a
    // physical handle imported from another process, a multicast object.
    30 cuMemRetainAllocationHandle,
    31 cuMemImportFromShareableHandle,
    32 cuMulticastCreate,
    // A pointer imported from another process's memory pool, freed by cuMemFree[Async].
    33 cuMemPoolImportPointer,
    // Stream-ordered memory pools themselves (PoolCreate, PoolDestroy records): a pool created,
    // a pool imported from another process, a pool destroyed.
    34 cuMemPoolCreate,
    35 cuMemPoolImportFromShareableHandle,
    36 cuMemPoolDestroy,
    // Graph memory: an allocation node added to a graph by hand (an `Alloc` record of the node,
    // not memory: each launch of the instantiated graph allocates at its address).
    37 cuGraphAddMemAllocNode,
    // The generic node constructors (CUDA 12.2 and 12.3): an `Alloc` record like the above
    // when the node they add is an allocation node; nothing otherwise.
    38 cuGraphAddNode,
    39 cuGraphAddNode_v2,
    // Contexts.
    40 cuCtxCreate_v2,
    41 cuCtxCreate_v3,
    42 cuCtxCreate_v4,
    43 cuCtxDestroy_v2,
    44 cuDevicePrimaryCtxRetain,
    45 cuDevicePrimaryCtxRelease_v2,
    46 cuDevicePrimaryCtxReset_v2,
    47 cuCtxSynchronize,
    48 cuCtxSynchronize_v2,
    49 cuDevicePrimaryCtxRelease,
    50 cuDevicePrimaryCtxReset,
    // Streams and events (recorded by the stream-ordering checks).
    60 cuStreamCreate,
    61 cuStreamCreateWithPriority,
    62 cuStreamDestroy_v2,
    63 cuStreamSynchronize,
    64 cuStreamSynchronize_ptsz,
    65 cuStreamQuery,
    66 cuStreamQuery_ptsz,
    67 cuStreamWaitEvent,
    68 cuStreamWaitEvent_ptsz,
    69 cuEventCreate,
    70 cuEventDestroy_v2,
    71 cuEventRecord,
    72 cuEventRecord_ptsz,
    73 cuEventRecordWithFlags,
    74 cuEventRecordWithFlags_ptsz,
    75 cuEventSynchronize,
    76 cuEventQuery,
    77 cuStreamAddCallback,
    78 cuStreamAddCallback_ptsz,
    79 cuLaunchHostFunc,
    80 cuLaunchHostFunc_ptsz,
    81 cuStreamBeginCapture_v2,
    82 cuStreamBeginCapture_v2_ptsz,
    83 cuStreamEndCapture,
    84 cuStreamEndCapture_ptsz,
    85 cuStreamDestroy,
    86 cuEventDestroy,
    87 cuStreamBeginCapture,
    88 cuStreamBeginCapture_ptsz,
    // Copies, memsets, launches.
    100 cuMemcpy,
    101 cuMemcpyAsync,
    102 cuMemcpyHtoD_v2,
    103 cuMemcpyDtoH_v2,
    104 cuMemcpyDtoD_v2,
    105 cuMemcpyHtoDAsync_v2,
    106 cuMemcpyDtoHAsync_v2,
    107 cuMemcpyDtoDAsync_v2,
    108 cuMemsetD8_v2,
    109 cuMemsetD32_v2,
    110 cuMemsetD8Async,
    111 cuMemsetD32Async,
    112 cuLaunchKernel,
    113 cuLaunchKernel_ptsz,
    114 cuMemcpy_ptds,
    115 cuMemcpyAsync_ptsz,
    116 cuMemcpyHtoD_v2_ptds,
    117 cuMemcpyDtoH_v2_ptds,
    118 cuMemcpyDtoD_v2_ptds,
    119 cuMemcpyHtoDAsync_v2_ptsz,
    120 cuMemcpyDtoHAsync_v2_ptsz,
    121 cuMemcpyDtoDAsync_v2_ptsz,
    122 cuMemsetD8_v2_ptds,
    123 cuMemsetD32_v2_ptds,
    124 cuMemsetD8Async_ptsz,
    125 cuMemsetD32Async_ptsz,
    126 cuMemsetD16_v2,
    127 cuMemsetD16_v2_ptds,
    128 cuMemsetD16Async,
    129 cuMemsetD16Async_ptsz,
    // Resolvers.
    150 cuGetProcAddress,
    151 cuGetProcAddress_v2,
    152 cuGetProcAddress_v2_ptsz,
    // Runtime entry points (only ever a record's `via` tag).
    200 cudaMalloc,
    201 cudaFree,
    202 cudaMallocAsync,
    203 cudaFreeAsync,
    204 cudaMallocManaged,
    205 cudaMallocHost,
    206 cudaHostAlloc,
    207 cudaFreeHost,
    208 cudaMallocPitch,
    209 cudaMallocFromPoolAsync,
    210 cudaDeviceReset,
    211 cudaGetDriverEntryPoint,
    212 cudaGetDriverEntryPointByVersion,
    // Stream-ordering entry points added after the first release (Copy, Launch records).
    213 cuLaunchKernelEx,
    214 cuLaunchKernelEx_ptsz,
    215 cuGraphLaunch,
    216 cuGraphLaunch_ptsz,
    217 cuMemcpy2D_v2,
    218 cuMemcpy2D_v2_ptds,
    219 cuMemcpy2DUnaligned_v2,
    220 cuMemcpy2DUnaligned_v2_ptds,
    221 cuMemcpy2DAsync_v2,
    222 cuMemcpy2DAsync_v2_ptsz,
    223 cuMemcpy3D_v2,
    224 cuMemcpy3D_v2_ptds,
    225 cuMemcpy3DAsync_v2,
    226 cuMemcpy3DAsync_v2_ptsz,
    227 cuLaunchHostFunc_v2,
    228 cuLaunchHostFunc_v2_ptsz,
    // Runtime entry points added later (a record's `via` tag).
    229 cudaMemPoolImportPointer,
    230 cudaIpcOpenMemHandle,
    231 cudaIpcCloseMemHandle,
    232 cudaMemPoolCreate,
    233 cudaMemPoolImportFromShareableHandle,
    234 cudaMemPoolDestroy,
    // Graph instantiation (GraphExec records).
    235 cuGraphInstantiate,
    236 cuGraphInstantiate_v2,
    237 cuGraphInstantiateWithFlags,
    238 cuGraphInstantiateWithParams,
    239 cuGraphInstantiateWithParams_ptsz,
    // Runtime entry points added later (a record's `via` tag): the per-thread default stream
    // variants, arrays, host registration, graph memory nodes and instantiation.
    240 cudaMallocAsync_ptsz,
    241 cudaFreeAsync_ptsz,
    242 cudaMallocFromPoolAsync_ptsz,
    243 cudaMallocArray,
    244 cudaMalloc3DArray,
    245 cudaMallocMipmappedArray,
    246 cudaMalloc3D,
    247 cudaFreeArray,
    248 cudaFreeMipmappedArray,
    249 cudaHostRegister,
    250 cudaHostUnregister,
    251 cudaGraphAddMemAllocNode,
    252 cudaGraphAddNode,
    253 cudaGraphAddNode_v2,
    254 cudaGraphInstantiate,
    255 cudaGraphInstantiateWithFlags,
    256 cudaGraphInstantiateWithParams,
    257 cudaGraphInstantiateWithParams_ptsz,
    // A pool trimmed (no record of its own: the shim samples the pool at once, a PoolUsage).
    258 cuMemPoolTrimTo,
    // A capture into the program's own graph (12.3; Capture records).
    259 cuStreamBeginCaptureToGraph,
    260 cuStreamBeginCaptureToGraph_ptsz,
    // Stream memory operations (MemOp records): waits on and writes of 32- and 64-bit values,
    // and batches of them; the first ABI (CUDA 8 and 9) and `_v2` (11.7), each with `_ptsz`.
    261 cuStreamWaitValue32,
    262 cuStreamWaitValue32_ptsz,
    263 cuStreamWaitValue32_v2,
    264 cuStreamWaitValue32_v2_ptsz,
    265 cuStreamWaitValue64,
    266 cuStreamWaitValue64_ptsz,
    267 cuStreamWaitValue64_v2,
    268 cuStreamWaitValue64_v2_ptsz,
    269 cuStreamWriteValue32,
    270 cuStreamWriteValue32_ptsz,
    271 cuStreamWriteValue32_v2,
    272 cuStreamWriteValue32_v2_ptsz,
    273 cuStreamWriteValue64,
    274 cuStreamWriteValue64_ptsz,
    275 cuStreamWriteValue64_v2,
    276 cuStreamWriteValue64_v2_ptsz,
    277 cuStreamBatchMemOp,
    278 cuStreamBatchMemOp_ptsz,
    279 cuStreamBatchMemOp_v2,
    280 cuStreamBatchMemOp_v2_ptsz,
    // Cooperative kernel launches (Launch records).
    281 cuLaunchCooperativeKernel,
    282 cuLaunchCooperativeKernel_ptsz,
    // Batches of copies (12.8; `_v2` without the failure index, 13.0), a Copy record per copy.
    283 cuMemcpyBatchAsync,
    284 cuMemcpyBatchAsync_ptsz,
    285 cuMemcpyBatchAsync_v2,
    286 cuMemcpyBatchAsync_v2_ptsz,
    // Copies between contexts (Copy records; the synchronous ones are serialized with all
    // work of the contexts involved).
    287 cuMemcpyPeer,
    288 cuMemcpyPeer_ptds,
    289 cuMemcpyPeerAsync,
    290 cuMemcpyPeerAsync_ptsz,
    291 cuMemcpy3DPeer,
    292 cuMemcpy3DPeer_ptds,
    293 cuMemcpy3DPeerAsync,
    294 cuMemcpy3DPeerAsync_ptsz,
    // 2D memsets (Copy records with src 0).
    295 cuMemsetD2D8_v2,
    296 cuMemsetD2D8_v2_ptds,
    297 cuMemsetD2D16_v2,
    298 cuMemsetD2D16_v2_ptds,
    299 cuMemsetD2D32_v2,
    300 cuMemsetD2D32_v2_ptds,
    301 cuMemsetD2D8Async,
    302 cuMemsetD2D8Async_ptsz,
    303 cuMemsetD2D16Async,
    304 cuMemsetD2D16Async_ptsz,
    305 cuMemsetD2D32Async,
    306 cuMemsetD2D32Async_ptsz,
    // External memory (Vulkan, D3D or another process's, through a shareable handle): the
    // imported object, and buffers and mipmapped arrays mapped onto it, which the program
    // frees with cuMemFree and cuMipmappedArrayDestroy.
    307 cuImportExternalMemory,
    308 cuExternalMemoryGetMappedBuffer,
    309 cuExternalMemoryGetMappedMipmappedArray,
    310 cuDestroyExternalMemory,
    // Events over a whole context (12.5) or green context (12.4): an EventRecord of all the
    // context's work so far, and a StreamWait of all its later work; the record's `stream`
    // field holds the context (or green context) handle.
    311 cuCtxRecordEvent,
    312 cuCtxWaitEvent,
    313 cuGreenCtxRecordEvent,
    314 cuGreenCtxWaitEvent,
    // A stream of a green context (12.5; a StreamCreate record, always non-blocking).
    315 cuGreenCtxStreamCreate,
    // Copies with attributes (13.2: one copy; a 3D one described like an operation of a 3D
    // batch) and batches of 3D copies (12.8; `_v2` without the failure index, 13.0): a Copy
    // record per copy.
    316 cuMemcpyWithAttributesAsync,
    317 cuMemcpyWithAttributesAsync_ptsz,
    318 cuMemcpy3DWithAttributesAsync,
    319 cuMemcpy3DWithAttributesAsync_ptsz,
    320 cuMemcpy3DBatchAsync,
    321 cuMemcpy3DBatchAsync_ptsz,
    322 cuMemcpy3DBatchAsync_v2,
    323 cuMemcpy3DBatchAsync_v2_ptsz,
    // Changes to the event nodes of an executable graph (GraphUpdate records): one node's
    // event (11.1; the generic setter, 12.2), the whole graph's parameters (10.2; `_v2` with a
    // result structure, 12.0) and a child graph node's (11.1).
    324 cuGraphExecEventRecordNodeSetEvent,
    325 cuGraphExecEventWaitNodeSetEvent,
    326 cuGraphExecUpdate,
    327 cuGraphExecUpdate_v2,
    328 cuGraphExecChildGraphNodeSetParams,
    329 cuGraphExecNodeSetParams,
    // Changes to what an executable graph's kernel, memcpy and memset nodes touch
    // (GraphUpdate records, with GraphAccesses): one node's parameters (10.1; the kernel
    // setter's `_v2`, 12.0), and a node enabled or disabled (11.6).
    330 cuGraphExecKernelNodeSetParams,
    331 cuGraphExecKernelNodeSetParams_v2,
    332 cuGraphExecMemcpyNodeSetParams,
    333 cuGraphExecMemsetNodeSetParams,
    334 cuGraphNodeSetEnabled,
    // Graph building (GraphNode records): kernel, memcpy and memset nodes added by hand
    // (10.0; the kernel node's `_v2`, 12.0), and a graph destroyed (10.0).
    335 cuGraphAddKernelNode,
    336 cuGraphAddKernelNode_v2,
    337 cuGraphAddMemcpyNode,
    338 cuGraphAddMemsetNode,
    339 cuGraphDestroy,
    // A free node added by hand (11.4; GraphNode records, for findings about the order of
    // the graph's nodes with it).
    340 cuGraphAddMemFreeNode,
    // External semaphores (10.0; Vulkan, D3D or another process's, through a shareable
    // handle): imported and destroyed (ExtSemaphore records), signaled and waited for on a
    // stream (ExtSemaphoreOp records, one per semaphore of the call), which orders streams
    // the way events do.
    341 cuImportExternalSemaphore,
    342 cuDestroyExternalSemaphore,
    343 cuSignalExternalSemaphoresAsync,
    344 cuSignalExternalSemaphoresAsync_ptsz,
    345 cuWaitExternalSemaphoresAsync,
    346 cuWaitExternalSemaphoresAsync_ptsz,
    // Copies to and from CUDA arrays (3.2; Copy records, the array side's address 0): host to
    // array and back, array to array, device to array and back, synchronous on the default
    // stream, and host to array and back on a stream.
    347 cuMemcpyHtoA_v2,
    348 cuMemcpyHtoA_v2_ptds,
    349 cuMemcpyAtoH_v2,
    350 cuMemcpyAtoH_v2_ptds,
    351 cuMemcpyAtoA_v2,
    352 cuMemcpyAtoA_v2_ptds,
    353 cuMemcpyDtoA_v2,
    354 cuMemcpyDtoA_v2_ptds,
    355 cuMemcpyAtoD_v2,
    356 cuMemcpyAtoD_v2_ptds,
    357 cuMemcpyHtoAAsync_v2,
    358 cuMemcpyHtoAAsync_v2_ptsz,
    359 cuMemcpyAtoHAsync_v2,
    360 cuMemcpyAtoHAsync_v2_ptsz,
    // Managed memory prefetched and discarded on a stream (RangeOp records, one per range):
    // a prefetch to a device ordinal or the CPU (8.0), to a location (12.2), batches of
    // prefetches (13.0), batches of discards and of discards then prefetches (13.0).
    361 cuMemPrefetchAsync,
    362 cuMemPrefetchAsync_ptsz,
    363 cuMemPrefetchAsync_v2,
    364 cuMemPrefetchAsync_v2_ptsz,
    365 cuMemPrefetchBatchAsync,
    366 cuMemPrefetchBatchAsync_ptsz,
    367 cuMemDiscardBatchAsync,
    368 cuMemDiscardBatchAsync_ptsz,
    369 cuMemDiscardAndPrefetchBatchAsync,
    370 cuMemDiscardAndPrefetchBatchAsync_ptsz,
}

impl Api {
    /// The memory family an allocation or free API works on.
    pub fn mem_kind(self) -> Option<MemKind> {
        use MemKind::*;
        Some(match self {
            Api::cuMemAlloc_v2 | Api::cuMemAllocPitch_v2 | Api::cuMemFree_v2 => Device,
            Api::cuMemAllocManaged => Managed,
            Api::cuMemAllocHost_v2 | Api::cuMemHostAlloc | Api::cuMemFreeHost => Host,
            Api::cuMemHostRegister_v2 | Api::cuMemHostUnregister => HostRegistered,
            Api::cuMemAllocAsync
            | Api::cuMemAllocAsync_ptsz
            | Api::cuMemAllocFromPoolAsync
            | Api::cuMemAllocFromPoolAsync_ptsz
            | Api::cuMemFreeAsync
            | Api::cuMemFreeAsync_ptsz => Async,
            Api::cuMemAddressReserve | Api::cuMemAddressFree => VmmReserve,
            Api::cuMemCreate | Api::cuMemRelease | Api::cuMemRetainAllocationHandle => VmmPhysical,
            Api::cuMemImportFromShareableHandle => VmmImport,
            Api::cuMulticastCreate => Multicast,
            Api::cuMemPoolImportPointer => PoolImport,
            Api::cuGraphAddMemAllocNode | Api::cuGraphAddNode | Api::cuGraphAddNode_v2 => Graph,
            Api::cuArrayCreate_v2
            | Api::cuArray3DCreate_v2
            | Api::cuArrayDestroy
            | Api::cuMipmappedArrayCreate
            | Api::cuMipmappedArrayDestroy => Array,
            Api::cuIpcOpenMemHandle_v2 | Api::cuIpcOpenMemHandle | Api::cuIpcCloseMemHandle => Ipc,
            Api::cuImportExternalMemory | Api::cuDestroyExternalMemory => External,
            Api::cuExternalMemoryGetMappedBuffer => ExternalBuffer,
            Api::cuExternalMemoryGetMappedMipmappedArray => ExternalArray,
            _ => return None,
        })
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
}
