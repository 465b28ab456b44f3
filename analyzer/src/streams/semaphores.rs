//! External semaphores (`cuImportExternalSemaphore`; Vulkan, D3D or another process's,
//! through a shareable handle): a signal on one stream and a wait on another order them as an
//! event does, and an imported semaphore never destroyed is a `semaphore-leak`.
//!
//! What a signal and a wait mean depends on the semaphore's type, which only its import says
//! (the `ExtSemaphore` record). Each maps onto the values of stream memory operations
//! ([`super::values`]), with the semaphore's handle for the address:
//!
//! - a binary semaphore (opaque file descriptor or Win32 handle): a signal writes 1, a wait is
//!   met by 1 and then resets the semaphore ("for every signal operation, there can only be
//!   one wait operation"), so the next wait needs a signal of its own;
//! - a fence or timeline semaphore (D3D12 and D3D11 fences, Vulkan timeline semaphores): a
//!   signal writes its value, a wait is met by a value greater than or equal to its own;
//! - a D3D11 keyed mutex: a release (signal) writes its key, an acquire (wait) is met by that
//!   key, and then the mutex is held, so the next acquire needs a release of its own.
//!
//! A binary semaphore's or keyed mutex's wait that no signal in the trace met takes nothing.
//!
//! As for values, a wait learns what every signal queued before it that could have met it
//! has in common, and a wait with no such signal (one Vulkan or another process gives, or
//! that a later call queues) orders nothing. NvSciSync semaphores (whose fences are opaque
//! objects, not values), types this reader does not know and semaphores whose import the
//! trace does not have order nothing.

use gpuleak_format::{ExtSemaphore, ExtSemaphoreOp, MemOp, Seq, StackId};

use super::clock::{Clock, Slot};
use super::found::{Check, Created};
use super::graph_syncs::SyncOp;
use super::values::{Values, WAIT_EQ, WAIT_GEQ};
use super::{apis, leak, StreamName, Streams};
use crate::hash::HashMap;

/// What a semaphore's signals and waits mean.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Binary,
    Fence,
    KeyedMutex,
}

impl Kind {
    /// From `CUexternalSemaphoreHandleType`.
    fn of(handle_type: u32) -> Option<Kind> {
        match handle_type {
            1..=3 => Some(Kind::Binary),
            4 | 5 | 9 | 10 => Some(Kind::Fence),
            7 | 8 => Some(Kind::KeyedMutex),
            _ => None,
        }
    }
}

/// The semaphores imported and not destroyed, and the values of their signals.
#[derive(Debug, Default)]
pub struct Semaphores {
    kinds: HashMap<u64, Kind>,
    created: HashMap<u64, Created>,
    values: Values,
}

impl Semaphores {
    /// A signal of `sem` by the stream on `slot`, whose clock after it is `clock`.
    pub(super) fn signal(&mut self, sem: u64, slot: Slot, value: u64, key: u64, clock: &Clock) {
        let Some(&kind) = self.kinds.get(&sem) else {
            return;
        };
        let written = match kind {
            Kind::Binary => 1,
            Kind::Fence => value,
            Kind::KeyedMutex => key,
        };
        self.values.write(sem, slot, MemOp::WRITE_64, written, clock);
    }

    /// What a wait for `sem` learns (see the module documentation), or `None`.
    /// `knows` is the waiting stream's clock when the wait is queued.
    pub(super) fn wait(&mut self, sem: u64, value: u64, key: u64, knows: &Clock) -> Option<Clock> {
        let kind = *self.kinds.get(&sem)?;
        let (condition, wanted) = match kind {
            Kind::Binary => (WAIT_EQ, 1),
            Kind::Fence => (WAIT_GEQ, value),
            Kind::KeyedMutex => (WAIT_EQ, key),
        };
        let learned = self.values.wait(sem, MemOp::WAIT_64, condition, wanted, knows);
        if kind != Kind::Fence && learned.is_some() {
            // Taken: the next wait needs another signal.
            self.values.forget(sem);
        }
        learned
    }

    /// Semaphores imported and not destroyed, in the order of their imports.
    fn leaked(&self) -> Vec<Created> {
        // By handle where imports share a sequence number, so that no hash order shows.
        let mut list: Vec<(u64, Created)> = self.created.iter().map(|(h, c)| (*h, *c)).collect();
        list.sort_by_key(|(h, c)| (c.seq, *h));
        list.into_iter().map(|(_, c)| c).collect()
    }
}

impl Streams {
    /// A semaphore imported or destroyed (successfully).
    pub(super) fn ext_semaphore(&mut self, tid: u32, seq: Seq, e: &ExtSemaphore) {
        let sems = &mut self.semaphores;
        sems.values.forget(e.semaphore);
        if apis::is_semaphore_destroy(e.api) {
            sems.kinds.remove(&e.semaphore);
            sems.created.remove(&e.semaphore);
            return;
        }
        match Kind::of(e.handle_type) {
            Some(kind) => sems.kinds.insert(e.semaphore, kind),
            None => sems.kinds.remove(&e.semaphore),
        };
        let created = Created {
            api: e.api,
            stack: e.stack,
            handle: e.semaphore,
            flags: e.handle_type,
            seq,
            tid,
        };
        // The same handle again without a destroy: the old semaphore went with its context.
        if let Some(old) = sems.created.insert(e.semaphore, created) {
            self.found
                .add(leak(Check::SemaphoreLeak, old, StreamName::Handle(old.handle)));
        }
    }

