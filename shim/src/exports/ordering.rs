//! Handlers of the stream-ordering calls: synchronizations and successful queries, event
//! records and stream waits, copies, memsets, kernel launches, host callbacks and stream
//! capture.
//!
//! These are the hot calls of a GPU program (a training step makes thousands), so each
//! handler does the least that lets the analyzer rebuild the happens-before order: one fixed
//! record, no allocation, no lock, and no stack unless `GPULEAK_SYNC_STACKS` asks for one.
//! Every record is numbered after the driver returned: the edge or the work it describes
//! exists from then on.
//!
//! Host functions and stream callbacks are handed to the driver wrapped, so that the trace
//! shows when each runs (`HostFnQueued` and `HostFnRan`, [`host_fns`]). Later entry points
//! reuse the same record kinds: `cuLaunchKernelEx` a `Launch` with the stream of its `CUlaunchConfig`;
//! `cuGraphLaunch` a `Launch` of the executable graph with no pointers (what its nodes touch
//! is listed at instantiation: `graph_accesses`); 2D and 3D copies a `Copy` whose addresses and length come from
//! their descriptor ([`regions`]); copies to and from arrays a `Copy` whose array side is 0
//! ([`arrays`]). Stream memory operations have their own kind, `MemOp`
//! ([`memops`]), external semaphores theirs, `ExtSemaphore` and `ExtSemaphoreOp`
//! ([`semaphores`]), and prefetches and discards of managed memory `RangeOp` ([`ranges`]).

mod arrays;
mod copies;
pub mod host_fns;
mod launches;
pub mod memops;
pub mod ranges;
pub(crate) mod regions;
pub mod semaphores;

pub use arrays::*;
pub use copies::*;
pub use launches::*;

use std::ffi::c_void;

use gpuleak_format::{Api, Capture, Ctx, CuResult, Event, EventRecord, Fields, StackId, Stream, StreamWait, Sync};

use super::graph_nodes;
use crate::cuda::*;
use crate::guard;
use crate::tracer;

/// Runs the real call, then records what `make` builds from its result (a record kind
/// without a stack field).
#[inline(always)]
fn plain<'b, F: Fields<'b>>(call: impl FnOnce() -> CUresult, make: impl FnOnce(CuResult) -> F) -> CUresult {
    let Some(g) = guard::enter() else {
        return call();
    };
    let r = call();
    tracer::event_fields(&g, &make(CuResult(r)));
    r
}

/// Like [`plain`], for the kinds with a stack field (copies, memsets, call `api` on
/// `stream`): the stack is captured only as `GPULEAK_SYNC_STACKS` asks; during a capture, the
/// node the call added is recorded ([`graph_nodes`]).
#[inline(always)]
fn sampled<'b, F: Fields<'b>>(
    (api, stream): (Api, CUstream),
    call: impl FnOnce() -> CUresult,
    make: impl FnOnce(CuResult, StackId) -> F,
) -> CUresult {
    let Some(g) = guard::enter() else {
        return call();
    };
    let r = call();
    tracer::hot_event(&g, |stack| make(CuResult(r), stack));
    graph_nodes::after_work(&g, api, r, stream);
    r
}

/// Runs a batch call and records one record per entry, `entry(i)` giving entry `i`, read
/// after a successful call (the driver has read the batch then) and only when `readable`, all
/// with the one stack the call gets (as `GPULEAK_SYNC_STACKS` asks); a refused or empty batch
/// is one record of `E::default()`.
#[inline(always)]
fn batched<'b, E: std::marker::Copy + Default, F: Fields<'b>>(
    (count, readable): (usize, bool),
    call: impl FnOnce() -> CUresult,
    entry: impl Fn(usize) -> E,
    make: impl Fn(CuResult, E, StackId) -> F,
) -> CUresult {
    let Some(g) = guard::enter() else {
        return call();
    };
    let r = call();
    let ok = r == CUDA_SUCCESS && readable && count > 0;
    let first = if ok { entry(0) } else { E::default() };
    let mut stack = StackId::NONE;
    tracer::hot_event(&g, |s| {
        stack = s;
        make(CuResult(r), first, s)
    });
    if ok {
        for i in 1..count {
            tracer::event_fields(&g, &make(CuResult(r), entry(i), stack));
        }
    }
    r
}

fn sync_body(api: Api, r: CuResult, stream: u64, event: u64, ctx: u64) -> Sync {
    Sync {
        api,
        result: r,
        stream: Stream(stream),
        event: Event(event),
        ctx: Ctx(ctx),
    }
}

/// `cuStreamSynchronize[_ptsz]`.
pub fn stream_sync(api: Api, real: impl FnOnce() -> CUresult, stream: CUstream) -> CUresult {
    plain(real, |r| sync_body(api, r, stream as u64, 0, 0))
}

/// `cuStreamQuery[_ptsz]`: only a successful query is an edge (and is recorded); a stream
/// still busy (`CUDA_ERROR_NOT_READY`) tells the program nothing, and polling loops would
/// fill the trace.
pub fn stream_query(api: Api, real: impl FnOnce() -> CUresult, stream: CUstream) -> CUresult {
    let Some(g) = guard::enter() else {
        return real();
    };
    let r = real();
    if r == CUDA_SUCCESS {
        tracer::event_fields(&g, &sync_body(api, CuResult(r), stream as u64, 0, 0));
    }
    r
}

