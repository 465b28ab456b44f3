//! Where graph nodes come from (`GraphNode` records), so that a finding about a graph launch
//! can name the call behind the node at fault rather than only `cuGraphLaunch`: a kernel
//! launch, copy, memset, stream-ordered allocation or free captured into a graph, or a
//! kernel, memcpy, memset, allocation or free node added by hand; and graphs destroyed, whose
//! node handles may come back in another graph.
//!
//! A captured call's node is the capture's one dependency just after the call
//! (`cuStreamGetCaptureInfo`: each captured operation becomes the node later work depends
//! on). Asking costs a driver call, so it is asked only while a capture may be under way:
//! successful `cuStreamBeginCapture*` calls count up and ending calls count down, and the hot
//! hooks read the count with one relaxed load. A capture the program never ends leaves the
//! count up, which costs those calls a query each and changes nothing else.
//!
//! Every such record carries a stack whatever `GPULEAK_SYNC_STACKS` says: a graph is
//! captured or built once and replayed many times, so the stack costs once.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, Ordering};

use gpuleak_format::{Api, GraphNode};

use crate::cuda::*;
use crate::dlsym::{driver_fn, Getter};
use crate::guard::{self, HookGuard};
use crate::tracer;

/// Captures begun and not yet ended, as far as the hooks saw.
static CAPTURES: AtomicU32 = AtomicU32::new(0);

/// `CU_STREAM_CAPTURE_STATUS_ACTIVE`.
const CAPTURE_ACTIVE: u32 = 1;

/// After a `cuStreamBeginCapture*` call that returned `r`.
pub fn capture_began(r: CUresult) {
    if r == CUDA_SUCCESS {
        CAPTURES.fetch_add(1, Ordering::Relaxed);
    }
}

/// After a `cuStreamEndCapture` call that returned `r`: a capture ends when the call
/// succeeds, and when it reports the capture invalidated.
pub fn capture_ended(r: CUresult) {
    if r == CUDA_SUCCESS || r == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED {
        // An end the hooks did not see begin (a count already 0) stays at 0.
        let _ = CAPTURES.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }
}

/// Whether work queued by `api` on `stream` may become a graph node: never while no capture
/// is under way as far as the hooks saw (one relaxed load, no driver call); otherwise as the
/// driver's getter `cuStreamIsCapturing` says, a stream it cannot answer for counting as
/// capturing. The legacy default stream (handle 0 of a plain entry point, or
/// `CU_STREAM_LEGACY`) cannot be captured and is never asked about: its query while another
/// stream captures is an error of its own.
pub fn may_be_captured(api: Api, stream: CUstream) -> bool {
    if CAPTURES.load(Ordering::Relaxed) == 0 {
        return false;
    }
    let stream = match stream as usize {
        0 if api.per_thread() => CU_STREAM_PER_THREAD,
        0 | 1 => return false,
        _ => stream,
    };
    let Some(f) = driver_fn(Getter::cuStreamIsCapturing) else {
        return true;
    };
    type IsCapturing = unsafe extern "C" fn(CUstream, *mut u32) -> CUresult;
    // SAFETY: the driver's cuStreamIsCapturing, found by name, with its C signature.
    let f: IsCapturing = unsafe { std::mem::transmute::<usize, IsCapturing>(f) };
    let mut status = 0u32;
    // SAFETY: the program's stream handle, which it is about to queue work on; `status` is a
    // valid out-parameter.
    let r = unsafe { f(stream, &mut status) };
    r != CUDA_SUCCESS || status != 0
}

/// After a kernel launch, copy or memset `api` on `stream` returned `r` (and its record was
/// written): while a capture may be under way, records the node the call added to it.
#[inline(always)]
pub fn after_work(g: &HookGuard, api: Api, r: CUresult, stream: CUstream) {
    if CAPTURES.load(Ordering::Relaxed) != 0 {
        captured(g, api, r, stream);
    }
}

