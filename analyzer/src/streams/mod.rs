//! The stream-ordering checks: a happens-before model of streams and host threads, built
//! with vector clocks while a trace is replayed in sequence order.
//!
//! # The model
//!
//! Every stream has a slot (a dimension of the clocks) and counts its operations there.
//! Host threads, streams and recorded events each carry a [`Clock`]: for every stream, how
//! many of its operations are known to be complete. Edges:
//!
//! - **enqueue**: an operation queued by a host thread comes after everything that thread
//!   knew complete (its clock joins the stream's);
//! - **event record → stream wait / event synchronize**: the event keeps the stream's clock
//!   at the record; a wait joins it into the waiting stream, a synchronize (or a successful
//!   query) into the host thread;
//! - **host synchronization**: a completed stream synchronize or successful stream query
//!   joins the stream's clock into the thread's; a context synchronize joins every stream's;
//!   `cuMemFree` and `cuMemFreeHost` (what `cudaFree`/`cudaFreeHost` call, which synchronize
//!   the device) count as a context synchronize;
//! - **blocking copies**: synchronous copies are operations of the legacy default stream (of
//!   the per-thread default stream for `_ptds` variants); those to or from host memory
//!   (`cuMemcpy`, `HtoD`, `DtoH`, and 2D/3D copies with a side in host memory: an address
//!   outside the device memory the model tracks) also make the host wait for them. Synchronous
//!   device-to-device copies and memsets do not (CUDA's "API synchronization behavior");
//!   asynchronous copies whose destination is pageable host memory (no memory the trace shows
//!   allocated, registered, reserved or mapped) do, as the same rules say, and so do
//!   synchronous memsets of page-locked host or managed memory;
//! - **legacy default stream**: an operation on it waits for all earlier work of every
//!   blocking stream, and every later operation of a blocking stream waits for it.
//!   Non-blocking streams (flag 1) are exempt; per-thread default streams are blocking.
//! - **synchronous peer copies** (`cuMemcpyPeer`, `cuMemcpy3DPeer`) are serialized with all
//!   work: such a copy waits for all earlier work of every stream, non-blocking ones included,
//!   and every later operation of every stream waits for it.
//!
//! A checkpoint (the start of a segment of a bounded trace, whose history before it was
//! dropped) counts as a full synchronization, and what the replay of its kept records finds
//! is forgotten ([`Streams::checkpoint`]).
//!
//! Stream handle 0 names the legacy default stream, or the calling thread's per-thread
//! default stream for `_ptsz`/`_ptds` APIs; handles 1 and 2 are `CU_STREAM_LEGACY` and
//! `CU_STREAM_PER_THREAD`. Operations on a stream under capture build a graph and are left
//! out (a stream that waits for an event recorded in a capture joins it until it ends:
//! [`crate::captures`]); a graph launch is an operation of its stream that touches no memory the model knows
//! (what a graph touches is not recorded), so it orders and is ordered, and counts as work
//! to wait for, but never races; it waits for and records the events of its graph's event
//! nodes (`graph_events`: listed by the shim, or known from the capture that made the graph). Host functions (`cuLaunchHostFunc`) and callbacks are
//! operations with no memory too, and so are the writes of stream memory operations; a
//! stream's wait for a value is an edge from the writes queued before it that could have
//! written that value (`values`).
//!
//! A host function also orders the host after its stream, when the trace shows it run
//! (`HostFnRan`, written by the shim's wrapper as the driver starts it): the driver runs it
//! only once everything queued before it on its stream is complete, and programs use it to
//! learn just that (XLA's callback after a copy into a staging buffer hands the buffer back to
//! its host allocator, which gives it out again). From the run on, the host knows complete
//! what the stream had done when the function was queued, as if the program had recorded an
//! event just before the function and synchronized it; the function itself is not known
//! complete (it has only started). A run numbered before its queue record (the driver ran
//! the function before the call returned) counts from the queue record on; a run of a
//! function the trace never showed queued is ignored. The host function of a captured graph
//! runs unseen (the shim wraps none under capture).
//!
//! The host is one: what any thread has waited for is known complete to every later call of
//! every thread. Host threads synchronize with each other in ways the trace cannot see
//! (mutexes, condition variables, queues, joins), and a buffer handed from the thread that
//! waited for its producer to another thread is the usual way of a pipeline. Waits are
//! numbered after their call returns, so a wait numbered before an operation had returned
//! before the operation was numbered (a synchronizing free is numbered before its call, like
//! every free: an operation another thread queues while it waits counts as after it). What
//! this cannot see is two threads that do not synchronize at all and whose calls happen to
//! fall in a harmless order: a race that the threads' timing decided, not their code, is
//! found only when it shows in the trace's order.
//! "Waited for before exit" means by any thread.
//!
//! # Memory
//!
//! Bounded by the live streams, events and allocations: a destroyed stream's slot is reused
//! once the host has waited for its work (its counts continue, and accesses remembered from
//! its earlier occupant count as ordered); each allocation keeps at most
//! [`memory::HISTORY`] accesses; freed ranges are remembered up to [`memory::FREED`];
//! values written by stream memory operations for at most `values::MAX_ADDRESSES`
//! addresses (`values::HISTORY` writes of each stream to each, `values::MAX_WRITES` in all),
//! external semaphores while they are imported (their signals bounded likewise), host
//! functions queued and not yet seen running (`records::MAX_HOST_FNS`), and graphs'
//! event nodes and captured memory operations and semaphore signals and waits for a bounded
//! number of captures, graphs and executable graphs; findings are folded by root cause as they are met.
//!
//! ```
//! use gpuleak_analyzer::streams::{Check, Streams};
//! use gpuleak_format::*;
//!
//! let mut s = Streams::new();
//! let create = StreamCreate {
//!     api: Api::cuStreamCreate, result: CuResult::SUCCESS, stream: Stream(0x50),
//!     flags: 0, priority: 0, stack: StackId(1),
//! };
//! s.apply(1, &Record { seq: Seq(1), time_ns: 0, body: create.into() });
//! let found = s.finish();
//! assert_eq!(found[0].check, Check::StreamLeak);
//! ```

