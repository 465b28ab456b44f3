//! Frees inside one graph (`report_graph_frees`): a free node and the nodes of the same graph
//! that use the memory it frees, found from what the shim lists at instantiation (the memory
//! nodes by handle, `GraphMemNodes`; where each was captured or added, `GraphNode`).

use gpuleak_e2e::TempDir;
use serde_json::Value;

use super::suppressions::check;
use super::{report_json, traced};
use crate::trace::{checks, dump, hex, of_type};

const CLIENT: &str = "report_graph_frees";

/// The line of the client's source that starts with `text` (after indentation), and the
/// function it is in.
fn line_of(text: &str) -> u64 {
    let source = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/clients/report_graph_frees.c"))
        .expect("the client's source");
    let found = source.lines().position(|l| l.trim_start().starts_with(text));
    found.unwrap_or_else(|| panic!("no line has {text:?}")) as u64 + 1
}

/// The innermost frame of a stack that is in the client: (function, line).
fn made_at(stack: &Value) -> (String, u64) {
    let frame = stack
        .as_array()
        .unwrap()
        .iter()
        .find(|f| {
            f["function"]
                .as_str()
                .is_some_and(|n| n.ends_with("_graph") || n == "fill_on")
        })
        .expect("a frame of the client");
    (
        frame["function"].as_str().unwrap().to_string(),
        frame["line"].as_u64().unwrap(),
    )
}

#[test]
fn frees_inside_one_graph_are_found_and_correct_twins_are_silent() {
    let dir = TempDir::new();
    for mode in ["fork-ok", "after-ok", "hand-ok", "generic-ok", "keep-ok"] {
        let r = report_json(&traced(&dir, CLIENT, &[mode], &[]));
        assert!(r["findings"].as_array().unwrap().is_empty(), "{mode}: {r:#}");
        assert!(r["leaks"].as_array().unwrap().is_empty(), "{mode}: {r:#}");
    }
    // (mode, check, the node at fault, the other node)
    for (mode, check, this, other) in [
        (
            "fork-free",
            "unordered-free",
            "runs the free node captured from cuMemFreeAsync, which frees",
            "with no path to it from the memcpy node captured from cuMemcpyDtoDAsync_v2",
        ),
        (
            "after-free",
            "use-after-free",
            "runs the kernel node captured from cuLaunchKernel, which touches",
            "already freed by the free node captured from cuMemFreeAsync",
        ),
        (
            "hand-race",
            "graph-race",
            "runs the kernel node added by cuGraphAddKernelNode_v2, which touches",
            "with no path between it and the allocation node added by cuGraphAddMemAllocNode",
        ),
        (
            "generic-free",
            "unordered-free",
            "runs the free node added by cuGraphAddNode, which frees",
            "with no path to it from the kernel node added by cuGraphAddKernelNode_v2",
        ),
    ] {
        let r = report_json(&traced(&dir, CLIENT, &[mode], &[]));
        assert_eq!(checks(&r), [check], "{mode}: {r:#}");
        let f = &r["findings"][0];
        assert_eq!(
            (f["severity"].as_str(), f["count"].as_u64()),
            (Some("error"), Some(1)),
            "{mode}: {f:#}"
        );
        let message = f["message"].as_str().unwrap();
        assert!(message.starts_with("cuGraphLaunch on stream 0x"), "{mode}: {message}");
        assert!(message.contains(this) && message.contains(other), "{mode}: {message}");
        assert!(message.contains("4096-byte graph allocation"), "{mode}: {message}");
        // Both nodes are named, so no setting is suggested for the launch's own stack.
        assert!(!message.contains("GPULEAK_"), "{mode}: {message}");
    }
    // Where the nodes were captured: the free node at fault (its own stack), the copy that
    // still reads (a related stack), the allocation.
    let r = report_json(&traced(&dir, CLIENT, &["fork-free"], &[]));
    let f = &r["findings"][0];
    assert_eq!(f["stack_role"], "graph node captured at", "{f:#}");
    let free_line = line_of("CHECK(cuMemFreeAsync(p, A));");
    assert_eq!(made_at(&f["stack"]), ("fork_graph".into(), free_line), "{f:#}");
    let related = f["related_stacks"].as_array().unwrap();
    assert_eq!(related.len(), 1, "{f:#}");
    assert_eq!(related[0]["role"], "other graph node captured at", "{f:#}");
    let copy_line = line_of("CHECK(cuMemcpyDtoDAsync_v2(Z, p, N * 4, B));");
    assert_eq!(made_at(&related[0]["stack"]), ("fork_graph".into(), copy_line), "{f:#}");
    assert_eq!(made_at(&f["allocation_stack"]).0, "fork_graph", "{f:#}");
    // A use after free: the free node's stack is the free's.
    let r = report_json(&traced(&dir, CLIENT, &["after-free"], &[]));
    let f = &r["findings"][0];
    assert_eq!(made_at(&f["stack"]).0, "fill_on", "{f:#}");
    assert_eq!(made_at(&f["first_free_stack"]).0, "after_graph", "{f:#}");
}

