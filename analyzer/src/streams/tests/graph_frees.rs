//! Frees inside one graph: a free node and the nodes of the same graph that use the memory it
//! frees without a path to it (an unordered free) or after it (a use after free), and nodes
//! with no path from the allocation node of the memory they use (a race with it).

use gpuleak_format::*;

use super::super::*;
use super::graph_races::{G, X};
use super::{tidy, two_streams, Run, A, B, E, P};

const K: u64 = GraphAccesses::KERNEL;
const EDGE: u64 = GraphEdges::EDGE;
/// The graph's allocation: its allocation node's address and size.
const GM: u64 = 0x5a00_0000_0000;
const SIZE: u64 = 4096;
/// Node handles: the allocation node, a kernel on a side branch, the free node, the join.
const ALLOC: u64 = 1;
const SIDE: u64 = 2;
const FREE: u64 = 3;
const JOIN: u64 = 4;

impl Run {
    /// Names `node` of graph `G` as made by `api` (a `GraphNode` record).
    fn node(&mut self, node: u64, api: Api, kind: u32, stack: u32) -> &mut Run {
        self.r(GraphNode {
            api,
            graph: G,
            node,
            kind,
            stack: StackId(stack),
        })
    }

    /// Executable graph `X` of graph `G`: an allocation node `ALLOC` of `GM` (when `own`), the
    /// free node `FREE` of `GM`, kernel nodes as (node, address), and its edges.
    fn memory_graph(&mut self, own: bool, kernels: &[(u64, u64)], edges: &[[u64; 3]]) -> &mut Run {
        self.graph_with(own, true, kernels, edges)
    }

    /// [`Run::memory_graph`], with the free node only when `free`.
    fn graph_with(&mut self, own: bool, free: bool, kernels: &[(u64, u64)], edges: &[[u64; 3]]) -> &mut Run {
        if own {
            self.alloc_with(Api::cuGraphAddMemAllocNode, GM, SIZE, 0);
            self.node(ALLOC, Api::cuGraphAddMemAllocNode, GraphNode::MEM_ALLOC, 41);
        }
        if free {
            self.node(FREE, Api::cuMemFreeAsync, GraphNode::MEM_FREE, 42);
        }
        for &(node, _) in kernels {
            self.node(node, Api::cuLaunchKernel, GraphNode::KERNEL, 40 + node as u32 * 10);
        }
        let entries: Vec<u64> = kernels
            .iter()
            .flat_map(|&(n, addr)| [n, 0, addr, GraphAccesses::encode(1, K)])
            .collect();
        self.r(GraphAccesses {
            exec: X,
            nodes: Addrs(std::borrow::Cow::Owned(entries)),
        });
        let allocs = if own { vec![ALLOC, 0, GM, SIZE] } else { Vec::new() };
        let frees = if free { vec![FREE, 0, GM] } else { Vec::new() };
        self.r(GraphMemNodes {
            exec: X,
            allocs: Addrs(std::borrow::Cow::Owned(allocs)),
            frees: Addrs(std::borrow::Cow::Owned(frees)),
        });
        self.instantiate_x(Some(edges), u32::from(own), u32::from(free))
    }

    /// What was found, after a tidy end.
    fn found(&mut self) -> Vec<StreamFinding> {
        tidy(self);
        self.finish()
            .into_iter()
            .filter(|f| f.check != Check::StreamLeak)
            .collect()
    }

    fn launched(&mut self) -> Vec<StreamFinding> {
        self.launch_x().sync(A);
        self.found()
    }
}

/// The allocation node forks onto a side branch that uses the memory and onto the free node.
const FORK: &[[u64; 3]] = &[
    [EDGE, ALLOC, SIDE],
    [EDGE, ALLOC, FREE],
    [EDGE, SIDE, JOIN],
    [EDGE, FREE, JOIN],
];
/// The side branch joins the free node instead.
const JOINED: &[[u64; 3]] = &[[EDGE, ALLOC, SIDE], [EDGE, SIDE, FREE], [EDGE, FREE, JOIN]];

