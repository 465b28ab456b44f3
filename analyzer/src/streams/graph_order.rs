//! The order between the nodes of one graph, and the races inside one launch of it.
//!
//! The shim lists each instantiated graph's edges (`GraphEdges` records: the edges of the
//! graph and of the child graphs within it, and which child graph node each child graph's
//! nodes belong to). A node starts after every node it depends on, directly or through
//! others, has finished; a child graph node's nodes start after what the child graph node
//! depends on and finish before what depends on it. Two nodes with no path between them may
//! run at once, in either order: when they touch the same bytes and at least one writes,
//! that is a race inside every launch of the graph, found here once per change of what the
//! graph touches.
//!
//! The partial order is kept as vector clocks over chains: the nodes (with a child graph
//! node split into its start and its end) are taken in topological order and each is put at
//! the end of a chain whose last member comes before it (a new chain when none does), and
//! each remembers, per chain, the last member that comes before it. For graphs captured from
//! a few streams the chains are about as many as the streams. A graph that would need more
//! than [`MAX_CHAINS`] chains, or more than [`MAX_CLOCK_ENTRIES`] clock entries, is not
//! judged (a race in it stays unreported, never the reverse).
//!
//! Edges the driver marks as programmatic (the dependent kernel may start before the other
//! has finished) are listed as edges like any other, so races across them are not found.

use std::collections::BTreeMap;

use gpuleak_format::GraphEdges;

use super::memory::Mode;
use crate::hash::{HashMap, HashSet};

/// Chains at most (see the module's documentation).
const MAX_CHAINS: usize = 1024;
/// Clock entries at most, over all the vertices of one graph.
const MAX_CLOCK_ENTRIES: usize = 1 << 24;
/// Pairs of accesses compared at most in one search; past this the rest is not judged.
const MAX_COMPARISONS: usize = 1 << 24;
/// Earlier accesses remembered at most per start address; past this the oldest is dropped.
const MAX_AT_ONE_ADDRESS: usize = 64;
/// Races kept at most per search (one per pair of nodes).
const MAX_RACES: usize = 256;

/// The partial order of a graph's nodes.
#[derive(Debug)]
pub struct Order {
    /// Each node's vertices: where it starts and where it ends (the same vertex but for a
    /// child graph node).
    vertices: HashMap<u64, (u32, u32)>,
    /// Each vertex's place: its chain and its position on it (from 1).
    place: Vec<(u32, u32)>,
    /// Each vertex's position in topological order.
    rank: Vec<u32>,
    /// Each vertex's clock, one after another: per chain, the position of the last member
    /// that comes before it (itself included); missing entries are 0.
    clocks: Vec<u32>,
    /// Where each vertex's clock is in `clocks`: (start, length).
    clock_of: Vec<(u32, u32)>,
}

