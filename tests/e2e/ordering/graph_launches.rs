//! Graph launches between streams (a capture joined through an event, event record and wait
//! nodes, what a launch touches) and races inside one graph (`graph-race`).

use std::process::Command;

use gpuleak_e2e::{gpuleak_bin, TempDir};
use serde_json::Value;

use super::{report_json, traced};
use crate::trace::checks;

/// A capture that forks onto a side stream through an event and joins back: the side stream's
/// work and its stream-ordered allocation are graph nodes, so there is no finding (its work
/// never waited for) and no leak (a graph address counted as memory); after the capture ended
/// the side stream runs for real, and real work on it that nothing waits for is found.
#[test]
fn a_stream_that_joins_a_capture_through_an_event_is_capturing_until_the_capture_ends() {
    let dir = TempDir::new();
    let r = report_json(&traced(&dir, "report_capture_join", &[], &[]));
    assert!(r["findings"].as_array().unwrap().is_empty(), "{r:#}");
    assert!(r["leaks"].as_array().unwrap().is_empty(), "{r:#}");
    assert_eq!(
        r["summary"]["allocations"], 1,
        "the captured allocation is no memory: {r:#}"
    );
    // The same, captured into a graph the program made (cuStreamBeginCaptureToGraph).
    let r = report_json(&traced(&dir, "report_capture_join", &["to-graph"], &[]));
    assert!(r["findings"].as_array().unwrap().is_empty(), "{r:#}");
    assert!(r["leaks"].as_array().unwrap().is_empty(), "{r:#}");
    assert_eq!(r["summary"]["allocations"], 1, "{r:#}");
    let r = report_json(&traced(&dir, "report_capture_join", &["leave"], &[]));
    let findings = r["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(findings[0]["check"], "unsynchronized-at-exit");
    let message = findings[0]["message"].as_str().unwrap();
    assert!(message.contains("the last of it: cuMemsetD32Async"), "{message}");
}

/// A graph that records an event in an external record node hands its work to the streams
/// that wait for the event: each launch records it. Without the flag the record is the
/// capture's own, so the other stream's wait is a no-op and nothing waits for the launch,
/// whose memset the other stream reads and frees.
#[test]
fn a_launch_records_the_events_of_its_graph_s_external_record_nodes() {
    let dir = TempDir::new();
    let r = report_json(&traced(&dir, "report_graph_events", &[], &[]));
    assert!(r["findings"].as_array().unwrap().is_empty(), "{r:#}");
    assert!(r["leaks"].as_array().unwrap().is_empty(), "{r:#}");
    // The launch's memset races with the reader, whose free is not ordered after it either.
    let r = report_json(&traced(&dir, "report_graph_events", &["internal"], &[]));
    let checks = checks(&r);
    assert_eq!(
        checks,
        [
            "cross-stream-race",
            "unordered-free",
            "unsynchronized-at-exit",
            "wait-on-unrecorded-event"
        ],
        "{r:#}"
    );
    for f in r["findings"].as_array().unwrap()[..3].iter() {
        let message = f["message"].as_str().unwrap();
        assert!(message.contains("cuGraphLaunch"), "{message}");
    }
}

/// Event nodes added to a graph by hand: each launch records (or waits for) the event a node
/// names, as the executable graph has it after the calls that change it (a node's event, a
/// whole update, a child graph's); and a launch follows the last launch of its executable
/// graph. Correct programs report nothing; a graph changed to record another event, a failed
/// update, a wait node for another event, or a second executable graph leave the reader
/// unordered.
#[test]
fn a_launch_records_and_waits_for_the_events_of_its_graph_s_nodes_as_last_changed() {
    let dir = TempDir::new();
    for mode in [
        "record",
        "many",
        "generic",
        "exec-set",
        "exec-params",
        "update",
        "update-v1",
        "child",
        "child-params",
        "update-set",
        "child-set",
        "wait",
        "relaunch",
    ] {
        let r = report_json(&traced(&dir, "report_graph_event_nodes", &[mode], &[]));
        assert!(r["findings"].as_array().unwrap().is_empty(), "{mode}: {r:#}");
        assert!(r["leaks"].as_array().unwrap().is_empty(), "{mode}: {r:#}");
    }
    for (mode, want) in [
        ("stale", &["cross-stream-race", "wait-on-unrecorded-event"][..]),
        ("update-failed", &["cross-stream-race", "wait-on-unrecorded-event"]),
        ("no-wait", &["cross-stream-race"]),
        ("two-execs", &["cross-stream-race", "unsynchronized-at-exit"]),
    ] {
        let r = report_json(&traced(&dir, "report_graph_event_nodes", &[mode], &[]));
        let found = checks(&r);
        for check in want {
            assert!(found.contains(check), "{mode}: {check} not in {found:?}: {r:#}");
        }
    }
}

/// A graph launch touches what its kernel, memcpy and memset nodes touch, as the executable
/// graph has them after the calls that change them (a node's parameters, its enabled state, a
/// whole update, a child graph's), in the graph as instantiated (built by hand and changed
/// before instantiation too). A stream that touches the same memory without waiting for the
/// launch races with it; one that touches memory the graph no longer touches, or only reads
/// what the graph only reads, does not.
#[test]
fn a_graph_launch_touches_what_its_nodes_touch_as_last_changed() {
    let dir = TempDir::new();
    for mode in [
        "waited",
        "exec-kernel",
        "exec-kernel-v2",
        "exec-params",
        "exec-memcpy",
        "exec-memset",
        "disabled",
        "update",
        "child",
        "hand",
        "copy-read",
        "fork",
        "late",
    ] {
        let r = report_json(&traced(&dir, "report_graph_accesses", &[mode], &[]));
        assert!(r["findings"].as_array().unwrap().is_empty(), "{mode}: {r:#}");
        assert!(r["leaks"].as_array().unwrap().is_empty(), "{mode}: {r:#}");
    }
    // A graph's kernel node and the other stream's kernel: neither is known to write, a
    // warning; a graph's copy or memset against a memset or copy: an error. Each names the
    // graph's node at fault and where it was captured or added (the function, and the line
    // of `main` that called it), but a child graph's nodes, which are copies the driver made.
    let source = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/clients/report_graph_accesses.c"))
        .expect("the client's source");
    let line_of = |text: &str| -> u64 {
        let found = source.lines().position(|l| l.trim_start().starts_with(text));
        found.unwrap_or_else(|| panic!("no line has {text:?}")) as u64 + 1
    };
    let first = line_of("g = kernel_graph(X, 7);");
    for (mode, severity, node, site) in [
        (
            "unwaited",
            "warning",
            "kernel node captured from cuLaunchKernel",
            Some(("kernel_graph", first)),
        ),
        (
            "exec-stale",
            "warning",
            "kernel node captured from cuLaunchKernel",
            Some(("kernel_graph", first)),
        ),
        (
            "reenabled",
            "warning",
            "kernel node captured from cuLaunchKernel",
            Some(("kernel_graph", first)),
        ),
        // The update's graph's node, whose parameters the launch ran.
        (
            "update-race",
            "warning",
            "kernel node captured from cuLaunchKernel",
            Some(("kernel_graph", line_of("other = kernel_graph(Y, 7);"))),
        ),
        ("child-race", "warning", "", None),
        (
            "hand-race",
            "warning",
            "kernel node added by cuGraphAddKernelNode_v2",
            Some(("main", line_of("CHECK(cuGraphAddKernelNode_v2(&node"))),
        ),
        (
            "copy-write",
            "error",
            "memcpy node captured from cuMemcpyDtoDAsync_v2",
            Some(("copy_graph", line_of("g = copy_graph(Z, X);"))),
        ),
        (
            "memset-read",
            "error",
            "memset node captured from cuMemsetD32Async",
            Some(("memset_graph", line_of("g = memset_graph(X);"))),
        ),
        (
            "fork-race",
            "warning",
            "kernel node captured from cuLaunchKernel",
            Some(("fork_graph", line_of("g = fork_graph();"))),
        ),
    ] {
        let r = report_json(&traced(&dir, "report_graph_accesses", &[mode], &[]));
        let findings = r["findings"].as_array().unwrap();
        assert_eq!(checks(&r), ["cross-stream-race"], "{mode}: {r:#}");
        assert_eq!(findings[0]["severity"], severity, "{mode}: {r:#}");
        let message = findings[0]["message"].as_str().unwrap();
        assert!(message.contains("cuGraphLaunch"), "{mode}: {message}");
        let related = findings[0]["related_stacks"].as_array().unwrap();
        let named: Vec<(&str, u64)> = related
            .iter()
            .filter(|s| s["role"].as_str().unwrap().contains("graph node"))
            .map(|s| {
                let frames = s["stack"].as_array().unwrap();
                // The call's function, and the line of main that called it (the same frame
                // for a call made in main).
                let caller = frames
                    .iter()
                    .find(|f| f["function"] == "main")
                    .expect("main in the stack");
                (
                    frames[0]["function"].as_str().unwrap(),
                    caller["line"].as_u64().unwrap(),
                )
            })
            .collect();
        match site {
            Some(site) => {
                assert!(message.contains(&format!("(its {node})")), "{mode}: {message}");
                assert_eq!(named, [site], "{mode}: {related:#?}");
                let role = if node.contains("captured") {
                    "other graph node captured at"
                } else {
                    "other graph node added at"
                };
                assert!(related.iter().any(|s| s["role"] == role), "{mode}: {related:#?}");
            }
            None => {
                assert!(!message.contains("(its "), "{mode}: {message}");
                assert!(named.is_empty(), "{mode}: {related:#?}");
            }
        }
    }
    // The launch as the later side: its node's capture stack is the finding's own stack.
    let r = report_json(&traced(&dir, "report_graph_accesses", &["late-race"], &[]));
    assert_eq!(checks(&r), ["cross-stream-race"], "{r:#}");
    let f = &r["findings"][0];
    let message = f["message"].as_str().unwrap();
    assert!(
        message.starts_with("cuGraphLaunch on stream")
            && message.contains("(its kernel node captured from cuLaunchKernel) and the earlier cuLaunchKernel"),
        "{message}"
    );
    assert_eq!(f["stack_role"], "graph node captured at", "{f:#}");
    let frames = f["stack"].as_array().unwrap();
    assert_eq!(frames[0]["function"], "kernel_graph", "{f:#}");
    assert!(
        frames
            .iter()
            .any(|fr| fr["function"] == "main" && fr["line"].as_u64() == Some(first)),
        "{f:#}"
    );
}

/// Races inside one graph (`graph-race`): a capture that forks onto a side stream and writes
/// on the main stream what the side stream still reads, nodes added by hand without the
/// dependency they need, a child graph's node likewise, and two kernel nodes on two branches;
/// each found once for two launches, naming both nodes and where they were captured or added;
/// each correct twin reports nothing. `gpuleak check` fails on one and a suppression naming
/// the capturing function silences it.
#[test]
fn races_inside_one_graph_are_found_and_correct_twins_are_silent() {
    let dir = TempDir::new();
    for mode in ["side-ok", "hand-ok", "child-ok", "kernels-ok", "mem-ok"] {
        let r = report_json(&traced(&dir, "report_graph_races", &[mode], &[]));
        assert!(r["findings"].as_array().unwrap().is_empty(), "{mode}: {r:#}");
        assert!(r["leaks"].as_array().unwrap().is_empty(), "{mode}: {r:#}");
    }
    let source = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/clients/report_graph_races.c"))
        .expect("the client's source");
    let line_of = |text: &str| -> u64 {
        let found = source.lines().position(|l| l.trim_start().starts_with(text));
        found.unwrap_or_else(|| panic!("no line has {text:?}")) as u64 + 1
    };
    let side = ("side_graph", line_of("g = side_graph(is(mode, \"side-ok\")"));
    let mem = ("side_graph", line_of("g = side_graph(is(mode, \"mem-ok\")"));
    let hand = ("hand_graph", line_of("g = hand_graph(NULL"));
    let child = ("hand_graph", line_of("g = hand_graph(child"));
    let kernels = ("kernels_graph", line_of("g = kernels_graph("));
    for (mode, severity, nodes, sites) in [
        (
            "side-race",
            "error",
            [
                "the memcpy node captured from cuMemcpyDtoDAsync_v2",
                "the memset node captured from cuMemsetD32Async",
            ],
            vec![side, side],
        ),
        // Memory the graph allocates (an allocation node) races as other memory does.
        (
            "mem-race",
            "error",
            [
                "the memcpy node captured from cuMemcpyDtoDAsync_v2",
                "the memset node captured from cuMemsetD32Async",
            ],
            vec![mem, mem],
        ),
        (
            "hand-race",
            "error",
            [
                "the kernel node added by cuGraphAddKernelNode_v2",
                "the memcpy node added by cuGraphAddMemcpyNode",
            ],
            vec![hand, hand],
        ),
        // The child graph's kernel node is the driver's copy: unnamed.
        (
            "child-race",
            "error",
            ["a kernel node", "the memcpy node added by cuGraphAddMemcpyNode"],
            vec![child],
        ),
        (
            "kernels",
            "warning",
            [
                "the kernel node captured from cuLaunchKernel",
                "the kernel node captured from cuLaunchKernel",
            ],
            vec![kernels, kernels],
        ),
    ] {
        let trace = traced(&dir, "report_graph_races", &[mode], &[]);
        let r = report_json(&trace);
        assert_eq!(checks(&r), ["graph-race"], "{mode}: {r:#}");
        let f = &r["findings"][0];
        assert_eq!(
            (f["severity"].as_str(), f["count"].as_u64()),
            (Some(severity), Some(1)),
            "{mode}: {f:#}"
        );
        let message = f["message"].as_str().unwrap();
        assert!(message.starts_with("cuGraphLaunch on stream 0x"), "{mode}: {message}");
        for node in nodes {
            assert!(message.contains(node), "{mode}: {message}");
        }
        assert!(
            message.contains("with no path between them in the graph"),
            "{mode}: {message}"
        );
        let allocated_in = if mode == "mem-race" { "side_graph" } else { "main" };
        assert_eq!(f["allocation_stack"][0]["function"], allocated_in, "{mode}: {f:#}");
        // Where each named node was made: its function, and the line of main that called it.
        let mut stacks: Vec<&Value> = Vec::new();
        if f["stack_role"].as_str().is_some_and(|r| r.starts_with("graph node")) {
            stacks.push(&f["stack"]);
        }
        for s in f["related_stacks"].as_array().unwrap() {
            assert!(
                s["role"].as_str().unwrap().starts_with("other graph node"),
                "{mode}: {f:#}"
            );
            stacks.push(&s["stack"]);
        }
        let named: Vec<(&str, u64)> = stacks
            .iter()
            .map(|s| {
                let frames = s.as_array().unwrap();
                let caller = frames.iter().find(|fr| fr["function"] == "main").expect("main");
                let made_in = frames
                    .iter()
                    .map(|fr| fr["function"].as_str().unwrap_or(""))
                    .find(|name| name.ends_with("_graph"))
                    .expect("the graph's function");
                (made_in, caller["line"].as_u64().unwrap())
            })
            .collect();
        assert_eq!(named, sites, "{mode}: {f:#}");
        if mode == "side-race" {
            let run = |supp: &str| {
                let file = dir.path().join("graph.supp");
                std::fs::write(&file, supp).unwrap();
                let out = Command::new(gpuleak_bin())
                    .args(["check", "--suppressions"])
                    .arg(&file)
                    .arg(&trace)
                    .output()
                    .unwrap();
                out.status.code()
            };
            assert_eq!(run("cross-stream-race:side_graph\n"), Some(1));
            assert_eq!(run("graph-race:side_graph\n"), Some(0));
        }
    }
}
