//! Events that graphs record and wait for when they run.
//!
//! In a capture, `cuEventRecordWithFlags(CU_EVENT_RECORD_EXTERNAL)` and
//! `cuStreamWaitEvent(CU_EVENT_WAIT_EXTERNAL)` record nothing and wait for nothing: they add
//! an event record or wait node to the graph, and every launch of an executable graph made
//! from it records the event or waits for it (PyTorch's `torch.cuda.Event(external=True)`
//! inside `torch.cuda.graph` does this, to hand work of a replayed graph to other streams).
//! The nodes are kept by capture, then by the graph the capture ended with, then by each
//! executable graph instantiated from it. A launch is one operation of its stream, so it waits
//! for the events of its wait nodes before it and records the events of its record nodes after
//! it: a stream that waits for such an event follows the whole launch (a launch touches no
//! memory the model knows, so this orders no access wrongly; it can only take work to be
//! waited for that a node in the middle of the graph did not cover).
//!
//! Event nodes added to a graph by hand (`cuGraphAddEventRecordNode`) are not recorded.

use super::fast_hash::FastMap;

/// Entries kept per map at most; past this, the map is emptied (launches of the graphs
/// forgotten then record and wait for nothing, as before this was modelled).
const MAX_ENTRIES: usize = 4096;

/// A graph's event nodes.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Nodes {
    /// Events its launches record, in capture order.
    pub records: Vec<u64>,
    /// Events its launches wait for.
    pub waits: Vec<u64>,
}

/// Event nodes by capture (its id), by graph and by executable graph.
#[derive(Debug, Default)]
pub struct GraphEvents {
    by_capture: FastMap<u64, Nodes>,
    by_graph: FastMap<u64, Nodes>,
    by_exec: FastMap<u64, Nodes>,
}

fn bounded<K: Eq + std::hash::Hash, V>(map: &mut FastMap<K, V>, key: &K) {
    if map.len() >= MAX_ENTRIES && !map.contains_key(key) {
        map.clear();
    }
}

impl GraphEvents {
    /// Capture `capture` recorded `event` in an external record node.
    pub fn record(&mut self, capture: u64, event: u64) {
        bounded(&mut self.by_capture, &capture);
        self.by_capture.entry(capture).or_default().records.push(event);
    }

    /// Capture `capture` waits for `event` in an external wait node.
    pub fn wait(&mut self, capture: u64, event: u64) {
        bounded(&mut self.by_capture, &capture);
        self.by_capture.entry(capture).or_default().waits.push(event);
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

    /// Executable graph `exec` was instantiated from `graph`.
    pub fn instantiated(&mut self, graph: u64, exec: u64) {
        match self.by_graph.get(&graph) {
            Some(n) => {
                let n = n.clone();
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
    use super::*;

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
        let want = Nodes {
            records: vec![0xe1, 0xe2],
            waits: vec![0xe0],
        };
        assert_eq!(g.of_exec(0x71), Some(&want));
        assert_eq!(g.of_exec(0x72), Some(&want));
        // A graph without event nodes, reusing an executable graph's handle, has none.
        g.ended(3, 0x62);
        g.instantiated(0x62, 0x71);
        assert_eq!(g.of_exec(0x71), None);
        // Capture 2 ended with another graph at the first graph's handle.
        g.ended(2, 0x61);
        g.instantiated(0x61, 0x73);
        assert_eq!(g.of_exec(0x73).map(|n| n.records.clone()), Some(vec![0xe9]));
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
