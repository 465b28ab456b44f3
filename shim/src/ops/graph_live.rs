//! Live accounting of graph memory, only while it is on (budget, metrics, `GPULEAK_LIVE`):
//! what each launch of an executable graph allocates and frees, for the live gauges.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use gpuleak_format::{Api, GraphMem, MemKind, MemLocation, StackId};

use super::settings::{BUDGET, LIVE};
use super::{live, sites};
use crate::leaked::Leaked;

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

static LIVE_GRAPHS: Leaked<Mutex<LiveGraphs>> = Leaked::new();

/// The state, created at first use (after a fork, a fresh one).
fn live_graphs() -> std::sync::MutexGuard<'static, LiveGraphs> {
    LIVE_GRAPHS
        .make_once(Mutex::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// In a forked child: the parent's graphs are not the child's accounting (an atomic store
/// only: the lock may have been held by a parent thread that is gone).
pub fn forget_in_child() {
    LIVE_GRAPHS.forget();
}

/// An allocation node made at `addr` (by capture or by hand) by the calling thread, while
/// live accounting is on (`f`: the features on, [`super::flags`] read by the caller).
pub fn node_made(f: u32, addr: u64, stack: StackId) {
    if f & LIVE == 0 {
        return;
    }
    sites::note(stack);
    let mut state = live_graphs();
    if state.nodes.len() < MAX_REMEMBERED || state.nodes.contains_key(&addr) {
        state.nodes.insert(addr, stack);
    }
}

/// An instantiation listed `allocs` (triples) and `frees`: what each launch of `exec` does.
pub fn exec_made(exec: u64, allocs: &[u64], frees: &[u64], auto_free: bool, stack: StackId) {
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
/// the budget, which cannot refuse a launch) and what they free is not (`f`: the features
/// on, [`super::flags`] read by the caller).
pub fn launched(f: u32, exec: u64) {
    if f & LIVE == 0 {
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
        let reserved = f & BUDGET != 0 && live::counts_toward_budget(kind);
        if reserved {
            live::charge(device, size);
        }
        let place = live::Place { ctx: here.ctx, device };
        live::added(Api::cuGraphAddMemAllocNode, kind, addr, size, place, stack, reserved);
    }
    memory.frees.iter().for_each(|&addr| free(addr));
}
