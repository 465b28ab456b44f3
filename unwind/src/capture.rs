//! The public entry points: choosing a method once, then capturing with it.

use std::fmt;
use std::hint::black_box;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Mutex;

use crate::InitError;

#[cfg(target_arch = "x86_64")]
use crate::{cfi, libunwind, walk};

/// Which method captures stacks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// The caching DWARF CFI unwinder of this crate (x86-64).
    Dwarf,
    /// `unw_backtrace` from `libunwind.so.8`, loaded with `dlopen(RTLD_LOCAL)` (x86-64).
    LibUnwind,
    /// The frame-pointer chain: fast, but wrong through code built without frame pointers.
    FramePointer,
    /// libgcc's `_Unwind_Backtrace`: always correct, very slow; the reference for tests.
    Gcc,
}

impl Method {
    /// The method's name as users write it (`dwarf`, `libunwind`, `frame-pointer`, `gcc`).
    pub fn name(self) -> &'static str {
        match self {
            Method::Dwarf => "dwarf",
            Method::LibUnwind => "libunwind",
            Method::FramePointer => "frame-pointer",
            Method::Gcc => "gcc",
        }
    }

    fn code(self) -> u8 {
        self as u8
    }

    fn from_code(code: u8) -> Method {
        match code {
            0 => Method::Dwarf,
            1 => Method::LibUnwind,
            2 => Method::FramePointer,
            _ => Method::Gcc,
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// The method used before [`init`]: one that needs no preparation.
const DEFAULT: Method = if cfg!(target_arch = "x86_64") {
    Method::Dwarf
} else if cfg!(target_arch = "aarch64") {
    Method::FramePointer
} else {
    Method::Gcc
};

static METHOD: AtomicU8 = AtomicU8::new(DEFAULT as u8);
static FALLBACK_REASON: Mutex<Option<InitError>> = Mutex::new(None);

/// Prepare the method once; called at tracer start-up (never inside dlsym or an ELF
/// constructor: it may `dlopen` libunwind and allocate). Returns the method actually in use,
/// falling back in the order Dwarf → LibUnwind → FramePointer when one cannot initialise;
/// [`init_fallback_reason`] then says why. `Err` only if no method in that chain works, which
/// cannot happen on x86-64 or aarch64 Linux (the frame-pointer walk needs no preparation).
///
/// `Dwarf` and `LibUnwind` are checked against libgcc on the stack of this call; a method that
/// disagrees is not used.
pub fn init(method: Method) -> Result<Method, InitError> {
    let chain: &[Method] = match method {
        Method::Dwarf => &[Method::Dwarf, Method::LibUnwind, Method::FramePointer],
        Method::LibUnwind => &[Method::LibUnwind, Method::FramePointer],
        Method::FramePointer => &[Method::FramePointer],
        Method::Gcc => &[Method::Gcc],
    };
    let mut reason = None;
    for &candidate in chain {
        match prepare(candidate) {
            Ok(()) => {
                METHOD.store(candidate.code(), Ordering::Relaxed);
                *FALLBACK_REASON.lock().unwrap_or_else(|e| e.into_inner()) = reason;
                return Ok(candidate);
            }
            Err(error) => {
                reason.get_or_insert(error);
            }
        }
    }
    let error = reason.unwrap_or(InitError::Unsupported { method });
    *FALLBACK_REASON.lock().unwrap_or_else(|e| e.into_inner()) = Some(error.clone());
    Err(error)
}

/// Why the last [`init`] did not get the method it asked for; `None` if it did.
pub fn init_fallback_reason() -> Option<InitError> {
    FALLBACK_REASON.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// The method [`capture`] uses now.
pub fn current_method() -> Method {
    Method::from_code(METHOD.load(Ordering::Relaxed))
}

/// Write the return addresses of the calling thread's stack into `out`, innermost first,
/// starting with the return address into the caller of `capture`, skipping `skip` further
/// frames; returns the count written (`<= out.len()`).
///
/// Never allocates (except once per thread, on its first capture, to look up the stack bounds,
/// and on a cold `Dwarf` miss: neither allocates in practice, but glibc may), never blocks on a
/// lock held by another capture, never panics, and reads only the calling thread's live stack.
#[inline(never)]
pub fn capture(skip: usize, out: &mut [u64]) -> usize {
    let method = Method::from_code(METHOD.load(Ordering::Relaxed));
    // black_box keeps the call out of tail position, so this frame stays on the stack while
    // the walkers read it and `skip` counts the same frames whatever the optimiser does.
    black_box(capture_here(method, skip, out)).0
}

/// [`capture`], also returning a key: `(count, key)`. Two captures of one thread that return the
/// same nonzero key wrote the same frames (the later one copied them from the earlier: it started
/// from the same registers, asked for the same `skip` and output length, and found every stack
/// word the earlier one's frames were computed from unchanged). A caller that keeps what it made
/// of the frames of key K can reuse it when K comes back, without looking at the frames. 0 means
/// no key (a method other than `Dwarf`, or a capture nested in another one by a signal handler).
#[inline(never)]
pub fn capture_keyed(skip: usize, out: &mut [u64]) -> (usize, u64) {
    let method = Method::from_code(METHOD.load(Ordering::Relaxed));
    black_box(capture_here(method, skip, out))
}

/// [`capture`] with an explicit method, whatever [`init`] chose (for tests and benchmarks;
/// `LibUnwind` returns 0 unless [`init`] loaded it at some point).
#[inline(never)]
pub fn capture_with(method: Method, skip: usize, out: &mut [u64]) -> usize {
    black_box(capture_here(method, skip, out)).0
}

/// [`capture`] that also says where each frame's stack begins: `sps[i]` is frame `i`'s stack
/// pointer at its call (the CFA of the function it called), so the local variables of frame
/// `i` lie in `[sps[i], sps[i + 1])`. For cold paths that must tell which frame holds a given
/// stack address: it walks with libgcc every time (about 150 ns a frame), whatever [`init`]
/// chose. Writes at most `min(ips.len(), sps.len())` frames and returns how many.
#[inline(never)]
pub fn capture_with_sp(skip: usize, ips: &mut [u64], sps: &mut [u64]) -> usize {
    // Any address inside this frame separates our callees' frames from our own.
    let marker = 0u8;
    let sp = black_box(&marker) as *const u8 as u64;
    black_box(crate::libgcc::capture(sp, skip, ips, Some(sps)))
}

#[inline(always)]
fn capture_here(method: Method, skip: usize, out: &mut [u64]) -> (usize, u64) {
    #[cfg(target_arch = "x86_64")]
    {
        let regs = walk::registers();
        match method {
            Method::Dwarf => walk::walk(regs, walk::Mode::Cfi, skip, out),
            Method::FramePointer => walk::walk(regs, walk::Mode::FramePointer, skip, out),
            Method::LibUnwind => (libunwind::capture(skip, out), 0),
            Method::Gcc => (crate::libgcc::capture(regs.sp, skip, out, None), 0),
        }
    }
    #[cfg(target_arch = "aarch64")]
    {
        let (sp, fp) = crate::frame_pointer::registers();
        let n = match method {
            Method::FramePointer => crate::frame_pointer::walk(sp, fp, skip, out),
            _ => crate::libgcc::capture(sp, skip, out, None),
        };
        (n, 0)
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let _ = method;
        // Any address inside this frame separates our callees' frames from our own.
        let marker = 0u8;
        let sp = black_box(&marker) as *const u8 as u64;
        (crate::libgcc::capture(sp, skip, out, None), 0)
    }
}

/// Tell the unwinder that modules may have been loaded or unloaded (cache invalidation hint):
/// forgets every cached rule. Unloads are also noticed by themselves on the next cache miss.
pub fn modules_changed() {
    #[cfg(target_arch = "x86_64")]
    cfi::flush();
}

/// Turns the `Dwarf` method's per-thread memo on or off (on by default). The memo confirms
/// the frames a capture shares with the thread's previous capture by re-reading the stack words
/// they were computed from, instead of unwinding them again: same results, fewer dependent loads.
/// Off measures the plain cached walk, or rules the memo out when chasing a problem.
pub fn set_memo(enabled: bool) {
    #[cfg(target_arch = "x86_64")]
    walk::MEMO_ENABLED.store(enabled, Ordering::Relaxed);
    #[cfg(not(target_arch = "x86_64"))]
    let _ = enabled;
}

/// Counters of the `Dwarf` rule cache.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Frames of the calling thread whose rule came from the cache.
    pub hits: u64,
    /// Frames of the calling thread whose rule was computed from CFI (cold path).
    pub misses: u64,
    /// Frames of the calling thread confirmed unchanged since its previous capture, which
    /// needed no rule at all.
    pub memo: u64,
    /// Times the cache was flushed, process-wide.
    pub flushes: u64,
}

/// The cache counters: hits, misses and memo frames of the calling thread, flushes of the
/// process.
pub fn cache_stats() -> CacheStats {
    let crate::thread::Counters { hits, misses, memo } = crate::thread::counters();
    #[cfg(target_arch = "x86_64")]
    let flushes = cfi::FLUSHES.load(Ordering::Relaxed);
    #[cfg(not(target_arch = "x86_64"))]
    let flushes = 0;
    CacheStats {
        hits,
        misses,
        memo,
        flushes,
    }
}

/// Makes `method` ready, checking it against libgcc where that is meaningful.
fn prepare(method: Method) -> Result<(), InitError> {
    match method {
        Method::Gcc => Ok(()),
        Method::FramePointer if cfg!(any(target_arch = "x86_64", target_arch = "aarch64")) => Ok(()),
        #[cfg(target_arch = "x86_64")]
        Method::Dwarf => self_test(Method::Dwarf),
        #[cfg(target_arch = "x86_64")]
        Method::LibUnwind => {
            libunwind::load()?;
            calibrate_libunwind()
        }
        _ => Err(InitError::Unsupported { method }),
    }
}

#[cfg(target_arch = "x86_64")]
const PROBE_FRAMES: usize = 32;

/// Captures with `method` and with libgcc from one frame, both skipping it, so that both see
/// the same stack from frame 0 on: (count, libgcc's count).
#[cfg(target_arch = "x86_64")]
#[inline(never)]
fn probe(method: Method, got: &mut [u64; PROBE_FRAMES], want: &mut [u64; PROBE_FRAMES]) -> (usize, usize) {
    let n = capture_with(method, 1, got);
    let m = capture_with(Method::Gcc, 1, want);
    black_box((n, m))
}

/// The method's frames must start with libgcc's (the shorter list decides how many).
#[cfg(target_arch = "x86_64")]
fn self_test(method: Method) -> Result<(), InitError> {
    let (mut got, mut want) = ([0u64; PROBE_FRAMES], [0u64; PROBE_FRAMES]);
    let (n, m) = probe(method, &mut got, &mut want);
    let common = n.min(m);
    if n >= m.min(2) && got[..common] == want[..common] {
        Ok(())
    } else {
        Err(InitError::SelfTestFailed {
            method,
            detail: format!("got {:x?}, libgcc {:x?}", &got[..n], &want[..m]),
        })
    }
}

/// `unw_backtrace` reports this crate's own frames first; how many depends on inlining, so it
/// is measured once: the position of libgcc's frame 0 in libunwind's raw list.
#[cfg(target_arch = "x86_64")]
fn calibrate_libunwind() -> Result<(), InitError> {
    libunwind::set_lead(0);
    let (mut raw, mut want) = ([0u64; PROBE_FRAMES], [0u64; PROBE_FRAMES]);
    // With no lead, libunwind's list starts with our frames; libgcc's frame 0 is then found
    // `lead` entries in (both skip the same one frame of `probe`).
    let (n, m) = probe(Method::LibUnwind, &mut raw, &mut want);
    let prefix = m.min(4);
    let lead = (0..8).find(|&lead| prefix > 0 && lead + prefix <= n && raw[lead..lead + prefix] == want[..prefix]);
    match lead {
        Some(lead) => {
            libunwind::set_lead(lead);
            Ok(())
        }
        None => Err(InitError::SelfTestFailed {
            method: Method::LibUnwind,
            detail: format!("got {:x?}, libgcc {:x?}", &raw[..n], &want[..m]),
        }),
    }
}
