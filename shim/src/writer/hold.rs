//! Sequence numbers held: taken by a thread and not yet written.
//!
//! A hook numbers its record before the driver call it describes when the order matters (a
//! free is numbered before the memory can be handed out again) and writes it after. When a
//! bounded trace rotates, the checkpoint of the history before the cut must hold every record
//! numbered up to it, so the thread that builds it first waits until no thread holds such a
//! number. Each thread says what it holds in a slot of its own (a cache line, written only by
//! it, with plain stores on the hot path): nothing, a number being taken, or the oldest number
//! it has not written yet. The builder reads every slot; nobody else does.
//!
//! Slots are never freed: a thread that exits gives its slot back for the next thread to
//! claim. The list is lock-free (a forked child may inherit it in any state).

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};

/// A slot's value while its thread takes a number (the builder must wait to learn it).
const TAKING: u64 = u64::MAX;

/// One thread's held number: 0 none, [`TAKING`], or the oldest number not yet written.
#[repr(align(64))]
struct Slot {
    held: AtomicU64,
    owned: AtomicBool,
    next: AtomicPtr<Slot>,
}

static HEAD: AtomicPtr<Slot> = AtomicPtr::new(std::ptr::null_mut());

/// Numbers held by threads whose thread-locals are gone (exiting threads), counted.
static ORPHANS: AtomicU64 = AtomicU64::new(0);

/// Every slot ever made.
fn slots() -> impl Iterator<Item = &'static Slot> {
    let mut p = HEAD.load(Ordering::Acquire);
    std::iter::from_fn(move || {
        // SAFETY: slots are leaked and never freed; `next` is set before a slot is published.
        let s = unsafe { p.as_ref()? };
        p = s.next.load(Ordering::Acquire);
        Some(s)
    })
}

/// A free slot claimed for the calling thread, made if none is free.
fn claim() -> &'static Slot {
    for s in slots() {
        if !s.owned.load(Ordering::Relaxed)
            && s.owned
                .compare_exchange(false, true, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            return s;
        }
    }
    let s: &'static Slot = Box::leak(Box::new(Slot {
        held: AtomicU64::new(0),
        owned: AtomicBool::new(true),
        next: AtomicPtr::new(std::ptr::null_mut()),
    }));
    let mut head = HEAD.load(Ordering::Acquire);
    loop {
        s.next.store(head, Ordering::Relaxed);
        match HEAD.compare_exchange_weak(head, s as *const Slot as *mut Slot, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => return s,
            Err(now) => head = now,
        }
    }
}

/// A thread's side of its slot, kept in the writer's thread-local.
pub struct Holder {
    /// The thread's slot once claimed (slots are leaked: `'static`).
    slot: Cell<Option<&'static Slot>>,
    /// Numbers taken and not yet written (more than one at process exit).
    count: Cell<u32>,
}

impl Holder {
    pub const fn new() -> Holder {
        Holder {
            slot: Cell::new(None),
            count: Cell::new(0),
        }
    }

