//! Mappings that survive their file shrinking underneath them.
//!
//! A trace is mapped, not read (see the parent module). When the file shrinks while it is
//! mapped (the shim trims its trace to the bytes it used when the process exits, and any other
//! program may truncate it), touching a page past the new end raises SIGBUS, which would kill
//! the analyzer. Each mapping is registered in a fixed table here; a SIGBUS handler replaces
//! the missing pages of a registered mapping with zero pages (the decoder then sees blocks
//! never started, or the end of a block, never an invalid reference) and keeps the lowest
//! offset that went missing, for the report to name. A SIGBUS anywhere else goes to the
//! handler that was there before (the standard library's stack overflow handler, or the default
//! action), so a real fault still kills the process as it would have.

use std::ffi::c_void;
use std::fs::File;
use std::io;
use std::sync::atomic::{fence, AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

/// Mappings registered at once at most; past this, a trace is read into memory instead.
const SLOTS: usize = 4096;

/// One registered mapping, written under a sequence lock: the handler may run on any thread at
/// any moment and must never take a lock, so it reads `start` and `end` between two equal even
/// values of `seq`.
struct Slot {
    /// Taken by a mapping (compare-and-swap from false).
    taken: AtomicBool,
    /// Odd while `start` and `end` are being changed.
    seq: AtomicUsize,
    /// First byte of the mapping; 0 when the slot is empty.
    start: AtomicUsize,
    /// One past its last byte.
    end: AtomicUsize,
    /// One more than the lowest offset read as zeros; 0 while none was.
    missing_from: AtomicU64,
}

impl Slot {
    const fn empty() -> Slot {
        Slot {
            taken: AtomicBool::new(false),
            seq: AtomicUsize::new(0),
            start: AtomicUsize::new(0),
            end: AtomicUsize::new(0),
            missing_from: AtomicU64::new(0),
        }
    }

    fn set(&self, start: usize, end: usize) {
        self.seq.fetch_add(1, Ordering::Acquire);
        self.start.store(start, Ordering::Relaxed);
        self.end.store(end, Ordering::Relaxed);
        self.seq.fetch_add(1, Ordering::Release);
    }

    /// The mapping's range, when the slot holds one and was not being changed.
    fn range(&self) -> Option<(usize, usize)> {
        let before = self.seq.load(Ordering::Acquire);
        if before % 2 == 1 {
            return None;
        }
        let range = (self.start.load(Ordering::Relaxed), self.end.load(Ordering::Relaxed));
        fence(Ordering::Acquire);
        (self.seq.load(Ordering::Relaxed) == before && range.0 != 0).then_some(range)
    }
}

static TABLE: [Slot; SLOTS] = [const { Slot::empty() }; SLOTS];
/// Slots below this index have been taken at some point: the handler looks no further.
static USED: AtomicUsize = AtomicUsize::new(0);
/// The page size, for the handler.
static PAGE: AtomicUsize = AtomicUsize::new(4096);
/// The SIGBUS action before ours (installed once; `None` when installing failed).
static PREVIOUS: OnceLock<Option<libc::sigaction>> = OnceLock::new();

/// A read-only mapping of a file whose pages past the file's end read as zeros, not SIGBUS.
pub struct GuardedMap {
    map: memmap2::Mmap,
    slot: usize,
}

impl GuardedMap {
    /// Maps `file` (not empty) read-only; `Ok(None)` when the guard is not available (the
    /// handler could not be installed, or every slot is taken), for the caller to read the file
    /// instead.
    pub fn new(file: &File) -> io::Result<Option<GuardedMap>> {
        if PREVIOUS.get_or_init(install).is_none() {
            return Ok(None);
        }
        let Some(slot) = claim() else { return Ok(None) };
        // SAFETY: memmap2's condition is that the file not change while mapped, which no one
        // can promise for a trace a live process may still write or trim. What the analyzer
        // relies on instead: the map is read-only and never written through; a file that
        // changes under it shows changed bytes, which the decoder validates like any data; one
        // that shrinks would raise SIGBUS, which the handler turns into zero pages once the
        // range is registered below, before `bytes` can hand out a reference. The mapping lives
        // as long as `self`, and `Drop` unregisters it before it is unmapped.
        let map = match unsafe { memmap2::Mmap::map(file) } {
            Ok(m) => m,
            Err(e) => {
                release(slot);
                return Err(e);
            }
        };
        let start = map.as_ptr() as usize;
        TABLE[slot].set(start, start + map.len());
        Ok(Some(GuardedMap { map, slot }))
    }

    /// The mapped bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.map
    }

    /// The lowest offset whose page was gone from the file when it was read (the file shrank
    /// while mapped): from there on, the bytes read were zeros.
    pub fn missing_from(&self) -> Option<u64> {
        TABLE[self.slot].missing_from.load(Ordering::Relaxed).checked_sub(1)
    }

    /// The mapping, to advise the kernel on.
    pub fn map(&self) -> &memmap2::Mmap {
        &self.map
    }
}

