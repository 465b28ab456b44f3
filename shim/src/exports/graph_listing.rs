//! Listing a graph as instantiated (or as an update takes it): its memory, event, kernel,
//! memcpy and memset nodes and its edges, asked of the driver's getters, and the records
//! that say what the executable graph holds (`GraphMem`, `GraphMemNodes`, `GraphEvents`,
//! `GraphAccesses`, `GraphEdges`), written in chunks.

use std::borrow::Cow;
use std::mem::MaybeUninit;

use gpuleak_format::{Addrs, GraphEdges, GraphEvents, GraphMemNodes};

use super::{graph_accesses, graphs};
use crate::cuda::*;
use crate::dlsym::{driver_fn, Getter};
use crate::guard::HookGuard;
use crate::tracer;

/// The most graphs (the graph and the child graphs within it, at any depth) whose nodes one
/// instantiation lists; a graph of more is taken as one whose nodes are unknown.
const MAX_GRAPHS: usize = 4096;

/// The most edges one graph's listing asks for (three arrays of this many entries); a graph
/// of more is taken as one whose order is unknown.
const MAX_EDGES: usize = 1 << 22;

/// What the shim found listing a graph's nodes.
pub(super) struct Listing {
    /// Allocation nodes as triples `(address, bytes, location)` and the addresses free nodes
    /// free; `None` when a memory node's getter is missing or failed.
    pub memory: Option<(Vec<u64>, Vec<u64>)>,
    /// The same nodes by handle, as [`GraphMemNodes`] entries (allocation quadruples, free
    /// triples); known when `memory` is.
    pub memory_nodes: (Vec<u64>, Vec<u64>),
    /// Event record and wait nodes as triples `(node, event, owner)` ([`GraphEvents`]);
    /// `None` when an event node's getter is missing or failed.
    pub events: Option<(Vec<u64>, Vec<u64>)>,
    /// What kernel, memcpy and memset nodes touch, as [`GraphAccesses`] entries.
    pub accesses: Vec<u64>,
    /// The dependencies between the nodes, as [`GraphEdges`] entries, when asked for;
    /// `None` when not asked, or when a graph's edges could not be read.
    pub edges: Option<Vec<u64>>,
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
pub(super) fn list_nodes(graph: CUgraph, owner: u64, with_edges: bool) -> Option<Listing> {
    type GetNodes = unsafe extern "C" fn(CUgraph, *mut CUgraphNode, *mut usize) -> CUresult;
    type GetType = unsafe extern "C" fn(CUgraphNode, *mut u32) -> CUresult;
    let get_nodes = driver_fn(Getter::cuGraphGetNodes)?;
    let get_type = driver_fn(Getter::cuGraphNodeGetType)?;
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
                    let child_graph = driver_fn(Getter::cuGraphChildGraphNodeGetGraph)?;
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
        match driver_fn(crate::dlsym::Getter::cuGraphGetEdges_v2) {
            Some(f) => Getter::V2(std::mem::transmute::<usize, GetEdgesV2>(f)),
            None => Getter::V1(std::mem::transmute::<usize, GetEdges>(driver_fn(
                crate::dlsym::Getter::cuGraphGetEdges,
            )?)),
        }
    };
    let get = |from: *mut CUgraphNode, to: *mut CUgraphNode, data: *mut CUgraphEdgeData, n: &mut usize| match getter {
        // SAFETY: a local closure, called twice below: with NULL arrays (which ask for the
        // count alone), then with arrays of `*n` entries each (`data` too, for this getter).
        Getter::V2(f) => unsafe { f(graph, from, to, data, n) },
        // SAFETY: as above (`data` is not passed to this getter).
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
pub(super) fn write_memory_nodes(g: &HookGuard, exec: u64, allocs: &[u64], frees: &[u64]) {
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
pub(super) fn write_edges(g: &HookGuard, exec: u64, entries: &[u64]) {
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
pub(super) fn in_chunk_pairs(
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
    let alloc_params = driver_fn(Getter::cuGraphMemAllocNodeGetParams)?;
    // SAFETY: the driver's own function, found by name, with its C signature.
    let alloc_params = unsafe { std::mem::transmute::<usize, AllocParams>(alloc_params) };
    let mut p = MaybeUninit::<CUDA_MEM_ALLOC_NODE_PARAMS>::zeroed();
    // SAFETY: an allocation node; `p` has the structure's size.
    if unsafe { alloc_params(node, p.as_mut_ptr()) } != CUDA_SUCCESS {
        return None;
    }
    // SAFETY: zeroed, then written by the driver: every member is initialized.
    let p = unsafe { p.assume_init() };
    Some([p.dptr, p.bytesize as u64, graphs::node_location(&p)])
}

/// The address a free node frees, or `None` when the getter is missing or fails.
fn free_node(node: CUgraphNode) -> Option<u64> {
    type FreeParams = unsafe extern "C" fn(CUgraphNode, *mut CUdeviceptr) -> CUresult;
    let free_params = driver_fn(Getter::cuGraphMemFreeNodeGetParams)?;
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
        driver_fn(Getter::cuGraphEventRecordNodeGetEvent)?
    } else {
        driver_fn(Getter::cuGraphEventWaitNodeGetEvent)?
    };
    // SAFETY: the driver's own function, found by name, with its C signature.
    let getter = unsafe { std::mem::transmute::<usize, GetEvent>(getter) };
    let mut event: CUevent = std::ptr::null_mut();
    // SAFETY: an event node of that kind; `event` is a valid out-pointer.
    (unsafe { getter(node, &mut event) } == CUDA_SUCCESS).then_some(event as u64)
}

/// Writes the event nodes listed for `exec` as [`GraphEvents`] records: at least one, each
/// holding at most [`GraphEvents::MAX_NODES`] nodes of each kind.
pub(super) fn write_events(g: &HookGuard, exec: u64, records: &[u64], waits: &[u64]) {
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
