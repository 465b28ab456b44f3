//! Whole-run history in a bounded trace (issue 45): `memory_steps` traced on the simulated
//! driver, its first part dropped into a checkpoint as a rotation and a bound would have left
//! it (the format crate's `segment`), reports the growth, the peak and the timeline of the
//! whole run; a warm-up in the dropped part is still no growth; snapshots in the kept part
//! still answer `--at`.

use std::fs;
use std::path::{Path, PathBuf};

use gpuleak_e2e::{gpuleak_report as report, TempDir};
use gpuleak_format::checkpoint::segment;
use gpuleak_format::{Free, Seq, SiteHistory, Trace, TraceId};
use serde_json::Value;

use super::{findings, functions, memory_json, snapshot_trace, traced, u, MIB};
use crate::trace::assert_ok;

/// The segment of `trace` after record `at` (its first part in a checkpoint), alone in `dir`
/// as the bound left it: the segments before it deleted.
fn kept_after(trace: &Path, at: Seq, dir: &Path) -> PathBuf {
    let bytes = fs::read(trace).unwrap();
    let whole = Trace::new(&bytes).unwrap();
    let seg = segment(&whole, Some(at), Seq(u64::MAX), 3, TraceId(0x45)).unwrap();
    let path = dir.join("app.trace-000003");
    fs::write(&path, seg).unwrap();
    path
}

/// The sequence numbers of a trace's records of `kind`, in order.
fn seqs_of(trace: &Path, kind: u8) -> Vec<u64> {
    let bytes = fs::read(trace).unwrap();
    let t = Trace::new(&bytes).unwrap();
    t.records()
        .map(|e| e.unwrap().record)
        .filter(|r| r.body.kind() == kind)
        .map(|r| r.seq.0)
        .collect()
}

/// The last record's sequence number.
fn last_seq(trace: &Path) -> u64 {
    let bytes = fs::read(trace).unwrap();
    let t = Trace::new(&bytes).unwrap();
    t.records().map(|e| e.unwrap().record.seq.0).max().unwrap()
}

fn one_growth(doc: &Value) -> &Value {
    let growth = findings(doc, "growth");
    assert_eq!(growth.len(), 1, "{:#}", doc["findings"]);
    growth[0]
}

#[test]
fn a_staircase_whose_first_steps_were_dropped_is_growth_at_its_site_with_its_slope() {
    let dir = TempDir::new();
    let trace = traced(&dir, "memory_steps", "staircase");
    let whole = memory_json(&trace);
    let g_whole = one_growth(&whole);
    // The first half of the run in a checkpoint: about twenty steps.
    let kept = TempDir::new();
    let seg = kept_after(&trace, Seq(last_seq(&trace) / 2), kept.path());
    assert!(
        seqs_of(&seg, SiteHistory::KIND).len() >= 3,
        "the checkpoint carries a history"
    );
    let doc = memory_json(&seg);
    let g = one_growth(&doc);
    assert_eq!(functions(&g["stack"])[0], "keep_history");
    assert_eq!(u(&g["slope_bytes_per_step"]), MIB);
    assert_eq!(u(&g["to_bytes"]) - u(&g["from_bytes"]), 39 * MIB);
    assert_eq!(g["stack_id"], g_whole["stack_id"]);
    assert_eq!(g["steps"], g_whole["steps"]);
    // The timeline starts where the run did: its first point is the whole trace's.
    let m = &doc["process"]["memory"];
    let live = m["devices"][0]["live_bytes_max"].as_array().unwrap();
    assert!(!live.is_empty() && live.len() <= 512);
    assert_eq!(live.iter().map(u).max(), Some(40 * MIB + 64 * 1024));
    assert_eq!(u(&m["peak"]["bytes"]), 40 * MIB + 64 * 1024);
}

#[test]
fn a_peak_in_dropped_history_is_the_peak_with_its_sites() {
    let dir = TempDir::new();
    let trace = traced(&dir, "memory_steps", "staircase");
    let whole = memory_json(&trace);
    // Cut after the teardown's last free: the kept segment holds only the end of the run.
    let frees = seqs_of(&trace, Free::KIND);
    let kept = TempDir::new();
    let seg = kept_after(&trace, Seq(*frees.last().unwrap()), kept.path());
    let doc = memory_json(&seg);
    let (m, w) = (&doc["process"]["memory"], &whole["process"]["memory"]);
    assert_eq!(u(&m["peak"]["bytes"]), 40 * MIB + 64 * 1024);
    assert_eq!(m["peak"]["bytes"], w["peak"]["bytes"]);
    let by_site = m["peak"]["by_site"].as_array().unwrap();
    assert_eq!(u(&by_site[0]["bytes"]), 40 * MIB);
    assert_eq!(by_site[0]["stack_id"], w["peak"]["by_site"][0]["stack_id"]);
    // The device's own peak and its breakdown are the history's too.
    let (d, wd) = (&m["devices"][0], &w["devices"][0]);
    assert_eq!(d["peak_bytes"], wd["peak_bytes"]);
    assert_eq!(d["peak_seq"], wd["peak_seq"]);
    assert_eq!(d["peak_by_site"][0], wd["peak_by_site"][0]);
    assert_eq!(u(&doc["summary"]["leaked_bytes"]), 0);
    assert_eq!(doc["summary"], whole["summary"], "the totals are the whole run's");
    // The growth, all of it in dropped history, is still found.
    let g = one_growth(&doc);
    assert_eq!(functions(&g["stack"])[0], "keep_history");
    assert_eq!(u(&g["slope_bytes_per_step"]), MIB);
}

