//! What each stream-ordering API means for the order of work: which default stream a NULL
//! stream names, and what a copy or memset does to the host. Every answer is derived from the
//! meanings the API list declares (`gpuleak_format::api`); a new entry point declared there
//! needs nothing here.

use gpuleak_format::{Api, Family, MemKind, Op, Side};

pub use crate::apis::{context_wide, is_graph_launch};

/// Whether stream handle 0 means the calling thread's per-thread default stream (the
/// `_ptsz` / `_ptds` variants that `--default-stream per-thread` programs call; the
/// resolver's `_ptsz` has no stream).
pub fn per_thread(api: Api) -> bool {
    api.per_thread() && api.family() != Some(Family::Resolver)
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
///
/// An array is device memory: a copy between it and host memory is one between host and
/// device memory, and one between it and device memory (or another array) one between device
/// memories. A synchronous peer copy is "asynchronous with respect to the host" (its
/// documentation), and a synchronous 3D peer copy "synchronous with respect to the host only
/// if the source or destination of the transfer is host memory".
pub fn copy_kind(api: Api) -> (HostSide, bool) {
    use HostSide::*;
    match api.op() {
        Some(Op::Memset) if api.is_async() => (Async, true),
        Some(Op::Memset) => (Enqueue, true),
        Some(Op::Copy { .. }) if api.is_async() => (Async, false),
        Some(Op::Copy { dst, src }) if dst == Side::Host || src == Side::Host => (Blocking, false),
        // A unified copy makes the host wait unless both sides are device memory.
        Some(Op::Copy { dst, src }) if dst == Side::Unified || src == Side::Unified => (BySides, false),
        Some(Op::Copy { .. }) => (Enqueue, false),
        _ => (Async, false),
    }
}

/// For a `Copy` record's API: whether its destination and its source are parameters that must
/// be device memory (a `CUdeviceptr` of a device-to-device, host-to-device, device-to-host,
/// array or peer copy, or a memset's destination). Host pointers (`HtoD`'s source, `DtoH`'s
/// destination) and the sides of unified, 2D, 3D, batch and attribute copies, whose records
/// do not say what memory type the program gave, are not.
pub fn device_operands(api: Api) -> (bool, bool) {
    match api.op() {
        Some(Op::Memset) => (true, false),
        Some(Op::Copy { dst, src }) => (dst == Side::Device, src == Side::Device),
        _ => (false, false),
    }
}

/// A synchronous peer copy (`cuMemcpyPeer`, `cuMemcpy3DPeer`), "serialized with respect to
/// all pending and future asynchronous work" of the current, source and destination contexts:
/// it comes after all earlier work of every stream, non-blocking ones too, and all later work
/// comes after it. The model has one context, so this orders every stream of the process
/// (more than the driver does with several contexts: it can hide findings, never add one).
pub fn serializes_device(api: Api) -> bool {
    matches!(api.op(), Some(Op::Copy { .. })) && api.is_peer() && !api.is_async()
}

/// An asynchronous copy that returns only once it is complete when its destination is
/// pageable host memory (CUDA's "API synchronization behavior": a transfer from device memory
/// to pageable host memory, or between any two host memories, is synchronous with respect to
/// the host): device-to-host and array-to-host copies, and unified copies whose destination
/// may be host memory (not batch and attribute copies).
pub fn waits_for_pageable_destination(api: Api) -> bool {
    match api.op() {
        Some(Op::Copy { dst, .. }) => api.is_async() && !api.is_batch() && (dst == Side::Host || dst == Side::Unified),
        _ => false,
    }
}

/// A kernel launch: an operation whose memory accesses are the tracked addresses among its
/// parameters, written or only read (the driver does not say which).
pub fn is_kernel_launch(api: Api) -> bool {
    api.op() == Some(Op::KernelLaunch)
}

/// A stream-ordered free (`cuMemFreeAsync`), as opposed to a synchronous one.
pub fn is_async_free(api: Api) -> bool {
    matches!(api.op(), Some(Op::Free(_))) && api.is_async()
}

/// A stream-ordered allocation (`cuMemAllocAsync`, `cuMemAllocFromPoolAsync`).
pub fn is_async_alloc(api: Api) -> bool {
    api.mem_kind() == Some(MemKind::Async) && !is_async_free(api)
}

/// A prefetch or discard of managed memory (a `RangeOp` record's API).
pub fn is_range_op(api: Api) -> bool {
    api.op() == Some(Op::Prefetch) || is_discard(api)
}

/// A discard of managed memory (its contents become undefined: a write, for the order of
/// work), with or without a prefetch after it.
pub fn is_discard(api: Api) -> bool {
    matches!(api.op(), Some(Op::Discard | Op::DiscardAndPrefetch))
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
    matches!(api.op(), Some(Op::Free(_))) && api.is_synchronizing()
}

/// Waits that block the host (a query only counts when it succeeded).
pub fn is_event_wait(api: Api) -> bool {
    api.op() == Some(Op::EventSync)
}

/// Whether an `ExtSemaphoreOp` is a signal (else a wait).
pub fn is_semaphore_signal(api: Api) -> bool {
    api.op() == Some(Op::SemaphoreSignal)
}

/// Whether an `ExtSemaphore` record is a destroy (else an import).
pub fn is_semaphore_destroy(api: Api) -> bool {
    api.op() == Some(Op::SemaphoreDestroy)
}

/// An entry point that adds a node to a graph by hand (a node made by anything else was
/// captured from a stream).
pub fn adds_graph_node(api: Api) -> bool {
    matches!(api.op(), Some(Op::GraphBuild | Op::Alloc(MemKind::Graph)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn graph_nodes_are_added_by_hand_by_the_graph_builders_only() {
        // The hand-written list `adds_graph_node` replaced on 2026-12-06.
        let listed = [
            Api::cuGraphAddKernelNode,
            Api::cuGraphAddKernelNode_v2,
            Api::cuGraphAddMemcpyNode,
            Api::cuGraphAddMemsetNode,
            Api::cuGraphAddMemAllocNode,
            Api::cuGraphAddMemFreeNode,
            Api::cuGraphAddNode,
            Api::cuGraphAddNode_v2,
        ];
        for (api, name) in Api::ALL {
            assert_eq!(adds_graph_node(*api), listed.contains(api), "{name}");
        }
    }
}
