//! Values and external semaphores that graphs write, signal and wait for when they run.
//!
//! A stream memory operation (`cuStreamWriteValue32/64`, `cuStreamWaitValue32/64`, a
//! `cuStreamBatchMemOp`) or an external semaphore's signal or wait queued on a stream under
//! capture does nothing then: it becomes a node of the graph, carried out at every launch of
//! an executable graph made from it (PyTorch's symmetric memory writes and waits for signal
//! values inside `torch.cuda.graph`). The shim records such calls as it records any, so they
//! are known from the capture: kept by capture, then by the graph the capture ended with, then
//! by each executable graph instantiated from it; an executable graph launched into a capture
//! brings its own to that capture. An update from another graph
//! (`cuGraphExecUpdate`) takes that graph's; nodes added by hand (`cuGraphAddBatchMemOpNode`,
//! `cuGraphAddExternalSemaphoresSignalNode`, ...) are not known, and order nothing.
//!
//! A launch is one operation of its stream, so it waits for its waits' values and semaphores
//! before it and writes and signals after it, as for event nodes (`graph_events`): a stream
//! that waits for what a launch signals follows the whole launch, which can hide a race with
//! the nodes after the signal node, never report one that cannot happen.

use gpuleak_format::{GraphUpdate, MemOp};

use super::clock::Slot;
use super::{StreamName, Streams};
use crate::hash::HashMap;

/// Captures, graphs and executable graphs kept per map at most; past this, the map is emptied
/// (launches of the graphs forgotten then write and wait for nothing, as before this was
/// modelled).
const MAX_ENTRIES: usize = 4096;
/// Operations kept per capture at most (the rest are dropped: a wait dropped orders less, a
/// write dropped meets fewer waits).
const MAX_OPS: usize = 1024;

/// One captured operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyncOp {
    /// A stream memory operation (`MemOp` fields): a write, a reduction or a wait.
    Value {
        /// The operation (`MemOp::WRITE_32`, ...).
        op: u32,
        /// The location.
        addr: u64,
        /// The value written or waited for.
        value: u64,
        /// A wait's condition.
        flags: u32,
    },
    /// An external semaphore signaled (`signal`) or waited for.
    Semaphore {
        /// Whether it is a signal.
        signal: bool,
        /// The semaphore.
        sem: u64,
        /// The fence value.
        value: u64,
        /// The keyed mutex's key.
        key: u64,
    },
}

impl SyncOp {
    /// Whether a launch carries it out before its work (a wait) rather than after.
    pub fn is_wait(&self) -> bool {
        match *self {
            SyncOp::Value { op, .. } => op == MemOp::WAIT_32 || op == MemOp::WAIT_64,
            SyncOp::Semaphore { signal, .. } => !signal,
        }
    }
}

/// The captured operations of captures, graphs and executable graphs, in the order they were
/// captured.
#[derive(Debug, Default)]
pub struct GraphSyncs {
    by_capture: HashMap<u64, Vec<SyncOp>>,
    by_graph: HashMap<u64, Vec<SyncOp>>,
    by_exec: HashMap<u64, Vec<SyncOp>>,
}

fn bounded<V>(map: &mut HashMap<u64, V>, key: u64) {
    if map.len() >= MAX_ENTRIES && !map.contains_key(&key) {
        map.clear();
    }
}

impl GraphSyncs {
    /// Capture `capture` captured `op`.
    pub fn captured(&mut self, capture: u64, op: SyncOp) {
        bounded(&mut self.by_capture, capture);
        let ops = self.by_capture.entry(capture).or_default();
        if ops.len() < MAX_OPS {
            ops.push(op);
        }
    }

    /// Capture `capture` ended with graph `graph` (a handle reused for another graph loses
    /// what its earlier graph had).
    pub fn ended(&mut self, capture: u64, graph: u64) {
        match self.by_capture.remove(&capture) {
            Some(ops) if graph != 0 => {
                bounded(&mut self.by_graph, graph);
                self.by_graph.insert(graph, ops);
            }
            _ => {
                self.by_graph.remove(&graph);
            }
        }
    }

    /// Executable graph `exec` was instantiated from `graph`.
    pub fn instantiated(&mut self, graph: u64, exec: u64) {
        self.set(exec, self.by_graph.get(&graph).cloned());
    }

    /// An update of an executable graph: one from another graph takes that graph's
    /// operations (none for a graph no capture made); other updates change none.
    pub fn updated(&mut self, u: &GraphUpdate) {
        if u.result.is_success() && u.what == GraphUpdate::GRAPH {
            self.set(u.exec, self.by_graph.get(&u.graph).cloned());
        }
    }

    fn set(&mut self, exec: u64, ops: Option<Vec<SyncOp>>) {
        match ops.filter(|o| !o.is_empty()) {
            Some(ops) => {
                bounded(&mut self.by_exec, exec);
                self.by_exec.insert(exec, ops);
            }
            None => {
                self.by_exec.remove(&exec);
            }
        }
    }

