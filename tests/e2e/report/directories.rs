//! A directory of traces: every trace in it with a merged view of the sites, the same report
//! on one thread and on every core, and an error for a directory without traces.

use std::fs;
use std::path::Path;

use gpuleak_e2e::{client, gpuleak_report as report, shim_command, TempDir};
use serde_json::Value;

use super::{assert_frame0, assert_golden, mask_pids, report_json, u};
use crate::trace::assert_ok;

/// A directory as a multi-process run leaves it: report_leaks as three ranks (rank 1 with an
/// extra argument, so that its make_scratch leaks three times instead of twice), its clean
/// twin, and things that are not traces: a text file, an empty file, a file that only looks
/// like one by name, and a subdirectory with a trace in it (not searched).
fn run_directory() -> TempDir {
    let dir = TempDir::new();
    for rank in 0..3 {
        let trace = dir.path().join(format!("rank{rank}.trace"));
        let mut cmd = shim_command(client("report_leaks"), &trace);
        if rank == 1 {
            cmd.arg("again");
        }
        assert_ok(&cmd.output().unwrap());
    }
    let clean = dir.path().join("twin.trace");
    assert_ok(&shim_command(client("report_clean"), &clean).output().unwrap());
    fs::write(dir.path().join("README.txt"), "traces of a run\n").unwrap();
    fs::write(dir.path().join("empty"), "").unwrap();
    fs::write(dir.path().join("fake.trace"), "GPULEAK but no zero byte after it").unwrap();
    fs::create_dir(dir.path().join("old")).unwrap();
    fs::copy(&clean, dir.path().join("old").join("rank9.trace")).unwrap();
    dir
}

/// The report masked for a golden file: the directory, pids, and frames outside the client.
fn mask_directory(text: &str, dir: &Path) -> String {
    let text = text.replace(&dir.display().to_string(), "DIR");
    let mut out = Vec::new();
    let mut outside = false;
    for line in text.lines() {
        let line = mask_pids(&line.replace(&client("report_leaks").display().to_string(), "EXE"));
        let line = line.replace(&client("report_clean").display().to_string(), "EXE");
        if !line.trim_start().starts_with('#') {
            outside = false;
        } else if outside {
            continue;
        } else if !line.ends_with("(report_leaks)") && !line.ends_with("(report_clean)") {
            outside = true;
            out.push("    ...".to_string());
            continue;
        }
        out.push(line);
    }
    out.join("\n") + "\n"
}

