//! Per-thread memory of the hot path, kept out of the thread-local block.
//!
//! glibc carves every thread's static TLS out of that thread's stack, so anything a preloaded
//! library keeps in `thread_local!` shrinks the stack of every thread the program creates, most
//! of which never call CUDA (a 16 KiB `pthread_create` failed with EINVAL). The thread-local
//! block holds one pointer here; the buffers it points to (about 14 KiB: the capture
//! scratch, the recent-stack cache, the noted sites) are mapped with `mmap` on the thread's
//! first capture (never `malloc`: a hook may run in a signal handler).
//!
//! Thread exit registers nothing: no TLS destructor, no pthread key. Every block is on one
//! lock-free list and names its owner's thread id. A thread that needs a block first takes a
//! free one: its owner id is 0, its own id (the thread that had it has exited, since ids of
//! live threads are unique), or an id that no thread of this process has any more
//! (`tgkill(pid, tid, 0)` fails with `ESRCH`: the owner has exited). A block is therefore reused
//! once its thread is gone, and the list grows only to the most threads that captured at once
//! (plus blocks whose owner's id was taken by a new thread before anyone looked, kept until that
//! thread exits). A forked child gives the forking thread's block the child's id.

use std::cell::{Cell, UnsafeCell};
use std::sync::atomic::{AtomicI32, AtomicPtr, Ordering};

use crate::config::MAX_DEPTH;
use crate::python::{self, PyFrame};

/// Stack ids of recent stack hashes, direct-mapped (`stacks::Stacks::intern`; all zeros:
/// empty).
pub struct Recent(pub [Cell<(u64, u32)>; RECENT]);

/// Entries of [`Recent`].
pub const RECENT: usize = 256;

/// Stack ids whose first program frame this thread noted, direct-mapped (`ops::sites`; all
/// zeros: none).
pub struct Noted(pub [Cell<u32>; NOTED]);

/// Entries of [`Noted`].
pub const NOTED: usize = 64;

// The capture buffers: plain data here, their methods with the capture (`tracer::capture`).

/// Frames that belong to the shim itself sit on top of every captured stack.
pub const OWN_FRAMES: usize = 16;

/// Per-thread stack buffers, kept between captures so nothing is zeroed on the hot path.
pub struct StackScratch {
    /// The tracer the last stack was interned in (a forked child has a new one).
    pub owner: usize,
    pub id: u32,
    /// The unwinder's keys of recent captures with the stack ids they made (key 0: none), at
    /// slot `key % KEYED`, room for twice as many as the unwinder keeps memos: a loop
    /// allocating from many sites in turn replays each site's capture, and finds its id here.
    pub keyed: [(u64, u32); KEYED],
    pub len: usize,
    pub last: [u64; MAX_DEPTH],
    pub buf: [u64; MAX_DEPTH + OWN_FRAMES],
}

/// Recent capture keys remembered per thread (a power of two). The unwinder numbers a thread's
/// walks in turn, so the keys of its memos (the last walks, mostly) fall in distinct slots.
pub const KEYED: usize = (2 * gpuleak_unwind::MEMOS).next_power_of_two();

/// A Python thread's capture state besides [`StackScratch`] (apart from it, so that processes
/// without Python keep the native scratch and its path exactly as they were).
pub struct PyScratch {
    /// The hash of the Python frames of the thread's last stack (0: none).
    pub last: u64,
    pub frames: [PyFrame; python::MAX_FRAMES],
}

/// The capture buffers of a thread (in its [`crate::scratch`] block, not in thread-locals:
/// they would shrink every thread's stack). All-zero bytes are empty buffers.
pub struct CaptureScratch {
    pub native: StackScratch,
    pub py: PyScratch,
}

/// One thread's buffers. All-zero bytes are a valid, empty block (what `mmap` gives).
pub struct Block {
    /// The owner's thread id; 0: free.
    owner: AtomicI32,
    /// The next block of the list (set before the block is published, never changed).
    next: *mut Block,
    /// Set while the capture scratch is lent out, so that a capture from a signal handler
    /// that interrupts one uses a scratch of its own.
    busy: Cell<bool>,
    /// Stack ids of recent stack hashes (`stacks::Stacks::intern`).
    pub recent: Recent,
    /// Stack ids whose first program frame this thread noted (`ops::sites`).
    pub noted: Noted,
    capture: UnsafeCell<CaptureScratch>,
}

/// The list of every block ever mapped (never unmapped: reused).
static BLOCKS: AtomicPtr<Block> = AtomicPtr::new(std::ptr::null_mut());

/// Owner ids checked with `tgkill` per search, so that a thread's first capture stays cheap
/// in a process with many live capturing threads.
const LIVENESS_CHECKS: usize = 32;

thread_local! {
    // Const-initialised, no destructor: usable from any context, 8 bytes of static TLS.
    static MINE: Cell<*mut Block> = const { Cell::new(std::ptr::null_mut()) };
}

/// The calling thread's block, taken or mapped on first use; `None` if the thread-local is gone
/// (the thread is exiting) or no memory could be mapped.
#[inline(always)]
pub fn current() -> Option<&'static Block> {
    let p = MINE.try_with(Cell::get).ok()?;
    let p = if p.is_null() { acquire()? } else { p };
    // SAFETY: blocks are never unmapped, and this one is owned by this thread: only a thread
    // that finds its owner gone takes it over. Shared only: the fields another thread reads
    // (`owner`, `next`) are atomic or never change, the rest is in cells that only the owner
    // touches.
    Some(unsafe { &*p })
}

