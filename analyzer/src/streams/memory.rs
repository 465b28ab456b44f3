//! Which address ranges are live allocations, who touched them on which stream, and which
//! ranges were freed recently (for use-after-free).
//!
//! Only memory that device work can touch is tracked: device, pitched, managed and
//! stream-ordered allocations, and pinned host memory (a copy's host end). Freed pinned host
//! ranges are not remembered: the C library may hand the same addresses out again as
//! ordinary memory, which copies then legitimately name. Freed managed ranges are host
//! address space again in the same way, so they are remembered only for device work (see
//! [`Memory::freed_managed`]), and a registration of host memory over any freed range
//! ([`Memory::forget_freed`]) ends its claim.
//!
//! Each allocation keeps a short history of accesses, in the manner of FastTrack: an access
//! that is ordered after an earlier one and covers its range makes it redundant (anything
//! unordered with the old access is unordered with the new one too, or was reported), and a
//! newer access of the same stream, mode and range replaces an older one. At most
//! [`HISTORY`] accesses are kept per allocation; past that the oldest is dropped (a race
//! with it may then go unreported, never the reverse).

use std::collections::VecDeque;

use gpuleak_format::{Api, MemKind, Seq, StackId};

use super::clock::{Clock, Epoch};
use super::StreamName;
use crate::aside::AsideMap;

/// Accesses kept per allocation.
pub const HISTORY: usize = 16;
/// Freed ranges remembered for use-after-free.
pub const FREED: usize = 65_536;

/// How an operation touches memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// A copy's source.
    Read,
    /// A copy's destination, a memset, a stream-ordered allocation.
    Write,
    /// A kernel parameter: the driver cannot tell reads from writes, so a kernel is taken to
    /// write what it is given.
    Kernel,
}

impl Mode {
    fn writes(self) -> bool {
        self != Mode::Read
    }
}

/// One call, as findings name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op {
    /// Exact entry point.
    pub api: Api,
    /// Its stack, when the shim captured one.
    pub stack: StackId,
    /// The stream it was queued on.
    pub stream: StreamName,
    /// Where in the trace.
    pub seq: Seq,
    /// Calling thread.
    pub tid: u32,
    /// For a graph launch's access, the node it came from (a `graph_accesses::NodeSite`
    /// index), 0 otherwise.
    pub site: u32,
}

impl Op {
    /// A call on `stream`, not a graph node's access.
    pub fn new(api: Api, stack: StackId, stream: StreamName, seq: Seq, tid: u32) -> Op {
        Op {
            api,
            stack,
            stream,
            seq,
            tid,
            site: 0,
        }
    }
}

/// An allocation, as findings name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AllocInfo {
    /// Start address.
    pub ptr: u64,
    /// Bytes asked for.
    pub size: u64,
    /// Family.
    pub kind: MemKind,
    /// Entry point that allocated it.
    pub api: Api,
    /// Allocation stack.
    pub stack: StackId,
}

/// One remembered access.
#[derive(Debug, Clone, Copy)]
pub struct Access {
    /// The operation's place in its stream.
    pub epoch: Epoch,
    /// The slot's generation then (a recycled slot's old accesses count as ordered).
    pub generation: u32,
    /// Read, write or kernel.
    pub mode: Mode,
    /// Range touched: [lo, hi).
    pub lo: u64,
    /// End of the range.
    pub hi: u64,
    /// The call.
    pub op: Op,
    /// Streams (slot numbers modulo 64) a race with this access was already reported for:
    /// one missing edge is one finding, not one per later operation of the other stream.
    pub reported: u64,
}

impl Access {
    /// Whether an operation that knows `clock` comes after this access.
    pub fn ordered_before(&self, clock: &Clock, generations: &[u32]) -> bool {
        generations.get(self.epoch.slot.0 as usize) != Some(&self.generation) || clock.covers(self.epoch)
    }

    fn overlaps(&self, lo: u64, hi: u64) -> bool {
        self.lo < hi && lo < self.hi
    }