/// After a stream-ordered allocation or free `api` on `stream` returned `r` (and its record
/// was written, its guard dropped): as [`after_work`].
#[inline(always)]
pub fn after_memory(api: Api, r: CUresult, stream: CUstream) {
    if CAPTURES.load(Ordering::Relaxed) != 0 {
        if let Some(g) = guard::enter() {
            captured(&g, api, r, stream);
        }
    }
}

#[cold]
#[inline(never)]
fn captured(g: &HookGuard, api: Api, r: CUresult, stream: CUstream) {
    if r != CUDA_SUCCESS {
        return;
    }
    let name = api.name().unwrap_or("");
    // The `_ptsz` and `_ptds` entry points read stream 0 as the per-thread default stream,
    // which the query names by its own handle.
    let stream = if stream.is_null() && api.per_thread() {
        CU_STREAM_PER_THREAD
    } else {
        stream
    };
    let kind = if name.starts_with("cuMemset") {
        GraphNode::MEMSET
    } else if name.starts_with("cuMemcpy") {
        GraphNode::MEMCPY
    } else if name.starts_with("cuMemAlloc") {
        GraphNode::MEM_ALLOC
    } else if name.starts_with("cuMemFree") {
        GraphNode::MEM_FREE
    } else {
        GraphNode::KERNEL
    };
    if let Some((graph, node)) = capture_node(stream) {
        made(g, api, kind, graph, node);
    }
}

/// The graph `stream` is capturing into and its one current dependency, if it is capturing
/// and has exactly one.
fn capture_node(stream: CUstream) -> Option<(u64, u64)> {
    let mut status = 0u32;
    let mut id = 0u64;
    let mut graph: CUgraph = std::ptr::null_mut();
    let mut deps: *const CUgraphNode = std::ptr::null();
    let mut count = 0usize;
    let r = if let Some(f) = driver_fn(Getter::cuStreamGetCaptureInfo_v3) {
        type V3 = unsafe extern "C" fn(
            CUstream,
            *mut u32,
            *mut u64,
            *mut CUgraph,
            *mut *const CUgraphNode,
            *mut *const c_void,
            *mut usize,
        ) -> CUresult;
        // SAFETY: the driver's cuStreamGetCaptureInfo_v3 (12.3), found by name, with its C
        // signature.
        let f: V3 = unsafe { std::mem::transmute::<usize, V3>(f) };
        let mut edges: *const c_void = std::ptr::null();
        // SAFETY: every out-parameter is a valid local; edge data is asked for, so a capture
        // with edge data is not refused as a lossy query.
        unsafe {
            f(
                stream,
                &mut status,
                &mut id,
                &mut graph,
                &mut deps,
                &mut edges,
                &mut count,
            )
        }
    } else {
        let f = driver_fn(Getter::cuStreamGetCaptureInfo_v2)?;
        type V2 = unsafe extern "C" fn(
            CUstream,
            *mut u32,
            *mut u64,
            *mut CUgraph,
            *mut *const CUgraphNode,
            *mut usize,
        ) -> CUresult;
        // SAFETY: the driver's cuStreamGetCaptureInfo_v2 (11.3), found by name, with its C
        // signature.
        let f: V2 = unsafe { std::mem::transmute::<usize, V2>(f) };
        // SAFETY: every out-parameter is a valid local.
        unsafe { f(stream, &mut status, &mut id, &mut graph, &mut deps, &mut count) }
    };
    if r != CUDA_SUCCESS || status != CAPTURE_ACTIVE || count != 1 || deps.is_null() || graph.is_null() {
        return None;
    }
    // SAFETY: on success the driver points `deps` at `count` (1) nodes, valid until the next
    // call on the stream; this thread makes none before reading it.
    let node = unsafe { deps.read() };
    (!node.is_null()).then_some((graph as u64, node as u64))
}

