//! The per-thread memos of the last captures: a shortcut through stack parts that did not change.
//!
//! The cached walk is one dependent chain per frame (return address → cache probe → CFA → next
//! return address), about 6.5 ns a frame on the development machine. Consecutive captures of a
//! thread usually share their outer frames (the interpreter loop, `main`, the thread start). The
//! memo keeps the frame states (IP, SP, RBP) of the last capture, and the stack addresses each
//! step read. When a new walk reaches a state equal to a memo entry, the following entries
//! are checked instead of recomputed: state k + 1 follows from state k by the rule of IP k (the
//! same rule as last time, since the memo is dropped whenever the rule cache is flushed), so it is
//! right exactly when the words that rule read (the return address, the saved RBP, for some rules
//! the CFA) still hold the recorded values. Those addresses are known in advance, so the checks
//! are independent loads the CPU overlaps, under 3 ns a frame; the first mismatch hands
//! back to the ordinary walk. Nothing is assumed that the ordinary walk does not: the reads stay
//! within the bounds of the live stack, and the result equals what the walk would have produced.
//!
//! A thread keeps [`WAYS`] memos: a capture replays whichever one it matches whole (a loop
//! allocating from many call sites in turn replays each site's last capture), and a walked
//! capture is confirmed against the most recently used one and replaces an empty one or one
//! picked at random (see [`Memos::recent_and_victim`]). Before a memo is tried, its [`Tag`] is:
//! the stack pointer and instruction pointer the memo's capture began at and one word it read,
//! where it first differed from the memo before it (for a call site among several, the site's
//! own return address), so passing over the memos of the other sites costs a few instructions
//! each. The search starts at the memo that followed the most recent one last time.

use crate::thread::Bounds;

/// Frame states kept per memo (48 bytes each, 4.5 KiB; [`WAYS`] memos per thread, mapped on a
/// thread's first capture, of which a thread touches the pages of the memos its stacks fill).
pub(crate) const CAPACITY: usize = 96;

/// One frame state, as produced by one step of the walk, with the addresses that step read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub(crate) ip: u64,
    pub(crate) sp: u64,
    pub(crate) bp: u64,
    pub(crate) reads: Reads,
}

/// The stack words one step read: given an equal previous state, the step produces an equal
/// state exactly when these words still hold the values it produced (`ip`, `sp`, `bp`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Reads {
    /// Where `ip` was read, plus 1 if `ip` is exact (after a signal frame); 0: the rule was not
    /// cached (an address in no module), so the state cannot be confirmed later.
    pub(crate) ip: u64,
    /// Where `sp` was read; 0: computed (CFA = register + n).
    pub(crate) sp: u64,
    /// Where `bp` was read; 0: unchanged.
    pub(crate) bp: u64,
}

impl Reads {
    /// Whether the state was produced by an uncached rule.
    #[inline(always)]
    pub(crate) fn unverifiable(self) -> bool {
        self.ip == 0
    }

    /// Whether the state's IP is exact (interrupted by a signal).
    #[inline(always)]
    pub(crate) fn exact(self) -> bool {
        self.ip & 1 != 0
    }
}

#[cfg(test)]
impl Entry {
    const EMPTY: Entry = Entry {
        ip: 0,
        sp: 0,
        bp: 0,
        reads: Reads { ip: 0, sp: 0, bp: 0 },
    };
}

/// How the last capture began and ended, for [`Memo::replay`]: a capture that starts from the same
/// registers, with the same `skip` and output length, and finds every word the last capture read
/// unchanged, produces the same frames, so they are copied instead of walked.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Last {
    /// Registers of the capture's own frame.
    pub(crate) ip: u64,
    pub(crate) sp: u64,
    pub(crate) bp: u64,
    pub(crate) skip: usize,
    pub(crate) out_len: usize,
    /// States the capture stepped through (skipped and emitted): `entries[..consumed]`.
    pub(crate) consumed: usize,
    /// The output filled up; otherwise the walk ended with a step from the last state failing.
    pub(crate) full: bool,
    /// The capture's key (see [`crate::capture_keyed`]).
    pub(crate) key: u64,
}

