//! The hot path on x86-64: stepping from frame to frame with cached rules.
//!
//! Per frame: one cache probe (a hash and up to four loads from one cache line), then the rule
//! applied with one or two bounded stack reads. Every check that can fail ends the walk: a CFA
//! that does not increase, a read outside the live stack, a return address below 4096.

use std::arch::asm;

use crate::cache;
use crate::cfi;
use crate::rule::Rule;
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
    mut regs: Regs,
    bounds: Bounds,
    mode: Mode,
    mut skip: usize,
    out: &mut [u64],
    counters: &mut Counters,
) -> usize {
    let mut exact = false;
    let mut use_cfi = true;
    let mut n = 0;
    loop {
        let rule = if use_cfi {
            // A return address follows its call: the call itself is at ip - 1.
            let address = if exact { regs.ip } else { regs.ip.wrapping_sub(1) };
            rule_at(address, counters)
        } else {
            Rule::FramePointer
        };
        use_cfi = mode == Mode::Cfi;
        let Some((caller, caller_exact)) = step(rule, regs, &bounds) else {
            return n;
        };
        if caller.sp <= regs.sp || caller.ip < 4096 {
            return n;
        }
        regs = caller;
        exact = caller_exact;
        if skip > 0 {
            skip -= 1;
            continue;
        }
        let Some(slot) = out.get_mut(n) else {
            return n;
        };
        *slot = regs.ip;
        n += 1;
        if n == out.len() {
            return n;
        }
    }
}

/// The cached rule for `address`, computing it on a miss.
#[inline(always)]
fn rule_at(address: u64, counters: &mut Counters) -> Rule {
    if let Some(rule) = cache::lookup(address) {
        counters.hits += 1;
        return rule;
    }
    counters.misses += 1;
    miss(address)
}

#[cold]
#[inline(never)]
fn miss(address: u64) -> Rule {
    cfi::rule_for(address).unwrap_or(Rule::FramePointer)
}

/// The caller's registers, and whether its `ip` is exact (interrupted by a signal) rather than a
/// return address; `None` ends the walk.
#[inline(always)]
fn step(rule: Rule, regs: Regs, bounds: &Bounds) -> Option<(Regs, bool)> {
    let (cfa, rbp_slot) = match rule {
        Rule::Rsp { cfa, rbp_slot } => (regs.sp.wrapping_add(cfa as u64), rbp_slot),
        Rule::Rbp { cfa, rbp_slot } => (regs.bp.wrapping_add(cfa as u64), rbp_slot),
        Rule::DerefRbp { cfa } => {
            let cfa = bounds.read(regs.bp.wrapping_add(cfa as u64))?;
            let bp = bounds.read(regs.bp)?;
            let ip = bounds.read(cfa.wrapping_sub(8))?;
            return Some((Regs { ip, sp: cfa, bp }, false));
        }
        Rule::Signal => {
            let ip = bounds.read(regs.sp.wrapping_add(168))?;
            let sp = bounds.read(regs.sp.wrapping_add(160))?;
            let bp = bounds.read(regs.sp.wrapping_add(120))?;
            return Some((Regs { ip, sp, bp }, true));
        }
        Rule::End => return None,
        Rule::FramePointer => {
            // Only a plausible frame record: RBP at or above SP and on the stack. A saved RBP that
            // does not increase is caught by the next step's checks.
            if regs.bp < regs.sp || regs.bp >= bounds.high() {
                return None;
            }
            let ip = bounds.read(regs.bp.wrapping_add(8))?;
            let bp = bounds.read(regs.bp)?;
            return Some((
                Regs {
                    ip,
                    sp: regs.bp.wrapping_add(16),
                    bp,
                },
                false,
            ));
        }
    };
    let ip = bounds.read(cfa.wrapping_sub(8))?;
    let bp = if rbp_slot == 0 {
        regs.bp
    } else {
        bounds.read(cfa.wrapping_sub(8 * u64::from(rbp_slot)))?
    };
    Some((Regs { ip, sp: cfa, bp }, false))
}