/// Writes that `api` made `node`, of type `kind`, in `graph`, with the call's stack.
fn made(g: &HookGuard, api: Api, kind: u32, graph: u64, node: u64) {
    let stack = tracer::call_stack(g);
    tracer::event_fields(
        g,
        &GraphNode {
            api,
            graph,
            node,
            kind,
            stack,
        },
    );
}

/// After `api` tried to add a node of type `kind` to `graph` (under guard `g`) and returned
/// `r`: on success, records the node `out` names.
pub(super) fn added(g: Option<&HookGuard>, api: Api, kind: u32, r: CUresult, graph: CUgraph, out: Out<CUgraphNode>) {
    let Some(g) = g else { return };
    let Some(node) = out.after(r) else { return };
    if !node.is_null() {
        made(g, api, kind, graph as u64, node as u64);
    }
}

/// `cuGraphAddKernelNode` (10.0) and `cuGraphAddKernelNode_v2` (12.0): the parameters are
/// only passed through.
pub fn add_kernel_node(
    api: Api,
    real: impl FnOnce() -> CUresult,
    node: Out<CUgraphNode>,
    graph: CUgraph,
    _deps: *const CUgraphNode,
    _ndeps: usize,
    _params: *const c_void,
) -> CUresult {
    let g = guard::enter();
    let r = real();
    added(g.as_ref(), api, GraphNode::KERNEL, r, graph, node);
    r
}

/// `cuGraphAddMemcpyNode` and `cuGraphAddMemsetNode` (10.0): parameters and context only
/// passed through.
#[allow(clippy::too_many_arguments)]
pub fn add_copy_node(
    api: Api,
    real: impl FnOnce() -> CUresult,
    node: Out<CUgraphNode>,
    graph: CUgraph,
    _deps: *const CUgraphNode,
    _ndeps: usize,
    _params: *const c_void,
    _ctx: CUcontext,
) -> CUresult {
    let g = guard::enter();
    let r = real();
    let kind = if api == Api::cuGraphAddMemsetNode {
        GraphNode::MEMSET
    } else {
        GraphNode::MEMCPY
    };
    added(g.as_ref(), api, kind, r, graph, node);
    r
}

/// `cuGraphAddMemFreeNode` (11.4): the address is only passed through.
pub fn add_mem_free_node(
    api: Api,
    real: impl FnOnce() -> CUresult,
    node: Out<CUgraphNode>,
    graph: CUgraph,
    _deps: *const CUgraphNode,
    _ndeps: usize,
    _dptr: CUdeviceptr,
) -> CUresult {
    let g = guard::enter();
    let r = real();
    added(g.as_ref(), api, GraphNode::MEM_FREE, r, graph, node);
    r
}

/// After `cuGraphAddNode[_v2]` returned `r` for a node of type `kind`: records a kernel,
/// memcpy, memset, allocation or free node.
pub(super) fn generic_added(g: &HookGuard, api: Api, kind: u32, r: CUresult, graph: CUgraph, out: Out<CUgraphNode>) {
    if matches!(
        kind,
        CU_GRAPH_NODE_TYPE_KERNEL
            | CU_GRAPH_NODE_TYPE_MEMCPY
            | CU_GRAPH_NODE_TYPE_MEMSET
            | CU_GRAPH_NODE_TYPE_MEM_ALLOC
            | CU_GRAPH_NODE_TYPE_MEM_FREE
    ) {
        added(Some(g), api, kind, r, graph, out);
    }
}

/// `cuGraphDestroy`: on success, a record with node 0 (the graph's node handles are free to
/// come back).
pub fn destroy(api: Api, real: impl FnOnce() -> CUresult, graph: CUgraph) -> CUresult {
    let g = guard::enter();
    let r = real();
    if let (Some(g), CUDA_SUCCESS) = (&g, r) {
        tracer::event_fields(
            g,
            &GraphNode {
                api,
                graph: graph as u64,
                node: 0,
                kind: 0,
                stack: gpuleak_format::StackId::NONE,
            },
        );
    }
    r
}
