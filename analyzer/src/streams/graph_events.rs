//! Events that graphs record and wait for when they run.
//!
//! A graph's event record and wait nodes record an event, or wait for it, at every launch of
//! an executable graph made from it. Traces from shims that list a graph's nodes say which
//! event nodes each executable graph has (`GraphEvents` records at each instantiation):
//! nodes added by hand (`cuGraphAddEventRecordNode`, `cuGraphAddEventWaitNode`,
//! `cuGraphAddNode`), nodes of child graphs, and nodes a capture made. Later changes are
//! followed (`GraphUpdate` records): a node's new event (`cuGraphExecEventRecordNodeSetEvent`
//! and the like), and updates that take another graph's parameters (`cuGraphExecUpdate`,
//! `cuGraphExecChildGraphNodeSetParams`), listed the same way.
//!
//! Without such a listing (older traces, a driver whose getters failed), the nodes of a
//! capture are known from the capture itself: `cuEventRecordWithFlags(CU_EVENT_RECORD_EXTERNAL)`
//! and `cuStreamWaitEvent(CU_EVENT_WAIT_EXTERNAL)` in a capture record nothing and wait for
//! nothing, they add an event record or wait node to the graph (PyTorch's
//! `torch.cuda.Event(external=True)` inside `torch.cuda.graph` does this, to hand work of a
//! replayed graph to other streams). Those nodes are kept by capture, then by the graph the
//! capture ended with, then by each executable graph instantiated from it.
//!
//! A launch is one operation of its stream, so it waits for the events of its wait nodes
//! before it and records the events of its record nodes after it: a stream that waits for
//! such an event follows the whole launch, and the whole launch follows the events it waits
//! for. For a node in the middle of the graph that orders more than the driver does: the
//! nodes after a record node, or before a wait node, are taken to be ordered with the other
//! stream too. That can hide a race with what those nodes touch (`graph_accesses`), never
//! report one that cannot happen.

use gpuleak_format::GraphUpdate;

use crate::hash::HashMap;

/// Entries kept per map at most; past this, the map is emptied (launches of the graphs
/// forgotten then record and wait for nothing, as before this was modelled).
const MAX_ENTRIES: usize = 4096;

/// One event node.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct EventNode {
    /// The node (`CUgraphNode`), or 0 for one known from its capture alone.
    pub node: u64,
    /// The event it records or waits for.
    pub event: u64,
    /// The child graph node of the instantiated graph's top level that holds it, or 0.
    pub owner: u64,
}

/// A graph's event nodes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Nodes {
    /// Its record nodes: events its launches record.
    pub records: Vec<EventNode>,
    /// Its wait nodes: events its launches wait for.
    pub waits: Vec<EventNode>,
}

impl Nodes {
    fn is_empty(&self) -> bool {
        self.records.is_empty() && self.waits.is_empty()
    }

    /// Appends the listed triples `(node, event, owner)`.
    fn extend(&mut self, records: &[u64], waits: &[u64]) {
        let triples = |v: &[u64]| {
            v.chunks_exact(3)
                .map(|t| EventNode {
                    node: t[0],
                    event: t[1],
                    owner: t[2],
                })
                .collect::<Vec<_>>()
        };
        self.records.extend(triples(records));
        self.waits.extend(triples(waits));
    }
}

/// Event nodes by capture (its id), by graph and by executable graph, and the nodes listed
/// for the instantiation or update of an executable graph that its next record completes.
#[derive(Debug, Default)]
pub struct GraphEvents {
    by_capture: HashMap<u64, Nodes>,
    by_graph: HashMap<u64, Nodes>,
    by_exec: HashMap<u64, Nodes>,
    listed: HashMap<u64, Nodes>,
}

/// An update gives the executable graph's nodes the parameters of the nodes of another graph
/// of the same shape, node for node in the order the shim listed both (the order the driver
/// lists a graph's nodes in); the executable graph's nodes keep their identity, the node
/// handles of the graph they were instantiated from, which later calls name. `false`, and
/// nothing changed, when the counts differ (a graph the driver matched otherwise).
fn take_events(nodes: &mut [EventNode], from: &[EventNode]) -> bool {
    if nodes.len() != from.len() {
        return false;
    }
    for (n, f) in nodes.iter_mut().zip(from) {
        n.event = f.event;
    }
    true
}