pub(crate) mod apis;
pub mod clock;
mod found;
mod graph_accesses;
mod graph_events;
mod graph_frees;
mod graph_launch;
mod graph_order;
mod graph_syncs;
pub mod memory;
mod records;
mod semaphores;
mod values;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use gpuleak_format::{Api, Body, Record, Seq, StackId, StreamCreate};

pub use apis::{is_graph_launch, is_kernel_launch};
pub use clock::{Clock, Epoch, Slot};
pub use found::{Check, Created, Moment, StreamFinding};
pub use graph_accesses::NodeSite;
pub use memory::{AllocInfo, Mode, Op};

use crate::captures::Captures;
use crate::hash::{HashMap, HashSet};
use found::Found;
use memory::{Access, Memory, Touch};

/// Which stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamName {
    /// The legacy default stream (handle 0, or `CU_STREAM_LEGACY`).
    Legacy,
    /// A thread's per-thread default stream (`CU_STREAM_PER_THREAD`, or handle 0 in a
    /// `_ptsz` API).
    PerThread(u32),
    /// A created stream.
    Handle(u64),
    /// No stream: the host itself (event synchronization, synchronous frees).
    Host,
}

/// Whose clock a host thread learns when it waits.
#[derive(Debug, Clone, Copy)]
enum Known {
    /// A stream's (a stream synchronize or successful query, a blocking copy).
    Stream(Slot),
    /// A recorded event's (an event synchronize or successful query).
    Event(u64),
    /// Every stream's (a context synchronize, a synchronizing free, a teardown).
    All,
}

/// The last work queued on a stream.
#[derive(Debug, Clone, Copy)]
struct Work {
    epoch: Epoch,
    op: Op,
    ptr: u64,
    allocation: Option<AllocInfo>,
}

