//! The user's frame names Python sites: `check` lines, memory tables, SARIF locations and
//! baseline keys name the script's line, not CPython's or cuda-bindings' frames; a baseline
//! made with other versions of those still matches; `--focus` and `--hide` move the name.

use std::path::Path;
use std::process::{Command, Output};

use gpuleak_e2e::{gpuleak_bin, TempDir};
use serde_json::Value;

use super::{line_of, traced, SCRIPT};
use crate::trace::assert_ok;

fn gpuleak(args: &[&str], trace: &Path) -> Output {
    Command::new(gpuleak_bin())
        .args(args)
        .arg(trace)
        .current_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join(".."))
        .output()
        .expect("gpuleak")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The `check` line of the leak of `bytes` bytes.
fn check_line(text: &str, bytes: u64) -> String {
    let head = format!(": {bytes} bytes in ");
    text.lines()
        .find(|l| l.starts_with("error[leak]") && l.contains(&head))
        .unwrap_or_else(|| panic!("no {bytes}-byte leak in {text}"))
        .to_string()
}

#[test]
fn check_lines_memory_tables_and_sarif_name_the_scripts_line() {
    let dir = TempDir::new();
    let trace = traced(&dir, &[]);
    let bindings = line_of("# LEAK: bindings");
    let at = format!("at leak_through_bindings {SCRIPT}:{bindings} (python)");

    let text = stdout(&gpuleak(&["check"], &trace));
    assert!(check_line(&text, 1 << 20).ends_with(&at), "{text}");

    let memory = stdout(&gpuleak(&["report", "--memory"], &trace));
    let row = format!("1.0 MiB  leak_through_bindings {SCRIPT}:{bindings}");
    assert!(memory.contains(&row), "{row} in {memory}");
    let peak = memory.split("\nPeak:").nth(1).expect("the peak table");
    let peak = peak.split("\n\n").next().unwrap();
    assert!(!peak.contains(".h:") && !peak.contains("cydriver"), "{peak}");

    let sarif = gpuleak(&["check", "--format", "sarif"], &trace);
    let doc: Value = serde_json::from_slice(&sarif.stdout).expect("SARIF");
    let results = doc["runs"][0]["results"].as_array().expect("results");
    let result = results
        .iter()
        .find(|r| r["properties"]["bytes"] == 1 << 20)
        .expect("the 1 MiB result");
    let physical = &result["locations"][0]["physicalLocation"];
    assert_eq!(physical["region"]["startLine"], bindings, "{result:#}");
    assert_eq!(
        physical["artifactLocation"]["uri"],
        format!("tests/python/{SCRIPT}"),
        "relative to the checkout: {result:#}"
    );
    assert!(
        result["properties"]["site"].as_str().is_some_and(|s| s
            .starts_with(&format!("leak_through_bindings@{SCRIPT}:{bindings}|"))
            && !s.contains("cydriver")
            && !s.contains(".h:")),
        "{result:#}"
    );
}

/// `report --format json` of `trace`, with every frame of cuda-bindings at another offset and
/// every frame of CPython at another line, as another version of each would record them, and
/// (when `old`) without the frames' `user` field, as reports before it were written.
fn upgraded_baseline(trace: &Path, old: bool) -> Value {
    let out = gpuleak(&["report", "--format", "json"], trace);
    assert_ok(&out);
    let mut doc: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let mut changed = 0;
    for leak in doc["leaks"].as_array_mut().expect("leaks") {
        for f in leak["stack"].as_array_mut().expect("stack") {
            let module = f["module"].as_str().unwrap_or("").to_string();
            if module.starts_with("cydriver.") || module.starts_with("driver.cpython") {
                f["address"] = Value::String("0x7777".into());
                changed += 1;
            }
            // CPython's frames: in libpython, or in the interpreter's executable where it is
            // linked statically (Debian's arm64 build).
            if module.starts_with("libpython") || module.starts_with("python3") {
                if let Some(line) = f["line"].as_u64() {
                    f["line"] = Value::from(line + 3);
                    changed += 1;
                }
            }
            if old {
                f.as_object_mut().unwrap().remove("user");
            }
        }
    }
    assert!(changed > 10, "frames to rewrite");
    doc
}

