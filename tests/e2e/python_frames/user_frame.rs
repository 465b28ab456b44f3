//! The user's frame names Python sites: `check` lines, memory tables, SARIF locations and
//! baseline keys name the script's line, not CPython's or cuda-bindings' frames; a baseline
//! made with other versions of those still matches; `--focus` and `--hide` move the name;
//! suppressions match the script's functions and files, not the interpreter's, wherever the
//! script lies; SARIF of a Python run is valid for code scanning.

use std::path::Path;
use std::process::{Command, Output};

use gpuleak_e2e::{gpuleak_bin, TempDir};
use serde_json::Value;

use super::{line_of, script, traced, traced_script, SCRIPT};
use crate::check::sarif::assert_valid;
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
    assert_valid(dir.path(), "python.sarif", &sarif.stdout);
    // Every result is located at a line of the script.
    for r in results {
        let uri = &r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"];
        assert_eq!(uri, &format!("tests/python/{SCRIPT}"), "{r:#}");
    }
}

/// The number of leak groups `gpuleak check` suppresses in `trace` with a suppressions file of
/// `lines`, and the number of groups.
fn suppressed(dir: &Path, trace: &Path, lines: &str) -> (usize, usize) {
    let supp = dir.join("supp.txt");
    std::fs::write(&supp, lines).unwrap();
    let out = gpuleak(
        &["check", "--format", "json", "--suppressions", supp.to_str().unwrap()],
        trace,
    );
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON: {e}: {out:?}"));
    let leaks = doc["leaks"].as_array().expect("leaks");
    let n = leaks.iter().filter(|l| !l["suppressed_by"].is_null()).count();
    (n, leaks.len())
}

/// Function and file patterns match only the user's frames, module patterns any frame; run
/// from a copy of the client in a directory named `main`, as a checkout at `/work/main` would
/// be, so that a pattern can only match the script through its own names, never through where
/// it lies.
#[test]
fn suppressions_match_the_scripts_frames_and_libraries_not_the_interpreters_functions() {
    let dir = TempDir::new();
    let copy = dir.path().join("main").join("lib").join("tests");
    std::fs::create_dir_all(&copy).unwrap();
    let copy = copy.join(SCRIPT);
    std::fs::copy(script(), &copy).unwrap();
    let trace = traced_script(&dir, &copy, &[]);
    let (_, groups) = suppressed(dir.path(), &trace, "leak:nothing\n");
    assert_eq!(groups, 6, "bindings, pydll, cdll, site_a, site_b, thread");
    for (lines, want, why) in [
        (
            "leak:main\n",
            0,
            "CPython's main and Py_BytesMain, and the copy's directory",
        ),
        ("leak:^main$\n", 0, "CPython's main"),
        ("leak:tests\n", 0, "a directory of the script's path"),
        ("leak:_PyEval_EvalFrameDefault\n", 0, "the interpreter's eval loop"),
        ("leak:_PyObject_Vectorcall\n", 0, "the interpreter's calls"),
        ("leak:leak_in_thread\n", 1, "the thread's function"),
        ("leak:outer\n", 3, "the script's caller of three leaks"),
        ("leak:^site_\n", 2, "two of the script's functions"),
        (&format!("leak:{SCRIPT}\n"), 6, "the script's file by its base name"),
        ("leak:*/main/lib/tests/*\n", 6, "the script's file by its path"),
        (
            "leak:cydriver\n",
            1,
            "cuda-bindings' module, not the user's, matches as a module",
        ),
    ] {
        assert_eq!(suppressed(dir.path(), &trace, lines).0, want, "{lines:?}: {why}");
    }

    // The copy is the user's code too: its SARIF is valid, located in the copy (outside the
    // repository: an absolute URI).
    let sarif = gpuleak(&["check", "--format", "sarif"], &trace);
    assert_valid(dir.path(), "copy.sarif", &sarif.stdout);
    let doc: Value = serde_json::from_slice(&sarif.stdout).unwrap();
    for r in doc["runs"][0]["results"].as_array().unwrap() {
        let uri = r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
            .as_str()
            .unwrap();
        assert!(
            uri.starts_with("file:///") && uri.ends_with(&format!("/main/lib/tests/{SCRIPT}")),
            "{uri}"
        );
    }
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