#[derive(Debug)]
struct StreamState {
    name: StreamName,
    clock: Clock,
    blocking: bool,
    created: Option<Created>,
    destroyed: bool,
    /// The last work queued: what the host must wait for before the stream's slot is reused.
    last_work: Option<Work>,
    /// The last work whose completion the program could observe: all but stream-ordered
    /// allocations and frees, which only hand memory back and forth and need no wait at exit,
    /// and prefetches and discards ([`apis::has_observable_result`]).
    last_result: Option<Work>,
    /// A wait on an event not recorded, judged at this stream's next work.
    unrecorded_wait: Option<UnrecordedWait>,
}

/// A stream's wait on an event not recorded: a no-op. It is a finding only if it mattered:
/// when the stream next queues work, some other stream's work that was outstanding at the
/// wait is still not known complete to it. Libraries that keep an event per buffer and wait
/// on it before the buffer's first use (cudarc does), or wait on several events of which the
/// next covers the work, wait on unrecorded events harmlessly.
///
/// The host's waits on unrecorded events (`cuEventSynchronize`, and a context's
/// `cuCtxWaitEvent`) are judged at once: a finding only if some stream had outstanding work
/// that the host had not already waited for (by a synchronization, or by a copy into pageable
/// memory, which returns once the stream's work before it is done). Outstanding work is each
/// stream's work whose end the program could observe (`Streams::outstanding`): stream-ordered
/// allocations and frees, prefetches and discards queued since are nothing to wait for, as
/// at exit. cudarc frees a buffer on its stream and then synchronizes the never-recorded
/// event of a pinned buffer after a copy back into a `Vec` has waited for everything else:
/// no finding.
#[derive(Debug, Clone)]
struct UnrecordedWait {
    op: Op,
    event: Option<Created>,
    /// What was outstanding anywhere at the wait (every stream's observable work then).
    pending: Clock,
}

#[derive(Debug, Default)]
struct EventState {
    /// The recording stream's clock at the last record.
    clock: Option<Clock>,
    created: Option<Created>,
}

/// Replays stream-ordering records; see the module documentation.
#[derive(Debug, Default)]
pub struct Streams {
    states: Vec<Option<StreamState>>,
    /// Operations counted per slot so far (continuing across a slot's occupants).
    counters: Vec<u64>,
    /// Times each slot was reused.
    generations: Vec<u32>,
    free_slots: Vec<Slot>,
    by_name: HashMap<StreamName, Slot>,
    /// What the host has waited for, on any thread.
    host: Clock,
    /// Every stream's work.
    all: Clock,
    /// Every blocking stream's work (what a legacy-stream operation waits for).
    blocking: Clock,
    /// The last legacy-stream operation (what later blocking-stream work waits for).
    barrier: Clock,
    /// What every later operation of every stream waits for: the last operation serialized
    /// with all work (a synchronous peer copy), and the events of context-wide waits
    /// (`cuCtxWaitEvent`); empty until there is one.
    fence: Clock,
    events: HashMap<u64, EventState>,
    /// Streams under capture, a capture's events and the streams that joined it through them.
    captures: Captures<StreamName>,
    /// Contexts the trace has shown (created, retained, or current at an allocation).
    contexts: HashSet<u64>,
    /// The context of the last allocation that added to `contexts` (0: none yet).
    last_context: u64,
    memory: Memory,
    /// Address ranges (start to end) of memory that is not pageable host memory and that
    /// `memory` does not track: VMM reservations, IPC mappings, imported pool pointers, graph
    /// memory and registered host ranges (see `is_pageable`).
    unpageable: std::collections::BTreeMap<u64, (u64, gpuleak_format::MemKind)>,
    /// The allocation nodes of graphs (by address; an address another node is given later
    /// replaces them), for races inside a graph, whose nodes may use them. Bounded by
    /// `records::MAX_GRAPH_ALLOCATIONS`.
    graph_memory: BTreeMap<u64, AllocInfo>,
    /// Values written by stream memory operations, for the waits that may read them.
    values: values::Values,
    /// External semaphores imported, and their signals, for the waits they may meet.
    semaphores: semaphores::Semaphores,
    /// Event record and wait nodes of graphs, which their launches carry out.
    graph_events: graph_events::GraphEvents,
    /// Stream memory operations and external semaphore signals and waits that captures
    /// made into graph nodes, which their launches carry out.
    graph_syncs: graph_syncs::GraphSyncs,
    /// Memory that the kernel, memcpy and memset nodes of executable graphs touch.
    graph_accesses: graph_accesses::GraphAccesses,
    /// What the last launch of each executable graph knew, for its next launch, which follows
    /// it on whatever stream (bounded as `graph_events`' maps are).
    graph_launches: HashMap<u64, Clock>,
    /// Host functions queued (`HostFnQueued`) and not yet seen running, by id: what their
    /// stream had done when each was queued (see `records::host_fn_queued`). Bounded by
    /// `records::MAX_HOST_FNS`.
    host_fns: HashMap<u64, Clock>,
    /// Host functions seen running before their queue record (the driver ran them before the
    /// call that queued them returned), by id; bounded likewise.
    ran_early: HashSet<u64>,
    found: Found,
}

