//! Races inside one graph: two nodes with no path between them that touch the same bytes,
//! at least one writing, found at the first launch after what the nodes touch changed.

use gpuleak_format::*;

use super::super::*;
use super::{tidy, two_streams, Run, A, P};

/// The graph, and the executable graph made from it.
pub(super) const G: u64 = 0x6000;
pub(super) const X: u64 = 0x7000;
const K: u64 = GraphAccesses::KERNEL;
const W: u64 = GraphAccesses::WRITE;
const R: u64 = GraphAccesses::READ;
const EDGE: u64 = GraphEdges::EDGE;
const CHILD: u64 = GraphEdges::CHILD;
/// Host memory no allocation holds.
const HOST: u64 = 0x1000;

impl Run {
    /// Executable graph `X` of graph `G`: nodes as (node, owner, address, length, mode), and
    /// its edges when listed.
    fn graph_of(&mut self, nodes: &[(u64, u64, u64, u64, u64)], edges: Option<&[[u64; 3]]>) -> &mut Run {
        let entries: Vec<u64> = nodes
            .iter()
            .flat_map(|&(n, o, a, l, m)| [n, o, a, GraphAccesses::encode(l, m)])
            .collect();
        self.r(GraphAccesses {
            exec: X,
            nodes: Addrs(std::borrow::Cow::Owned(entries)),
        });
        self.instantiate_x(edges, 0, 0)
    }

    /// The edges of executable graph `X` (when listed), then its instantiation from `G`, with
    /// that many memory nodes.
    pub(super) fn instantiate_x(&mut self, edges: Option<&[[u64; 3]]>, alloc_nodes: u32, free_nodes: u32) -> &mut Run {
        if let Some(edges) = edges {
            self.r(GraphEdges {
                exec: X,
                entries: Addrs(std::borrow::Cow::Owned(edges.iter().flatten().copied().collect())),
            });
        }
        self.r(GraphExec {
            api: Api::cuGraphInstantiateWithFlags,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            exec: X,
            graph: G,
            flags: 0,
            alloc_nodes,
            free_nodes,
            nodes_known: 1,
            stack: StackId::NONE,
        })
    }

    /// Launches `X` on stream `A`.
    pub(super) fn launch_x(&mut self) -> &mut Run {
        self.r(Launch {
            api: Api::cuGraphLaunch,
            result: CuResult::SUCCESS,
            stream: Stream(A),
            function: X,
            ptrs: Addrs(std::borrow::Cow::Borrowed(&[])),
            stack: StackId::NONE,
        })
    }

    fn run_graph(&mut self) -> &mut Run {
        self.launch_x().sync(A)
    }

    fn node_update(&mut self, what: u32, node: u64, event: u64, entries: Option<Vec<u64>>) -> &mut Run {
        if let Some(nodes) = entries {
            self.r(GraphAccesses {
                exec: X,
                nodes: Addrs(std::borrow::Cow::Owned(nodes)),
            });
        }
        self.r(GraphUpdate {
            api: Api::cuGraphExecNodeSetParams,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            what,
            exec: X,
            node,
            event,
            graph: 0,
            listed: 1,
        })
    }

    fn graph_races(&mut self) -> Vec<StreamFinding> {
        tidy(self);
        self.finish()
            .into_iter()
            .filter(|f| f.check == Check::GraphRace)
            .collect()
    }
}

/// A fork: node 1 writes the buffer, then nodes 2 and 3 run on two branches.
fn fork(second: (u64, u64), third: (u64, u64), edges: Option<&[[u64; 3]]>) -> Run {
    let mut r = two_streams(0);
    r.graph_of(
        &[
            (1, 0, P, 64, W),
            (2, 0, P + second.0, 8, second.1),
            (3, 0, P + third.0, 8, third.1),
        ],
        edges,
    );
    r
}

const FORK: &[[u64; 3]] = &[[EDGE, 1, 2], [EDGE, 1, 3]];
const CHAIN: &[[u64; 3]] = &[[EDGE, 1, 2], [EDGE, 1, 3], [EDGE, 2, 3]];

#[test]
fn two_branches_that_touch_the_same_bytes_race_and_ordered_ones_do_not() {
    // A kernel on one branch, a copy reading the same bytes on the other: an error.
    let found = fork((0, K), (0, R), Some(FORK)).run_graph().graph_races();
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert!(f.is_error() && f.kernel_involved() && !f.kernels_only());
    assert_eq!(
        (f.ptr, f.op.api, f.op.stream),
        (P, Api::cuGraphLaunch, StreamName::Handle(A))
    );
    assert_eq!(f.allocation.map(|a| a.ptr), Some(P));
    // The correct twins: an edge between the branches; both branches only reading; bytes
    // apart.
    assert!(fork((0, K), (0, R), Some(CHAIN)).run_graph().graph_races().is_empty());
    assert!(fork((0, R), (0, R), Some(FORK)).run_graph().graph_races().is_empty());
    assert!(fork((0, W), (8, W), Some(FORK)).run_graph().graph_races().is_empty());
    // Two kernels given the same pointer: a warning.
    let found = fork((0, K), (0, K), Some(FORK)).run_graph().graph_races();
    assert!(found.len() == 1 && !found[0].is_error() && found[0].kernels_only());
    // An overlap inside a range: a write of 8 bytes at P + 4 and a read at P.
    let found = fork((4, W), (0, R), Some(FORK)).run_graph().graph_races();
    assert_eq!(found.iter().map(|f| f.ptr).collect::<Vec<_>>(), [P + 4]);
}

