//! The hot path on x86-64: stepping from frame to frame with cached rules.
//!
//! Per frame: one cache probe (a hash and up to four loads from one cache line), then the rule
//! applied with one or two bounded stack reads. Every check that can fail ends the walk: a CFA
//! that does not increase, a read outside the live stack, a return address below 4096.

use std::arch::asm;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::cache;
use crate::cfi;
use crate::memo::{self, Memo, Memos, Reads};
use crate::rule::{Packed, Rule};
use crate::thread::{self, Bounds};

/// The registers the walker tracks.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Regs {
    /// A return address (or, after a signal frame, the exact interrupted instruction).
    pub(crate) ip: u64,
    pub(crate) sp: u64,
    pub(crate) bp: u64,
}

/// The registers at the point where this is inlined. `ip` is the address right after the `lea`,
/// so, like a return address, `ip - 1` lies inside the instruction whose CFI row describes `sp`.
#[inline(always)]
pub(crate) fn registers() -> Regs {
    let (ip, sp, bp): (u64, u64, u64);
    // SAFETY: reads three registers into outputs; no memory is touched and the stack pointer
    // is not moved, so the CFI row at this point describes the `sp` read here.
    unsafe {
        asm!(
            "lea {ip}, [rip]",
            "mov {sp}, rsp",
            "mov {bp}, rbp",
            ip = out(reg) ip,
            sp = out(reg) sp,
            bp = out(reg) bp,
            options(nomem, nostack, preserves_flags),
        );
    }
    Regs { ip, sp, bp }
}

/// How the frames after the first are unwound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
    /// DWARF CFI through the rule cache for every frame.
    Cfi,
    /// CFI only for the capturing function's own frame, then the RBP chain.
    FramePointer,
}

/// Unwinds from `regs` (captured inside `capture`), skipping the capturing function's own frame
/// and `skip` more, writing return addresses to `out`: (frames written, key). Equal nonzero keys
/// from one thread mean equal frames (see [`crate::capture_keyed`]); 0 is no key.
#[inline(always)]
pub(crate) fn walk(regs: Regs, mode: Mode, skip: usize, out: &mut [u64]) -> (usize, u64) {
    if out.is_empty() || regs.sp & 7 != 0 {
        // RSP is always 8-aligned on x86-64; `step` relies on it.
        return (0, 0);
    }
    let wants_memo = mode == Mode::Cfi && MEMO_ENABLED.load(Ordering::Relaxed);
    thread::with_bounds(regs.sp, wants_memo, |bounds, counters, memo| {
        let frame = Frame {
            ip: regs.ip,
            sp: regs.sp,
            bp: regs.bp,
            exact: false,
        };
        let mut walk = Walk {
            bounds,
            skip,
            out,
            n: 0,
            hits: 0,
            misses: 0,
            memo_frames: 0,
            key: 0,
        };
        match (mode, memo) {
            (Mode::Cfi, Some(memo)) => walk.with_memo(frame, memo),
            (Mode::Cfi, _) => walk.plain(frame),
            (Mode::FramePointer, _) => {
                // The capture's own frame needs CFI in every mode: frame 0 depends on it.
                if let Some((caller, _)) = walk.step_cfi(frame) {
                    if !walk.emit(caller.ip) {
                        walk.frame_pointers(caller);
                    }
                }
            }
        }
        counters.hits += walk.hits;
        counters.misses += walk.misses;
        counters.memo += walk.memo_frames;
        (walk.n, walk.key)
    })
}