impl Last {
    /// No capture to replay (`consumed` 0, which no replayable capture has); all zeros.
    const NONE: Last = Last {
        ip: 0,
        sp: 0,
        bp: 0,
        skip: 0,
        out_len: 0,
        consumed: 0,
        full: false,
        key: 0,
    };

    /// Whether this is a capture to replay.
    #[inline(always)]
    fn some(&self) -> bool {
        self.consumed != 0
    }
}

/// The states of the last capture, innermost first. All zeros is an empty memo, and the
/// fields come first (`repr(C)`): a thread's memos are mapped zero-filled and nothing is written
/// to a memo until a capture fills it, so a memo costs memory only once used, and then the
/// pages its capture's states reach.
#[repr(C)]
pub(crate) struct Memo {
    len: usize,
    /// The cache flush count when it was recorded: any flush since drops it.
    generation: u64,
    /// The last capture, when its states can be replayed ([`Last::NONE`] otherwise).
    last: Last,
    /// The first entry that differs from the memo this capture was walked beside (the most
    /// recent one then): where a capture from another call site most likely differs too, so
    /// the memo's [`Tag`] probes the word it read there.
    divergence: usize,
    entries: [Entry; CAPACITY],
}

impl Memo {
    /// An empty memo (the tests'; threads get theirs from [`Memos::init_in_place`]).
    #[cfg(test)]
    pub(crate) const fn new() -> Memo {
        Memo {
            entries: [Entry::EMPTY; CAPACITY],
            len: 0,
            generation: 0,
            last: Last::NONE,
            divergence: 0,
        }
    }

    /// The entry the tag probes (see `divergence`).
    #[cfg(test)]
    pub(crate) fn divergence(&self) -> usize {
        self.divergence
    }

    /// The states the last capture went through, if a capture from `regs` with `skip` and
    /// `out_len` that finds the words they were read from unchanged may copy them: (the states,
    /// whether the output filled up, the key).
    #[inline(always)]
    pub(crate) fn replayable(
        &self,
        generation: u64,
        (ip, sp, bp): (u64, u64, u64),
        skip: usize,
        out_len: usize,
    ) -> Option<(&[Entry], bool, u64)> {
        let last = &self.last;
        let same = last.some()
            && last.ip == ip
            && last.sp == sp
            && last.bp == bp
            && last.skip == skip
            && last.out_len == out_len
            && self.generation == generation;
        (same && last.consumed <= self.len).then(|| (&self.entries[..last.consumed], last.full, last.key))
    }

    /// Records how the capture that just replaced the memo began and ended, with its key
    /// (new, from [`Memos::next_key`]). The memo holds exactly the states that capture computed
    /// or confirmed, each through reads its stack bounds checked (`walk.rs`), so a replay may
    /// read the same words without checking; it is allowed only if the capture's states all fit
    /// in the memo and all were confirmable.
    pub(crate) fn finish(&mut self, last: Last) -> u64 {
        let ok = last.consumed > 0
            && last.consumed <= self.len
            && self.entries[..last.consumed].iter().all(|e| !e.reads.unverifiable());
        self.last = if ok { last } else { Last::NONE };
        last.key
    }

    /// The filter a capture passes before it replays this memo (see [`Tag`]); a tag that admits
    /// nothing when the memo cannot be replayed.
    pub(crate) fn tag(&self) -> Tag {
        let last = &self.last;
        if !last.some() {
            return Tag::default();
        }
        let (probe, value) = match self.entries[..last.consumed].get(self.divergence) {
            Some(e) => (e.reads.ip & !1, e.ip),
            None => (0, 0),
        };
        Tag {
            sp: last.sp,
            ip: last.ip,
            probe,
            value,
        }
    }

    /// The recorded states, empty if the cache was flushed since.
    #[inline(always)]
    pub(crate) fn entries(&self, generation: u64) -> &[Entry] {
        if self.generation == generation {
            &self.entries[..self.len]
        } else {
            &[]
        }
    }

    /// The memo's entries, for a walk to write its states into (see `Walk::walk_memo`), which
    /// then calls [`replaced`](Self::replaced); until then the memo holds no capture.
    #[inline(always)]
    pub(crate) fn replacing(&mut self) -> &mut [Entry; CAPACITY] {
        self.len = 0;
        self.last = Last::NONE;
        &mut self.entries
    }

