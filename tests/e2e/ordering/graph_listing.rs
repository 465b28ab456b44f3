//! What the shim lists of a graph at instantiation, as the trace shows it: edges, what kernel,
//! copy and memset nodes touch, where each node came from, and event nodes.

use gpuleak_e2e::TempDir;
use serde_json::Value;

use super::traced;
use crate::trace::{dump, hex, of_type};

/// What the shim lists of a graph's order: each edge of the graph and of the child graphs
/// within it (`cuGraphGetEdges_v2`), and which child graph node each child graph's nodes
/// belong to, named by the handles `GraphAccesses` entries use.
#[test]
fn the_shim_lists_a_graph_s_edges_and_its_child_graphs_nodes() {
    let dir = TempDir::new();
    let listed = |mode: &str| -> (Vec<[u64; 4]>, Vec<[u64; 3]>) {
        let records = dump(&traced(&dir, "report_graph_races", &[mode], &[]));
        let accesses: Vec<u64> = of_type(&records, "GraphAccesses")
            .iter()
            .flat_map(|r| r["nodes"].as_array().unwrap().iter().map(hex))
            .collect();
        let edges = of_type(&records, "GraphEdges");
        assert_eq!(edges.len(), 1, "{mode}: {edges:#?}");
        let entries: Vec<u64> = edges[0]["entries"].as_array().unwrap().iter().map(hex).collect();
        let mut triples: Vec<[u64; 3]> = entries.chunks(3).map(|t| [t[0], t[1], t[2]]).collect();
        triples.sort();
        (accesses.chunks(4).map(|q| [q[0], q[1], q[2], q[3]]).collect(), triples)
    };
    // The kernel node's one entry is its parameter (mode 3); the memcpy node's are a write
    // and a read (mode 1); the memset node's a write.
    const MODE: u32 = 62;
    let node_of = |q: &[[u64; 4]], mode: u64, count: usize| -> [u64; 2] {
        let nodes: Vec<[u64; 2]> = q
            .iter()
            .filter(|e| e[3] >> MODE == mode)
            .map(|e| [e[0], e[1]])
            .collect();
        assert_eq!(nodes.len(), count, "{q:x?}");
        nodes[0]
    };
    let (q, edges) = listed("hand-race");
    let (kernel, copy) = (node_of(&q, 3, 1)[0], node_of(&q, 1, 1)[0]);
    let set = q.iter().map(|e| e[0]).find(|&n| n != kernel && n != copy).unwrap();
    let mut want = vec![[0, set, kernel], [0, set, copy]];
    want.sort();
    assert_eq!(edges, want);
    let (q, edges) = listed("hand-ok");
    let (kernel, copy) = (node_of(&q, 3, 1)[0], node_of(&q, 1, 1)[0]);
    let set = q.iter().map(|e| e[0]).find(|&n| n != kernel && n != copy).unwrap();
    let mut want = vec![[0, set, kernel], [0, kernel, copy]];
    want.sort();
    assert_eq!(edges, want);
    // The child graph's kernel node is owned by the child graph node, which depends on the
    // memset node, and belongs to it (what 1).
    let (q, edges) = listed("child-race");
    let [inner, owner] = node_of(&q, 3, 1);
    let copy = node_of(&q, 1, 1)[0];
    let set = q.iter().map(|e| e[0]).find(|&n| n != inner && n != copy).unwrap();
    let mut want = vec![[0, set, owner], [0, set, copy], [1, owner, inner]];
    want.sort();
    assert_eq!(edges, want);
}

/// What the shim lists of what a graph's nodes touch: each node, its owner, and its ranges
/// with their modes; and a node's new parameters after an executable-graph setter.
#[test]
fn the_shim_lists_what_kernel_copy_and_memset_nodes_touch() {
    let dir = TempDir::new();
    let quads = |r: &Value| -> Vec<[u64; 4]> {
        let v: Vec<u64> = r["nodes"].as_array().unwrap().iter().map(hex).collect();
        assert_eq!(v.len() % 4, 0, "{r:#}");
        v.chunks(4).map(|q| [q[0], q[1], q[2], q[3]]).collect()
    };
    const MODE: u32 = 62;
    // A copy node: destination written (2), source read (1), 4096 bytes each.
    let records = dump(&traced(&dir, "report_graph_accesses", &["copy-read"], &[]));
    let listed = of_type(&records, "GraphAccesses");
    assert_eq!(listed.len(), 1, "{listed:#?}");
    let q = quads(listed[0]);
    assert_eq!(q.len(), 2, "{q:x?}");
    assert_eq!(q[0][0], q[1][0], "one node");
    assert_eq!((q[0][1], q[0][3]), (0, 2 << MODE | 4096), "{q:x?}");
    assert_eq!((q[1][1], q[1][3]), (0, 1 << MODE | 4096), "{q:x?}");
    // A kernel node in a child graph: its pointer parameter (mode 3, one byte), owned by the
    // child graph node; then the setter's new parameters for the node it named.
    let records = dump(&traced(&dir, "report_graph_accesses", &["child-race"], &[]));
    let q = quads(of_type(&records, "GraphAccesses")[0]);
    assert_eq!(q.len(), 1, "{q:x?}");
    assert!(q[0][1] != 0 && q[0][1] != q[0][0], "{q:x?}");
    assert_eq!(q[0][3], 3 << MODE | 1);
    let records = dump(&traced(&dir, "report_graph_accesses", &["exec-kernel"], &[]));
    let listed = of_type(&records, "GraphAccesses");
    assert_eq!(listed.len(), 2, "{listed:#?}");
    let (before, after) = (quads(listed[0]), quads(listed[1]));
    assert_eq!(before[0][0], after[0][0], "the same node");
    assert_ne!(before[0][2], after[0][2], "another buffer");
    let updates = of_type(&records, "GraphUpdate");
    assert_eq!(updates.len(), 1, "{updates:#?}");
    assert_eq!(updates[0]["api"], "cuGraphExecKernelNodeSetParams");
    assert_eq!(updates[0]["what"].as_u64(), Some(4));
    assert_eq!(updates[0]["node"].as_u64(), Some(before[0][0]));
    // Disabling: a GraphUpdate of what 5 with the flag in `event`.
    let records = dump(&traced(&dir, "report_graph_accesses", &["reenabled"], &[]));
    let flags: Vec<(Option<u64>, Option<u64>)> = of_type(&records, "GraphUpdate")
        .iter()
        .map(|u| (u["what"].as_u64(), u["event"].as_u64()))
        .collect();
    assert_eq!(flags, [(Some(5), Some(0)), (Some(5), Some(1))]);
}