fn success(r: gpuleak_format::CuResult) -> bool {
    r.is_success()
}

impl Streams {
    /// An empty model.
    pub fn new() -> Streams {
        Streams::default()
    }

    /// Replays one record (records must come in sequence order).
    pub fn apply(&mut self, tid: u32, record: &Record<'_>) {
        let seq = record.seq;
        match &record.body {
            Body::StreamCreate(c) if success(c.result) => self.create_stream(tid, seq, c),
            Body::StreamDestroy(d) if success(d.result) => self.destroy_stream(d.stream.0),
            Body::EventCreate(e) if success(e.result) => self.create_event(tid, seq, e),
            Body::EventDestroy(e) if success(e.result) => {
                self.events.remove(&e.event.0);
            }
            Body::EventRecord(r) if success(r.result) => self.record_event(tid, r),
            Body::StreamWait(w) if success(w.result) => self.stream_wait(tid, seq, w),
            Body::Sync(s) if success(s.result) => self.sync(tid, seq, s),
            Body::Copy(c) if success(c.result) => self.copy(tid, seq, c),
            Body::Launch(l) if success(l.result) => self.launch(tid, seq, l),
            // A refused copy or launch did nothing, but a freed pointer in it is still a use
            // after free (a driver that checks pointers late would have run it).
            Body::Copy(c) => {
                let name = Self::name_of(c.api, c.stream.0, tid);
                let (_, memset) = apis::copy_kind(c.api);
                let op = Op::new(c.api, c.stack, name, seq, tid);
                self.refused(op, c.dst.0);
                if !memset {
                    self.refused(op, c.src);
                }
            }
            Body::Launch(l) => {
                let name = Self::name_of(l.api, l.stream.0, tid);
                let op = Op::new(l.api, l.stack, name, seq, tid);
                for &p in l.ptrs.0.iter() {
                    self.refused(op, p);
                }
            }
            Body::HostFn(h) if success(h.result) => self.host_fn(tid, seq, h),
            Body::HostFnQueued(h) => self.host_fn_queued(tid, seq, h),
            Body::HostFnRan(h) => self.host_fn_ran(h.id),
            Body::RangeOp(r) => self.range_op(tid, seq, r),
            Body::MemOp(m) if success(m.result) => self.mem_op(tid, seq, m),
            Body::ExtSemaphore(e) if success(e.result) => self.ext_semaphore(tid, seq, e),
            Body::ExtSemaphoreOp(o) if success(o.result) => self.ext_semaphore_op(tid, seq, o),
            Body::Capture(c) if success(c.result) => self.capture(tid, c),
            Body::GraphEvents(e) => self.graph_events.listed(e.exec, &e.records.0, &e.waits.0),
            Body::GraphAccesses(a) => self.graph_accesses.listed(a.exec, &a.nodes.0),
            Body::GraphEdges(e) => self.graph_accesses.edges_listed(e.exec, &e.entries.0),
            Body::GraphMemNodes(m) => self.graph_accesses.memory_listed(m.exec, &m.allocs.0, &m.frees.0),
            Body::GraphExec(g) if success(g.result) => {
                self.graph_events.instantiated(g.graph, g.exec);
                self.graph_syncs.instantiated(g.graph, g.exec);
                self.graph_accesses.instantiated(g.exec, g.graph);
                // A new executable graph at a handle seen before has no launches yet.
                self.graph_launches.remove(&g.exec);
            }
            Body::GraphNode(n) => self.graph_accesses.node_made(n),
            Body::GraphUpdate(u) => {
                self.graph_events.updated(u);
                self.graph_syncs.updated(u);
                self.graph_accesses.updated(u);
            }
            Body::Alloc(a) if success(a.result) => {
                // Only whether there were several contexts matters (`teardown`): once two are
                // known, or at the context of the allocation before, there is nothing to add.
                if a.ctx.0 != 0 && a.ctx.0 != self.last_context && self.contexts.len() < 2 {
                    self.contexts.insert(a.ctx.0);
                    self.last_context = a.ctx.0;
                }
                self.alloc(tid, seq, a)
            }
            Body::CtxCreate(c) if success(c.result) => {
                self.contexts.insert(c.ctx.0);
            }
            Body::Free(f) if success(f.result) => self.free(tid, seq, f),
            Body::Checkpoint(_) => self.checkpoint(),
            _ => {}
        }
    }