fn bounded<K: Eq + std::hash::Hash, V>(map: &mut HashMap<K, V>, key: &K) {
    if map.len() >= MAX_ENTRIES && !map.contains_key(key) {
        map.clear();
    }
}

impl GraphEvents {
    /// Capture `capture` recorded `event` in an external record node.
    pub fn record(&mut self, capture: u64, event: u64) {
        bounded(&mut self.by_capture, &capture);
        let node = EventNode {
            event,
            ..EventNode::default()
        };
        self.by_capture.entry(capture).or_default().records.push(node);
    }

    /// Capture `capture` waits for `event` in an external wait node.
    pub fn wait(&mut self, capture: u64, event: u64) {
        bounded(&mut self.by_capture, &capture);
        let node = EventNode {
            event,
            ..EventNode::default()
        };
        self.by_capture.entry(capture).or_default().waits.push(node);
    }

    /// Capture `capture` ended with graph `graph` (a handle reused for another graph loses
    /// what its earlier graph had).
    pub fn ended(&mut self, capture: u64, graph: u64) {
        let nodes = self.by_capture.remove(&capture);
        match nodes {
            Some(n) if graph != 0 => {
                bounded(&mut self.by_graph, &graph);
                self.by_graph.insert(graph, n);
            }
            _ => {
                self.by_graph.remove(&graph);
            }
        }
    }

    /// The shim listed event nodes (triples) for the instantiation or update of `exec` that
    /// its next `GraphExec` or `GraphUpdate` record completes.
    pub fn listed(&mut self, exec: u64, records: &[u64], waits: &[u64]) {
        bounded(&mut self.listed, &exec);
        self.listed.entry(exec).or_default().extend(records, waits);
    }

    /// Executable graph `exec` was instantiated from `graph`: it has the event nodes listed
    /// for it, or, when none were (an older trace), those of the capture that made `graph`.
    pub fn instantiated(&mut self, graph: u64, exec: u64) {
        let nodes = match self.listed.remove(&exec) {
            Some(listed) => Some(listed),
            None => self.by_graph.get(&graph).cloned(),
        };
        self.set(exec, nodes);
    }

    /// An update of an executable graph's event nodes; a failed one changed nothing.
    pub fn updated(&mut self, u: &GraphUpdate) {
        let listed = self.listed.remove(&u.exec);
        if !u.result.is_success() {
            return;
        }
        match u.what {
            GraphUpdate::NODE_EVENT => {
                if let Some(n) = self.by_exec.get_mut(&u.exec) {
                    for e in n.records.iter_mut().chain(n.waits.iter_mut()) {
                        if e.node == u.node {
                            e.event = u.event;
                        }
                    }
                }
            }
            // Not listed: the update's nodes are unknown, so the last known ones stay (an
            // event a launch no longer records can only hide a finding, never make one).
            GraphUpdate::GRAPH if u.listed != 0 => {
                let mut nodes = self.by_exec.remove(&u.exec).unwrap_or_default();
                let listed = listed.unwrap_or_default();
                if !take_events(&mut nodes.records, &listed.records) || !take_events(&mut nodes.waits, &listed.waits) {
                    nodes = listed;
                }
                self.set(u.exec, Some(nodes));
            }
            GraphUpdate::CHILD_GRAPH if u.listed != 0 => {
                let mut nodes = self.by_exec.remove(&u.exec).unwrap_or_default();
                let listed = listed.unwrap_or_default();
                let (mut records, others): (Vec<_>, Vec<_>) =
                    nodes.records.into_iter().partition(|e| e.owner == u.node);
                let (mut waits, other_waits): (Vec<_>, Vec<_>) =
                    nodes.waits.into_iter().partition(|e| e.owner == u.node);
                if !take_events(&mut records, &listed.records) || !take_events(&mut waits, &listed.waits) {
                    (records, waits) = (listed.records, listed.waits);
                }
                nodes.records = others.into_iter().chain(records).collect();
                nodes.waits = other_waits.into_iter().chain(waits).collect();
                self.set(u.exec, Some(nodes));
            }
            _ => {}
        }
    }

    /// `exec` has `nodes` (none, when empty or `None`).
    fn set(&mut self, exec: u64, nodes: Option<Nodes>) {
        match nodes.filter(|n| !n.is_empty()) {
            Some(n) => {
                bounded(&mut self.by_exec, &exec);
                self.by_exec.insert(exec, n);
            }
            None => {
                self.by_exec.remove(&exec);
            }
        }
    }

