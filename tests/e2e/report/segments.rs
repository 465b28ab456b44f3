//! A bounded trace's segments read as one process: the kept segments of a real program's
//! trace (cut by the format crate as rotations would have cut it, the oldest deleted as a bound
//! would) report the leaks, totals and findings of the whole trace; the segments of two
//! processes in one directory are two processes; a segment missing in the middle is an error
//! naming the file after the gap, as is a corrupt or duplicated one; a last segment still being written reads.

use std::fs;
use std::path::{Path, PathBuf};

use gpuleak_e2e::{gpuleak_report as report, TempDir};
use gpuleak_format::checkpoint::segment;
use gpuleak_format::{Seq, Trace, TraceId};
use serde_json::Value;

use super::{report_json, traced};
use crate::trace::assert_ok;

/// Cuts the whole trace at `trace` into `parts` segments of trace `id` in `dir`, named as the
/// shim names them (`NAME.trace`, then `NAME.trace-000001`...): rotations after records
/// evenly spaced by sequence number, each later segment opening with the checkpoint of all
/// before it. Returns the segments' paths, first to last.
fn cut_into(trace: &Path, dir: &Path, name: &str, parts: u64, id: u64) -> Vec<PathBuf> {
    let bytes = fs::read(trace).unwrap();
    let whole = Trace::new(&bytes).unwrap();
    let last = whole.records().map(|e| e.unwrap().record.seq.0).max().unwrap();
    assert!(last >= 4 * parts, "{last} records are too few to cut");
    // Segment k holds the records after cuts[k] (none: from the start) up to cuts[k + 1].
    let cuts: Vec<Option<Seq>> = (0..=parts).map(|k| (k > 0).then(|| Seq(last * k / parts))).collect();
    (0..parts)
        .map(|k| {
            let until = if k + 1 == parts {
                Seq(u64::MAX)
            } else {
                cuts[k as usize + 1].unwrap()
            };
            let seg = segment(&whole, cuts[k as usize], until, k, TraceId(id)).unwrap();
            let path = match k {
                0 => dir.join(format!("{name}.trace")),
                k => dir.join(format!("{name}.trace-{k:06}")),
            };
            fs::write(&path, seg).unwrap();
            path
        })
        .collect()
}

/// What must be the same in a report of a bounded trace and of the whole one.
#[track_caller]
fn assert_same_answers(segmented: &Value, whole: &Value) {
    assert_eq!(segmented["leaks"], whole["leaks"], "leaks");
    assert_eq!(segmented["summary"], whole["summary"], "summary");
    // Dropped history may hide a finding, never make one up.
    let found = whole["findings"].as_array().unwrap();
    for f in segmented["findings"].as_array().unwrap() {
        assert!(found.contains(f), "{f:#} is not a finding of the whole trace");
    }
}

#[test]
fn the_kept_segments_of_a_bounded_trace_report_what_the_whole_trace_does() {
    let dir = TempDir::new();
    let trace = traced(&dir, "shim_families");
    let whole = report_json(&[], &[&trace]);
    assert!(!whole["leaks"].as_array().unwrap().is_empty());

    let kept = TempDir::new();
    let segments = cut_into(&trace, kept.path(), "app", 4, 0x5e9);
    // Every segment, and the last two once the bound deleted the oldest.
    let all = report_json(&[], &[kept.path()]);
    assert_same_answers(&all, &whole);
    assert_eq!(all["process"]["trace"], segments[0].display().to_string());
    fs::remove_file(&segments[0]).unwrap();
    fs::remove_file(&segments[1]).unwrap();
    let bounded = report_json(&[], &[kept.path()]);
    assert_same_answers(&bounded, &whole);
    assert_eq!(bounded["process"]["trace"], segments[2].display().to_string());
    // Named one by one, in any order: the same process.
    let by_name = report_json(&[], &[&segments[3], &segments[2]]);
    assert_eq!(by_name, bounded);

    // `check` fails the bounded trace as it fails the whole one (its leaks), and `diff` finds
    // nothing new or grown between them.
    let gpuleak = |args: &[&std::ffi::OsStr]| {
        std::process::Command::new(gpuleak_e2e::gpuleak_bin())
            .args(args)
            .output()
            .unwrap()
    };
    let whole_check = gpuleak(&["check".as_ref(), trace.as_os_str()]);
    let bounded_check = gpuleak(&["check".as_ref(), kept.path().as_os_str()]);
    assert_eq!(whole_check.status.code(), Some(1));
    assert_eq!(bounded_check.status.code(), Some(1), "{bounded_check:?}");
    let diff = gpuleak(&["diff".as_ref(), trace.as_os_str(), kept.path().as_os_str()]);
    assert_eq!(diff.status.code(), Some(0), "{diff:?}");
}