/// Runs `f` with a capture scratch: the thread's own, or (when it is busy under a signal
/// handler, or there is none) a one-off mapping. `None` if no memory could be mapped.
#[inline(always)]
pub fn with_capture<R>(f: impl FnOnce(&mut CaptureScratch) -> R) -> Option<R> {
    if let Some(block) = current() {
        if !block.busy.replace(true) {
            // SAFETY: the block is this thread's and `busy` was clear, so no other reference to
            // its scratch exists: a signal handler interrupting `f` finds `busy` set.
            let r = f(unsafe { &mut *block.capture.get() });
            block.busy.set(false);
            return Some(r);
        }
    }
    with_one_off(f)
}

/// [`with_capture`] with a scratch mapped for this capture alone.
#[cold]
#[inline(never)]
fn with_one_off<R>(f: impl FnOnce(&mut CaptureScratch) -> R) -> Option<R> {
    let one_off = Mapping::new(std::mem::size_of::<CaptureScratch>())?;
    // SAFETY: a fresh zero-filled private mapping of the right size and page alignment, and
    // all-zero bytes are an empty `CaptureScratch`.
    Some(f(unsafe { &mut *one_off.ptr.cast::<CaptureScratch>() }))
}

/// In a forked child: the forking thread keeps its block under its new id (the parent's
/// threads, and their ids, do not exist here, so other threads would take it over).
pub fn in_forked_child() {
    let Ok(p) = MINE.try_with(Cell::get) else { return };
    if !p.is_null() {
        // SAFETY: the block is this thread's (see `current`).
        unsafe { (*p).owner.store(gettid(), Ordering::Release) };
    }
}

#[cold]
fn acquire() -> Option<*mut Block> {
    let (pid, tid) = (getpid(), gettid());
    let mut checks = 0;
    let mut p = BLOCKS.load(Ordering::Acquire);
    while !p.is_null() {
        // SAFETY: published blocks are never unmapped.
        let block = unsafe { &*p };
        let owner = block.owner.load(Ordering::Acquire);
        let free = owner == 0
            || owner == tid
            || (checks < LIVENESS_CHECKS && {
                checks += 1;
                exited(pid, owner)
            });
        if free
            && block
                .owner
                .compare_exchange(owner, tid, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        {
            // SAFETY: the block is ours now (the exchange excluded every other thread), and its
            // previous owner, if any, is gone: it was free (0), or its owner's id is ours (a
            // thread with this id that has exited: this one has no block yet) or one that
            // `tgkill` found gone. So nothing else refers to its buffers.
            unsafe { empty(p) };
            let _ = MINE.try_with(|m| m.set(p));
            return Some(p);
        }
        p = block.next;
    }
    let mapping = Mapping::new(std::mem::size_of::<Block>())?;
    let p = mapping.ptr.cast::<Block>();
    std::mem::forget(mapping);
    // SAFETY: a fresh zero-filled mapping, page-aligned and big enough, is an empty block that
    // no other thread knows yet.
    unsafe { (*p).owner.store(tid, Ordering::Relaxed) };
    let mut head = BLOCKS.load(Ordering::Acquire);
    loop {
        // SAFETY: as above: not yet published.
        unsafe { (*p).next = head };
        match BLOCKS.compare_exchange_weak(head, p, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => break,
            Err(now) => head = now,
        }
    }
    let _ = MINE.try_with(|m| m.set(p));
    Some(p)
}

/// Makes a taken-over block empty again, keeping its list fields.
///
/// # Safety
///
/// The caller owns the block: no other reference to its buffers exists.
unsafe fn empty(p: *mut Block) {
    // SAFETY: the caller owns the block; all-zero bytes are valid for each of these fields.
    unsafe {
        (*p).busy.set(false);
        std::ptr::write_bytes(std::ptr::addr_of_mut!((*p).recent), 0, 1);
        std::ptr::write_bytes(std::ptr::addr_of_mut!((*p).noted), 0, 1);
        std::ptr::write_bytes((*p).capture.get(), 0, 1);
    }
}

/// Whether no thread of process `pid` has id `tid` any more.
fn exited(pid: i32, tid: i32) -> bool {
    !crate::sys::thread_exists(pid, tid)
}

fn gettid() -> i32 {
    crate::sys::gettid()
}

fn getpid() -> i32 {
    crate::sys::getpid() as i32
}

/// An anonymous private read-write mapping, unmapped when dropped.
struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> Option<Mapping> {
        let ptr = crate::heap::map(len);
        (!ptr.is_null()).then_some(Mapping { ptr: ptr.cast(), len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: the mapping this value made, of this length, no longer referred to.
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_s_block_is_free_once_it_exits() {
        let (block, tid) = std::thread::spawn(|| (current().map(|b| b as *const Block as usize), gettid()))
            .join()
            .unwrap();
        assert!(block.is_some());
        // Joined: its id is gone (the kernel lets the joiner go when it clears the thread's
        // id, a moment before the thread is reaped), so the next thread to look may take its
        // block.
        let gone = (0..200).any(|_| {
            let gone = exited(getpid(), tid);
            if !gone {
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            gone
        });
        assert!(gone);
        assert!(!exited(getpid(), gettid()));
        // Live threads never share one.
        let here = current().unwrap() as *const Block as usize;
        let other = std::thread::spawn(move || current().unwrap() as *const Block as usize);
        assert_ne!(other.join().unwrap(), here);
    }

    #[test]
    fn a_busy_scratch_is_not_lent_twice() {
        let outer = with_capture(|s| {
            let a = s as *mut CaptureScratch as usize;
            let b = with_capture(|t| t as *mut CaptureScratch as usize).unwrap();
            assert_ne!(a, b, "a nested capture gets its own scratch");
            a
        });
        let again = with_capture(|s| s as *mut CaptureScratch as usize);
        assert_eq!(outer, again);
    }
}
