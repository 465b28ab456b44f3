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

use std::borrow::Cow;
use std::collections::HashMap;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::sync::atomic::{AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use gpuleak_format::{
    Addrs, Api, CuResult, GraphEdges, GraphEvents, GraphExec, GraphMem, GraphMemNodes, GraphNode, GraphUpdate, MemKind,
    MemLocation, StackId, Stream,
};

use super::{graph_accesses, graph_nodes};
use crate::cuda::*;
use crate::dl::driver_fn;
use crate::guard::{self, HookGuard};
use crate::ops::{self, live};
use crate::tracer;

/// `cuGraphAddMemAllocNode`: the node's address, size and location, after the driver
/// returned.
pub unsafe fn add_mem_alloc_node(
    api: Api,
    real: unsafe extern "C" fn(
        *mut CUgraphNode,
        CUgraph,
        *const CUgraphNode,
        usize,
        *mut CUDA_MEM_ALLOC_NODE_PARAMS,
    ) -> CUresult,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    ndeps: usize,
    params: *mut CUDA_MEM_ALLOC_NODE_PARAMS,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: passed through unchanged.
    let r = unsafe { real(node, graph, deps, ndeps, params) };
    if let Some(g) = &g {
        // SAFETY: the caller's parameters, which the driver read whole and wrote `dptr` into.
        unsafe { alloc_node_made(g, api, r, params) };
    }
    // SAFETY: the call's node out-parameter.
    unsafe { graph_nodes::added(g.as_ref(), api, GraphNode::MEM_ALLOC, r, graph, node) };
    r
}

/// `cuGraphAddNode` (CUDA 12.2): an allocation node is recorded as by
/// `cuGraphAddMemAllocNode`; where a kernel, memcpy, memset, allocation or free node came
/// from is recorded (`graph_nodes`).
pub unsafe fn add_node(
    api: Api,
    real: unsafe extern "C" fn(
        *mut CUgraphNode,
        CUgraph,
        *const CUgraphNode,
        usize,
        *mut CUgraphNodeParamsHead,
    ) -> CUresult,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    ndeps: usize,
    params: *mut CUgraphNodeParamsHead,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: passed through unchanged.
    let r = unsafe { real(node, graph, deps, ndeps, params) };
    // SAFETY: the caller's parameters and node out-parameter, read after a successful call.
    unsafe { generic_node_made(&g, api, r, params, graph, node) };
    r
}

/// `cuGraphAddNode_v2` (CUDA 12.3; `cuGraphAddNode` in CUDA 13's header): as
/// [`add_node`], with edge data.
#[allow(clippy::too_many_arguments)]
pub unsafe fn add_node_v2(
    api: Api,
    real: unsafe extern "C" fn(
        *mut CUgraphNode,
        CUgraph,
        *const CUgraphNode,
        *const c_void,
        usize,
        *mut CUgraphNodeParamsHead,
    ) -> CUresult,
    node: *mut CUgraphNode,
    graph: CUgraph,
    deps: *const CUgraphNode,
    edges: *const c_void,
    ndeps: usize,
    params: *mut CUgraphNodeParamsHead,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: passed through unchanged.
    let r = unsafe { real(node, graph, deps, edges, ndeps, params) };
    // SAFETY: as above.
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
/// `params` and `node` are the caller's parameters of that call.
unsafe fn generic_node_made(
    g: &Option<HookGuard>,
    api: Api,
    r: CUresult,
    params: *mut CUgraphNodeParamsHead,
    graph: CUgraph,
    node: *mut CUgraphNode,
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
    // SAFETY: the call succeeded, so the driver wrote the node out-parameter.
    unsafe { graph_nodes::generic_added(g, api, kind, graph, node) };
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
        node_made(ptr, stack);
    }
}

/// An allocation node's location, as [`MemLocation::encode`] writes it.
fn node_location(p: &CUDA_MEM_ALLOC_NODE_PARAMS) -> u64 {
    MemLocation::encode(p.pool_props.location_type, p.pool_props.location_id)
}

/// `cuGraphInstantiate` and `cuGraphInstantiate_v2` (the error node and log ABI; no flags).
pub unsafe fn instantiate_logged(
    api: Api,
    real: unsafe extern "C" fn(*mut CUgraphExec, CUgraph, *mut CUgraphNode, *mut c_void, usize) -> CUresult,
    exec: *mut CUgraphExec,
    graph: CUgraph,
    error_node: *mut CUgraphNode,
    log: *mut c_void,
    log_size: usize,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: passed through unchanged.
    let r = unsafe { real(exec, graph, error_node, log, log_size) };
    // SAFETY: the caller's out-parameter, read only on success.
    unsafe { instantiated(&g, api, r, exec, graph, 0) };
    r
}

/// `cuGraphInstantiateWithFlags`.
pub unsafe fn instantiate_flags(
    api: Api,
    real: unsafe extern "C" fn(*mut CUgraphExec, CUgraph, u64) -> CUresult,
    exec: *mut CUgraphExec,
    graph: CUgraph,
    flags: u64,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: passed through unchanged.
    let r = unsafe { real(exec, graph, flags) };
    // SAFETY: as above.
    unsafe { instantiated(&g, api, r, exec, graph, flags) };
    r
}

/// `cuGraphInstantiateWithParams[_ptsz]`: the flags are the parameters' first member.
pub unsafe fn instantiate_params(
    api: Api,
    real: unsafe extern "C" fn(*mut CUgraphExec, CUgraph, *mut CUDA_GRAPH_INSTANTIATE_PARAMS_HEAD) -> CUresult,
    exec: *mut CUgraphExec,
    graph: CUgraph,
    params: *mut CUDA_GRAPH_INSTANTIATE_PARAMS_HEAD,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: passed through unchanged.
    let r = unsafe { real(exec, graph, params) };
    let flags = if r == CUDA_SUCCESS && !params.is_null() {
        // SAFETY: on success the driver has read the structure the caller passed.
        unsafe { (*params).flags }
    } else {
        0
    };
    // SAFETY: as above.
    unsafe { instantiated(&g, api, r, exec, graph, flags) };
    r
}

/// After an instantiation returned `r`: on success lists `graph`'s memory nodes (`GraphMem`
/// and `GraphMemNodes` records), its event nodes, what its nodes touch and its edges (`GraphEvents`,
/// `GraphAccesses`, `GraphEdges`), then records the `GraphExec`.
///
/// # Safety
/// `exec` is the caller's out-parameter of the call that returned `r`.
unsafe fn instantiated(
    g: &Option<HookGuard>,
    api: Api,
    r: CUresult,
    exec: *mut CUgraphExec,
    graph: CUgraph,
    flags: u64,
) {
    let Some(g) = g else { return };
    if tracer::get().is_none() {
        return;
    }
    let handle = if r == CUDA_SUCCESS && !exec.is_null() {
        // SAFETY: on success the driver wrote the out-parameter.
        unsafe { exec.read() as u64 }
    } else {
        0
    };
    let listing = if handle != 0 { list_nodes(graph, 0, true) } else { None };
    let (nodes, memory_nodes, events, accesses, edges) = match listing {
        Some(l) => (l.memory, Some(l.memory_nodes), l.events, Some(l.accesses), l.edges),
        None => (None, None, None, None, None),
    };
    let (allocs, frees) = nodes.as_ref().map_or((&[][..], &[][..]), |(a, f)| (&a[..], &f[..]));
    in_chunk_pairs(
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
        write_memory_nodes(g, handle, allocs, frees);
    }
    if let Some((records, waits)) = &events {
        write_events(g, handle, records, waits);
    }
    if let Some(accesses) = &accesses {
        graph_accesses::write(g, handle, accesses);
    }
    if let Some(edges) = &edges {
        write_edges(g, handle, edges);
    }
    let stack = tracer::call_stack(g);
    if let Some((allocs, frees)) = nodes.as_ref().filter(|_| ops::flags() & ops::LIVE != 0) {
        exec_made(
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

static GET_NODES: AtomicUsize = AtomicUsize::new(0);
static NODE_GET_TYPE: AtomicUsize = AtomicUsize::new(0);
static ALLOC_NODE_PARAMS: AtomicUsize = AtomicUsize::new(0);
static FREE_NODE_PARAMS: AtomicUsize = AtomicUsize::new(0);
static CHILD_GRAPH: AtomicUsize = AtomicUsize::new(0);
static RECORD_NODE_EVENT: AtomicUsize = AtomicUsize::new(0);
static WAIT_NODE_EVENT: AtomicUsize = AtomicUsize::new(0);
static GET_EDGES_V2: AtomicUsize = AtomicUsize::new(0);
static GET_EDGES: AtomicUsize = AtomicUsize::new(0);

/// The most graphs (the graph and the child graphs within it, at any depth) whose nodes one
/// instantiation lists; a graph of more is taken as one whose nodes are unknown.
const MAX_GRAPHS: usize = 4096;

/// The most edges one graph's listing asks for (three arrays of this many entries); a graph
/// of more is taken as one whose order is unknown.
const MAX_EDGES: usize = 1 << 22;

/// What the shim found listing a graph's nodes.
struct Listing {
    /// Allocation nodes as triples `(address, bytes, location)` and the addresses free nodes
    /// free; `None` when a memory node's getter is missing or failed.
    memory: Option<(Vec<u64>, Vec<u64>)>,
    /// The same nodes by handle, as [`GraphMemNodes`] entries (allocation quadruples, free
    /// triples); known when `memory` is.
    memory_nodes: (Vec<u64>, Vec<u64>),
    /// Event record and wait nodes as triples `(node, event, owner)` ([`GraphEvents`]);
    /// `None` when an event node's getter is missing or failed.
    events: Option<(Vec<u64>, Vec<u64>)>,
    /// What kernel, memcpy and memset nodes touch, as [`GraphAccesses`] entries.
    accesses: Vec<u64>,
    /// The dependencies between the nodes, as [`GraphEdges`] entries, when asked for;
    /// `None` when not asked, or when a graph's edges could not be read.
    edges: Option<Vec<u64>>,
}

/// The memory and event nodes of `graph` and of the child graphs within it at any depth (a
/// child graph moved into its parent, `CU_GRAPH_CHILD_GRAPH_OWNERSHIP_MOVE`, may hold memory
/// nodes), asked of the driver's pure getters (`cuGraphGetNodes`, `cuGraphNodeGetType`,
/// `cuGraphMemAllocNodeGetParams`, `cuGraphMemFreeNodeGetParams`,
/// `cuGraphEventRecordNodeGetEvent`, `cuGraphEventWaitNodeGetEvent`,
/// `cuGraphChildGraphNodeGetGraph`, all CUDA 11.4 or older), and what its kernel, memcpy
/// and memset nodes touch (`graph_accesses::list_node`). An event or access node's owner is
/// `owner` when it is not 0 (a child graph's update names its node), else the child graph
/// node of `graph`'s top level it lies within (0 at the top level). With `with_edges`, also
/// the edges of each graph visited (`graph_edges`) and which child graph node each child
/// graph's nodes belong to. `None` when the nodes cannot be listed at all. Conditional
/// nodes' bodies are not visited: they may hold neither memory nodes
/// (`CUDA_CONDITIONAL_NODE_PARAMS`) nor event nodes, and whether a body's kernels run at a
/// launch depends on a value the device sets, so what they touch is left unknown.
fn list_nodes(graph: CUgraph, owner: u64, with_edges: bool) -> Option<Listing> {
    type GetNodes = unsafe extern "C" fn(CUgraph, *mut CUgraphNode, *mut usize) -> CUresult;
    type GetType = unsafe extern "C" fn(CUgraphNode, *mut u32) -> CUresult;
    let get_nodes = driver_fn(&GET_NODES, c"cuGraphGetNodes")?;
    let get_type = driver_fn(&NODE_GET_TYPE, c"cuGraphNodeGetType")?;
    // SAFETY: the driver's own functions, found by name, with their C signatures.
    let (get_nodes, get_type) = unsafe {
        (
            std::mem::transmute::<usize, GetNodes>(get_nodes),
            std::mem::transmute::<usize, GetType>(get_type),
        )
    };
    let (mut allocs, mut frees) = (Vec::new(), Vec::new());
    let (mut alloc_nodes, mut free_nodes) = (Vec::new(), Vec::new());
    let (mut records, mut waits) = (Vec::new(), Vec::new());
    let mut accesses = Vec::new();
    let (mut memory_known, mut events_known) = (true, true);
    let mut edges = with_edges.then(Vec::new);
    // (graph, owner, the child graph node holding it or 0)
    let mut graphs = vec![(graph, owner, 0u64)];
    let mut visited = 0usize;
    while let Some((graph, owner, parent)) = graphs.pop() {
        visited += 1;
        if visited > MAX_GRAPHS {
            return None;
        }
        if let Some(list) = &mut edges {
            if graph_edges(graph, list).is_none() {
                edges = None;
            }
        }
        let mut count = 0usize;
        // SAFETY: a NULL node array asks for the count alone.
        if unsafe { get_nodes(graph, std::ptr::null_mut(), &mut count) } != CUDA_SUCCESS {
            return None;
        }
        let mut nodes: Vec<CUgraphNode> = vec![std::ptr::null_mut(); count];
        let mut got = count;
        // SAFETY: room for `got` handles; the driver writes at most that many.
        if count > 0 && unsafe { get_nodes(graph, nodes.as_mut_ptr(), &mut got) } != CUDA_SUCCESS {
            return None;
        }
        nodes.truncate(got.min(count));
        accesses.reserve(nodes.len() * 4);
        for node in nodes.into_iter().filter(|n| !n.is_null()) {
            if let Some(list) = edges.as_mut().filter(|_| parent != 0) {
                list.extend([GraphEdges::CHILD, parent, node as u64]);
            }
            let mut kind = 0u32;
            // SAFETY: a node of the graph; `kind` is a valid out-pointer.
            if unsafe { get_type(node, &mut kind) } != CUDA_SUCCESS {
                return None;
            }
            match kind {
                CU_GRAPH_NODE_TYPE_MEM_ALLOC => match alloc_node(node) {
                    Some(triple) => {
                        allocs.extend(triple);
                        alloc_nodes.extend([node as u64, owner, triple[0], triple[1]]);
                    }
                    None => memory_known = false,
                },
                CU_GRAPH_NODE_TYPE_MEM_FREE => match free_node(node) {
                    Some(dptr) => {
                        frees.push(dptr);
                        free_nodes.extend([node as u64, owner, dptr]);
                    }
                    None => memory_known = false,
                },
                CU_GRAPH_NODE_TYPE_EVENT_RECORD | CU_GRAPH_NODE_TYPE_WAIT_EVENT => {
                    let record = kind == CU_GRAPH_NODE_TYPE_EVENT_RECORD;
                    match node_event(node, record) {
                        Some(event) => {
                            let list = if record { &mut records } else { &mut waits };
                            list.extend([node as u64, event, owner]);
                        }
                        None => events_known = false,
                    }
                }
                CU_GRAPH_NODE_TYPE_GRAPH => {
                    type ChildGraph = unsafe extern "C" fn(CUgraphNode, *mut CUgraph) -> CUresult;
                    let child_graph = driver_fn(&CHILD_GRAPH, c"cuGraphChildGraphNodeGetGraph")?;
                    // SAFETY: the driver's own function, found by name, with its C signature.
                    let child_graph = unsafe { std::mem::transmute::<usize, ChildGraph>(child_graph) };
                    let mut child: CUgraph = std::ptr::null_mut();
                    // SAFETY: a child graph node; `child` is a valid out-pointer. The handle
                    // is the node's own (not a clone): nothing to destroy.
                    if unsafe { child_graph(node, &mut child) } != CUDA_SUCCESS || child.is_null() {
                        return None;
                    }
                    graphs.push((child, if owner == 0 { node as u64 } else { owner }, node as u64));
                }
                kind => graph_accesses::list_node(node, kind, owner, &mut accesses),
            }
        }
    }
    Some(Listing {
        memory: memory_known.then_some((allocs, frees)),
        memory_nodes: (alloc_nodes, free_nodes),
        events: events_known.then_some((records, waits)),
        accesses,
        edges,
    })
}

/// Appends the edges of `graph` (not of child graphs within it) to `out` as [`GraphEdges`]
/// entries, asked of `cuGraphGetEdges_v2` (12.3) with room for the edges' data, so that
/// edges with data (programmatic dependencies) are listed too, else of `cuGraphGetEdges`
/// (10.0); `None` when neither is there or the driver refuses.
fn graph_edges(graph: CUgraph, out: &mut Vec<u64>) -> Option<()> {
    type GetEdgesV2 =
        unsafe extern "C" fn(CUgraph, *mut CUgraphNode, *mut CUgraphNode, *mut CUgraphEdgeData, *mut usize) -> CUresult;
    type GetEdges = unsafe extern "C" fn(CUgraph, *mut CUgraphNode, *mut CUgraphNode, *mut usize) -> CUresult;
    enum Getter {
        V2(GetEdgesV2),
        V1(GetEdges),
    }
    // SAFETY: the driver's own functions, found by name, with their C signatures.
    let getter = unsafe {
        match driver_fn(&GET_EDGES_V2, c"cuGraphGetEdges_v2") {
            Some(f) => Getter::V2(std::mem::transmute::<usize, GetEdgesV2>(f)),
            None => Getter::V1(std::mem::transmute::<usize, GetEdges>(driver_fn(
                &GET_EDGES,
                c"cuGraphGetEdges",
            )?)),
        }
    };
    let get = |from: *mut CUgraphNode, to: *mut CUgraphNode, data: *mut CUgraphEdgeData, n: &mut usize| match getter {
        // SAFETY: NULL arrays ask for the count alone; else each array has room for `*n`
        // entries.
        Getter::V2(f) => unsafe { f(graph, from, to, data, n) },
        // SAFETY: as above.
        Getter::V1(f) => unsafe { f(graph, from, to, n) },
    };
    let mut count = 0usize;
    if get(
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        std::ptr::null_mut(),
        &mut count,
    ) != CUDA_SUCCESS
    {
        return None;
    }
    if count == 0 {
        return Some(());
    }
    if count > MAX_EDGES {
        return None;
    }
    let mut from: Vec<CUgraphNode> = vec![std::ptr::null_mut(); count];
    let mut to: Vec<CUgraphNode> = vec![std::ptr::null_mut(); count];
    let mut data = vec![CUgraphEdgeData::default(); count];
    let mut got = count;
    let data_ptr = if matches!(getter, Getter::V2(_)) {
        data.as_mut_ptr()
    } else {
        std::ptr::null_mut()
    };
    if get(from.as_mut_ptr(), to.as_mut_ptr(), data_ptr, &mut got) != CUDA_SUCCESS {
        return None;
    }
    out.reserve(got.min(count) * 3);
    for (&f, &t) in from.iter().zip(&to).take(got.min(count)) {
        if !f.is_null() && !t.is_null() {
            out.extend([GraphEdges::EDGE, f as u64, t as u64]);
        }
    }
    Some(())
}

/// Writes the memory nodes listed for `exec` as [`GraphMemNodes`] records, each holding at
/// most [`GraphMemNodes::MAX_NODES`] nodes of each kind (none when there are none).
fn write_memory_nodes(g: &HookGuard, exec: u64, allocs: &[u64], frees: &[u64]) {
    let per = GraphMemNodes::MAX_NODES;
    in_chunk_pairs((allocs, per * 4), (frees, per * 3), false, |a, f| {
        tracer::event(
            g,
            GraphMemNodes {
                exec,
                allocs: Addrs(Cow::Borrowed(a)),
                frees: Addrs(Cow::Borrowed(f)),
            },
        )
    });
}

/// Writes the edges listed for `exec` as [`GraphEdges`] records: at least one, each holding
/// at most [`GraphEdges::MAX_ENTRIES`] entries.
fn write_edges(g: &HookGuard, exec: u64, entries: &[u64]) {
    in_chunks(entries, GraphEdges::MAX_ENTRIES * 3, |entries| {
        tracer::event(
            g,
            GraphEdges {
                exec,
                entries: Addrs(Cow::Borrowed(entries)),
            },
        )
    });
}

/// Calls `one` with the next run of at most `per` entries of each of two lists, side by
/// side, until both are used up (once with none of either when both are empty and
/// `at_least_one`).
fn in_chunk_pairs(
    (a, per_a): (&[u64], usize),
    (b, per_b): (&[u64], usize),
    at_least_one: bool,
    mut one: impl FnMut(&[u64], &[u64]),
) {
    let (mut ca, mut cb) = (a.chunks(per_a), b.chunks(per_b));
    let mut first = at_least_one;
    loop {
        let (x, y) = (ca.next().unwrap_or(&[]), cb.next().unwrap_or(&[]));
        if x.is_empty() && y.is_empty() && !first {
            break;
        }
        first = false;
        one(x, y);
    }
}

/// Calls `one` with each run of at most `per` of `entries`, or once with none when there are
/// none (a listing's records: at least one, each fitting in a block).
pub(super) fn in_chunks(entries: &[u64], per: usize, mut one: impl FnMut(&[u64])) {
    if entries.is_empty() {
        one(&[]);
    }
    entries.chunks(per).for_each(one);
}

/// An allocation node's triple `(address, bytes, location)`, or `None` when the getter is
/// missing or fails.
fn alloc_node(node: CUgraphNode) -> Option<[u64; 3]> {
    type AllocParams = unsafe extern "C" fn(CUgraphNode, *mut CUDA_MEM_ALLOC_NODE_PARAMS) -> CUresult;
    let alloc_params = driver_fn(&ALLOC_NODE_PARAMS, c"cuGraphMemAllocNodeGetParams")?;
    // SAFETY: the driver's own function, found by name, with its C signature.
    let alloc_params = unsafe { std::mem::transmute::<usize, AllocParams>(alloc_params) };
    let mut p = MaybeUninit::<CUDA_MEM_ALLOC_NODE_PARAMS>::zeroed();
    // SAFETY: an allocation node; `p` has the structure's size.
    if unsafe { alloc_params(node, p.as_mut_ptr()) } != CUDA_SUCCESS {
        return None;
    }
    // SAFETY: zeroed, then written by the driver: every member is initialized.
    let p = unsafe { p.assume_init() };
    Some([p.dptr, p.bytesize as u64, node_location(&p)])
}

/// The address a free node frees, or `None` when the getter is missing or fails.
fn free_node(node: CUgraphNode) -> Option<u64> {
    type FreeParams = unsafe extern "C" fn(CUgraphNode, *mut CUdeviceptr) -> CUresult;
    let free_params = driver_fn(&FREE_NODE_PARAMS, c"cuGraphMemFreeNodeGetParams")?;
    // SAFETY: the driver's own function, found by name, with its C signature.
    let free_params = unsafe { std::mem::transmute::<usize, FreeParams>(free_params) };
    let mut dptr: CUdeviceptr = 0;
    // SAFETY: a free node; `dptr` is a valid out-pointer.
    (unsafe { free_params(node, &mut dptr) } == CUDA_SUCCESS).then_some(dptr)
}

/// The event an event record node (`record`) or wait node names, or `None` when the getter
/// is missing or fails.
fn node_event(node: CUgraphNode, record: bool) -> Option<u64> {
    type GetEvent = unsafe extern "C" fn(CUgraphNode, *mut CUevent) -> CUresult;
    let getter = if record {
        driver_fn(&RECORD_NODE_EVENT, c"cuGraphEventRecordNodeGetEvent")?
    } else {
        driver_fn(&WAIT_NODE_EVENT, c"cuGraphEventWaitNodeGetEvent")?
    };
    // SAFETY: the driver's own function, found by name, with its C signature.
    let getter = unsafe { std::mem::transmute::<usize, GetEvent>(getter) };
    let mut event: CUevent = std::ptr::null_mut();
    // SAFETY: an event node of that kind; `event` is a valid out-pointer.
    (unsafe { getter(node, &mut event) } == CUDA_SUCCESS).then_some(event as u64)
}

/// Writes the event nodes listed for `exec` as [`GraphEvents`] records: at least one, each
/// holding at most [`GraphEvents::MAX_NODES`] nodes of each kind.
fn write_events(g: &HookGuard, exec: u64, records: &[u64], waits: &[u64]) {
    let per = GraphEvents::MAX_NODES * 3;
    in_chunk_pairs((records, per), (waits, per), true, |r, w| {
        tracer::event(
            g,
            GraphEvents {
                exec,
                records: Addrs(Cow::Borrowed(r)),
                waits: Addrs(Cow::Borrowed(w)),
            },
        )
    });
}

// ---- Changes to an executable graph's event nodes ----

/// `cuGraphExecEventRecordNodeSetEvent`, `cuGraphExecEventWaitNodeSetEvent`: the node's
/// event for later launches.
pub unsafe fn exec_set_event(
    api: Api,
    real: unsafe extern "C" fn(CUgraphExec, CUgraphNode, CUevent) -> CUresult,
    exec: CUgraphExec,
    node: CUgraphNode,
    event: CUevent,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: passed through unchanged.
    let r = unsafe { real(exec, node, event) };
    if let Some(g) = &g {
        updated(
            g,
            api,
            r,
            GraphUpdate::NODE_EVENT,
            exec,
            node as u64,
            event as u64,
            0,
            false,
        );
    }
    r
}

/// `cuGraphExecUpdate_v2` (CUDA 12.0: a result structure): every node takes the parameters
/// of the same node of `graph`.
pub unsafe fn exec_update_v2(
    api: Api,
    real: unsafe extern "C" fn(CUgraphExec, CUgraph, *mut c_void) -> CUresult,
    exec: CUgraphExec,
    graph: CUgraph,
    info: *mut c_void,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: passed through unchanged.
    let r = unsafe { real(exec, graph, info) };
    if let Some(g) = &g {
        relisted(g, api, r, GraphUpdate::GRAPH, exec, 0, graph);
    }
    r
}

/// `cuGraphExecUpdate` (CUDA 10.2: the error node and result out-parameters).
pub unsafe fn exec_update(
    api: Api,
    real: unsafe extern "C" fn(CUgraphExec, CUgraph, *mut CUgraphNode, *mut u32) -> CUresult,
    exec: CUgraphExec,
    graph: CUgraph,
    error_node: *mut CUgraphNode,
    result: *mut u32,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: passed through unchanged.
    let r = unsafe { real(exec, graph, error_node, result) };
    if let Some(g) = &g {
        relisted(g, api, r, GraphUpdate::GRAPH, exec, 0, graph);
    }
    r
}

/// `cuGraphExecChildGraphNodeSetParams`: the nodes of the child graph node `node` take the
/// parameters of `child`'s.
pub unsafe fn exec_child_set(
    api: Api,
    real: unsafe extern "C" fn(CUgraphExec, CUgraphNode, CUgraph) -> CUresult,
    exec: CUgraphExec,
    node: CUgraphNode,
    child: CUgraph,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: passed through unchanged.
    let r = unsafe { real(exec, node, child) };
    if let Some(g) = &g {
        relisted(g, api, r, GraphUpdate::CHILD_GRAPH, exec, node as u64, child);
    }
    r
}

/// `cuGraphExecNodeSetParams` (CUDA 12.2): an event node's new event, or a child graph
/// node's new graph, as the specific setters; other nodes' parameters are not recorded.
pub unsafe fn exec_node_set_params(
    api: Api,
    real: unsafe extern "C" fn(CUgraphExec, CUgraphNode, *mut CUgraphNodeParamsHandle) -> CUresult,
    exec: CUgraphExec,
    node: CUgraphNode,
    params: *mut CUgraphNodeParamsHandle,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: passed through unchanged.
    let r = unsafe { real(exec, node, params) };
    let Some(g) = &g else { return r };
    // A failed call may have been refused before the driver read the structure, which may
    // then not be readable: nothing is recorded (nothing changed).
    if params.is_null() || r != CUDA_SUCCESS {
        return r;
    }
    // SAFETY: the caller's structure, which the driver read (it succeeded): its type, then
    // the union's first member, a handle for the node types read here.
    let (kind, handle) = unsafe { ((*params).kind, (*params).handle) };
    match kind {
        CU_GRAPH_NODE_TYPE_EVENT_RECORD | CU_GRAPH_NODE_TYPE_WAIT_EVENT => {
            updated(
                g,
                api,
                r,
                GraphUpdate::NODE_EVENT,
                exec,
                node as u64,
                handle as u64,
                0,
                false,
            );
        }
        CU_GRAPH_NODE_TYPE_GRAPH => relisted(g, api, r, GraphUpdate::CHILD_GRAPH, exec, node as u64, handle),
        kind => {
            // SAFETY: the call succeeded with this structure of type `kind`.
            unsafe { graph_accesses::exec_generic_set(g, api, r, exec, node, kind, params.cast()) };
        }
    }
    r
}

/// After an update that takes `graph`'s parameters returned `r`: on success lists its event
/// nodes (owned by `node`, for a child graph's), then records the update.
fn relisted(g: &HookGuard, api: Api, r: CUresult, what: u32, exec: CUgraphExec, node: u64, graph: CUgraph) {
    if tracer::get().is_none() {
        return;
    }
    let listing = if r == CUDA_SUCCESS {
        list_nodes(graph, node, false)
    } else {
        None
    };
    let (events, accesses) = match listing {
        Some(l) => (l.events, Some(l.accesses)),
        None => (None, None),
    };
    if let Some((records, waits)) = &events {
        write_events(g, exec as u64, records, waits);
    }
    if let Some(accesses) = &accesses {
        graph_accesses::write(g, exec as u64, accesses);
    }
    updated(g, api, r, what, exec, node, 0, graph as u64, events.is_some());
}

/// Records a `GraphUpdate`.
#[allow(clippy::too_many_arguments)]
pub(super) fn updated(
    g: &HookGuard,
    api: Api,
    r: CUresult,
    what: u32,
    exec: CUgraphExec,
    node: u64,
    event: u64,
    graph: u64,
    listed: bool,
) {
    tracer::event(
        g,
        GraphUpdate {
            api,
            via: guard::via(),
            result: CuResult(r),
            what,
            exec: exec as u64,
            node,
            event,
            graph,
            listed: u32::from(listed),
        },
    );
}

// ---- Live accounting of graph memory (only while it is on: budget, metrics, GPULEAK_LIVE) ----

/// What a launch of an executable graph allocates and frees, for the live gauges.
struct ExecMemory {
    /// Allocation nodes no free node of the same graph frees: (address, bytes, location as
    /// [`MemLocation::encode`] writes it, stack that made the node).
    allocs: Vec<(u64, u64, u64, StackId)>,
    /// Free nodes of memory the graph does not allocate.
    frees: Vec<u64>,
    auto_free: bool,
}

#[derive(Default)]
struct LiveGraphs {
    /// Allocation nodes by address: the stack that made each.
    nodes: HashMap<u64, StackId>,
    /// Executable graphs.
    execs: HashMap<u64, Arc<ExecMemory>>,
}

/// The most allocation nodes and executable graphs remembered: past them, a node is counted
/// with its instantiation's stack and a graph's launches are not counted (a program that
/// makes graphs without end).
const MAX_REMEMBERED: usize = 1 << 20;

static LIVE_GRAPHS: AtomicPtr<Mutex<LiveGraphs>> = AtomicPtr::new(std::ptr::null_mut());

/// The state, created at first use (after a fork, a fresh one).
fn live_graphs() -> std::sync::MutexGuard<'static, LiveGraphs> {
    let mut p = LIVE_GRAPHS.load(Ordering::Acquire);
    if p.is_null() {
        let fresh = Box::into_raw(Box::default());
        p = match LIVE_GRAPHS.compare_exchange(std::ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => fresh,
            Err(other) => {
                // SAFETY: `fresh` was never shared.
                drop(unsafe { Box::from_raw(fresh) });
                other
            }
        };
    }
    // SAFETY: published states are leaked, never freed.
    unsafe { &*p }.lock().unwrap_or_else(|e| e.into_inner())
}

/// In a forked child: the parent's graphs are not the child's accounting (an atomic store
/// only: the lock may have been held by a parent thread that is gone).
pub fn forget_in_child() {
    LIVE_GRAPHS.store(std::ptr::null_mut(), Ordering::Release);
}

/// An allocation node made at `addr` (by capture or by hand) by the calling thread, while
/// live accounting is on.
pub fn node_made(addr: u64, stack: StackId) {
    if ops::flags() & ops::LIVE == 0 {
        return;
    }
    ops::sites::note(stack);
    let mut state = live_graphs();
    if state.nodes.len() < MAX_REMEMBERED || state.nodes.contains_key(&addr) {
        state.nodes.insert(addr, stack);
    }
}

/// An instantiation listed `allocs` (triples) and `frees`: what each launch of `exec` does.
fn exec_made(exec: u64, allocs: &[u64], frees: &[u64], auto_free: bool, stack: StackId) {
    let mut state = live_graphs();
    if state.execs.len() >= MAX_REMEMBERED && !state.execs.contains_key(&exec) {
        return;
    }
    let (lasting, frees) = GraphMem::lasting(allocs, frees);
    let memory = ExecMemory {
        allocs: lasting
            .into_iter()
            .map(|[addr, size, location]| (addr, size, location, state.nodes.get(&addr).copied().unwrap_or(stack)))
            .collect(),
        frees,
        auto_free,
    };
    state.execs.insert(exec, Arc::new(memory));
}

/// A successful `cuGraphLaunch` of `exec`: with live accounting on, what its memory nodes
/// allocate is live (kind `graph`, or host memory for a node located there; counted against
/// the budget, which cannot refuse a launch) and what they free is not.
pub fn launched(exec: u64) {
    let f = ops::flags();
    if f & ops::LIVE == 0 {
        return;
    }
    let Some(memory) = live_graphs().execs.get(&exec).cloned() else {
        return;
    };
    let free = |addr: u64| {
        let taken = live::take(Api::cuMemFree_v2, addr);
        live::freed(Api::cuMemFree_v2, addr, taken, true);
    };
    if memory.auto_free {
        memory.allocs.iter().for_each(|a| free(a.0));
    }
    let here = live::Place::here_if(true);
    for &(addr, size, location, stack) in &memory.allocs {
        let (kind, device) = match GraphMem::location(location) {
            MemLocation::Device(device) => (MemKind::Graph, device),
            MemLocation::Host => (MemKind::Host, here.device),
            MemLocation::Unknown => (MemKind::Graph, here.device),
        };
        let reserved = f & ops::BUDGET != 0 && live::counts_toward_budget(kind);
        if reserved {
            live::charge(device, size);
        }
        let place = live::Place { ctx: here.ctx, device };
        live::added(Api::cuGraphAddMemAllocNode, kind, addr, size, place, stack, reserved);
    }
    memory.frees.iter().for_each(|&addr| free(addr));
}