#[test]
fn a_baseline_made_with_other_cuda_bindings_and_cpython_versions_matches() {
    let dir = TempDir::new();
    let trace = traced(&dir, &[]);
    for old in [false, true] {
        let base = dir.path().join(format!("base-{old}.json"));
        std::fs::write(&base, upgraded_baseline(&trace, old).to_string()).unwrap();
        let out = gpuleak(&["check", "--baseline", base.to_str().unwrap()], &trace);
        assert_eq!(
            out.status.code(),
            Some(0),
            "no site is new or gone (old report: {old}): {}",
            stdout(&out)
        );
        assert!(!stdout(&out).contains("gone"), "{}", stdout(&out));
    }
}

#[test]
fn focus_and_hide_change_the_frame_that_names_a_site() {
    let dir = TempDir::new();
    let trace = traced(&dir, &[]);
    let hide = stdout(&gpuleak(&["check", "--hide", "*/tests/python/*"], &trace));
    let line = check_line(&hide, 1 << 20);
    assert!(!line.contains(SCRIPT), "{line}");

    let focus = stdout(&gpuleak(&["check", "--focus", "cydriver.*"], &trace));
    let line = check_line(&focus, 1 << 20);
    assert!(line.contains("(cydriver."), "{line}");

    // The standard library's frames are not the user's unless focused on: the thread's leak
    // is named by the script's frame inside Thread.run, or by Thread.run with the script
    // hidden and the threading module focused on.
    let both = stdout(&gpuleak(
        &["check", "--hide", "*/tests/python/*", "--focus", "*/threading.py"],
        &trace,
    ));
    let line = check_line(&both, 5 << 20);
    assert!(line.contains("at Thread.run threading.py:"), "{line}");
}

#[test]
fn python_stacks_fold_interpreter_frames_unless_native_frames_is_given() {
    let dir = TempDir::new();
    let trace = traced(&dir, &[]);
    let text = stdout(&gpuleak(&["report"], &trace));
    let group = text
        .split("\n\n")
        .find(|g| g.starts_with("1048576 bytes in 1 allocation"))
        .unwrap_or_else(|| panic!("the 1 MiB group in {text}"));
    assert!(
        group.contains(&format!(
            "leak_through_bindings {SCRIPT}:{}",
            line_of("# LEAK: bindings")
        )),
        "{group}"
    );
    assert!(group.contains(" interpreter frames\n"), "{group}");
    assert!(!group.contains("libpython") && !group.contains("cydriver"), "{group}");
    // The bindings' and libffi's stripped modules are folded away: no note about them.
    assert!(!text.contains("cydriver.cpython") && !text.contains("libffi"), "{text}");

    let all = stdout(&gpuleak(&["report", "--native-frames"], &trace));
    let group = all
        .split("\n\n")
        .find(|g| g.starts_with("1048576 bytes in 1 allocation"))
        .unwrap();
    assert!(group.contains("_PyEval_EvalFrameDefault"), "{group}");
    assert!(
        !group.contains("interpreter frames") && !group.contains("native frames"),
        "{group}"
    );
    // Shown, the bindings' frames get their note, one short sentence.
    let json = gpuleak(&["report", "--format", "json", "--native-frames"], &trace);
    let doc: Value = serde_json::from_slice(&json.stdout).expect("JSON");
    let notes: Vec<&str> = doc["notes"]
        .as_array()
        .expect("notes")
        .iter()
        .filter_map(Value::as_str)
        .filter(|n| n.starts_with("cydriver.cpython"))
        .collect();
    assert_eq!(notes.len(), 1, "{:#}", doc["notes"]);
    assert!(notes[0].len() < 100, "{}", notes[0]);

    let collapsed = stdout(&gpuleak(&["report", "--format", "collapsed"], &trace));
    assert!(!collapsed.contains("_PyEval_EvalFrameDefault"), "{collapsed}");
    assert!(
        collapsed.contains(&format!("leak_through_bindings {SCRIPT}:")),
        "{collapsed}"
    );
    let collapsed = stdout(&gpuleak(
        &["report", "--format", "collapsed", "--native-frames"],
        &trace,
    ));
    assert!(collapsed.contains("_PyEval_EvalFrameDefault"), "{collapsed}");
}

/// Two processes of one run that lack the same debug information get one note, not two.
#[test]
fn a_note_about_missing_symbols_comes_once_per_run() {
    let (a, b) = (TempDir::new(), TempDir::new());
    let (first, second) = (traced(&a, &[]), traced(&b, &[]));
    let out = Command::new(gpuleak_bin())
        .args(["report", "--native-frames"])
        .arg(&first)
        .arg(&second)
        .output()
        .expect("gpuleak report");
    let text = stdout(&out);
    let notes: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("note: cydriver.cpython"))
        .collect();
    assert_eq!(notes.len(), 1, "{text}");
}
