//! `gpuleak report` on traces of real C programs: the JSON report field by field, the text
//! report against golden files (`tests/golden/`, regenerated with `GPULEAK_BLESS=1`), correct
//! twins that must report nothing, several traces at once (a directory of them, with the
//! merged view, on one thread or several), and broken traces.

use std::fs;
use std::path::{Path, PathBuf};

use gpuleak_e2e::{client, gpuleak_report as report, shim_command, TempDir};
use serde_json::Value;

use crate::trace::{assert_ok, dump, of_type};

mod directories;
mod graphs;
mod handles;
mod segments;
pub(crate) mod unreadable;

/// Runs a client under the shim and returns its trace (inside `dir`).
fn traced(dir: &TempDir, name: &str) -> PathBuf {
    let trace = dir.path().join(format!("{name}.trace"));
    let out = shim_command(client(name), &trace).output().unwrap();
    assert_ok(&out);
    trace
}

/// `gpuleak report --format json`, which must succeed.
fn report_json(args: &[&str], traces: &[&Path]) -> Value {
    let out = report(&[&["--format", "json"], args].concat(), traces);
    assert_ok(&out);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON: {e}\n{}", String::from_utf8_lossy(&out.stdout)))
}

/// `gpuleak report` as text, which must succeed.
fn report_text(args: &[&str], traces: &[&Path]) -> String {
    let out = report(args, traces);
    assert_ok(&out);
    String::from_utf8(out.stdout).unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Function names of a stack's frames.
fn functions(stack: &Value) -> Vec<&str> {
    stack
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["function"].as_str().unwrap_or("?"))
        .collect()
}

/// Asserts frame 0 of `stack` is `function`, in the client's own source file and module.
fn assert_frame0(stack: &Value, function: &str, client_name: &str) {
    let f = &stack[0];
    assert_eq!(f["function"], function, "frame 0 of {stack}");
    assert_eq!(f["module"], client_name, "frame 0 of {stack}");
    let file = f["file"].as_str().unwrap_or_else(|| panic!("no file in {f}"));
    assert!(file.ends_with(&format!("{client_name}.c")), "{file}");
    assert!(u(&f["line"]) > 0);
}

