//! The hot path on x86-64: stepping from frame to frame with cached rules.
//!
//! Per frame: one cache probe (a hash and up to four loads from one cache line), then the rule
//! applied with one or two bounded stack reads. Every check that can fail ends the walk: a CFA
//! that does not increase, a read outside the live stack, a return address below 4096.

use std::arch::asm;

use crate::cache;
use crate::cfi;
use crate::rule::{Packed, Rule};
use crate::thread::{self, Bounds, Counters};

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
/// and `skip` more, writing return addresses to `out`.
#[inline(always)]
pub(crate) fn walk(regs: Regs, mode: Mode, skip: usize, out: &mut [u64]) -> usize {
    if out.is_empty() {
        return 0;
    }
    thread::with_bounds(regs.sp, |bounds, counters| {
        walk_within(regs, bounds, mode, skip, out, counters)
    })
}

fn walk_within(
    regs: Regs,
    bounds: Bounds,
    mode: Mode,
    mut skip: usize,
    out: &mut [u64],
    counters: &mut Counters,
) -> usize {
    if regs.sp & 7 != 0 {
        return 0; // never on x86-64, where RSP stays 8-aligned; `step` relies on it
    }
    let mut frame = Frame {
        ip: regs.ip,
        sp: regs.sp,
        bp: regs.bp,
        exact: false,
    };
    let (mut hits, mut misses) = (0u64, 0u64);
    let mut n = 0;
    // The capture's own frame is always unwound with CFI: frame 0 needs it in every mode.
    let mut use_cfi = true;
    loop {
        let stepped = if use_cfi {
            // A return address follows its call, which is at ip - 1.
            let address = frame.ip.wrapping_sub(1).wrapping_add(u64::from(frame.exact));
            let packed = match cache::lookup_packed(address) {
                Some(packed) => {
                    hits += 1;
                    packed
                }
                None => {
                    misses += 1;
                    miss(address)
                }
            };
            step(packed, frame, &bounds)
        } else {
            step_rare(Rule::FramePointer, frame, &bounds)
        };
        use_cfi = mode == Mode::Cfi;
        let Some(caller) = stepped else {
            break;
        };
        frame = caller;
        if skip > 0 {
            skip -= 1;
            continue;
        }
        let Some(slot) = out.get_mut(n) else {
            break;
        };
        *slot = frame.ip;
        n += 1;
        if n == out.len() {
            break;
        }
    }
    counters.hits += hits;
    counters.misses += misses;
    n
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

#[cold]
#[inline(never)]
fn miss(address: u64) -> Packed {
    Packed(cfi::rule_for(address).unwrap_or(Rule::FramePointer).pack())
}

/// The caller of `frame`; `None` ends the walk. The common rules (CFA = RSP or RBP + n)
/// take no branch on the kind: a select picks the base, and the RBP slot is always loaded
/// (from the return address slot when RBP is unchanged) and selected.
#[inline(always)]
fn step(packed: Packed, frame: Frame, bounds: &Bounds) -> Option<Frame> {
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
    let bp = if slot == 0 { frame.bp } else { saved_bp };
    (ip >= 4096).then_some(Frame {
        ip,
        sp: cfa,
        bp,
        exact: false,
    })
}

/// The rules that are not RSP/RBP + n, out of line.
#[inline(never)]
fn step_rare(rule: Rule, frame: Frame, bounds: &Bounds) -> Option<Frame> {
    let next = match rule {
        Rule::Rsp { .. } | Rule::Rbp { .. } => {
            return step(Packed(rule.pack()), frame, bounds);
        }
        Rule::DerefRbp { cfa } => (|| {
            let cfa = bounds.read(frame.bp.wrapping_add(cfa as u64))?;
            let bp = bounds.read(frame.bp)?;
            let ip = bounds.read(cfa.wrapping_sub(8))?;
            Some(Frame {
                ip,
                sp: cfa,
                bp,
                exact: false,
            })
        })(),
        Rule::Signal => (|| {
            let ip = bounds.read(frame.sp.wrapping_add(168))?;
            let sp = bounds.read(frame.sp.wrapping_add(160))?;
            let bp = bounds.read(frame.sp.wrapping_add(120))?;
            Some(Frame {
                ip,
                sp,
                bp,
                exact: true,
            })
        })(),
        Rule::End => None,
        Rule::FramePointer => (|| {
            // Only a plausible frame record: RBP at or above SP and on the stack. A saved RBP
            // that does not increase is caught by the next step's checks.
            if frame.bp < frame.sp || frame.bp >= bounds.high() {
                return None;
            }
            let ip = bounds.read(frame.bp.wrapping_add(8))?;
            let bp = bounds.read(frame.bp)?;
            Some(Frame {
                ip,
                sp: frame.bp.wrapping_add(16),
                bp,
                exact: false,
            })
        })(),
    };
    // `step` relies on SP staying aligned.
    next.filter(|next| next.sp > frame.sp && next.sp & 7 == 0 && next.ip >= 4096)
}
