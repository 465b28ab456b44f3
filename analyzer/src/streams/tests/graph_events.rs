//! Graph launches: they record and wait for the events of their graphs' event nodes (captured
//! external events here), and follow the last launch of the same executable graph.

use gpuleak_format::*;

use super::super::*;
use super::{two_streams, Run, A, B, E, P};

const G: u64 = 0x6000;
const X: u64 = 0x7000;
const EXTERNAL: u32 = 1;

impl Run {
    fn record_flags(&mut self, e: u64, s: u64, flags: u32) -> &mut Run {
        self.r(EventRecord {
            api: Api::cuEventRecordWithFlags,
            result: CuResult::SUCCESS,
            event: Event(e),
            stream: Stream(s),
            flags,
        })
    }

    fn wait_flags(&mut self, s: u64, e: u64, flags: u32) -> &mut Run {
        self.r(StreamWait {
            api: Api::cuStreamWaitEvent,
            result: CuResult::SUCCESS,
            stream: Stream(s),
            event: Event(e),
            flags,
        })
    }

    fn instantiate(&mut self, graph: u64, exec: u64) -> &mut Run {
        self.r(GraphExec {
            api: Api::cuGraphInstantiateWithFlags,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            exec,
            graph,
            flags: 0,
            alloc_nodes: 0,
            free_nodes: 0,
            nodes_known: 1,
            stack: StackId::NONE,
        })
    }

    fn launch_graph(&mut self, exec: u64, stream: u64) -> &mut Run {
        self.r(Launch {
            api: Api::cuGraphLaunch,
            result: CuResult::SUCCESS,
            stream: Stream(stream),
            function: exec,
            ptrs: Addrs(std::borrow::Cow::Borrowed(&[])),
            stack: StackId::NONE,
        })
    }

    /// The end of these programs: the buffer freed without a synchronizing free (which would
    /// wait for every stream), both streams destroyed.
    fn end(&mut self) -> Vec<StreamFinding> {
        self.free_with(Api::cuMemFreeAsync, P, B).sync(B).destroy(A).destroy(B);
        self.finish()
    }
}

fn checks(found: &[StreamFinding]) -> Vec<&'static str> {
    found.iter().map(|f| f.check.name()).collect()
}

#[test]
fn a_launch_records_the_events_of_its_graph_s_external_record_nodes() {
    let run = |flags: u32| {
        let mut r = two_streams(1);
        r.event(E)
            .capture_on(A, 1, 0)
            .launch(A, P)
            .record_flags(E, A, flags)
            .capture_on(A, 0, G)
            .instantiate(G, X)
            .launch_graph(X, A)
            // B follows the launch through the event; the host waits for B only.
            .wait_flags(B, E, 0)
            .launch(B, P)
            .event_destroy(E);
        r.end()
    };
    assert_eq!(checks(&run(EXTERNAL)), Vec::<&str>::new());
    // Twin: recorded in the capture without the flag, the event is the capture's own and no
    // launch records it: B's wait orders nothing and the launch is never waited for.
    let found = run(0);
    assert_eq!(
        checks(&found),
        vec!["wait-on-unrecorded-event", "unsynchronized-at-exit"],
        "{found:#?}"
    );
}

#[test]
fn a_launch_waits_for_the_events_of_its_graph_s_external_wait_nodes() {
    let run = |flags: u32| {
        let mut r = two_streams(1);
        r.event(E)
            .event(E + 1)
            .launch(B, P)
            .record(E, B)
            // The capture: a wait node for E (or, without the flag, a join that changes
            // nothing: E was recorded outside any capture).
            .capture_on(A, 1, 0)
            .wait_flags(A, E, flags)
            .capture_on(A, 0, G)
            .instantiate(G, X)
            .launch_graph(X, A)
            .record(E + 1, A)
            // The host waits for A's launch only; B's kernel is known done through it.
            .sync_on(super::MAIN, Api::cuEventSynchronize, 0, E + 1)
            .event_destroy(E)
            .event_destroy(E + 1)
            .destroy(A)
            .destroy(B);
        r.finish()
    };
    assert_eq!(checks(&run(EXTERNAL)), Vec::<&str>::new());
    let found = run(0);
    assert_eq!(checks(&found), vec!["unsynchronized-at-exit"], "{found:#?}");
    assert_eq!(found[0].op.stream, StreamName::Handle(B));
}

#[test]
fn an_executable_graph_made_from_a_graph_without_event_nodes_records_nothing() {
    let mut r = two_streams(1);
    r.event(E)
        .capture_on(A, 1, 0)
        .record_flags(E, A, EXTERNAL)
        .capture_on(A, 0, G)
        // Another capture ends with a graph at the same handle, with no event node.
        .capture_on(A, 1, 0)
        .launch(A, P)
        .capture_on(A, 0, G)
        .instantiate(G, X)
        .launch_graph(X, A)
        .wait_flags(B, E, 0)
        .launch(B, P)
        .event_destroy(E);
    let found = r.end();
    assert_eq!(
        checks(&found),
        vec!["wait-on-unrecorded-event", "unsynchronized-at-exit"],
        "{found:#?}"
    );
}

#[test]
fn a_launch_follows_the_last_launch_of_the_same_executable_graph_on_any_stream() {
    let run = |second: u64| {
        let mut r = two_streams(1);
        r.launch(A, P)
            .instantiate(G, X)
            .instantiate(G, X + 1)
            .launch_graph(X, A)
            // The same executable graph again (or, the twin, another made from the same
            // graph, which may run at once): on B, after A's kernel through the first launch.
            .launch_graph(second, B)
            .launch(B, P);
        r.end()
    };
    assert_eq!(checks(&run(X)), Vec::<&str>::new());
    let found = run(X + 1);
    assert_eq!(
        checks(&found),
        vec!["cross-stream-race", "unordered-free", "unsynchronized-at-exit"],
        "{found:#?}"
    );
}

