//! Graph memory: what CUDA graphs' memory nodes allocate and free at each launch.
//!
//! An allocation node (a stream-ordered allocation made under stream capture, or
//! `cuGraphAddMemAllocNode`) is no memory: it has a fixed address, and each launch of the
//! graph it was instantiated into allocates there. Its memory lives until a free node of a
//! graph (the same launch, or another graph's), `cuMemFreeAsync` or `cuMemFree` frees it, or,
//! for a graph instantiated with auto-free on launch, until the next launch of that graph.
//! Destroying the graph frees nothing.
//!
//! The trace says where each node was made (its `Alloc` record: address, size, stack), which
//! memory nodes each executable graph holds (`GraphMem` records, then `GraphExec`), and when
//! each one is launched (`Launch` records of `cuGraphLaunch`, whose `function` is the
//! executable graph). This module keeps the first two; [`super::Model`] turns launches into
//! allocations (kind `graph`) and frees.

use std::collections::HashMap;
use std::sync::Arc;

use gpuleak_format::{Alloc, Api, Ctx, GraphExec, GraphMem, MemLocation, StackId};

/// Where an allocation node was made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct NodeSite {
    /// The call that made it (`cuMemAllocAsync` under capture, `cuGraphAddMemAllocNode`,
    /// `cuGraphAddNode[_v2]`).
    pub api: Api,
    /// Runtime call that led there.
    pub via: Api,
    /// Its stack.
    pub stack: StackId,
    /// Current context at the call.
    pub ctx: Ctx,
}

/// One allocation node of an executable graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct AllocNode {
    pub addr: u64,
    pub size: u64,
    pub device: i32,
}

/// What an executable graph's launches do to memory.
#[derive(Debug)]
pub(super) struct Exec {
    /// Allocation nodes whose memory outlives a launch (no free node of the same graph frees
    /// it): each launch allocates them.
    pub allocs: Vec<AllocNode>,
    /// Free nodes of addresses this graph does not allocate (another graph's memory): each
    /// launch frees them.
    pub frees: Vec<u64>,
    /// Memory nodes of every kind, those freed within the graph included.
    pub memory_nodes: usize,
    /// Instantiated with auto-free on launch.
    pub auto_free: bool,
    /// The shim could not list the graph's nodes.
    pub unknown: bool,
    /// The instantiation: its call and stack, for nodes whose own site the trace lacks.
    pub site: NodeSite,
}

/// Allocation nodes by address, nodes listed for instantiations under way, and executable
/// graphs.
#[derive(Debug, Default)]
pub(super) struct Graphs {
    nodes: HashMap<u64, NodeSite>,
    /// Memory nodes listed for instantiations under way: allocation triples, free addresses.
    pending: HashMap<u64, (Vec<u64>, Vec<u64>)>,
    execs: HashMap<u64, Arc<Exec>>,
}

impl Graphs {
    /// An allocation node made at `a.ptr` (an address reused by a later node is that node's).
    pub fn node(&mut self, a: &Alloc) {
        self.nodes.insert(
            a.ptr.0,
            NodeSite {
                api: a.api,
                via: a.via,
                stack: a.stack,
                ctx: a.ctx,
            },
        );
    }

    /// Whether the trace holds any allocation node.
    pub fn any_nodes(&self) -> bool {
        !self.nodes.is_empty()
    }

    /// Where the node at `addr` was made.
    pub fn site(&self, addr: u64) -> Option<NodeSite> {
        self.nodes.get(&addr).copied()
    }

    /// Memory nodes listed for the instantiation that the next `GraphExec` of `m.exec`
    /// completes (allocation nodes as triples).
    pub fn listed(&mut self, m: &GraphMem<'_>) {
        let (allocs, frees) = self.pending.entry(m.exec).or_default();
        allocs.extend_from_slice(&m.allocs.0);
        frees.extend_from_slice(&m.frees.0);
    }

    /// An instantiation: a success makes (or replaces) the executable graph `g.exec` with the
    /// nodes listed for it.
    pub fn instantiated(&mut self, g: &GraphExec) {
        let (allocs, frees) = self.pending.remove(&g.exec).unwrap_or_default();
        if !g.result.is_success() || g.exec == 0 {
            return;
        }
        let memory_nodes = allocs.len() / 3 + frees.len();
        let (lasting, frees) = GraphMem::lasting(&allocs, &frees);
        let exec = Exec {
            allocs: lasting
                .into_iter()
                .map(|[addr, size, location]| AllocNode {
                    addr,
                    size,
                    device: match GraphMem::location(location) {
                        MemLocation::Device(device) => device,
                        MemLocation::Host => crate::decision::HOST,
                        MemLocation::Unknown => crate::decision::UNKNOWN_DEVICE,
                    },
                })
                .collect(),
            frees,
            memory_nodes,
            auto_free: g.flags & GraphExec::AUTO_FREE_ON_LAUNCH != 0,
            unknown: g.nodes_known == 0,
            site: NodeSite {
                api: g.api,
                via: g.via,
                stack: g.stack,
                ctx: Ctx(0),
            },
        };
        self.execs.insert(g.exec, Arc::new(exec));
    }

    /// The executable graph `exec`, if the trace instantiated it.
    pub fn exec(&self, exec: u64) -> Option<Arc<Exec>> {
        self.execs.get(&exec).cloned()
    }
}
