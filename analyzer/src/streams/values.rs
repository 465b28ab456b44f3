//! Stream memory operations: values that streams write (`cuStreamWriteValue32/64`, atomic
//! reductions in a `cuStreamBatchMemOp`) and wait for (`cuStreamWaitValue32/64`); external
//! semaphores' signals and waits map onto them too (`semaphores`).
//!
//! A wait is satisfied by some write of a value that meets its condition. The model orders a
//! wait after the writes queued before it, as far as the trace can tell which one satisfied
//! it:
//!
//! - of the plain writes to its address with its width whose value meets the condition, the
//!   wait needs only one: it learns what all of them have in common (the meet of their
//!   clocks). Of one stream's writes that is the first that meets it, for the wait may run as
//!   soon as that one has (a stream that signals 1, runs a kernel, then signals 2 does not
//!   order its kernel before a wait for at least 1). A write is no candidate when the wait
//!   already follows a later write to the address (its own stream's, or the reset of a flag by
//!   the waiting stream after its last wait): the value it wrote is gone by then. The last
//!   [`HISTORY`] writes of each stream to each address are kept, for the last [`MAX_STREAMS`]
//!   streams to write there; past that, the oldest write kept stands for those before it,
//!   which can hide a race but never report one;
//! - atomic reductions are counters that several streams add to, and a wait for the total is
//!   met when all have added: it learns every reduction of its address (the join of their
//!   clocks, the last of each stream's), whatever the reduction computes;
//! - a wait with no such write queued before it (a value written by a later call, by a
//!   kernel, by the host or by another process, as barriers across processes are) orders
//!   nothing: the model cannot tell which work comes before the write it waits for.
//!
//! Flushes and memory barriers order nothing between streams. The values written are not
//! memory accesses of the model: a flag is meant to be read and written by streams that run
//! at once.

use std::collections::VecDeque;

use gpuleak_format::MemOp;

use super::clock::{Clock, Slot};
use crate::hash::HashMap;

/// `CU_STREAM_WAIT_VALUE_FLUSH`: not part of the condition.
const FLUSH: u32 = 1 << 30;
/// `CU_STREAM_WAIT_VALUE_GEQ`: a wait met by a value at least its own (cyclically).
pub const WAIT_GEQ: u32 = 0;
/// `CU_STREAM_WAIT_VALUE_EQ`: a wait met by its value.
pub const WAIT_EQ: u32 = 1;

/// Addresses remembered at most; past this, what was remembered is forgotten (a wait then
/// orders nothing, as for a value written outside the trace).
pub const MAX_ADDRESSES: usize = 1 << 16;
/// Plain writes kept per stream and address.
pub const HISTORY: usize = 8;
/// Writes kept in all; past this, what was remembered is forgotten, as above.
pub const MAX_WRITES: usize = 1 << 18;
/// Streams whose writes are kept per address; a stream past this forgets the one that began
/// writing there first (so that a wait costs at most about `HISTORY` times this squared).
pub const MAX_STREAMS: usize = 64;

#[derive(Debug)]
struct Write {
    /// 64-bit (a plain write's width; reductions match waits of either width).
    wide: bool,
    value: u64,
    /// The writing stream's clock after the write.
    clock: Clock,
}

/// One stream's writes (or reductions) to one address, oldest first.
#[derive(Debug)]
struct Writes {
    slot: Slot,
    reduction: bool,
    list: VecDeque<Write>,
}

impl Writes {
    /// The epoch of write `w` of this stream.
    fn epoch(&self, w: &Write) -> u64 {
        w.clock.get(self.slot)
    }
}

/// The recent writes of each stream to each address.
#[derive(Debug, Default)]
pub struct Values {
    by_addr: HashMap<u64, Vec<Writes>>,
    /// Writes kept in all.
    kept: usize,
}

/// Whether `current` at the location meets a wait's condition (`CUstreamWaitValue_flags`)
/// for `value`; `None` for a condition this reader does not know.
pub fn meets(flags: u32, wide: bool, current: u64, value: u64) -> Option<bool> {
    let mask = if wide { u64::MAX } else { u64::from(u32::MAX) };
    let (current, value) = (current & mask, value & mask);
    Some(match flags & !FLUSH {
        // A cyclic comparison: (int32_t)(current - value) >= 0, or its 64-bit form.
        0 if wide => current.wrapping_sub(value) as i64 >= 0,
        0 => (current as u32).wrapping_sub(value as u32) as i32 >= 0,
        1 => current == value,
        2 => current & value != 0,
        3 => !(current | value) & mask != 0,
        _ => return None,
    })
}

