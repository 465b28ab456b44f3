//! Python frames in allocation stacks: real CPython 3.11 (`target/pyenv`) running NVIDIA's
//! cuda-bindings, cuda-core and ctypes on the simulated driver, under the shim.
//!
//! `tests/python/python_frames_client.py` leaks from named functions at lines marked
//! `# LEAK: NAME`; the report must name those lines, with the GIL released by the allocating
//! thread (cuda-bindings, ctypes.CDLL, a second thread) and held (ctypes.PyDLL), with the
//! Python frames where the interpreter's eval-loop frames are among the native ones.

use std::path::{Path, PathBuf};
use std::process::Command;

use gpuleak_e2e::{client, gpuleak_bin, python, shim_command, TempDir};
use serde_json::Value;

use crate::trace::{assert_ok, dump, of_type};

mod metrics;
mod page;
mod user_frame;
mod versions;

const SCRIPT: &str = "python_frames_client.py";

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python").join(SCRIPT)
}

/// The line of the script that contains `needle` (exactly one).
fn line_of(needle: &str) -> u64 {
    let text = std::fs::read_to_string(script()).expect("the script");
    let hits: Vec<u64> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, _)| i as u64 + 1)
        .collect();
    assert_eq!(hits.len(), 1, "{needle:?} in {SCRIPT}: {hits:?}");
    hits[0]
}

/// Runs the client under the shim (extra environment `env`) and returns its trace.
fn traced(dir: &TempDir, env: &[(&str, &str)]) -> PathBuf {
    traced_script(dir, &script(), env)
}

/// Runs `script` (the client, or a copy of it elsewhere) under the shim and returns its trace.
fn traced_script(dir: &TempDir, script: &Path, env: &[(&str, &str)]) -> PathBuf {
    let trace = dir.path().join("python.trace");
    let python = python();
    let mut cmd = shim_command(&python, &trace);
    cmd.arg("-I").arg(script);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    assert_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("gpuleak:"), "the shim complained: {stderr}");
    trace
}

fn report(trace: &Path) -> Value {
    report_in(trace, None)
}

/// [`report`] with the files of the traced program below `sysroot` (else `GPULEAK_SYSROOT`'s).
fn report_in(trace: &Path, sysroot: Option<&Path>) -> Value {
    let mut cmd = Command::new(gpuleak_bin());
    cmd.args(["report", "--format", "json"]);
    if let Some(root) = sysroot {
        cmd.arg("--sysroot").arg(root);
    }
    let out = cmd.arg(trace).output().expect("gpuleak report");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "report is not JSON ({e}): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })
}

/// The stack of the leak group of `bytes`.
fn leak_stack(report: &Value, bytes: u64) -> Vec<Value> {
    let leaks = report["leaks"].as_array().expect("leaks");
    let leak = leaks
        .iter()
        .find(|l| l["bytes"] == bytes)
        .unwrap_or_else(|| panic!("no leak of {bytes} bytes in {leaks:#?}"));
    leak["stack"].as_array().expect("stack").clone()
}

fn is_python(f: &Value) -> bool {
    f["module"] == "python"
}

