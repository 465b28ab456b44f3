//! Per-thread state: the stack bounds that make every read of the walkers provably safe, and the
//! cache counters behind [`crate::cache_stats`].
//!
//! The state is a `const`-initialised `thread_local!` of `Cell`s, which registers no destructor,
//! so capturing on a thread that is exiting (or inside a TLS destructor) still works.
//!
//! The memos (`memo.rs`, 152 KiB of address space, of which a thread touches the pages of the
//! memos its captures fill: about 8 KiB for a thread allocating from one place, about 70 KiB
//! from eight, all of it from 32 places or more) are mapped on a thread's first capture, not kept in
//! the thread-local block: that block is copied into every thread the program creates, and most
//! threads of a traced program never call CUDA. A second thread-local with a destructor unmaps
//! them when the thread exits; captures after that (from later TLS destructors) walk without.

use std::cell::Cell;
use std::sync::atomic::{compiler_fence, Ordering};

use crate::memo::Memos;

/// The part of the calling thread's stack that is mapped and belongs to live frames: from the
/// stack pointer of the capture up to the top of the stack.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Bounds {
    low: u64,
    high: u64,
}

impl Bounds {
    /// Reads the 8-byte word at `address` if it lies wholly inside the bounds and is aligned;
    /// `None` otherwise, which makes the walker stop.
    #[inline(always)]
    pub(crate) fn read(&self, address: u64) -> Option<u64> {
        if address & 7 != 0 || address < self.low || address > self.high - 8 {
            return None;
        }
        // SAFETY: the word is aligned and lies inside [low, high) (checked above). `with_bounds`,
        // the only maker of bounds outside tests, sets `low` to the stack pointer of the running
        // capture and `high` to the top of the stack that pointer is on: the thread's own (the
        // top pthread_getattr_np reported), which stays mapped while the thread runs; or another
        // stack (`other_stack_top`): the alternate signal stack the thread is on, which stays
        // mapped while it runs there, or else the readable mapping holding the pointer, of which
        // only the part that is the running stack is sure to stay mapped (the walker's checks
        // normally end the walk at that stack's outermost frame, before the rest). The bounds
        // live only as long as the capture, on its thread. The read is volatile because the
        // memory belongs to other frames and may be anything; a word is only compared or
        // checked, never trusted.
        Some(unsafe { (address as *const u64).read_volatile() })
    }

    /// Reads the word at `address` without checking.
    ///
    /// # Safety
    ///
    /// `address` must be 8-aligned with `low() <= address` and `address + 8 <= high()`.
    #[inline(always)]
    pub(crate) unsafe fn read_unchecked(&self, address: u64) -> u64 {
        debug_assert!(address & 7 == 0 && address >= self.low && address <= self.high - 8);
        // SAFETY: the caller guarantees the word is aligned and lies inside [low, high), memory
        // that stays mapped while the capture runs (see `read`).
        unsafe { (address as *const u64).read_volatile() }
    }

    /// Reads the word at `address`, an address a capture of this thread already read through
    /// [`read`](Self::read) (so aligned and below the top, which never changes for a thread), if
    /// it is not below the running capture's stack pointer; `None` otherwise.
    ///
    /// # Safety
    ///
    /// `address` must be 8-aligned with `address + 8 <= high()`.
    #[inline(always)]
    pub(crate) unsafe fn read_again(&self, address: u64) -> Option<u64> {
        debug_assert!(address & 7 == 0 && address <= self.high - 8);
        if address < self.low {
            return None;
        }
        // SAFETY: the caller guarantees alignment and the upper bound; the lower one is checked.
        Some(unsafe { self.read_unchecked(address) })
    }

    /// Bounds over any memory, for the tests of code that reads through them.
    #[cfg(test)]
    pub(crate) fn for_test(low: u64, high: u64) -> Bounds {
        Bounds { low, high }
    }

    /// The lowest readable address: the stack pointer of the running capture.
    #[inline(always)]
    pub(crate) fn low(&self) -> u64 {
        self.low
    }

    /// The top of the stack (exclusive).
    #[inline(always)]
    pub(crate) fn high(&self) -> u64 {
        self.high
    }
}

