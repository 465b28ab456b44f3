//! One device's address space: live allocations by address, and the holes between them in the
//! used span (from the lowest live address to the highest live end).
//!
//! The trace carries the sizes programs asked for, not what the driver granted, so the gap
//! between two neighbours also holds the driver's rounding; gaps under [`MIN_HOLE`] are taken
//! for that padding and are neither holes nor free memory.

use gpuleak_format::StackId;

use crate::aside::AsideMap;

/// Gaps smaller than this are alignment padding, not holes (drivers round small allocations
/// up to 256 or 512 bytes).
pub const MIN_HOLE: u64 = 512;

/// A live allocation in the space.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Range {
    /// One past the last byte asked for.
    pub end: u64,
    /// Allocation stack.
    pub stack: StackId,
    /// Sequence number of the allocation.
    pub seq: u64,
}

/// A live allocation with free memory on both sides: freeing it would join two holes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pin {
    /// Address.
    pub ptr: u64,
    /// Bytes.
    pub size: u64,
    /// Allocation stack.
    pub stack: StackId,
    /// Sequence number of the allocation.
    pub seq: u64,
    /// The hole its freeing would make: both holes and itself.
    pub joined: u64,
}

/// What the holes of the used span are at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Holes {
    /// Free bytes in the used span (holes of at least [`MIN_HOLE`]).
    pub free: u64,
    /// The largest hole.
    pub largest: u64,
    /// Number of holes.
    pub count: u64,
}

impl Holes {
    /// 1 - largest hole / free in the span (0 with no free memory).
    pub fn fragmentation(&self) -> f64 {
        if self.free == 0 {
            0.0
        } else {
            1.0 - self.largest as f64 / self.free as f64
        }
    }

    /// Free bytes that no allocation bigger than the largest hole can use.
    pub fn stranded(&self) -> u64 {
        self.free - self.largest
    }
}

/// Live ranges by address. Keeping only them makes each allocation and free one tree
/// operation, and none for churn at one address (the newest range is kept aside); the holes are found by walking the ranges in address order when they are asked
/// for ([`AddressSpace::holes`]), which the memory pass does once per timeline bucket and at
/// each failed allocation.
#[derive(Debug, Default)]
pub struct AddressSpace {
    live: AsideMap<Range>,
}

impl AddressSpace {
    /// Adds a live allocation (one at the same address is replaced).
    #[inline]
    pub fn insert(&mut self, ptr: u64, size: u64, stack: StackId, seq: u64) {
        // Written where it is kept, field by field (see `AsideMap::insert_in_place`).
        let r = self.live.insert_in_place(ptr, || Range {
            end: 0,
            stack: StackId(0),
            seq: 0,
        });
        r.end = ptr.saturating_add(size.max(1));
        r.stack = stack;
        r.seq = seq;
    }

    /// Removes a live allocation (nothing if it is not there).
    #[inline]
    pub fn remove(&mut self, ptr: u64) {
        self.live.delete(ptr);
    }

    /// Whether nothing is live.
    pub fn is_empty(&self) -> bool {
        self.live.len() == 0
    }

    /// The holes between live allocations now. Overlapping ranges (a free the trace missed)
    /// count as one.
    pub fn holes(&self) -> Holes {
        let mut h = Holes::default();
        let mut end: Option<u64> = None;
        for (ptr, r) in self.live.iter() {
            if let Some(e) = end {
                let gap = ptr.saturating_sub(e);
                if gap >= MIN_HOLE {
                    h.free += gap;
                    h.largest = h.largest.max(gap);
                    h.count += 1;
                }
            }
            end = Some(end.map_or(r.end, |e| e.max(r.end)));
        }
        h
    }

    /// The used span: lowest live address and highest live end.
    pub fn span(&self) -> Option<(u64, u64)> {
        let lo = self.live.iter().next()?.0;
        let hi = self.live.iter().map(|(_, r)| r.end).max()?;
        Some((lo, hi))
    }

    /// Every live allocation with a hole on each side, largest joined hole first.
    pub fn pins(&self) -> Vec<Pin> {
        let mut pins = Vec::new();
        let mut prev_end: Option<u64> = None;
        let mut it = self.live.iter().peekable();
        while let Some((ptr, r)) = it.next() {
            let left = prev_end.map_or(0, |e| ptr.saturating_sub(e));
            let right = it.peek().map_or(0, |(n, _)| n.saturating_sub(r.end));
            if left >= MIN_HOLE && right >= MIN_HOLE {
                pins.push(Pin {
                    ptr,
                    size: r.end - ptr,
                    stack: r.stack,
                    seq: r.seq,
                    joined: left + (r.end - ptr) + right,
                });
            }
            prev_end = Some(prev_end.map_or(r.end, |e| e.max(r.end)));
        }
        pins.sort_by(|a, b| b.joined.cmp(&a.joined).then(a.seq.cmp(&b.seq)));
        pins
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn filled(n: u64) -> AddressSpace {
        let mut s = AddressSpace::default();
        for i in 0..n {
            s.insert(i * MIB, MIB, StackId(1 + (i % 2) as u32), i);
        }
        s
    }

    #[test]
    fn freeing_every_other_block_leaves_holes_pinned_by_the_others() {
        let mut s = filled(8);
        assert_eq!(s.holes(), Holes::default());
        for i in (1..8).step_by(2) {
            s.remove(i * MIB);
        }
        // Blocks 0, 2, 4, 6 live: holes at 1, 3, 5 (7 is past the span's end).
        let h = s.holes();
        assert_eq!((h.free, h.largest, h.count), (3 * MIB, MIB, 3));
        assert!((h.fragmentation() - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(h.stranded(), 2 * MIB);
        assert_eq!(s.span(), Some((0, 7 * MIB)));
        let pins = s.pins();
        assert_eq!(pins.len(), 2, "{pins:?}");
        assert!(pins.iter().all(|p| p.stack == StackId(1) && p.joined == 3 * MIB));
    }

    #[test]
    fn holes_join_when_their_neighbour_goes_and_the_span_shrinks_at_its_ends() {
        let mut s = filled(4);
        s.remove(MIB);
        s.remove(2 * MIB);
        let h = s.holes();
        assert_eq!((h.free, h.largest, h.count), (2 * MIB, 2 * MIB, 1));
        assert_eq!(h.fragmentation(), 0.0);
        s.remove(3 * MIB);
        assert_eq!(s.holes(), Holes::default());
        s.remove(0);
        assert!(s.is_empty());
        assert_eq!(s.span(), None);
        s.insert(5 * MIB, 100, StackId(1), 9);
        s.insert(0, 100, StackId(1), 10);
        assert_eq!(s.holes().free, 5 * MIB - 100);
    }

    #[test]
    fn padding_is_no_hole_and_overlaps_count_once() {
        let mut s = AddressSpace::default();
        s.insert(0, 1000, StackId(1), 1);
        s.insert(1024, 1000, StackId(1), 2);
        assert_eq!(s.holes().free, 0);
        // Overlapping what is live (a free the trace missed): no negative hole.
        s.insert(512, 4000, StackId(1), 3);
        s.insert(8192, 10, StackId(1), 4);
        assert_eq!(s.holes().free, 8192 - 4512);
        assert_eq!(s.span(), Some((0, 8202)));
    }
}