    /// Whether the two conflict: overlapping, at least one writing.
    fn conflicts(&self, mode: Mode, lo: u64, hi: u64) -> bool {
        (self.mode.writes() || mode.writes()) && self.overlaps(lo, hi)
    }
}

/// A live allocation and its recent accesses.
#[derive(Debug)]
pub struct Live {
    end: u64,
    /// What it is.
    pub info: AllocInfo,
    /// Recent accesses, oldest first.
    pub accesses: Vec<Access>,
}

/// A freed range.
#[derive(Debug, Clone, Copy)]
pub struct Freed {
    end: u64,
    serial: u64,
    /// What it was.
    pub info: AllocInfo,
    /// The free.
    pub free: Op,
}

/// What a freed range is written over ([`Memory::remember_freed`]); every field is then set.
const BLANK_FREED: Freed = Freed {
    end: 0,
    serial: 0,
    info: AllocInfo {
        ptr: 0,
        size: 0,
        kind: MemKind::Device,
        api: Api(0),
        stack: StackId(0),
    },
    free: Op {
        api: Api(0),
        stack: StackId(0),
        stream: StreamName::Host,
        seq: Seq(0),
        tid: 0,
        site: 0,
    },
};

/// What an access met.
#[derive(Debug)]
pub enum Touch {
    /// No tracked memory (pageable host memory, VMM mappings, another process's memory).
    Untracked,
    /// A live allocation; with the earlier access it races with, if any.
    Live(AllocInfo, Option<Access>),
    /// A range freed before.
    Freed(Freed),
}

/// The tracked address space.
#[derive(Debug, Default)]
pub struct Memory {
    /// Live allocations by start, and freed ranges by start: the newest of each is kept
    /// aside from its tree ([`AsideMap`]), so that churn at one address costs no tree work.
    live: AsideMap<Live>,
    freed: AsideMap<Freed>,
    /// Freed ranges (start, serial) in the order freed, for eviction; all but the newest,
    /// the one `freed` keeps aside, until a newer one comes: a program that allocates again
    /// at once (the usual churn) forgets it before that, and never touches this order.
    freed_order: VecDeque<(u64, u64)>,
    serial: u64,
}

/// Families whose memory device work touches.
pub fn tracked(kind: MemKind) -> bool {
    matches!(
        kind,
        MemKind::Device | MemKind::Managed | MemKind::Async | MemKind::Host
    )
}

impl Memory {
    /// Live allocations.
    pub fn live_count(&self) -> usize {
        self.live.len()
    }

    /// A new allocation: it replaces any live or freed range it overlaps (a free the trace
    /// missed, or an address handed out again).
    pub fn insert(&mut self, info: AllocInfo) {
        let lo = info.ptr;
        let hi = lo.saturating_add(info.size.max(1));
        self.forget(lo, hi);
        // Written where it is kept, as `remember_freed` does, for the same reason.
        let live = self.live.insert_in_place(lo, || Live {
            end: 0,
            info: BLANK_FREED.info,
            accesses: Vec::new(),
        });
        live.end = hi;
        live.info.ptr = info.ptr;
        live.info.size = info.size;
        live.info.kind = info.kind;
        live.info.api = info.api;
        live.info.stack = info.stack;
        live.accesses.clear();
    }

    /// Forgets every live or freed range that overlaps [lo, hi).
    #[inline(always)]
    fn forget(&mut self, lo: u64, hi: u64) {
        // Ranges do not overlap each other, so the overlapping ones are the last ones that
        // start below `hi`, taken one at a time (almost always none or one: no list to build).
        while let Some((k, l)) = self.live.last_in(..hi) {
            if l.end <= lo {
                break;
            }
            self.live.remove(k);
        }
        self.forget_freed(lo, hi);
    }

    /// Forgets every freed range that overlaps [lo, hi): the addresses were handed out again
    /// as memory this model does not track (host memory the program registered, say), which
    /// later operations name legitimately. Live allocations are kept.
    #[inline(always)]
    pub fn forget_freed(&mut self, lo: u64, hi: u64) {
        while let Some((k, f)) = self.freed.last_in(..hi) {
            if f.end <= lo {
                break;
            }
            // Its place in the order, if it has one, is passed over when its turn comes (the
            // serial no longer matches).
            self.freed.remove(k);
        }
    }