impl Order {
    /// The order the listed `entries` ([`GraphEdges`] triples) give `nodes` (every node whose
    /// order matters, listed or not: a node with no edge is in no entry); `None` when the
    /// entries make a cycle, or the graph is too wide to judge.
    pub fn new(entries: &[u64], nodes: impl IntoIterator<Item = u64>) -> Option<Order> {
        let triples = entries.chunks_exact(3);
        let split: HashSet<u64> = triples
            .clone()
            .filter(|t| t[0] == GraphEdges::CHILD)
            .map(|t| t[1])
            .collect();
        let mut vertices: HashMap<u64, (u32, u32)> = HashMap::default();
        let mut count = 0u32;
        let mut vertex = |node: u64, vertices: &mut HashMap<u64, (u32, u32)>| -> (u32, u32) {
            *vertices.entry(node).or_insert_with(|| {
                let start = count;
                count += if split.contains(&node) { 2 } else { 1 };
                (start, count - 1)
            })
        };
        let mut edges: Vec<(u32, u32)> = Vec::with_capacity(entries.len() / 3 + split.len());
        for t in triples {
            let (from, to) = (vertex(t[1], &mut vertices), vertex(t[2], &mut vertices));
            match t[0] {
                GraphEdges::EDGE => edges.push((from.1, to.0)),
                GraphEdges::CHILD => {
                    edges.push((from.0, to.0));
                    edges.push((to.1, from.1));
                }
                _ => {}
            }
        }
        for node in nodes {
            vertex(node, &mut vertices);
        }
        // A child graph node's end follows its start, also when its graph is empty.
        for &(start, end) in vertices.values() {
            if start != end {
                edges.push((start, end));
            }
        }
        let n = count as usize;
        let (preds, order) = topological(n, &edges)?;
        drop(edges);
        let mut rank = vec![0u32; n];
        for (i, &v) in order.iter().enumerate() {
            rank[v as usize] = i as u32;
        }
        let mut place = vec![(0u32, 0u32); n];
        // Every vertex's clock, one after another, and where each one's is.
        let mut clocks: Vec<u32> = Vec::new();
        let mut clock_of = vec![(0u32, 0u32); n];
        let mut tails: Vec<u32> = Vec::new();
        let mut clock: Vec<u32> = Vec::new();
        for &v in &order {
            clock.clear();
            for &p in preds.of_vertex(v) {
                let (start, len) = clock_of[p as usize];
                let theirs = &clocks[start as usize..(start + len) as usize];
                if clock.len() < theirs.len() {
                    clock.resize(theirs.len(), 0);
                }
                for (mine, &t) in clock.iter_mut().zip(theirs) {
                    *mine = (*mine).max(t);
                }
            }
            // The chain of a predecessor whose last member comes before v, else any such
            // chain, else a new one.
            let at = |c: usize| clock.get(c).copied().unwrap_or(0);
            let fits = |c: usize| tails[c] > 0 && at(c) == tails[c];
            let chain = preds
                .of_vertex(v)
                .iter()
                .map(|&p| place[p as usize].0 as usize)
                .find(|&c| fits(c))
                .or_else(|| (0..tails.len()).find(|&c| fits(c)));
            let chain = match chain {
                Some(c) => c,
                None => {
                    if tails.len() >= MAX_CHAINS {
                        return None;
                    }
                    tails.push(0);
                    tails.len() - 1
                }
            };
            tails[chain] += 1;
            if clock.len() <= chain {
                clock.resize(chain + 1, 0);
            }
            clock[chain] = tails[chain];
            place[v as usize] = (chain as u32, tails[chain]);
            if clocks.len() + clock.len() > MAX_CLOCK_ENTRIES {
                return None;
            }
            clock_of[v as usize] = (clocks.len() as u32, clock.len() as u32);
            clocks.extend_from_slice(&clock);
        }
        Some(Order {
            vertices,
            place,
            rank,
            clocks,
            clock_of,
        })
    }

    /// Whether node `a` has finished before node `b` starts (false for a node not listed).
    pub fn before(&self, a: u64, b: u64) -> bool {
        let (Some(&(_, a_end)), Some(&(b_start, _))) = (self.vertices.get(&a), self.vertices.get(&b)) else {
            return false;
        };
        let (chain, pos) = self.place[a_end as usize];
        let (start, len) = self.clock_of[b_start as usize];
        chain < len && self.clocks[(start + chain) as usize] >= pos
    }

    /// Where node `node` starts in topological order (`None` for a node not listed).
    fn rank(&self, node: u64) -> Option<u32> {
        self.vertices.get(&node).map(|&(start, _)| self.rank[start as usize])
    }
}

/// Lists of vertices per vertex, one after another (compressed rows).
struct Lists {
    start: Vec<u32>,
    items: Vec<u32>,
}

impl Lists {
    /// The lists `pairs` make: `(owner, item)` each.
    fn of(n: usize, pairs: impl Iterator<Item = (u32, u32)> + Clone) -> Lists {
        let mut start = vec![0u32; n + 1];
        for (owner, _) in pairs.clone() {
            start[owner as usize + 1] += 1;
        }
        for i in 0..n {
            start[i + 1] += start[i];
        }
        let mut next = start.clone();
        let mut items = vec![0u32; start[n] as usize];
        for (owner, item) in pairs {
            items[next[owner as usize] as usize] = item;
            next[owner as usize] += 1;
        }
        Lists { start, items }
    }

    fn of_vertex(&self, v: u32) -> &[u32] {
        &self.items[self.start[v as usize] as usize..self.start[v as usize + 1] as usize]
    }
}

/// Every vertex's predecessors, and the vertices in topological order; `None` on a cycle.
fn topological(n: usize, edges: &[(u32, u32)]) -> Option<(Lists, Vec<u32>)> {
    let preds = Lists::of(n, edges.iter().map(|&(from, to)| (to, from)));
    let succs = Lists::of(n, edges.iter().copied());
    let mut waiting: Vec<u32> = (0..n as u32).map(|v| preds.of_vertex(v).len() as u32).collect();
    let mut order: Vec<u32> = (0..n as u32).filter(|&v| waiting[v as usize] == 0).collect();
    let mut next = 0;
    while next < order.len() {
        let v = order[next];
        next += 1;
        for &s in succs.of_vertex(v) {
            waiting[s as usize] -= 1;
            if waiting[s as usize] == 0 {
                order.push(s);
            }
        }
    }
    (order.len() == n).then_some((preds, order))
}

