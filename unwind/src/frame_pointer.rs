//! [`Method::FramePointer`](crate::Method::FramePointer) on aarch64: the x29 frame-record chain,
//! with the same stack bounds as the x86-64 walker. Best effort: frame 0 is right only when
//! `capture` itself set up a frame record. (On x86-64 the walker in `walk.rs` does this job.)
//!
//! Code built with pointer authentication (`-mbranch-protection=standard` or `pac-ret`, as
//! Debian's and Ubuntu's arm64 packages are) signs the return address before it saves it in
//! its frame record: the saved word carries a signature in its upper bits. Every return
//! address read is stripped of it with `xpaclri`, which is a no-op (a hint) on processors
//! without pointer authentication and on addresses never signed.

use std::arch::asm;

use crate::thread;

/// The stack pointer and frame pointer where this is inlined.
#[inline(always)]
pub(crate) fn registers() -> (u64, u64) {
    let (sp, fp): (u64, u64);
    // SAFETY: copies two registers into outputs; touches no memory.
    unsafe {
        asm!(
            "mov {sp}, sp",
            "mov {fp}, x29",
            sp = out(reg) sp,
            fp = out(reg) fp,
            options(nomem, nostack, preserves_flags),
        );
    }
    (sp, fp)
}

/// `address` without a pointer-authentication signature (`xpaclri`, in the hint space: a no-op
/// where pointer authentication is absent or off).
#[inline(always)]
pub(crate) fn strip_signature(address: u64) -> u64 {
    let mut lr = address;
    // SAFETY: `xpaclri` rewrites x30 from x30 alone; it touches no memory, no flags and no
    // other register, and is a no-op hint on processors without pointer authentication.
    unsafe {
        asm!("hint #7", inout("x30") lr, options(nomem, nostack, preserves_flags));
    }
    lr
}

/// Follows frame records from `fp`, skipping `skip` of them.
#[inline(always)]
pub(crate) fn walk(sp: u64, mut fp: u64, mut skip: usize, out: &mut [u64]) -> usize {
    if out.is_empty() {
        return 0;
    }
    thread::with_bounds(sp, false, |bounds, _, _| {
        let mut n = 0;
        let mut low = sp;
        while fp >= low {
            let (Some(next), Some(signed)) = (bounds.read(fp), bounds.read(fp.wrapping_add(8))) else {
                break;
            };
            let lr = strip_signature(signed);
            if lr < 4096 {
                break;
            }
            if skip > 0 {
                skip -= 1;
            } else if let Some(slot) = out.get_mut(n) {
                *slot = lr;
                n += 1;
            } else {
                break;
            }
            low = fp.wrapping_add(16);
            fp = next;
        }
        n
    })
}
