//! Python frames on every CPython the tests can run: 3.10 to 3.15 (Debian's builds, the
//! machine's own), free-threaded builds with many threads at once, and an interpreter whose
//! `process_vm_readv` a seccomp filter refuses.

use std::path::{Path, PathBuf};

use gpuleak_e2e::{client, python, runner, shim_command, shim_command_via, TempDir};

use super::{function, is_python, leak_stack, python_frames_any, report, report_in};
use crate::trace::{assert_ok, dump, of_type};

/// `python_frames_ctypes.py`, which needs nothing but ctypes.
struct CtypesScript {
    path: PathBuf,
    text: String,
}

impl CtypesScript {
    fn new() -> CtypesScript {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/python_frames_ctypes.py");
        let text = std::fs::read_to_string(&path).expect("script");
        CtypesScript { path, text }
    }

    /// The first line that contains `needle`.
    fn line(&self, needle: &str) -> u64 {
        self.text.lines().position(|l| l.contains(needle)).expect(needle) as u64 + 1
    }

    /// Runs it with `python` under the shim (started through `via`), writing `trace`; it must
    /// succeed without a line from the shim.
    fn run(&self, via: &[&str], python: &Path, trace: &Path) {
        let out = shim_command_via(via, python, trace)
            .arg("-I")
            .arg(&self.path)
            .output()
            .expect("python");
        assert_ok(&out);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("gpuleak:"), "{}: {stderr}", python.display());
    }
}

/// The launchers `names` in `target/pythons/bin`, which `script` puts there (`scripts/test`
/// runs it first); none with a [`runner`]: they are the host's, of another architecture than
/// the shim under test, whose one interpreter is [`python`].
fn launchers(names: &[&str], script: &str) -> Vec<PathBuf> {
    if runner().is_some() {
        return Vec::new();
    }
    let bin = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/pythons/bin");
    names
        .iter()
        .map(|name| {
            let p = bin.join(name);
            assert!(p.is_file(), "{} is missing: run {script}", p.display());
            p
        })
        .collect()
}

/// Debian's builds of CPython 3.14 and 3.15 that `scripts/python-versions` unpacks:
/// distribution builds, stripped, whose eval loop calls the interpreter from a `.cold` part
/// outside the `_PyEval_EvalFrameDefault` symbol.
fn debian_interpreters() -> Vec<PathBuf> {
    launchers(&["python3.14", "python3.15"], "scripts/python-versions")
}

/// The free-threaded builds of CPython 3.13 and 3.14 (`--disable-gil`) that
/// `scripts/python-freethreaded` builds from source: objects laid out differently, and on 3.14
/// threads that run their own copies of the bytecode.
fn free_threaded_interpreters() -> Vec<PathBuf> {
    launchers(&["python3.13t", "python3.14t"], "scripts/python-freethreaded")
}

/// With a [`runner`], CPythons of the clients' architecture in a sysroot of their own, beside
/// [`python`]: `GPULEAK_E2E_MORE_PYTHONS` (space-separated), run with `QEMU_LD_PREFIX` set to
/// `GPULEAK_E2E_MORE_PYTHONS_SYSROOT` (`scripts/test-aarch64` unpacks Debian forky's arm64 3.13
/// to 3.15 there: distribution builds, stripped, with pointer authentication).
fn more_pythons() -> Vec<PathBuf> {
    if runner().is_none() {
        return Vec::new();
    }
    std::env::var("GPULEAK_E2E_MORE_PYTHONS")
        .unwrap_or_default()
        .split_whitespace()
        .map(PathBuf::from)
        .inspect(|p| assert!(p.is_file(), "GPULEAK_E2E_MORE_PYTHONS: {} is not a file", p.display()))
        .collect()
}

/// The sysroot of `python` when it is one of [`more_pythons`].
fn sysroot_of(python: &Path) -> Option<PathBuf> {
    let root = std::env::var_os("GPULEAK_E2E_MORE_PYTHONS_SYSROOT").map(PathBuf::from)?;
    python.starts_with(&root).then_some(root)
}

/// The host command line that starts `python` (before the runner): `env QEMU_LD_PREFIX=...`
/// for one of [`more_pythons`], nothing otherwise.
fn via_of(python: &Path) -> Vec<String> {
    match sysroot_of(python) {
        Some(root) => vec!["env".to_string(), format!("QEMU_LD_PREFIX={}", root.display())],
        None => Vec::new(),
    }
}

