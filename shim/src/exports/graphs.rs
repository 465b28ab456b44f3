//! Graph memory: allocation nodes added by hand (`cuGraphAddMemAllocNode`, or the generic
//! `cuGraphAddNode[_v2]` given allocation parameters: an `Alloc` record of the node, no memory,
//! but its address, size and stack), and instantiations (`cuGraphInstantiate*`), after which
//! the shim lists the memory nodes of the graph and of its child graphs with the driver's
//! getters (`GraphMem` records, and `GraphMemNodes` naming each node, for the order between
//! them and the nodes that use their memory) and records the executable graph (`GraphExec`).
//! The analyzer turns each later `cuGraphLaunch` of it into the allocations and frees its
//! nodes make.
//!
//! Graph events: the same listing finds the event record and wait nodes (`GraphEvents`
//! records, whether captured with `CU_EVENT_RECORD_EXTERNAL` or added by hand with
//! `cuGraphAddEventRecordNode`, `cuGraphAddEventWaitNode` or `cuGraphAddNode`), which each
//! launch records and waits for. Changes to an executable graph's event nodes are recorded
//! too (`GraphUpdate`): a node's new event (`cuGraphExecEventRecordNodeSetEvent`,
//! `cuGraphExecEventWaitNodeSetEvent`, `cuGraphExecNodeSetParams`), and updates that take
//! another graph's parameters (`cuGraphExecUpdate[_v2]`, `cuGraphExecChildGraphNodeSetParams`),
//! after which the shim lists that graph's event nodes.
//!
//! Graph accesses: the same listing reads the parameters of kernel, memcpy and memset nodes,
//! what each launch touches (`GraphAccesses` records, see `graph_accesses`, which also hooks
//! the setters that change one node of an executable graph).
//!
//! Listing costs one driver call per node of the graph (two per memory, event, memcpy or
//! memset node, three per kernel node), once per instantiation or update (itself far
//! dearer); launches cost nothing more than before.
//!
//! This module adds nodes and instantiates; `graph_listing` lists a graph and writes its
//! records, `graph_updates` follows changes to an executable graph, and `ops::graph_live` keeps
//! the live gauges of graph memory.

use std::borrow::Cow;
use std::ffi::c_void;

use gpuleak_format::{Addrs, Api, CuResult, GraphExec, GraphMem, GraphNode, MemLocation, Stream};

use super::{graph_accesses, graph_listing, graph_nodes};
use crate::cuda::*;
use crate::guard::{self, HookGuard};
use crate::ops;
use crate::ops::graph_live;
use crate::tracer;

/// `cuGraphAddMemAllocNode`: the node's address, size and location, after the driver
/// returned.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `params` is NULL or the program's allocation node
/// parameters, into which the driver writes the address.
pub unsafe fn add_mem_alloc_node(
    api: Api,
    real: impl FnOnce() -> CUresult,
    node: Out<CUgraphNode>,
    graph: CUgraph,
    _deps: *const CUgraphNode,
    _ndeps: usize,
    params: *mut CUDA_MEM_ALLOC_NODE_PARAMS,
) -> CUresult {
    let g = guard::enter();
    let r = real();
    if let Some(g) = &g {
        // SAFETY: the contract above: `params` is NULL or the program's parameters, which
        // `alloc_node_made` reads only after success, when the driver has read them whole
        // and written `dptr`.
        unsafe { alloc_node_made(g, api, r, params) };
    }
    graph_nodes::added(g.as_ref(), api, GraphNode::MEM_ALLOC, r, graph, node);
    r
}

/// `cuGraphAddNode` (CUDA 12.2): an allocation node is recorded as by
/// `cuGraphAddMemAllocNode`; where a kernel, memcpy, memset, allocation or free node came
/// from is recorded (`graph_nodes`).
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `params` is NULL or the program's
/// `CUgraphNodeParams`.
pub unsafe fn add_node(
    api: Api,
    real: impl FnOnce() -> CUresult,
    node: Out<CUgraphNode>,
    graph: CUgraph,
    _deps: *const CUgraphNode,
    _ndeps: usize,
    params: *mut CUgraphNodeParamsHead,
) -> CUresult {
    let g = guard::enter();
    let r = real();
    // SAFETY: the contract above: `params` is NULL or the program's parameters of this call,
    // which `generic_node_made` reads only after success.
    unsafe { generic_node_made(&g, api, r, params, graph, node) };
    r
}

