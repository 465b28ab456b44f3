//! The shim's own heap: every Rust allocation the shim makes comes from here, never from the C
//! library's `malloc`.
//!
//! Hooks run wherever the program calls CUDA, a signal handler included, and a handler may
//! have interrupted the program inside `malloc`: a second `malloc` on that thread deadlocks or
//! trips glibc's consistency checks. So the shim keeps its own heap, with no lock anywhere: one
//! lock-free free list per power-of-two size class from 16 bytes to 64 KiB, refilled by `mmap`,
//! and a mapping of its own for anything larger. Blocks are reused, never returned to the
//! system; the shim's steady state allocates nothing, so the heap holds what its peak needed.
//!
//! A free list's head is a pointer and a 16-bit tag in one word (user-space addresses on
//! x86-64 and arm64 Linux fit in 48 bits unless a program maps above them on purpose, which
//! `mmap` without an address hint never does): the tag changes at every push and pop, so a
//! head popped and pushed back in between fails the compare-and-swap (the ABA problem).

use std::alloc::{GlobalAlloc, Layout};
use std::sync::atomic::{AtomicU64, Ordering};

const MIN_SHIFT: u32 = 4;
const MAX_SHIFT: u32 = 16;
const CLASSES: usize = (MAX_SHIFT - MIN_SHIFT + 1) as usize;
/// Bytes mapped at a time to refill a class (a multiple of every class size).
const CHUNK: usize = 256 << 10;
const PAGE: usize = 4096;
const ADDRESS_BITS: u32 = 48;
const ADDRESS_MASK: u64 = (1 << ADDRESS_BITS) - 1;

/// The shim's global allocator.
pub struct Heap {
    heads: [AtomicU64; CLASSES],
}

impl Heap {
    /// An empty heap.
    pub const fn new() -> Heap {
        Heap {
            heads: [const { AtomicU64::new(0) }; CLASSES],
        }
    }
}

/// The size class of `layout`, or `None` for one served by a mapping of its own.
fn class_of(layout: Layout) -> Option<usize> {
    if layout.align() > PAGE {
        return None;
    }
    let size = layout
        .size()
        .max(layout.align())
        .max(1 << MIN_SHIFT)
        .next_power_of_two();
    let shift = size.trailing_zeros();
    (shift <= MAX_SHIFT).then(|| (shift - MIN_SHIFT) as usize)
}

/// The next-block word stored in a free block.
///
/// # Safety
/// `block` points into a mapping this heap made (never unmapped), aligned to 8.
unsafe fn next_of(block: u64) -> &'static AtomicU64 {
    // SAFETY: per the contract; an atomic view, because a block popped by another thread may
    // be written by its new owner while a stale pop reads it (that pop's CAS then fails).
    unsafe { &*(block as *const AtomicU64) }
}

impl Heap {
    fn pop(&self, class: usize) -> Option<*mut u8> {
        let head = &self.heads[class];
        let mut h = head.load(Ordering::Acquire);
        loop {
            let block = h & ADDRESS_MASK;
            if block == 0 {
                return None;
            }
            // SAFETY: `block` came from this list: a block of a mapping never unmapped.
            let next = unsafe { next_of(block) }.load(Ordering::Relaxed) & ADDRESS_MASK;
            let tagged = next | ((h >> ADDRESS_BITS).wrapping_add(1) << ADDRESS_BITS);
            match head.compare_exchange_weak(h, tagged, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => return Some(block as *mut u8),
                Err(now) => h = now,
            }
        }
    }

    fn push(&self, class: usize, block: *mut u8) {
        let head = &self.heads[class];
        let block = block as u64;
        let mut h = head.load(Ordering::Relaxed);
        loop {
            // SAFETY: `block` is a block of this class that its owner gave back.
            unsafe { next_of(block) }.store(h & ADDRESS_MASK, Ordering::Relaxed);
            let tagged = block | ((h >> ADDRESS_BITS).wrapping_add(1) << ADDRESS_BITS);
            match head.compare_exchange_weak(h, tagged, Ordering::Release, Ordering::Relaxed) {
                Ok(_) => return,
                Err(now) => h = now,
            }
        }
    }

    /// Maps a chunk for `class`, keeps its first block and frees the others into the list.
    fn refill(&self, class: usize) -> *mut u8 {
        let size = 1usize << (class as u32 + MIN_SHIFT);
        let chunk = map(CHUNK);
        if chunk.is_null() {
            return chunk;
        }
        for i in 1..CHUNK / size {
            // SAFETY: inside the chunk just mapped.
            self.push(class, unsafe { chunk.add(i * size) });
        }
        chunk
    }
}

/// `len` bytes (rounded up to whole pages) of fresh zeroed memory, or null.
pub fn map(len: usize) -> *mut u8 {
    let Some(p) = crate::sys::map_anonymous(len) else {
        return std::ptr::null_mut();
    };
    if (p as u64 + len as u64) >> ADDRESS_BITS != 0 {
        // Above the addresses a tagged head can hold (never without a hint): refused.
        // SAFETY: the mapping of `len` bytes just made, which nothing refers to yet.
        unsafe { libc::munmap(p, len) };
        return std::ptr::null_mut();
    }
    p.cast()
}