impl Drop for GuardedMap {
    fn drop(&mut self) {
        // Before the mapping goes (the field is dropped after this): nothing reads it now.
        TABLE[self.slot].set(0, 0);
        release(self.slot);
    }
}

/// Takes a free slot.
fn claim() -> Option<usize> {
    let slot = TABLE.iter().position(|s| {
        s.taken
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
    })?;
    TABLE[slot].missing_from.store(0, Ordering::Relaxed);
    USED.fetch_max(slot + 1, Ordering::Release);
    Some(slot)
}

fn release(slot: usize) {
    TABLE[slot].taken.store(false, Ordering::Release);
}

/// Installs the handler; returns the action it replaced, or `None` when it could not.
fn install() -> Option<libc::sigaction> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if let Ok(page) = usize::try_from(page) {
        if page.is_power_of_two() {
            PAGE.store(page, Ordering::Relaxed);
        }
    }
    // SAFETY: an all-zero sigaction is a valid value (SIG_DFL, empty mask, no flags); it is
    // filled in by the calls below.
    let mut previous: libc::sigaction = unsafe { std::mem::zeroed() };
    // SAFETY: `previous` is a valid place for the current action; a null new action only reads.
    if unsafe { libc::sigaction(libc::SIGBUS, std::ptr::null(), &mut previous) } != 0 {
        return None;
    }
    // SAFETY: an all-zero sigaction is a valid value; every field that matters is set below.
    let mut ours: libc::sigaction = unsafe { std::mem::zeroed() };
    let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut c_void) = on_sigbus;
    ours.sa_sigaction = handler as usize;
    ours.sa_flags = libc::SA_SIGINFO | libc::SA_ONSTACK;
    // SAFETY: `ours.sa_mask` is a valid signal set to empty.
    unsafe { libc::sigemptyset(&mut ours.sa_mask) };
    // The previous action is known before ours can run: a fault elsewhere in between would
    // find no previous action and take the default one, which is what it gets today.
    // SAFETY: `ours` is a complete action whose handler has the SA_SIGINFO signature and does
    // only async-signal-safe work (atomics, mmap, sigaction, raise); a null old action is not
    // written.
    if unsafe { libc::sigaction(libc::SIGBUS, &ours, std::ptr::null_mut()) } != 0 {
        return None;
    }
    Some(previous)
}

/// The SIGBUS handler: zero pages for a registered mapping, else the previous action. Only
/// atomics and system calls here (mmap is a plain system call on Linux, as safe in a handler
/// as the others).
extern "C" fn on_sigbus(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut c_void) {
    // SAFETY: the kernel passes a valid siginfo to a handler installed with SA_SIGINFO (and
    // `previous` hands on the same pointer). `si_addr` reads a union field: for a memory fault
    // (si_code > 0) it is the faulting byte; for a sent signal it reads other, initialised
    // fields of the union, and the value is not used (code <= 0 below).
    let (address, code) = unsafe { ((*info).si_addr() as usize, (*info).si_code) };
    // A SIGBUS sent by kill() carries no fault address to repair.
    if code > 0 && repair(address) {
        return;
    }
    previous(signal, info, context, code);
}