/// Per-thread counters, added to once per capture.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Counters {
    /// Frames whose rule came from the cache.
    pub(crate) hits: u64,
    /// Frames whose rule had to be computed from CFI.
    pub(crate) misses: u64,
    /// Frames confirmed from the memo of the previous capture, without a rule.
    pub(crate) memo: u64,
}

struct ThreadState {
    /// Lowest address of the stack mapping; 0 until looked up.
    bottom: Cell<u64>,
    /// One past the highest address; 0 until looked up, 1 if the lookup failed.
    top: Cell<u64>,
    hits: Cell<u64>,
    misses: Cell<u64>,
    memo_frames: Cell<u64>,
    /// Set while a capture uses `memo`, so that a capture from a signal handler interrupting it
    /// walks without one.
    memo_busy: Cell<bool>,
    /// The thread's memos: null until its first capture, [`GONE`] once unmapped (or when they
    /// could not be mapped).
    memo: Cell<*mut Memos>,
}

/// `ThreadState::memo` of a thread whose memos are unmapped or could not be mapped.
const GONE: *mut Memos = std::ptr::dangling_mut();

thread_local! {
    static STATE: ThreadState = const {
        ThreadState {
            bottom: Cell::new(0),
            top: Cell::new(0),
            hits: Cell::new(0),
            misses: Cell::new(0),
            memo_frames: Cell::new(0),
            memo_busy: Cell::new(false),
            memo: Cell::new(std::ptr::null_mut()),
        }
    };
    /// Unmaps the thread's memos when it exits (its first use registers the destructor).
    static MEMO_OWNER: MemoOwner = const { MemoOwner };
}

struct MemoOwner;

impl Drop for MemoOwner {
    fn drop(&mut self) {
        let _ = STATE.try_with(|state| {
            // Destructors run on this thread between captures, so the flag is clear; were a
            // capture using the memos, they would stay mapped.
            if state.memo_busy.get() {
                return;
            }
            let p = state.memo.replace(GONE);
            if !p.is_null() && p != GONE {
                // SAFETY: `p` is the mapping `memos` made for this thread, of this size, unmapped
                // only here (once: `memo` now says GONE). No reference to it is left: references
                // are made only while `memo_busy` is set, which was clear, and a capture from a
                // signal handler interrupting this destructor now finds GONE.
                unsafe { libc::munmap(p.cast(), std::mem::size_of::<Memos>()) };
            }
        });
    }
}

/// The calling thread's memos, mapped on first use; `None` when they cannot be had (mapping
/// failed, or the thread is exiting). The first use registers the destructor, which allocates
/// in glibc: a thread whose first capture is made in a signal handler does that there.
fn memos(state: &ThreadState) -> Option<*mut Memos> {
    let p = state.memo.get();
    if p == GONE {
        return None;
    }
    if !p.is_null() {
        return Some(p);
    }
    // Register the destructor first: if this thread's destructors already ran, map nothing.
    if MEMO_OWNER.try_with(|_| ()).is_err() {
        state.memo.set(GONE);
        return None;
    }
    let size = std::mem::size_of::<Memos>();
    // SAFETY: an anonymous private mapping; the result is checked before use.
    let raw = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            size,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
            -1,
            0,
        )
    };
    if raw == libc::MAP_FAILED {
        state.memo.set(GONE);
        return None;
    }
    let p = raw.cast::<Memos>();
    // SAFETY: `init_in_place`'s contract: the fresh mapping is `size` bytes, writable,
    // zero-filled and page-aligned (so aligned for Memos), and nothing else knows of it yet.
    unsafe { Memos::init_in_place(p) };
    state.memo.set(p);
    Some(p)
}

