//! External semaphores (`cuImportExternalSemaphore`) end to end: streams ordered only by a
//! semaphore's signal and wait report nothing, whatever its type; a wait that no signal in the
//! trace meets orders nothing, and the read after it races; a semaphore never destroyed is a
//! `semaphore-leak`. The client is `tests/clients/report_semaphores.c`.

use gpuleak_e2e::{client, shim_command, sim_command, TempDir};
use serde_json::Value;

use super::{functions, report_json, traced};
use crate::trace::{assert_ok, dump, of_type};

fn report_of(args: &[&str]) -> Value {
    let dir = TempDir::new();
    report_json(&traced(&dir, "report_semaphores", args, &[]))
}

#[test]
fn streams_ordered_by_an_external_semaphore_report_nothing() {
    for how in [
        "binary",
        "timeline",
        "timeline-lower",
        "ptsz",
        "two",
        "graph-signal",
        "graph-value",
        "graph-wait",
        "graph-nested",
    ] {
        let report = report_of(&[how]);
        assert_eq!(report["findings"], serde_json::json!([]), "{how}: {report:#}");
        assert_eq!(report["leaks"], serde_json::json!([]), "{how}");
    }
}

/// The twins of the test above: no semaphore; a signal queued before the kernel; a wait met
/// by a signal before the kernel though the stream signals a higher value after it; a wait for
/// a value no signal reached; a binary semaphore's second wait after the first took the one
/// signal. Each read is one race with the kernel.
#[test]
fn a_wait_that_no_signal_in_the_trace_meets_orders_nothing() {
    for how in [
        "none",
        "timeline-early",
        "timeline-ahead",
        "timeline-higher",
        "graph-higher",
        "binary-taken",
    ] {
        let report = report_of(&[how]);
        let findings = report["findings"].as_array().unwrap();
        assert_eq!(findings.len(), 1, "{how}: {findings:#?}");
        let f = &findings[0];
        assert_eq!(
            (f["check"].as_str(), f["severity"].as_str()),
            (Some("cross-stream-race"), Some("error")),
            "{how}"
        );
        let message = f["message"].as_str().unwrap();
        assert!(
            message.starts_with("cuMemcpyDtoHAsync_v2 on stream"),
            "{how}: {message}"
        );
        let others: &[&str] = if how == "graph-higher" {
            &[
                "the earlier cuGraphLaunch on stream",
                "(its kernel node captured from cuLaunchKernel)",
            ]
        } else {
            &["the earlier cuLaunchKernel on stream"]
        };
        for other in others {
            assert!(message.contains(other), "{how}: {message}");
        }
        assert_eq!(functions(&f["stack"])[0], "make_buffer", "{how}");
    }
}