/// One node's access, as the search takes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeAccess {
    /// The node (`CUgraphNode`).
    pub node: u64,
    /// First byte.
    pub lo: u64,
    /// Length.
    pub len: u64,
    /// Mode.
    pub mode: Mode,
    /// The node's name ([`super::graph_accesses::NodeSite`] index; 0: none).
    pub site: u32,
}

impl NodeAccess {
    pub(super) fn hi(&self) -> u64 {
        self.lo.saturating_add(self.len.max(1))
    }
}

/// Two nodes of one graph, with no path between them, that touch the same bytes, at least
/// one writing: `first` comes earlier in the graph's topological order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Race {
    /// The earlier node's access.
    pub first: NodeAccess,
    /// The later node's access.
    pub second: NodeAccess,
    /// The first byte both touch.
    pub addr: u64,
}

/// The races between `accesses` (of enabled nodes) under `order`: at most one per pair of
/// nodes, at most [`MAX_RACES`], in topological order of their later node.
///
/// Accesses are taken in topological order, each compared with the earlier ones it overlaps
/// that are still remembered; a writing access makes earlier ones it covers and comes after
/// forgotten (a later access unordered with those is unordered with it too, and races with
/// it), as the stream model does.
pub fn races(order: &Order, accesses: &[NodeAccess]) -> Vec<Race> {
    let mut sorted: Vec<(u32, NodeAccess)> = accesses
        .iter()
        .filter(|a| a.lo != 0)
        .filter_map(|a| order.rank(a.node).map(|r| (r, *a)))
        .collect();
    sorted.sort_by_key(|&(rank, a)| (rank, a.lo));
    let mut earlier: BTreeMap<u64, Vec<NodeAccess>> = BTreeMap::new();
    let mut longest = 0u64;
    let mut pairs: HashSet<(u64, u64)> = HashSet::default();
    let mut found = Vec::new();
    let mut compared = 0usize;
    for (_, x) in sorted {
        let (lo, hi) = (x.lo, x.hi());
        let mut covered: Vec<(u64, usize)> = Vec::new();
        for (&start, list) in earlier.range(lo.saturating_sub(longest)..hi) {
            for (i, p) in list.iter().enumerate() {
                if p.hi() <= lo || p.node == x.node {
                    continue;
                }
                compared += 1;
                if compared > MAX_COMPARISONS {
                    return found;
                }
                let ordered = order.before(p.node, x.node);
                if ordered && x.mode != Mode::Read && lo <= p.lo && p.hi() <= hi {
                    covered.push((start, i));
                }
                if ordered || (p.mode == Mode::Read && x.mode == Mode::Read) {
                    continue;
                }
                if pairs.insert((p.node, x.node)) && found.len() < MAX_RACES {
                    found.push(Race {
                        first: *p,
                        second: x,
                        addr: lo.max(p.lo),
                    });
                }
            }
        }
        for &(start, i) in covered.iter().rev() {
            if let Some(list) = earlier.get_mut(&start) {
                list.remove(i);
                if list.is_empty() {
                    earlier.remove(&start);
                }
            }
        }
        let list = earlier.entry(lo).or_default();
        if list.len() == MAX_AT_ONE_ADDRESS {
            list.remove(0);
        }
        list.push(x);
        longest = longest.max(hi - lo);
    }
    found
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;

    const E: u64 = GraphEdges::EDGE;
    const C: u64 = GraphEdges::CHILD;

    /// The order of `triples` (edges), with `nodes` that may have none.
    pub(in crate::streams) fn order(triples: &[[u64; 3]], nodes: &[u64]) -> Order {
        let flat: Vec<u64> = triples.iter().flatten().copied().collect();
        Order::new(&flat, nodes.iter().copied()).expect("an order")
    }

    /// An access of `node`, named by its own number.
    pub(in crate::streams) fn access(node: u64, lo: u64, len: u64, mode: Mode) -> NodeAccess {
        NodeAccess {
            node,
            lo,
            len,
            mode,
            site: node as u32,
        }
    }

    fn pairs(found: &[Race]) -> Vec<(u64, u64)> {
        found.iter().map(|r| (r.first.node, r.second.node)).collect()
    }

    #[test]
    fn a_fork_and_join_orders_each_branch_with_the_ends_but_not_with_the_other_branch() {
        // 1 -> 2 -> 4, 1 -> 3 -> 4
        let o = order(&[[E, 1, 2], [E, 1, 3], [E, 2, 4], [E, 3, 4]], &[]);
        assert!(o.before(1, 2) && o.before(1, 3) && o.before(2, 4) && o.before(3, 4) && o.before(1, 4));
        assert!(!o.before(2, 3) && !o.before(3, 2));
        assert!(!o.before(4, 1) && !o.before(2, 1));
        // A node with no edge at all is ordered with nothing.
        let o = order(&[[E, 1, 2]], &[9]);
        assert!(!o.before(1, 9) && !o.before(9, 2));
    }

    #[test]
    fn many_forks_and_joins_reuse_chains() {
        // 100 rounds of a fork onto a side branch and a join: two chains suffice.
        let mut t = Vec::new();
        let mut last = 1u64;
        for i in 0..100u64 {
            let (side, main, join) = (1000 + i, 2000 + i, 3000 + i);
            t.extend([[E, last, side], [E, last, main], [E, side, join], [E, main, join]]);
            last = join;
        }
        let o = order(&t, &[]);
        let widest = o.clock_of.iter().map(|c| c.1).max();
        assert_eq!(widest, Some(2));
        assert!(o.before(1000, 3099) && !o.before(1050, 2050) && !o.before(2050, 1050));
        assert!(o.before(2050, 1051));
    }

    #[test]
    fn a_child_graph_s_nodes_start_after_what_its_node_depends_on_and_end_before_what_depends_on_it() {
        // 1 -> G -> 2, G holds 10 -> 11 and 12 (no edge), and E (empty child graph) between 2 and 3.
        let o = order(
            &[
                [E, 1, 100],
                [E, 100, 2],
                [C, 100, 10],
                [C, 100, 11],
                [C, 100, 12],
                [E, 10, 11],
                [E, 2, 200],
                [E, 200, 3],
            ],
            &[],
        );
        for inner in [10, 11, 12] {
            assert!(o.before(1, inner) && o.before(inner, 2), "{inner}");
        }
        assert!(o.before(10, 11) && !o.before(10, 12) && !o.before(12, 11));
        assert!(o.before(1, 100) && o.before(100, 2));
        // The empty child graph's node still orders what is on either side.
        assert!(o.before(2, 3));
    }

    #[test]
    fn a_cycle_or_an_unknown_node_orders_nothing() {
        let flat = [E, 1, 2, E, 2, 1];
        assert!(Order::new(&flat, []).is_none());
        let o = order(&[[E, 1, 2]], &[]);
        assert!(!o.before(1, 77) && !o.before(77, 2));
    }

    #[test]
    fn unordered_nodes_that_touch_the_same_bytes_race_once_and_ordered_ones_never() {
        // 1 -> 2 -> 4, 1 -> 3 -> 4
        let o = order(&[[E, 1, 2], [E, 1, 3], [E, 2, 4], [E, 3, 4]], &[]);
        let buf = 0x7000_0000_0000;
        // 2 writes what 3 reads: a race; 1 and 4 touch it too, ordered with both.
        let found = races(
            &o,
            &[
                access(1, buf, 64, Mode::Write),
                access(2, buf, 64, Mode::Write),
                access(3, buf + 16, 8, Mode::Read),
                access(3, buf + 32, 8, Mode::Read),
                access(4, buf, 64, Mode::Read),
            ],
        );
        assert_eq!(pairs(&found), [(2, 3)]);
        assert_eq!(found[0].addr, buf + 16);
        // Its correct twin: both branches only read.
        let found = races(
            &o,
            &[
                access(1, buf, 64, Mode::Write),
                access(2, buf, 64, Mode::Read),
                access(3, buf, 64, Mode::Read),
                access(4, buf, 64, Mode::Write),
            ],
        );
        assert!(found.is_empty(), "{found:?}");
        // Or touch bytes apart.
        let found = races(
            &o,
            &[access(2, buf, 64, Mode::Write), access(3, buf + 64, 64, Mode::Write)],
        );
        assert!(found.is_empty(), "{found:?}");
        // Two kernels given one pointer on the two branches.
        let found = races(&o, &[access(2, buf, 1, Mode::Kernel), access(3, buf, 1, Mode::Kernel)]);
        assert_eq!(pairs(&found), [(2, 3)]);
    }

    #[test]
    fn a_long_chain_sharing_one_pointer_compares_each_access_with_few_others() {
        let n = 20_000u64;
        let t: Vec<[u64; 3]> = (1..n).map(|i| [E, i, i + 1]).collect();
        let o = order(&t, &[]);
        let acc: Vec<NodeAccess> = (1..=n).map(|i| access(i, 0x7000_0000_0000, 1, Mode::Kernel)).collect();
        assert!(races(&o, &acc).is_empty());
        // The same nodes with no edges: every pair races; one per pair, at most MAX_RACES.
        let o = Order::new(&[], 1..=300).unwrap();
        let acc: Vec<NodeAccess> = (1..=300)
            .map(|i| access(i, 0x7000_0000_0000, 1, Mode::Kernel))
            .collect();
        assert_eq!(races(&o, &acc).len(), MAX_RACES);
    }
}
