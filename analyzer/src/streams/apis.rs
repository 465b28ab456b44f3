//! What each stream-ordering API means for the order of work: which default stream a NULL
//! stream names, and what a copy or memset does to the host.

use gpuleak_format::{Api, MemKind};

pub use crate::apis::{context_wide, is_graph_launch};

/// Whether stream handle 0 means the calling thread's per-thread default stream (the
/// `_ptsz` / `_ptds` variants that `--default-stream per-thread` programs call).
pub fn per_thread(api: Api) -> bool {
    matches!(
        api,
        Api::cuStreamSynchronize_ptsz
            | Api::cuStreamQuery_ptsz
            | Api::cuStreamWaitEvent_ptsz
            | Api::cuEventRecord_ptsz
            | Api::cuEventRecordWithFlags_ptsz
            | Api::cuStreamAddCallback_ptsz
            | Api::cuLaunchHostFunc_ptsz
            | Api::cuLaunchHostFunc_v2_ptsz
            | Api::cuStreamBeginCapture_v2_ptsz
            | Api::cuStreamBeginCapture_ptsz
            | Api::cuStreamBeginCaptureToGraph_ptsz
            | Api::cuStreamEndCapture_ptsz
            | Api::cuMemAllocAsync_ptsz
            | Api::cuMemAllocFromPoolAsync_ptsz
            | Api::cuMemFreeAsync_ptsz
            | Api::cuSignalExternalSemaphoresAsync_ptsz
            | Api::cuWaitExternalSemaphoresAsync_ptsz
            | Api::cuLaunchKernel_ptsz
            | Api::cuMemcpy_ptds
            | Api::cuMemcpyAsync_ptsz
            | Api::cuMemcpyHtoD_v2_ptds
            | Api::cuMemcpyDtoH_v2_ptds
            | Api::cuMemcpyDtoD_v2_ptds
            | Api::cuMemcpyHtoDAsync_v2_ptsz
            | Api::cuMemcpyDtoHAsync_v2_ptsz
            | Api::cuMemcpyDtoDAsync_v2_ptsz
            | Api::cuMemsetD8_v2_ptds
            | Api::cuMemsetD16_v2_ptds
            | Api::cuMemsetD32_v2_ptds
            | Api::cuMemsetD8Async_ptsz
            | Api::cuMemsetD16Async_ptsz
            | Api::cuMemsetD32Async_ptsz
            | Api::cuLaunchKernelEx_ptsz
            | Api::cuLaunchCooperativeKernel_ptsz
            | Api::cuGraphLaunch_ptsz
            | Api::cuStreamWaitValue32_ptsz
            | Api::cuStreamWaitValue32_v2_ptsz
            | Api::cuStreamWaitValue64_ptsz
            | Api::cuStreamWaitValue64_v2_ptsz
            | Api::cuStreamWriteValue32_ptsz
            | Api::cuStreamWriteValue32_v2_ptsz
            | Api::cuStreamWriteValue64_ptsz
            | Api::cuStreamWriteValue64_v2_ptsz
            | Api::cuStreamBatchMemOp_ptsz
            | Api::cuStreamBatchMemOp_v2_ptsz
            | Api::cuMemcpy2D_v2_ptds
            | Api::cuMemcpy2DUnaligned_v2_ptds
            | Api::cuMemcpy2DAsync_v2_ptsz
            | Api::cuMemcpy3D_v2_ptds
            | Api::cuMemcpy3DAsync_v2_ptsz
            | Api::cuMemcpyBatchAsync_ptsz
            | Api::cuMemcpyBatchAsync_v2_ptsz
            | Api::cuMemcpy3DBatchAsync_ptsz
            | Api::cuMemcpy3DBatchAsync_v2_ptsz
            | Api::cuMemcpyWithAttributesAsync_ptsz
            | Api::cuMemcpy3DWithAttributesAsync_ptsz
            | Api::cuMemcpyPeer_ptds
            | Api::cuMemcpyPeerAsync_ptsz
            | Api::cuMemcpy3DPeer_ptds
            | Api::cuMemcpy3DPeerAsync_ptsz
            | Api::cuMemsetD2D8_v2_ptds
            | Api::cuMemsetD2D16_v2_ptds
            | Api::cuMemsetD2D32_v2_ptds
            | Api::cuMemsetD2D8Async_ptsz
            | Api::cuMemsetD2D16Async_ptsz
            | Api::cuMemsetD2D32Async_ptsz
            | Api::cuMemcpyHtoA_v2_ptds
            | Api::cuMemcpyAtoH_v2_ptds
            | Api::cuMemcpyAtoA_v2_ptds
            | Api::cuMemcpyDtoA_v2_ptds
            | Api::cuMemcpyAtoD_v2_ptds
            | Api::cuMemcpyHtoAAsync_v2_ptsz
            | Api::cuMemcpyAtoHAsync_v2_ptsz
            | Api::cuMemPrefetchAsync_ptsz
            | Api::cuMemPrefetchAsync_v2_ptsz
            | Api::cuMemPrefetchBatchAsync_ptsz
            | Api::cuMemDiscardBatchAsync_ptsz
            | Api::cuMemDiscardAndPrefetchBatchAsync_ptsz
            // Its upload stream (no record carries it).
            | Api::cuGraphInstantiateWithParams_ptsz
            // Runtime calls (only ever a record's `via`).
            | Api::cudaMallocAsync_ptsz
            | Api::cudaFreeAsync_ptsz
            | Api::cudaMallocFromPoolAsync_ptsz
            | Api::cudaGraphInstantiateWithParams_ptsz
    )
}