/// Whether the first `frames` frames from `regs` can all be unwound from described code: every
/// IP lies in a loaded module, frames without CFI there have RBP pointing at a frame record in
/// the live stack, and the walk ends at an outermost frame (CFI without a return address) or
/// after `frames` frames. libunwind's `unw_backtrace` reads memory unchecked only where this
/// fails (see `libunwind.rs`).
pub(crate) fn all_described(regs: Regs, frames: usize) -> bool {
    if regs.sp & 7 != 0 {
        return false;
    }
    thread::with_bounds(regs.sp, false, |bounds, _, _| {
        let mut frame = Frame {
            ip: regs.ip,
            sp: regs.sp,
            bp: regs.bp,
            exact: false,
        };
        for _ in 0..frames {
            let address = frame.ip.wrapping_sub(1).wrapping_add(u64::from(frame.exact));
            let rule = match cache::lookup_packed(address) {
                Some(packed) => Rule::unpack(packed.0),
                None => match cfi::rule_for(address) {
                    Some(rule) => rule,
                    None => return false,
                },
            };
            match rule {
                Rule::End => return true,
                Rule::FramePointer
                    if bounds.read(frame.bp).is_none() || bounds.read(frame.bp.wrapping_add(8)).is_none() =>
                {
                    return false
                }
                _ => {}
            }
            match step_rare(rule, frame, &bounds) {
                Some((caller, _)) => frame = caller,
                None => return false,
            }
        }
        true
    })
}

/// Whether `Dwarf` captures use the per-thread memo (see [`crate::set_memo`]).
pub(crate) static MEMO_ENABLED: AtomicBool = AtomicBool::new(true);

/// One capture in progress.
struct Walk<'a> {
    bounds: Bounds,
    skip: usize,
    out: &'a mut [u64],
    n: usize,
    hits: u64,
    misses: u64,
    memo_frames: u64,
    /// The capture's key; 0 unless it went through the memo.
    key: u64,
}