#[test]
fn an_external_semaphore_never_destroyed_is_a_semaphore_leak() {
    let report = report_of(&["leak"]);
    let findings = report["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let f = &findings[0];
    assert_eq!(
        (f["check"].as_str(), f["severity"].as_str()),
        (Some("semaphore-leak"), Some("warning"))
    );
    let message = f["message"].as_str().unwrap();
    assert!(message.starts_with("external semaphore 0x"), "{message}");
    assert!(
        message.ends_with("imported by cuImportExternalSemaphore was never destroyed"),
        "{message}"
    );
    assert_eq!(functions(&f["stack"])[..2], ["make_semaphore", "leak"]);
    // Destroyed: nothing.
    assert_eq!(report_of(&["leak", "destroyed"])["findings"], serde_json::json!([]));
    // Without GPULEAK_OBJECT_STACKS the finding has no stack, and says how to get one.
    let dir = TempDir::new();
    let trace = dir.path().join("default.trace");
    let out = shim_command(client("report_semaphores"), &trace)
        .arg("leak")
        .output()
        .unwrap();
    assert_ok(&out);
    let f = &report_json(&trace)["findings"][0];
    assert_eq!(f["check"], "semaphore-leak");
    assert!(
        f["message"]
            .as_str()
            .unwrap()
            .ends_with("; its creation stack was not recorded (GPULEAK_OBJECT_STACKS=1 records it)"),
        "{f:#}"
    );
}

/// What the shim records of each call: the import's handle type, one record per semaphore
/// of a signal or wait with its fence value, the `_ptsz` entry points under their own names
/// (stream 0: the per-thread default stream), and a refused call's result, which the
/// program gets unchanged.
#[test]
fn every_semaphore_call_is_recorded_with_what_the_analysis_needs() {
    let dir = TempDir::new();
    let records = dump(&traced(&dir, "report_semaphores", &["two"], &[]));
    let imports: Vec<(&str, u64, u64)> = of_type(&records, "ExtSemaphore")
        .iter()
        .map(|r| {
            (
                r["api"].as_str().unwrap(),
                r["handle_type"].as_u64().unwrap(),
                r["result"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        imports,
        [
            ("cuImportExternalSemaphore", 1, 0),
            ("cuImportExternalSemaphore", 9, 0),
            ("cuDestroyExternalSemaphore", 0, 0),
            ("cuDestroyExternalSemaphore", 0, 0),
        ]
    );
    let sems: Vec<u64> = of_type(&records, "ExtSemaphore")[..2]
        .iter()
        .map(|r| r["semaphore"].as_u64().unwrap())
        .collect();
    let ops: Vec<(&str, u64, u64)> = of_type(&records, "ExtSemaphoreOp")
        .iter()
        .map(|r| {
            (
                r["api"].as_str().unwrap(),
                r["semaphore"].as_u64().unwrap(),
                r["value"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        ops,
        [
            ("cuSignalExternalSemaphoresAsync", sems[0], 0),
            ("cuSignalExternalSemaphoresAsync", sems[1], 4),
            ("cuWaitExternalSemaphoresAsync", sems[0], 0),
            ("cuWaitExternalSemaphoresAsync", sems[1], 4),
        ]
    );

    let records = dump(&traced(&dir, "report_semaphores", &["ptsz"], &[]));
    let ops: Vec<(&str, u64, u64)> = of_type(&records, "ExtSemaphoreOp")
        .iter()
        .map(|r| {
            (
                r["api"].as_str().unwrap(),
                r["stream"].as_u64().unwrap(),
                r["value"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(ops.len(), 2, "{ops:?}");
    assert_eq!(
        (ops[0].0, ops[0].1, ops[0].2),
        ("cuSignalExternalSemaphoresAsync_ptsz", 0, 2)
    );
    assert_eq!((ops[1].0, ops[1].2), ("cuWaitExternalSemaphoresAsync", 2));
    assert_ne!(ops[1].1, 0);

    // A refused signal and destroy: the program sees the driver's error either way, and the
    // trace has the signal as one record naming no semaphore.
    let plain = sim_command(client("report_semaphores"))
        .arg("refused")
        .output()
        .unwrap();
    assert_ok(&plain);
    let trace = dir.path().join("refused.trace");
    let shimmed = shim_command(client("report_semaphores"), &trace)
        .arg("refused")
        .output()
        .unwrap();
    assert_ok(&shimmed);
    assert_eq!(String::from_utf8_lossy(&plain.stdout), "signal 400\ndestroy 400\n");
    assert_eq!(shimmed.stdout, plain.stdout);
    let records = dump(&trace);
    let refused: Vec<(&str, u64, u64)> = records
        .iter()
        .filter(|r| r["type"] == "ExtSemaphoreOp" || r["type"] == "ExtSemaphore")
        .filter(|r| r["result"] != 0)
        .map(|r| {
            (
                r["api"].as_str().unwrap(),
                r["semaphore"].as_u64().unwrap(),
                r["result"].as_u64().unwrap(),
            )
        })
        .collect();
    let destroyed = of_type(&records, "ExtSemaphore")[0]["semaphore"].as_u64().unwrap();
    assert_eq!(
        refused,
        [
            ("cuSignalExternalSemaphoresAsync", 0, 400),
            ("cuDestroyExternalSemaphore", destroyed, 400),
        ]
    );
    // The refused calls order and leak nothing.
    assert_eq!(report_json(&trace)["findings"], serde_json::json!([]));
}