#[test]
fn a_free_inside_a_graph_is_suppressed_as_an_unordered_free() {
    let dir = TempDir::new();
    let trace = traced(&dir, CLIENT, &["fork-free"], &[]);
    let run = |supp: &str| Some(check(&dir, &trace, supp, &[]).0);
    assert_eq!(run(""), Some(1));
    assert_eq!(run("graph-race:fork_graph\n"), Some(1));
    assert_eq!(run("unordered-free:fork_graph\n"), Some(0));
}

/// What the shim lists of a graph's memory nodes by handle (`GraphMemNodes`), and where each
/// was captured or added (`GraphNode` records of kind 10, an allocation node, and 11, a free
/// node).
#[test]
fn the_shim_names_each_memory_node_and_the_call_that_made_it() {
    let dir = TempDir::new();
    for (mode, alloc_api, free_api) in [
        ("fork-ok", "cuMemAllocAsync", "cuMemFreeAsync"),
        ("hand-ok", "cuGraphAddMemAllocNode", "cuGraphAddMemFreeNode"),
        ("generic-ok", "cuGraphAddNode", "cuGraphAddNode"),
    ] {
        let records = dump(&traced(&dir, CLIENT, &[mode], &[]));
        let listed = of_type(&records, "GraphMemNodes");
        assert_eq!(listed.len(), 1, "{mode}: {listed:#?}");
        let allocs: Vec<u64> = listed[0]["allocs"].as_array().unwrap().iter().map(hex).collect();
        let frees: Vec<u64> = listed[0]["frees"].as_array().unwrap().iter().map(hex).collect();
        assert_eq!(allocs.len(), 4, "{mode}: {allocs:x?}");
        assert_eq!(frees.len(), 3, "{mode}: {frees:x?}");
        // One allocation node of 4096 bytes at the top level, freed by the free node.
        assert_eq!((allocs[1], allocs[3]), (0, 4096), "{mode}");
        assert_eq!((frees[1], frees[2]), (0, allocs[2]), "{mode}");
        // The same address as the allocation's record and the GraphMem listing.
        let mem = of_type(&records, "GraphMem");
        assert_eq!(hex(&mem[0]["allocs"][0]), allocs[2], "{mode}");
        let graph = of_type(&records, "GraphExec")[0]["graph"].as_u64().unwrap();
        let made: Vec<(String, u64, u64, u64)> = of_type(&records, "GraphNode")
            .iter()
            .filter(|n| matches!(n["kind"].as_u64(), Some(10 | 11)))
            .map(|n| {
                (
                    n["api"].as_str().unwrap().to_string(),
                    n["graph"].as_u64().unwrap(),
                    n["node"].as_u64().unwrap(),
                    n["kind"].as_u64().unwrap(),
                )
            })
            .collect();
        assert_eq!(
            made,
            [
                (alloc_api.to_string(), graph, allocs[0], 10),
                (free_api.to_string(), graph, frees[0], 11)
            ],
            "{mode}"
        );
    }
}

/// Graph memory between a launch and the rest of the program: memory the graph keeps is
/// written by the launch for other streams, memory it frees is freed by the launch.
#[test]
fn graph_memory_is_allocated_and_freed_by_each_launch_for_other_streams() {
    let dir = TempDir::new();
    let r = report_json(&traced(&dir, CLIENT, &["keep-race"], &[]));
    assert_eq!(checks(&r), ["cross-stream-race"], "{r:#}");
    let f = &r["findings"][0];
    assert_eq!(
        (f["severity"].as_str(), f["count"].as_u64()),
        (Some("error"), Some(2)),
        "{f:#}"
    );
    let message = f["message"].as_str().unwrap();
    assert!(
        message.starts_with("cuMemcpyDtoDAsync_v2 on stream 0x")
            && message.contains("the earlier cuGraphLaunch on stream 0x")
            && message.contains("(its allocation node captured from cuMemAllocAsync)")
            && message.contains("4096-byte graph allocation"),
        "{message}"
    );
    let r = report_json(&traced(&dir, CLIENT, &["use-after"], &[]));
    assert_eq!(checks(&r), ["use-after-free"], "{r:#}");
    let f = &r["findings"][0];
    let message = f["message"].as_str().unwrap();
    assert!(
        message.starts_with("cuLaunchKernel on stream 0x")
            && message.contains("already freed by cuGraphLaunch on stream 0x")
            && message.contains("(its free node captured from cuMemFreeAsync)"),
        "{message}"
    );
    assert_eq!(made_at(&f["first_free_stack"]).0, "after_graph", "{f:#}");
}