    /// Ends [`replacing`](Self::replacing): the first `recorded` entries (clipped to
    /// [`CAPACITY`]) are the states of the capture that just ended, each computed or confirmed
    /// by it; `old` is the memo it was walked beside.
    pub(crate) fn replaced(&mut self, generation: u64, recorded: usize, old: &[Entry]) {
        self.len = recorded.min(CAPACITY);
        self.generation = generation;
        self.divergence = self.entries[..self.len]
            .iter()
            .zip(old)
            .position(|(a, b)| (a.ip, a.sp, a.bp) != (b.ip, b.sp, b.bp))
            .unwrap_or(0);
    }

    /// Replaces the memo with `fresh` (the tests' way to fill one).
    #[cfg(test)]
    pub(crate) fn replace(&mut self, generation: u64, fresh: &[Entry], old: &[Entry]) {
        let len = fresh.len().min(CAPACITY);
        self.replacing()[..len].copy_from_slice(&fresh[..len]);
        self.replaced(generation, len, old);
    }
}

/// Memos kept per thread: the last captures of the most recent distinct stacks, so that a loop
/// allocating from many call sites in turn replays each site's capture (one memo alone would
/// hold only the other site's).
pub(crate) const WAYS: usize = 32;
const _: () = assert!(WAYS.is_power_of_two() && WAYS <= 256);

/// What a capture compares before it tries a memo: a few words per memo, side by side, so
/// that passing over the memos of other call sites costs a few instructions each instead of
/// a visit to each memo.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tag {
    /// The stack pointer the memo's capture began at; 0: the memo cannot be replayed.
    sp: u64,
    /// Its instruction pointer.
    ip: u64,
    /// A word the capture read, where it first differed from the memo recorded before it (for
    /// a call site among several, the site's own return address); 0: none.
    probe: u64,
    /// The value it read there.
    value: u64,
}

impl Tag {
    /// Whether a capture that begins at `ip`, `sp` may replay the memo: it begins where the
    /// memo's did and the probe word (read through `bounds`) still holds its value. A filter:
    /// [`Memo::replayable`] and the replay check the rest.
    #[inline(always)]
    pub(crate) fn admits(&self, ip: u64, sp: u64, bounds: &Bounds) -> bool {
        self.sp == sp && self.ip == ip && (self.probe == 0 || bounds.read(self.probe) == Some(self.value))
    }
}

/// A thread's memos, and the source of their keys. The small fields and the tags come first
/// (`repr(C)`), then the memos in the order they are filled: a thread allocating from one
/// place touches a page or two.
#[repr(C)]
pub(crate) struct Memos {
    /// The way used last (walked into or replayed).
    recent: usize,
    /// For each way, the way used right after it last time: where a capture looks first (a
    /// loop allocating from several places in turn uses its memos in the same order each time).
    next: [u8; WAYS],
    /// Ways `0..filled` have held a capture; a walk fills the next before replacing any.
    filled: usize,
    /// xorshift state for picking the way a walk replaces (never 0).
    rng: u64,
    /// The key of the last full walk; keys of one thread never repeat (until 2^64 walks).
    keys: u64,
    tags: [Tag; WAYS],
    ways: [Memo; WAYS],
}

/// The first state of [`Memos::rng`].
const RNG_SEED: u64 = 0x9e37_79b9_7f4a_7c15;

impl Memos {
    /// Empty memos (the tests'; threads get theirs from [`Memos::init_in_place`]).
    #[cfg(test)]
    pub(crate) const fn new() -> Memos {
        Memos {
            ways: [const { Memo::new() }; WAYS],
            tags: [Tag {
                sp: 0,
                ip: 0,
                probe: 0,
                value: 0,
            }; WAYS],
            recent: WAYS - 1,
            next: [0; WAYS],
            filled: 0,
            rng: RNG_SEED,
            keys: 0,
        }
    }

    /// Makes the zero-filled memory at `p` valid empty memos, equal to [`Memos::new`], without
    /// building the value (about 150 KiB) on the stack.
    ///
    /// # Safety
    ///
    /// `p` must be valid for writes of a `Memos`, aligned, and zero-filled.
    pub(crate) unsafe fn init_in_place(p: *mut Memos) {
        // SAFETY: the caller guarantees `p` is valid and aligned; every field not written here
        // is made of integers and bools, for which zero is the value `new` gives (an empty
        // memo is all zeros).
        unsafe {
            std::ptr::addr_of_mut!((*p).recent).write(WAYS - 1);
            std::ptr::addr_of_mut!((*p).rng).write(RNG_SEED);
        }
    }