impl Walk<'_> {
    /// Records the return address of a frame just reached; true when `out` is full.
    #[inline(always)]
    fn emit(&mut self, ip: u64) -> bool {
        if self.skip > 0 {
            self.skip -= 1;
            return false;
        }
        if let Some(slot) = self.out.get_mut(self.n) {
            *slot = ip;
            self.n += 1;
        }
        self.n >= self.out.len()
    }

    /// One step with the cached CFI rule of `frame`: the caller and the words the step read.
    #[inline(always)]
    fn step_cfi(&mut self, frame: Frame) -> Option<(Frame, Reads)> {
        // A return address follows its call, which is at ip - 1.
        let address = frame.ip.wrapping_sub(1).wrapping_add(u64::from(frame.exact));
        match cache::lookup_packed(address) {
            Some(packed) => {
                self.hits += 1;
                step(packed, frame, &self.bounds)
            }
            None => {
                self.misses += 1;
                match miss(address) {
                    Some(packed) => step(packed, frame, &self.bounds),
                    // In no module: not cached, so the result cannot be confirmed later.
                    None => {
                        step_rare(Rule::FramePointer, frame, &self.bounds).map(|(caller, _)| (caller, Reads::default()))
                    }
                }
            }
        }
    }

    /// Walks to the end of the stack or of `out` with the cached rules, without a memo.
    fn plain(&mut self, mut frame: Frame) {
        while let Some((caller, _)) = self.step_cfi(frame) {
            frame = caller;
            if self.emit(frame.ip) {
                return;
            }
        }
    }

    /// Follows the RBP chain from `frame` to the end of the stack or of `out`.
    fn frame_pointers(&mut self, frame: Frame) {
        let (mut sp, mut bp) = (frame.sp, frame.bp);
        // A frame record at RBP: saved RBP, then the return address. It must lie at or above
        // SP (which only increases), be aligned and end within the stack.
        while bp >= sp && bp & 7 == 0 && bp <= self.bounds.high().saturating_sub(16) {
            // SAFETY: `read_unchecked`'s contract: low <= sp (true of every frame's SP, as in
            // `step`, and each pass raises it) <= bp (checked), bp is aligned and bp + 16 <= high
            // (checked), so both words are aligned and lie inside the bounds.
            let (next, ip) = unsafe { (self.bounds.read_unchecked(bp), self.bounds.read_unchecked(bp + 8)) };
            if ip < 4096 {
                return;
            }
            sp = bp + 16;
            bp = next;
            if self.emit(ip) {
                return;
            }
        }
    }

    /// Ordinary steps from `frame`, recording each state in `fresh`, until the stack or `out`
    /// ends (`None`) or a state equals an entry of `old` (that entry's index).
    #[inline(always)]
    fn record(
        &mut self,
        mut frame: Frame,
        fresh: &mut [memo::Entry],
        recorded: &mut usize,
        old: &[memo::Entry],
    ) -> Option<usize> {
        let mut cursor = 0;
        loop {
            let (caller, reads) = self.step_cfi(frame)?;
            frame = caller;
            if let Some(slot) = fresh.get_mut(*recorded) {
                *slot = memo::Entry {
                    ip: frame.ip,
                    sp: frame.sp,
                    bp: frame.bp,
                    reads,
                };
                *recorded += 1;
            }
            if self.emit(frame.ip) {
                return None;
            }
            while cursor < old.len() && old[cursor].sp < frame.sp {
                cursor += 1;
            }
            if let Some(entry) = old.get(cursor) {
                let same = entry.sp == frame.sp && entry.ip == frame.ip && entry.bp == frame.bp;
                if same && entry.reads.exact() == frame.exact && !entry.reads.unverifiable() {
                    return Some(cursor);
                }
            }
        }
    }

    /// Walks with the thread's memo: a replay of the last capture when nothing it read changed,
    /// otherwise a walk that confirms the unchanged part (see `memo.rs`); the states of a walk
    /// are stored in the memo.
    fn with_memo(&mut self, frame: Frame, memos: &mut Memos) {
        let generation = cfi::FLUSHES.load(Ordering::Relaxed);
        let (skip, out_len) = (self.skip, self.out.len());
        // Any memo that replays gives the frames the walk would: the first one found serves.
        // The search starts where the last captures lead (see `Memos::predicted`).
        let first = memos.predicted();
        for i in 0..memo::WAYS {
            let way = (first + i) & (memo::WAYS - 1);
            if memos.tag(way).admits(frame.ip, frame.sp, &self.bounds) && self.replay(frame, memos.way(way), generation)
            {
                memos.touch(way);
                return;
            }
        }
        let key = memos.next_key();
        let (recent, victim) = memos.recent_and_victim();
        let (recent_memo, memo) = memos.pair_mut(recent, victim);
        self.walk_memo(frame, recent_memo.entries(generation), memo, generation);
        let consumed = (skip - self.skip) + self.n;
        let last = memo::Last {
            ip: frame.ip,
            sp: frame.sp,
            bp: frame.bp,
            skip,
            out_len,
            consumed,
            full: self.n >= out_len,
            key,
        };
        self.key = memo.finish(last);
        memos.retag(victim);
        memos.touch(victim);
    }

    /// Copies the last capture's frames if this capture starts from the same registers (so with
    /// the same stack bounds), asks for the same frames, and every stack word the last capture's
    /// states were computed from still holds the value they were computed from: then each step
    /// would produce the same state again, so the walk would produce the same frames. Independent
    /// loads, no rule lookups, no bounds checks (done when the memo was recorded).
    #[inline(always)]
    fn replay(&mut self, frame: Frame, memo: &Memo, generation: u64) -> bool {
        if frame.exact {
            return false;
        }
        let Some((entries, full, key)) =
            memo.replayable(generation, (frame.ip, frame.sp, frame.bp), self.skip, self.out.len())
        else {
            return false;
        };
        // Checked four states at a time: the loads of a group are independent, and one
        // branch per group stops at a changed stack (usually near the top).
        let check = |e: &memo::Entry| {
            let r = e.reads;
            // SAFETY: every one of these addresses was read, through a bounds check, by the
            // capture that recorded the memo (`walk_memo`, `Memo::finish`), which began at the
            // same stack pointer on the same thread: its bounds are this capture's.
            unsafe {
                let mut d = self.bounds.read_unchecked(r.ip & !1) ^ e.ip;
                if r.sp != 0 {
                    d |= self.bounds.read_unchecked(r.sp) ^ e.sp;
                }
                if r.bp != 0 {
                    d |= self.bounds.read_unchecked(r.bp) ^ e.bp;
                }
                d
            }
        };
        let mut groups = entries.chunks_exact(4);
        for g in &mut groups {
            if check(&g[0]) | check(&g[1]) | check(&g[2]) | check(&g[3]) != 0 {
                return false;
            }
        }
        if groups.remainder().iter().fold(0, |d, e| d | check(e)) != 0 {
            return false;
        }
        let Some(last) = entries.last() else {
            return false;
        };
        if !full {
            // The last walk ended because no step led on from its last state: check it still
            // does not (it may depend on words no state was computed from).
            let end = Frame {
                ip: last.ip,
                sp: last.sp,
                bp: last.bp,
                exact: last.reads.exact(),
            };
            if self.step_cfi(end).is_some() {
                return false;
            }
        }
        let skip = self.skip.min(entries.len());
        let emitted = &entries[skip..];
        let n = emitted.len().min(self.out.len());
        for (slot, e) in self.out[..n].iter_mut().zip(emitted) {
            *slot = e.ip;
        }
        self.skip -= skip;
        self.n = n;
        self.memo_frames += entries.len() as u64;
        self.key = key;
        true
    }

    /// Walks with the thread's memo (see `memo.rs`), then stores this capture's states in it.
    /// Whenever a state equals one of the memo, the entries after it are confirmed instead of
    /// computed; at the first that no longer holds, ordinary steps resume until the walk meets
    /// the memo again (a stack that differs only in a few inner frames, as when a loop allocates
    /// from alternating call sites, is confirmed everywhere else).
    fn walk_memo(&mut self, start: Frame, old: &[memo::Entry], memo: &mut Memo, generation: u64) {
        // The states go straight into the memo they replace (another than `old`'s).
        let fresh = memo.replacing();
        let mut recorded = 0;
        let mut frame = start;
        let mut cursor = 0;
        // Every state this loop records was computed by a step or confirmed by `still_holds`
        // in this capture, through reads that the bounds checked (what `Memo::finish` relies on).
        while let Some(found) = self.record(frame, fresh, &mut recorded, &old[cursor..]) {
            let mut next = cursor + found + 1;
            while let Some(entry) = old.get(next) {
                if !self.still_holds(entry) {
                    break;
                }
                self.memo_frames += 1;
                if let Some(slot) = fresh.get_mut(recorded) {
                    *slot = *entry;
                    recorded += 1;
                }
                next += 1;
                if self.emit(entry.ip) {
                    memo.replaced(generation, recorded, old);
                    return;
                }
            }
            // From the last confirmed state on, ordinary steps again (the first one finds the
            // end of the stack if the memo reached it).
            let last = old[next - 1];
            frame = Frame {
                ip: last.ip,
                sp: last.sp,
                bp: last.bp,
                exact: last.reads.exact(),
            };
            cursor = next;
        }
        memo.replaced(generation, recorded, old);
    }

    /// Whether `entry` is still what one step from its predecessor (a state equal to the
    /// current one) produces: the words that step read still hold the values it produced.
    #[inline(always)]
    fn still_holds(&self, entry: &memo::Entry) -> bool {
        let reads = entry.reads;
        if reads.unverifiable() {
            return false;
        }
        // SAFETY: `entry` is a memo entry, and every address a memo entry names was read by
        // the capture that recorded or confirmed it, on this thread, through a checked read
        // (`Memo::finish`): aligned and below the thread's top; `read_again` checks the rest.
        unsafe {
            let ip_ok = self.bounds.read_again(reads.ip & !1) == Some(entry.ip);
            let sp_ok = reads.sp == 0 || self.bounds.read_again(reads.sp) == Some(entry.sp);
            let bp_ok = reads.bp == 0 || self.bounds.read_again(reads.bp) == Some(entry.bp);
            ip_ok & sp_ok & bp_ok
        }
    }
}

