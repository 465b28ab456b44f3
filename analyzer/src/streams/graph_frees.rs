//! Frees inside one graph: a free node and the nodes that use the memory it frees.
//!
//! Graph memory is allocated by an allocation node and may be freed by a free node of the
//! same graph, or of a later one. The driver's rule is the stream-ordered one: the memory may
//! be used by nodes that come after its allocation node and before its free node. A node that
//! touches the freed bytes with no path to the free node breaks it in one of two ways:
//!
//! - a path leads from the free node to it: every launch uses the memory after it was freed
//!   (a use after free), unless an allocation node of the same bytes comes in between (the
//!   bytes were allocated again, and it uses the new allocation);
//! - no path either way: the free may happen while it still runs (an unordered free).
//!
//! The allocation node itself counts as a use (it makes the memory usable), so a free with no
//! path from it is an unordered free too. Under stream capture this is what a fork onto a side
//! stream that uses the memory, joined only after the main stream freed it, makes: a legal
//! capture whose every replay frees memory in use.
//!
//! Searched with the races (`graph_order`), at the first launch after what the nodes touch
//! changed, within the same bounds.

use super::graph_order::{NodeAccess, Order};
use crate::hash::HashSet;

/// Pairs compared at most in one search; past this the rest is not judged.
const MAX_COMPARISONS: usize = 1 << 24;
/// Findings kept at most per search (one per pair of free node and node).
const MAX_FOUND: usize = 256;

/// A free node and the memory it frees.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FreeNode {
    /// The node (`CUgraphNode`).
    pub node: u64,
    /// The address it frees.
    pub addr: u64,
    /// The bytes freed: the allocation at `addr`, as far as it is known (at least one byte).
    pub len: u64,
    /// The node's name ([`super::graph_accesses::NodeSite`] index; 0: none).
    pub site: u32,
}

/// A node that touches memory a free node frees without finishing before it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadFree {
    /// The free node.
    pub free: FreeNode,
    /// The node's access to the freed bytes.
    pub access: NodeAccess,
    /// Whether a path leads from the free node to the access (a use after free); else there
    /// is no path either way (an unordered free).
    pub after: bool,
}

/// Accesses sorted by their first byte, with how far the accesses up to each one reach, so
/// that those overlapping a range are found without a full scan.
struct Intervals<'a> {
    sorted: Vec<&'a NodeAccess>,
    reach: Vec<u64>,
}