    /// The tag of way `way`.
    #[inline(always)]
    pub(crate) fn tag(&self, way: usize) -> &Tag {
        &self.tags[way]
    }

    /// The memo of way `way`.
    #[inline(always)]
    pub(crate) fn way(&self, way: usize) -> &Memo {
        &self.ways[way]
    }

    /// Marks way `way` as the most recently used.
    #[inline(always)]
    pub(crate) fn touch(&mut self, way: usize) {
        self.next[self.recent] = way as u8;
        self.recent = way;
    }

    /// The way a capture tries first: the one used after the most recent one last time.
    #[inline(always)]
    pub(crate) fn predicted(&self) -> usize {
        usize::from(self.next[self.recent])
    }

    /// The way of the most recently used memo (the old states of a new walk) and the way the
    /// walk's states go to: an empty one while there are any, else one picked at random
    /// among the others. Random, not the least recently used: a loop allocating from more
    /// sites than there are memos would find none of its sites' memos left under LRU (each
    /// walk replaces the memo the loop needs next), while a random pick leaves many in place
    /// (about 60% of captures replayed with 40 sites in turn, 20% with 64), and otherwise does
    /// about as well.
    pub(crate) fn recent_and_victim(&mut self) -> (usize, usize) {
        let recent = self.recent;
        if self.filled < WAYS {
            // Ways fill in order and `recent` is always a filled way (or, before the first
            // walk, the last one), so this way is not `recent`.
            self.filled += 1;
            return (recent, self.filled - 1);
        }
        let mut x = self.rng;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.rng = x;
        let pick = ((x >> 32) as usize) % (WAYS - 1);
        (recent, if pick >= recent { pick + 1 } else { pick })
    }

    /// The memo of way `old` and, mutable, that of way `new` (`old != new`).
    #[inline(always)]
    pub(crate) fn pair_mut(&mut self, old: usize, new: usize) -> (&Memo, &mut Memo) {
        assert_ne!(old, new);
        if old < new {
            let (a, b) = self.ways.split_at_mut(new);
            (&a[old], &mut b[0])
        } else {
            let (a, b) = self.ways.split_at_mut(old);
            (&b[0], &mut a[new])
        }
    }

    /// Sets the tag of way `way` from its memo, which a walk just replaced and finished.
    #[inline(always)]
    pub(crate) fn retag(&mut self, way: usize) {
        self.tags[way] = self.ways[way].tag();
    }

