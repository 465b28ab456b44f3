//! What each record does to the happens-before model: copies, launches, host functions,
//! capture, allocations and frees, events, waits and synchronizations.

use gpuleak_format::{
    Alloc, Capture, Copy, EventCreate, EventRecord, Free, HostFn, HostFnQueued, Launch, MemKind, MemOp, Op as ApiOp,
    RangeOp, Seq, StackId, StreamWait, Sync,
};

use super::apis::{self, HostSide};
use super::graph_syncs::SyncOp;
use super::memory::{self, AllocInfo, Mode, Op};
use super::{
    leak, success, Check, Clock, Created, EventState, Known, Moment, Slot, StreamFinding, StreamName, Streams,
    UnrecordedWait, Work,
};
use crate::captures::EXTERNAL;

/// Graph allocation nodes remembered at most (`Streams::graph_memory`); past this, the map
/// is emptied (a race inside a graph in memory forgotten goes unreported).
pub(super) const MAX_GRAPH_ALLOCATIONS: usize = 1 << 16;

/// Host functions remembered at most, queued and not seen running (and seen running and not
/// seen queued); past this, the set is emptied (a run of a function forgotten is ignored: a
/// race it would have ordered may be reported).
pub(super) const MAX_HOST_FNS: usize = 1 << 16;