/// How a copy or memset relates to the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HostSide {
    /// Asynchronous: the host goes on at once.
    Async,
    /// Synchronous API on the default stream, but the host does not wait for the work
    /// (device-to-device copies and memsets of device memory, per the CUDA documentation's
    /// "API synchronization behavior"; a memset of page-locked host or managed memory is
    /// synchronous, which the model tells from its address).
    Enqueue,
    /// The host waits until the copy is complete (copies to or from host memory).
    Blocking,
    /// Synchronous unified (`cuMemcpy`), 2D and 3D copies: `Blocking` when a side is host
    /// memory, `Enqueue` when both are device memory (or arrays). For 2D and 3D copies, which
    /// it is follows from the descriptor's memory types, which the record carries as its
    /// addresses: a host side is a host address, an array side 0 (see [`super::Streams`]'s
    /// copy handling).
    BySides,
}

/// For a `Copy` record's API: how it relates to the host, and whether it is a memset.
pub fn copy_kind(api: Api) -> (HostSide, bool) {
    use HostSide::*;
    match api {
        // An array is device memory: a copy between it and host memory is one between host
        // and device memory, and one between it and device memory (or another array) one
        // between device memories.
        Api::cuMemcpyHtoD_v2
        | Api::cuMemcpyHtoD_v2_ptds
        | Api::cuMemcpyDtoH_v2
        | Api::cuMemcpyDtoH_v2_ptds
        | Api::cuMemcpyHtoA_v2
        | Api::cuMemcpyHtoA_v2_ptds
        | Api::cuMemcpyAtoH_v2
        | Api::cuMemcpyAtoH_v2_ptds => (Blocking, false),
        // A synchronous peer copy is "asynchronous with respect to the host" (its documentation).
        Api::cuMemcpyDtoD_v2
        | Api::cuMemcpyDtoD_v2_ptds
        | Api::cuMemcpyPeer
        | Api::cuMemcpyPeer_ptds
        | Api::cuMemcpyAtoA_v2
        | Api::cuMemcpyAtoA_v2_ptds
        | Api::cuMemcpyDtoA_v2
        | Api::cuMemcpyDtoA_v2_ptds
        | Api::cuMemcpyAtoD_v2
        | Api::cuMemcpyAtoD_v2_ptds => (Enqueue, false),
        Api::cuMemsetD8_v2
        | Api::cuMemsetD8_v2_ptds
        | Api::cuMemsetD16_v2
        | Api::cuMemsetD16_v2_ptds
        | Api::cuMemsetD32_v2
        | Api::cuMemsetD32_v2_ptds
        | Api::cuMemsetD2D8_v2
        | Api::cuMemsetD2D8_v2_ptds
        | Api::cuMemsetD2D16_v2
        | Api::cuMemsetD2D16_v2_ptds
        | Api::cuMemsetD2D32_v2
        | Api::cuMemsetD2D32_v2_ptds => (Enqueue, true),
        Api::cuMemsetD8Async
        | Api::cuMemsetD8Async_ptsz
        | Api::cuMemsetD16Async
        | Api::cuMemsetD16Async_ptsz
        | Api::cuMemsetD32Async
        | Api::cuMemsetD32Async_ptsz
        | Api::cuMemsetD2D8Async
        | Api::cuMemsetD2D8Async_ptsz
        | Api::cuMemsetD2D16Async
        | Api::cuMemsetD2D16Async_ptsz
        | Api::cuMemsetD2D32Async
        | Api::cuMemsetD2D32Async_ptsz => (Async, true),
        // A unified copy makes the host wait unless both sides are device memory.
        Api::cuMemcpy
        | Api::cuMemcpy_ptds
        | Api::cuMemcpy2D_v2
        | Api::cuMemcpy2D_v2_ptds
        | Api::cuMemcpy2DUnaligned_v2
        | Api::cuMemcpy2DUnaligned_v2_ptds
        | Api::cuMemcpy3D_v2
        | Api::cuMemcpy3D_v2_ptds
        // "Synchronous with respect to the host only if the source or destination of the
        // transfer is host memory".
        | Api::cuMemcpy3DPeer
        | Api::cuMemcpy3DPeer_ptds => (BySides, false),
        _ => (Async, false),
    }
}