#[test]
fn a_directory_is_every_trace_in_it_with_a_merged_view_of_the_sites() {
    let dir = run_directory();
    let r = report_json(&[], &[dir.path()]);
    let traces: Vec<String> = r["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["trace"].as_str().unwrap().to_string())
        .collect();
    let expected: Vec<String> = ["rank0.trace", "rank1.trace", "rank2.trace", "twin.trace"]
        .iter()
        .map(|n| dir.path().join(n).display().to_string())
        .collect();
    assert_eq!(
        traces, expected,
        "the traces in the directory, by name, and nothing else"
    );
    assert_eq!(u(&r["summary"]["leaked_bytes"]), 3 * 10000 + 7 * 3000);

    let merged = r["merged_leaks"].as_array().unwrap();
    assert_eq!(merged.len(), 2, "{merged:#?}");
    let (staging, scratch) = (&merged[0], &merged[1]);
    assert_eq!((u(&staging["bytes"]), u(&staging["allocations"])), (30000, 3));
    assert_eq!(u(&staging["process_count"]), 3);
    assert_eq!(staging["kind"], "host");
    assert_frame0(&staging["stack"], "pin_staging", "report_leaks");
    assert_eq!((u(&scratch["bytes"]), u(&scratch["allocations"])), (21000, 7));
    assert_eq!(scratch["api"], "cuMemAlloc_v2");
    assert!(
        scratch["site"]
            .as_str()
            .unwrap()
            .starts_with("make_scratch@report_leaks.c:21|main@report_leaks.c:"),
        "{scratch}"
    );
    let per: Vec<(u64, u64)> = scratch["per_process"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (u(&p["bytes"]), u(&p["allocations"])))
        .collect();
    assert_eq!(per, [(6000, 2), (9000, 3), (6000, 2)]);
    assert_eq!(scratch["per_process"][1]["pid"], r["processes"][1]["pid"]);
    assert_eq!(r["merged_omitted"], serde_json::json!({"sites": 0, "bytes": 0}));

    // The merged view, as a golden file: what stays the same from run to run.
    let golden: Vec<Value> = merged
        .iter()
        .map(|m| {
            let mut m = m.clone();
            let stack: Vec<Value> = m["stack"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["module"] == "report_leaks")
                .map(|f| {
                    let file = f["file"].as_str().and_then(|p| p.rsplit('/').next());
                    serde_json::json!({"function": f["function"], "file": file, "line": f["line"]})
                })
                .collect();
            m["stack"] = Value::from(stack);
            for p in m["per_process"].as_array_mut().unwrap() {
                p["pid"] = Value::from("PID");
                p["trace"] = Value::from(
                    p["trace"]
                        .as_str()
                        .unwrap()
                        .replace(&dir.path().display().to_string(), "DIR"),
                );
            }
            m
        })
        .collect();
    assert_golden(
        "directory_merged.json",
        &(serde_json::to_string_pretty(&golden).unwrap() + "\n"),
    );

    let out = report(&[], &[dir.path()]);
    assert_ok(&out);
    assert!(out.stderr.is_empty(), "no progress bar when stderr is not a terminal");
    let text = String::from_utf8(out.stdout).unwrap();
    let masked = mask_directory(&text, dir.path());
    for line in masked.lines() {
        assert!(line.chars().count() <= 80, "longer than 80 columns: {line:?}");
    }
    assert_golden("directory.txt", &masked);
}

#[test]
fn one_thread_and_every_core_give_the_same_report() {
    let dir = run_directory();
    for format in ["text", "json"] {
        let serial = report(&["--format", format, "-j", "1"], &[dir.path()]);
        assert_ok(&serial);
        for jobs in [None, Some("2"), Some("8")] {
            let mut args = vec!["--format", format];
            if let Some(j) = jobs {
                args.extend(["--jobs", j]);
            }
            let parallel = report(&args, &[dir.path()]);
            assert_ok(&parallel);
            assert!(
                parallel.stdout == serial.stdout,
                "--jobs {jobs:?} differs from -j 1 in {format}"
            );
        }
    }
    // A trace named again, and a trace alone (decoded beside its replay).
    let rank0 = dir.path().join("rank0.trace");
    let again = report(&["--format", "json"], &[&rank0, dir.path()]);
    assert_ok(&again);
    let doc: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(doc["processes"].as_array().unwrap().len(), 4, "rank0 once");
    assert_eq!(
        report(&["-j", "1"], &[&rank0]).stdout,
        report(&["-j", "2"], &[&rank0]).stdout
    );
    let zero = report(&["-j", "0"], &[&rank0]);
    assert_eq!(zero.status.code(), Some(2));
}

#[test]
fn a_directory_without_traces_is_an_error_naming_it() {
    let dir = TempDir::new();
    let out = report(&[], &[dir.path()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "gpuleak: {}: no gpuleak trace in this directory (a trace is a file that starts with the bytes \"GPULEAK\\0\"; subdirectories are not searched)\n",
            dir.path().display()
        )
    );
    assert!(out.stdout.is_empty());
    // Only files that are not traces: the same.
    fs::write(dir.path().join("notes.trace"), "not a trace").unwrap();
    let out = report(&["--format", "json"], &[dir.path()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    // A trace of a bad version in a directory is an error naming the file.
    let bad = dir.path().join("future.trace");
    let mut bytes = b"GPULEAK\0".to_vec();
    bytes.extend([99, 0, 0, 0]);
    bytes.resize(4096, 0);
    fs::write(&bad, bytes).unwrap();
    let out = report(&[], &[dir.path()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with(&format!("gpuleak: {}: ", bad.display())), "{stderr}");
    assert!(stderr.contains("offset 8"), "{stderr}");
}