/// Runs `walk` with the bounds of the calling thread's stack above `sp` and, if it `wants_memo`
/// and no capture of this thread is already using it, the thread's memo (mapped on first use
/// only then); then adds the walk's counters to the thread's totals.
///
/// When `sp` is not on the thread's own stack (an alternate signal stack, a coroutine's stack),
/// the bounds run from `sp` to the end of that other stack: the alternate signal stack the
/// thread is on (`sigaltstack`), else the readable mapping that holds `sp` (`/proc/self/maps`,
/// read with plain system calls, on every such capture); such walks use no memo (the bounds of
/// an address can change between captures). Returns `R::default()` (no frames) without walking
/// when no bounds are found.
#[inline(always)]
pub(crate) fn with_bounds<R: Default>(
    sp: u64,
    wants_memo: bool,
    walk: impl FnOnce(Bounds, &mut Counters, Option<&mut Memos>) -> R,
) -> R {
    STATE.with(|state| {
        if state.top.get() == 0 {
            let (bottom, top) = stack_extent().unwrap_or((0, 1));
            state.bottom.set(bottom);
            state.top.set(top);
        }
        let (bottom, top) = (state.bottom.get(), state.top.get());
        let mut counters = Counters::default();
        let on_own_stack = bottom <= sp && sp < top.saturating_sub(8);
        let bounds = if on_own_stack {
            Bounds { low: sp, high: top }
        } else {
            match other_stack_top(sp) {
                Some(high) => Bounds { low: sp, high },
                None => return R::default(),
            }
        };
        let n = if !on_own_stack || !wants_memo || state.memo_busy.replace(true) {
            walk(bounds, &mut counters, None)
        } else {
            // Keep the compiler from moving the memo accesses above the flag.
            compiler_fence(Ordering::SeqCst);
            // SAFETY: the memos belong to this thread (mapped for it by `memos`, unmapped only
            // by its own destructor, which does nothing while the flag is set) and `memo_busy`
            // was false, so no other reference to them exists: a signal handler that interrupts
            // this capture finds the flag set and walks without them, and one that ran before
            // the flag was set has returned, with its reference gone.
            let memo = memos(state).map(|p| unsafe { &mut *p });
            let n = walk(bounds, &mut counters, memo);
            compiler_fence(Ordering::SeqCst);
            state.memo_busy.set(false);
            n
        };
        state.hits.set(state.hits.get().wrapping_add(counters.hits));
        state.misses.set(state.misses.get().wrapping_add(counters.misses));
        state
            .memo_frames
            .set(state.memo_frames.get().wrapping_add(counters.memo));
        n
    })
}

/// The end of the stack that holds `sp` when it is not the thread's own (8-aligned, above `sp`):
/// the alternate signal stack the thread runs on, or else the readable mapping holding `sp`.
/// Both stay mapped while this thread runs on them (freeing the stack one runs on is the
/// program's own crash); the mapping may extend past the stack, which the walker's checks
/// (a CFA that must increase, return addresses that must be plausible) end in time.
fn other_stack_top(sp: u64) -> Option<u64> {
    let mut current = std::mem::MaybeUninit::<libc::stack_t>::zeroed();
    // SAFETY: with a null new stack, sigaltstack only writes the current settings into ours.
    let on_alternate = unsafe { libc::sigaltstack(std::ptr::null(), current.as_mut_ptr()) } == 0;
    // SAFETY: zero-initialised, and written by sigaltstack when it succeeded.
    let current = unsafe { current.assume_init() };
    let low = current.ss_sp as u64;
    let top =
        if on_alternate && current.ss_flags & libc::SS_ONSTACK != 0 && low <= sp && sp - low < current.ss_size as u64 {
            low + current.ss_size as u64
        } else {
            readable_mapping_end(sp)?
        } & !7;
    (top >= sp.checked_add(8)?).then_some(top)
}

/// The end of the readable mapping that holds `address`, from `/proc/self/maps`, read with
/// `open`/`read`/`close` (std's `File`, which makes a short path a C string on the stack) into a
/// small buffer: no allocation, since a capture may run in a signal handler.
fn readable_mapping_end(address: u64) -> Option<u64> {
    let mut maps = std::fs::File::open("/proc/self/maps").ok()?;
    let mut parser = MapsLine::default();
    let mut buf = [0u8; 256];
    let mut found = None;
    while found.is_none() {
        let Ok(n @ 1..) = std::io::Read::read(&mut maps, &mut buf) else {
            break;
        };
        found = buf[..n].iter().find_map(|&c| parser.push(c, address));
    }
    found
}

/// A streaming parser of `/proc/self/maps` lines ("start-end perms ..."), one byte at a time.
#[derive(Default)]
struct MapsLine {
    start: u64,
    end: u64,
    /// 0: in the start address, 1: in the end address, 2: at the permissions, 3: past them.
    field: u8,
    readable: bool,
}