impl<'a> Intervals<'a> {
    fn new(accesses: impl Iterator<Item = &'a NodeAccess>) -> Intervals<'a> {
        let mut sorted: Vec<&NodeAccess> = accesses.filter(|a| a.lo != 0).collect();
        sorted.sort_by_key(|a| a.lo);
        let mut reach = Vec::with_capacity(sorted.len());
        let mut far = 0u64;
        for a in &sorted {
            far = far.max(a.hi());
            reach.push(far);
        }
        Intervals { sorted, reach }
    }

    /// The accesses that overlap `[lo, hi)`, from the last-starting one down.
    fn overlapping(&self, lo: u64, hi: u64) -> impl Iterator<Item = &'a NodeAccess> + '_ {
        let end = self.sorted.partition_point(|a| a.lo < hi);
        (0..end)
            .rev()
            .take_while(move |&i| self.reach[i] > lo)
            .map(|i| self.sorted[i])
            .filter(move |a| a.hi() > lo)
    }
}

/// The bad frees of `frees` under `order`: each node among `accesses` (of enabled nodes) and
/// `allocs` (allocation nodes, each an access of the bytes it allocates) that touches bytes a
/// free node frees and does not finish before it starts. At most one per pair of free node
/// and node, at most [`MAX_FOUND`].
pub fn bad_frees(order: &Order, accesses: &[NodeAccess], allocs: &[NodeAccess], frees: &[FreeNode]) -> Vec<BadFree> {
    let uses = Intervals::new(accesses.iter().chain(allocs));
    let allocated = Intervals::new(allocs.iter());
    let alloc_nodes: HashSet<u64> = allocs.iter().map(|a| a.node).collect();
    let mut pairs: HashSet<(u64, u64)> = HashSet::default();
    let mut found = Vec::new();
    let mut compared = 0usize;
    for f in frees {
        let (lo, hi) = (f.addr, f.addr.saturating_add(f.len.max(1)));
        for x in uses.overlapping(lo, hi) {
            compared += 1;
            if compared > MAX_COMPARISONS {
                return found;
            }
            if x.node == f.node || order.before(x.node, f.node) {
                continue;
            }
            let after = order.before(f.node, x.node);
            // After the free: an allocation node of these bytes (their next allocation), or a
            // node that comes after one that does.
            if after
                && (alloc_nodes.contains(&x.node)
                    || allocated
                        .overlapping(x.lo, x.hi())
                        .any(|r| order.before(f.node, r.node) && order.before(r.node, x.node)))
            {
                continue;
            }
            if pairs.insert((f.node, x.node)) && found.len() < MAX_FOUND {
                found.push(BadFree {
                    free: *f,
                    access: *x,
                    after,
                });
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use gpuleak_format::GraphEdges;

    use super::*;
    use crate::streams::graph_order::tests::{access, order};
    use crate::streams::memory::Mode;

    const E: u64 = GraphEdges::EDGE;

    fn free(node: u64, addr: u64, len: u64) -> FreeNode {
        FreeNode {
            node,
            addr,
            len,
            site: node as u32,
        }
    }

    fn found(o: &Order, accesses: &[NodeAccess], allocs: &[NodeAccess], frees: &[FreeNode]) -> Vec<(u64, u64, bool)> {
        bad_frees(o, accesses, allocs, frees)
            .iter()
            .map(|b| (b.free.node, b.access.node, b.after))
            .collect()
    }

    #[test]
    fn a_free_after_every_use_is_silent_and_one_before_a_use_is_a_use_after_free() {
        // alloc 1 -> kernel 2 -> free 3 -> kernel 4
        let o = order(&[[E, 1, 2], [E, 2, 3], [E, 3, 4]], &[]);
        let allocs = [access(1, 0x1000, 256, Mode::Write)];
        let frees = [free(3, 0x1000, 256)];
        let kernel = access(2, 0x1000, 1, Mode::Kernel);
        assert_eq!(found(&o, &[kernel], &allocs, &frees), []);
        // A use of the last byte after the free, and one past the end that is not.
        let late = [
            kernel,
            access(4, 0x10ff, 1, Mode::Read),
            access(4, 0x1100, 8, Mode::Write),
        ];
        assert_eq!(found(&o, &late, &allocs, &frees), [(3, 4, true)]);
    }

    #[test]
    fn a_use_on_a_branch_not_joined_before_the_free_is_an_unordered_free() {
        // alloc 1 forks to a side kernel 2 and to free 3; both join at 4.
        let o = order(&[[E, 1, 2], [E, 1, 3], [E, 2, 4], [E, 3, 4]], &[]);
        let allocs = [access(1, 0x1000, 256, Mode::Write)];
        let frees = [free(3, 0x1000, 256)];
        // A use that starts before the freed bytes and reaches into them.
        let side = [access(2, 0x0f00, 0x101, Mode::Write)];
        assert_eq!(found(&o, &side, &allocs, &frees), [(3, 2, false)]);
        // Joined into the free instead: silent.
        let o = order(&[[E, 1, 2], [E, 1, 3], [E, 2, 3]], &[]);
        assert_eq!(found(&o, &side, &allocs, &frees), []);
    }

    #[test]
    fn a_free_with_no_path_from_the_allocation_is_unordered_with_it() {
        let o = order(&[], &[1, 3]);
        let allocs = [access(1, 0x1000, 256, Mode::Write)];
        assert_eq!(found(&o, &[], &allocs, &[free(3, 0x1000, 256)]), [(3, 1, false)]);
    }

    #[test]
    fn memory_allocated_again_after_the_free_is_another_allocation() {
        // alloc 1 -> kernel 2 -> free 3 -> alloc 5 (same bytes) -> kernel 6 -> free 7
        let o = order(&[[E, 1, 2], [E, 2, 3], [E, 3, 5], [E, 5, 6], [E, 6, 7]], &[]);
        let allocs = [access(1, 0x1000, 256, Mode::Write), access(5, 0x1000, 256, Mode::Write)];
        let frees = [free(3, 0x1000, 256), free(7, 0x1000, 256)];
        let kernels = [access(2, 0x1000, 1, Mode::Kernel), access(6, 0x1000, 1, Mode::Kernel)];
        assert_eq!(found(&o, &kernels, &allocs, &frees), []);
        // Without the second allocation, the second kernel uses freed memory.
        let o = order(&[[E, 1, 2], [E, 2, 3], [E, 3, 6]], &[]);
        assert_eq!(found(&o, &kernels, &allocs[..1], &frees[..1]), [(3, 6, true)]);
    }

    #[test]
    fn one_finding_per_pair_of_nodes() {
        let o = order(&[], &[1, 2]);
        let accesses = [access(1, 0x1000, 1, Mode::Kernel), access(1, 0x1010, 1, Mode::Kernel)];
        assert_eq!(found(&o, &accesses, &[], &[free(2, 0x1000, 64)]), [(2, 1, false)]);
    }
}