    /// The end of a checkpoint (the start of a segment of a bounded trace): the records
    /// before it are what the checkpoint kept of a dropped history, which lacks the
    /// synchronizations and waits that ordered them. Taken as a full synchronization, and
    /// what their replay found is forgotten: a dropped window may hide a finding, never make
    /// one up.
    pub fn checkpoint(&mut self) {
        self.host_learns(Known::All);
        self.sweep();
        self.found = Found::default();
    }

    /// A context was torn down by `api` (successfully, and for a primary
    /// context, the last release or a reset): work the host never waited for is reported,
    /// then the driver has finished (or dropped) all of it.
    ///
    /// Records do not say which context a stream belongs to, so in a program that has used
    /// several contexts (several devices, say) a teardown is not judged: work left on the
    /// streams of the one torn down is reported at exit instead.
    pub fn teardown(&mut self, api: Api) {
        if self.contexts.len() > 1 {
            return;
        }
        self.report_unsynchronized(Moment::Teardown(api));
        self.host_learns(Known::All);
        self.sweep();
    }

    /// Ends the replay: unsynchronized work, then streams and events never destroyed.
    pub fn finish(mut self) -> Vec<StreamFinding> {
        self.report_unsynchronized(Moment::Exit);
        for st in self.states.iter().flatten() {
            if let (false, Some(c)) = (st.destroyed, st.created) {
                self.found.add(leak(Check::StreamLeak, c, st.name));
            }
        }
        let mut events: Vec<(u64, Created)> = self
            .events
            .iter()
            .filter_map(|(h, e)| e.created.map(|c| (*h, c)))
            .collect();
        // By handle where creations share a sequence number, so that no hash order shows.
        events.sort_by_key(|(h, c)| (c.seq, *h));
        for (h, c) in events {
            self.found.add(leak(Check::EventLeak, c, StreamName::Handle(h)));
        }
        self.report_leaked_semaphores();
        let nodes = &self.graph_accesses;
        self.found.into_list(|id| nodes.site(id))
    }

    /// Live allocations tracked (for memory bounds in tests).
    pub fn live_allocations(&self) -> usize {
        self.memory.live_count()
    }

    /// Stream slots in use, live or destroyed with work not yet waited for.
    pub fn slots_in_use(&self) -> usize {
        self.states.iter().flatten().count()
    }

    // ---- streams and slots ----

    fn name_of(api: Api, handle: u64, tid: u32) -> StreamName {
        match handle {
            0 if apis::per_thread(api) => StreamName::PerThread(tid),
            0 | 1 => StreamName::Legacy,
            2 => StreamName::PerThread(tid),
            h => StreamName::Handle(h),
        }
    }