#[test]
fn without_listed_edges_or_tracked_memory_or_a_launch_nothing_is_found() {
    // An older trace: the order of the nodes is unknown.
    assert!(fork((0, K), (0, W), None).run_graph().graph_races().is_empty());
    // Never launched.
    assert!(fork((0, K), (0, W), Some(FORK)).graph_races().is_empty());
    // Bytes no tracked allocation holds.
    let mut r = two_streams(0);
    r.graph_of(&[(2, 0, HOST, 8, W), (3, 0, HOST, 8, R)], Some(&[]))
        .run_graph();
    assert!(r.graph_races().is_empty());
}

#[test]
fn a_race_is_searched_once_per_change_and_follows_changes_to_nodes() {
    // Launched three times, found once.
    let found = fork((0, K), (0, R), Some(FORK))
        .run_graph()
        .run_graph()
        .run_graph()
        .graph_races();
    assert_eq!(found.iter().map(|f| f.count).collect::<Vec<_>>(), [1]);

    // Node 3 given another buffer's bytes: no race; given them back: found again.
    let mut r = fork((0, K), (0, R), Some(FORK));
    r.run_graph()
        .node_update(
            GraphUpdate::NODE_PARAMS,
            3,
            0,
            Some(vec![3, 0, HOST, GraphAccesses::encode(8, R)]),
        )
        .run_graph()
        .run_graph();
    let mut again = fork((0, K), (0, R), Some(FORK));
    again
        .run_graph()
        .node_update(
            GraphUpdate::NODE_PARAMS,
            3,
            0,
            Some(vec![3, 0, HOST, GraphAccesses::encode(8, R)]),
        )
        .run_graph()
        .node_update(
            GraphUpdate::NODE_PARAMS,
            3,
            0,
            Some(vec![3, 0, P, GraphAccesses::encode(8, R)]),
        )
        .run_graph();
    assert_eq!(r.graph_races().iter().map(|f| f.count).collect::<Vec<_>>(), [1]);
    assert_eq!(again.graph_races().iter().map(|f| f.count).collect::<Vec<_>>(), [2]);

    // Node 2 disabled: it touches nothing, so no race.
    let mut r = fork((0, K), (0, R), Some(FORK));
    r.node_update(GraphUpdate::NODE_ENABLED, 2, 0, None).run_graph();
    assert!(r.graph_races().is_empty());
}

#[test]
fn a_child_graph_s_nodes_are_ordered_through_its_node() {
    // Node 2 at the top level; child graph node 100 holds node 10, which writes what 2 reads.
    let run = |edges: &[[u64; 3]]| {
        let mut r = two_streams(0);
        r.graph_of(&[(2, 0, P, 8, R), (10, 100, P, 8, W)], Some(edges))
            .run_graph();
        r.graph_races()
    };
    assert_eq!(run(&[[CHILD, 100, 10]]).len(), 1);
    assert!(run(&[[CHILD, 100, 10], [EDGE, 2, 100]]).is_empty());
    assert!(run(&[[CHILD, 100, 10], [EDGE, 100, 2]]).is_empty());
}

#[test]
fn a_graph_race_names_both_nodes() {
    let mut r = fork((0, K), (0, R), Some(FORK));
    for (node, api, kind, stack) in [
        (2, Api::cuLaunchKernel, GraphNode::KERNEL, 42),
        (3, Api::cuGraphAddMemcpyNode, GraphNode::MEMCPY, 43),
    ] {
        r.r(GraphNode {
            api,
            graph: G,
            node,
            kind,
            stack: StackId(stack),
        });
    }
    // Names given before the instantiation above count only for a later one.
    r.graph_of(&[(1, 0, P, 64, W), (2, 0, P, 8, K), (3, 0, P, 8, R)], Some(FORK))
        .run_graph();
    let found = r.graph_races();
    assert_eq!(found.len(), 1, "{found:#?}");
    let [this, other] = found[0].nodes.map(|n| n.map(|n| (n.api, n.stack.0)));
    let mut named = [this, other];
    named.sort();
    assert_eq!(
        named,
        [Some((Api::cuLaunchKernel, 42)), Some((Api::cuGraphAddMemcpyNode, 43))]
    );
}

#[test]
fn a_race_in_a_graph_s_own_allocation_is_found_too() {
    const NODE_MEMORY: u64 = 0x5a00_0000_0000;
    let run = |edges: &[[u64; 3]]| {
        let mut r = two_streams(0);
        r.alloc_with(Api::cuGraphAddMemAllocNode, NODE_MEMORY, 4096, 0)
            // Freed (as a free node would be): the address stays the graph's.
            .free_with(Api::cuMemFreeAsync, NODE_MEMORY, A)
            .graph_of(&[(2, 0, NODE_MEMORY, 8, K), (3, 0, NODE_MEMORY, 8, R)], Some(edges))
            .run_graph();
        r.graph_races()
    };
    let found = run(&[]);
    assert_eq!(found.len(), 1, "{found:#?}");
    let a = found[0].allocation.expect("the node's allocation");
    assert_eq!(
        (a.kind, a.ptr, a.size, a.api),
        (MemKind::Graph, NODE_MEMORY, 4096, Api::cuGraphAddMemAllocNode)
    );
    assert!(run(&[[EDGE, 2, 3]]).is_empty());
}
