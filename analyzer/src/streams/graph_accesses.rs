//! Memory that graph launches touch.
//!
//! At each instantiation the shim lists what the graph's kernel, memcpy and memset nodes
//! touch (`GraphAccesses` records: a kernel's 8-byte parameters, a copy's destination and
//! source, a memset's destination), in the graph as instantiated: nodes a capture made,
//! nodes added by hand and the nodes of child graphs alike. A launch of the executable graph
//! is then one operation of its stream that touches all of it, as a kernel launch touches
//! its parameters: work of another stream that is not ordered with the launch and touches
//! the same memory races with it.
//!
//! Later changes are followed (`GraphUpdate` records): a node's new parameters
//! (`cuGraphExecKernelNodeSetParams` and the like, with the node's new entries), a node
//! disabled or enabled again (`cuGraphNodeSetEnabled`), and updates that take another
//! graph's parameters (`cuGraphExecUpdate`, `cuGraphExecChildGraphNodeSetParams`), paired
//! node for node with the executable graph's as `graph_events` pairs event nodes.
//!
//! Each node is named, where the shim said where it came from (`GraphNode` records), by the
//! call that made it: the kernel launch, copy or memset captured into the graph, or the
//! `cuGraphAdd*` call that added it. A launch's accesses carry their node's name (a
//! [`NodeSite`], by its index), so that a finding can say which node of the graph was at
//! fault and where it was captured. A name is only given to a node of the graph as
//! instantiated (or as taken by an update) whose kind matches what it touches, and the first
//! record of a node wins (a captured call that added no node names the node before it);
//! `cuGraphDestroy` forgets a graph's names, since its handles may come back.
//!
//! Every uncertainty drops accesses, never keeps them: a launch that is said to touch memory
//! it no longer touches could report a race that cannot happen. So a successful update whose
//! graph could not be listed leaves the nodes it changed touching nothing known, a node whose
//! parameters the shim could not read touches nothing known, and an executable graph without
//! a listing (an older trace) touches nothing known, as every launch did before this was
//! modelled.

use gpuleak_format::{Api, GraphAccesses as Record, GraphNode, GraphUpdate, StackId};

use super::graph_frees::{self, BadFree, FreeNode};
use super::graph_order::{self, NodeAccess, Order, Race};
use super::memory::Mode;
use crate::hash::{HashMap, HashSet};

/// Executable graphs remembered at most; past this, the map is emptied (launches of the
/// graphs forgotten touch nothing known).
const MAX_EXECS: usize = 4096;
/// Node names remembered at most, over all graphs; past this, later nodes stay unnamed.
const MAX_NAMED_NODES: usize = 1 << 20;

/// Where a graph node came from: the call that captured or added it, and its stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NodeSite {
    /// The captured kernel launch, copy or memset, or the `cuGraphAdd*` entry point.
    pub api: Api,
    /// Its stack.
    pub stack: StackId,
    /// The node's type ([`GraphNode::KERNEL`], [`GraphNode::MEMCPY`], [`GraphNode::MEMSET`],
    /// [`GraphNode::MEM_ALLOC`], [`GraphNode::MEM_FREE`]).
    pub kind: u32,
}

impl NodeSite {
    /// Whether a node that touches `accesses` can be of this kind: a kernel node's accesses
    /// are kernel parameters, a memcpy node's a read and a write, a memset node's a write.
    fn fits(&self, accesses: &[(u64, u64, Mode)]) -> bool {
        accesses.iter().all(|&(_, _, m)| match self.kind {
            GraphNode::KERNEL => m == Mode::Kernel,
            GraphNode::MEMCPY => m != Mode::Kernel,
            GraphNode::MEMSET => m == Mode::Write,
            _ => false,
        })
    }

    /// Whether the node was captured from a stream (rather than added by hand).
    pub fn captured(&self) -> bool {
        !super::apis::adds_graph_node(self.api)
    }

    /// What made the node, as reports name it: "memcpy node captured from cuMemcpyAsync",
    /// "kernel node added by cuGraphAddKernelNode_v2".
    pub fn made_by(&self) -> String {
        let how = if self.captured() { "captured from" } else { "added by" };
        format!("{} node {how} {}", self.kind_name(), self.api)
    }