/// The report's one finding, a `bad-free` by `api` whose message contains `message`, made at
/// `function` of `client_name` on memory allocated at `allocated_in`.
fn assert_one_bad_free(r: &Value, api: &str, message: &str, function: &str, allocated_in: &str, client_name: &str) {
    let findings = r["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let f = &findings[0];
    assert_eq!((f["check"].as_str(), f["api"].as_str()), (Some("bad-free"), Some(api)));
    assert!(f["message"].as_str().unwrap().contains(message), "{f}");
    assert_frame0(&f["stack"], function, client_name);
    assert_frame0(&f["allocation_stack"], allocated_in, client_name);
}

/// Replaces what changes between runs (pids, paths, and the frames from the first one outside
/// the client on, which depend on the C library) by placeholders.
fn mask(text: &str, trace: &Path, client_name: &str) -> String {
    let exe = client(client_name).display().to_string();
    let mut out = Vec::new();
    let mut outside = false;
    for line in text.lines() {
        let line = line.replace(&exe, "EXE").replace(&trace.display().to_string(), "TRACE");
        let line = mask_pids(&line);
        if !line.trim_start().starts_with('#') {
            outside = false;
        } else if outside {
            continue;
        } else if !line.ends_with(&format!("({client_name})")) {
            outside = true;
            out.push("    ...".to_string());
            continue;
        }
        out.push(line);
    }
    out.join("\n") + "\n"
}

/// `pid 1234` becomes `pid PID`, every time.
fn mask_pids(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find("pid ") {
        out.push_str(&rest[..at + 4]);
        rest = &rest[at + 4..];
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 {
            out.push_str("PID");
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
    out
}

/// Compares with `tests/golden/<name>`, or writes it when `GPULEAK_BLESS=1`.
fn assert_golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("golden").join(name);
    if std::env::var_os("GPULEAK_BLESS").is_some_and(|v| v == "1") {
        fs::write(&path, actual).unwrap();
        return;
    }
    let expected =
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (GPULEAK_BLESS=1 writes it)", path.display()));
    assert_eq!(
        actual,
        expected,
        "text report differs from {} (GPULEAK_BLESS=1 rewrites it)",
        path.display()
    );
}

#[test]
fn two_leak_sites_are_reported_with_sizes_counts_kinds_and_functions() {
    let dir = TempDir::new();
    let trace = traced(&dir, "report_leaks");
    let r = report_json(&[], &[&trace]);
    assert_eq!(r["schema_version"], 1);
    let s = &r["summary"];
    // use_and_free, make_scratch twice, pin_staging.
    assert_eq!(u(&s["allocations"]), 4);
    assert_eq!(u(&s["frees"]), 1);
    assert_eq!(u(&s["leaked_allocations"]), 3);
    assert_eq!(u(&s["leaked_bytes"]), 16000);
    assert_eq!(u(&s["peak_bytes"]), 16000);

    let leaks = r["leaks"].as_array().unwrap();
    assert_eq!(leaks.len(), 2, "{leaks:#?}");
    let (staging, scratch) = (&leaks[0], &leaks[1]);
    assert_eq!((u(&staging["bytes"]), u(&staging["allocations"])), (10000, 1));
    assert_eq!(staging["kind"], "host");
    assert_eq!(staging["at"], "exit");
    assert_eq!(staging["api"], "cuMemAllocHost_v2");
    assert_frame0(&staging["stack"], "pin_staging", "report_leaks");
    assert_eq!(functions(&staging["stack"])[1], "main");

    assert_eq!((u(&scratch["bytes"]), u(&scratch["allocations"])), (6000, 2));
    assert_eq!(scratch["kind"], "device");
    assert_eq!(scratch["api"], "cuMemAlloc_v2");
    assert_eq!(scratch["via"], Value::Null);
    assert_frame0(&scratch["stack"], "make_scratch", "report_leaks");
    assert_eq!(functions(&scratch["stack"])[1], "main");
    assert!(scratch["owner"].as_str().unwrap().ends_with("/report_leaks"));
    assert_eq!(scratch["pool"], Value::Null);

    assert_eq!(r["findings"], serde_json::json!([]));
    assert_eq!(r["process"]["exe"], client("report_leaks").display().to_string());
    assert_eq!(r["process"]["exited"], true);
    assert_eq!(
        r["process"]["exit_code"],
        Value::Null,
        "the shim cannot know the status at unload"
    );
}

/// A program started through the dynamic loader (`ld-linux-x86-64.so.2 ./app`, as Nix
/// wrappers and programs run with another C library are): `/proc/self/exe` is the loader, but
/// the trace names the program and its frames symbolize as its own.
#[test]
fn a_program_started_by_the_loader_is_named_and_symbolized_as_itself() {
    let dir = TempDir::new();
    let trace = dir.path().join("loader.trace");
    let loader = Path::new(if cfg!(target_arch = "aarch64") {
        "/lib/ld-linux-aarch64.so.1"
    } else {
        "/lib64/ld-linux-x86-64.so.2"
    });
    let out = shim_command(loader, &trace)
        .arg(client("report_leaks"))
        .output()
        .unwrap();
    assert_ok(&out);
    let r = report_json(&[], &[&trace]);
    let exe = r["process"]["exe"].as_str().unwrap();
    assert!(exe.ends_with("/report_leaks"), "{exe}");
    let leaks = r["leaks"].as_array().unwrap();
    assert_eq!(leaks.len(), 2, "{leaks:#?}");
    assert_frame0(&leaks[0]["stack"], "pin_staging", "report_leaks");
    assert_frame0(&leaks[1]["stack"], "make_scratch", "report_leaks");
    assert_eq!(functions(&leaks[1]["stack"])[1], "main");
}

#[test]
fn the_correct_twin_reports_no_leak_and_no_finding() {
    let dir = TempDir::new();
    let trace = traced(&dir, "report_clean");
    let r = report_json(&[], &[&trace]);
    let s = &r["summary"];
    assert_eq!(u(&s["leaked_allocations"]), 0);
    assert_eq!(u(&s["leaked_bytes"]), 0);
    assert_eq!(r["leaks"], serde_json::json!([]));
    assert_eq!(r["findings"], serde_json::json!([]));
    assert_eq!(r["held_by_pool"], serde_json::json!([]));
    assert_eq!(r["unreleased"], serde_json::json!([]));
    assert_eq!(r["notes"], serde_json::json!([]));
    // Every family it used was counted: the same calls as report_leaks, plus pitched, managed,
    // stream-ordered, a reservation, a physical handle and an allocation in a second context.
    assert_eq!(u(&s["allocations"]), 10);
    assert_eq!(u(&s["frees"]), 10);
    let records = dump(&trace);
    assert_eq!(of_type(&records, "Map").len(), 1);
    // Peak: the 2 MiB physical handle is the largest thing ever live (the reservation is no
    // memory).
    let gran = u(&of_type(&records, "Map")[0]["size"]);
    assert_eq!(u(&s["peak_bytes"]), gran);

    let text = report_text(&[], &[&trace]);
    assert!(text.contains("\nNo leaks.\n"), "{text}");
    assert!(!text.contains("error"), "{text}");
}

#[test]
fn shim_families_leaks_at_exit_and_teardown_and_frees_badly_twice() {
    let dir = TempDir::new();
    let trace = traced(&dir, "shim_families");
    let r = report_json(&[], &[&trace]);
    let s = &r["summary"];
    assert_eq!(u(&s["leaked_allocations"]), 2);
    assert_eq!(u(&s["leaked_bytes"]), 777 + 300);
    assert_eq!(u(&s["leaked_bytes_at_exit"]), 777);
    assert_eq!(u(&s["leaked_bytes_at_teardown"]), 300);
    assert_eq!(u(&s["failed_allocations"]), 1);
    assert_eq!(u(&s["allocations"]), 18);
    assert_eq!(u(&s["frees"]), 16);

    let leaks = r["leaks"].as_array().unwrap();
    assert_eq!(leaks.len(), 2);
    assert_eq!((u(&leaks[0]["bytes"]), &leaks[0]["at"]), (777, &Value::from("exit")));
    assert_eq!(leaks[0]["kind"], "device");
    assert_eq!(
        (u(&leaks[1]["bytes"]), &leaks[1]["at"]),
        (300, &Value::from("teardown"))
    );
    assert_eq!(leaks[1]["teardown"]["api"], "cuCtxDestroy_v2");
    for l in leaks {
        assert_frame0(&l["stack"], "main", "shim_families");
    }

    let findings = r["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 2, "{findings:#?}");
    for f in findings {
        assert_eq!(f["check"], "bad-free");
        assert_eq!(f["severity"], "error");
        assert_frame0(&f["stack"], "main", "shim_families");
    }
    let unknown = findings
        .iter()
        .find(|f| f["ptr"] == "0xdead00")
        .expect("unknown pointer");
    assert_eq!(unknown["allocation_stack"], Value::Null);
    let double = findings.iter().find(|f| f["ptr"] != "0xdead00").unwrap();
    assert!(
        double["message"].as_str().unwrap().starts_with("double free"),
        "{double}"
    );
    assert_frame0(&double["allocation_stack"], "main", "shim_families");
    // The free and the allocation are different lines of main.
    assert_ne!(double["stack"][0]["line"], double["allocation_stack"][0]["line"]);
}

#[test]
fn text_reports_match_their_golden_files() {
    let dir = TempDir::new();
    for name in ["report_leaks", "shim_families"] {
        let trace = traced(&dir, name);
        let text = report_text(&[], &[&trace]);
        assert!(!text.contains('\x1b'), "no colour when stdout is not a terminal");
        let masked = mask(&text, &trace, name);
        for line in masked.lines() {
            assert!(line.chars().count() <= 80, "longer than 80 columns: {line:?}");
        }
        assert_golden(&format!("{name}.txt"), &masked);
    }
}

#[test]
fn top_limits_the_groups_shown_but_not_the_totals() {
    let dir = TempDir::new();
    let trace = traced(&dir, "report_leaks");
    let r = report_json(&["--top", "1"], &[&trace]);
    assert_eq!(r["leaks"].as_array().unwrap().len(), 1);
    assert_eq!(u(&r["leaks"][0]["bytes"]), 10000);
    assert_eq!(u(&r["summary"]["leaked_bytes"]), 16000);
    assert_eq!(u(&r["processes"][0]["omitted"]["leaks"]["groups"]), 1);
    let text = report_text(&["--top", "1"], &[&trace]);
    assert!(text.contains("1 more leak groups (6000 bytes)"), "{text}");
}

#[test]
fn several_traces_give_a_section_each_and_one_summary() {
    let dir = TempDir::new();
    let leaks = traced(&dir, "report_leaks");
    let families = traced(&dir, "shim_families");
    let r = report_json(&[], &[&leaks, &families]);
    let processes = r["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 2);
    assert_eq!(r.get("process"), None, "one `process` only for one trace");
    assert_eq!(u(&r["summary"]["leaked_bytes"]), 16000 + 1077);
    assert_eq!(
        u(&r["summary"]["allocations"]),
        u(&processes[0]["summary"]["allocations"]) + u(&processes[1]["summary"]["allocations"])
    );
    let sizes: Vec<u64> = r["leaks"].as_array().unwrap().iter().map(|l| u(&l["bytes"])).collect();
    assert_eq!(sizes, [10000, 6000, 777, 300]);
    let pids: Vec<&Value> = processes.iter().map(|p| &p["pid"]).collect();
    assert_eq!(r["leaks"][0]["pid"], *pids[0]);
    assert_eq!(r["leaks"][2]["pid"], *pids[1]);
    assert_eq!(r["findings"].as_array().unwrap().len(), 2);

    let text = report_text(&[], &[&leaks, &families]);
    assert_eq!(text.matches("gpuleak report: pid").count(), 2);
    assert!(text.contains("Total over 2 processes:"), "{text}");
}

#[test]
fn an_unreadable_trace_is_an_error_with_its_path_and_offset() {
    let dir = TempDir::new();
    let bogus = dir.path().join("bogus.trace");
    fs::write(&bogus, b"this is not a gpuleak trace at all, not even close").unwrap();
    let out = report(&[], &[&bogus]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr,
        format!(
            "gpuleak: {}: not a gpuleak trace: bad magic bytes at offset 0\n",
            bogus.display()
        )
    );
    assert!(out.stdout.is_empty());

    let missing = dir.path().join("missing.trace");
    let out = report(&["--format", "json"], &[&missing]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with(&format!("gpuleak: {}: ", missing.display())));
}

#[test]
fn a_trace_cut_short_reports_what_was_read_with_a_note() {
    let dir = TempDir::new();
    let trace = traced(&dir, "report_leaks");
    // Cut inside the last allocation record (pin_staging's): what came before still reports.
    let records = dump(&trace);
    let last_alloc = of_type(&records, "Alloc").last().map(|r| u(&r["offset"])).unwrap();
    let mut bytes = fs::read(&trace).unwrap();
    bytes.truncate(last_alloc as usize + 3);
    let cut = dir.path().join("cut.trace");
    fs::write(&cut, bytes).unwrap();

    let r = report_json(&[], &[&cut]);
    let sizes: Vec<u64> = r["leaks"].as_array().unwrap().iter().map(|l| u(&l["bytes"])).collect();
    assert_eq!(sizes, [6000], "make_scratch's leaks were read");
    let notes: Vec<&str> = r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("unreadable records") && n.contains("offset")),
        "{notes:?}"
    );
    assert!(notes.iter().any(|n| n.contains("no exit record")), "{notes:?}");
    let text = report_text(&[], &[&cut]);
    assert!(text.contains("note: unreadable records"), "{text}");
}

/// A report with no leak, no finding and nothing left unreleased.
fn assert_nothing_left(r: &Value) {
    assert_eq!(r["leaks"], serde_json::json!([]), "{r:#}");
    assert_eq!(r["findings"], serde_json::json!([]), "{r:#}");
    assert_eq!(r["unreleased"], serde_json::json!([]), "{r:#}");
}