/// Where a graph's nodes came from: a `GraphNode` record after each captured launch, copy
/// and memset, naming the capture's graph and the node the listing later names, one after
/// each node added by hand, and one with node 0 when a graph is destroyed.
#[test]
fn the_shim_says_which_call_captured_or_added_each_node() {
    let dir = TempDir::new();
    let nodes = |records: &[Value]| -> Vec<(String, u64, u64, u64)> {
        of_type(records, "GraphNode")
            .iter()
            .map(|n| {
                (
                    n["api"].as_str().unwrap().to_string(),
                    n["graph"].as_u64().unwrap(),
                    n["node"].as_u64().unwrap(),
                    n["kind"].as_u64().unwrap(),
                )
            })
            .collect()
    };
    let listed_node = |records: &[Value]| -> u64 { hex(&of_type(records, "GraphAccesses")[0]["nodes"][0]) };
    let instantiated_graph = |records: &[Value]| -> u64 { of_type(records, "GraphExec")[0]["graph"].as_u64().unwrap() };
    for (mode, api, kind) in [
        ("unwaited", "cuLaunchKernel", 0),
        ("copy-read", "cuMemcpyDtoDAsync_v2", 1),
        ("memset-read", "cuMemsetD32Async", 2),
        ("hand", "cuGraphAddKernelNode_v2", 0),
    ] {
        let records = dump(&traced(&dir, "report_graph_accesses", &[mode], &[]));
        let made = nodes(&records);
        let graph = instantiated_graph(&records);
        assert_eq!(
            made,
            [
                (api.to_string(), graph, listed_node(&records), kind),
                ("cuGraphDestroy".to_string(), graph, 0, 0)
            ],
            "{mode}"
        );
        // Made with a stack, whatever GPULEAK_SYNC_STACKS says; destroyed without one.
        let stacks: Vec<u64> = of_type(&records, "GraphNode")
            .iter()
            .map(|n| n["stack"].as_u64().unwrap())
            .collect();
        assert!(stacks[0] != 0 && stacks[1] == 0, "{mode}: {stacks:?}");
    }
    // Outside a capture, launches, copies and memsets make no node.
    let records = dump(&traced(&dir, "report_graph_accesses", &["waited"], &[]));
    assert_eq!(nodes(&records).len(), 2, "{:?}", nodes(&records));
}

/// What the shim lists of a graph's event nodes: each node, its event and the child graph
/// node that holds it, at the instantiation and again after a child graph's update.
#[test]
fn the_shim_lists_event_nodes_with_the_child_graph_node_that_holds_them() {
    let dir = TempDir::new();
    let trace = traced(&dir, "report_graph_event_nodes", &["child"], &[]);
    let records = dump(&trace);
    let listed = of_type(&records, "GraphEvents");
    assert_eq!(listed.len(), 2, "{listed:#?}");
    let triple = |r: &Value| {
        let v: Vec<u64> = r["records"].as_array().unwrap().iter().map(hex).collect();
        assert_eq!(v.len(), 3, "{r:#}");
        assert!(r["waits"].as_array().unwrap().is_empty(), "{r:#}");
        (v[0], v[1], v[2])
    };
    let (node, other, owner) = triple(listed[0]);
    let (node2, done, owner2) = triple(listed[1]);
    assert!(node != 0 && owner != 0 && node != owner, "{:#}", listed[0]);
    assert_eq!(
        owner2, owner,
        "the update's nodes belong to the child graph node it named"
    );
    assert_ne!(node2, node, "a node of the new child graph");
    assert_ne!(done, other);
    let updates = of_type(&records, "GraphUpdate");
    assert_eq!(updates.len(), 1, "{updates:#?}");
    let u = updates[0];
    assert_eq!(u["api"], "cuGraphExecChildGraphNodeSetParams");
    assert_eq!((u["what"].as_u64(), u["listed"].as_u64()), (Some(3), Some(1)), "{u:#}");
    assert_eq!(u["node"].as_u64(), Some(owner));
    // 601 record nodes: two records, of 512 and 89.
    let trace = traced(&dir, "report_graph_event_nodes", &["many"], &[]);
    let records = dump(&trace);
    let sizes: Vec<usize> = of_type(&records, "GraphEvents")
        .iter()
        .map(|r| r["records"].as_array().unwrap().len() / 3)
        .collect();
    assert_eq!(sizes, [512, 89]);
}
