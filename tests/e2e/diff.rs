//! `gpuleak diff A B` on traces of `diff_steps` (tests/clients/diff_steps.c): two runs that
//! differ by one leak site, the same run twice, two snapshots of one process, and JSON reports
//! in place of traces.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gpuleak_e2e::{client, gpuleak_bin, gpuleak_report, output_of, shim_command, TempDir};
use serde_json::Value;

use crate::trace::assert_ok;

/// Traces of `diff_steps base` (twice) and `diff_steps extra`.
struct Runs {
    dir: TempDir,
    base: PathBuf,
    again: PathBuf,
    extra: PathBuf,
}

fn runs() -> Runs {
    let dir = TempDir::new();
    let traced = |name: &str, mode: &str| {
        let trace = dir.path().join(format!("{name}.trace"));
        assert_ok(&shim_command(client("diff_steps"), &trace).arg(mode).output().unwrap());
        trace
    };
    Runs {
        base: traced("base", "base"),
        again: traced("again", "base"),
        extra: traced("extra", "extra"),
        dir,
    }
}

fn diff(args: &[&str], a: &str, b: &str) -> Output {
    output_of(
        Command::new(gpuleak_bin())
            .arg("diff")
            .args(args)
            .arg(a)
            .arg(b)
            .env_remove("NO_COLOR")
            .env_remove("FORCE_COLOR"),
    )
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// `gpuleak diff --format json A B`: its exit code and document.
fn diff_json(args: &[&str], a: &str, b: &str) -> (i32, Value) {
    let out = diff(&[&["--format", "json"], args].concat(), a, b);
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "not JSON: {e}\n--- stdout\n{}--- stderr\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code().unwrap(), doc)
}

/// The function of each site's first frame of the user's, per list.
fn functions(doc: &Value, list: &str) -> Vec<String> {
    doc[list]
        .as_array()
        .unwrap_or_else(|| panic!("no {list} list: {doc}"))
        .iter()
        .map(|site| {
            let user = site["stack"].as_array().unwrap().iter().find(|f| f["user"] == true);
            user.and_then(|f| f["function"].as_str()).unwrap_or("?").to_string()
        })
        .collect()
}

fn lists(doc: &Value) -> [Vec<String>; 4] {
    ["new", "grown", "shrunk", "gone"].map(|l| functions(doc, l))
}

#[test]
fn diff_names_the_one_extra_leak_of_the_second_run_and_exits_1() {
    let r = runs();
    let (code, doc) = diff_json(&[], s(&r.base), s(&r.extra));
    assert_eq!(code, 1, "{doc}");
    assert_eq!(
        lists(&doc),
        [vec!["extra_cache".to_string()], vec![], vec![], vec![]],
        "{doc}"
    );
    let site = &doc["new"][0];
    for (field, want) in [
        ("bytes_before", 0),
        ("bytes_after", 5000),
        ("delta", 5000),
        ("allocations_before", 0),
        ("allocations_after", 1),
    ] {
        assert_eq!(site[field], want, "{field}: {site}");
    }
    assert!(
        site["site"].as_str().unwrap().starts_with("extra_cache@diff_steps.c:"),
        "{site}"
    );
    let frame = &site["stack"][0];
    for field in ["function", "file", "line", "module", "address", "inlined", "user"] {
        assert!(
            frame.get(field).is_some(),
            "frames as in the report: no {field} in {frame}"
        );
    }
    let summary = &doc["summary"];
    assert_eq!(
        (summary["new"].as_u64(), summary["unchanged"].as_u64()),
        (Some(1), Some(2)),
        "{summary}"
    );
    assert_eq!(summary["delta"], 5000, "{summary}");
    // The peak is at snapshot 1 (model, scratch and one step of history) in both runs.
    assert_eq!(
        (summary["peak_bytes_before"].as_u64(), summary["peak_delta"].as_i64()),
        (Some(14336), Some(0)),
        "{summary}"
    );
    assert_eq!(doc["compared"], "leaked");

    // The text names the site and its stack; the reverse order has it gone and exits 0.
    let out = diff(&[], s(&r.base), s(&r.extra));
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    assert!(
        text.contains("new: 0 bytes in 0 allocations -> 5000 bytes in 1 allocation (+5000 bytes)"),
        "{text}"
    );
    assert!(text.contains("#0 extra_cache diff_steps.c:"), "{text}");
    assert!(text.contains("1 new, 0 grown, 0 shrunk, 0 gone, 2 unchanged"), "{text}");
    let (code, doc) = diff_json(&[], s(&r.extra), s(&r.base));
    assert_eq!(
        (code, lists(&doc)[3].clone()),
        (0, vec!["extra_cache".to_string()]),
        "{doc}"
    );
}

#[test]
fn the_same_program_run_twice_has_nothing_new_and_exits_0() {
    let r = runs();
    let (code, doc) = diff_json(&[], s(&r.base), s(&r.again));
    assert_eq!(code, 0, "{doc}");
    assert_eq!(
        lists(&doc),
        [vec![], vec![], vec![], vec![]] as [Vec<String>; 4],
        "{doc}"
    );
    assert_eq!(doc["summary"]["unchanged"], 2, "{doc}");
    let out = diff(&[], s(&r.base), s(&r.again));
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("nothing new or grown"));
}