impl Values {
    /// Remembers a write by the stream on `slot`, whose clock after it is `clock`.
    pub fn write(&mut self, addr: u64, slot: Slot, op: u32, value: u64, clock: &Clock) {
        if (self.by_addr.len() >= MAX_ADDRESSES && !self.by_addr.contains_key(&addr)) || self.kept >= MAX_WRITES {
            self.by_addr.clear();
            self.kept = 0;
        }
        let reduction = op == MemOp::REDUCTION;
        let streams = self.by_addr.entry(addr).or_default();
        let i = match streams.iter().position(|w| w.slot == slot && w.reduction == reduction) {
            Some(i) => i,
            None => {
                if streams.len() >= MAX_STREAMS {
                    self.kept -= streams.remove(0).list.len();
                }
                streams.push(Writes {
                    slot,
                    reduction,
                    list: VecDeque::new(),
                });
                streams.len() - 1
            }
        };
        let writes = &mut streams[i];
        // A reduction's last is what a wait learns; a plain write keeps its history.
        let keep = if reduction { 1 } else { HISTORY };
        let mut reused = None;
        while writes.list.len() >= keep {
            reused = writes.list.pop_front();
            self.kept -= 1;
        }
        let write = match reused {
            Some(mut w) => {
                w.clock.clone_from(clock);
                w.wide = op == MemOp::WRITE_64;
                w.value = value;
                w
            }
            None => Write {
                wide: op == MemOp::WRITE_64,
                value,
                clock: clock.clone(),
            },
        };
        writes.list.push_back(write);
        self.kept += 1;
    }

    /// Forgets every write to `addr` (a semaphore taken or destroyed).
    pub fn forget(&mut self, addr: u64) {
        if let Some(streams) = self.by_addr.remove(&addr) {
            self.kept -= streams.iter().map(|w| w.list.len()).sum::<usize>();
        }
    }

    /// What a wait at `addr` learns (see the module documentation), or `None`. `knows` is the
    /// waiting stream's clock when the wait is queued.
    pub fn wait(&self, addr: u64, op: u32, flags: u32, value: u64, knows: &Clock) -> Option<Clock> {
        let wide = op == MemOp::WAIT_64;
        let streams = self.by_addr.get(&addr)?;
        let plain = || streams.iter().filter(|w| !w.reduction);
        // Each stream's last write to the address that the waiter knows complete: (stream,
        // epoch, clock). A stream's clocks only grow, so if any of its known writes was made
        // after a write `w`, that one was.
        let known: Vec<(Slot, u64, &Clock)> = plain()
            .filter_map(|x| {
                let last = x.list.iter().rev().find(|l| knows.get(x.slot) >= x.epoch(l))?;
                Some((x.slot, x.epoch(last), &last.clock))
            })
            .collect();
        // Whether the wait follows a write to the address made after the write of `slot` at
        // `epoch`: then the value that one wrote is gone when the wait runs.
        let overwritten = |slot: Slot, epoch: u64| {
            known
                .iter()
                .any(|&(x, e, clock)| (x, e) != (slot, epoch) && clock.get(slot) >= epoch)
        };
        let mut any_of: Option<Clock> = None;
        for writes in plain() {
            let first = writes.list.iter().find(|w| {
                w.wide == wide
                    && meets(flags, wide, w.value, value) == Some(true)
                    && !overwritten(writes.slot, writes.epoch(w))
            });
            if let Some(w) = first {
                match &mut any_of {
                    Some(c) => c.meet(&w.clock),
                    None => any_of = Some(w.clock.clone()),
                }
            }
        }
        let mut learned = any_of;
        for w in streams.iter().filter(|w| w.reduction).flat_map(|w| w.list.back()) {
            match &mut learned {
                Some(c) => c.join(&w.clock),
                None => learned = Some(w.clock.clone()),
            }
        }
        learned
    }

