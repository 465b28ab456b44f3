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
//!   (`cuMemcpy`, `HtoD`, `DtoH`) also make the host wait for them. Synchronous
//!   device-to-device copies and memsets do not (CUDA's "API synchronization behavior");
//! - **legacy default stream**: an operation on it waits for all earlier work of every
//!   blocking stream, and every later operation of a blocking stream waits for it.
//!   Non-blocking streams (flag 1) are exempt; per-thread default streams are blocking.
//!
//! Stream handle 0 names the legacy default stream, or the calling thread's per-thread
//! default stream for `_ptsz`/`_ptds` APIs; handles 1 and 2 are `CU_STREAM_LEGACY` and
//! `CU_STREAM_PER_THREAD`. Operations on a stream under capture build a graph and are left
//! out.
//!
//! Host threads synchronize with each other in ways the trace cannot see (mutexes, joins), so
//! a thread's clock starts, at its first call, with everything any thread had waited for by
//! then; "waited for before exit" means by any thread.
//!
//! # Memory
//!
//! Bounded by the live streams, events and allocations: a destroyed stream's slot is reused
//! once the host has waited for its work (its counts continue, and accesses remembered from
//! its earlier occupant count as ordered); each allocation keeps at most
//! [`memory::HISTORY`] accesses; freed ranges are remembered up to [`memory::FREED`];
//! findings are folded by root cause as they are met.
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

mod apis;
pub mod clock;
mod found;
pub mod memory;

#[cfg(test)]
mod tests;

use std::collections::HashMap;

use gpuleak_format::{
    Alloc, Api, Body, Capture, Copy, EventCreate, EventRecord, Free, HostFn, Launch, MemKind, Record, Seq, StackId,
    StreamCreate, StreamWait, Sync,
};

pub use clock::{Clock, Epoch, Slot};
pub use found::{Check, Created, Moment, StreamFinding};
pub use memory::{AllocInfo, Mode, Op};