/// The registers of the frame being unwound.
#[derive(Clone, Copy, Debug)]
struct Frame {
    ip: u64,
    sp: u64,
    bp: u64,
    /// `ip` is an interrupted instruction (after a signal frame), not a return address.
    exact: bool,
}

/// The rule for `address` from CFI, now cached; `None` if the address is in no module.
#[cold]
#[inline(never)]
fn miss(address: u64) -> Option<Packed> {
    cfi::rule_for(address).map(|rule| Packed(rule.pack()))
}

/// The caller of `frame` and the words the step read; `None` ends the walk. The common rules
/// (CFA = RSP or RBP + n) take no branch on the kind: a select picks the base, and the RBP slot
/// is always loaded (from the return address slot when RBP is unchanged) and selected.
#[inline(always)]
fn step(packed: Packed, frame: Frame, bounds: &Bounds) -> Option<(Frame, Reads)> {
    if !packed.is_common() {
        return step_rare(Rule::unpack(packed.0), frame, bounds);
    }
    let base = if packed.cfa_from_rbp() { frame.bp } else { frame.sp };
    let cfa = base.wrapping_add(packed.cfa() as u64);
    // The CFA must lie strictly above the current SP and at most at the top of the stack, and
    // be aligned; then the return address slot [cfa - 8, cfa) is inside the bounds.
    if cfa <= frame.sp || cfa > bounds.high() || cfa & 7 != 0 {
        return None;
    }
    let slot = packed.rbp_slot();
    let rbp_address = cfa.wrapping_sub(8 * slot.max(1));
    if rbp_address < bounds.low() {
        return None;
    }
    // SAFETY: frame.sp is 8-aligned and at least bounds.low() (true of the capture's own stack
    // pointer, and every step keeps it so), and cfa is aligned, above frame.sp and at most
    // bounds.high(): so low <= cfa - 8 and cfa - 8 + 8 <= high. rbp_address is aligned (cfa and
    // 8 * slot are), at least bounds.low() (checked) and at most cfa - 8.
    let (ip, saved_bp) = unsafe { (bounds.read_unchecked(cfa - 8), bounds.read_unchecked(rbp_address)) };
    let (bp, bp_read) = if slot == 0 {
        (frame.bp, 0)
    } else {
        (saved_bp, rbp_address)
    };
    let reads = Reads {
        ip: cfa - 8,
        sp: 0,
        bp: bp_read,
    };
    (ip >= 4096).then_some((
        Frame {
            ip,
            sp: cfa,
            bp,
            exact: false,
        },
        reads,
    ))
}