    /// One semaphore of a successful signal or wait: a signal is work with no memory,
    /// remembered for the waits that may be met by it; a wait learns what those signals knew.
    /// Under capture, either is kept for the graph's launches (`graph_syncs`).
    pub(super) fn ext_semaphore_op(&mut self, tid: u32, seq: Seq, o: &ExtSemaphoreOp) {
        let name = Self::name_of(o.api, o.stream, tid);
        let signal = apis::is_semaphore_signal(o.api);
        let captured = SyncOp::Semaphore {
            signal,
            sem: o.semaphore,
            value: o.value,
            key: o.key,
        };
        if self.captured_sync(name, captured) {
            return;
        }
        if signal {
            let Some(slot) = self.work(tid, seq, o.api, StackId::NONE, name, &[]) else {
                return;
            };
            let Streams { states, semaphores, .. } = self;
            if let Some(st) = states[slot.0 as usize].as_ref() {
                semaphores.signal(o.semaphore, slot, o.value, o.key, &st.clock);
            }
            return;
        }
        let slot = self.slot_for(name);
        self.enqueue(slot);
        let Streams { states, semaphores, .. } = self;
        let learned = states[slot.0 as usize]
            .as_ref()
            .and_then(|st| semaphores.wait(o.semaphore, o.value, o.key, &st.clock));
        self.learn(slot, learned);
    }

    /// `semaphore-leak` findings for the semaphores never destroyed, at the end of the replay.
    pub(super) fn report_leaked_semaphores(&mut self) {
        for c in self.semaphores.leaked() {
            self.found
                .add(leak(Check::SemaphoreLeak, c, StreamName::Handle(c.handle)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(pairs: &[(u32, u64)]) -> Clock {
        let mut c = Clock::new();
        for &(s, n) in pairs {
            c.set(Slot(s), n);
        }
        c
    }

    fn imported(kind: Kind) -> Semaphores {
        let mut s = Semaphores::default();
        s.kinds.insert(0x5e, kind);
        s
    }

    #[test]
    fn handle_types_are_the_public_ones() {
        let kinds: Vec<Option<Kind>> = (0..=11).map(Kind::of).collect();
        use Kind::*;
        assert_eq!(
            kinds,
            [
                None,
                Some(Binary),
                Some(Binary),
                Some(Binary),
                Some(Fence),
                Some(Fence),
                None,
                Some(KeyedMutex),
                Some(KeyedMutex),
                Some(Fence),
                Some(Fence),
                None
            ]
        );
    }

    #[test]
    fn a_binary_semaphore_s_signal_meets_one_wait() {
        let mut s = imported(Kind::Binary);
        s.signal(0x5e, Slot(0), 0, 0, &clock(&[(0, 3)]));
        assert_eq!(s.wait(0x5e, 0, 0, &Clock::new()), Some(clock(&[(0, 3)])));
        // Taken by the first wait: the second waits for a signal the trace does not have.
        assert_eq!(s.wait(0x5e, 0, 0, &Clock::new()), None);
        // Another semaphore, or one never imported, orders nothing.
        s.signal(0x77, Slot(0), 0, 0, &clock(&[(0, 4)]));
        assert_eq!(s.wait(0x77, 0, 0, &Clock::new()), None);
    }

    #[test]
    fn a_timeline_wait_is_met_by_a_value_at_least_its_own_and_takes_nothing() {
        let mut s = imported(Kind::Fence);
        s.signal(0x5e, Slot(0), 5, 0, &clock(&[(0, 2)]));
        assert_eq!(s.wait(0x5e, 6, 0, &Clock::new()), None);
        assert_eq!(s.wait(0x5e, 5, 0, &Clock::new()), Some(clock(&[(0, 2)])));
        assert_eq!(s.wait(0x5e, 3, 0, &Clock::new()), Some(clock(&[(0, 2)])));
        // Two streams at or past the value: only what both knew.
        s.signal(0x5e, Slot(1), 7, 0, &clock(&[(1, 9), (2, 1)]));
        s.signal(0x5e, Slot(0), 8, 0, &clock(&[(0, 4), (2, 1)]));
        assert_eq!(
            s.wait(0x5e, 7, 0, &Clock::new()),
            Some(clock(&[(0, 0), (1, 0), (2, 1)]))
        );
    }

    #[test]
    fn a_keyed_mutex_is_acquired_with_the_key_it_was_released_with() {
        let mut s = imported(Kind::KeyedMutex);
        s.signal(0x5e, Slot(0), 0, 2, &clock(&[(0, 5)]));
        // Another key waits for a release the trace does not have, and takes nothing.
        assert_eq!(s.wait(0x5e, 0, 1, &Clock::new()), None);
        assert_eq!(s.wait(0x5e, 0, 2, &Clock::new()), Some(clock(&[(0, 5)])));
        // Held now: the next acquire needs a release of its own.
        assert_eq!(s.wait(0x5e, 0, 2, &Clock::new()), None);
    }
}