#[test]
fn a_use_on_a_branch_not_joined_before_the_free_node_is_an_unordered_free() {
    let found = two_streams(0).memory_graph(true, &[(SIDE, GM + 64)], FORK).launched();
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert_eq!(f.check, Check::UnorderedFree);
    assert!(f.is_error() && f.inside_graph());
    assert_eq!(
        (f.ptr, f.op.api, f.op.stream),
        (GM, Api::cuGraphLaunch, StreamName::Handle(A))
    );
    assert_eq!(f.allocation.map(|a| (a.ptr, a.size)), Some((GM, SIZE)));
    // The free node is at fault, the side kernel is its last use.
    let kinds = f.nodes.map(|n| n.map(|n| (n.kind, n.stack)));
    assert_eq!(
        kinds,
        [
            Some((GraphNode::MEM_FREE, StackId(42))),
            Some((GraphNode::KERNEL, StackId(60)))
        ]
    );
    // The correct twin: the side branch joins the free node.
    let found = two_streams(0).memory_graph(true, &[(SIDE, GM + 64)], JOINED).launched();
    assert!(found.is_empty(), "{found:#?}");
    // Bytes past the allocation: no finding either.
    let found = two_streams(0).memory_graph(true, &[(SIDE, GM + SIZE)], FORK).launched();
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn a_node_after_the_free_node_uses_freed_memory() {
    // alloc -> free -> kernel
    let after = &[[EDGE, ALLOC, FREE], [EDGE, FREE, JOIN]];
    let found = two_streams(0).memory_graph(true, &[(JOIN, GM)], after).launched();
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert_eq!((f.check, f.ptr), (Check::UseAfterFree, GM));
    assert!(f.is_error() && f.inside_graph());
    let kinds = f.nodes.map(|n| n.map(|n| n.kind));
    assert_eq!(kinds, [Some(GraphNode::KERNEL), Some(GraphNode::MEM_FREE)]);
    // The correct twin: alloc -> kernel -> free.
    let before = &[[EDGE, ALLOC, JOIN], [EDGE, JOIN, FREE]];
    let found = two_streams(0).memory_graph(true, &[(JOIN, GM)], before).launched();
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn a_node_with_no_path_from_the_allocation_node_races_with_it() {
    // The kernel is a root of its own, joined into the free node.
    let edges = &[[EDGE, ALLOC, FREE], [EDGE, SIDE, FREE]];
    let found = two_streams(0).memory_graph(true, &[(SIDE, GM)], edges).launched();
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert_eq!(f.check, Check::GraphRace);
    assert!(f.is_error() && !f.kernels_only());
    let kinds: Vec<u32> = f.nodes.iter().flatten().map(|n| n.kind).collect();
    assert!(
        kinds.contains(&GraphNode::MEM_ALLOC) && kinds.contains(&GraphNode::KERNEL),
        "{f:#?}"
    );
    // The correct twin: JOINED orders it after the allocation node.
    let found = two_streams(0).memory_graph(true, &[(SIDE, GM)], JOINED).launched();
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn a_free_node_of_another_graph_s_allocation_takes_its_size_from_that_allocation() {
    // Another graph's allocation node made the memory; this graph only frees it, with a
    // kernel at its last byte on a branch not joined before the free.
    let mut r = two_streams(0);
    r.alloc_with(Api::cuGraphAddMemAllocNode, GM, SIZE, 0);
    let edges = &[[EDGE, SIDE, JOIN], [EDGE, FREE, JOIN]];
    let found = r.memory_graph(false, &[(SIDE, GM + SIZE - 1)], edges).launched();
    assert_eq!(
        found.iter().map(|f| (f.check, f.ptr)).collect::<Vec<_>>(),
        [(Check::UnorderedFree, GM)]
    );
    // Memory the trace never showed allocated: nothing is known of it, nothing is reported.
    let found = two_streams(0).memory_graph(false, &[(SIDE, GM)], edges).launched();
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn found_once_per_change_not_per_launch() {
    let mut r = two_streams(0);
    r.memory_graph(true, &[(SIDE, GM + 64)], FORK);
    for _ in 0..3 {
        r.launch_x();
    }
    let found = r.launched();
    assert_eq!(
        found.iter().map(|f| (f.check, f.count)).collect::<Vec<_>>(),
        [(Check::UnorderedFree, 1)]
    );
}

// ---- Graph memory between the launch and other streams ----

impl Run {
    /// Copies from `GM` into `P` on `stream`.
    fn read_graph_memory(&mut self, stream: u64) -> &mut Run {
        self.copy(Api::cuMemcpyDtoDAsync_v2, stream, P, GM, 64)
    }
}

/// A graph that allocates `GM` and uses it, and frees it (`free`) or leaves it live.
fn allocating(free: bool) -> Run {
    let mut r = two_streams(0);
    r.graph_with(true, free, &[(SIDE, GM)], &[[EDGE, ALLOC, SIDE], [EDGE, SIDE, FREE]]);
    r
}

#[test]
fn memory_a_graph_frees_is_freed_by_its_launch_and_a_later_use_names_the_free_node() {
    let found = allocating(true).launch_x().launch(A, GM).found();
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert_eq!(
        (f.check, f.op.api, f.ptr),
        (Check::UseAfterFree, Api::cuLaunchKernel, GM)
    );
    assert!(!f.inside_graph());
    let free = f.other.expect("the free");
    assert_eq!(free.api, Api::cuGraphLaunch);
    assert_eq!(f.nodes[1].map(|n| n.kind), Some(GraphNode::MEM_FREE));
    // The correct twin: launched again and again, the graph allocates it anew each time.
    let found = allocating(true).launch_x().launch_x().sync(A).launch_x().found();
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn memory_a_graph_keeps_is_written_by_its_launch_for_other_streams() {
    // B reads what the launch allocated without waiting for the launch: a race.
    let found = allocating(false)
        .launch_x()
        .read_graph_memory(B)
        .sync(B)
        .free_async(GM, A)
        .found();
    let checks: Vec<(Check, Api)> = found.iter().map(|f| (f.check, f.op.api)).collect();
    assert_eq!(
        checks,
        [(Check::CrossStreamRace, Api::cuMemcpyDtoDAsync_v2)],
        "{found:#?}"
    );
    // The correct twin: B waits for an event recorded after the launch.
    let found = allocating(false)
        .launch_x()
        .record(E, A)
        .wait(B, E)
        .read_graph_memory(B)
        .sync(B)
        .free_async(GM, A)
        .found();
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn memory_a_graph_keeps_freed_on_another_stream_without_waiting_is_an_unordered_free() {
    let found = allocating(false).launch_x().free_async(GM, B).found();
    let checks: Vec<(Check, Api)> = found.iter().map(|f| (f.check, f.op.api)).collect();
    assert_eq!(checks, [(Check::UnorderedFree, Api::cuMemFreeAsync)], "{found:#?}");
    assert_eq!(found[0].other.map(|o| o.api), Some(Api::cuGraphLaunch));
    // The correct twin: freed on the launch's stream.
    let found = allocating(false).launch_x().free_async(GM, A).found();
    assert!(found.is_empty(), "{found:#?}");
}

#[test]
fn a_launch_that_frees_the_last_launch_s_memory_must_follow_its_uses() {
    // Instantiated to free on launch: the second launch frees what the first allocated, while
    // B may still read it.
    let use_on_b = |r: &mut Run| {
        r.record(E, A).wait(B, E).read_graph_memory(B);
    };
    let mut r = allocating(false);
    r.launch_x();
    use_on_b(&mut r);
    let found = r.launch_x().found();
    let checks: Vec<(Check, Api)> = found.iter().map(|f| (f.check, f.op.api)).collect();
    assert_eq!(checks, [(Check::UnorderedFree, Api::cuGraphLaunch)], "{found:#?}");
    // The correct twin: A waits for B's read first.
    let mut r = allocating(false);
    r.launch_x();
    use_on_b(&mut r);
    let found = r.record(E, B).wait(A, E).launch_x().found();
    assert!(found.is_empty(), "{found:#?}");
}
