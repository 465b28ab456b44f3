//! The stream-ordering checks end to end: C programs on the simulated driver under the shim,
//! then `gpuleak report`. Every check has a program that must produce it exactly once and
//! correctly ordered twins that must produce nothing; a realistic two-stream pipeline must
//! produce no finding at all; and every hooked stream-ordering entry point is recorded under
//! its exact name.

use std::path::{Path, PathBuf};
use std::process::Command;

use gpuleak_e2e::{client, example, gpuleak_bin, shim_command, TempDir};
use serde_json::Value;

use crate::trace::{assert_ok, checks, dump, hex, of_type};

mod graph_frees;
mod later_calls;
mod suppressions;

/// Runs `name args...` under the shim (with extra environment) and returns its trace.
/// Traces `name` with creation stacks for streams and events (off by default), which the
/// findings below show.
fn traced(dir: &TempDir, name: &str, args: &[&str], env: &[(&str, &str)]) -> PathBuf {
    let trace = dir.path().join(format!("{name}-{}.trace", args.join("-")));
    let out = shim_command(client(name), &trace)
        .args(args)
        .env("GPULEAK_OBJECT_STACKS", "1")
        .envs(env.iter().copied())
        .output()
        .unwrap();
    assert_ok(&out);
    trace
}

fn report_json(trace: &Path) -> Value {
    let out = Command::new(gpuleak_bin())
        .args(["report", "--format", "json"])
        .arg(trace)
        .output()
        .unwrap();
    assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn findings_of(args: &[&str], env: &[(&str, &str)]) -> (Vec<Value>, Value) {
    let dir = TempDir::new();
    let r = report_json(&traced(&dir, "report_ordering", args, env));
    (r["findings"].as_array().unwrap().clone(), r)
}

/// Function names of a stack.
fn functions(stack: &Value) -> Vec<String> {
    stack
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["function"].as_str().unwrap_or("?").to_string())
        .collect()
}

fn related<'a>(f: &'a Value, role: &str) -> Option<&'a Value> {
    f["related_stacks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["role"] == role)
        .map(|r| &r["stack"])
}

const CHECKS: [(&str, &str); 7] = [
    ("cross-stream-race", "error"),
    ("unordered-free", "error"),
    ("use-after-free", "error"),
    ("wait-on-unrecorded-event", "warning"),
    ("stream-leak", "warning"),
    ("event-leak", "warning"),
    ("unsynchronized-at-exit", "warning"),
];

#[test]
fn every_stream_ordering_mistake_is_found_exactly_once_with_its_stacks() {
    for (check, severity) in CHECKS {
        let (findings, report) = findings_of(&[check], &[]);
        assert_eq!(findings.len(), 1, "{check}: {findings:#?}");
        let f = &findings[0];
        assert_eq!(f["check"], check);
        assert_eq!(f["severity"], severity, "{check}");
        assert_eq!(f["count"], 1, "{check}");
        assert!(report["leaks"].as_array().unwrap().is_empty(), "{check}: {report:#}");
        // Without GPULEAK_SYNC_STACKS the stack is the one of the allocation, stream or
        // event involved.
        let top = functions(&f["stack"])[0].clone();
        let expected = match check {
            "cross-stream-race" => "make_buffer",
            "unordered-free" | "use-after-free" => "unordered_free|use_after_free",
            "wait-on-unrecorded-event" | "event-leak" => "make_event",
            "stream-leak" => "make_stream",
            _ => "unsynchronized",
        };
        assert!(
            expected.split('|').any(|e| e == top),
            "{check}: stack starts in {top}: {f:#}"
        );
        let message = f["message"].as_str().unwrap();
        match check {
            "cross-stream-race" => {
                assert!(message.contains("cuMemcpyDtoHAsync_v2 on stream"), "{message}");
                assert!(message.contains("the earlier cuLaunchKernel on stream"), "{message}");
            }
            "unordered-free" => {
                assert!(message.contains("cuMemFreeAsync on stream"), "{message}");
                assert!(message.contains("last use, cuLaunchKernel"), "{message}");
            }
            "use-after-free" => {
                assert!(message.contains("cuMemsetD32Async on stream"), "{message}");
                assert!(message.contains("already freed by cuMemFreeAsync"), "{message}");
            }
            "unsynchronized-at-exit" => {
                assert!(
                    message.contains("the last of it: cuLaunchKernel of the 4096-byte"),
                    "{message}"
                );
                assert!(message.contains("never waited for before exit;"), "{message}");
                assert_eq!(f["stack_role"], "allocated at");
                let created = related(f, "stream created at").expect("stream creation stack");
                assert_eq!(functions(created)[0], "make_stream");
            }
            _ => {}
        }
        if check == "use-after-free" || check == "unordered-free" || check == "cross-stream-race" {
            assert!(f["allocation_stack"].is_array(), "{check}");
        }
    }
}

