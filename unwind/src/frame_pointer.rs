//! [`Method::FramePointer`](crate::Method::FramePointer) on aarch64: the x29 frame-record chain,
//! with the same stack bounds as the x86-64 walker. Best effort: frame 0 is right only when
//! `capture` itself set up a frame record. (On x86-64 the walker in `walk.rs` does this job.)

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
            let (Some(next), Some(lr)) = (bounds.read(fp), bounds.read(fp.wrapping_add(8))) else {
                break;
            };
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
