//! `gpuleak check` suppressions naming the stream-ordering checks: a pattern matches any stack
//! that explains a finding (the allocation's, the stream's or event's creation, the other
//! access), silences only findings of its own check, and an unsuppressed finding still fails.

use std::path::Path;
use std::process::Command;

use gpuleak_e2e::{gpuleak_bin, TempDir};
use serde_json::Value;

use super::traced;

/// `gpuleak check --format json` with `args` and a suppressions file of `lines`: the exit code
/// and the JSON.
pub(super) fn check(dir: &TempDir, trace: &Path, lines: &str, args: &[&str]) -> (i32, Value) {
    let supp = dir.path().join("ordering.supp");
    std::fs::write(&supp, lines).unwrap();
    let out = Command::new(gpuleak_bin())
        .args(["check", "--format", "json", "--suppressions"])
        .arg(&supp)
        .args(args)
        .arg(trace)
        .output()
        .unwrap();
    let json =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    (out.status.code().unwrap(), json)
}

/// (exit code, violations' checks, findings suppressed, first suppression's groups).
fn outcome(dir: &TempDir, trace: &Path, lines: &str, args: &[&str]) -> (i32, Vec<String>, u64, u64) {
    let (code, j) = check(dir, trace, lines, args);
    let checks = j["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["check"].as_str().unwrap().to_string())
        .collect();
    let suppressed = j["checked"]["suppressed_findings"].as_u64().unwrap();
    let groups = j["suppressions"][0]["groups"].as_u64().unwrap();
    (code, checks, suppressed, groups)
}

#[test]
fn a_stream_ordering_suppression_silences_its_check_by_any_explaining_stack() {
    let dir = TempDir::new();
    let race = traced(&dir, "report_ordering", &["cross-stream-race"], &[]);
    // The race is an error: it fails unless suppressed, here by its buffer's allocation.
    assert_eq!(
        outcome(&dir, &race, "cross-stream-race:^make_buffer$\n", &[]),
        (0, vec![], 1, 1)
    );
    // Unsynchronized work (a warning) by the stream's creation, which is not the finding's own
    // stack (that is the allocation's) but one of its related stacks.
    let unsync = traced(&dir, "report_ordering", &["unsynchronized-at-exit"], &[]);
    let warn = ["--fail-on", "warning"];
    assert_eq!(
        outcome(&dir, &unsync, "unsynchronized-at-exit:make_stream\n", &warn),
        (0, vec![], 1, 1)
    );
    // Leaked streams and events by their creation site, in a module or file pattern too.
    let stream_leak = traced(&dir, "report_ordering", &["stream-leak"], &[]);
    assert_eq!(
        outcome(&dir, &stream_leak, "stream-leak:report_ordering.c\n", &warn),
        (0, vec![], 1, 1)
    );
    let event_leak = traced(&dir, "report_ordering", &["event-leak"], &[]);
    assert_eq!(
        outcome(&dir, &event_leak, "event-leak:^report_ordering$\n", &warn),
        (0, vec![], 1, 1)
    );
}

#[test]
fn a_stream_ordering_suppression_of_another_check_or_site_leaves_the_finding_failing() {
    let dir = TempDir::new();
    let race = traced(&dir, "report_ordering", &["cross-stream-race"], &[]);
    let failing = (1, vec!["cross-stream-race".to_string()], 0, 0);
    // The right site under another check's name, a leak suppression, a site that is not there.
    for lines in [
        "stream-leak:make_buffer\n",
        "unordered-free:make_buffer\n",
        "leak:make_buffer\n",
        "cross-stream-race:no_such_function\n",
    ] {
        assert_eq!(outcome(&dir, &race, lines, &[]), failing, "{lines}");
    }
    // A warning suppressed under the wrong check still fails with --fail-on warning.
    let unsync = traced(&dir, "report_ordering", &["unsynchronized-at-exit"], &[]);
    assert_eq!(
        outcome(&dir, &unsync, "stream-leak:make_stream\n", &["--fail-on", "warning"]),
        (1, vec!["unsynchronized-at-exit".to_string()], 0, 0)
    );
}