#[test]
fn by_default_leaked_streams_and_events_are_found_without_a_stack_and_say_how_to_get_one() {
    for check in ["stream-leak", "event-leak"] {
        let dir = TempDir::new();
        let trace = dir.path().join("default.trace");
        let out = shim_command(client("report_ordering"), &trace)
            .arg(check)
            .output()
            .unwrap();
        assert_ok(&out);
        let r = report_json(&trace);
        let findings = r["findings"].as_array().unwrap();
        assert_eq!(findings.len(), 1, "{check}: {findings:#?}");
        let f = &findings[0];
        assert_eq!(f["check"], check);
        assert!(
            f["message"]
                .as_str()
                .unwrap()
                .ends_with("; its creation stack was not recorded (GPULEAK_OBJECT_STACKS=1 records it)"),
            "{f:#}"
        );
        assert_eq!(f["stack"], serde_json::json!([]), "{f:#}");
    }
    // With the setting the same findings have their stack and no hint.
    let (findings, _) = findings_of(&["stream-leak"], &[]);
    assert!(!findings[0]["message"].as_str().unwrap().contains("not recorded"));
}

#[test]
fn correctly_ordered_twins_report_nothing() {
    let twins: [(&str, &[&str]); 7] = [
        (
            "cross-stream-race",
            &[
                "event",
                "host",
                "legacy",
                "handoff",
                "handoff-event",
                "value",
                "value-batch",
                "batch-event",
                "batch-3d-event",
                "attributes-event",
                "peer",
                "ctx-event",
                "ctx-wait",
            ],
        ),
        ("unordered-free", &["event", "host", "legacy"]),
        ("use-after-free", &["event", "host", "legacy"]),
        ("wait-on-unrecorded-event", &["event", "host", "legacy", "ctx-event"]),
        ("stream-leak", &["destroyed"]),
        ("event-leak", &["destroyed"]),
        ("unsynchronized-at-exit", &["event", "host", "legacy"]),
    ];
    for (check, hows) in twins {
        for how in hows {
            let arg = format!("{check} {how}");
            let (findings, report) = findings_of(&[check, how], &[]);
            assert!(findings.is_empty(), "{arg}: {findings:#?}");
            assert!(report["leaks"].as_array().unwrap().is_empty(), "{arg}");
        }
    }
}

/// A buffer handed between host threads through a mutex (which the trace cannot see): after
/// the producing thread waited for the kernel that wrote it, the consumer's copy is ordered
/// (the twins `handoff` and `handoff-event` above report nothing, though the consumer's
/// thread was at work before the wait); handed over before the wait, it is a race.
#[test]
fn a_buffer_handed_to_another_thread_before_its_producer_was_waited_for_is_a_race() {
    let (findings, _) = findings_of(&["cross-stream-race", "handoff-unsynced"], &[]);
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let f = &findings[0];
    assert_eq!(f["check"], "cross-stream-race");
    let message = f["message"].as_str().unwrap();
    assert!(message.contains("cuMemcpyDtoHAsync_v2 on stream"), "{message}");
    assert!(message.contains("the earlier cuLaunchKernel on stream"), "{message}");
}