/// `(function, line)` of the Python frames, innermost first.
fn python_frames(stack: &[Value]) -> Vec<(String, u64)> {
    stack
        .iter()
        .filter(|f| is_python(f))
        .map(|f| {
            assert!(
                f["file"]
                    .as_str()
                    .is_some_and(|p| p.ends_with(SCRIPT) || p.ends_with("threading.py")),
                "{f}"
            );
            (
                f["function"].as_str().unwrap_or("?").to_string(),
                f["line"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

fn function(f: &Value) -> &str {
    f["function"].as_str().unwrap_or("")
}

#[test]
fn python_frames_name_the_leaking_lines_with_and_without_the_gil_in_order_among_native_frames() {
    let dir = TempDir::new();
    let trace = traced(&dir, &[]);
    let report = report(&trace);
    let (lambda, outer, module) = (
        line_of("return list(map(lambda"),
        line_of("        through_map(leak)"),
        line_of("outer()  # the leaking calls"),
    );
    // (bytes, leaking function, its marker): cuda-bindings and CDLL release the GIL around
    // the driver call, PyDLL keeps it.
    for (bytes, leaking, marker) in [
        (1u64 << 20, "leak_through_bindings", "# LEAK: bindings"),
        (2 << 20, "leak_with_gil_held", "# LEAK: pydll"),
        (3 << 20, "leak_with_gil_released", "# LEAK: cdll"),
    ] {
        let stack = leak_stack(&report, bytes);
        let py = python_frames(&stack);
        let want: Vec<(String, u64)> = [
            (leaking, line_of(marker)),
            ("through_map.<locals>.<lambda>", lambda),
            ("through_map", lambda),
            ("outer", outer),
            ("<module>", module),
        ]
        .iter()
        .map(|&(f, l)| (f.to_string(), l))
        .collect();
        assert_eq!(py, want, "Python frames of the {bytes}-byte leak");

        // Interleaving: native frames (the binding's or ctypes' call path) are inside the
        // innermost Python frame; each group of Python frames sits just inside the native
        // eval-loop frame that ran it, and native frames (map's C code) separate the groups.
        let at = |name: &str| {
            stack
                .iter()
                .position(|f| is_python(f) && function(f) == name)
                .unwrap_or_else(|| panic!("{name} missing"))
        };
        let first = at(leaking);
        assert!(
            first > 0 && !is_python(&stack[0]),
            "native frames inside Python: {stack:#?}"
        );
        let lambda_at = at("through_map.<locals>.<lambda>");
        assert_eq!(lambda_at, first + 1);
        assert_eq!(
            function(&stack[lambda_at + 1]),
            "_PyEval_EvalFrameDefault",
            "{stack:#?}"
        );
        let map_at = at("through_map");
        assert!(
            stack[lambda_at + 1..map_at].iter().any(|f| function(f) == "map_next"),
            "map's C frames between the two groups: {stack:#?}"
        );
        assert_eq!(function(&stack[map_at - 1]), "PyObject_Vectorcall", "{stack:#?}");
        let module_at = at("<module>");
        assert_eq!(module_at, map_at + 2);
        assert_eq!(function(&stack[module_at + 1]), "_PyEval_EvalFrameDefault");
        assert!(stack[module_at + 1..].iter().all(|f| !is_python(f)));
        if leaking == "leak_through_bindings" {
            assert!(
                stack[..first]
                    .iter()
                    .any(|f| f["module"].as_str().is_some_and(|m| m.starts_with("cydriver."))),
                "cuda-bindings' own frames: {stack:#?}"
            );
        }
    }
}

/// The same native frames with different Python frames must not share a stack: the shim's
/// per-thread stack caches include the Python frames.
#[test]
fn python_frames_tell_apart_sites_whose_native_stacks_are_identical() {
    let dir = TempDir::new();
    let report = report(&traced(&dir, &[]));
    let helper = line_of("# LEAK: helper");
    for (bytes, site, marker) in [
        (4 * 4096u64, "site_a", "# LEAK: site_a"),
        (4 * 8192, "site_b", "# LEAK: site_b"),
    ] {
        let stack = leak_stack(&report, bytes);
        let py = python_frames(&stack);
        assert_eq!(
            py[..2],
            [
                ("alloc_for_site".to_string(), helper),
                (site.to_string(), line_of(marker))
            ],
            "{bytes}-byte group"
        );
        let leak = report["leaks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["bytes"] == bytes)
            .unwrap();
        assert_eq!(leak["allocations"], 4, "{leak:#}");
    }
}

#[test]
fn python_frames_of_a_second_thread() {
    let dir = TempDir::new();
    let report = report(&traced(&dir, &[]));
    let py = python_frames(&leak_stack(&report, 5 << 20));
    assert_eq!(py[0], ("leak_in_thread".to_string(), line_of("# LEAK: thread")));
    assert_eq!(py[1].0, "Thread.run", "{py:?}");
}

#[test]
fn gpuleak_python_0_records_no_python_frames() {
    let dir = TempDir::new();
    let trace = traced(&dir, &[("GPULEAK_PYTHON", "0")]);
    let records = dump(&trace);
    assert!(of_type(&records, "PyCode").is_empty());
    assert!(of_type(&records, "PyFrames").is_empty());
    let report = report(&trace);
    for leak in report["leaks"].as_array().expect("leaks") {
        let stack = leak["stack"].as_array().expect("stack");
        assert!(stack.iter().all(|f| !is_python(f)), "{stack:#?}");
        assert!(stack.iter().any(|f| function(f) == "_PyEval_EvalFrameDefault"));
    }
    // Without Python frames the two sites' native stacks are one: what makes the twin test
    // above meaningful.
    leak_stack(&report, 4 * 4096 + 4 * 8192);
    // On by default: the twin above has them.
    let on = dump(&traced(&TempDir::new(), &[]));
    assert!(!of_type(&on, "PyCode").is_empty());
    assert!(!of_type(&on, "PyFrames").is_empty());
}

#[test]
fn a_program_without_python_has_no_python_records() {
    let dir = TempDir::new();
    let trace = dir.path().join("native.trace");
    let out = shim_command(client("report_leaks"), &trace)
        .output()
        .expect("report_leaks");
    assert!(out.status.success(), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("Python"));
    let records = dump(&trace);
    assert!(!of_type(&records, "Stack").is_empty());
    assert!(of_type(&records, "PyCode").is_empty());
    assert!(of_type(&records, "PyFrames").is_empty());
}

/// `(function, line)` of the Python frames, innermost first, from any file.
fn python_frames_any(stack: &[Value]) -> Vec<(String, u64)> {
    stack
        .iter()
        .filter(|f| is_python(f))
        .map(|f| (function(f).to_string(), f["line"].as_u64().unwrap_or(0)))
        .collect()
}

/// Suppressions match Python frames by function, file and module like native frames.
#[test]
fn suppressions_match_python_functions_and_files() {
    let dir = TempDir::new();
    let trace = traced(&dir, &[]);
    let supp = dir.path().join("supp.txt");
    std::fs::write(&supp, "leak:site_a\nleak:*python_frames_client.py\n").unwrap();
    let only_a = dir.path().join("only_a.txt");
    std::fs::write(&only_a, "leak:site_a\n").unwrap();
    let check = |file: &Path| -> Value {
        let out = Command::new(gpuleak_bin())
            .args(["check", "--format", "json", "--suppressions"])
            .arg(file)
            .arg(&trace)
            .output()
            .expect("gpuleak check");
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON: {e}: {out:?}"))
    };
    let by_bytes = |doc: &Value, bytes: u64| -> Value {
        doc["leaks"]
            .as_array()
            .expect("leaks")
            .iter()
            .find(|l| l["bytes"] == bytes)
            .unwrap_or_else(|| panic!("no {bytes}-byte leak: {doc:#}"))["suppressed_by"]
            .clone()
    };
    let doc = check(&only_a);
    assert_eq!(by_bytes(&doc, 4 * 4096), "leak:site_a");
    assert!(by_bytes(&doc, 4 * 8192).is_null(), "site_b is not site_a: {doc:#}");
    let doc = check(&supp);
    assert_eq!(by_bytes(&doc, 4 * 8192), "leak:*python_frames_client.py");
    assert_eq!(by_bytes(&doc, 1 << 20), "leak:*python_frames_client.py");
}

/// Baselines key sites by their frames, Python ones included: a second run of the same
/// program matches its baseline; against a baseline without Python frames every site is new,
/// named by its Python lines.
#[test]
fn baselines_key_sites_by_python_frames() {
    let dir = TempDir::new();
    let first = traced(&dir, &[]);
    let base = dir.path().join("base.json");
    let out = Command::new(gpuleak_bin())
        .args(["report", "--format", "json"])
        .arg(&first)
        .output()
        .expect("report");
    assert_ok(&out);
    std::fs::write(&base, &out.stdout).unwrap();
    let second_dir = TempDir::new();
    let second = traced(&second_dir, &[]);
    let check = |baseline: &Path, trace: &Path| {
        Command::new(gpuleak_bin())
            .args(["check", "--format", "json", "--baseline"])
            .arg(baseline)
            .arg(trace)
            .output()
            .expect("gpuleak check")
    };
    let same = check(&base, &second);
    assert_eq!(same.status.code(), Some(0), "{}", String::from_utf8_lossy(&same.stdout));

    let native_dir = TempDir::new();
    let native = traced(&native_dir, &[("GPULEAK_PYTHON", "0")]);
    let native_base = dir.path().join("native.json");
    let out = Command::new(gpuleak_bin())
        .args(["report", "--format", "json"])
        .arg(&native)
        .output()
        .expect("report");
    std::fs::write(&native_base, &out.stdout).unwrap();
    let new = check(&native_base, &second);
    assert_eq!(new.status.code(), Some(1));
    let doc: Value = serde_json::from_slice(&new.stdout).expect("JSON");
    let sites: Vec<&str> = doc["violations"]
        .as_array()
        .expect("violations")
        .iter()
        .filter(|v| v["change"] == "new")
        .filter_map(|v| v["site"].as_str())
        .collect();
    let pydll = format!("leak_with_gil_held@{SCRIPT}:{}", line_of("# LEAK: pydll"));
    assert!(sites.iter().any(|s| s.contains(&pydll)), "{pydll} in {sites:#?}");
}

/// A forked child writes its own trace, with its own descriptions of the code objects its
/// stacks name.
#[test]
fn a_forked_python_child_names_its_own_python_frames() {
    let dir = TempDir::new();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/python_frames_fork.py");
    let text = std::fs::read_to_string(&script).expect("script");
    let line = |needle: &str| text.lines().position(|l| l.contains(needle)).expect(needle) as u64 + 1;
    let python = python();
    let pattern = dir.path().join("fork.%p.trace");
    let out = shim_command(&python, &pattern)
        .arg("-I")
        .arg(&script)
        .output()
        .expect("python");
    assert_ok(&out);
    let mut traces: Vec<PathBuf> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "trace"))
        .collect();
    traces.sort();
    assert_eq!(traces.len(), 2, "{traces:?}");
    let mut seen = Vec::new();
    for trace in &traces {
        let report = report(trace);
        let leaks = report["leaks"].as_array().expect("leaks");
        assert_eq!(leaks.len(), 1, "{leaks:#?}");
        let py = python_frames_any(leaks[0]["stack"].as_array().unwrap());
        assert_eq!(py[0], ("leak".to_string(), line("# LEAK: helper")), "{py:?}");
        seen.push((leaks[0]["bytes"].as_u64().unwrap(), py[1].clone()));
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            (1 << 20, ("in_parent".to_string(), line("# LEAK: parent"))),
            (2 << 20, ("in_child".to_string(), line("# LEAK: child")))
        ]
    );
}

/// Through NVIDIA's cuda-core: a pool allocation made by cuda-core's Cython layer (which gives
/// no Python frames of its own) is named by the Python line that asked for it, with its caller.
#[test]
fn python_frames_name_a_cuda_core_allocation() {
    let dir = TempDir::new();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/python_frames_cuda_core.py");
    let python = python();
    let trace = dir.path().join("cuda_core.trace");
    let out = shim_command(&python, &trace).arg("-I").arg(&script).output().unwrap();
    assert_ok(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("leaked {}", 7 << 20)
    );
    let text = std::fs::read_to_string(&script).unwrap();
    // The last mention: the docstring names the marker too.
    let line = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains("# LEAK: cuda_core"))
        .last()
        .unwrap()
        .0 as u64
        + 1;
    let report = report(&trace);
    let stack = leak_stack(&report, 7 << 20);
    let ours: Vec<(String, u64)> = stack
        .iter()
        .filter(|f| {
            is_python(f)
                && f["file"]
                    .as_str()
                    .is_some_and(|p| p.ends_with("python_frames_cuda_core.py"))
        })
        .map(|f| (function(f).to_string(), f["line"].as_u64().unwrap_or(0)))
        .collect();
    assert_eq!(ours[0], ("leak_through_cuda_core".to_string(), line), "{stack:#?}");
    assert_eq!(ours[1].0, "main", "{ours:?}");
    // Native frames come first: the driver call is made below cuda-core's compiled layer.
    assert!(!is_python(&stack[0]), "{stack:#?}");
}