/// `cuGraphAddNode_v2` (CUDA 12.3; `cuGraphAddNode` in CUDA 13's header): as
/// [`add_node`], with edge data.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `params` is NULL or the program's
/// `CUgraphNodeParams`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn add_node_v2(
    api: Api,
    real: impl FnOnce() -> CUresult,
    node: Out<CUgraphNode>,
    graph: CUgraph,
    _deps: *const CUgraphNode,
    _edges: *const c_void,
    _ndeps: usize,
    params: *mut CUgraphNodeParamsHead,
) -> CUresult {
    let g = guard::enter();
    let r = real();
    // SAFETY: as in `add_node`.
    unsafe { generic_node_made(&g, api, r, params, graph, node) };
    r
}

/// After `cuGraphAddNode[_v2]` returned `r`: records the node if the parameters made an
/// allocation node, and where a kernel, memcpy, memset, allocation or free node came from
/// (`graph_nodes`). A failed call is not recorded: the driver may have refused it before
/// reading the structure, which may then not be readable, so whether it asked for an
/// allocation node cannot be told safely.
///
/// # Safety
/// `params` is the caller's parameter of that call.
unsafe fn generic_node_made(
    g: &Option<HookGuard>,
    api: Api,
    r: CUresult,
    params: *mut CUgraphNodeParamsHead,
    graph: CUgraph,
    node: Out<CUgraphNode>,
) {
    let Some(g) = g else { return };
    if r != CUDA_SUCCESS || params.is_null() {
        return;
    }
    // SAFETY: the driver read the structure (it succeeded); its type member is the first.
    let kind = unsafe { (*params).kind };
    if kind == CU_GRAPH_NODE_TYPE_MEM_ALLOC {
        // SAFETY: an allocation node's parameters are the union's allocation member.
        unsafe { alloc_node_made(g, api, r, &raw mut (*params).alloc) };
    }
    graph_nodes::generic_added(g, api, kind, r, graph, node);
}

/// Records an allocation node the call `api` made (or failed to make, `r`): an `Alloc`
/// record of its address, size and location (`aux`, as [`MemLocation::encode`] writes it).
///
/// # Safety
/// `params` is null or the call's parameters, read by the driver, `dptr` written on success.
unsafe fn alloc_node_made(g: &HookGuard, api: Api, r: CUresult, params: *const CUDA_MEM_ALLOC_NODE_PARAMS) {
    let (ptr, size, location) = if r == CUDA_SUCCESS && !params.is_null() {
        // SAFETY: the contract above.
        let p = unsafe { &*params };
        (p.dptr, p.bytesize as u64, node_location(p))
    } else {
        (0, 0, 0)
    };
    let stack = tracer::alloc(g, api, r, Stream(0), ptr, size, location);
    if r == CUDA_SUCCESS {
        graph_live::node_made(crate::ops::flags(), ptr, stack);
    }
}

/// An allocation node's location, as [`MemLocation::encode`] writes it.
pub(super) fn node_location(p: &CUDA_MEM_ALLOC_NODE_PARAMS) -> u64 {
    MemLocation::encode(p.pool_props.location_type, p.pool_props.location_id)
}

/// `cuGraphInstantiate` and `cuGraphInstantiate_v2` (the error node and log ABI; no flags).
pub fn instantiate_logged(
    api: Api,
    real: impl FnOnce() -> CUresult,
    exec: Out<CUgraphExec>,
    graph: CUgraph,
    _error_node: *mut CUgraphNode,
    _log: *mut c_void,
    _log_size: usize,
) -> CUresult {
    let g = guard::enter();
    let r = real();
    instantiated(&g, api, r, exec, graph, 0);
    r
}