    /// Addresses remembered (for memory bounds in tests).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_addr.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_are_the_documented_ones_at_either_width() {
        // Greater or equal, cyclic: wrapping past zero still counts as later.
        assert_eq!(meets(0, false, 5, 5), Some(true));
        assert_eq!(meets(0, false, 4, 5), Some(false));
        assert_eq!(meets(0, false, 1, u64::from(u32::MAX)), Some(true));
        assert_eq!(meets(0, true, 1, u64::MAX), Some(true));
        assert_eq!(meets(0, true, u64::MAX, 1), Some(false));
        // A 32-bit wait sees the low word only.
        assert_eq!(meets(1, false, 0x1_0000_0007, 7), Some(true));
        assert_eq!(meets(1, true, 0x1_0000_0007, 7), Some(false));
        assert_eq!(meets(2, false, 0b1010, 0b0010), Some(true));
        assert_eq!(meets(2, false, 0b1000, 0b0010), Some(false));
        // NOR: some bit clear in both.
        assert_eq!(meets(3, false, 0xffff_0000, 0x0000_fffe), Some(true));
        assert_eq!(meets(3, false, 0xffff_0000, 0x0000_ffff), Some(false));
        assert_eq!(meets(3, true, 0xffff_0000, 0x0000_ffff), Some(true));
        // The flush bit is not part of the condition; unknown conditions meet nothing.
        assert_eq!(meets(1 | FLUSH, false, 7, 7), Some(true));
        assert_eq!(meets(4, false, 7, 7), None);
    }

    fn clock(pairs: &[(u32, u64)]) -> Clock {
        let mut c = Clock::new();
        for &(s, n) in pairs {
            c.set(Slot(s), n);
        }
        c
    }

    #[test]
    fn a_wait_learns_what_every_satisfying_write_has_in_common_and_every_reduction() {
        let none = Clock::new();
        let mut v = Values::default();
        v.write(0x100, Slot(0), MemOp::WRITE_32, 1, &clock(&[(0, 3), (2, 1)]));
        v.write(0x100, Slot(1), MemOp::WRITE_32, 1, &clock(&[(1, 4), (2, 1)]));
        v.write(0x100, Slot(3), MemOp::WRITE_32, 0, &clock(&[(3, 9)]));
        // Either write of 1 may be the one: only what both knew.
        assert_eq!(
            v.wait(0x100, MemOp::WAIT_32, 1, 1, &none),
            Some(clock(&[(0, 0), (1, 0), (2, 1)]))
        );
        // Only slot 3 wrote 0.
        assert_eq!(v.wait(0x100, MemOp::WAIT_32, 1, 0, &none), Some(clock(&[(3, 9)])));
        // No write of 2, another width, another address: nothing.
        assert_eq!(v.wait(0x100, MemOp::WAIT_32, 1, 2, &none), None);
        assert_eq!(v.wait(0x100, MemOp::WAIT_64, 1, 1, &none), None);
        assert_eq!(v.wait(0x104, MemOp::WAIT_32, 1, 1, &none), None);
        // A stream's later write of another value.
        v.write(0x100, Slot(0), MemOp::WRITE_32, 2, &clock(&[(0, 5)]));
        assert_eq!(v.wait(0x100, MemOp::WAIT_32, 1, 2, &none), Some(clock(&[(0, 5)])));
        // Reductions: all of them, whatever the value.
        v.write(0x200, Slot(0), MemOp::REDUCTION, 1, &clock(&[(0, 6)]));
        v.write(0x200, Slot(1), MemOp::REDUCTION, 1, &clock(&[(1, 7)]));
        assert_eq!(
            v.wait(0x200, MemOp::WAIT_64, 0, 2, &none),
            Some(clock(&[(0, 6), (1, 7)]))
        );
    }

    #[test]
    fn of_one_stream_s_writes_the_first_that_meets_the_wait_is_the_one() {
        let none = Clock::new();
        // A counter: 1, then (after a kernel) 2. A wait for at least 1 may run once 1 is
        // written, so it learns that write only.
        let mut v = Values::default();
        v.write(0x100, Slot(0), MemOp::WRITE_64, 1, &clock(&[(0, 2)]));
        v.write(0x100, Slot(0), MemOp::WRITE_64, 2, &clock(&[(0, 4)]));
        assert_eq!(
            v.wait(0x100, MemOp::WAIT_64, WAIT_GEQ, 1, &none),
            Some(clock(&[(0, 2)]))
        );
        assert_eq!(
            v.wait(0x100, MemOp::WAIT_64, WAIT_GEQ, 2, &none),
            Some(clock(&[(0, 4)]))
        );
        // Past the history, the oldest write kept stands for the ones before it.
        for i in 3..20 {
            v.write(0x100, Slot(0), MemOp::WRITE_64, i, &clock(&[(0, 2 * i)]));
        }
        let oldest = 2 * (20 - HISTORY as u64);
        assert_eq!(
            v.wait(0x100, MemOp::WAIT_64, WAIT_GEQ, 1, &none),
            Some(clock(&[(0, oldest)]))
        );
    }

    #[test]
    fn a_write_the_waiting_stream_knows_was_overwritten_is_no_candidate() {
        // A flag handed back and forth: stream 0 sets it, stream 1 waits for it and resets it;
        // stream 0 sets it again. The second wait follows the reset, which followed the first
        // set: only the second set can meet it.
        let mut v = Values::default();
        v.write(0x100, Slot(0), MemOp::WRITE_32, 1, &clock(&[(0, 1)]));
        assert_eq!(
            v.wait(0x100, MemOp::WAIT_32, WAIT_EQ, 1, &clock(&[(1, 1)])),
            Some(clock(&[(0, 1)]))
        );
        let after_reset = clock(&[(0, 1), (1, 2)]);
        v.write(0x100, Slot(1), MemOp::WRITE_32, 0, &after_reset);
        v.write(0x100, Slot(0), MemOp::WRITE_32, 1, &clock(&[(0, 3)]));
        assert_eq!(
            v.wait(0x100, MemOp::WAIT_32, WAIT_EQ, 1, &after_reset),
            Some(clock(&[(0, 3)]))
        );
        // A stream that knows nothing may still see the first set.
        assert_eq!(
            v.wait(0x100, MemOp::WAIT_32, WAIT_EQ, 1, &Clock::new()),
            Some(clock(&[(0, 1)]))
        );
        // The writing stream's own later write overwrites too, once the waiter knows it.
        let mut v = Values::default();
        v.write(0x200, Slot(0), MemOp::WRITE_32, 1, &clock(&[(0, 1)]));
        v.write(0x200, Slot(0), MemOp::WRITE_32, 0, &clock(&[(0, 2)]));
        v.write(0x200, Slot(0), MemOp::WRITE_32, 1, &clock(&[(0, 3)]));
        assert_eq!(
            v.wait(0x200, MemOp::WAIT_32, WAIT_EQ, 1, &clock(&[(0, 2)])),
            Some(clock(&[(0, 3)]))
        );
        assert_eq!(
            v.wait(0x200, MemOp::WAIT_32, WAIT_EQ, 1, &clock(&[(0, 1)])),
            Some(clock(&[(0, 1)]))
        );
    }

    #[test]
    fn writes_are_bounded() {
        let mut v = Values::default();
        for i in 0..(MAX_WRITES as u64 / HISTORY as u64 + 3) {
            for n in 0..HISTORY as u64 {
                v.write(i * 8, Slot(0), MemOp::WRITE_64, n, &clock(&[(0, n)]));
            }
        }
        assert!(v.kept <= MAX_WRITES);
        v.forget(8 * (MAX_WRITES as u64 / HISTORY as u64 + 2));
        assert!(v.kept < MAX_WRITES);
    }

    #[test]
    fn streams_per_address_are_bounded() {
        let mut v = Values::default();
        let last = MAX_STREAMS as u32 + 2;
        for s in 0..=last {
            v.write(0x100, Slot(s), MemOp::WRITE_64, u64::from(s), &clock(&[(s, 1)]));
        }
        assert_eq!(v.by_addr[&0x100].len(), MAX_STREAMS);
        assert_eq!(v.kept, MAX_STREAMS);
        // The first streams to write are forgotten; the latest are kept.
        assert_eq!(v.wait(0x100, MemOp::WAIT_64, WAIT_EQ, 0, &Clock::new()), None);
        assert_eq!(
            v.wait(0x100, MemOp::WAIT_64, WAIT_EQ, u64::from(last), &Clock::new()),
            Some(clock(&[(last, 1)]))
        );
    }

    #[test]
    fn addresses_are_bounded() {
        let mut v = Values::default();
        for i in 0..(MAX_ADDRESSES as u64 + 10) {
            v.write(i * 8, Slot(0), MemOp::WRITE_64, i, &clock(&[(0, i)]));
        }
        assert!(v.len() <= MAX_ADDRESSES);
        assert_eq!(v.len(), 10);
    }
}