    /// A new key for a walked capture.
    #[inline(always)]
    pub(crate) fn next_key(&mut self) -> u64 {
        self.keys = self.keys.wrapping_add(1).max(1);
        self.keys
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(sp: u64) -> Entry {
        let reads = Reads {
            ip: sp - 8,
            sp: 0,
            bp: 0,
        };
        Entry {
            ip: sp + 1,
            sp,
            bp: 0,
            reads,
        }
    }

    #[test]
    fn a_walk_fills_the_empty_memos_then_replaces_any_but_the_most_recent() {
        let mut memos = Memos::new();
        for way in 0..WAYS {
            let (recent, victim) = memos.recent_and_victim();
            assert_eq!(victim, way, "empty ways first, in order");
            assert_eq!(recent, if way == 0 { WAYS - 1 } else { way - 1 });
            memos.touch(victim);
        }
        let mut picked = [0u32; WAYS];
        for i in 0..20 * WAYS {
            let recent = i % WAYS;
            memos.touch(recent);
            let (r, victim) = memos.recent_and_victim();
            assert_eq!(r, recent);
            assert_ne!(victim, recent, "the walk reads the most recent memo");
            picked[victim] += 1;
        }
        assert!(picked.iter().all(|&n| n > 0), "every way gets replaced: {picked:?}");
        let (three, five) = (memos_way(&memos, 3), memos_way(&memos, 5));
        let (old, new) = memos.pair_mut(3, 5);
        assert_eq!((old as *const Memo, new as *const Memo), (three, five));
        let (old, new) = memos.pair_mut(5, 3);
        assert_eq!((old as *const Memo, new as *const Memo), (five, three));
        let keys: Vec<u64> = (0..3).map(|_| memos.next_key()).collect();
        assert_eq!(keys, [1, 2, 3]);
    }

    fn memos_way(memos: &Memos, way: usize) -> *const Memo {
        memos.way(way)
    }

    #[test]
    fn a_tag_admits_a_capture_from_the_same_registers_whose_probe_word_still_holds() {
        let words = [0u64, 0x1111, 0x2222, 0x3333];
        let base = words.as_ptr() as u64;
        let bounds = Bounds::for_test(base, base + 32);
        let mut memo = Memo::new();
        assert_eq!(memo.tag(), Tag::default(), "nothing to replay");
        assert!(!Tag::default().admits(0x42, base + 8, &bounds));
        let at = |i: u64| Entry {
            ip: words[i as usize],
            sp: base + 8 * i + 8,
            bp: 0,
            reads: Reads {
                ip: base + 8 * i,
                sp: 0,
                bp: 0,
            },
        };
        let fresh = [at(1), Entry { ip: 0x2222, ..at(2) }, at(3)];
        memo.replace(1, &fresh, &[at(1), Entry { ip: 0x9999, ..at(2) }]);
        let last = Last {
            ip: 0x42,
            sp: base + 8,
            bp: 0,
            skip: 0,
            out_len: 8,
            consumed: 3,
            full: false,
            key: 7,
        };
        memo.finish(last);
        let tag = memo.tag();
        assert_eq!(
            (tag.probe, tag.value),
            (base + 16, 0x2222),
            "entry 1 differed from the memo before"
        );
        assert!(tag.admits(0x42, base + 8, &bounds));
        assert!(!tag.admits(0x43, base + 8, &bounds), "another instruction");
        assert!(!tag.admits(0x42, base + 16, &bounds), "another stack pointer");
        assert!(
            !Tag { value: 0x2223, ..tag }.admits(0x42, base + 8, &bounds),
            "the word changed"
        );
        // Out of the bounds of this capture: refused, never read.
        assert!(!tag.admits(0x42, base + 8, &Bounds::for_test(base + 24, base + 32)));
    }

    #[test]
    fn memos_initialised_in_zeroed_memory_are_empty_memos() {
        let layout = std::alloc::Layout::new::<Memos>();
        // SAFETY: a zeroed allocation of the layout of Memos, made valid by init_in_place,
        // used as one and freed with the same layout.
        unsafe {
            let p = std::alloc::alloc_zeroed(layout).cast::<Memos>();
            assert!(!p.is_null());
            Memos::init_in_place(p);
            let memos = &mut *p;
            let fresh = Memos::new();
            assert_eq!(
                (memos.recent, memos.filled, memos.rng),
                (fresh.recent, fresh.filled, fresh.rng)
            );
            assert_eq!(memos.keys, 0);
            for way in 0..WAYS {
                assert_eq!(*memos.tag(way), Tag::default());
                let memo = memos.way(way);
                assert!(memo.replayable(0, (0, 0, 0), 0, 0).is_none());
                assert!(memo.entries(0).is_empty());
                assert_eq!(memo.divergence(), 0);
            }
            assert_eq!(memos.next_key(), 1);
            std::alloc::dealloc(p.cast(), layout);
        }
    }

    #[test]
    fn replace_keeps_the_capture_until_a_flush_and_clips_to_capacity() {
        let mut memo = Memo::new();
        let old: Vec<Entry> = (10..20).map(|i| entry(i * 8)).collect();
        memo.replace(1, &old, &[]);
        assert_eq!(memo.entries(1), &old[..]);
        assert!(memo.entries(2).is_empty(), "a flush drops the memo");
        let fresh = [entry(80), entry(99 * 8)];
        memo.replace(1, &fresh, &old);
        assert_eq!(memo.entries(1), &fresh[..]);
        assert_eq!(memo.divergence(), 1, "entry 0 is the same state in both");

        let many: Vec<Entry> = (1..CAPACITY as u64 + 10).map(|i| entry(i * 8)).collect();
        memo.replace(0, &many, &[]);
        assert_eq!(memo.entries(0), &many[..CAPACITY]);
    }
}