    /// The node's type, as reports name it.
    pub fn kind_name(&self) -> &'static str {
        match self.kind {
            GraphNode::KERNEL => "kernel",
            GraphNode::MEMCPY => "memcpy",
            GraphNode::MEM_ALLOC => "allocation",
            GraphNode::MEM_FREE => "free",
            _ => "memset",
        }
    }
}

/// Where the nodes of each graph came from, and the names given out, by index (0: none).
#[derive(Debug, Default)]
struct Sites {
    by_graph: HashMap<u64, HashMap<u64, u32>>,
    nodes: usize,
    table: Vec<NodeSite>,
    index: HashMap<NodeSite, u32>,
}

impl Sites {
    fn made(&mut self, n: &GraphNode) {
        if n.node == 0 {
            if let Some(nodes) = self.by_graph.remove(&n.graph) {
                self.nodes -= nodes.len();
            }
            return;
        }
        if self.nodes >= MAX_NAMED_NODES {
            return;
        }
        let site = NodeSite {
            api: n.api,
            stack: n.stack,
            kind: n.kind,
        };
        let std::collections::hash_map::Entry::Vacant(v) = self.by_graph.entry(n.graph).or_default().entry(n.node)
        else {
            return;
        };
        let next = self.table.len() as u32 + 1;
        let id = *self.index.entry(site).or_insert(next);
        if id == next {
            self.table.push(site);
        }
        v.insert(id);
        self.nodes += 1;
    }

    /// The name of `node` of `graph`, if it fits what the node touches.
    fn of(&self, graph: u64, node: &Node) -> u32 {
        match self.by_graph.get(&graph).and_then(|m| m.get(&node.node)) {
            Some(&id) if self.get(id).is_some_and(|s| s.fits(&node.accesses)) => id,
            _ => 0,
        }
    }

    /// The name of memory node `node` of `graph`, if it is of type `kind`.
    fn of_memory(&self, graph: u64, node: u64, kind: u32) -> u32 {
        match self.by_graph.get(&graph).and_then(|m| m.get(&node)) {
            Some(&id) if self.get(id).is_some_and(|s| s.kind == kind) => id,
            _ => 0,
        }
    }

    fn get(&self, id: u32) -> Option<&NodeSite> {
        id.checked_sub(1).and_then(|i| self.table.get(i as usize))
    }
}

/// One kernel, memcpy or memset node of an executable graph.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Node {
    /// The node (`CUgraphNode` of the graph the executable graph was made from).
    node: u64,
    /// The child graph node of that graph's top level that holds it, or 0.
    owner: u64,
    /// Whether it runs (`cuGraphNodeSetEnabled`).
    enabled: bool,
    /// What it touches: (address, length, mode).
    accesses: Vec<(u64, u64, Mode)>,
    /// Where it came from ([`NodeSite`] index; 0: not known).
    site: u32,
}

/// An executable graph's nodes and what its launches touch.
#[derive(Debug, Default, Clone)]
struct Exec {
    nodes: Vec<Node>,
    /// The enabled nodes' accesses, each once: (address, length, mode, the first such node's
    /// site).
    touched: Vec<Touched>,
    /// The graph's edges as listed at instantiation (`GraphEdges` entries); `None` when not
    /// listed, or when an update replaced the nodes they name.
    edges: Option<Vec<u64>>,
    /// Its memory nodes as listed at instantiation (an update does not change them).
    memory: MemoryNodes,
    /// Whether the races between its nodes were searched since what they touch last changed.
    searched: bool,
}

/// An access of a graph launch: (address, length, mode, [`NodeSite`] index).
pub type Touched = (u64, u64, Mode, u32);

/// An executable graph's allocation and free nodes.
#[derive(Debug, Default, Clone)]
pub struct MemoryNodes {
    /// Allocation nodes, each as an access of the bytes it allocates (a write, as a
    /// stream-ordered allocation is taken to be).
    pub allocs: Vec<NodeAccess>,
    /// Free nodes: (node, address freed, [`NodeSite`] index).
    pub frees: Vec<(u64, u64, u32)>,
    /// The allocation nodes whose memory no free node of the graph frees: it stays live
    /// after a launch.
    pub kept: Vec<NodeAccess>,
    /// The ranges of the others, which exist only inside a launch, sorted.
    transient: Vec<(u64, u64)>,
}

