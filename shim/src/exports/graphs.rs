//! Graph memory: allocation nodes added by hand (`cuGraphAddMemAllocNode`, an `Alloc` record of
//! the node: no memory, but its address, size and stack), and instantiations
//! (`cuGraphInstantiate*`), after which the shim lists the graph's memory nodes with the
//! driver's getters (`GraphMem` records) and records the executable graph (`GraphExec`). The
//! analyzer turns each later `cuGraphLaunch` of it into the allocations and frees its nodes
//! make.
//!
//! Listing costs one driver call per node of the graph, once per instantiation (itself far
//! dearer); launches cost nothing more than before.

use std::borrow::Cow;
use std::ffi::c_void;
use std::mem::MaybeUninit;
use std::sync::atomic::AtomicUsize;

use gpuleak_format::{Addrs, Api, CuResult, GraphExec, GraphMem, Stream};

use crate::cuda::*;
use crate::dl::driver_fn;
use crate::guard::{self, HookGuard};
use crate::tracer;

/// `cuGraphAddMemAllocNode`: the node's address, size and device, after the driver returned.
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
        let (ptr, size, device) = if r == CUDA_SUCCESS && !params.is_null() {
            // SAFETY: the driver read the whole structure and wrote `dptr` into it.
            let p = unsafe { &*params };
            (p.dptr, p.bytesize as u64, p.pool_props.location_id)
        } else {
            (0, 0, -1)
        };
        tracer::alloc(g, api, r, Stream(0), ptr, size, u64::from(device as u32));
    }
    r
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
/// records), then records the `GraphExec`.
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
    let nodes = if handle != 0 { memory_nodes(graph) } else { None };
    let (allocs, frees) = nodes.as_ref().map_or((&[][..], &[][..]), |(a, f)| (&a[..], &f[..]));
    let per = GraphMem::MAX_NODES;
    let (mut a, mut f) = (allocs.chunks(per * 3), frees.chunks(per));
    loop {
        let (ca, cf) = (a.next().unwrap_or(&[]), f.next().unwrap_or(&[]));
        if ca.is_empty() && cf.is_empty() {
            break;
        }
        tracer::event(
            g,
            GraphMem {
                exec: handle,
                allocs: Addrs(Cow::Borrowed(ca)),
                frees: Addrs(Cow::Borrowed(cf)),
            },
        );
    }
    let stack = tracer::call_stack(g);
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

/// The memory nodes of `graph`, asked of the driver's pure getters (`cuGraphGetNodes`,
/// `cuGraphNodeGetType`, `cuGraphMemAllocNodeGetParams`, `cuGraphMemFreeNodeGetParams`, all
/// CUDA 11.4 or older): allocation nodes as triples `(address, bytes, device)` and the
/// addresses free nodes free; `None` when a getter is missing or fails. Nodes of child graphs
/// are not visited.
fn memory_nodes(graph: CUgraph) -> Option<(Vec<u64>, Vec<u64>)> {
    type GetNodes = unsafe extern "C" fn(CUgraph, *mut CUgraphNode, *mut usize) -> CUresult;
    type GetType = unsafe extern "C" fn(CUgraphNode, *mut u32) -> CUresult;
    type AllocParams = unsafe extern "C" fn(CUgraphNode, *mut CUDA_MEM_ALLOC_NODE_PARAMS) -> CUresult;
    type FreeParams = unsafe extern "C" fn(CUgraphNode, *mut CUdeviceptr) -> CUresult;
    let get_nodes = driver_fn(&GET_NODES, c"cuGraphGetNodes")?;
    let get_type = driver_fn(&NODE_GET_TYPE, c"cuGraphNodeGetType")?;
    let alloc_params = driver_fn(&ALLOC_NODE_PARAMS, c"cuGraphMemAllocNodeGetParams")?;
    let free_params = driver_fn(&FREE_NODE_PARAMS, c"cuGraphMemFreeNodeGetParams")?;
    // SAFETY: the driver's own functions, found by name, with their C signatures.
    let (get_nodes, get_type, alloc_params, free_params) = unsafe {
        (
            std::mem::transmute::<usize, GetNodes>(get_nodes),
            std::mem::transmute::<usize, GetType>(get_type),
            std::mem::transmute::<usize, AllocParams>(alloc_params),
            std::mem::transmute::<usize, FreeParams>(free_params),
        )
    };
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
    let (mut allocs, mut frees) = (Vec::new(), Vec::new());
    for node in nodes.into_iter().filter(|n| !n.is_null()) {
        let mut kind = 0u32;
        // SAFETY: a node of the graph; `kind` is a valid out-pointer.
        if unsafe { get_type(node, &mut kind) } != CUDA_SUCCESS {
            return None;
        }
        match kind {
            CU_GRAPH_NODE_TYPE_MEM_ALLOC => {
                let mut p = MaybeUninit::<CUDA_MEM_ALLOC_NODE_PARAMS>::zeroed();
                // SAFETY: an allocation node; `p` has the structure's size.
                if unsafe { alloc_params(node, p.as_mut_ptr()) } != CUDA_SUCCESS {
                    return None;
                }
                // SAFETY: zeroed, then written by the driver: every member is initialized.
                let p = unsafe { p.assume_init() };
                allocs.extend([p.dptr, p.bytesize as u64, u64::from(p.pool_props.location_id as u32)]);
            }
            CU_GRAPH_NODE_TYPE_MEM_FREE => {
                let mut dptr: CUdeviceptr = 0;
                // SAFETY: a free node; `dptr` is a valid out-pointer.
                if unsafe { free_params(node, &mut dptr) } != CUDA_SUCCESS {
                    return None;
                }
                frees.push(dptr);
            }
            _ => {}
        }
    }
    Some((allocs, frees))
}
