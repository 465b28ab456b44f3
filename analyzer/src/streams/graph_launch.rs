//! Graph launches in the happens-before model: a launch follows the last launch of its
//! executable graph, the events its wait nodes wait for and the values and semaphores its
//! captured waits wait for, touches what its nodes touch as one operation of its stream,
//! allocates and frees what its memory nodes do, and records the events of its record nodes
//! and writes and signals what its captured writes and signals do (`graph_syncs`); the order between its own nodes is judged apart
//! (`graph_order`, `graph_frees`), once per change.
//!
//! Graph memory: each launch makes its allocation nodes' memory live (an allocation node's
//! record names it, kind `graph`); memory no free node of the graph frees stays live after the
//! launch, written by it (so a stream that uses it must be ordered after the launch, as after
//! a stream-ordered allocation), until a free (`cuMemFreeAsync`, `cuMemFree`, another graph's
//! free node, or the next launch of a graph that frees it on launch) frees it; memory a free
//! node frees is freed at the end of the launch, so a later use of it is a use after free
//! that names the free node. A free node of memory another graph allocated frees it at the
//! end of the launch, an unordered free when its last use on another stream is not ordered
//! before the launch.

use std::collections::BTreeMap;

use gpuleak_format::{Launch, Seq};

use super::graph_order::NodeAccess;
use super::memory::{AllocInfo, Memory, Mode, Op};
use super::{graph_frees, graph_order, Check, Clock, Slot, StreamFinding, StreamName, Streams};

/// Executable graphs whose last launch is remembered at most; past this, the map is emptied
/// (a launch of a graph forgotten then follows only its stream, as before this was modelled).
const MAX_GRAPH_LAUNCHES: usize = 4096;

impl Streams {
    /// A successful graph launch on stream `name`, which also touches `accesses` (its
    /// pointers, as a kernel launch's).
    pub(super) fn graph_launch(
        &mut self,
        tid: u32,
        seq: Seq,
        l: &Launch<'_>,
        name: StreamName,
        accesses: &[(u64, u64, Mode)],
    ) {
        // A graph launch follows the last launch of the same executable graph, on any stream
        // (cuGraphLaunch: "ordered behind both any previous work in hStream and any previous
        // launches of hGraphExec"), and waits for the events of its wait nodes; it touches
        // what its nodes touch; after it, it records the events of its record nodes (see
        // `graph_events`).
        let nodes = self.graph_events.of_exec(l.function).cloned().unwrap_or_default();
        let slot = self.slot_for(name);
        if self.capturing(slot) {
            // Launched into a capture: the outer graph carries out its captured operations.
            self.launched_into_capture(name, l.function);
            return;
        }
        let Streams {
            states,
            events,
            graph_launches,
            ..
        } = self;
        if let Some(st) = states[slot.0 as usize].as_mut() {
            if let Some(c) = graph_launches.get(&l.function) {
                st.clock.join(c);
            }
            for w in &nodes.waits {
                if let Some(c) = events.get(&w.event).and_then(|e| e.clock.as_ref()) {
                    st.clock.join(c);
                }
            }
        }
        // And for the values and semaphores its captured waits wait for (`graph_syncs`).
        self.launch_syncs(slot, l.function, true);
        let op = Op::new(l.api, l.stack, name, seq, tid);
        // Its graph memory becomes live (`allocate`); what stays live after it is written by
        // it, as a stream-ordered allocation is.
        let memory = self
            .graph_accesses
            .memory_nodes(l.function)
            .cloned()
            .unwrap_or_default();
        self.allocate(slot, op, &memory.kept);
        let kept = &memory.kept;
        // What its kernel, memcpy and memset nodes touch, as one operation of the stream
        // (`graph_accesses`), each access naming the node it came from, for findings.
        let touched = self.graph_accesses.of_exec(l.function);
        let graph: Vec<(u64, u64, Mode)> = accesses
            .iter()
            .copied()
            .chain(touched.iter().map(|&(a, n, m, _)| (a, n, m)))
            .chain(kept.iter().map(|a| (a.lo, a.len, Mode::Write)))
            .collect();
        // (No vector when no node is named: an older trace, or a graph built otherwise.)
        let named = touched.iter().any(|t| t.3 != 0) || kept.iter().any(|a| a.site != 0);
        let sites: Vec<u32> = if named {
            accesses
                .iter()
                .map(|_| 0)
                .chain(touched.iter().map(|t| t.3))
                .chain(kept.iter().map(|a| a.site))
                .collect()
        } else {
            Vec::new()
        };
        let Some(slot) = self.work_sited(tid, seq, (l.api, l.stack), name, &graph, &sites) else {
            return;
        };
        // What its captured writes and signals give the waits after it.
        self.launch_syncs(slot, l.function, false);
        // Its free nodes free what they free, at the end of the launch (the order inside it
        // is judged below): memory another graph allocated, or its own, which it allocated
        // and frees within the launch.
        for &(_, addr, site) in &memory.frees {
            let free = Op { site, ..op };
            if self.free_on(slot, free, addr).is_none() && memory.frees_own(addr) {
                if let Some(info) = self.graph_memory.get(&addr).copied() {
                    self.memory.allocated_and_freed(info, free);
                }
            }
        }
        // Races between the graph's own nodes (`graph_order`), and nodes that use memory a
        // free node frees too early (`graph_frees`), searched at the first launch after what
        // they touch changed.
        let Streams {
            graph_accesses,
            memory,
            graph_memory,
            ..
        } = self;
        let found = graph_accesses.search_unsearched(l.function, |addr| {
            allocation_at(memory, graph_memory, addr).map(|a| (a.ptr, a.size))
        });
        for race in &found.races {
            self.graph_race(op, race);
        }
        for bad in &found.frees {
            self.graph_free(op, bad);
        }
        for r in &nodes.records {
            // Recorded outside any capture now.
            self.captures.record(r.event, name, 0);
        }
        let Streams {
            states,
            events,
            graph_launches,
            ..
        } = self;
        if let Some(st) = states[slot.0 as usize].as_ref() {
            if graph_launches.len() >= MAX_GRAPH_LAUNCHES && !graph_launches.contains_key(&l.function) {
                graph_launches.clear();
            }
            graph_launches.entry(l.function).or_default().clone_from(&st.clock);
            for r in nodes.records {
                let event = events.entry(r.event).or_default();
                event.clock.get_or_insert_with(Clock::new).clone_from(&st.clock);
            }
        }
    }