impl MemoryNodes {
    /// The nodes listed (`GraphMemNodes` entries: allocation quadruples, free triples), named
    /// as nodes of `graph`.
    fn of(allocs: &[u64], frees: &[u64], graph: u64, sites: &Sites) -> MemoryNodes {
        let allocs: Vec<NodeAccess> = allocs
            .chunks_exact(4)
            .filter(|q| q[2] != 0)
            .map(|q| NodeAccess {
                node: q[0],
                lo: q[2],
                len: q[3],
                mode: Mode::Write,
                site: sites.of_memory(graph, q[0], GraphNode::MEM_ALLOC),
            })
            .collect();
        let frees: Vec<(u64, u64, u32)> = frees
            .chunks_exact(3)
            .filter(|t| t[2] != 0)
            .map(|t| (t[0], t[2], sites.of_memory(graph, t[0], GraphNode::MEM_FREE)))
            .collect();
        let freed: HashSet<u64> = frees.iter().map(|f| f.1).collect();
        let (gone, kept): (Vec<NodeAccess>, Vec<NodeAccess>) = allocs.iter().partition(|a| freed.contains(&a.lo));
        let mut transient: Vec<(u64, u64)> = gone.iter().map(|a| (a.lo, a.hi())).collect();
        transient.sort_unstable();
        MemoryNodes {
            allocs,
            frees,
            kept,
            transient,
        }
    }

    fn is_empty(&self) -> bool {
        self.allocs.is_empty() && self.frees.is_empty()
    }

    /// Whether `addr` lies in memory the graph allocates and frees itself.
    fn inside_transient(&self, addr: u64) -> bool {
        let i = self.transient.partition_point(|&(lo, _)| lo <= addr);
        i > 0 && addr < self.transient[i - 1].1
    }

    /// Whether the graph allocates, and frees itself, the memory at `addr`.
    pub fn frees_own(&self, addr: u64) -> bool {
        self.transient.binary_search_by_key(&addr, |r| r.0).is_ok()
    }
}

/// What one search of a launched graph found (`GraphAccesses::search_unsearched`).
#[derive(Debug, Default)]
pub struct Searched {
    /// Races between its nodes.
    pub races: Vec<Race>,
    /// Nodes that use memory a free node of it frees, not finishing before it.
    pub frees: Vec<BadFree>,
}

impl Exec {
    fn refresh(&mut self) {
        // Memory the graph allocates and frees itself exists only inside a launch: no other
        // stream's work is ordered with what its nodes do there (`graph_frees` judges them).
        let memory = &self.memory;
        let mut all: Vec<Touched> = self
            .nodes
            .iter()
            .filter(|n| n.enabled)
            .flat_map(|n| n.accesses.iter().map(|&(a, l, m)| (a, l, m, n.site)))
            .filter(|&(a, ..)| !memory.inside_transient(a))
            .collect();
        // Stable: of accesses alike, the first node's (in listing order) is kept.
        all.sort_by_key(|&(addr, len, mode, _)| (addr, len, mode as u8));
        all.dedup_by_key(|&mut (addr, len, mode, _)| (addr, len, mode));
        self.touched = all;
        self.searched = false;
    }
}

/// Nodes from listed entries (quadruples), in listing order; a node's entries are
/// consecutive.
fn nodes_of(entries: &[u64]) -> Vec<Node> {
    let mut nodes: Vec<Node> = Vec::new();
    for q in entries.chunks_exact(4) {
        let (node, owner, addr) = (q[0], q[1], q[2]);
        let (len, mode) = Record::decode(q[3]);
        if nodes.last().is_none_or(|n| n.node != node || n.owner != owner) {
            nodes.push(Node {
                node,
                owner,
                enabled: true,
                accesses: Vec::new(),
                site: 0,
            });
        }
        let mode = match mode {
            Record::READ => Mode::Read,
            Record::WRITE => Mode::Write,
            Record::KERNEL => Mode::Kernel,
            _ => continue,
        };
        if addr != 0 && len != 0 {
            if let Some(n) = nodes.last_mut() {
                n.accesses.push((addr, len, mode));
            }
        }
    }
    nodes
}