/// For a `Copy` record's API: whether its destination and its source are parameters that must
/// be device memory (a `CUdeviceptr` of a device-to-device, host-to-device, device-to-host,
/// array or peer copy, or a memset's destination). Host pointers (`HtoD`'s source, `DtoH`'s
/// destination) and the sides of unified, 2D, 3D, batch and attribute copies, whose records
/// do not say what memory type the program gave, are not.
pub fn device_operands(api: Api) -> (bool, bool) {
    if copy_kind(api).1 {
        return (true, false);
    }
    match api {
        Api::cuMemcpyDtoD_v2
        | Api::cuMemcpyDtoD_v2_ptds
        | Api::cuMemcpyDtoDAsync_v2
        | Api::cuMemcpyDtoDAsync_v2_ptsz
        | Api::cuMemcpyPeer
        | Api::cuMemcpyPeer_ptds
        | Api::cuMemcpyPeerAsync
        | Api::cuMemcpyPeerAsync_ptsz => (true, true),
        Api::cuMemcpyHtoD_v2
        | Api::cuMemcpyHtoD_v2_ptds
        | Api::cuMemcpyHtoDAsync_v2
        | Api::cuMemcpyHtoDAsync_v2_ptsz
        | Api::cuMemcpyAtoD_v2
        | Api::cuMemcpyAtoD_v2_ptds => (true, false),
        Api::cuMemcpyDtoH_v2
        | Api::cuMemcpyDtoH_v2_ptds
        | Api::cuMemcpyDtoHAsync_v2
        | Api::cuMemcpyDtoHAsync_v2_ptsz
        | Api::cuMemcpyDtoA_v2
        | Api::cuMemcpyDtoA_v2_ptds => (false, true),
        _ => (false, false),
    }
}

/// A synchronous peer copy (`cuMemcpyPeer`, `cuMemcpy3DPeer`), "serialized with respect to
/// all pending and future asynchronous work" of the current, source and destination contexts:
/// it comes after all earlier work of every stream, non-blocking ones too, and all later work
/// comes after it. The model has one context, so this orders every stream of the process
/// (more than the driver does with several contexts: it can hide findings, never add one).
pub fn serializes_device(api: Api) -> bool {
    matches!(
        api,
        Api::cuMemcpyPeer | Api::cuMemcpyPeer_ptds | Api::cuMemcpy3DPeer | Api::cuMemcpy3DPeer_ptds
    )
}

/// An asynchronous copy that returns only once it is complete when its destination is
/// pageable host memory (CUDA's "API synchronization behavior": a transfer from device memory
/// to pageable host memory, or between any two host memories, is synchronous with respect to
/// the host): device-to-host and array-to-host copies, and unified copies whose destination
/// may be host memory.
pub fn waits_for_pageable_destination(api: Api) -> bool {
    matches!(
        api,
        Api::cuMemcpyDtoHAsync_v2
            | Api::cuMemcpyDtoHAsync_v2_ptsz
            | Api::cuMemcpyAtoHAsync_v2
            | Api::cuMemcpyAtoHAsync_v2_ptsz
            | Api::cuMemcpyAsync
            | Api::cuMemcpyAsync_ptsz
            | Api::cuMemcpy2DAsync_v2
            | Api::cuMemcpy2DAsync_v2_ptsz
            | Api::cuMemcpy3DAsync_v2
            | Api::cuMemcpy3DAsync_v2_ptsz
            | Api::cuMemcpy3DPeerAsync
            | Api::cuMemcpy3DPeerAsync_ptsz
    )
}