/// Maps zero pages from `address`'s page to the end of the registered mapping that holds it;
/// false when no mapping holds it, or the pages could not be mapped.
fn repair(address: usize) -> bool {
    let page = PAGE.load(Ordering::Relaxed);
    for slot in &TABLE[..USED.load(Ordering::Acquire).min(SLOTS)] {
        let Some((start, end)) = slot.range() else { continue };
        if !(start..end).contains(&address) {
            continue;
        }
        let from = address & !(page - 1);
        // SAFETY: [from, end) lies inside a live read-only mapping of this process: a SIGBUS
        // with si_code > 0 is raised by the kernel on the thread whose read faulted, so this
        // thread was reading a mapping that holds `address`; the slot's range was live when
        // `range` read it and also holds `address`, so it is that same mapping (live mappings
        // do not overlap), registered before it was read and unregistered before it is
        // unmapped, which cannot happen while this thread is stopped in its read. Replacing its pages with anonymous zero
        // pages changes bytes no reference was promised (the file no longer has them, and a
        // shared `&[u8]` over a mapped file never guaranteed they stay); the whole range still
        // goes with the original munmap.
        let mapped = unsafe {
            libc::mmap(
                from as *mut c_void,
                end - from,
                libc::PROT_READ,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_FIXED,
                -1,
                0,
            )
        };
        if mapped == libc::MAP_FAILED {
            return false;
        }
        let offset = (from.max(start) - start) as u64 + 1;
        let mut seen = slot.missing_from.load(Ordering::Relaxed);
        while seen == 0 || offset < seen {
            match slot
                .missing_from
                .compare_exchange_weak(seen, offset, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(now) => seen = now,
            }
        }
        return true;
    }
    false
}

/// Hands a SIGBUS that is not ours to the action installed before ours.
fn previous(signal: libc::c_int, info: *mut libc::siginfo_t, context: *mut c_void, code: libc::c_int) {
    let Some(Some(previous)) = PREVIOUS.get() else {
        return default_action(signal, code);
    };
    match previous.sa_sigaction {
        libc::SIG_DFL => default_action(signal, code),
        // Ignored when sent; a fault comes back on return and the kernel then kills anyway.
        libc::SIG_IGN => {}
        handler if previous.sa_flags & libc::SA_SIGINFO != 0 => {
            // SAFETY: neither SIG_DFL (0) nor SIG_IGN (matched above), so a handler's address,
            // which the action's SA_SIGINFO flag says has this signature; it gets the arguments
            // the kernel gave us, in the signal context it expects.
            let handler: extern "C" fn(libc::c_int, *mut libc::siginfo_t, *mut c_void) =
                unsafe { std::mem::transmute(handler) };
            handler(signal, info, context);
        }
        handler => {
            // SAFETY: neither SIG_DFL nor SIG_IGN (matched above), so a handler's address; an
            // action without SA_SIGINFO has a one-argument handler.
            let handler: extern "C" fn(libc::c_int) = unsafe { std::mem::transmute(handler) };
            handler(signal);
        }
    }
}

/// The default action (terminate with a core dump): restored, then the fault repeats on return,
/// or a sent signal is raised again and delivered when the handler returns.
fn default_action(signal: libc::c_int, code: libc::c_int) {
    // SAFETY: an all-zero sigaction is SIG_DFL with an empty mask; sigaction and raise are
    // async-signal-safe.
    unsafe {
        let default: libc::sigaction = std::mem::zeroed();
        libc::sigaction(signal, &default, std::ptr::null_mut());
        if code <= 0 {
            libc::raise(signal);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_file_cut_under_its_mapping_reads_as_zeros_past_the_cut() {
        let path = std::env::temp_dir().join(format!("gpuleak-guard-{}", std::process::id()));
        let mut f = File::create(&path).unwrap();
        let page = PAGE.load(Ordering::Relaxed).max(4096);
        let data: Vec<u8> = (0..4 * page).map(|i| (i % 251) as u8 + 1).collect();
        f.write_all(&data).unwrap();
        let file = File::open(&path).unwrap();
        let map = GuardedMap::new(&file).unwrap().expect("the guard is available");
        assert_eq!(map.missing_from(), None);
        f.set_len((page + 100) as u64).unwrap();
        let bytes = map.bytes();
        // Past the cut: zeros, not SIGBUS; before it: the file's bytes.
        assert!(bytes[2 * page..].iter().all(|&b| b == 0));
        assert_eq!(map.missing_from(), Some(2 * page as u64));
        assert_eq!(&bytes[..page + 100], &data[..page + 100]);
        assert_eq!(bytes.len(), data.len());
        drop(map);
        let _ = std::fs::remove_file(&path);
    }
}