/// `cuGraphInstantiateWithFlags`.
pub fn instantiate_flags(
    api: Api,
    real: impl FnOnce() -> CUresult,
    exec: Out<CUgraphExec>,
    graph: CUgraph,
    flags: u64,
) -> CUresult {
    let g = guard::enter();
    let r = real();
    instantiated(&g, api, r, exec, graph, flags);
    r
}

/// `cuGraphInstantiateWithParams[_ptsz]`: the flags are the parameters' first member.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `params` is NULL or the program's instantiation
/// parameters.
pub unsafe fn instantiate_params(
    api: Api,
    real: impl FnOnce() -> CUresult,
    exec: Out<CUgraphExec>,
    graph: CUgraph,
    params: *mut CUDA_GRAPH_INSTANTIATE_PARAMS_HEAD,
) -> CUresult {
    let g = guard::enter();
    let r = real();
    let flags = if r == CUDA_SUCCESS && !params.is_null() {
        // SAFETY: the contract above: not NULL, so the program's parameters, readable while
        // its call runs (and read by the driver, which succeeded).
        unsafe { (*params).flags }
    } else {
        0
    };
    instantiated(&g, api, r, exec, graph, flags);
    r
}

/// After an instantiation returned `r`: on success lists `graph`'s memory nodes (`GraphMem`
/// and `GraphMemNodes` records), its event nodes, what its nodes touch and its edges (`GraphEvents`,
/// `GraphAccesses`, `GraphEdges`), then records the `GraphExec`.
///
fn instantiated(g: &Option<HookGuard>, api: Api, r: CUresult, exec: Out<CUgraphExec>, graph: CUgraph, flags: u64) {
    let Some(g) = g else { return };
    if tracer::get().is_none() {
        return;
    }
    let handle = exec.after(r).map_or(0, |e| e as u64);
    let listing = if handle != 0 {
        graph_listing::list_nodes(graph, 0, true)
    } else {
        None
    };
    let (nodes, memory_nodes, events, accesses, edges) = match listing {
        Some(l) => (l.memory, Some(l.memory_nodes), l.events, Some(l.accesses), l.edges),
        None => (None, None, None, None, None),
    };
    let (allocs, frees) = nodes.as_ref().map_or((&[][..], &[][..]), |(a, f)| (&a[..], &f[..]));
    graph_listing::in_chunk_pairs(
        (allocs, GraphMem::MAX_NODES * 3),
        (frees, GraphMem::MAX_NODES),
        false,
        |a, f| {
            tracer::event(
                g,
                GraphMem {
                    exec: handle,
                    allocs: Addrs(Cow::Borrowed(a)),
                    frees: Addrs(Cow::Borrowed(f)),
                },
            )
        },
    );
    if let Some((allocs, frees)) = memory_nodes.as_ref().filter(|_| nodes.is_some()) {
        graph_listing::write_memory_nodes(g, handle, allocs, frees);
    }
    if let Some((records, waits)) = &events {
        graph_listing::write_events(g, handle, records, waits);
    }
    if let Some(accesses) = &accesses {
        graph_accesses::write(g, handle, accesses);
    }
    if let Some(edges) = &edges {
        graph_listing::write_edges(g, handle, edges);
    }
    let stack = tracer::call_stack(g);
    if let Some((allocs, frees)) = nodes.as_ref().filter(|_| ops::flags() & ops::LIVE != 0) {
        graph_live::exec_made(
            handle,
            allocs,
            frees,
            flags & GraphExec::AUTO_FREE_ON_LAUNCH != 0,
            stack,
        );
    }
    tracer::event(
        g,
        GraphExec {
            api,
            via: guard::via(),
            result: CuResult(r),
            exec: handle,
            graph: graph as u64,
            flags,
            alloc_nodes: (allocs.len() / 3) as u32,
            free_nodes: frees.len() as u32,
            nodes_known: u32::from(nodes.is_some()),
            stack,
        },
    );
}