/// Gives `nodes` the accesses (and the sites) of `from`, node for node in listing order,
/// keeping their identity and enabled state (an update changes parameters only); when the
/// counts differ (a graph the driver matched otherwise), `from` replaces them, and the
/// result is false: the nodes are not the ones they were.
fn take(nodes: &mut Vec<Node>, from: Vec<Node>) -> bool {
    if nodes.len() != from.len() {
        *nodes = from;
        return false;
    }
    for (n, f) in nodes.iter_mut().zip(from) {
        n.accesses = f.accesses;
        n.site = f.site;
    }
    true
}

/// What executable graphs touch, and the entries listed for the instantiation or update its
/// next record completes.
#[derive(Debug, Default)]
pub struct GraphAccesses {
    by_exec: HashMap<u64, Exec>,
    listed: HashMap<u64, Vec<u64>>,
    /// Edges listed for the instantiation each executable graph's next record completes.
    listed_edges: HashMap<u64, Vec<u64>>,
    /// Memory nodes listed likewise (`GraphMemNodes` entries: allocations, frees).
    listed_memory: HashMap<u64, (Vec<u64>, Vec<u64>)>,
    sites: Sites,
}

impl GraphAccesses {
    /// The shim said where a node came from, or that a graph was destroyed.
    pub fn node_made(&mut self, n: &GraphNode) {
        self.sites.made(n);
    }

    /// The site an access names (`Touched`'s fourth member, `Op::site`).
    pub fn site(&self, id: u32) -> Option<NodeSite> {
        self.sites.get(id).copied()
    }

    /// Nodes listed for `exec`, named as nodes of `graph`.
    fn listed_nodes(&mut self, exec: u64, graph: u64) -> Option<Vec<Node>> {
        let mut nodes = nodes_of(&self.listed.remove(&exec)?);
        for n in &mut nodes {
            n.site = self.sites.of(graph, n);
        }
        Some(nodes)
    }

    /// The shim listed entries for `exec`.
    pub fn listed(&mut self, exec: u64, entries: &[u64]) {
        if self.listed.len() >= MAX_EXECS && !self.listed.contains_key(&exec) {
            self.listed.clear();
        }
        self.listed.entry(exec).or_default().extend_from_slice(entries);
    }

    /// The shim listed edges for `exec` (`GraphEdges` entries).
    pub fn edges_listed(&mut self, exec: u64, entries: &[u64]) {
        if self.listed_edges.len() >= MAX_EXECS && !self.listed_edges.contains_key(&exec) {
            self.listed_edges.clear();
        }
        self.listed_edges.entry(exec).or_default().extend_from_slice(entries);
    }

    /// The shim listed memory nodes for `exec` (`GraphMemNodes` entries).
    pub fn memory_listed(&mut self, exec: u64, allocs: &[u64], frees: &[u64]) {
        if self.listed_memory.len() >= MAX_EXECS && !self.listed_memory.contains_key(&exec) {
            self.listed_memory.clear();
        }
        let listed = self.listed_memory.entry(exec).or_default();
        listed.0.extend_from_slice(allocs);
        listed.1.extend_from_slice(frees);
    }

    /// `exec` was instantiated from `graph`: it touches what was listed for it, or nothing
    /// known, its nodes are ordered as the edges listed say, or in no known way, and its
    /// memory nodes are those listed (none known when none was).
    pub fn instantiated(&mut self, exec: u64, graph: u64) {
        let nodes = self.listed_nodes(exec, graph).unwrap_or_default();
        let edges = self.listed_edges.remove(&exec);
        let memory = self
            .listed_memory
            .remove(&exec)
            .map(|(allocs, frees)| MemoryNodes::of(&allocs, &frees, graph, &self.sites))
            .unwrap_or_default();
        self.set(exec, nodes, edges, memory);
    }