impl Streams {
    /// A refused call named `addr`: a use after free if the address was freed.
    pub(super) fn refused(&mut self, op: Op, addr: u64) {
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
                kernel_sides: (false, false),
                nodes: [None; 2],
            });
        }
    }

    pub(super) fn copy(&mut self, tid: u32, seq: Seq, c: &Copy) {
        let (side, memset) = apis::copy_kind(c.api);
        let name = Self::name_of(c.api, c.stream.0, tid);
        // An operand that need not be device memory and lies in a freed managed range is host
        // memory handed out again, not a use after free (`Memory::freed_managed`): it is left
        // out, as untracked memory would be.
        let (dst_device, src_device) = apis::device_operands(c.api);
        let rehoused = |addr: u64, device: bool| !device && self.memory.freed_managed(addr);
        let mut accesses = [(0, 0, Mode::Write); 2];
        let mut n = 0;
        if !rehoused(c.dst.0, dst_device) {
            accesses[n] = (c.dst.0, c.bytes, Mode::Write);
            n += 1;
        }
        if !memset && c.src != 0 && !rehoused(c.src, src_device) {
            accesses[n] = (c.src, c.bytes, Mode::Read);
            n += 1;
        }
        // A 2D/3D copy's host side is a host address; an array side is 0.
        let blocking = match side {
            HostSide::BySides => [c.dst.0, c.src]
                .iter()
                .any(|&a| a != 0 && !self.memory.is_device_memory(a)),
            HostSide::Async => !memset && apis::waits_for_pageable_destination(c.api) && self.is_pageable(c.dst.0),
            // "The synchronous memset functions are asynchronous with respect to the host
            // except when the target is pinned host memory or a Unified Memory region".
            HostSide::Enqueue if memset => self.is_pinned_or_managed(c.dst.0),
            s => s == HostSide::Blocking,
        };
        let serialized = apis::serializes_device(c.api);
        if serialized {
            // After all earlier work of every stream.
            let slot = self.slot_for(name);
            if !self.capturing(slot) {
                let Streams { states, all, .. } = self;
                if let Some(st) = states[slot.0 as usize].as_mut() {
                    st.clock.join(all);
                }
            }
        }
        let Some(slot) = self.work(tid, seq, c.api, c.stack, name, &accesses[..n]) else {
            return;
        };
        if serialized {
            // Before all later work of every stream.
            let Streams { states, fence, .. } = self;
            if let Some(st) = states[slot.0 as usize].as_ref() {
                fence.join(&st.clock);
            }
        }
        if blocking {
            self.host_learns(Known::Stream(slot));
        }
    }

    pub(super) fn launch(&mut self, tid: u32, seq: Seq, l: &Launch<'_>) {
        let name = Self::name_of(l.api, l.stream.0, tid);
        // The shim records at most 16 pointers; a longer list (another writer) goes to the heap.
        let mut fixed = [(0, 1, Mode::Kernel); 16];
        let heap: Vec<(u64, u64, Mode)>;
        let accesses = if l.ptrs.0.len() <= fixed.len() {
            for (a, &p) in fixed.iter_mut().zip(l.ptrs.0.iter()) {
                a.0 = p;
            }
            &fixed[..l.ptrs.0.len()]
        } else {
            heap = l.ptrs.0.iter().map(|&p| (p, 1, Mode::Kernel)).collect();
            &heap[..]
        };
        if !apis::is_graph_launch(l.api) {
            self.work(tid, seq, l.api, l.stack, name, accesses);
            return;
        }
        self.graph_launch(tid, seq, l, name, accesses);
    }

    /// One range of a prefetch or discard of managed memory: work on its stream. A prefetch
    /// touches nothing (accesses to the range stay coherent while it migrates); a discard
    /// writes the range (a read, write or prefetch of it at the same time is undefined). A
    /// refused one that names freed memory is a use after free.
    pub(super) fn range_op(&mut self, tid: u32, seq: Seq, r: &RangeOp) {
        let name = Self::name_of(r.api, r.stream, tid);
        if r.result.0 != 0 {
            if r.ptr != 0 {
                self.refused(Op::new(r.api, r.stack, name, seq, tid), r.ptr);
            }
            return;
        }
        let discarded = [(r.ptr, r.bytes, Mode::Write)];
        let accesses: &[(u64, u64, Mode)] = if apis::is_discard(r.api) { &discarded } else { &[] };
        self.work(tid, seq, r.api, r.stack, name, accesses);
    }

    pub(super) fn host_fn(&mut self, tid: u32, seq: Seq, h: &HostFn) {
        let name = Self::name_of(h.api, h.stream.0, tid);
        self.work(tid, seq, h.api, StackId::NONE, name, &[]);
    }

    /// A host function the shim wrapped: work like [`Streams::host_fn`], and what its stream
    /// had done just before it (its clock with the function's own operation left out), which
    /// the host learns when the function runs ([`Streams::host_fn_ran`]); at once if it ran
    /// already.
    pub(super) fn host_fn_queued(&mut self, tid: u32, seq: Seq, h: &HostFnQueued) {
        let ran = self.ran_early.remove(&h.id);
        if !success(h.result) {
            return;
        }
        let name = Self::name_of(h.api, h.stream, tid);
        let Some(slot) = self.work(tid, seq, h.api, StackId::NONE, name, &[]) else {
            return;
        };
        let Some(st) = self.states[slot.0 as usize].as_ref() else {
            return;
        };
        let mut before = st.clock.clone();
        before.set(slot, before.get(slot).saturating_sub(1));
        if ran {
            self.host.join(&before);
            return;
        }
        if self.host_fns.len() >= MAX_HOST_FNS {
            self.host_fns.clear();
        }
        self.host_fns.insert(h.id, before);
    }

    /// Host function `id` started running: the host knows complete what its stream had done
    /// when it was queued. A run before its queue record is kept for that record.
    pub(super) fn host_fn_ran(&mut self, id: u64) {
        match self.host_fns.remove(&id) {
            Some(before) => self.host.join(&before),
            None => {
                if self.ran_early.len() >= MAX_HOST_FNS {
                    self.ran_early.clear();
                }
                self.ran_early.insert(id);
            }
        }
    }

    /// A stream memory operation: a write is work with no memory, remembered for the waits
    /// that may read it; a wait learns what those writes knew (`values`). Under capture,
    /// either is kept for the graph's launches (`graph_syncs`).
    pub(super) fn mem_op(&mut self, tid: u32, seq: Seq, m: &MemOp) {
        let name = Self::name_of(m.api, m.stream, tid);
        let captured = SyncOp::Value {
            op: m.op,
            addr: m.addr,
            value: m.value,
            flags: m.flags,
        };
        let orders = matches!(
            m.op,
            MemOp::WRITE_32 | MemOp::WRITE_64 | MemOp::REDUCTION | MemOp::WAIT_32 | MemOp::WAIT_64
        );
        if orders && self.captured_sync(name, captured) {
            return;
        }
        match m.op {
            MemOp::WRITE_32 | MemOp::WRITE_64 | MemOp::REDUCTION => {
                let Some(slot) = self.work(tid, seq, m.api, StackId::NONE, name, &[]) else {
                    return;
                };
                let Streams { states, values, .. } = self;
                if let Some(st) = states[slot.0 as usize].as_ref() {
                    values.write(m.addr, slot, m.op, m.value, &st.clock);
                }
            }
            MemOp::WAIT_32 | MemOp::WAIT_64 => {
                let slot = self.slot_for(name);
                self.enqueue(slot);
                let Streams { states, values, .. } = self;
                let learned = states[slot.0 as usize]
                    .as_ref()
                    .and_then(|st| values.wait(m.addr, m.op, m.flags, m.value, &st.clock));
                self.learn(slot, learned);
            }
            // Flushes and barriers order nothing between streams.
            _ => {}
        }
    }

    /// A stream's wait learned `learned` (a value's or a semaphore's writers' clock).
    pub(super) fn learn(&mut self, slot: Slot, learned: Option<Clock>) {
        if let (Some(learned), Some(st)) = (learned, self.states[slot.0 as usize].as_mut()) {
            st.clock.join(&learned);
        }
        self.publish(slot);
    }

    pub(super) fn capture(&mut self, tid: u32, c: &Capture) {
        let name = Self::name_of(c.api, c.stream.0, tid);
        if c.begin != 0 {
            self.captures.begin(name);
        } else {
            let id = self.captures.capture_of(&name);
            self.captures.end(name);
            if let Some(id) = id {
                // The graph's handle is the end's `aux`.
                self.graph_events.ended(id, c.aux);
                self.graph_syncs.ended(id, c.aux);
            }
        }
    }

    /// Whether `addr` is pageable host memory as far as the trace shows: not 0 (an array),
    /// not memory the model tracks, and in no other range the trace shows allocated. Memory the
    /// trace does not show (allocated before the shim could see it, say) counts as pageable, so
    /// a copy into it is taken to make the host wait: that can hide a race, never make one up.
    fn is_pageable(&self, addr: u64) -> bool {
        addr != 0
            && !self.memory.is_tracked(addr)
            && self
                .unpageable
                .range(..=addr)
                .next_back()
                .is_none_or(|(_, &(end, _))| addr >= end)
    }

    /// Whether `addr` is page-locked host memory (allocated or registered) or managed memory.
    fn is_pinned_or_managed(&self, addr: u64) -> bool {
        let registered = self
            .unpageable
            .range(..=addr)
            .next_back()
            .is_some_and(|(_, &(end, kind))| addr < end && kind == MemKind::HostRegistered);
        registered || matches!(self.memory.kind_at(addr), Some(MemKind::Host | MemKind::Managed))
    }

    pub(super) fn alloc(&mut self, tid: u32, seq: Seq, a: &Alloc) {
        let Some(kind) = a.api.mem_kind() else { return };
        if kind == MemKind::HostRegistered {
            // Host memory the driver page-locked is the program's own memory now, wherever it
            // lies (a host array the C library placed where freed managed memory was): the
            // freed range's claim ends, and copies that name it use the new memory.
            self.memory.forget_freed(a.ptr.0, a.ptr.0.saturating_add(a.size.max(1)));
        }
        if matches!(
            kind,
            MemKind::HostRegistered
                | MemKind::VmmReserve
                | MemKind::Ipc
                | MemKind::PoolImport
                | MemKind::Graph
                | MemKind::ExternalBuffer
        ) {
            self.unpageable
                .insert(a.ptr.0, (a.ptr.0.saturating_add(a.size.max(1)), kind));
        }
        let info = AllocInfo {
            ptr: a.ptr.0,
            size: a.size,
            kind,
            api: a.api,
            stack: a.stack,
        };
        if kind == MemKind::Graph {
            self.graph_node_memory(info);
        }
        if !memory::tracked(kind) {
            return;
        }
        if kind != MemKind::Async {
            self.memory.insert(info);
            return;
        }
        let name = Self::name_of(a.api, a.stream.0, tid);
        let slot = self.slot_for(name);
        if self.capturing(slot) {
            // A graph node's address, not memory (device memory once the graph runs).
            self.unpageable
                .insert(a.ptr.0, (a.ptr.0.saturating_add(a.size.max(1)), MemKind::Graph));
            self.graph_node_memory(AllocInfo {
                kind: MemKind::Graph,
                ..info
            });
            return;
        }
        self.memory.insert(info);
        // The memory becomes usable in the allocating stream's order: using it elsewhere
        // needs an edge from here.
        self.work(tid, seq, a.api, a.stack, name, &[(a.ptr.0, a.size, Mode::Write)]);
    }

    /// An allocation node's memory, remembered for races inside graphs: it replaces those it
    /// overlaps.
    fn graph_node_memory(&mut self, info: AllocInfo) {
        let end = info.ptr.saturating_add(info.size.max(1));
        let overlapping: Vec<u64> = self
            .graph_memory
            .range(..end)
            .rev()
            .take_while(|(_, a)| a.ptr.saturating_add(a.size.max(1)) > info.ptr)
            .map(|(&k, _)| k)
            .collect();
        for k in overlapping {
            self.graph_memory.remove(&k);
        }
        if self.graph_memory.len() >= MAX_GRAPH_ALLOCATIONS {
            self.graph_memory.clear();
        }
        self.graph_memory.insert(info.ptr, info);
    }

    /// Frees the live allocation at `ptr` by `op`, queued on `slot` (whose clock is the
    /// free's): an unordered free when its last use on another stream is not ordered before;
    /// the allocation freed, if live.
    pub(super) fn free_on(&mut self, slot: Slot, op: Op, ptr: u64) -> Option<AllocInfo> {
        let st = self.states[slot.0 as usize].as_ref()?;
        let live = self.memory.at(ptr)?;
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
                kernel_sides: (false, false),
                nodes: [None; 2],
            });
        }
        self.memory.remove(ptr, &op);
        Some(info)
    }

    pub(super) fn free(&mut self, tid: u32, seq: Seq, f: &Free) {
        let ptr = f.ptr.0;
        if !self.unpageable.is_empty() {
            self.unpageable.remove(&ptr);
        }
        if apis::is_async_free(f.api) {
            let name = Self::name_of(f.api, f.stream.0, tid);
            let slot = self.slot_for(name);
            if self.capturing(slot) || self.memory.at(ptr).is_none() {
                return;
            }
            let op = Op::new(f.api, f.stack, name, seq, tid);
            self.enqueue(slot);
            self.judge_unrecorded_wait(slot);
            let epoch = self.tick(slot);
            let Some(info) = self.free_on(slot, op, ptr) else {
                return;
            };
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
            // `host_learns(Known::All)`, in place: at every free of a churning program.
            self.host.join(&self.all);
        }
        let op = Op::new(f.api, f.stack, StreamName::Host, seq, tid);
        self.memory.remove(ptr, &op);
    }

    pub(super) fn create_event(&mut self, tid: u32, seq: Seq, e: &EventCreate) {
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

    pub(super) fn record_event(&mut self, tid: u32, r: &EventRecord) {
        if apis::context_wide(r.api) {
            // All the work of every stream so far (the driver refuses it while a stream of the
            // context captures, so no capture is involved).
            let Streams { events, all, .. } = self;
            let event = events.entry(r.event.0).or_default();
            event.clock.get_or_insert_with(Clock::new).clone_from(all);
            return;
        }
        let name = Self::name_of(r.api, r.stream.0, tid);
        let slot = self.slot_for(name);
        self.captures.record(r.event.0, name, r.flags);
        if self.capturing(slot) {
            if let (true, Some(id)) = (r.flags & EXTERNAL != 0, self.captures.capture_of(&name)) {
                self.graph_events.record(id, r.event.0);
            }
            return;
        }
        self.enqueue(slot);
        let Streams { states, events, .. } = self;
        let Some(st) = states[slot.0 as usize].as_ref() else {
            return;
        };
        let event = events.entry(r.event.0).or_default();
        event.clock.get_or_insert_with(Clock::new).clone_from(&st.clock);
        self.publish(slot);
    }

    /// A wait on event `event`, which was never recorded, by stream `waiter` (or the host,
    /// knowing `knows`, when `None`); see [`UnrecordedWait`].
    pub(super) fn unrecorded(&mut self, op: Op, event: u64, waiter: Option<Slot>, knows: &Clock) {
        let Some(created) = self.events.get(&event).and_then(|e| e.created) else {
            // An event the trace never saw created: nothing is known about it.
            return;
        };
        let pending = self.outstanding();
        match waiter {
            Some(slot) => {
                let st = self.state(slot);
                if st.unrecorded_wait.is_none() {
                    st.unrecorded_wait = Some(UnrecordedWait {
                        op,
                        event: Some(created),
                        pending,
                    });
                }
            }
            // The host goes on at once: it mattered if work whose end the program could observe
            // was pending then, which the host had not waited for already.
            None if pending.knows_more_than(knows, None) => self.unrecorded_found(op, Some(created)),
            None => {}
        }
    }

    /// The work a wait could be meant for: each stream's last work whose end the program
    /// could observe ([`apis::has_observable_result`]), as a clock. Stream-ordered allocations
    /// and frees, prefetches and discards queued after it are left out, as
    /// `unsynchronized-at-exit` leaves them out: nobody waits for them (a use of memory they
    /// touch that is not ordered after them is a race of its own).
    fn outstanding(&self) -> Clock {
        let mut clock = Clock::new();
        for (i, st) in self.states.iter().enumerate() {
            if let Some(w) = st.as_ref().and_then(|st| st.last_result) {
                clock.set(Slot(i as u32), w.epoch.n);
            }
        }
        clock
    }

    /// Judges a stream's earlier wait on an unrecorded event, now that it queues work
    /// knowing what its clock says.
    pub(super) fn judge_unrecorded_wait(&mut self, slot: Slot) {
        let st = self.state(slot);
        let Some(w) = st.unrecorded_wait.take() else { return };
        if w.pending.knows_more_than(&st.clock, Some(slot)) {
            self.unrecorded_found(w.op, w.event);
        }
    }

    fn unrecorded_found(&mut self, op: Op, created: Option<Created>) {
        self.found.add(StreamFinding {
            check: Check::WaitOnUnrecordedEvent,
            op,
            ptr: 0,
            other: None,
            allocation: None,
            created,
            moment: None,
            count: 1,
            kernel_sides: (false, false),
            nodes: [None; 2],
        });
    }

    pub(super) fn stream_wait(&mut self, tid: u32, seq: Seq, w: &StreamWait) {
        if apis::context_wide(w.api) {
            self.context_wait(tid, seq, w);
            return;
        }
        let name = Self::name_of(w.api, w.stream.0, tid);
        let slot = self.slot_for(name);
        self.captures.wait(name, w.event.0, w.flags);
        if self.capturing(slot) {
            if let (true, Some(id)) = (w.flags & EXTERNAL != 0, self.captures.capture_of(&name)) {
                self.graph_events.wait(id, w.event.0);
            }
            return;
        }
        self.enqueue(slot);
        let Streams { states, events, .. } = self;
        match (
            events.get(&w.event.0).and_then(|e| e.clock.as_ref()),
            states[slot.0 as usize].as_mut(),
        ) {
            (Some(clock), Some(st)) => st.clock.join(clock),
            (Some(_), None) => {}
            (None, _) => {
                let op = Op::new(w.api, StackId::NONE, name, seq, tid);
                let knows = self.state(slot).clock.clone();
                self.unrecorded(op, w.event.0, Some(slot), &knows);
            }
        }
        self.publish(slot);
    }

    /// `cuCtxWaitEvent`, `cuGreenCtxWaitEvent`: every later operation of every stream waits for
    /// the event's work (the host does not wait).
    fn context_wait(&mut self, tid: u32, seq: Seq, w: &StreamWait) {
        let Streams { events, fence, .. } = self;
        match events.get(&w.event.0).and_then(|e| e.clock.as_ref()) {
            Some(clock) => fence.join(clock),
            None => {
                let op = Op::new(w.api, StackId::NONE, StreamName::Host, seq, tid);
                // It mattered if any work was pending then that the host had not waited for.
                let knows = self.host.clone();
                self.unrecorded(op, w.event.0, None, &knows);
            }
        }
    }

    pub(super) fn sync(&mut self, tid: u32, seq: Seq, s: &Sync) {
        match s.api.op() {
            Some(ApiOp::StreamSync | ApiOp::StreamQuery) => {
                let slot = self.slot_for(Self::name_of(s.api, s.stream.0, tid));
                self.host_learns(Known::Stream(slot));
            }
            Some(ApiOp::EventSync | ApiOp::EventQuery) => {
                match self.events.get(&s.event.0).and_then(|e| e.clock.as_ref()) {
                    Some(_) => self.host_learns(Known::Event(s.event.0)),
                    // A query of an unrecorded event is a poll, not a wait.
                    None if apis::is_event_wait(s.api) => {
                        let op = Op::new(s.api, StackId::NONE, StreamName::Host, seq, tid);
                        let knows = self.host.clone();
                        self.unrecorded(op, s.event.0, None, &knows);
                    }
                    None => {}
                }
            }
            // Context (and so device) synchronization: every stream. With several contexts,
            // this is more than the driver promises (a known limit of the model).
            Some(ApiOp::CtxSync) => self.host_learns(Known::All),
            _ => {}
        }
    }

    /// Work the host never waited for, a finding per stream. Stream-ordered allocations and
    /// frees queued after it (or alone) are not counted: at exit or teardown the memory goes
    /// back to the driver whether or not they ran.
    pub(super) fn report_unsynchronized(&mut self, moment: Moment) {
        let host = &self.host;
        let mut pending: Vec<(Work, Option<Created>)> = self
            .states
            .iter()
            .flatten()
            .filter_map(|st| st.last_result.map(|w| (w, st.created)))
            .filter(|(w, _)| !host.covers(w.epoch))
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
                kernel_sides: (false, false),
                nodes: [None; 2],
            });
        }
    }
}
