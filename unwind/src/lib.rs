//! Stack capture for `libgpuleak.so`: the return addresses of the calling thread, innermost
//! first, fast enough to take on every CUDA allocation (symbolized offline by the analyzer).
//!
//! ```
//! use gpuleak_unwind::{capture, init, Method};
//!
//! // Once, at tracer start-up (never inside dlsym or an ELF constructor):
//! let method = init(Method::Dwarf).expect("some method always works on Linux");
//! assert!(matches!(method, Method::Dwarf | Method::LibUnwind | Method::FramePointer));
//!
//! // On every allocation, from any thread:
//! let mut frames = [0u64; 64];
//! let n = capture(0, &mut frames);
//! assert!(n > 0, "frame 0 is the return address into this function");
//! ```
//!
//! # Methods
//!
//! | [`Method`] | how | cost |
//! |---|---|---|
//! | `Dwarf` (default) | DWARF CFI from `.eh_frame`, reduced once per return address to a compact rule in a lock-free cache | 3-6.5 ns per frame, warm |
//! | `LibUnwind` | `unw_backtrace` from `libunwind.so.8`, loaded with `RTLD_LOCAL`, after a walk with the cached rules that checks it will read only mapped memory (else a checked `unw_step` walk that stops at the first frame it cannot vouch for, such as JIT code) | ~16 ns per frame |
//! | `FramePointer` | the RBP chain | ~1 ns per frame, but stops at code built without frame pointers (most CUDA libraries) |
//! | `Gcc` | libgcc's `_Unwind_Backtrace` | ~150 ns per frame; the reference in tests |
//!
//! # How the DWARF method works
//!
//! Each frame step needs the caller's return address, stack pointer and RBP. On x86-64,
//! compiled code describes these (at every instruction) as CFA = RSP + n or RBP + n, return
//! address at CFA - 8, RBP saved at CFA - m or unchanged. The first time a return address is
//! seen, the cold path (`cfi.rs`) finds its module through `dl_iterate_phdr`, binary-searches the
//! module's `.eh_frame_hdr`, runs the FDE's CFA program up to the call site (return address - 1)
//! and packs the result into 29 bits (`rule.rs`). The hot path (`walk.rs`) probes a 4-way
//! set-associative table of atomic 64-bit words (`cache.rs`), applies the rule with one or two
//! reads, and moves on. That is one chain of dependent loads per frame (about 6.5 ns), so each
//! thread also keeps memos of its last captures of [`MEMOS`] stacks (`memo.rs`): a capture whose
//! stack words are all as a memo's capture read them copies its frames; otherwise, once the
//! walk reaches a state (IP, SP, RBP) that the most recent capture also passed through, the
//! following frames are confirmed by re-reading the stack words they were computed from,
//! independent loads that overlap (about 3 ns a frame). The result is the same as the full
//! walk's; [`set_memo`] turns it off.
//!
//! Besides the common rule shape, the walker understands gcc's stack-realignment (DRAP) frames
//! and the kernel's signal frames; anything more exotic, or code without CFI, falls back to one
//! step of the RBP chain if RBP looks like a frame pointer, and stops otherwise.
//!
//! Safety on the hot path comes from bounds, not from trusting the rules: every read is an
//! aligned word between the capture's own stack pointer and the top of the thread's stack
//! (looked up once per thread; on another stack, the top of that one), the CFA must strictly increase, and the walk stops at the first
//! violation. A stale rule (a module unloaded and another loaded at its address) can produce
//! wrong frames, never a crash. Unloads are noticed through `dlpi_subs` on the next miss, and
//! [`modules_changed`] flushes the cache on demand.
//!
//! # Why gimli
//!
//! CFI interpretation (CIE/FDE parsing, pointer encodings, augmentations, `remember_state`,
//! `DW_CFA_restore`, advance opcodes) is where hand-written unwinders get subtly wrong, and
//! gimli is the well-tested read-only parser that framehop and backtrace-rs rely on. It is used
//! with `default-features = false, features = ["read-core"]` (no allocation, no dependencies of
//! its own), only on the cold path, over byte slices bounded by the module's loaded segments, so
//! malformed CFI yields an error and a fallback rule, never an out-of-bounds read.
//!
//! # Limits
//!
//! * x86-64 Linux only for `Dwarf` and `LibUnwind`; other architectures build with
//!   `FramePointer` (aarch64, best effort) and `Gcc`.
//! * A capture on an alternate signal stack or a coroutine stack (not the thread's own stack)
//!   gets the frames on that stack from `Dwarf`/`FramePointer`, bounded by the alternate stack
//!   or by the mapping holding the stack pointer (looked up in `/proc/self/maps` on each such
//!   capture, without the memo); the walk stops where it would leave that stack.
//! * Code without CFI (JIT) is crossed only if it keeps frame pointers.

#![cfg_attr(not(target_os = "linux"), allow(unused))]
// Other architectures compile only the frame-pointer and libgcc methods; the shared pieces
// (thread bounds, memo) then have parts only the x86-64 walker uses.
#![cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]

mod thread;

#[cfg(target_arch = "x86_64")]
mod cache;
#[cfg(target_arch = "x86_64")]
mod cfi;
#[cfg(target_arch = "aarch64")]
mod frame_pointer;
mod libgcc;
#[cfg(target_arch = "x86_64")]
mod libunwind;
mod memo;
#[cfg(target_arch = "x86_64")]
mod rule;
#[cfg(target_arch = "x86_64")]
mod walk;

mod capture;
mod error;

pub use capture::{
    cache_stats, capture, capture_keyed, capture_with, capture_with_sp, init, modules_changed, set_memo,
};
pub use capture::{current_method, init_fallback_reason, CacheStats, Method};
pub use error::InitError;

/// How many recent stacks (memos) each thread keeps for replay: a capture of one of them
/// returns its key again (see [`capture_keyed`]); a caller that maps keys to its own ids needs
/// room for about as many.
pub const MEMOS: usize = memo::WAYS;