    /// The operations each launch of `exec` carries out, if any.
    pub fn of_exec(&self, exec: u64) -> Option<&[SyncOp]> {
        self.by_exec.get(&exec).map(Vec::as_slice)
    }
}

impl Streams {
    /// Keeps `op`, queued on `name`, for the graph that `name`'s capture makes; `false` when
    /// the stream is not capturing (the operation is carried out now).
    pub(super) fn captured_sync(&mut self, name: StreamName, op: SyncOp) -> bool {
        let slot = self.slot_for(name);
        if !self.capturing(slot) {
            return false;
        }
        if let Some(id) = self.captures.capture_of(&name) {
            self.graph_syncs.captured(id, op);
        }
        true
    }

    /// `exec` was launched into `name`'s capture: the graph the capture makes carries out
    /// what `exec` does, as a child graph.
    pub(super) fn launched_into_capture(&mut self, name: StreamName, exec: u64) {
        let Some(id) = self.captures.capture_of(&name) else {
            return;
        };
        let Some(ops) = self.graph_syncs.of_exec(exec).map(<[SyncOp]>::to_vec) else {
            return;
        };
        for op in ops {
            self.graph_syncs.captured(id, op);
        }
    }

    /// A launch of `exec` on `slot` carries out its graph's waits (`waits`: before its work,
    /// joining what they learn into the stream's clock) or its writes and signals (after its
    /// work, with the stream's clock then).
    pub(super) fn launch_syncs(&mut self, slot: Slot, exec: u64, waits: bool) {
        let Streams {
            states,
            values,
            semaphores,
            graph_syncs,
            ..
        } = self;
        let (Some(ops), Some(st)) = (graph_syncs.of_exec(exec), states[slot.0 as usize].as_mut()) else {
            return;
        };
        for op in ops.iter().filter(|o| o.is_wait() == waits) {
            let learned = match *op {
                SyncOp::Value { op, addr, value, flags } if waits => values.wait(addr, op, flags, value, &st.clock),
                SyncOp::Semaphore { sem, value, key, .. } if waits => semaphores.wait(sem, value, key, &st.clock),
                SyncOp::Value { op, addr, value, .. } => {
                    values.write(addr, slot, op, value, &st.clock);
                    None
                }
                SyncOp::Semaphore { sem, value, key, .. } => {
                    semaphores.signal(sem, slot, value, key, &st.clock);
                    None
                }
            };
            if let Some(c) = learned {
                st.clock.join(&c);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use gpuleak_format::{Api, CuResult};

    use super::*;

    fn write(value: u64) -> SyncOp {
        SyncOp::Value {
            op: MemOp::WRITE_32,
            addr: 0x100,
            value,
            flags: 0,
        }
    }

    #[test]
    fn operations_follow_capture_graph_and_executable_graph() {
        let mut g = GraphSyncs::default();
        g.captured(1, write(1));
        g.captured(
            1,
            SyncOp::Semaphore {
                signal: false,
                sem: 0x5e,
                value: 2,
                key: 0,
            },
        );
        assert_eq!(g.of_exec(0x90), None);
        g.ended(1, 0x60);
        g.instantiated(0x60, 0x90);
        let ops = g.of_exec(0x90).unwrap();
        assert_eq!(ops.len(), 2);
        assert!(!ops[0].is_wait() && ops[1].is_wait());
        // A graph no capture made has none; an update from it leaves the executable graph none.
        g.instantiated(0x61, 0x91);
        assert_eq!(g.of_exec(0x91), None);
        let update = |graph, result| GraphUpdate {
            api: Api::cuGraphExecUpdate_v2,
            via: Api::NONE,
            result: CuResult(result),
            what: GraphUpdate::GRAPH,
            exec: 0x90,
            node: 0,
            event: 0,
            graph,
            listed: 1,
        };
        g.updated(&update(0x61, 1));
        assert!(g.of_exec(0x90).is_some(), "a refused update changes nothing");
        g.updated(&update(0x61, 0));
        assert_eq!(g.of_exec(0x90), None);
        // A capture that ended without a graph leaves nothing behind.
        g.captured(2, write(3));
        g.ended(2, 0);
        g.instantiated(0, 0x92);
        assert_eq!(g.of_exec(0x92), None);
    }

    #[test]
    fn captures_are_bounded() {
        let mut g = GraphSyncs::default();
        for i in 0..(MAX_OPS as u64 + 5) {
            g.captured(1, write(i));
        }
        g.ended(1, 0x60);
        g.instantiated(0x60, 0x90);
        assert_eq!(g.of_exec(0x90).unwrap().len(), MAX_OPS);
        for c in 0..(MAX_ENTRIES as u64 + 5) {
            g.captured(c + 10, write(c));
        }
        assert!(g.by_capture.len() <= MAX_ENTRIES);
    }
}