/// A batch of copies (`cuMemcpyBatchAsync`), of 3D copies (`cuMemcpy3DBatchAsync`) and a copy
/// with attributes (`cuMemcpyWithAttributesAsync`) read like any copy: unordered with the
/// kernel that wrote the buffer, each races (their `-event` twins above report nothing).
#[test]
fn a_batch_of_copies_races_like_any_copy() {
    for (how, api) in [
        ("batch", "cuMemcpyBatchAsync_v2"),
        ("batch-3d", "cuMemcpy3DBatchAsync_v2"),
        ("attributes", "cuMemcpyWithAttributesAsync"),
    ] {
        let (findings, _) = findings_of(&["cross-stream-race", how], &[]);
        assert_eq!(findings.len(), 1, "{how}: {findings:#?}");
        let message = findings[0]["message"].as_str().unwrap();
        assert!(message.starts_with(&format!("{api} on stream")), "{message}");
        assert!(message.contains("the earlier cuLaunchKernel on stream"), "{message}");
        assert_eq!(findings[0]["severity"], "error");
    }
}

/// A synchronous peer copy is serialized with all work, so it reads the buffer after the
/// kernel on a non-blocking stream wrote it (the twin `peer` above reports nothing); the
/// asynchronous one is an operation of its stream only, and races.
#[test]
fn an_asynchronous_peer_copy_races_where_a_synchronous_one_is_serialized() {
    let (findings, report) = findings_of(&["cross-stream-race", "peer-async"], &[]);
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let message = findings[0]["message"].as_str().unwrap();
    assert!(message.starts_with("cuMemcpyPeerAsync on stream"), "{message}");
    assert!(message.contains("the earlier cuLaunchKernel on stream"), "{message}");
    assert_eq!(findings[0]["severity"], "error");
    assert!(report["leaks"].as_array().unwrap().is_empty());
}

/// A context's wait (`cuCtxWaitEvent`) for an event nobody recorded orders nothing while a
/// kernel is pending (its twin `ctx-event`, recorded over the context by `cuCtxRecordEvent`,
/// reports nothing above).
#[test]
fn a_context_s_wait_for_an_event_never_recorded_is_found() {
    let (findings, report) = findings_of(&["wait-on-unrecorded-event", "ctx"], &[]);
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let message = findings[0]["message"].as_str().unwrap();
    assert!(message.starts_with("cuCtxWaitEvent waits for event"), "{message}");
    assert_eq!(functions(&findings[0]["stack"])[0], "make_event");
    assert!(report["leaks"].as_array().unwrap().is_empty());
}

/// A value written by one stream and waited for by another (stream memory operations) orders
/// the work after the wait after the work before the write (the twins `value` and
/// `value-batch` above report nothing); written before the kernel, it orders nothing of it.
#[test]
fn a_value_written_before_the_kernel_does_not_order_the_kernel() {
    let (findings, report) = findings_of(&["cross-stream-race", "value-early"], &[]);
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let f = &findings[0];
    assert_eq!(
        (f["check"].as_str(), f["severity"].as_str()),
        (Some("cross-stream-race"), Some("error"))
    );
    let message = f["message"].as_str().unwrap();
    assert!(message.contains("cuMemcpyDtoHAsync_v2 on stream"), "{message}");
    assert!(message.contains("the earlier cuLaunchKernel on stream"), "{message}");
    assert!(report["leaks"].as_array().unwrap().is_empty());
}

