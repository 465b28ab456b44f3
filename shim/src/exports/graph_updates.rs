//! Changes to an executable graph after instantiation: a node's new event
//! (`cuGraphExecEventRecordNodeSetEvent`, `cuGraphExecEventWaitNodeSetEvent`,
//! `cuGraphExecNodeSetParams`) and updates that take another graph's parameters
//! (`cuGraphExecUpdate[_v2]`, `cuGraphExecChildGraphNodeSetParams`), after which the shim
//! lists that graph (`GraphUpdate` records).
//!
//! Handlers get the call the program made (`real`) and its arguments, as `memory`'s do; those
//! that read an input pointer are `unsafe`: the arguments must be the program's.

use std::ffi::c_void;

use gpuleak_format::{Api, CuResult, GraphUpdate};

use super::{graph_accesses, graph_listing};
use crate::cuda::*;
use crate::guard::{self, HookGuard};
use crate::tracer;

/// `cuGraphExecEventRecordNodeSetEvent`, `cuGraphExecEventWaitNodeSetEvent`: the node's
/// event for later launches.
pub fn exec_set_event(
    api: Api,
    real: impl FnOnce() -> CUresult,
    exec: CUgraphExec,
    node: CUgraphNode,
    event: CUevent,
) -> CUresult {
    let g = guard::enter();
    let r = real();
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
pub fn exec_update_v2(
    api: Api,
    real: impl FnOnce() -> CUresult,
    exec: CUgraphExec,
    graph: CUgraph,
    _info: *mut c_void,
) -> CUresult {
    let g = guard::enter();
    let r = real();
    if let Some(g) = &g {
        relisted(g, api, r, GraphUpdate::GRAPH, exec, 0, graph);
    }
    r
}

/// `cuGraphExecUpdate` (CUDA 10.2: the error node and result out-parameters).
pub fn exec_update(
    api: Api,
    real: impl FnOnce() -> CUresult,
    exec: CUgraphExec,
    graph: CUgraph,
    _error_node: *mut CUgraphNode,
    _result: *mut u32,
) -> CUresult {
    let g = guard::enter();
    let r = real();
    if let Some(g) = &g {
        relisted(g, api, r, GraphUpdate::GRAPH, exec, 0, graph);
    }
    r
}

/// `cuGraphExecChildGraphNodeSetParams`: the nodes of the child graph node `node` take the
/// parameters of `child`'s.
pub fn exec_child_set(
    api: Api,
    real: impl FnOnce() -> CUresult,
    exec: CUgraphExec,
    node: CUgraphNode,
    child: CUgraph,
) -> CUresult {
    let g = guard::enter();
    let r = real();
    if let Some(g) = &g {
        relisted(g, api, r, GraphUpdate::CHILD_GRAPH, exec, node as u64, child);
    }
    r
}

/// `cuGraphExecNodeSetParams` (CUDA 12.2): an event node's new event, or a child graph
/// node's new graph, as the specific setters; other nodes' parameters are not recorded.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `params` is NULL or the program's
/// `CUgraphNodeParams`.
pub unsafe fn exec_node_set_params(
    api: Api,
    real: impl FnOnce() -> CUresult,
    exec: CUgraphExec,
    node: CUgraphNode,
    params: *mut CUgraphNodeParamsHandle,
) -> CUresult {
    let g = guard::enter();
    let r = real();
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
        graph_listing::list_nodes(graph, node, false)
    } else {
        None
    };
    let (events, accesses) = match listing {
        Some(l) => (l.events, Some(l.accesses)),
        None => (None, None),
    };
    if let Some((records, waits)) = &events {
        graph_listing::write_events(g, exec as u64, records, waits);
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