    /// The slot of a stream, taking one for a stream first met here (a default stream, or a
    /// handle whose creation the trace does not have: taken to be blocking).
    fn slot_for(&mut self, name: StreamName) -> Slot {
        if let Some(&s) = self.by_name.get(&name) {
            return s;
        }
        self.new_slot(name, true, None)
    }

    fn new_slot(&mut self, name: StreamName, blocking: bool, created: Option<Created>) -> Slot {
        if self.free_slots.is_empty() {
            self.sweep();
        }
        let slot = match self.free_slots.pop() {
            Some(s) => {
                self.generations[s.0 as usize] += 1;
                s
            }
            None => {
                self.states.push(None);
                self.counters.push(0);
                self.generations.push(0);
                Slot((self.states.len() - 1) as u32)
            }
        };
        let mut clock = Clock::new();
        clock.set(slot, self.counters[slot.0 as usize]);
        self.states[slot.0 as usize] = Some(StreamState {
            name,
            clock,
            blocking,
            created,
            destroyed: false,
            last_work: None,
            last_result: None,
            unrecorded_wait: None,
        });
        self.by_name.insert(name, slot);
        slot
    }

    fn settled(host: &Clock, st: &StreamState) -> bool {
        st.last_work.is_none_or(|w| host.covers(w.epoch))
    }

    /// Frees the slots of destroyed streams whose work the host has waited for.
    fn sweep(&mut self) {
        for (i, st) in self.states.iter_mut().enumerate() {
            if st.as_ref().is_some_and(|s| s.destroyed && Self::settled(&self.host, s)) {
                *st = None;
                self.free_slots.push(Slot(i as u32));
            }
        }
    }

    fn state(&mut self, slot: Slot) -> &mut StreamState {
        match &mut self.states[slot.0 as usize] {
            Some(s) => s,
            None => unreachable!("a slot in use has a state"),
        }
    }

    fn create_stream(&mut self, tid: u32, seq: Seq, c: &StreamCreate) {
        let name = StreamName::Handle(c.stream.0);
        // The same handle again without a destroy: the old stream went with its context.
        if let Some(old) = self.by_name.remove(&name) {
            let st = self.state(old);
            st.destroyed = true;
            if let Some(created) = st.created {
                self.found.add(leak(Check::StreamLeak, created, name));
            }
        }
        let created = Created {
            api: c.api,
            stack: c.stack,
            handle: c.stream.0,
            flags: c.flags,
            seq,
            tid,
        };
        self.new_slot(name, c.flags & 1 == 0, Some(created));
    }

    fn destroy_stream(&mut self, handle: u64) {
        self.captures.forget(StreamName::Handle(handle));
        if let Some(slot) = self.by_name.remove(&StreamName::Handle(handle)) {
            self.state(slot).destroyed = true;
        }
    }

    /// The host now knows complete what `what` knows (nothing for an event never recorded or
    /// a slot no longer in use).
    fn host_learns(&mut self, what: Known) {
        let Streams {
            states,
            host,
            all,
            events,
            ..
        } = self;
        let clock = match what {
            Known::Stream(slot) => states[slot.0 as usize].as_ref().map(|st| &st.clock),
            Known::Event(handle) => events.get(&handle).and_then(|e| e.clock.as_ref()),
            Known::All => Some(&*all),
        };
        if let Some(clock) = clock {
            host.join(clock);
        }
    }

    /// The host queues an operation on `slot`: the stream learns what the host knows, and the
    /// legacy stream's implicit ordering applies.
    fn enqueue(&mut self, slot: Slot) {
        let Streams {
            states,
            host,
            blocking,
            barrier,
            fence,
            ..
        } = self;
        let Some(st) = states[slot.0 as usize].as_mut() else {
            return;
        };
        st.clock.join(host);
        st.clock.join(fence);
        if st.name == StreamName::Legacy {
            st.clock.join(blocking);
        } else if st.blocking {
            st.clock.join(barrier);
        }
    }

    /// Counts one more operation on `slot`.
    fn tick(&mut self, slot: Slot) -> Epoch {
        let i = slot.0 as usize;
        self.counters[i] += 1;
        let n = self.counters[i];
        self.state(slot).clock.set(slot, n);
        Epoch { slot, n }
    }