    /// A change to `exec`'s nodes; a failed one changed nothing.
    pub fn updated(&mut self, u: &GraphUpdate) {
        let listed = self.listed_nodes(u.exec, u.graph);
        if !u.result.is_success() {
            return;
        }
        let Some(exec) = self.by_exec.get_mut(&u.exec) else {
            // An executable graph not known to touch anything: a change cannot make one
            // whose other nodes are unknown.
            return;
        };
        match u.what {
            GraphUpdate::NODE_PARAMS => {
                let new = listed
                    .and_then(|l| l.into_iter().find(|n| n.node == u.node))
                    .map(|n| n.accesses)
                    .unwrap_or_default();
                for n in exec.nodes.iter_mut().filter(|n| n.node == u.node) {
                    n.accesses.clone_from(&new);
                    // The node is still the one captured or added: its name stays, if the
                    // new accesses fit it.
                    if self.sites.get(n.site).is_some_and(|site| !site.fits(&n.accesses)) {
                        n.site = 0;
                    }
                }
            }
            GraphUpdate::NODE_ENABLED => {
                for n in exec.nodes.iter_mut().filter(|n| n.node == u.node) {
                    n.enabled = u.event != 0;
                }
            }
            GraphUpdate::GRAPH => match listed {
                Some(l) => {
                    if !take(&mut exec.nodes, l) {
                        exec.edges = None;
                    }
                }
                None => exec.nodes.iter_mut().for_each(|n| n.accesses.clear()),
            },
            GraphUpdate::CHILD_GRAPH => {
                let (mut child, others): (Vec<Node>, Vec<Node>) = exec.nodes.drain(..).partition(|n| n.owner == u.node);
                match listed {
                    Some(l) => {
                        if !take(&mut child, l) {
                            exec.edges = None;
                        }
                    }
                    None => child.iter_mut().for_each(|n| n.accesses.clear()),
                }
                exec.nodes = others.into_iter().chain(child).collect();
            }
            _ => return,
        }
        exec.refresh();
    }

    fn set(&mut self, exec: u64, nodes: Vec<Node>, edges: Option<Vec<u64>>, memory: MemoryNodes) {
        if nodes.is_empty() && memory.is_empty() {
            self.by_exec.remove(&exec);
            return;
        }
        if self.by_exec.len() >= MAX_EXECS && !self.by_exec.contains_key(&exec) {
            self.by_exec.clear();
        }
        let mut e = Exec {
            nodes,
            touched: Vec::new(),
            edges,
            memory,
            searched: false,
        };
        e.refresh();
        self.by_exec.insert(exec, e);
    }

    /// The allocation and free nodes of `exec`, if any are known.
    pub fn memory_nodes(&self, exec: u64) -> Option<&MemoryNodes> {
        self.by_exec.get(&exec).map(|e| &e.memory).filter(|m| !m.is_empty())
    }

    /// What a launch of `exec` touches now: (address, length, mode, site), each once.
    pub fn of_exec(&self, exec: u64) -> &[Touched] {
        self.by_exec.get(&exec).map_or(&[], |e| &e.touched)
    }

    /// At a launch of `exec`: the races between its enabled nodes and allocation nodes
    /// (`graph_order`), and the nodes that use memory a free node frees without finishing
    /// before it (`graph_frees`), unless they were searched since what the nodes touch last
    /// changed, or the order of its nodes is not known. `allocation` tells the allocation
    /// (first byte, length) that holds an address, for a free node of memory the graph does
    /// not allocate.
    pub fn search_unsearched(&mut self, exec: u64, allocation: impl Fn(u64) -> Option<(u64, u64)>) -> Searched {
        let Some(e) = self.by_exec.get_mut(&exec) else {
            return Searched::default();
        };
        if e.searched {
            return Searched::default();
        }
        e.searched = true;
        let Some(edges) = &e.edges else {
            return Searched::default();
        };
        let memory = &e.memory;
        let accesses: Vec<NodeAccess> = e
            .nodes
            .iter()
            .filter(|n| n.enabled)
            .flat_map(|n| {
                n.accesses.iter().map(|&(lo, len, mode)| NodeAccess {
                    node: n.node,
                    lo,
                    len,
                    mode,
                    site: n.site,
                })
            })
            .collect();
        // A race needs two accesses, a bad free a free and one.
        let uses = accesses.len() + memory.allocs.len();
        if uses == 0 || (uses < 2 && memory.frees.is_empty()) {
            return Searched::default();
        }
        let nodes = e
            .nodes
            .iter()
            .map(|n| n.node)
            .chain(memory.allocs.iter().map(|a| a.node))
            .chain(memory.frees.iter().map(|f| f.0));
        let Some(order) = Order::new(edges, nodes) else {
            return Searched::default();
        };
        let all: Vec<NodeAccess> = accesses.iter().chain(&memory.allocs).copied().collect();
        // The bytes a free node frees: its graph's allocation at that address, else the one
        // `allocation` tells, else the one byte known.
        let own: HashMap<u64, u64> = memory.allocs.iter().map(|a| (a.lo, a.len)).collect();
        let frees: Vec<FreeNode> = memory
            .frees
            .iter()
            .map(|&(node, addr, site)| {
                let len = own
                    .get(&addr)
                    .copied()
                    .or_else(|| allocation(addr).map(|(lo, len)| lo.saturating_add(len).saturating_sub(addr)))
                    .unwrap_or(1);
                FreeNode { node, addr, len, site }
            })
            .collect();
        Searched {
            races: graph_order::races(&order, &all),
            frees: graph_frees::bad_frees(&order, &accesses, &memory.allocs, &frees),
        }
    }
}