/// Every CPython 3.10 to 3.15 found on this machine (`python3.1x` on `PATH`, or in pyenv's
/// `$PYENV_ROOT/versions` or `~/.pyenv/versions`), plus `target/pyenv`'s 3.11,
/// [`debian_interpreters`] and [`free_threaded_interpreters`]; with a [`runner`], [`python`]
/// alone (the host's interpreters are of another architecture).
fn interpreters() -> Vec<PathBuf> {
    let mut found = vec![python()];
    if runner().is_some() {
        found.extend(more_pythons());
        return found;
    }
    found.extend(debian_interpreters());
    found.extend(free_threaded_interpreters());
    let mut roots: Vec<PathBuf> = Vec::new();
    let pyenv = std::env::var_os("PYENV_ROOT")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| Path::new(&h).join(".pyenv")));
    if let Some(versions) = pyenv.map(|p| p.join("versions")) {
        if let Ok(entries) = std::fs::read_dir(versions) {
            let mut dirs: Vec<PathBuf> = entries.filter_map(|e| e.ok()).map(|e| e.path().join("bin")).collect();
            dirs.sort();
            roots.extend(dirs);
        }
    }
    // pyenv's shims are scripts that fail for versions not selected: skip them.
    roots.extend(
        std::env::var_os("PATH")
            .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
            .unwrap_or_default()
            .into_iter()
            .filter(|d| !d.ends_with("shims")),
    );
    for minor in 10..=15 {
        let name = format!("python3.{minor}");
        if let Some(p) = roots.iter().map(|r| r.join(&name)).find(|p| p.is_file()) {
            found.push(p);
        }
    }
    found
}

/// Every interpreter of [`interpreters`], the free-threaded 3.13t and 3.14t among them. On 3.14t
/// the second thread runs its own copy of the bytecode (thread-local bytecode: its frames'
/// `instr_ptr` point outside the code object), so its leak's lines come out right only if the
/// walk finds that copy (with the copy's start taken for the code object's, that thread's
/// frames were all dropped).
#[test]
fn python_frames_on_every_cpython_3_10_to_3_15_found() {
    let script = CtypesScript::new();
    let line = |needle: &str| script.line(needle);
    let mut exercised = Vec::new();
    let debian = debian_interpreters();
    let free_threaded = free_threaded_interpreters();
    let more = more_pythons();
    for python in interpreters() {
        let dir = TempDir::new();
        let trace = dir.path().join("v.trace");
        let via = via_of(&python);
        script.run(&via.iter().map(String::as_str).collect::<Vec<_>>(), &python, &trace);
        let version = of_type(&dump(&trace), "PyCode")
            .first()
            .and_then(|c| c["python"].as_u64())
            .unwrap_or_else(|| panic!("{}: no PyCode record", python.display()));
        let t = if free_threaded.contains(&python) { "t" } else { "" };
        exercised.push(format!("3.{}{t} ({})", version & 0xff, python.display()));
        let report = report_in(&trace, sysroot_of(&python).as_deref());
        for (bytes, leaking, marker) in [
            (2u64 << 20, "leak_with_gil_held", "# LEAK: pydll"),
            (3 << 20, "leak_with_gil_released", "# LEAK: cdll"),
        ] {
            let stack = leak_stack(&report, bytes);
            let py: Vec<(String, u64)> = stack
                .iter()
                .filter(|f| is_python(f))
                .map(|f| (function(f).to_string(), f["line"].as_u64().unwrap_or(0)))
                .collect();
            let lambda = line("return list(map(lambda");
            assert_eq!(py.len(), 5, "{}: {py:?}", python.display());
            assert_eq!(py[0], (leaking.to_string(), line(marker)), "{}", python.display());
            assert!(py[1].0.ends_with("<lambda>") && py[1].1 == lambda, "{py:?}");
            assert_eq!(py[2], ("through_map".to_string(), lambda));
            assert_eq!(py[3], ("outer".to_string(), line("        through_map(leak)")));
            assert_eq!(py[4], ("<module>".to_string(), line("outer()  # the leaking calls")));
            // The lambda ran in its own eval-loop call, under map's C code.
            let at = |i: usize| {
                stack
                    .iter()
                    .position(|f| is_python(f) && function(f) == py[i].0)
                    .unwrap()
            };
            if more.contains(&python) {
                // Stripped arm64 builds: the eval loop is named (exported), the C code of
                // `map` between the groups is not.
                assert_eq!(function(&stack[at(1) + 1]), "_PyEval_EvalFrameDefault", "{stack:#?}");
                assert_eq!(function(&stack[at(4) + 1]), "_PyEval_EvalFrameDefault", "{stack:#?}");
                assert!(at(2) > at(1) + 2, "map's C code between the groups: {stack:#?}");
            } else if debian.contains(&python) {
                // Stripped: each group sits on the inner side of an unnamed frame of the
                // interpreter (the `.cold` part of its eval loop), never beside a named
                // function such as the `_PyObject_MakeTpCall` that called into ctypes.
                for i in [1, 4] {
                    let eval = &stack[at(i) + 1];
                    assert!(!is_python(eval) && eval["function"].is_null(), "{i}: {stack:#?}");
                    let module = eval["module"].as_str().unwrap_or("");
                    assert!(module.starts_with("python3.1"), "{i}: {module}: {stack:#?}");
                }
                assert!(at(2) > at(1) + 2, "map's C code between the groups: {stack:#?}");
            } else {
                assert_eq!(function(&stack[at(1) + 1]), "_PyEval_EvalFrameDefault", "{stack:#?}");
                assert_eq!(function(&stack[at(4) + 1]), "_PyEval_EvalFrameDefault", "{stack:#?}");
                assert!(stack[at(1)..at(2)].iter().any(|f| function(f) == "map_next"));
            }
        }
        // The two sites (identical native stacks) are told apart; a site's allocations may
        // be split over several groups by native differences (3.13 runs a first, unspecialised
        // call through another return address), never mixed with the other site's.
        for (site, size) in [("site_a", 4096u64), ("site_b", 8192)] {
            let mut total = 0;
            for leak in report["leaks"].as_array().unwrap() {
                let stack = leak["stack"].as_array().unwrap();
                if stack.iter().any(|f| is_python(f) && function(f) == site) {
                    let frame = stack.iter().find(|f| function(f) == site).unwrap();
                    assert_eq!(frame["line"].as_u64(), Some(line(&format!("# LEAK: {site}"))));
                    assert_eq!(
                        leak["bytes"].as_u64(),
                        Some(size * leak["allocations"].as_u64().unwrap())
                    );
                    total += leak["bytes"].as_u64().unwrap();
                }
            }
            assert_eq!(total, 4 * size, "{site} on {}", python.display());
        }
        let thread = python_frames_any(&leak_stack(&report, 5 << 20));
        assert!(
            !thread.is_empty(),
            "{}: no Python frames on the second thread",
            python.display()
        );
        assert_eq!(thread[0], ("leak_in_thread".to_string(), line("# LEAK: thread")));
    }
    eprintln!("Python frames checked on: {}", exercised.join(", "));
    let required: &[&str] = if runner().is_some() {
        // Every one of them ran (the loop above), whichever GPULEAK_E2E_MORE_PYTHONS names.
        &[]
    } else {
        &["3.14 ", "3.15 ", "3.13t ", "3.14t "]
    };
    for v in required {
        assert!(
            exercised.iter().any(|e| e.starts_with(v)),
            "{v}not checked: {exercised:?}"
        );
    }
}