#[test]
fn a_warm_up_in_dropped_history_then_flat_is_not_growth() {
    let dir = TempDir::new();
    for mode in ["plateau", "steady"] {
        let trace = traced(&dir, "memory_steps", mode);
        let kept = TempDir::new();
        let seg = kept_after(&trace, Seq(last_seq(&trace) / 3), kept.path());
        let doc = memory_json(&seg);
        assert_eq!(doc["findings"], serde_json::json!([]), "{mode}");
        assert_eq!(doc["process"]["memory"]["growth"], serde_json::json!([]), "{mode}");
        let whole = memory_json(&trace);
        assert_eq!(
            doc["process"]["memory"]["peak"]["bytes"], whole["process"]["memory"]["peak"]["bytes"],
            "{mode}"
        );
    }
}

#[test]
fn snapshots_in_the_kept_segment_still_answer_at() {
    let dir = TempDir::new();
    let trace = dir.path().join("snapshots.trace");
    snapshot_trace(&trace);
    // Snapshot 1 (record 5) is dropped; 2 and 3 are kept.
    let kept = TempDir::new();
    let seg = kept_after(&trace, Seq(5), kept.path());
    let out = report(&["--at", "2", "--format", "json"], &[&seg]);
    assert_ok(&out);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let snap = &doc["process"]["memory"]["snapshot"];
    assert_eq!((u(&snap["id"]), u(&snap["live_bytes"])), (2, 2500));
    let sites: Vec<(u64, u64)> = snap["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (u(&s["stack_id"]), u(&s["bytes"])))
        .collect();
    assert_eq!(sites, [(1, 2000), (2, 500)]);
    let out = report(&["--at", "2..3", "--format", "json"], &[&seg]);
    assert_ok(&out);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let deltas: Vec<(u64, i64)> = doc["process"]["memory"]["snapshot"]["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (u(&s["stack_id"]), s["delta"].as_i64().unwrap()))
        .collect();
    assert_eq!(deltas, [(1, -1000)]);
}

#[test]
fn the_last_two_of_four_segments_report_the_whole_run_s_growth_and_peak() {
    let dir = TempDir::new();
    let trace = traced(&dir, "memory_steps", "staircase");
    let bytes = fs::read(&trace).unwrap();
    let whole = Trace::new(&bytes).unwrap();
    let last = last_seq(&trace);
    // Segments 2 and 3 of a trace rotated after each quarter; 0 and 1 deleted by the bound.
    let kept = TempDir::new();
    for k in 2..4u64 {
        let until = if k == 3 { Seq(u64::MAX) } else { Seq(last * (k + 1) / 4) };
        let seg = segment(&whole, Some(Seq(last * k / 4)), until, k, TraceId(0x45)).unwrap();
        fs::write(kept.path().join(format!("app.trace-{k:06}")), seg).unwrap();
    }
    let out = report(&["--memory", "--format", "json"], &[kept.path()]);
    assert_ok(&out);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let g = one_growth(&doc);
    assert_eq!(functions(&g["stack"])[0], "keep_history");
    assert_eq!(u(&g["slope_bytes_per_step"]), MIB);
    assert_eq!(u(&doc["process"]["memory"]["peak"]["bytes"]), 40 * MIB + 64 * 1024);
}

#[test]
fn the_text_report_of_a_bounded_trace_shows_the_growth_begun_before_its_cut() {
    let dir = TempDir::new();
    let trace = traced(&dir, "memory_steps", "staircase");
    let kept = TempDir::new();
    let seg = kept_after(&trace, Seq(last_seq(&trace) / 2), kept.path());
    let out = report(&["--memory"], &[&seg]);
    assert_ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("warning: growth:"), "{text}");
    // The device's counts are the whole run's, as the summary's are.
    assert!(text.contains("calls: 120 allocations, 120 frees"), "{text}");
    assert!(text.contains("  120 allocations, 120 frees\n"), "{text}");
}