    /// Whether `addr` lies in device memory this model knows: a live device, managed or
    /// stream-ordered allocation, or one freed since (pinned host memory is host memory, and
    /// an address in no allocation is taken to be host memory too, as is one in a freed
    /// managed range: see [`Memory::freed_managed`]).
    pub fn is_device_memory(&self, addr: u64) -> bool {
        match self.live.last_in(..=addr) {
            Some((_, l)) if addr < l.end => l.info.kind != MemKind::Host,
            _ => matches!(self.freed_at(addr), Touch::Freed(f) if f.info.kind != MemKind::Managed),
        }
    }

    /// Whether `addr` lies in a freed managed range and in no live allocation. Managed memory
    /// is mapped into the host's address space, and once freed its addresses may be handed
    /// out again as ordinary host memory (by the C library, which the trace does not show),
    /// so such an address is evidence of a use after free only where an API takes it as
    /// device memory.
    pub fn freed_managed(&self, addr: u64) -> bool {
        self.freed_only(addr).is_some_and(|f| f.info.kind == MemKind::Managed)
    }

    /// The family of the live allocation holding `addr`, if any.
    pub fn kind_at(&self, addr: u64) -> Option<MemKind> {
        match self.live.last_in(..=addr) {
            Some((_, l)) if addr < l.end => Some(l.info.kind),
            _ => None,
        }
    }

    /// Whether `addr` is in memory the model tracks, live or freed (device, managed,
    /// stream-ordered or page-locked host memory; a freed managed range is host address
    /// space again: see [`Memory::freed_managed`]).
    pub fn is_tracked(&self, addr: u64) -> bool {
        match self.live.last_in(..=addr) {
            Some((_, l)) if addr < l.end => true,
            _ => matches!(self.freed_at(addr), Touch::Freed(f) if f.info.kind != MemKind::Managed),
        }
    }

    /// The live allocation starting exactly at `ptr`.
    pub fn at(&self, ptr: u64) -> Option<&Live> {
        self.live.get(ptr)
    }

    /// The live allocation holding `addr`.
    pub fn holding(&self, addr: u64) -> Option<&Live> {
        self.live.last_in(..=addr).map(|(_, l)| l).filter(|l| addr < l.end)
    }

    /// Removes the allocation starting at `ptr`, remembering its range as freed by `free`.
    #[inline(always)]
    pub fn remove(&mut self, ptr: u64, free: &Op) {
        // Read where it lies, field by field, not moved out first: see `remember_freed`.
        let Some(live) = self.live.get(ptr) else { return };
        let (end, info) = (live.end, &live.info);
        let (size, kind, api, stack) = (info.size, info.kind, info.api, info.stack);
        self.live.delete(ptr);
        if kind != MemKind::Host {
            self.remember_freed(ptr, end, size, kind, api, stack, free);
        }
    }

    /// Memory allocated and freed by one operation (a graph launch's memory that its own free
    /// node frees), which nothing else could touch meanwhile: its range is freed by `free`
    /// from now on, unless the same range is remembered freed already (by an earlier launch
    /// of the same graph, which findings name alike).
    pub fn allocated_and_freed(&mut self, info: AllocInfo, free: Op) {
        let end = info.ptr.saturating_add(info.size.max(1));
        if self.freed.get(info.ptr).is_some_and(|f| f.end == end && f.info == info) {
            return;
        }
        self.forget(info.ptr, end);
        self.remember_freed(info.ptr, end, info.size, info.kind, info.api, info.stack, &free);
    }