#[test]
fn the_segments_of_a_clean_program_report_no_leak_and_no_finding() {
    let dir = TempDir::new();
    let trace = traced(&dir, "report_clean");
    let kept = TempDir::new();
    let segments = cut_into(&trace, kept.path(), "clean", 3, 0xc1);
    fs::remove_file(&segments[0]).unwrap();
    let r = report_json(&[], &[kept.path()]);
    assert_eq!(r["leaks"], serde_json::json!([]));
    assert_eq!(r["findings"], serde_json::json!([]));
    assert_same_answers(&r, &report_json(&[], &[&trace]));
}

/// Merged leak sites without the path of each process's trace (the segments' are not the
/// whole trace's).
fn without_traces(merged: &Value) -> Value {
    let mut merged = merged.clone();
    for site in merged.as_array_mut().unwrap() {
        for p in site["per_process"].as_array_mut().unwrap() {
            p["trace"] = Value::Null;
        }
    }
    merged
}

#[test]
fn a_directory_with_the_segments_of_two_processes_is_two_processes() {
    let dir = TempDir::new();
    let leaky = traced(&dir, "report_leaks");
    let clean = traced(&dir, "report_clean");
    let kept = TempDir::new();
    let a = cut_into(&leaky, kept.path(), "a", 3, 0xa);
    let b = cut_into(&clean, kept.path(), "b", 3, 0xb);
    fs::remove_file(&a[0]).unwrap();
    fs::remove_file(&b[0]).unwrap();
    let r = report_json(&[], &[kept.path()]);
    let processes = r["processes"].as_array().unwrap();
    let traces: Vec<&str> = processes.iter().map(|p| p["trace"].as_str().unwrap()).collect();
    assert_eq!(
        traces,
        [a[1].display().to_string(), b[1].display().to_string()],
        "one process per trace, at its first segment kept"
    );
    let whole = report_json(&[], &[&leaky, &clean]);
    assert_eq!(r["summary"], whole["summary"]);
    assert_eq!(
        without_traces(&r["merged_leaks"]),
        without_traces(&whole["merged_leaks"])
    );

    // The twin: segments of one process only, whatever else the directory holds, are one.
    for p in b.iter().skip(1) {
        fs::remove_file(p).unwrap();
    }
    let one = report_json(&[], &[kept.path()]);
    let processes = one["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 1, "{processes:#?}");
    assert_eq!(processes[0]["trace"], a[1].display().to_string());
}

#[test]
fn a_segment_missing_in_the_middle_is_an_error_naming_the_file_after_it() {
    let dir = TempDir::new();
    let trace = traced(&dir, "shim_families");
    let kept = TempDir::new();
    let segments = cut_into(&trace, kept.path(), "app", 4, 0x9a9);
    fs::remove_file(&segments[2]).unwrap();
    let check = std::process::Command::new(gpuleak_e2e::gpuleak_bin())
        .arg("check")
        .arg(kept.path())
        .output()
        .unwrap();
    for out in [report(&["--format", "json"], &[kept.path()]), check] {
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(out.stdout.is_empty());
        assert!(
            stderr.starts_with(&format!(
                "gpuleak: {}: segment 2 is missing before segment 3",
                segments[3].display()
            )),
            "{stderr}"
        );
    }
    // A segment that is not a trace any more, or one copied beside itself: errors naming it.
    let mut bytes = fs::read(&segments[1]).unwrap();
    bytes[..8].copy_from_slice(b"XXXXXXXX");
    let corrupt = kept.path().join("app.trace-000002");
    fs::write(&corrupt, &bytes).unwrap();
    let out = report(&[], &[&segments[1], &corrupt]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!("gpuleak: {}: not a gpuleak trace", corrupt.display())),
        "{stderr}"
    );
    fs::remove_file(&corrupt).unwrap();
    let copy = kept.path().join("copy-of-3");
    fs::copy(&segments[3], &copy).unwrap();
    let out = report(&[], &[&segments[3], &copy]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.starts_with(&format!("gpuleak: {}: segment 3 appears twice", copy.display())),
        "{stderr}"
    );
    fs::remove_file(&copy).unwrap();

    // The twin: the segments from the gap on read (what a bound would have kept).
    fs::remove_file(&segments[0]).unwrap();
    fs::remove_file(&segments[1]).unwrap();
    assert_ok(&report(&[], &[kept.path()]));
}

#[test]
fn a_last_segment_still_being_written_reads() {
    let dir = TempDir::new();
    let trace = traced(&dir, "shim_families");
    let whole = report_json(&[], &[&trace]);
    let kept = TempDir::new();
    let segments = cut_into(&trace, kept.path(), "app", 3, 0x1a57);
    fs::remove_file(&segments[0]).unwrap();
    // The writer is in the middle of the last block: what follows was never written.
    let last = &segments[2];
    let len = fs::metadata(last).unwrap().len();
    let cut = len - gpuleak_format::BLOCK_SIZE as u64 / 2;
    fs::OpenOptions::new()
        .write(true)
        .open(last)
        .unwrap()
        .set_len(cut)
        .unwrap();
    let r = report_json(&[], &[kept.path()]);
    assert_eq!(r["process"]["trace"], segments[1].display().to_string());
    // What the checkpoint and the kept segment hold is reported whole: the allocations of the
    // dropped history, and the totals up to the cut at least those before the last segment.
    let (now, then) = (&r["summary"], &whole["summary"]);
    assert!(now["allocations"].as_u64().unwrap() <= then["allocations"].as_u64().unwrap());
    assert!(now["allocations"].as_u64().unwrap() > 0, "{now:#}");
}

#[test]
fn an_unreadable_block_in_a_later_segment_is_named_with_its_file_and_offset() {
    let dir = TempDir::new();
    let trace = traced(&dir, "shim_families");
    let kept = TempDir::new();
    let segments = cut_into(&trace, kept.path(), "app", 3, 0xbad);
    // The twin first: read whole, no note about offsets.
    let r = report_json(&[], &[kept.path()]);
    assert_eq!(r["processes"][0]["notes"], serde_json::json!([]), "{r:#}");

    let last = &segments[2];
    let mut bytes = fs::read(last).unwrap();
    let at = bytes.len() - gpuleak_format::BLOCK_SIZE;
    bytes[at..at + 4].copy_from_slice(b"XXXX");
    fs::write(last, &bytes).unwrap();
    let out = std::process::Command::new(gpuleak_e2e::gpuleak_bin())
        .arg("check")
        .arg(kept.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains(&format!("(in segment {} at offset {at})", last.display())),
        "{stderr}"
    );
    let r = report_json(&[], &[kept.path()]);
    let notes = r["processes"][0]["notes"].to_string();
    assert!(notes.contains("count the trace's segments end to end"), "{notes}");
    assert!(notes.contains(&last.display().to_string()), "{notes}");
}