/// The rules that are not RSP/RBP + n.
#[inline(always)]
fn step_rare(rule: Rule, frame: Frame, bounds: &Bounds) -> Option<(Frame, Reads)> {
    let (next, reads) = match rule {
        Rule::Rsp { .. } | Rule::Rbp { .. } => return step(Packed(rule.pack()), frame, bounds),
        Rule::DerefRbp { cfa } => {
            let cfa_at = frame.bp.wrapping_add(cfa as u64);
            let cfa = bounds.read(cfa_at)?;
            let bp = bounds.read(frame.bp)?;
            let ip = bounds.read(cfa.wrapping_sub(8))?;
            let reads = Reads {
                ip: cfa.wrapping_sub(8),
                sp: cfa_at,
                bp: frame.bp,
            };
            (
                Frame {
                    ip,
                    sp: cfa,
                    bp,
                    exact: false,
                },
                reads,
            )
        }
        Rule::Signal => {
            let ip_at = frame.sp.wrapping_add(168);
            let sp_at = frame.sp.wrapping_add(160);
            let bp_at = frame.sp.wrapping_add(120);
            let (ip, sp, bp) = (bounds.read(ip_at)?, bounds.read(sp_at)?, bounds.read(bp_at)?);
            // The IP read address is aligned: its low bit is free to mark the IP as exact.
            (
                Frame {
                    ip,
                    sp,
                    bp,
                    exact: true,
                },
                Reads {
                    ip: ip_at | 1,
                    sp: sp_at,
                    bp: bp_at,
                },
            )
        }
        Rule::End => return None,
        Rule::FramePointer => {
            // Only a plausible frame record: RBP at or above SP and on the stack. A saved RBP
            // that does not increase is caught by the next step's checks.
            if frame.bp < frame.sp || frame.bp >= bounds.high() {
                return None;
            }
            let ip = bounds.read(frame.bp.wrapping_add(8))?;
            let bp = bounds.read(frame.bp)?;
            let reads = Reads {
                ip: frame.bp.wrapping_add(8),
                sp: 0,
                bp: frame.bp,
            };
            (
                Frame {
                    ip,
                    sp: frame.bp.wrapping_add(16),
                    bp,
                    exact: false,
                },
                reads,
            )
        }
    };
    // `step` relies on SP staying aligned.
    (next.sp > frame.sp && next.sp & 7 == 0 && next.ip >= 4096).then_some((next, reads))
}