/// Many threads allocating at once through one function (`python_frames_threads.py`): on the
/// free-threaded builds they run truly in parallel, and on 3.14t each runs its own copy of the
/// function's bytecode, in an array that is replaced by a larger one while the others run. Every
/// allocation of every thread must carry both Python frames with their lines.
#[test]
fn python_frames_of_many_threads_at_once_on_free_threaded_builds() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("python/python_frames_threads.py");
    let text = std::fs::read_to_string(&path).expect("script");
    let line = |needle: &str| text.lines().position(|l| l.contains(needle)).expect(needle) as u64 + 1;
    let (threads, rounds) = (24u64, 20u64);
    let default = python();
    for python in free_threaded_interpreters().into_iter().chain([default]) {
        let dir = TempDir::new();
        let trace = dir.path().join("threads.trace");
        let out = shim_command(&python, &trace)
            .arg("-I")
            .arg(&path)
            .output()
            .expect("python");
        assert_ok(&out);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!stderr.contains("gpuleak:"), "{}: {stderr}", python.display());
        let report = report(&trace);
        // Groups are by stack, whatever the thread: count what they hold.
        let (mut allocations, mut bytes) = (0, 0);
        for leak in report["leaks"].as_array().expect("leaks") {
            let py = python_frames_any(leak["stack"].as_array().expect("stack"));
            assert!(py.len() >= 2, "{}: {py:?}", python.display());
            assert_eq!(
                py[0],
                ("alloc".to_string(), line("# LEAK: shared")),
                "{}",
                python.display()
            );
            assert_eq!(
                py[1],
                ("worker".to_string(), line("# LEAK: worker")),
                "{}",
                python.display()
            );
            allocations += leak["allocations"].as_u64().unwrap();
            bytes += leak["bytes"].as_u64().unwrap();
        }
        assert_eq!(allocations, threads * rounds, "{}", python.display());
        assert_eq!(
            bytes,
            rounds * 4096 * threads * (threads + 1) / 2,
            "{}",
            python.display()
        );
    }
}

/// In a container whose seccomp profile refuses `process_vm_readv` (with `EPERM`, as older
/// Docker and containerd defaults do), the careful reads go through `/proc/self/mem`: the
/// Python frames are all there, and the shim says nothing.
#[test]
fn python_frames_where_seccomp_refuses_process_vm_readv() {
    let script = CtypesScript::new();
    let line = |needle: &str| script.line(needle);
    let python = python();
    let dir = TempDir::new();
    let trace = dir.path().join("seccomp.trace");
    let wrapper = client("no_vm_readv");
    script.run(&[wrapper.to_str().unwrap()], &python, &trace);
    let report = report(&trace);
    for (bytes, leaking, marker) in [
        (2u64 << 20, "leak_with_gil_held", "# LEAK: pydll"),
        (3 << 20, "leak_with_gil_released", "# LEAK: cdll"),
        (5 << 20, "leak_in_thread", "# LEAK: thread"),
    ] {
        let py = python_frames_any(&leak_stack(&report, bytes));
        assert_eq!(py.first(), Some(&(leaking.to_string(), line(marker))), "{py:?}");
    }
    let outer = python_frames_any(&leak_stack(&report, 2 << 20));
    assert_eq!(outer.last().map(|f| f.0.as_str()), Some("<module>"), "{outer:?}");
}