#[cfg(test)]
mod tests {
    use gpuleak_format::CuResult;

    use super::*;

    const K: u64 = Record::KERNEL;
    const W: u64 = Record::WRITE;
    const R: u64 = Record::READ;

    fn quad(node: u64, owner: u64, addr: u64, len: u64, mode: u64) -> [u64; 4] {
        [node, owner, addr, Record::encode(len, mode)]
    }

    fn entries(q: &[[u64; 4]]) -> Vec<u64> {
        q.iter().flatten().copied().collect()
    }

    fn update(what: u32, exec: u64, node: u64, event: u64, result: u32) -> GraphUpdate {
        GraphUpdate {
            api: Api::cuGraphExecUpdate_v2,
            via: Api::NONE,
            result: CuResult(result),
            what,
            exec,
            node,
            event,
            graph: 0x60,
            listed: 1,
        }
    }

    fn addrs(g: &GraphAccesses, exec: u64) -> Vec<u64> {
        g.of_exec(exec).iter().map(|a| a.0).collect()
    }

    /// A graph of a kernel (touching 0xa), a copy (0xb to 0xc) and a memset (0xd), the
    /// memset in child graph node 0xc1.
    fn instantiated() -> GraphAccesses {
        let mut g = GraphAccesses::default();
        g.listed(
            0x71,
            &entries(&[
                quad(0x1, 0, 0xa000, 1, K),
                quad(0x1, 0, 0xa100, 1, K),
                quad(0x2, 0, 0xc000, 64, W),
                quad(0x2, 0, 0xb000, 64, R),
                quad(0x3, 0xc1, 0xd000, 32, W),
                quad(0x4, 0, 0, 0, 0),
            ]),
        );
        g.instantiated(0x71, 0x70);
        g
    }

    #[test]
    fn a_launch_touches_every_listed_node_s_memory_once() {
        let g = instantiated();
        assert_eq!(
            g.of_exec(0x71),
            &[
                (0xa000, 1, Mode::Kernel, 0),
                (0xa100, 1, Mode::Kernel, 0),
                (0xb000, 64, Mode::Read, 0),
                (0xc000, 64, Mode::Write, 0),
                (0xd000, 32, Mode::Write, 0),
            ]
        );
        // Nothing listed: nothing known.
        let mut g = GraphAccesses::default();
        g.instantiated(0x72, 0x70);
        assert!(g.of_exec(0x72).is_empty());
    }

    #[test]
    fn a_node_s_new_parameters_and_its_enabled_state_change_later_launches() {
        let mut g = instantiated();
        g.listed(0x71, &entries(&[quad(0x1, 0, 0xe000, 1, K)]));
        g.updated(&update(GraphUpdate::NODE_PARAMS, 0x71, 0x1, 0, 0));
        assert_eq!(addrs(&g, 0x71), [0xb000, 0xc000, 0xd000, 0xe000]);
        g.updated(&update(GraphUpdate::NODE_ENABLED, 0x71, 0x2, 0, 0));
        assert_eq!(addrs(&g, 0x71), [0xd000, 0xe000]);
        g.updated(&update(GraphUpdate::NODE_ENABLED, 0x71, 0x2, 1, 0));
        assert_eq!(addrs(&g, 0x71), [0xb000, 0xc000, 0xd000, 0xe000]);
        // A failed change changes nothing; its listing is not kept for later.
        g.listed(0x71, &entries(&[quad(0x1, 0, 0xf000, 1, K)]));
        g.updated(&update(GraphUpdate::NODE_PARAMS, 0x71, 0x1, 0, 1));
        assert_eq!(addrs(&g, 0x71), [0xb000, 0xc000, 0xd000, 0xe000]);
        // A change the shim could not read drops what the node touched.
        g.updated(&update(GraphUpdate::NODE_PARAMS, 0x71, 0x1, 0, 0));
        assert_eq!(addrs(&g, 0x71), [0xb000, 0xc000, 0xd000]);
        // Event changes touch no memory.
        g.updated(&update(GraphUpdate::NODE_EVENT, 0x71, 0x2, 0xe1, 0));
        assert_eq!(addrs(&g, 0x71), [0xb000, 0xc000, 0xd000]);
    }