/// Two streams that run kernels reading one buffer with no ordering between them (streams
/// sharing a model's weights) are a race only if a kernel writes the bytes, which the driver
/// does not say: a warning, which `gpuleak check` fails on only with `--fail-on warning`; with
/// a copy or memset on either side (the tests above) the race is an error.
#[test]
fn two_kernels_on_unordered_streams_are_a_warning_that_says_they_may_only_read() {
    let dir = TempDir::new();
    let trace = traced(&dir, "report_ordering", &["cross-stream-race", "weights"], &[]);
    let report = report_json(&trace);
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let f = &findings[0];
    assert_eq!(f["check"], "cross-stream-race");
    assert_eq!(f["severity"], "warning");
    let message = f["message"].as_str().unwrap();
    assert!(message.starts_with("cuLaunchKernel on stream"), "{message}");
    assert!(
        message.contains("and the earlier cuLaunchKernel on stream"),
        "{message}"
    );
    assert!(
        message.contains("a race if either kernel writes those bytes")
            && message.contains("none if both only read them"),
        "{message}"
    );
    let check = |extra: &[&str]| {
        Command::new(gpuleak_bin())
            .arg("check")
            .args(extra)
            .arg(&trace)
            .output()
            .unwrap()
    };
    let out = check(&[]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let out = check(&["--fail-on", "warning"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
}

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

/// An asynchronous copy into pageable host memory returns only once it is complete (CUDA's
/// "API synchronization behavior"), so work that ends with one was waited for; into pinned
/// memory the host goes on at once, and the same work was never waited for.
#[test]
fn a_copy_into_pageable_memory_is_waited_for_and_one_into_pinned_memory_is_not() {
    let (findings, report) = findings_of(&["unsynchronized-at-exit", "pageable"], &[]);
    assert!(findings.is_empty(), "{findings:#?}");
    assert_eq!(report["leaks"].as_array().unwrap().len(), 1, "the source buffer");
    let (findings, report) = findings_of(&["unsynchronized-at-exit", "pinned"], &[]);
    assert_eq!(findings.len(), 1, "{findings:#?}");
    assert_eq!(findings[0]["check"], "unsynchronized-at-exit");
    let message = findings[0]["message"].as_str().unwrap();
    assert!(message.contains("the last of it: cuMemcpyDtoHAsync_v2"), "{message}");
    assert_eq!(
        report["leaks"].as_array().unwrap().len(),
        2,
        "the source and the pinned buffer"
    );
}

#[test]
fn work_never_waited_for_before_a_teardown_is_found_at_the_teardown() {
    let (findings, _) = findings_of(&["unsynchronized-at-exit", "teardown"], &[]);
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let message = findings[0]["message"].as_str().unwrap();
    assert!(
        message.contains("before the context was torn down (cuDevicePrimaryCtxRelease_v2);"),
        "{message}"
    );
}

#[test]
fn sampled_stacks_name_the_calls_themselves() {
    let (findings, _) = findings_of(&["cross-stream-race"], &[("GPULEAK_SYNC_STACKS", "1")]);
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let f = &findings[0];
    // The copy's own stack, the kernel's beside it, and the buffer's allocation.
    assert_eq!(functions(&f["stack"])[0], "race");
    let other = related(f, "other access at").expect("the kernel's stack");
    assert_eq!(functions(other)[0], "produce");
    assert_eq!(functions(&f["allocation_stack"])[0], "make_buffer");
    assert_eq!(f["stack_role"], serde_json::Value::Null);
    assert!(!f["message"].as_str().unwrap().contains("not recorded"), "{f:#}");
}

/// Without their stacks (the default), a finding says which setting records the calls'.
#[test]
fn a_finding_without_the_stacks_of_its_calls_names_the_setting_that_records_them() {
    for (check, hint) in [
        (
            "cross-stream-race",
            "; the calls' stacks were not recorded (GPULEAK_SYNC_STACKS=1 records them)",
        ),
        (
            "unordered-free",
            "; the calls' stacks were not recorded (GPULEAK_FREE_STACKS=1 and GPULEAK_SYNC_STACKS=1 record them)",
        ),
        (
            "unsynchronized-at-exit",
            "; the call's stack was not recorded (GPULEAK_SYNC_STACKS=1 records it)",
        ),
    ] {
        let (findings, _) = findings_of(&[check], &[]);
        let message = findings[0]["message"].as_str().unwrap();
        assert!(message.ends_with(hint), "{check}: {message}");
        // With the settings the stacks are there and the hint is gone.
        let (findings, _) = findings_of(&[check], &[("GPULEAK_SYNC_STACKS", "1"), ("GPULEAK_FREE_STACKS", "1")]);
        let message = findings[0]["message"].as_str().unwrap();
        assert!(!message.contains("not recorded"), "{check}: {message}");
    }
}

#[test]
fn the_text_report_shows_the_finding_and_its_stacks() {
    let dir = TempDir::new();
    let trace = traced(&dir, "report_ordering", &["unsynchronized-at-exit"], &[]);
    let out = Command::new(gpuleak_bin()).arg("report").arg(&trace).output().unwrap();
    assert_ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("warning: unsynchronized-at-exit: work queued on stream"),
        "{text}"
    );
    assert!(text.contains("  stream created at:"), "{text}");
    assert!(text.contains("  allocated at (no stack of the call itself):"), "{text}");
}

#[test]
fn a_two_stream_pipeline_with_events_and_pools_reports_nothing() {
    let dir = TempDir::new();
    let trace = traced(&dir, "report_pipeline", &["200"], &[]);
    let r = report_json(&trace);
    assert_eq!(r["findings"], serde_json::json!([]), "{r:#}");
    assert_eq!(r["leaks"], serde_json::json!([]));
    let records = dump(&trace);
    assert!(of_type(&records, "Launch").len() >= 400);
    assert!(of_type(&records, "StreamWait").len() >= 400);
    assert!(of_type(&records, "Copy").len() >= 600);
}

/// `GPULEAK_SYNC_STACKS=N` samples one call in N per thread; a bad value is one line on
/// stderr and the default (no stacks).
#[test]
fn sync_stacks_can_be_sampled() {
    let copies_with_stacks = |value: &str| {
        let dir = TempDir::new();
        let trace = dir.path().join("t.trace");
        let out = shim_command(client("shim_ordering"), &trace)
            .env("GPULEAK_SYNC_STACKS", value)
            .output()
            .unwrap();
        assert_ok(&out);
        let records = dump(&trace);
        // A batch of copies is one call: its records share the call's stack (or its lack).
        let (batched, copies): (Vec<&Value>, Vec<&Value>) = of_type(&records, "Copy")
            .into_iter()
            .partition(|c| c["api"].as_str().unwrap().contains("BatchAsync"));
        assert_eq!((copies.len(), batched.len()), (52, 16));
        for pair in batched.chunks(2) {
            assert_eq!(pair[0]["stack"], pair[1]["stack"], "{pair:?}");
        }
        if value == "1" {
            assert!(batched.iter().all(|c| c["stack"] != 0));
        }
        let sampled = copies.iter().filter(|c| c["stack"] != 0).count();
        (sampled, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert_eq!(copies_with_stacks("1").0, 52);
    // The first 48 copies are this thread's first calls of the kind: the 1st, 3rd, ... 47th;
    // the 4 copies with attributes come later, one call in two again.
    assert_eq!(copies_with_stacks("2").0, 26);
    assert_eq!(copies_with_stacks("0").0, 0);
    let (sampled, stderr) = copies_with_stacks("often");
    assert_eq!(sampled, 0);
    assert_eq!(
        stderr.lines().filter(|l| l.contains("GPULEAK_SYNC_STACKS")).count(),
        1,
        "{stderr}"
    );
}

/// cudarc (through `dlopen` + `dlsym`) orders two streams' uses of a buffer with events of
/// its own, waiting on fresh events before a buffer's first use: no finding. With its event
/// tracking turned off, the same program races, once.
#[test]
fn cudarc_s_event_tracking_orders_streams_and_turning_it_off_races_once() {
    let exe = example("gpuleak-example-cudarc-streams");
    for (mode, expected) in [("tracked", vec![]), ("untracked", vec!["cross-stream-race"])] {
        let dir = TempDir::new();
        let trace = dir.path().join("t.trace");
        let out = shim_command(&exe, &trace).arg(mode).output().unwrap();
        assert_ok(&out);
        let r = report_json(&trace);
        let checks = checks(&r);
        assert_eq!(checks, expected, "{mode}: {r:#}");
        if mode == "untracked" {
            let message = r["findings"][0]["message"].as_str().unwrap();
            assert!(message.starts_with("cuMemcpyHtoDAsync_v2 on stream"), "{message}");
            assert!(message.contains("the earlier cuMemsetD8Async on stream"), "{message}");
        }
    }
}

/// Every hooked stream-ordering variant reaches the trace once per call, under its exact
/// name, with what the analysis needs.
#[test]
fn every_stream_ordering_variant_is_recorded_under_its_exact_name() {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = shim_command(client("shim_ordering"), &trace).output().unwrap();
    assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("callbacks 2"), "{stdout}");
    let ptr = stdout
        .lines()
        .find_map(|l| l.strip_prefix("ptr 0x"))
        .map(|h| u64::from_str_radix(h, 16).unwrap())
        .unwrap();
    let records = dump(&trace);
    let count = |api: &str| records.iter().filter(|r| r["api"] == api).count();
    let once = [
        "cuMemcpy",
        "cuMemcpy_ptds",
        "cuMemcpyAsync",
        "cuMemcpyAsync_ptsz",
        "cuMemcpyHtoD_v2",
        "cuMemcpyHtoD_v2_ptds",
        "cuMemcpyDtoH_v2",
        "cuMemcpyDtoH_v2_ptds",
        "cuMemcpyDtoD_v2",
        "cuMemcpyDtoD_v2_ptds",
        "cuMemcpyHtoDAsync_v2",
        "cuMemcpyHtoDAsync_v2_ptsz",
        "cuMemcpyDtoHAsync_v2",
        "cuMemcpyDtoHAsync_v2_ptsz",
        "cuMemcpyDtoDAsync_v2",
        "cuMemcpyDtoDAsync_v2_ptsz",
        "cuMemsetD8_v2",
        "cuMemsetD8_v2_ptds",
        "cuMemsetD16_v2",
        "cuMemsetD16_v2_ptds",
        "cuMemsetD32_v2",
        "cuMemsetD32_v2_ptds",
        "cuMemsetD8Async",
        "cuMemsetD8Async_ptsz",
        "cuMemsetD16Async",
        "cuMemsetD16Async_ptsz",
        "cuMemsetD32Async",
        "cuMemsetD32Async_ptsz",
        "cuStreamAddCallback",
        "cuStreamAddCallback_ptsz",
        "cuEventRecord",
        "cuEventRecord_ptsz",
        "cuEventRecordWithFlags",
        "cuEventRecordWithFlags_ptsz",
        "cuStreamWaitEvent",
        "cuStreamWaitEvent_ptsz",
        "cuEventSynchronize",
        "cuEventQuery",
        "cuStreamQuery",
        "cuStreamQuery_ptsz",
        "cuStreamSynchronize",
        "cuStreamSynchronize_ptsz",
        "cuCtxSynchronize",
        "cuCtxSynchronize_v2",
        "cuCtxRecordEvent",
        "cuCtxWaitEvent",
        "cuStreamBeginCapture_v2",
        "cuStreamBeginCapture",
        "cuStreamBeginCapture_v2_ptsz",
        "cuStreamBeginCapture_ptsz",
        "cuStreamBeginCaptureToGraph",
        "cuStreamBeginCaptureToGraph_ptsz",
        "cuLaunchCooperativeKernel",
        "cuLaunchCooperativeKernel_ptsz",
        "cuStreamWriteValue32",
        "cuStreamWriteValue32_ptsz",
        "cuStreamWriteValue32_v2",
        "cuStreamWriteValue32_v2_ptsz",
        "cuStreamWriteValue64",
        "cuStreamWriteValue64_ptsz",
        "cuStreamWriteValue64_v2",
        "cuStreamWriteValue64_v2_ptsz",
        "cuStreamWaitValue32",
        "cuStreamWaitValue32_ptsz",
        "cuStreamWaitValue32_v2",
        "cuStreamWaitValue32_v2_ptsz",
        "cuStreamWaitValue64",
        "cuStreamWaitValue64_ptsz",
        "cuStreamWaitValue64_v2",
        "cuStreamWaitValue64_v2_ptsz",
        "cuEventDestroy",
        "cuStreamDestroy",
        "cuStreamDestroy_v2",
    ];
    for api in once {
        assert_eq!(count(api), 1, "{api}");
    }
    assert_eq!(count("cuStreamEndCapture"), 3);
    assert_eq!(count("cuStreamEndCapture_ptsz"), 3);
    assert_eq!(count("cuLaunchKernel"), 2);
    assert_eq!(count("cuLaunchKernel_ptsz"), 2);
    // 2D memsets span their rows; peer copies name both sides, the 3D ones from their
    // descriptors (the larger span: one 256-byte row and 64 bytes).
    let copies = |api: &str| -> Vec<(u64, u64, Option<u64>)> {
        records
            .iter()
            .filter(|r| r["api"] == api)
            .map(|r| (hex(&r["dst"]), r["src"].as_u64().unwrap(), r["bytes"].as_u64()))
            .collect()
    };
    for (elem, apis) in [
        (
            1,
            [
                "cuMemsetD2D8_v2",
                "cuMemsetD2D8_v2_ptds",
                "cuMemsetD2D8Async",
                "cuMemsetD2D8Async_ptsz",
            ],
        ),
        (
            2,
            [
                "cuMemsetD2D16_v2",
                "cuMemsetD2D16_v2_ptds",
                "cuMemsetD2D16Async",
                "cuMemsetD2D16Async_ptsz",
            ],
        ),
        (
            4,
            [
                "cuMemsetD2D32_v2",
                "cuMemsetD2D32_v2_ptds",
                "cuMemsetD2D32Async",
                "cuMemsetD2D32Async_ptsz",
            ],
        ),
    ] {
        for api in apis {
            assert_eq!(copies(api), [(ptr, 0, Some(2 * 256 + 16 * elem))], "{api}");
        }
    }
    let d2 = copies("cuMemcpyPeer")[0].0;
    assert_ne!(d2, ptr);
    for api in [
        "cuMemcpyPeer",
        "cuMemcpyPeer_ptds",
        "cuMemcpyPeerAsync",
        "cuMemcpyPeerAsync_ptsz",
    ] {
        assert_eq!(copies(api), [(d2, ptr, Some(64))], "{api}");
    }
    for api in [
        "cuMemcpy3DPeer",
        "cuMemcpy3DPeer_ptds",
        "cuMemcpy3DPeerAsync",
        "cuMemcpy3DPeerAsync_ptsz",
    ] {
        assert_eq!(copies(api), [(d2, ptr, Some(256 + 64))], "{api}");
    }
    // A context's event record and wait carry the context where a stream would be.
    let ctx = stdout
        .lines()
        .find_map(|l| l.strip_prefix("ctx 0x"))
        .map(|h| u64::from_str_radix(h, 16).unwrap())
        .unwrap();
    for api in ["cuCtxRecordEvent", "cuCtxWaitEvent"] {
        let r = records.iter().find(|r| r["api"] == api).unwrap();
        assert_eq!(hex(&r["stream"]), ctx, "{api}: {r}");
        assert_ne!(hex(&r["event"]), 0, "{api}: {r}");
    }
    // A batch of copies is a Copy per copy, in array order.
    let d2 = records
        .iter()
        .find(|r| r["api"] == "cuMemcpyBatchAsync")
        .map(|r| hex(&r["dst"]))
        .unwrap();
    for api in [
        "cuMemcpyBatchAsync",
        "cuMemcpyBatchAsync_ptsz",
        "cuMemcpyBatchAsync_v2",
        "cuMemcpyBatchAsync_v2_ptsz",
    ] {
        let copies: Vec<(u64, u64, Option<u64>)> = records
            .iter()
            .filter(|r| r["api"] == api)
            .map(|r| (hex(&r["dst"]), r["src"].as_u64().unwrap(), r["bytes"].as_u64()))
            .collect();
        assert_eq!(copies, [(d2, ptr, Some(64)), (d2 + 64, ptr + 64, Some(32))], "{api}");
    }
    // A copy with attributes is one copy; a 3D batch a Copy per operation, in array order,
    // each spanning its larger side (the source's 4 rows 64 bytes apart: 3 * 64 + 16).
    for api in ["cuMemcpyWithAttributesAsync", "cuMemcpyWithAttributesAsync_ptsz"] {
        assert_eq!(copies(api), [(d2, ptr, Some(64))], "{api}");
    }
    for api in [
        "cuMemcpy3DBatchAsync",
        "cuMemcpy3DBatchAsync_ptsz",
        "cuMemcpy3DBatchAsync_v2",
        "cuMemcpy3DBatchAsync_v2_ptsz",
    ] {
        assert_eq!(
            copies(api),
            [(d2, ptr, Some(3 * 64 + 16)), (d2 + 128, ptr + 256, Some(32))],
            "{api}"
        );
    }
    for api in ["cuMemcpy3DWithAttributesAsync", "cuMemcpy3DWithAttributesAsync_ptsz"] {
        assert_eq!(copies(api), [(d2, ptr, Some(3 * 64 + 16))], "{api}");
    }
    // A batch of memory operations is a record per operation, in array order.
    for api in [
        "cuStreamBatchMemOp",
        "cuStreamBatchMemOp_ptsz",
        "cuStreamBatchMemOp_v2",
        "cuStreamBatchMemOp_v2_ptsz",
    ] {
        let ops: Vec<_> = records
            .iter()
            .filter(|r| r["api"] == api)
            .map(|r| {
                (
                    r["op"].as_u64(),
                    r["addr"].as_u64(),
                    r["value"].as_u64(),
                    r["flags"].as_u64(),
                )
            })
            .collect();
        assert_eq!(
            ops,
            vec![
                (Some(2), Some(ptr + 16), Some(9), Some(0)),
                (Some(4), Some(ptr + 8), Some(0x1122_3344_5566_7788), Some(1))
            ],
            "{api}"
        );
    }
    let wait = records
        .iter()
        .find(|r| r["api"] == "cuStreamWaitValue32_v2_ptsz")
        .unwrap();
    assert_eq!(
        (
            wait["type"].as_str(),
            wait["op"].as_u64(),
            wait["addr"].as_u64(),
            wait["value"].as_u64()
        ),
        (Some("MemOp"), Some(1), Some(ptr), Some(1))
    );
    assert_eq!(
        (wait["stream"].as_u64(), wait["flags"].as_u64()),
        (Some(0), Some(3 | 1 << 30))
    );
    let write = records
        .iter()
        .find(|r| r["api"] == "cuStreamWriteValue64_v2_ptsz")
        .unwrap();
    assert_eq!(
        (write["op"].as_u64(), write["value"].as_u64()),
        (Some(5), Some(0x1122_3344_5566_7788))
    );
    // Kernel parameters: the buffer, through kernelParams and through the extra buffer, and
    // nothing else (the 4-byte value and count are not recorded).
    for l in of_type(&records, "Launch") {
        let ptrs: Vec<u64> = l["ptrs"].as_array().unwrap().iter().map(hex).collect();
        assert_eq!(ptrs, vec![ptr], "{l}");
    }
    // Copies carry their ranges; memsets their bytes; synchronous calls stream 0.
    let memset16 = records.iter().find(|r| r["api"] == "cuMemsetD16_v2").unwrap();
    assert_eq!((hex(&memset16["dst"]), memset16["bytes"].as_u64()), (ptr, Some(64)));
    assert_eq!(hex(&memset16["stream"]), 0);
    // No stacks on these calls by default.
    for c in of_type(&records, "Copy") {
        assert_eq!(c["stack"], 0, "{c}");
    }
    // The program mixes a non-blocking stream with the default streams on one buffer
    // without ever waiting: races, and nothing else.
    let r = report_json(&trace);
    let checks = checks(&r);
    assert!(
        !checks.is_empty() && checks.iter().all(|c| *c == "cross-stream-race"),
        "{checks:?}"
    );
}