    fn slot(&self) -> &'static Slot {
        if let Some(s) = self.slot.get() {
            return s;
        }
        let s = claim();
        self.slot.set(Some(s));
        s
    }

    /// Takes a number with `take` (an atomic increment, which publishes the slot's `TAKING`
    /// to whoever reads the counter after it) and holds it until [`Holder::written`].
    #[inline]
    pub fn take(&self, take: impl FnOnce() -> u64) -> u64 {
        let n = self.count.get();
        if n > 0 {
            self.count.set(n + 1);
            return take();
        }
        let slot = self.slot();
        slot.held.store(TAKING, Ordering::Relaxed);
        let seq = take();
        slot.held.store(seq, Ordering::Relaxed);
        self.count.set(1);
        seq
    }

    /// The oldest number this thread holds (`u64::MAX`: none).
    pub fn oldest(&self) -> u64 {
        if self.count.get() == 0 {
            return u64::MAX;
        }
        match self.slot().held.load(Ordering::Relaxed) {
            0 => u64::MAX,
            h => h,
        }
    }

    /// A held number's record was written (or lost): the slot is free once none is held.
    #[inline]
    pub fn written(&self) {
        let n = self.count.get();
        if n == 0 {
            return;
        }
        self.count.set(n - 1);
        if n == 1 {
            // Release: the record's bytes are visible to a builder that sees the slot free.
            self.slot().held.store(0, Ordering::Release);
        }
    }

    /// The thread is exiting: its slot goes to the next thread.
    pub fn exit(&self) {
        if let Some(s) = self.slot.replace(None) {
            s.held.store(0, Ordering::Release);
            s.owned.store(false, Ordering::Release);
        }
        self.count.set(0);
    }

    /// In a forked child: this thread, the only one left, keeps its slot.
    pub fn keep_in_child(&self) {
        if let Some(s) = self.slot.get() {
            s.owned.store(true, Ordering::Relaxed);
        }
        self.count.set(0);
    }
}

/// A number taken by a thread without thread-locals.
pub fn take_orphan(take: impl FnOnce() -> u64) -> u64 {
    // SeqCst: visible to a builder that reads the counter after the number is taken.
    ORPHANS.fetch_add(1, Ordering::SeqCst);
    take()
}

/// An orphan number's record was written (or lost).
pub fn orphan_written() {
    let _ = ORPHANS.fetch_update(Ordering::Release, Ordering::Relaxed, |n| n.checked_sub(1));
}

/// Waits until no thread holds a number at or below `cut` (a number being taken resolves in
/// nanoseconds; one held across a driver call, for as long as the call takes), or until
/// `stop` says to give up; false then.
pub fn wait_below(cut: u64, stop: impl Fn() -> bool) -> bool {
    let mut pause_ms = 1;
    loop {
        let mut held = ORPHANS.load(Ordering::Acquire) > 0;
        for s in slots() {
            let mut spins = 0u32;
            let h = loop {
                let h = s.held.load(Ordering::Acquire);
                if h != TAKING {
                    break h;
                }
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    std::thread::yield_now();
                    if spins > 10_000 {
                        // Its thread was stopped mid-take: counted as held, waited for below.
                        break h;
                    }
                }
            };
            held |= h == TAKING || (h != 0 && h <= cut);
        }
        if !held {
            return true;
        }
        if stop() {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(pause_ms));
        pause_ms = (pause_ms * 2).min(20);
    }
}

/// In a forked child (single-threaded): the parent's other threads are gone, and with them
/// what they held. The calling thread keeps its slot ([`Holder::keep_in_child`]).
pub fn in_forked_child() {
    for s in slots() {
        s.held.store(0, Ordering::Relaxed);
        s.owned.store(false, Ordering::Relaxed);
    }
    ORPHANS.store(0, Ordering::Relaxed);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_held_number_is_in_the_slot_until_written() {
        let h = Holder::new();
        let held = || h.slot().held.load(Ordering::Acquire);
        let seq = h.take(|| 1_000_000);
        assert_eq!(held(), seq);
        assert!(!wait_below(1_000_000, || true), "held at the cut");
        assert!(wait_below(999_999, || true), "not held below it");
        // Nested: the oldest stays held until both are written.
        let _ = h.take(|| 1_000_001);
        h.written();
        assert_eq!(held(), seq);
        h.written();
        assert_eq!(held(), 0);
        h.exit();
    }

    #[test]
    fn an_exiting_thread_gives_its_slot_back() {
        let t = std::thread::spawn(|| {
            let h = Holder::new();
            let _ = h.take(|| 2_000_000);
            let s = h.slot.get().expect("claimed by take");
            h.exit();
            s
        });
        let s = t.join().unwrap();
        assert_eq!(s.held.load(Ordering::Acquire), 0);
    }
}