    /// The event nodes of executable graph `exec`, if it has any.
    pub fn of_exec(&self, exec: u64) -> Option<&Nodes> {
        self.by_exec.get(&exec)
    }
}

#[cfg(test)]
mod tests {
    use gpuleak_format::{Api, CuResult};

    use super::*;

    /// The events `exec`'s launches record and wait for.
    fn events(g: &GraphEvents, exec: u64) -> Option<(Vec<u64>, Vec<u64>)> {
        let n = g.of_exec(exec)?;
        let ev = |v: &[EventNode]| v.iter().map(|e| e.event).collect();
        Some((ev(&n.records), ev(&n.waits)))
    }

    fn update(what: u32, exec: u64, node: u64, event: u64, listed: u32) -> GraphUpdate {
        GraphUpdate {
            api: Api::cuGraphExecUpdate_v2,
            via: Api::NONE,
            result: CuResult(0),
            what,
            exec,
            node,
            event,
            graph: 0x60,
            listed,
        }
    }

    #[test]
    fn listed_nodes_make_an_executable_graph_s_events_and_replace_what_its_capture_said() {
        let mut g = GraphEvents::default();
        // A capture's external record, then a listing of the graph at instantiation: the
        // listing wins (it holds the hand-built wait node the capture could not see).
        g.record(1, 0xe1);
        g.ended(1, 0x61);
        g.listed(0x71, &[0xa1, 0xe1, 0, 0xa2, 0xe2, 0xc1], &[0xa3, 0xe3, 0]);
        g.instantiated(0x61, 0x71);
        assert_eq!(events(&g, 0x71), Some((vec![0xe1, 0xe2], vec![0xe3])));
        // A listing with no event node: none, whatever the capture said.
        g.listed(0x72, &[], &[]);
        g.instantiated(0x61, 0x72);
        assert_eq!(events(&g, 0x72), None);
        // No listing (an older trace): the capture's.
        g.instantiated(0x61, 0x73);
        assert_eq!(events(&g, 0x73), Some((vec![0xe1], vec![])));
    }

    #[test]
    fn updates_change_a_node_s_event_a_child_graph_s_nodes_or_all_of_them() {
        let mut g = GraphEvents::default();
        g.listed(0x71, &[0xa1, 0xe1, 0, 0xa2, 0xe2, 0xc1], &[0xa3, 0xe3, 0xc1]);
        g.instantiated(0x61, 0x71);
        // One node's event; a failed call changes nothing, nor does a node the graph lacks.
        g.updated(&update(GraphUpdate::NODE_EVENT, 0x71, 0xa1, 0xf1, 0));
        let mut failed = update(GraphUpdate::NODE_EVENT, 0x71, 0xa2, 0xf2, 0);
        failed.result = CuResult(1);
        g.updated(&failed);
        g.updated(&update(GraphUpdate::NODE_EVENT, 0x71, 0xa9, 0xf9, 0));
        assert_eq!(events(&g, 0x71), Some((vec![0xf1, 0xe2], vec![0xe3])));
        // The child graph node 0xc1 takes another graph's nodes: its two go, one comes.
        g.listed(0x71, &[], &[0xb1, 0xe4, 0xc1]);
        g.updated(&update(GraphUpdate::CHILD_GRAPH, 0x71, 0xc1, 0, 1));
        assert_eq!(events(&g, 0x71), Some((vec![0xf1], vec![0xe4])));
        // A whole update not listed keeps what was known; one listed replaces it.
        g.updated(&update(GraphUpdate::GRAPH, 0x71, 0, 0, 0));
        assert_eq!(events(&g, 0x71), Some((vec![0xf1], vec![0xe4])));
        g.listed(0x71, &[0xa1, 0xe5, 0], &[]);
        g.updated(&update(GraphUpdate::GRAPH, 0x71, 0, 0, 1));
        assert_eq!(events(&g, 0x71), Some((vec![0xe5], vec![])));
        // A failed update drops what was listed for it.
        g.listed(0x71, &[0xa1, 0xe6, 0], &[]);
        let mut failed = update(GraphUpdate::GRAPH, 0x71, 0, 0, 1);
        failed.result = CuResult(910);
        g.updated(&failed);
        assert_eq!(events(&g, 0x71), Some((vec![0xe5], vec![])));
        g.listed(0x71, &[], &[]);
        g.updated(&update(GraphUpdate::GRAPH, 0x71, 0, 0, 1));
        assert_eq!(events(&g, 0x71), None);
        // A child graph's update gives nodes to an executable graph that had none.
        g.listed(0x71, &[0xb2, 0xe7, 0xc2], &[]);
        g.updated(&update(GraphUpdate::CHILD_GRAPH, 0x71, 0xc2, 0, 1));
        assert_eq!(events(&g, 0x71), Some((vec![0xe7], vec![])));
    }