/// The length of the mapping that serves a large `layout` (page-aligned start).
fn large_len(layout: Layout) -> usize {
    layout.size().div_ceil(PAGE).max(1) * PAGE
}

// SAFETY: blocks are handed out once until given back (lock-free lists with tagged heads),
// every block is at least as large and as aligned as its layout asks (size classes are powers
// of two at least the alignment, carved at multiples of their size from page-aligned chunks;
// alignments over a page get a mapping of their own, trimmed to an aligned start), and a
// large block is unmapped with the length it was mapped with (recomputed from the layout).
unsafe impl GlobalAlloc for Heap {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        match class_of(layout) {
            Some(class) => self.pop(class).unwrap_or_else(|| self.refill(class)),
            None if layout.align() <= PAGE => map(large_len(layout)),
            None => {
                // Over-map, then trim to an aligned start and the block's own length.
                let len = large_len(layout);
                let over = len + layout.align();
                let p = map(over);
                if p.is_null() {
                    return p;
                }
                let start = (p as usize).next_multiple_of(layout.align());
                let head = start - p as usize;
                let tail = over - head - len;
                // SAFETY: both trimmed pieces lie inside the mapping just made, page-aligned.
                unsafe {
                    if head > 0 {
                        libc::munmap(p.cast(), head);
                    }
                    if tail > 0 {
                        libc::munmap((start + len) as *mut libc::c_void, tail);
                    }
                }
                start as *mut u8
            }
        }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        match class_of(layout) {
            Some(class) => self.push(class, ptr),
            // SAFETY: a large block is a mapping of exactly this length at `ptr` (see alloc).
            None => unsafe {
                libc::munmap(ptr.cast(), large_len(layout));
            },
        }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded contract.
        let p = unsafe { self.alloc(layout) };
        if !p.is_null() && class_of(layout).is_some() {
            // Fresh mappings are zero; reused blocks are not.
            // SAFETY: the block holds at least `layout.size()` bytes.
            unsafe { std::ptr::write_bytes(p, 0, layout.size()) };
        }
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_cover_size_and_alignment() {
        let l = |size, align| Layout::from_size_align(size, align).unwrap();
        assert_eq!(class_of(l(1, 1)), Some(0));
        assert_eq!(class_of(l(16, 8)), Some(0));
        assert_eq!(class_of(l(17, 8)), Some(1));
        assert_eq!(class_of(l(8, 64)), Some(2));
        assert_eq!(class_of(l(65536, 8)), Some(12));
        assert_eq!(class_of(l(65537, 8)), None);
        assert_eq!(class_of(l(64, 8192)), None);
    }

    #[test]
    fn blocks_are_aligned_distinct_and_reused() {
        let heap = Heap::new();
        for (size, align) in [(1, 1), (24, 8), (100, 64), (5000, 4096), (70000, 8), (100, 16384)] {
            let layout = Layout::from_size_align(size, align).unwrap();
            // SAFETY: a non-zero layout; each block freed once with it. The blocks are checked
            // not NULL before they are written, and hold `size` bytes each.
            unsafe {
                let a = heap.alloc(layout);
                let b = heap.alloc(layout);
                assert!(!a.is_null() && !b.is_null() && a != b);
                assert_eq!(a as usize % align, 0, "{size}/{align}");
                std::ptr::write_bytes(a, 0xa5, size);
                std::ptr::write_bytes(b, 0x5a, size);
                heap.dealloc(a, layout);
                let z = heap.alloc_zeroed(layout);
                assert!(!z.is_null());
                assert!(std::slice::from_raw_parts(z, size).iter().all(|&x| x == 0));
                heap.dealloc(z, layout);
                heap.dealloc(b, layout);
            }
        }
    }

    #[test]
    fn threads_never_get_the_same_block() {
        static HEAP: Heap = Heap::new();
        let layout = Layout::from_size_align(48, 8).unwrap();
        let threads: Vec<_> = (0..8u64)
            .map(|t| {
                std::thread::spawn(move || {
                    for round in 0..2000u64 {
                        let mut held = Vec::with_capacity(32);
                        for i in 0..32u64 {
                            // SAFETY: a non-zero layout.
                            let p = unsafe { HEAP.alloc(layout) }.cast::<u64>();
                            assert!(!p.is_null());
                            // SAFETY: a block of 48 bytes, aligned to 8, not NULL.
                            unsafe { p.write((t << 48) | (round << 8) | i) };
                            held.push((p, (t << 48) | (round << 8) | i));
                        }
                        for (p, v) in held {
                            // SAFETY: written above; no other thread holds the block.
                            assert_eq!(unsafe { p.read() }, v, "a block handed out twice");
                            // SAFETY: freed once with its layout.
                            unsafe { HEAP.dealloc(p.cast(), layout) };
                        }
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }
}