/// A kernel launch: an operation whose memory accesses are the tracked addresses among its
/// parameters, written or only read (the driver does not say which).
pub fn is_kernel_launch(api: Api) -> bool {
    matches!(
        api,
        Api::cuLaunchKernel
            | Api::cuLaunchKernel_ptsz
            | Api::cuLaunchKernelEx
            | Api::cuLaunchKernelEx_ptsz
            | Api::cuLaunchCooperativeKernel
            | Api::cuLaunchCooperativeKernel_ptsz
    )
}

/// A stream-ordered free (`cuMemFreeAsync`), as opposed to a synchronous one.
pub fn is_async_free(api: Api) -> bool {
    matches!(api, Api::cuMemFreeAsync | Api::cuMemFreeAsync_ptsz)
}

/// A stream-ordered allocation (`cuMemAllocAsync`, `cuMemAllocFromPoolAsync`).
pub fn is_async_alloc(api: Api) -> bool {
    api.mem_kind() == Some(MemKind::Async) && !is_async_free(api)
}

/// A prefetch or discard of managed memory (a `RangeOp` record's API).
pub fn is_range_op(api: Api) -> bool {
    matches!(
        api,
        Api::cuMemPrefetchAsync
            | Api::cuMemPrefetchAsync_ptsz
            | Api::cuMemPrefetchAsync_v2
            | Api::cuMemPrefetchAsync_v2_ptsz
            | Api::cuMemPrefetchBatchAsync
            | Api::cuMemPrefetchBatchAsync_ptsz
    ) || is_discard(api)
}

/// A discard of managed memory (its contents become undefined: a write, for the order of
/// work), with or without a prefetch after it.
pub fn is_discard(api: Api) -> bool {
    matches!(
        api,
        Api::cuMemDiscardBatchAsync
            | Api::cuMemDiscardBatchAsync_ptsz
            | Api::cuMemDiscardAndPrefetchBatchAsync
            | Api::cuMemDiscardAndPrefetchBatchAsync_ptsz
    )
}

/// Whether the end of work made by `api` is something the program could observe: not for
/// stream-ordered allocations and frees (the driver takes the memory back at exit whether
/// or not they ran) nor for prefetches and discards (hints about where memory lives, and
/// contents no longer wanted), which `unsynchronized-at-exit` therefore leaves out.
pub fn has_observable_result(api: Api) -> bool {
    !is_async_alloc(api) && !is_range_op(api)
}

/// A synchronous free that waits for the device first (`cudaFree` and `cudaFreeHost` are
/// documented to synchronize; their driver calls are these).
pub fn is_synchronizing_free(api: Api) -> bool {
    matches!(api, Api::cuMemFree_v2 | Api::cuMemFreeHost)
}

/// Waits that block the host (a query only counts when it succeeded).
pub fn is_event_wait(api: Api) -> bool {
    matches!(api, Api::cuEventSynchronize)
}

/// Whether an `ExtSemaphoreOp` is a signal (else a wait).
pub fn is_semaphore_signal(api: Api) -> bool {
    matches!(
        api,
        Api::cuSignalExternalSemaphoresAsync | Api::cuSignalExternalSemaphoresAsync_ptsz
    )
}

/// Whether an `ExtSemaphore` record is a destroy (else an import).
pub fn is_semaphore_destroy(api: Api) -> bool {
    api == Api::cuDestroyExternalSemaphore
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_per_thread_api_is_named_so_and_every_such_name_is_listed() {
        for (api, name) in Api::ALL {
            let named = name.ends_with("_ptsz") || name.ends_with("_ptds");
            let is_resolver = name.starts_with("cuGetProcAddress");
            if !is_resolver {
                assert_eq!(per_thread(*api), named, "{name}");
            }
        }
    }
}