    /// Inlined, with the range written field by field where it is kept
    /// ([`AsideMap::insert_in_place`]): a `Freed` built on the stack and copied is read back
    /// in wide loads that straddle the narrower stores just made, which the processor does not
    /// forward (at every free of a churning program, the costliest instructions of the stream
    /// model's thread). The allocation comes as its fields, and `free`'s are copied one by one,
    /// for the same reason: each was just written so.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn remember_freed(&mut self, ptr: u64, end: u64, size: u64, kind: MemKind, api: Api, stack: StackId, free: &Op) {
        self.serial += 1;
        // The range freed before, set aside until now, joins the order (unless this one
        // replaces it). A range is remembered for the next FREED frees.
        if let Some((k, f)) = self.freed.newest() {
            if k != ptr {
                self.freed_order.push_back((k, f.serial));
            }
        }
        let f = self.freed.insert_in_place(ptr, || BLANK_FREED);
        f.end = end;
        f.serial = self.serial;
        f.info.ptr = ptr;
        f.info.size = size;
        f.info.kind = kind;
        f.info.api = api;
        f.info.stack = stack;
        f.free.api = free.api;
        f.free.stack = free.stack;
        f.free.stream = free.stream;
        f.free.seq = free.seq;
        f.free.tid = free.tid;
        f.free.site = free.site;
        while let Some(&(k, serial)) = self.freed_order.front() {
            if serial + FREED as u64 > self.serial {
                break;
            }
            self.freed_order.pop_front();
            if self.freed.get(k).is_some_and(|f| f.serial == serial) {
                self.freed.remove(k);
            }
        }
    }

    /// An operation that knows `clock` touches [lo, lo + len) in `mode`: finds the memory,
    /// the earlier access it races with (if any), and remembers this access.
    pub fn touch(
        &mut self,
        lo: u64,
        len: u64,
        mode: Mode,
        access: Access,
        clock: &Clock,
        generations: &[u32],
    ) -> Touch {
        let Some((_, live)) = self.live.last_in_mut(..=lo) else {
            return self.freed_at(lo);
        };
        if lo >= live.end {
            return self.freed_at(lo);
        }
        let hi = lo.saturating_add(len.max(1)).min(live.end);
        let bit = 1u64 << (access.epoch.slot.0 % 64);
        let racing = live
            .accesses
            .iter_mut()
            .rev()
            .find(|a| a.reported & bit == 0 && a.conflicts(mode, lo, hi) && !a.ordered_before(clock, generations))
            .map(|a| {
                a.reported |= bit;
                *a
            });
        let new = Access { lo, hi, mode, ..access };
        live.accesses.retain(|a| {
            let same = a.epoch.slot == new.epoch.slot && a.mode == new.mode && a.lo == lo && a.hi == hi;
            let covered = new.mode.writes() && lo <= a.lo && a.hi <= hi && a.ordered_before(clock, generations);
            !(same || covered)
        });
        if live.accesses.len() == HISTORY {
            live.accesses.remove(0);
        }
        live.accesses.push(new);
        Touch::Live(live.info, racing)
    }

    /// The freed range holding `addr`, unless a live allocation holds it.
    pub fn freed_only(&self, addr: u64) -> Option<Freed> {
        let live = self.live.last_in(..=addr).is_some_and(|(_, l)| addr < l.end);
        match self.freed_at(addr) {
            Touch::Freed(f) if !live => Some(f),
            _ => None,
        }
    }

    fn freed_at(&self, addr: u64) -> Touch {
        match self.freed.last_in(..=addr) {
            Some((_, f)) if addr < f.end => Touch::Freed(*f),
            _ => Touch::Untracked,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use gpuleak_format::{Api, MemKind, Seq, StackId};

    use super::{AllocInfo, Memory, Op, Touch};
    use crate::streams::StreamName;

    /// The freed ranges as one map (what `Memory` kept before the newest range was set
    /// aside), with the same eviction.
    #[derive(Default)]
    struct Plain {
        live: BTreeMap<u64, u64>,
        freed: BTreeMap<u64, (u64, u64)>,
        order: std::collections::VecDeque<(u64, u64)>,
        serial: u64,
    }

    impl Plain {
        fn forget_freed(&mut self, lo: u64, hi: u64) {
            while let Some((&k, &(end, _))) = self.freed.range(..hi).next_back() {
                if end <= lo {
                    break;
                }
                self.freed.remove(&k);
            }
        }

        fn insert(&mut self, lo: u64, hi: u64) {
            while let Some((&k, &end)) = self.live.range(..hi).next_back() {
                if end <= lo {
                    break;
                }
                self.live.remove(&k);
            }
            self.forget_freed(lo, hi);
            self.live.insert(lo, hi);
        }

        fn remove(&mut self, lo: u64, limit: usize) {
            let Some(end) = self.live.remove(&lo) else { return };
            self.serial += 1;
            self.freed.insert(lo, (end, self.serial));
            self.order.push_back((lo, self.serial));
            while self.order.len() > limit {
                let (k, serial) = self.order.pop_front().unwrap();
                if self.freed.get(&k).is_some_and(|f| f.1 == serial) {
                    self.freed.remove(&k);
                }
            }
        }

        fn freed_at(&self, addr: u64) -> Option<u64> {
            match self.freed.range(..=addr).next_back() {
                Some((_, &(end, serial))) if addr < end => Some(serial),
                _ => None,
            }
        }
    }

    /// A range is remembered for the next `FREED` frees, also when each later free is
    /// forgotten at once (an address handed out again: the usual churn), and also the range
    /// freed last before them.
    #[test]
    fn a_freed_range_is_remembered_for_the_next_freed_frees() {
        let op = Op::new(Api::cuMemFree_v2, StackId(0), StreamName::Host, Seq(1), 1);
        let info = |ptr: u64| AllocInfo {
            ptr,
            size: 16,
            kind: MemKind::Device,
            api: Api::cuMemAlloc_v2,
            stack: StackId(0),
        };
        for churn in [false, true] {
            let mut memory = Memory::default();
            memory.insert(info(0x100));
            memory.remove(0x100, &op);
            for i in 0..super::FREED as u64 {
                assert!(matches!(memory.freed_at(0x100), Touch::Freed(_)), "after {i} frees");
                let ptr = if churn { 0x1000 } else { 0x1000 + i * 0x100 };
                memory.insert(info(ptr));
                memory.remove(ptr, &op);
            }
            assert!(matches!(memory.freed_at(0x100), Touch::Untracked), "churn {churn}");
        }
    }

    #[test]
    fn the_newest_freed_range_set_aside_reads_as_one_map_of_freed_ranges() {
        let op = Op::new(Api::cuMemFree_v2, StackId(0), StreamName::Host, Seq(1), 1);
        // A small address space, so that ranges meet, overlap and come back at the same start;
        // eviction is what `FREED` does, exercised at the full limit.
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = |n: u64| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state % n
        };
        let mut memory = Memory::default();
        let mut plain = Plain::default();
        for step in 0..300_000 {
            let lo = next(64) * 16;
            let len = 1 + next(48);
            match next(10) {
                0..=3 => {
                    let info = AllocInfo {
                        ptr: lo,
                        size: len,
                        kind: MemKind::Device,
                        api: Api::cuMemAlloc_v2,
                        stack: StackId(0),
                    };
                    memory.insert(info);
                    plain.insert(lo, lo + len);
                }
                4..=7 => {
                    // Mostly a live start.
                    let at = plain.live.keys().nth(next(4) as usize).copied().unwrap_or(lo);
                    memory.remove(at, &op);
                    plain.remove(at, super::FREED);
                }
                _ => {
                    memory.forget_freed(lo, lo + len);
                    plain.forget_freed(lo, lo + len);
                }
            }
            let every = if step % 8 == 0 { 3 } else { 61 };
            for addr in (step % 3..64 * 16 + 48).step_by(every) {
                let got = match memory.freed_at(addr) {
                    Touch::Freed(f) => Some(f.serial),
                    _ => None,
                };
                assert_eq!(got, plain.freed_at(addr), "address {addr} after step {step}");
            }
        }
        assert!(plain.serial > super::FREED as u64, "eviction was exercised");
    }
}