    #[test]
    fn an_update_pairs_nodes_in_listing_order_and_keeps_their_handles_and_enabled_state() {
        let mut g = instantiated();
        g.updated(&update(GraphUpdate::NODE_ENABLED, 0x71, 0x2, 0, 0));
        // The update's graph has nodes 0x11.. with other memory.
        g.listed(
            0x71,
            &entries(&[
                quad(0x11, 0, 0x1a000, 1, K),
                quad(0x12, 0, 0x1c000, 64, W),
                quad(0x13, 0xc2, 0x1d000, 32, W),
                quad(0x14, 0, 0, 0, 0),
            ]),
        );
        g.updated(&update(GraphUpdate::GRAPH, 0x71, 0, 0, 0));
        assert_eq!(addrs(&g, 0x71), [0x1a000, 0x1d000]);
        // Later calls name the original nodes.
        g.updated(&update(GraphUpdate::NODE_ENABLED, 0x71, 0x2, 1, 0));
        assert_eq!(addrs(&g, 0x71), [0x1a000, 0x1c000, 0x1d000]);
        // An update whose graph was not listed leaves nothing known.
        g.updated(&update(GraphUpdate::GRAPH, 0x71, 0, 0, 0));
        assert!(g.of_exec(0x71).is_empty());
    }

    #[test]
    fn a_child_graph_s_update_changes_its_nodes_only() {
        let mut g = instantiated();
        g.listed(0x71, &entries(&[quad(0x23, 0xc1, 0x2d000, 16, W)]));
        g.updated(&update(GraphUpdate::CHILD_GRAPH, 0x71, 0xc1, 0, 0));
        assert_eq!(addrs(&g, 0x71), [0xa000, 0xa100, 0xb000, 0xc000, 0x2d000]);
        // Not listed: the child's nodes touch nothing known, the others stay.
        g.updated(&update(GraphUpdate::CHILD_GRAPH, 0x71, 0xc1, 0, 0));
        assert_eq!(addrs(&g, 0x71), [0xa000, 0xa100, 0xb000, 0xc000]);
        // The same node is still the child's: a later listing finds it.
        g.listed(0x71, &entries(&[quad(0x33, 0xc1, 0x3d000, 16, W)]));
        g.updated(&update(GraphUpdate::CHILD_GRAPH, 0x71, 0xc1, 0, 0));
        assert_eq!(addrs(&g, 0x71), [0xa000, 0xa100, 0xb000, 0xc000, 0x3d000]);
    }

    #[test]
    fn a_handle_instantiated_again_forgets_what_its_earlier_graph_touched() {
        let mut g = instantiated();
        g.listed(0x71, &entries(&[quad(0x5, 0, 0x5000, 8, W)]));
        g.instantiated(0x71, 0x70);
        assert_eq!(addrs(&g, 0x71), [0x5000]);
        g.instantiated(0x71, 0x70);
        assert!(g.of_exec(0x71).is_empty());
    }

    fn made(g: &mut GraphAccesses, api: Api, graph: u64, node: u64, kind: u32, stack: u32) {
        g.node_made(&GraphNode {
            api,
            graph,
            node,
            kind,
            stack: StackId(stack),
        });
    }

    fn sites(g: &GraphAccesses, exec: u64) -> Vec<(u64, Option<(Api, u32)>)> {
        g.of_exec(exec)
            .iter()
            .map(|t| (t.0, g.site(t.3).map(|s| (s.api, s.stack.0))))
            .collect()
    }