#[test]
fn an_executable_graph_instantiated_at_a_handle_seen_before_has_no_launches_yet() {
    let mut r = two_streams(1);
    r.launch(A, P)
        .instantiate(G, X)
        .launch_graph(X, A)
        // Destroyed, and a new executable graph at the same handle: its first launch follows
        // nothing but its stream.
        .instantiate(G, X)
        .launch_graph(X, B)
        .launch(B, P);
    let found = r.end();
    assert_eq!(
        checks(&found),
        vec!["cross-stream-race", "unordered-free", "unsynchronized-at-exit"],
        "{found:#?}"
    );
}

impl Run {
    /// Executable graph `exec` whose one node touches `len` bytes at `addr` in `mode`
    /// (`GraphAccesses::KERNEL`, `WRITE` or `READ`).
    fn graph_touching(&mut self, exec: u64, addr: u64, len: u64, mode: u64) -> &mut Run {
        let nodes = vec![0x6e00, 0, addr, GraphAccesses::encode(len, mode)];
        self.r(GraphAccesses {
            exec,
            nodes: Addrs(std::borrow::Cow::Owned(nodes)),
        })
        .instantiate(G, exec)
    }
}

/// A graph launch touches what its nodes touch: a kernel node's parameter racing with a
/// kernel launch is a warning, as two kernel launches are; a graph's memset racing with a
/// kernel, or a graph's kernel with a memset, is an error; a launch ordered after the other
/// stream's work is no race.
#[test]
fn a_graph_launch_races_by_the_modes_of_its_nodes() {
    let severity = |mode: u64, side_memset: bool, ordered: bool| {
        let mut r = two_streams(1);
        r.graph_touching(X, P, 64, mode);
        if side_memset {
            r.copy(Api::cuMemsetD8Async, B, P, 0, 64);
        } else {
            r.launch(B, P);
        }
        if ordered {
            r.event(E).record(E, B).wait(A, E).r(EventDestroy {
                api: Api::cuEventDestroy_v2,
                result: CuResult::SUCCESS,
                event: Event(E),
            });
        }
        r.launch_graph(X, A).sync(A);
        let found = r.end();
        assert!(found.len() <= 1, "{found:#?}");
        found.first().map(|f| (f.check.name(), f.is_error(), f.kernels_only()))
    };
    let race = "cross-stream-race";
    assert_eq!(severity(GraphAccesses::KERNEL, false, false), Some((race, false, true)));
    assert_eq!(severity(GraphAccesses::KERNEL, true, false), Some((race, true, false)));
    assert_eq!(severity(GraphAccesses::WRITE, false, false), Some((race, true, false)));
    assert_eq!(severity(GraphAccesses::READ, true, false), Some((race, true, false)));
    // Two reads, and ordered work, are no race.
    let mut r = two_streams(1);
    r.graph_touching(X, P, 64, GraphAccesses::READ)
        .copy(Api::cuMemcpyDtoDAsync_v2, B, 0x9000, P, 64)
        .launch_graph(X, A)
        .sync(A);
    assert!(r.end().is_empty());
    assert_eq!(severity(GraphAccesses::WRITE, false, true), None);
}

/// A race with a graph launch names the graph's node at fault, where it was captured: the
/// node whose access races, not merely some node of the graph.
#[test]
fn a_graph_launch_s_race_names_its_node() {
    let named = |first: u64, second: u64| {
        let mut r = two_streams(1);
        for (node, stack) in [(0x6e01, 31), (0x6e02, 32)] {
            r.r(GraphNode {
                api: Api::cuLaunchKernel,
                graph: G,
                node,
                kind: GraphNode::KERNEL,
                stack: StackId(stack),
            });
        }
        let nodes = vec![
            0x6e01,
            0,
            first,
            GraphAccesses::encode(1, GraphAccesses::KERNEL),
            0x6e02,
            0,
            second,
            GraphAccesses::encode(1, GraphAccesses::KERNEL),
        ];
        r.r(GraphAccesses {
            exec: X,
            nodes: Addrs(std::borrow::Cow::Owned(nodes)),
        })
        .instantiate(G, X);
        r.copy(Api::cuMemsetD8Async, B, P, 0, 64);
        r.launch_graph(X, A).launch_graph(X, A).sync(A);
        let found = r.end();
        assert_eq!(checks(&found), ["cross-stream-race"], "{found:#?}");
        let f = &found[0];
        assert_eq!(f.nodes[1], None);
        let n = f.nodes[0].expect("a named node");
        assert!(n.captured() && n.api == Api::cuLaunchKernel && n.kind == GraphNode::KERNEL);
        n.stack.0
    };
    // 0x100 is no tracked memory.
    assert_eq!(named(P, 0x100), 31);
    assert_eq!(named(0x100, P + 8), 32);

    // Without GraphNode records (an older trace, a cloned graph) the race names no node.
    let mut r = two_streams(1);
    r.graph_touching(X, P, 64, GraphAccesses::KERNEL);
    r.copy(Api::cuMemsetD8Async, B, P, 0, 64);
    r.launch_graph(X, A).sync(A);
    let found = r.end();
    assert_eq!(checks(&found), ["cross-stream-race"]);
    assert_eq!(found[0].nodes, [None, None]);
}