#[test]
fn two_snapshots_of_one_process_show_what_grew_and_what_went() {
    let r = runs();
    let at = |n: u32| format!("{}@{n}", s(&r.base));
    let (code, doc) = diff_json(&[], &at(1), &at(2));
    assert_eq!(code, 1, "{doc}");
    assert_eq!(
        lists(&doc),
        [
            vec![],
            vec!["grow_history".to_string()],
            vec![],
            vec!["scratch_temp".to_string()]
        ],
        "{doc}"
    );
    let grown = &doc["grown"][0];
    assert_eq!(
        (grown["bytes_before"].as_u64(), grown["bytes_after"].as_u64()),
        (Some(2048), Some(4096))
    );
    assert_eq!(
        (
            grown["allocations_before"].as_u64(),
            grown["allocations_after"].as_u64()
        ),
        (Some(1), Some(2))
    );
    assert_eq!(doc["gone"][0]["bytes_before"], 8192);
    assert_eq!(doc["a"]["snapshot"], 1);
    assert_eq!(doc["compared"], "live", "a snapshot's sites are its live bytes");
    assert_eq!(doc["b"]["source"], "snapshot");

    // A snapshot the trace does not have is an error that names the ones it has.
    let out = diff(&[], &at(1), &at(9));
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no snapshot 9 (snapshots in the trace: 1, 2)"),
        "{stderr}"
    );
}

#[test]
fn json_reports_give_the_same_diff_as_their_traces() {
    let r = runs();
    let json_of = |trace: &Path, name: &str| {
        let path = r.dir.path().join(name);
        let out = gpuleak_report(&["--format", "json", "--memory", "-o", s(&path)], &[trace]);
        assert_ok(&out);
        path
    };
    let (base, extra) = (json_of(&r.base, "base.json"), json_of(&r.extra, "extra.json"));
    let (code_traces, traces) = diff_json(&[], s(&r.base), s(&r.extra));
    let (code_reports, reports) = diff_json(&[], s(&base), s(&extra));
    let (code_mixed, mixed) = diff_json(&[], s(&base), s(&r.extra));
    assert_eq!((code_traces, code_reports, code_mixed), (1, 1, 1));
    for list in ["new", "grown", "shrunk", "gone"] {
        assert_eq!(reports[list], traces[list], "{list}");
        assert_eq!(mixed[list], traces[list], "{list}");
    }
    assert_eq!(reports["summary"], traces["summary"]);
    assert_eq!(reports["a"]["source"], "report");
}

#[test]
fn live_compares_what_is_held_at_the_end_and_html_is_one_page_with_both_timelines() {
    let r = runs();
    let (code, doc) = diff_json(&["--live"], s(&r.base), s(&r.extra));
    assert_eq!((code, doc["compared"].as_str()), (1, Some("live")));
    assert_eq!(functions(&doc, "new"), ["extra_cache"]);

    let out = diff(&["--format", "html"], s(&r.base), s(&r.extra));
    assert_eq!(out.status.code(), Some(1));
    let page = String::from_utf8_lossy(&out.stdout);
    assert!(page.starts_with("<!DOCTYPE html>"));
    assert!(
        !page.contains("<script") && !page.contains("src=") && !page.contains("href="),
        "self-contained"
    );
    assert!(
        page.contains("class=\"side-a\"") && page.contains("class=\"side-b\""),
        "two timelines"
    );
    assert!(page.contains("extra_cache@diff_steps.c:"));
}