use apis::HostSide;
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
    capturing: bool,
    last_work: Option<Work>,
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
    threads: HashMap<u32, Clock>,
    /// What any host thread has waited for.
    host: Clock,
    /// Every stream's work.
    all: Clock,
    /// Every blocking stream's work (what a legacy-stream operation waits for).
    blocking: Clock,
    /// The last legacy-stream operation (what later blocking-stream work waits for).
    barrier: Clock,
    events: HashMap<u64, EventState>,
    memory: Memory,
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
                let op = Op {
                    api: c.api,
                    stack: c.stack,
                    stream: name,
                    seq,
                    tid,
                };
                self.refused(op, c.dst.0);
                if !memset {
                    self.refused(op, c.src);
                }
            }
            Body::Launch(l) => {
                let name = Self::name_of(l.api, l.stream.0, tid);
                let op = Op {
                    api: l.api,
                    stack: l.stack,
                    stream: name,
                    seq,
                    tid,
                };
                for &p in l.ptrs.0.iter() {
                    self.refused(op, p);
                }
            }
            Body::HostFn(h) if success(h.result) => self.host_fn(tid, seq, h),
            Body::Capture(c) if success(c.result) => self.capture(tid, c),
            Body::Alloc(a) if success(a.result) => self.alloc(tid, seq, a),
            Body::Free(f) if success(f.result) => self.free(tid, seq, f),
            _ => {}
        }
    }

    /// A context was torn down by `api` on thread `tid` (successfully, and for a primary
    /// context, the last release or a reset): work the host never waited for is reported,
    /// then the driver has finished (or dropped) all of it.
    pub fn teardown(&mut self, tid: u32, api: Api) {
        self.report_unsynchronized(Moment::Teardown(api));
        let all = self.all.clone();
        self.host_learns(tid, &all);
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
        events.sort_by_key(|(_, c)| c.seq);
        for (h, c) in events {
            self.found.add(leak(Check::EventLeak, c, StreamName::Handle(h)));
        }
        self.found.into_list()
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
            capturing: false,
            last_work: None,
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
        if let Some(slot) = self.by_name.remove(&StreamName::Handle(handle)) {
            self.state(slot).destroyed = true;
        }
    }

    /// Thread `tid` now knows `clock` complete.
    fn host_learns(&mut self, tid: u32, clock: &Clock) {
        let t = self.threads.entry(tid).or_insert_with(|| self.host.clone());
        t.join(clock);
        self.host.join(t);
    }

    /// Thread `tid` queues an operation on `slot`: the stream learns what the thread knows,
    /// and the legacy stream's implicit ordering applies.
    fn enqueue(&mut self, tid: u32, slot: Slot) {
        let Streams {
            states,
            threads,
            host,
            blocking,
            barrier,
            ..
        } = self;
        let t = threads.entry(tid).or_insert_with(|| host.clone());
        let Some(st) = states[slot.0 as usize].as_mut() else {
            return;
        };
        st.clock.join(t);
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
        self.states[slot.0 as usize].as_ref().is_some_and(|s| s.capturing)
    }

    /// Queues work on a stream, touching `accesses` (address, length, mode); returns its
    /// slot, or `None` when the stream is capturing.
    #[allow(clippy::too_many_arguments)]
    fn work(
        &mut self,
        tid: u32,
        seq: Seq,
        api: Api,
        stack: StackId,
        name: StreamName,
        accesses: &[(u64, u64, Mode)],
    ) -> Option<Slot> {
        let slot = self.slot_for(name);
        if self.capturing(slot) {
            return None;
        }
        self.enqueue(tid, slot);
        let epoch = self.tick(slot);
        let op = Op {
            api,
            stack,
            stream: name,
            seq,
            tid,
        };
        let generation = self.generations[slot.0 as usize];
        let mut involved = None;
        let mut first_ptr = 0;
        for &(addr, len, mode) in accesses {
            let access = Access {
                epoch,
                generation,
                mode,
                lo: addr,
                hi: addr,
                op,
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
                    });
                }
            }
        }
        self.state(slot).last_work = Some(Work {
            epoch,
            op,
            ptr: first_ptr,
            allocation: involved,
        });
        self.publish(slot);
        Some(slot)
    }

    // ---- records ----

    /// A refused call named `addr`: a use after free if the address was freed.
    fn refused(&mut self, op: Op, addr: u64) {
        if let Some(f) = self.memory.freed_only(addr) {
            self.found.add(StreamFinding {
                check: Check::UseAfterFree,
                op,
                ptr: addr,
                other: Some(f.free),
                allocation: Some(f.info),
                created: None,
                moment: None,
                count: 1,
            });
        }
    }

    fn copy(&mut self, tid: u32, seq: Seq, c: &Copy) {
        let (side, memset) = apis::copy_kind(c.api);
        let name = Self::name_of(c.api, c.stream.0, tid);
        let mut accesses = [(c.dst.0, c.bytes, Mode::Write), (0, 0, Mode::Read)];
        let n = if !memset && c.src != 0 {
            accesses[1] = (c.src, c.bytes, Mode::Read);
            2
        } else {
            1
        };
        let Some(slot) = self.work(tid, seq, c.api, c.stack, name, &accesses[..n]) else {
            return;
        };
        if side == HostSide::Blocking {
            let clock = self.state(slot).clock.clone();
            self.host_learns(tid, &clock);
        }
    }

    fn launch(&mut self, tid: u32, seq: Seq, l: &Launch<'_>) {
        let name = Self::name_of(l.api, l.stream.0, tid);
        let accesses: Vec<(u64, u64, Mode)> = l.ptrs.0.iter().map(|&p| (p, 1, Mode::Kernel)).collect();
        self.work(tid, seq, l.api, l.stack, name, &accesses);
    }

    fn host_fn(&mut self, tid: u32, seq: Seq, h: &HostFn) {
        let name = Self::name_of(h.api, h.stream.0, tid);
        self.work(tid, seq, h.api, StackId::NONE, name, &[]);
    }

    fn capture(&mut self, tid: u32, c: &Capture) {
        let slot = self.slot_for(Self::name_of(c.api, c.stream.0, tid));
        self.state(slot).capturing = c.begin != 0;
    }

    fn alloc(&mut self, tid: u32, seq: Seq, a: &Alloc) {
        let Some(kind) = a.api.mem_kind() else { return };
        if !memory::tracked(kind) {
            return;
        }
        let info = AllocInfo {
            ptr: a.ptr.0,
            size: a.size,
            kind,
            api: a.api,
            stack: a.stack,
        };
        if kind != MemKind::Async {
            self.memory.insert(info);
            return;
        }
        let name = Self::name_of(a.api, a.stream.0, tid);
        let slot = self.slot_for(name);
        if self.capturing(slot) {
            // A graph node's address, not memory.
            return;
        }
        self.memory.insert(info);
        // The memory becomes usable in the allocating stream's order: using it elsewhere
        // needs an edge from here.
        self.work(tid, seq, a.api, a.stack, name, &[(a.ptr.0, a.size, Mode::Write)]);
    }

    fn free(&mut self, tid: u32, seq: Seq, f: &Free) {
        let ptr = f.ptr.0;
        if apis::is_async_free(f.api) {
            let name = Self::name_of(f.api, f.stream.0, tid);
            let slot = self.slot_for(name);
            if self.capturing(slot) || self.memory.at(ptr).is_none() {
                return;
            }
            let op = Op {
                api: f.api,
                stack: f.stack,
                stream: name,
                seq,
                tid,
            };
            self.enqueue(tid, slot);
            let epoch = self.tick(slot);
            let Some(st) = self.states[slot.0 as usize].as_ref() else {
                return;
            };
            let Some(live) = self.memory.at(ptr) else { return };
            let info = live.info;
            let unordered = live
                .accesses
                .iter()
                .rev()
                .find(|a| !a.ordered_before(&st.clock, &self.generations))
                .map(|a| a.op);
            if let Some(last) = unordered {
                self.found.add(StreamFinding {
                    check: Check::UnorderedFree,
                    op,
                    ptr,
                    other: Some(last),
                    allocation: Some(info),
                    created: None,
                    moment: None,
                    count: 1,
                });
            }
            self.memory.remove(ptr, op);
            self.state(slot).last_work = Some(Work {
                epoch,
                op,
                ptr,
                allocation: Some(info),
            });
            self.publish(slot);
            return;
        }
        if apis::is_synchronizing_free(f.api) {
            let all = self.all.clone();
            self.host_learns(tid, &all);
        }
        let op = Op {
            api: f.api,
            stack: f.stack,
            stream: StreamName::Host,
            seq,
            tid,
        };
        self.memory.remove(ptr, op);
    }

    fn create_event(&mut self, tid: u32, seq: Seq, e: &EventCreate) {
        let created = Created {
            api: e.api,
            stack: e.stack,
            handle: e.event.0,
            flags: e.flags,
            seq,
            tid,
        };
        let old = self.events.insert(
            e.event.0,
            EventState {
                clock: None,
                created: Some(created),
            },
        );
        // The same handle again without a destroy: the old event went with its context.
        if let Some(c) = old.and_then(|o| o.created) {
            self.found.add(leak(Check::EventLeak, c, StreamName::Handle(e.event.0)));
        }
    }

    fn record_event(&mut self, tid: u32, r: &EventRecord) {
        let slot = self.slot_for(Self::name_of(r.api, r.stream.0, tid));
        if self.capturing(slot) {
            return;
        }
        self.enqueue(tid, slot);
        let clock = self.state(slot).clock.clone();
        self.events.entry(r.event.0).or_default().clock = Some(clock);
        self.publish(slot);
    }

    /// A wait on an event never recorded: a no-op for the driver, a bug in the program.
    fn unrecorded(&mut self, op: Op, event: u64) {
        let created = self.events.get(&event).and_then(|e| e.created);
        if created.is_none() {
            // An event the trace never saw created: nothing is known about it.
            return;
        }
        self.found.add(StreamFinding {
            check: Check::WaitOnUnrecordedEvent,
            op,
            ptr: 0,
            other: None,
            allocation: None,
            created,
            moment: None,
            count: 1,
        });
    }

    fn stream_wait(&mut self, tid: u32, seq: Seq, w: &StreamWait) {
        let name = Self::name_of(w.api, w.stream.0, tid);
        let slot = self.slot_for(name);
        if self.capturing(slot) {
            return;
        }
        self.enqueue(tid, slot);
        match self.events.get(&w.event.0).and_then(|e| e.clock.as_ref()) {
            Some(clock) => {
                let clock = clock.clone();
                self.state(slot).clock.join(&clock);
            }
            None => {
                let op = Op {
                    api: w.api,
                    stack: StackId::NONE,
                    stream: name,
                    seq,
                    tid,
                };
                self.unrecorded(op, w.event.0);
            }
        }
        self.publish(slot);
    }

    fn sync(&mut self, tid: u32, seq: Seq, s: &Sync) {
        match s.api {
            Api::cuStreamSynchronize | Api::cuStreamSynchronize_ptsz | Api::cuStreamQuery | Api::cuStreamQuery_ptsz => {
                let slot = self.slot_for(Self::name_of(s.api, s.stream.0, tid));
                let clock = self.state(slot).clock.clone();
                self.host_learns(tid, &clock);
            }
            Api::cuEventSynchronize | Api::cuEventQuery => {
                match self.events.get(&s.event.0).and_then(|e| e.clock.as_ref()) {
                    Some(clock) => {
                        let clock = clock.clone();
                        self.host_learns(tid, &clock);
                    }
                    // A query of an unrecorded event is a poll, not a wait.
                    None if apis::is_event_wait(s.api) => {
                        let op = Op {
                            api: s.api,
                            stack: StackId::NONE,
                            stream: StreamName::Host,
                            seq,
                            tid,
                        };
                        self.unrecorded(op, s.event.0);
                    }
                    None => {}
                }
            }
            // Context (and so device) synchronization: every stream. With several contexts,
            // this is more than the driver promises (a known limit of the model).
            Api::cuCtxSynchronize | Api::cuCtxSynchronize_v2 => {
                let all = self.all.clone();
                self.host_learns(tid, &all);
            }
            _ => {}
        }
    }

    fn report_unsynchronized(&mut self, moment: Moment) {
        let mut pending: Vec<(Work, Option<Created>)> = self
            .states
            .iter()
            .flatten()
            .filter(|st| !Self::settled(&self.host, st))
            .filter_map(|st| st.last_work.map(|w| (w, st.created)))
            .collect();
        pending.sort_by_key(|(w, _)| w.op.seq);
        for (w, created) in pending {
            self.found.add(StreamFinding {
                check: Check::UnsynchronizedAtExit,
                op: w.op,
                ptr: w.ptr,
                other: None,
                allocation: w.allocation,
                created,
                moment: Some(moment),
                count: 1,
            });
        }
    }
}

/// A stream or event never destroyed, named by its creation.
fn leak(check: Check, c: Created, name: StreamName) -> StreamFinding {
    StreamFinding {
        check,
        op: Op {
            api: c.api,
            stack: c.stack,
            stream: name,
            seq: c.seq,
            tid: c.tid,
        },
        ptr: c.handle,
        other: None,
        allocation: None,
        created: Some(c),
        moment: None,
        count: 1,
    }
}
