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
//! Every uncertainty drops accesses, never keeps them: a launch that is said to touch memory
//! it no longer touches could report a race that cannot happen. So a successful update whose
//! graph could not be listed leaves the nodes it changed touching nothing known, a node whose
//! parameters the shim could not read touches nothing known, and an executable graph without
//! a listing (an older trace) touches nothing known, as every launch did before this was
//! modelled.

use gpuleak_format::{GraphAccesses as Record, GraphUpdate};

use super::fast_hash::FastMap;
use super::memory::Mode;

/// Executable graphs remembered at most; past this, the map is emptied (launches of the
/// graphs forgotten touch nothing known).
const MAX_EXECS: usize = 4096;

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
}

/// An executable graph's nodes and what its launches touch.
#[derive(Debug, Default, Clone)]
struct Exec {
    nodes: Vec<Node>,
    /// The enabled nodes' accesses, each once.
    touched: Vec<(u64, u64, Mode)>,
}

impl Exec {
    fn refresh(&mut self) {
        let mut all: Vec<(u64, u64, Mode)> = self
            .nodes
            .iter()
            .filter(|n| n.enabled)
            .flat_map(|n| n.accesses.iter().copied())
            .collect();
        all.sort_unstable_by_key(|&(addr, len, mode)| (addr, len, mode as u8));
        all.dedup();
        self.touched = all;
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

/// Gives `nodes` the accesses of `from`, node for node in listing order, keeping their
/// identity and enabled state (an update changes parameters only); when the counts differ
/// (a graph the driver matched otherwise), `from` replaces them.
fn take(nodes: &mut Vec<Node>, from: Vec<Node>) {
    if nodes.len() != from.len() {
        *nodes = from;
        return;
    }
    for (n, f) in nodes.iter_mut().zip(from) {
        n.accesses = f.accesses;
    }
}

/// What executable graphs touch, and the entries listed for the instantiation or update its
/// next record completes.
#[derive(Debug, Default)]
pub struct GraphAccesses {
    by_exec: FastMap<u64, Exec>,
    listed: FastMap<u64, Vec<u64>>,
}

impl GraphAccesses {
    /// The shim listed entries for `exec`.
    pub fn listed(&mut self, exec: u64, entries: &[u64]) {
        if self.listed.len() >= MAX_EXECS && !self.listed.contains_key(&exec) {
            self.listed.clear();
        }
        self.listed.entry(exec).or_default().extend_from_slice(entries);
    }

    /// `exec` was instantiated: it touches what was listed for it, or nothing known.
    pub fn instantiated(&mut self, exec: u64) {
        let nodes = self.listed.remove(&exec).map(|e| nodes_of(&e)).unwrap_or_default();
        self.set(exec, nodes);
    }

    /// A change to `exec`'s nodes; a failed one changed nothing.
    pub fn updated(&mut self, u: &GraphUpdate) {
        let listed = self.listed.remove(&u.exec).map(|e| nodes_of(&e));
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
                }
            }
            GraphUpdate::NODE_ENABLED => {
                for n in exec.nodes.iter_mut().filter(|n| n.node == u.node) {
                    n.enabled = u.event != 0;
                }
            }
            GraphUpdate::GRAPH => match listed {
                Some(l) => take(&mut exec.nodes, l),
                None => exec.nodes.iter_mut().for_each(|n| n.accesses.clear()),
            },
            GraphUpdate::CHILD_GRAPH => {
                let (mut child, others): (Vec<Node>, Vec<Node>) = exec.nodes.drain(..).partition(|n| n.owner == u.node);
                match listed {
                    Some(l) => take(&mut child, l),
                    None => child.iter_mut().for_each(|n| n.accesses.clear()),
                }
                exec.nodes = others.into_iter().chain(child).collect();
            }
            _ => return,
        }
        exec.refresh();
    }

    fn set(&mut self, exec: u64, nodes: Vec<Node>) {
        if nodes.is_empty() {
            self.by_exec.remove(&exec);
            return;
        }
        if self.by_exec.len() >= MAX_EXECS && !self.by_exec.contains_key(&exec) {
            self.by_exec.clear();
        }
        let mut e = Exec {
            nodes,
            touched: Vec::new(),
        };
        e.refresh();
        self.by_exec.insert(exec, e);
    }

    /// What a launch of `exec` touches now: (address, length, mode), each once.
    pub fn of_exec(&self, exec: u64) -> &[(u64, u64, Mode)] {
        self.by_exec.get(&exec).map_or(&[], |e| &e.touched)
    }
}

#[cfg(test)]
mod tests {
    use gpuleak_format::{Api, CuResult};

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
        g.instantiated(0x71);
        g
    }

    #[test]
    fn a_launch_touches_every_listed_node_s_memory_once() {
        let g = instantiated();
        assert_eq!(
            g.of_exec(0x71),
            &[
                (0xa000, 1, Mode::Kernel),
                (0xa100, 1, Mode::Kernel),
                (0xb000, 64, Mode::Read),
                (0xc000, 64, Mode::Write),
                (0xd000, 32, Mode::Write),
            ]
        );
        // Nothing listed: nothing known.
        let mut g = GraphAccesses::default();
        g.instantiated(0x72);
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
        g.instantiated(0x71);
        assert_eq!(addrs(&g, 0x71), [0x5000]);
        g.instantiated(0x71);
        assert!(g.of_exec(0x71).is_empty());
    }
}