    /// Before the launch `op` on `slot` of a graph touches anything: the memory of each
    /// allocation node in `kept` (those no free node of the graph frees) becomes live (named by
    /// the allocation node's record, `graph_memory`); memory the graph frees itself exists
    /// only inside the launch, and is remembered freed after it. Memory still live from an
    /// earlier launch (a graph instantiated to free it on launch,
    /// `CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH`) is freed by this launch first, an
    /// unordered free if a use on another stream is not ordered before it.
    fn allocate(&mut self, slot: Slot, op: Op, kept: &[NodeAccess]) {
        if kept.is_empty() {
            return;
        }
        self.enqueue(slot);
        for a in kept {
            if self.memory.at(a.lo).is_some() {
                self.free_on(slot, op, a.lo);
            }
            if let Some(info) = self.graph_memory.get(&a.lo).copied() {
                self.memory.insert(info);
            }
        }
    }

    /// A race between two nodes of the graph `launch` launches: a finding when the bytes both
    /// touch are in tracked memory live now, or in a graph's allocation node.
    fn graph_race(&mut self, launch: Op, race: &graph_order::Race) {
        let Some(info) = allocation_at(&self.memory, &self.graph_memory, race.addr) else {
            return;
        };
        let (a, b) = (&race.first, &race.second);
        self.found.add(StreamFinding {
            check: Check::GraphRace,
            op: Op { site: b.site, ..launch },
            ptr: race.addr,
            other: Some(Op { site: a.site, ..launch }),
            allocation: Some(info),
            created: None,
            moment: None,
            count: 1,
            kernel_sides: (b.mode == Mode::Kernel, a.mode == Mode::Kernel),
            nodes: [None; 2],
        });
    }

    /// A node of the graph `launch` launches that uses memory a free node of it frees, not
    /// finishing before it: an unordered free (the free is the call at fault, the node its
    /// last use) or, when a path leads from the free to the node, a use after free (the
    /// node is at fault); a finding when the allocation freed is known.
    fn graph_free(&mut self, launch: Op, bad: &graph_frees::BadFree) {
        let Some(info) = allocation_at(&self.memory, &self.graph_memory, bad.free.addr) else {
            return;
        };
        let free = Op {
            site: bad.free.site,
            ..launch
        };
        let user = Op {
            site: bad.access.site,
            ..launch
        };
        let kernel = bad.access.mode == Mode::Kernel;
        let (check, op, other, ptr, kernel_sides) = if bad.after {
            (
                Check::UseAfterFree,
                user,
                free,
                bad.access.lo.max(info.ptr),
                (kernel, false),
            )
        } else {
            (Check::UnorderedFree, free, user, info.ptr, (false, kernel))
        };
        self.found.add(StreamFinding {
            check,
            op,
            ptr,
            other: Some(other),
            allocation: Some(info),
            created: None,
            moment: None,
            count: 1,
            kernel_sides,
            nodes: [None; 2],
        });
    }
}

/// The allocation that holds `addr`: tracked memory live now, or a graph's allocation node
/// (`graph_memory`).
fn allocation_at(memory: &Memory, graph_memory: &BTreeMap<u64, AllocInfo>, addr: u64) -> Option<AllocInfo> {
    memory.holding(addr).map(|l| l.info).or_else(|| {
        graph_memory
            .range(..=addr)
            .next_back()
            .map(|(_, a)| *a)
            .filter(|a| addr < a.ptr.saturating_add(a.size.max(1)))
    })
}
