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
//! A thread keeps [`WAYS`] memos, most recently used first: a capture replays whichever one it
//! matches whole (a loop allocating from a few call sites in turn replays each site's last
//! capture), and a walked capture is confirmed against the most recent one and replaces the
//! least recently used. Replay attempts that fail stop at the first changed word, which for
//! another call site is a few frames up.

/// Frame states kept per memo (48 bytes each, 4.5 KiB; [`WAYS`] memos per thread).
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

/// The states of the last capture, innermost first.
pub(crate) struct Memo {
    entries: [Entry; CAPACITY],
    len: usize,
    /// The cache flush count when it was recorded: any flush since drops it.
    generation: u64,
    /// The last capture, when its states can be replayed.
    last: Option<Last>,
    /// The first entry that differs from the memo this capture was walked beside (the most
    /// recent one then): where a capture from another call site most likely differs too, so
    /// a replay checks it first and a capture of another site fails after one check.
    divergence: usize,
}

impl Memo {
    /// An empty memo (the tests'; threads get theirs from [`Memos::init_in_place`]).
    #[cfg(test)]
    pub(crate) const fn new() -> Memo {
        Memo {
            entries: [Entry::EMPTY; CAPACITY],
            len: 0,
            generation: 0,
            last: None,
            divergence: 0,
        }
    }

    /// The entry a replay checks first (see `divergence`).
    #[inline(always)]
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
        let last = self.last.as_ref()?;
        let same = last.ip == ip
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
        self.last = ok.then_some(last);
        last.key
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

    /// Replaces the memo with the states of the capture that just ended (`fresh` holds them
    /// all, computed or confirmed by it: see `Walk::walk_memo`), clipped to [`CAPACITY`];
    /// `old` is the memo it was walked beside.
    pub(crate) fn replace(&mut self, generation: u64, fresh: &[Entry], old: &[Entry]) {
        let len = fresh.len().min(CAPACITY);
        self.entries[..len].copy_from_slice(&fresh[..len]);
        self.len = len;
        self.generation = generation;
        self.last = None;
        self.divergence = fresh
            .iter()
            .zip(old)
            .position(|(a, b)| (a.ip, a.sp, a.bp) != (b.ip, b.sp, b.bp))
            .unwrap_or(0);
    }
}

/// Memos kept per thread: the last captures of the most recent distinct stacks, so that a loop
/// allocating from a few call sites in turn replays each site's capture (one memo alone would
/// hold only the other site's).
pub(crate) const WAYS: usize = 8;

/// `[0, 1, .., WAYS - 1]`.
const fn ranks() -> [u8; WAYS] {
    let mut order = [0; WAYS];
    let mut i = 0;
    while i < WAYS {
        order[i] = i as u8;
        i += 1;
    }
    order
}

/// A thread's memos, most recently used first, and the source of their keys.
pub(crate) struct Memos {
    ways: [Memo; WAYS],
    /// Way indices, most recently used first.
    order: [u8; WAYS],
    /// The key of the last full walk; keys of one thread never repeat (until 2^64 walks).
    keys: u64,
}

impl Memos {
    /// Empty memos (the tests'; threads get theirs from [`Memos::init_in_place`]).
    #[cfg(test)]
    pub(crate) const fn new() -> Memos {
        Memos {
            ways: [const { Memo::new() }; WAYS],
            order: ranks(),
            keys: 0,
        }
    }

    /// Makes the zero-filled memory at `p` valid empty memos, equal to [`Memos::new`], without
    /// building the 37 KiB value on the stack.
    ///
    /// # Safety
    ///
    /// `p` must be valid for writes of a `Memos`, aligned, and zero-filled.
    pub(crate) unsafe fn init_in_place(p: *mut Memos) {
        // SAFETY: the caller guarantees `p` is valid and aligned; every field not written here
        // is an integer or an array of integers, for which zero is the value `new` gives.
        unsafe {
            for i in 0..WAYS {
                std::ptr::addr_of_mut!((*p).ways[i].last).write(None);
            }
            std::ptr::addr_of_mut!((*p).order).write(ranks());
        }
    }

    /// The memo of rank `rank` (0: most recently used).
    #[inline(always)]
    pub(crate) fn by_rank(&self, rank: usize) -> &Memo {
        &self.ways[usize::from(self.order[rank])]
    }

    /// Makes the memo of rank `rank` the most recently used.
    #[inline(always)]
    pub(crate) fn touch(&mut self, rank: usize) {
        let way = self.order[rank];
        self.order.copy_within(0..rank, 1);
        self.order[0] = way;
    }

    /// The most recently used memo (the old states of a new walk) and the least recently used
    /// one (which the walk's states replace).
    #[inline(always)]
    pub(crate) fn recent_and_oldest(&mut self) -> (&Memo, &mut Memo) {
        let (recent, oldest) = (usize::from(self.order[0]), usize::from(self.order[WAYS - 1]));
        debug_assert_ne!(recent, oldest);
        if recent < oldest {
            let (a, b) = self.ways.split_at_mut(oldest);
            (&a[recent], &mut b[0])
        } else {
            let (a, b) = self.ways.split_at_mut(recent);
            (&b[0], &mut a[oldest])
        }
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
    fn memos_are_ranked_by_last_use_and_a_walk_replaces_the_oldest() {
        let mut memos = Memos::new();
        let way_of = |memos: &Memos, rank: usize| memos.by_rank(rank) as *const Memo;
        let ways: Vec<*const Memo> = (0..WAYS).map(|r| way_of(&memos, r)).collect();
        memos.touch(2);
        assert_eq!(way_of(&memos, 0), ways[2]);
        assert_eq!(way_of(&memos, 1), ways[0]);
        assert_eq!(way_of(&memos, 2), ways[1]);
        assert_eq!(way_of(&memos, 3), ways[3]);
        assert_eq!(way_of(&memos, WAYS - 1), ways[WAYS - 1]);
        let (recent, oldest) = memos.recent_and_oldest();
        assert_eq!(recent as *const Memo, ways[2]);
        assert_eq!(oldest as *const Memo, ways[WAYS - 1]);
        memos.touch(WAYS - 1);
        assert_eq!(way_of(&memos, 0), ways[WAYS - 1]);
        assert_eq!(way_of(&memos, 1), ways[2]);
        assert_eq!(way_of(&memos, WAYS - 1), ways[WAYS - 2]);
        let keys: Vec<u64> = (0..3).map(|_| memos.next_key()).collect();
        assert_eq!(keys, [1, 2, 3]);
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
            assert_eq!(memos.order, fresh.order);
            assert_eq!(memos.keys, 0);
            for rank in 0..WAYS {
                let memo = memos.by_rank(rank);
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
