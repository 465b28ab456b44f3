//! Host functions and stream callbacks order the host after their stream once they have run
//! (the client is `tests/clients/report_host_fns.c`): a pinned staging buffer written by a copy
//! on one stream and read by a copy on another, after the host waited for a host function
//! queued behind the first copy, is no race (XLA's transfers through host memory, reported as
//! races on an H100 before); without the host function it is. The shim wraps each host
//! function (`HostFnQueued`, `HostFnRan` when it starts), never one queued under capture,
//! and a refused call returns the driver's error with the program's function never called.

use gpuleak_e2e::TempDir;
use serde_json::Value;

use super::{report_json, traced, traced_and_plain};
use crate::trace::{checks, dump, of_type};

/// The wrapped host functions of a trace, as (queue record, run record if any).
fn queued_and_ran(records: &[Value]) -> Vec<(&Value, Option<&Value>)> {
    of_type(records, "HostFnQueued")
        .into_iter()
        .map(|q| {
            let run = of_type(records, "HostFnRan").into_iter().find(|r| r["id"] == q["id"]);
            (q, run)
        })
        .collect()
}

#[test]
fn a_host_function_the_host_waited_for_orders_a_staging_buffer_reused_on_another_stream() {
    for (how, api) in [
        ("flag", "cuLaunchHostFunc"),
        ("callback", "cuStreamAddCallback"),
        ("v2", "cuLaunchHostFunc_v2"),
        ("ptsz", "cuLaunchHostFunc_ptsz"),
    ] {
        let dir = TempDir::new();
        let trace = traced(&dir, "report_host_fns", &[how], &[]);
        let r = report_json(&trace);
        assert_eq!(checks(&r), Vec::<&str>::new(), "{how}: {r:#}");
        assert_eq!(r["leaks"], serde_json::json!([]), "{how}");
        let records = dump(&trace);
        let pairs = queued_and_ran(&records);
        assert_eq!(pairs.len(), 1, "{how}: {pairs:#?}");
        let (q, ran) = pairs[0];
        assert_eq!((q["api"].as_str(), q["result"].as_u64()), (Some(api), Some(0)), "{how}");
        assert!(q["id"].as_u64().unwrap() >= 1, "{q}");
        // The simulator runs a host function at once (its streams are always idle), inside
        // the call that queued it: the run is numbered first, on the same thread.
        let ran = ran.unwrap_or_else(|| panic!("{how}: no HostFnRan for {q}"));
        assert!(ran["seq"].as_u64() < q["seq"].as_u64(), "{how}: {ran} {q}");
        assert_eq!(ran["tid"], q["tid"], "{how}");
        assert!(of_type(&records, "HostFn").is_empty(), "{how}");
    }
}

#[test]
fn without_the_host_function_the_staging_buffer_s_reuse_is_a_race() {
    let dir = TempDir::new();
    let r = report_json(&traced(&dir, "report_host_fns", &["none"], &[]));
    assert_eq!(checks(&r), vec!["cross-stream-race"], "{r:#}");
    let message = r["findings"][0]["message"].as_str().unwrap();
    assert!(
        message.starts_with("cuMemcpyHtoDAsync_v2 on stream")
            && message.contains("and the earlier cuMemcpyDtoHAsync_v2 on stream"),
        "{message}"
    );
}

/// Under capture the host function becomes a graph node that runs at each launch: the shim
/// passes it on as it is (a plain `HostFn`), and the program's function runs twice for two
/// launches; one queued on another stream while the capture is under way is wrapped.
#[test]
fn a_host_function_queued_under_capture_is_not_wrapped_and_runs_at_each_launch() {
    let dir = TempDir::new();
    let (trace, traced_facts, plain) = traced_and_plain(&dir, "report_host_fns", "capture");
    assert_eq!(traced_facts["calls_before_launch"], "0");
    assert_eq!(traced_facts["calls"], "2");
    assert_eq!(traced_facts["calls_on_b"], "1");
    assert!(
        plain.contains("calls 2\n") && plain.contains("calls_on_b 1\n"),
        "{plain}"
    );
    let records = dump(&trace);
    let plain_fns = of_type(&records, "HostFn");
    assert_eq!(plain_fns.len(), 1, "{plain_fns:#?}");
    let pairs = queued_and_ran(&records);
    assert_eq!(pairs.len(), 1, "{pairs:#?}");
    assert!(pairs[0].1.is_some());
    assert_eq!(of_type(&records, "HostFnRan").len(), 1);
    let r = report_json(&trace);
    assert_eq!(checks(&r), Vec::<&str>::new(), "{r:#}");
}

/// A refused call returns the driver's own error, and the program's function never runs; a
/// call without a function is passed on as it is (the driver must see the NULL).
#[test]
fn a_refused_host_function_returns_the_driver_s_error_and_never_runs() {
    let dir = TempDir::new();
    let (trace, traced_facts, plain) = traced_and_plain(&dir, "report_host_fns", "refused");
    let expected = [
        ("destroyed", "400"),
        ("sync_mode", "1"),
        ("callback_flags", "1"),
        ("no_function", "1"),
        ("calls", "0"),
    ];
    for (key, value) in expected {
        assert_eq!(traced_facts[key], value, "{key}");
        assert!(plain.contains(&format!("{key} {value}\n")), "{key}: {plain}");
    }
    let records = dump(&trace);
    let results: Vec<(&str, u64)> = queued_and_ran(&records)
        .into_iter()
        .map(|(q, ran)| {
            assert!(ran.is_none(), "{q}");
            (q["api"].as_str().unwrap(), q["result"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(
        results,
        [
            ("cuLaunchHostFunc", 400),
            ("cuLaunchHostFunc_v2", 1),
            ("cuStreamAddCallback", 1)
        ]
    );
    let plain_fns = of_type(&records, "HostFn");
    assert_eq!(plain_fns.len(), 1, "{plain_fns:#?}");
    assert_eq!(plain_fns[0]["result"], 1);
    assert!(of_type(&records, "HostFnRan").is_empty());
}
