//! One device's address space: live allocations by address, and the holes between them in the
//! used span (from the lowest live address to the highest live end).
//!
//! The trace carries the sizes programs asked for, not what the driver granted, so the gap
//! between two neighbours also holds the driver's rounding; gaps under [`MIN_HOLE`] are taken
//! for that padding and are neither holes nor free memory.

use std::collections::BTreeMap;

use gpuleak_format::StackId;

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

/// Live ranges and the holes between them.
#[derive(Debug, Default)]
pub struct AddressSpace {
    live: BTreeMap<u64, Range>,
    /// Hole sizes (at least [`MIN_HOLE`]) and how many holes have each.
    holes: BTreeMap<u64, u32>,
    /// Sum of the holes.
    free: u64,
    /// Allocations overlapping a live one (a free the trace missed), left out.
    pub overlaps: u64,
}

impl AddressSpace {
    /// Adds a live allocation; an allocation overlapping a live one is left out.
    pub fn insert(&mut self, ptr: u64, size: u64, stack: StackId, seq: u64) {
        let end = ptr.saturating_add(size.max(1));
        let prev = self.live.range(..=ptr).next_back().map(|(s, r)| (*s, r.end));
        let next = self.live.range(ptr..).next().map(|(s, _)| *s);
        if prev.is_some_and(|(_, e)| e > ptr) || next.is_some_and(|n| n < end) {
            self.overlaps += 1;
            return;
        }
        match (prev, next) {
            (Some((_, pe)), Some(n)) => {
                self.remove_hole(pe, n);
                self.add_hole(pe, ptr);
                self.add_hole(end, n);
            }
            (Some((_, pe)), None) => self.add_hole(pe, ptr),
            (None, Some(n)) => self.add_hole(end, n),
            (None, None) => {}
        }
        self.live.insert(ptr, Range { end, stack, seq });
    }

    /// Removes a live allocation (nothing if it is not there).
    pub fn remove(&mut self, ptr: u64) {
        let Some(r) = self.live.remove(&ptr) else { return };
        let prev = self.live.range(..ptr).next_back().map(|(_, r)| r.end);
        let next = self.live.range(ptr..).next().map(|(s, _)| *s);
        match (prev, next) {
            (Some(pe), Some(n)) => {
                self.remove_hole(pe, ptr);
                self.remove_hole(r.end, n);
                self.add_hole(pe, n);
            }
            (Some(pe), None) => self.remove_hole(pe, ptr),
            (None, Some(n)) => self.remove_hole(r.end, n),
            (None, None) => {}
        }
    }

    fn add_hole(&mut self, from: u64, to: u64) {
        let size = to.saturating_sub(from);
        if size >= MIN_HOLE {
            *self.holes.entry(size).or_insert(0) += 1;
            self.free += size;
        }
    }

    fn remove_hole(&mut self, from: u64, to: u64) {
        let size = to.saturating_sub(from);
        if size < MIN_HOLE {
            return;
        }
        if let Some(n) = self.holes.get_mut(&size) {
            *n -= 1;
            if *n == 0 {
                self.holes.remove(&size);
            }
            self.free -= size.min(self.free);
        }
    }

    /// Free bytes in the used span (holes only).
    pub fn free(&self) -> u64 {
        self.free
    }

    /// The largest hole.
    pub fn largest_hole(&self) -> u64 {
        self.holes.keys().next_back().copied().unwrap_or(0)
    }

    /// Number of holes.
    pub fn hole_count(&self) -> u64 {
        self.holes.values().map(|n| u64::from(*n)).sum()
    }

    /// 1 - largest hole / free in the span (0 with no free memory).
    pub fn fragmentation(&self) -> f64 {
        if self.free == 0 {
            0.0
        } else {
            1.0 - self.largest_hole() as f64 / self.free as f64
        }
    }

    /// Free bytes that no allocation bigger than the largest hole can use.
    pub fn stranded(&self) -> u64 {
        self.free - self.largest_hole()
    }

    /// The used span: lowest live address and highest live end.
    pub fn span(&self) -> Option<(u64, u64)> {
        let lo = *self.live.keys().next()?;
        let hi = self.live.values().map(|r| r.end).max()?;
        Some((lo, hi))
    }

    /// Every live allocation with a hole on each side, largest joined hole first.
    pub fn pins(&self) -> Vec<Pin> {
        let mut pins = Vec::new();
        let mut prev_end: Option<u64> = None;
        let mut it = self.live.iter().peekable();
        while let Some((&ptr, r)) = it.next() {
            let left = prev_end.map_or(0, |e| ptr.saturating_sub(e));
            let right = it.peek().map_or(0, |(&n, _)| n.saturating_sub(r.end));
            if left >= MIN_HOLE && right >= MIN_HOLE {
                pins.push(Pin {
                    ptr,
                    size: r.end - ptr,
                    stack: r.stack,
                    seq: r.seq,
                    joined: left + (r.end - ptr) + right,
                });
            }
            prev_end = Some(r.end);
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
        assert_eq!((s.free(), s.fragmentation()), (0, 0.0));
        for i in (1..8).step_by(2) {
            s.remove(i * MIB);
        }
        // Blocks 0, 2, 4, 6 live: holes at 1, 3, 5 (7 is past the span's end).
        assert_eq!(s.free(), 3 * MIB);
        assert_eq!(s.largest_hole(), MIB);
        assert!((s.fragmentation() - 2.0 / 3.0).abs() < 1e-9);
        assert_eq!(s.stranded(), 2 * MIB);
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
        assert_eq!((s.free(), s.largest_hole(), s.hole_count()), (2 * MIB, 2 * MIB, 1));
        assert_eq!(s.fragmentation(), 0.0);
        s.remove(3 * MIB);
        assert_eq!((s.free(), s.hole_count()), (0, 0));
        s.remove(0);
        assert_eq!(s.span(), None);
        s.insert(5 * MIB, 100, StackId(1), 9);
        s.insert(0, 100, StackId(1), 10);
        assert_eq!(s.free(), 5 * MIB - 100);
    }

    #[test]
    fn padding_is_no_hole_and_overlaps_are_left_out() {
        let mut s = AddressSpace::default();
        s.insert(0, 1000, StackId(1), 1);
        s.insert(1024, 1000, StackId(1), 2);
        assert_eq!(s.free(), 0);
        s.insert(512, 1000, StackId(1), 3);
        assert_eq!(s.overlaps, 1);
        s.remove(512);
        assert_eq!(s.span(), Some((0, 2024)));
    }
}