impl MapsLine {
    /// Takes the next byte; at the end of a line of a readable mapping holding `address`,
    /// returns the mapping's end.
    fn push(&mut self, c: u8, address: u64) -> Option<u64> {
        let digit = |c: u8| u64::from((c as char).to_digit(16).unwrap_or(0));
        match (self.field, c) {
            (_, b'\n') => {
                let hit = self.field == 3 && self.readable && self.start <= address && address < self.end;
                let end = self.end;
                *self = MapsLine::default();
                return hit.then_some(end);
            }
            (0, b'-') => self.field = 1,
            (0, c) => self.start = self.start << 4 | digit(c),
            (1, b' ') => self.field = 2,
            (1, c) => self.end = self.end << 4 | digit(c),
            (2, c) => {
                self.readable = c == b'r';
                self.field = 3;
            }
            _ => {}
        }
        None
    }
}

/// The calling thread's counters so far.
pub(crate) fn counters() -> Counters {
    STATE.with(|state| Counters {
        hits: state.hits.get(),
        misses: state.misses.get(),
        memo: state.memo_frames.get(),
    })
}

/// The calling thread's stack mapping as (bottom, top). pthread_getattr_np allocates (and for
/// the main thread reads /proc/self/maps), which is why this runs once per thread, on its first
/// capture, and never again.
fn stack_extent() -> Option<(u64, u64)> {
    let mut attr = std::mem::MaybeUninit::<libc::pthread_attr_t>::uninit();
    // SAFETY: pthread_getattr_np initialises `attr` when it returns 0, and only then is it used
    // and destroyed; pthread_self() is always a valid thread handle for the calling thread.
    unsafe {
        if libc::pthread_getattr_np(libc::pthread_self(), attr.as_mut_ptr()) != 0 {
            return None;
        }
        let mut address = std::ptr::null_mut();
        let mut size = 0usize;
        let rc = libc::pthread_attr_getstack(attr.as_ptr(), &mut address, &mut size);
        libc::pthread_attr_destroy(attr.as_mut_ptr());
        if rc != 0 || size < 4096 {
            return None;
        }
        let bottom = address as u64;
        Some((bottom, bottom.checked_add(size as u64)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_outside_the_bounds_are_refused() {
        let words = [1u64, 2, 3, 4];
        let low = words.as_ptr() as u64;
        let bounds = Bounds {
            low: low + 8,
            high: low + 24,
        };
        assert_eq!(bounds.read(low), None, "below");
        assert_eq!(bounds.read(low + 8), Some(2));
        assert_eq!(bounds.read(low + 16), Some(3));
        assert_eq!(bounds.read(low + 24), None, "at the top");
        assert_eq!(bounds.read(low + 12), None, "misaligned");
        assert_eq!(bounds.read(u64::MAX - 7), None, "wrapping");
    }

    #[test]
    fn maps_lines_give_the_end_of_the_readable_mapping_holding_an_address() {
        let maps = "5555-6000 r-xp 00000000 08:01 12 /bin/x\n7000-8000 ---p 0 0:0 0\n8000-9000 rw-p 0 0:0 0 [stack]\n";
        let end = |address| {
            let mut line = MapsLine::default();
            maps.bytes().find_map(|c| line.push(c, address))
        };
        assert_eq!(end(0x5555), Some(0x6000));
        assert_eq!(end(0x5fff), Some(0x6000));
        assert_eq!(end(0x6000), None, "between mappings");
        assert_eq!(end(0x7800), None, "not readable");
        assert_eq!(end(0x8ff8), Some(0x9000));
    }

    #[test]
    fn another_stack_is_bounded_by_its_mapping() {
        let other = vec![0u64; 4096];
        let sp = other.as_ptr() as u64 + 8 * 100;
        let top = other_stack_top(sp).expect("the heap is mapped");
        assert!(top >= other.as_ptr() as u64 + 8 * 4096, "{top:#x}");
        assert_eq!(readable_mapping_end(8), None, "page zero is never mapped");
    }

    #[test]
    fn the_current_stack_pointer_is_inside_the_thread_stack() {
        let local = 0u8;
        let sp = &local as *const u8 as u64;
        let (bottom, top) = stack_extent().expect("pthread_getattr_np works on this thread");
        assert!(bottom < sp && sp < top, "{bottom:#x} < {sp:#x} < {top:#x}");
    }
}
