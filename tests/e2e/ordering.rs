//! The stream-ordering checks end to end: C programs on the simulated driver under the shim,
//! then `gpuleak report`. Every check has a program that must produce it exactly once and
//! correctly ordered twins that must produce nothing; a realistic two-stream pipeline must
//! produce no finding at all; and every hooked stream-ordering entry point is recorded under
//! its exact name.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use gpuleak_e2e::{client, example, gpuleak_bin, shim_command, sim_command, TempDir};
use serde_json::Value;

use crate::trace::{assert_ok, checks, dump, of_type};

mod arrays;
mod graph_frees;
mod graph_launches;
mod graph_listing;
mod host_fns;
mod later_calls;
mod library_patterns;
mod prefetch;
mod semaphores;
mod stacks;
mod suppressions;
mod variants;

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

/// The `name value` lines a client printed.
fn facts(stdout: &[u8]) -> HashMap<String, String> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| l.split_once(' '))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The hex address a client printed under `key`.
fn addr(facts: &HashMap<String, String>, key: &str) -> u64 {
    let v = facts.get(key).unwrap_or_else(|| panic!("the client printed no {key}"));
    u64::from_str_radix(v.trim_start_matches("0x"), 16).unwrap()
}

/// The JSON report of client `name` run under the shim with `how` as its argument.
fn report_of_case(name: &str, how: &str) -> Value {
    let dir = TempDir::new();
    report_json(&traced(&dir, name, &[how], &[]))
}

/// The one finding of client `name`'s case `how`: (check, severity, message).
fn only_finding_of(name: &str, how: &str) -> (String, String, String) {
    let report = report_of_case(name, how);
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{name} {how}: {findings:#?}");
    let text = |k: &str| findings[0][k].as_str().unwrap().to_string();
    (text("check"), text("severity"), text("message"))
}

/// Runs client `name` with `arg` under the shim (trace in `dir`) and on the plain simulator,
/// both of which must succeed: the trace, the traced run's printed facts and the plain run's
/// output.
fn traced_and_plain(dir: &TempDir, name: &str, arg: &str) -> (PathBuf, HashMap<String, String>, String) {
    let trace = dir.path().join(format!("{arg}.trace"));
    let out = shim_command(client(name), &trace).arg(arg).output().unwrap();
    assert_ok(&out);
    let plain = sim_command(client(name)).arg(arg).output().unwrap();
    assert_ok(&plain);
    (
        trace,
        facts(&out.stdout),
        String::from_utf8_lossy(&plain.stdout).into_owned(),
    )
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
                "library-event",
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
        only_race_with_the_kernel(how, api);
    }
}

/// The report of `cross-stream-race HOW`, whose one finding must be an error between `api` on
/// the reading stream and the kernel that wrote the buffer.
fn only_race_with_the_kernel(how: &str, api: &str) -> Value {
    let (findings, report) = findings_of(&["cross-stream-race", how], &[]);
    assert_eq!(findings.len(), 1, "{how}: {findings:#?}");
    let message = findings[0]["message"].as_str().unwrap();
    assert!(message.starts_with(&format!("{api} on stream")), "{message}");
    assert!(message.contains("the earlier cuLaunchKernel on stream"), "{message}");
    assert_eq!(findings[0]["severity"], "error");
    report
}

/// A kernel launched through a library's `CUkernel` cast to a `CUfunction`, as NVIDIA's
/// runtime launches every `<<<...>>>` kernel, writes its pointer parameters like any launch:
/// the driver describes them through `cuKernelGetParamInfo` only (its `cuFuncGetParamInfo`
/// refuses a `CUkernel`, as the real one does), so the race is found only when the shim asks
/// the right getter (the twin `library-event` above reports nothing).
#[test]
fn a_library_kernel_launched_as_the_runtime_launches_it_races_like_any_kernel() {
    only_race_with_the_kernel("library", "cuMemcpyDtoHAsync_v2");
}

/// A synchronous peer copy is serialized with all work, so it reads the buffer after the
/// kernel on a non-blocking stream wrote it (the twin `peer` above reports nothing); the
/// asynchronous one is an operation of its stream only, and races.
#[test]
fn an_asynchronous_peer_copy_races_where_a_synchronous_one_is_serialized() {
    let report = only_race_with_the_kernel("peer-async", "cuMemcpyPeerAsync");
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