    #[test]
    fn an_updated_node_keeps_the_handle_later_calls_name_it_by() {
        let mut g = GraphEvents::default();
        g.listed(0x71, &[0xa1, 0xe1, 0, 0xb1, 0xe2, 0xc1], &[0xb2, 0xe3, 0xc1]);
        g.instantiated(0x61, 0x71);
        // The update's graph has its own node handles; the executable graph keeps its own.
        g.listed(0x71, &[0xd1, 0xf1, 0], &[]);
        g.listed(0x71, &[0xd2, 0xf2, 0xd9], &[0xd3, 0xf3, 0xd9]);
        g.updated(&update(GraphUpdate::GRAPH, 0x71, 0, 0, 1));
        assert_eq!(events(&g, 0x71), Some((vec![0xf1, 0xf2], vec![0xf3])));
        g.updated(&update(GraphUpdate::NODE_EVENT, 0x71, 0xa1, 0xe9, 0));
        g.updated(&update(GraphUpdate::NODE_EVENT, 0x71, 0xb2, 0xe8, 0));
        assert_eq!(events(&g, 0x71), Some((vec![0xe9, 0xf2], vec![0xe8])));
        // So does a child graph's: its node 0xb1 is named after the update too.
        g.listed(0x71, &[0xd4, 0xf4, 0xc1], &[0xd5, 0xf5, 0xc1]);
        g.updated(&update(GraphUpdate::CHILD_GRAPH, 0x71, 0xc1, 0, 1));
        assert_eq!(events(&g, 0x71), Some((vec![0xe9, 0xf4], vec![0xf5])));
        g.updated(&update(GraphUpdate::NODE_EVENT, 0x71, 0xb1, 0xe7, 0));
        assert_eq!(events(&g, 0x71), Some((vec![0xe9, 0xe7], vec![0xf5])));
    }

    #[test]
    fn nodes_follow_a_capture_to_its_graph_and_every_executable_graph_made_from_it() {
        let mut g = GraphEvents::default();
        g.record(1, 0xe1);
        g.wait(1, 0xe0);
        g.record(1, 0xe2);
        g.record(2, 0xe9);
        g.ended(1, 0x61);
        g.instantiated(0x61, 0x71);
        g.instantiated(0x61, 0x72);
        let want = (vec![0xe1, 0xe2], vec![0xe0]);
        assert_eq!(events(&g, 0x71), Some(want.clone()));
        assert_eq!(events(&g, 0x72), Some(want));
        // A graph without event nodes, reusing an executable graph's handle, has none.
        g.ended(3, 0x62);
        g.instantiated(0x62, 0x71);
        assert_eq!(g.of_exec(0x71), None);
        // Capture 2 ended with another graph at the first graph's handle.
        g.ended(2, 0x61);
        g.instantiated(0x61, 0x73);
        assert_eq!(events(&g, 0x73), Some((vec![0xe9], vec![])));
        // And a capture with none, at that handle again: nothing.
        g.ended(4, 0x61);
        g.instantiated(0x61, 0x74);
        assert_eq!(g.of_exec(0x74), None);
    }

    #[test]
    fn maps_are_bounded() {
        let mut g = GraphEvents::default();
        for i in 0..(MAX_ENTRIES as u64 + 5) {
            g.record(i, 0xe);
            g.ended(i, 0x1000 + i);
            g.instantiated(0x1000 + i, 0x9000 + i);
        }
        assert!(g.by_graph.len() <= MAX_ENTRIES && g.by_exec.len() <= MAX_ENTRIES);
        assert!(g.by_capture.is_empty());
    }
}