    /// After an operation on `slot`: what later operations of other streams must respect.
    fn publish(&mut self, slot: Slot) {
        let Some(st) = self.states[slot.0 as usize].as_ref() else {
            return;
        };
        if st.name == StreamName::Legacy {
            self.barrier.clone_from(&st.clock);
        } else if st.blocking {
            self.blocking.join(&st.clock);
        }
        self.all.join(&st.clock);
    }

    fn capturing(&self, slot: Slot) -> bool {
        self.states[slot.0 as usize]
            .as_ref()
            .is_some_and(|s| self.captures.is_capturing(&s.name))
    }

    /// Queues work on a stream, touching `accesses` (address, length, mode); returns its
    /// slot, or `None` when the stream is capturing.
    fn work(
        &mut self,
        tid: u32,
        seq: Seq,
        api: Api,
        stack: StackId,
        name: StreamName,
        accesses: &[(u64, u64, Mode)],
    ) -> Option<Slot> {
        self.work_sited(tid, seq, (api, stack), name, accesses, &[])
    }

    /// [`Streams::work`], each access with the graph node it came from (`sites`, by index,
    /// as `Op::site`; missing ones are 0).
    fn work_sited(
        &mut self,
        tid: u32,
        seq: Seq,
        (api, stack): (Api, StackId),
        name: StreamName,
        accesses: &[(u64, u64, Mode)],
        sites: &[u32],
    ) -> Option<Slot> {
        let slot = self.slot_for(name);
        if self.capturing(slot) {
            return None;
        }
        self.enqueue(slot);
        self.judge_unrecorded_wait(slot);
        let epoch = self.tick(slot);
        let op = Op::new(api, stack, name, seq, tid);
        let generation = self.generations[slot.0 as usize];
        let mut involved = None;
        let mut first_ptr = 0;
        for (i, &(addr, len, mode)) in accesses.iter().enumerate() {
            let op = Op {
                site: sites.get(i).copied().unwrap_or(0),
                ..op
            };
            let access = Access {
                epoch,
                generation,
                mode,
                lo: addr,
                hi: addr,
                op,
                reported: 0,
            };
            let Some(st) = self.states[slot.0 as usize].as_ref() else {
                break;
            };
            let touch = self.memory.touch(addr, len, mode, access, &st.clock, &self.generations);
            match touch {
                Touch::Untracked => {}
                Touch::Live(info, racing) => {
                    if involved.is_none() {
                        involved = Some(info);
                        first_ptr = addr;
                    }
                    if let Some(prev) = racing {
                        self.found.add(StreamFinding {
                            check: Check::CrossStreamRace,
                            op,
                            ptr: addr,
                            other: Some(prev.op),
                            allocation: Some(info),
                            created: None,
                            moment: None,
                            count: 1,
                            kernel_sides: (mode == Mode::Kernel, prev.mode == Mode::Kernel),
                            nodes: [None; 2],
                        });
                    }
                }
                Touch::Freed(f) => {
                    self.found.add(StreamFinding {
                        check: Check::UseAfterFree,
                        op,
                        ptr: addr,
                        other: Some(f.free),
                        allocation: Some(f.info),
                        created: None,
                        moment: None,
                        count: 1,
                        kernel_sides: (false, false),
                        nodes: [None; 2],
                    });
                }
            }
        }
        let work = Work {
            epoch,
            op,
            ptr: first_ptr,
            allocation: involved,
        };
        let st = self.state(slot);
        st.last_work = Some(work);
        if apis::has_observable_result(api) {
            st.last_result = Some(work);
        }
        self.publish(slot);
        Some(slot)
    }
}

/// A stream or event never destroyed, named by its creation.
fn leak(check: Check, c: Created, name: StreamName) -> StreamFinding {
    StreamFinding {
        check,
        op: Op::new(c.api, c.stack, name, c.seq, c.tid),
        ptr: c.handle,
        other: None,
        allocation: None,
        created: Some(c),
        moment: None,
        count: 1,
        kernel_sides: (false, false),
        nodes: [None; 2],
    }
}