/// `cuEventSynchronize`.
pub fn event_sync(api: Api, real: impl FnOnce() -> CUresult, event: CUevent) -> CUresult {
    plain(real, |r| sync_body(api, r, 0, event as u64, 0))
}

/// `cuEventQuery`: recorded only when it succeeds, as for streams.
pub fn event_query(api: Api, real: impl FnOnce() -> CUresult, event: CUevent) -> CUresult {
    let Some(g) = guard::enter() else {
        return real();
    };
    let r = real();
    if r == CUDA_SUCCESS {
        tracer::event_fields(&g, &sync_body(api, CuResult(r), 0, event as u64, 0));
    }
    r
}

/// `cuCtxSynchronize`: the current context (recorded as context 0).
pub fn ctx_sync(api: Api, real: impl FnOnce() -> CUresult) -> CUresult {
    plain(real, |r| sync_body(api, r, 0, 0, 0))
}

/// `cuCtxSynchronize_v2`: a named context (NULL: the current one).
pub fn ctx_sync_v2(api: Api, real: impl FnOnce() -> CUresult, ctx: CUcontext) -> CUresult {
    plain(real, |r| sync_body(api, r, 0, 0, ctx as u64))
}

/// `cuStreamWaitEvent[_ptsz]`.
pub fn stream_wait(
    api: Api,
    real: impl FnOnce() -> CUresult,
    stream: CUstream,
    event: CUevent,
    flags: u32,
) -> CUresult {
    plain(real, |r| wait_body(api, r, stream, event, flags))
}

fn wait_body(api: Api, r: CuResult, stream: *mut c_void, event: CUevent, flags: u32) -> StreamWait {
    StreamWait {
        api,
        result: r,
        stream: Stream(stream as u64),
        event: Event(event as u64),
        flags,
    }
}

fn record_body(api: Api, r: CuResult, event: CUevent, stream: CUstream, flags: u32) -> EventRecord {
    EventRecord {
        api,
        result: r,
        event: Event(event as u64),
        stream: Stream(stream as u64),
        flags,
    }
}

/// `cuEventRecord[_ptsz]`.
pub fn event_record(api: Api, real: impl FnOnce() -> CUresult, event: CUevent, stream: CUstream) -> CUresult {
    plain(real, |r| record_body(api, r, event, stream, 0))
}

/// `cuEventRecordWithFlags[_ptsz]`.
pub fn event_record_flags(
    api: Api,
    real: impl FnOnce() -> CUresult,
    event: CUevent,
    stream: CUstream,
    flags: u32,
) -> CUresult {
    plain(real, |r| record_body(api, r, event, stream, flags))
}

/// `cuCtxRecordEvent`, `cuGreenCtxRecordEvent`: the event captures all the work of the
/// context (or green context) `ctx`, which the record carries in its `stream` field.
pub fn ctx_record_event(api: Api, real: impl FnOnce() -> CUresult, ctx: *mut c_void, event: CUevent) -> CUresult {
    plain(real, |r| record_body(api, r, event, ctx, 0))
}

/// `cuCtxWaitEvent`, `cuGreenCtxWaitEvent`: all later work of the context (or green context)
/// `ctx` waits for the event; the record carries `ctx` in its `stream` field.
pub fn ctx_wait_event(api: Api, real: impl FnOnce() -> CUresult, ctx: *mut c_void, event: CUevent) -> CUresult {
    plain(real, |r| wait_body(api, r, ctx, event, 0))
}

fn capture_body(api: Api, r: CuResult, stream: CUstream, begin: bool, aux: u64) -> Capture {
    Capture {
        api,
        result: r,
        stream: Stream(stream as u64),
        begin: u32::from(begin),
        aux,
    }
}

/// `cuStreamBeginCapture_v2[_ptsz]` (`aux` = mode).
pub fn begin_capture(api: Api, real: impl FnOnce() -> CUresult, stream: CUstream, mode: u32) -> CUresult {
    let r = plain(real, |r| capture_body(api, r, stream, true, u64::from(mode)));
    graph_nodes::capture_began(r);
    r
}

/// `cuStreamBeginCaptureToGraph[_ptsz]`: a capture into the program's graph (`aux` = mode).
#[allow(clippy::too_many_arguments)]
pub fn begin_capture_to_graph(
    api: Api,
    real: impl FnOnce() -> CUresult,
    stream: CUstream,
    _graph: CUgraph,
    _deps: *const CUgraphNode,
    _edges: *const c_void,
    _ndeps: usize,
    mode: u32,
) -> CUresult {
    let r = plain(real, |r| capture_body(api, r, stream, true, u64::from(mode)));
    graph_nodes::capture_began(r);
    r
}

/// `cuStreamBeginCapture[_ptsz]`, the first ABI (global mode).
pub fn begin_capture_v1(api: Api, real: impl FnOnce() -> CUresult, stream: CUstream) -> CUresult {
    let r = plain(real, |r| capture_body(api, r, stream, true, 0));
    graph_nodes::capture_began(r);
    r
}

/// `cuStreamEndCapture[_ptsz]` (`aux` = the graph, on success).
pub fn end_capture(api: Api, real: impl FnOnce() -> CUresult, stream: CUstream, graph: Out<CUgraph>) -> CUresult {
    let Some(g) = guard::enter() else {
        let r = real();
        graph_nodes::capture_ended(r);
        return r;
    };
    let r = real();
    graph_nodes::capture_ended(r);
    let aux = graph.after(r).map_or(0, |h| h as u64);
    tracer::event_fields(&g, &capture_body(api, CuResult(r), stream, false, aux));
    r
}