    #[test]
    fn accesses_name_the_call_that_captured_or_added_their_node() {
        let mut g = GraphAccesses::default();
        made(&mut g, Api::cuLaunchKernel, 0x70, 0x1, GraphNode::KERNEL, 11);
        made(&mut g, Api::cuMemcpyAsync, 0x70, 0x2, GraphNode::MEMCPY, 12);
        // A captured call that added no node names the node before it: the first name stays.
        made(&mut g, Api::cuMemcpyAsync, 0x70, 0x2, GraphNode::MEMCPY, 99);
        made(&mut g, Api::cuGraphAddMemsetNode, 0x70, 0x3, GraphNode::MEMSET, 13);
        // The same handle in another graph is another node.
        made(&mut g, Api::cuLaunchKernel, 0x80, 0x4, GraphNode::KERNEL, 14);
        g.listed(
            0x71,
            &entries(&[
                quad(0x1, 0, 0xa000, 1, K),
                quad(0x2, 0, 0xc000, 64, W),
                quad(0x2, 0, 0xb000, 64, R),
                quad(0x3, 0xc1, 0xd000, 32, W),
                quad(0x4, 0, 0xe000, 1, K),
            ]),
        );
        g.instantiated(0x71, 0x70);
        assert_eq!(
            sites(&g, 0x71),
            [
                (0xa000, Some((Api::cuLaunchKernel, 11))),
                (0xb000, Some((Api::cuMemcpyAsync, 12))),
                (0xc000, Some((Api::cuMemcpyAsync, 12))),
                (0xd000, Some((Api::cuGraphAddMemsetNode, 13))),
                (0xe000, None),
            ]
        );
        assert!(g.site(1).is_some_and(|s| s.captured() && s.kind_name() == "kernel"));
        assert!(g.site(3).is_some_and(|s| !s.captured() && s.kind_name() == "memset"));

        // A node whose name does not fit what it touches is not named: a kernel named by a
        // copy, a memset that reads.
        let mut g = GraphAccesses::default();
        made(&mut g, Api::cuMemcpyAsync, 0x70, 0x1, GraphNode::MEMCPY, 12);
        made(&mut g, Api::cuMemsetD8Async, 0x70, 0x2, GraphNode::MEMSET, 13);
        g.listed(
            0x71,
            &entries(&[
                quad(0x1, 0, 0xa000, 1, K),
                quad(0x2, 0, 0xc000, 64, W),
                quad(0x2, 0, 0xb000, 64, R),
            ]),
        );
        g.instantiated(0x71, 0x70);
        assert!(sites(&g, 0x71).iter().all(|(_, s)| s.is_none()));
    }

    #[test]
    fn a_destroyed_graph_s_names_are_forgotten_and_updates_carry_their_graph_s_names() {
        let mut g = GraphAccesses::default();
        made(&mut g, Api::cuLaunchKernel, 0x70, 0x1, GraphNode::KERNEL, 11);
        made(&mut g, Api::cuGraphDestroy, 0x70, 0, 0, 0);
        g.listed(0x71, &entries(&[quad(0x1, 0, 0xa000, 1, K)]));
        g.instantiated(0x71, 0x70);
        assert_eq!(sites(&g, 0x71), [(0xa000, None)]);

        // The update's graph 0x60 was captured again: its nodes' names come with its
        // parameters.
        made(&mut g, Api::cuLaunchKernel_ptsz, 0x60, 0x11, GraphNode::KERNEL, 21);
        g.listed(0x71, &entries(&[quad(0x11, 0, 0xa800, 1, K)]));
        g.updated(&update(GraphUpdate::GRAPH, 0x71, 0, 0, 0));
        assert_eq!(sites(&g, 0x71), [(0xa800, Some((Api::cuLaunchKernel_ptsz, 21)))]);
        // A node's new parameters keep its name when they fit it, and drop it otherwise.
        g.listed(0x71, &entries(&[quad(0x1, 0, 0xa900, 1, K)]));
        g.updated(&update(GraphUpdate::NODE_PARAMS, 0x71, 0x1, 0, 0));
        assert_eq!(sites(&g, 0x71), [(0xa900, Some((Api::cuLaunchKernel_ptsz, 21)))]);
        g.listed(0x71, &entries(&[quad(0x1, 0, 0xaa00, 8, W)]));
        g.updated(&update(GraphUpdate::NODE_PARAMS, 0x71, 0x1, 0, 0));
        assert_eq!(sites(&g, 0x71), [(0xaa00, None)]);
    }
}
