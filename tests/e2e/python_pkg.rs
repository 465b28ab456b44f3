//! The Python package (`python/`): the wheel that `scripts/build-wheel` builds with maturin
//! (the `gpuleak` command, `libgpuleak.so` inside the package, the Python API and the pytest
//! plugin), installed into a fresh virtual environment and run; `gpuleak.check()` and the
//! pytest plugin on real cuda-bindings allocations on the simulated driver, each leak with its
//! fixed twin; `gpuleak run --no-framework-cache`.
//!
//! `target/pkgenv` is the environment `scripts/wheel-test-env` installs the wheel into, beside
//! pytest, pytest-xdist, cuda-bindings and auditwheel from PyPI; the tests first check that it
//! holds the package as it is in `python/` now (a stale wheel fails with the command that
//! rebuilds it). The wheel is manylinux2014: its shim and binary link against glibc 2.17.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gpuleak_e2e::{client, gpuleak_bin, output_of, shim_lib, sim_command, stdout_of, target_dir, TempDir};

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

pub(crate) fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python").join(name)
}

const REBUILD: &str = "run scripts/build-wheel and scripts/wheel-test-env (after cargo build --release --workspace)";

/// The wheel in `target/wheels`.
fn wheel() -> PathBuf {
    let dir = target_dir().join("../wheels");
    let wheels: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}: {REBUILD}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "whl"))
        .collect();
    assert_eq!(wheels.len(), 1, "one gpuleak wheel in {}: {REBUILD}", dir.display());
    wheels[0].clone()
}

/// `target/pkgenv/bin/python`, checked to hold the package as `python/gpuleak/` has it, with
/// the shim that `scripts/build-wheel` packed there (its own glibc 2.17 build of the shim), no
/// older than `target/release`'s.
pub(crate) fn pkgenv_python() -> PathBuf {
    let python = repo_root().join("target/pkgenv/bin/python");
    assert!(python.is_file(), "{} is missing: {REBUILD}", python.display());
    let out = output_of(Command::new(&python).args([
        "-I",
        "-c",
        "import gpuleak, os; print(os.path.dirname(gpuleak.__file__))",
    ]));
    assert!(
        out.status.success(),
        "no gpuleak in {}: {REBUILD}: {out:?}",
        python.display()
    );
    let installed = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
    let sources = repo_root().join("python/gpuleak");
    for entry in std::fs::read_dir(&sources).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|x| x == "py") {
            let name = path.file_name().unwrap();
            assert!(
                std::fs::read(&path).ok() == std::fs::read(installed.join(name)).ok(),
                "{} in target/pkgenv differs from python/gpuleak: {REBUILD}",
                name.to_string_lossy()
            );
        }
    }
    let packed = sources.join("libgpuleak.so");
    assert!(
        std::fs::read(installed.join("libgpuleak.so")).ok() == std::fs::read(&packed).ok(),
        "the libgpuleak.so in target/pkgenv is not the one python/gpuleak has: {REBUILD}"
    );
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    assert!(
        modified(&packed) >= modified(&shim_lib()),
        "the wheel's libgpuleak.so is older than target/release's: {REBUILD}"
    );
    python
}

/// `cmd` on the simulator, without the caller's Python and pytest settings.
pub(crate) fn python_clean(mut cmd: Command) -> Command {
    for key in [
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSTARTUP",
        "PYTEST_ADDOPTS",
        "PYTEST_PLUGINS",
        "PYTEST_DISABLE_PLUGIN_AUTOLOAD",
        "PYTORCH_NO_CUDA_MEMORY_CACHING",
        "XLA_PYTHON_CLIENT_ALLOCATOR",
        "XLA_PYTHON_CLIENT_PREALLOCATE",
        "NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT",
        "GPULEAK_NO_FRAMEWORK_CACHE",
    ] {
        cmd.env_remove(key);
    }
    cmd.env("PYTHONDONTWRITEBYTECODE", "1");
    cmd
}

/// `gpuleak run ARGS` (the workspace's build) in `dir`.
fn gpuleak_run(dir: &Path, args: &[&std::ffi::OsStr]) -> Output {
    let mut cmd = python_clean(sim_command(gpuleak_bin()));
    cmd.current_dir(dir).arg("run").args(args);
    output_of(&mut cmd)
}

/// The 1-based line of `file` (under tests/python) that ends with `ending`.
pub(crate) fn line_of(file: &str, ending: &str) -> usize {
    let text = std::fs::read_to_string(script(file)).unwrap();
    1 + text
        .lines()
        .position(|l| l.ends_with(ending))
        .unwrap_or_else(|| panic!("no line ending with {ending:?} in {file}"))
}

pub(crate) fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

pub(crate) fn traces_in(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "trace"))
        .collect();
    v.sort();
    v
}

/// Lists a wheel's license files and checks each against the repository's copy.
const LICENSES_IN_WHEEL: &str = r#"
import pathlib, sys, zipfile
wheel, root = sys.argv[1], pathlib.Path(sys.argv[2])
with zipfile.ZipFile(wheel) as z:
    names = z.namelist()
    meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert "License-Expression: MIT OR Apache-2.0\n" in meta, meta
    for text in ["LICENSE-MIT", "LICENSE-APACHE"]:
        inside = [n for n in names if n.endswith(".dist-info/licenses/" + text)]
        assert len(inside) == 1, (text, names)
        assert z.read(inside[0]) == (root / text).read_bytes(), text + " differs from the repository's"
        assert "License-File: " + text + "\n" in meta, meta
        print(inside[0])
"#;

#[test]
fn the_wheel_carries_both_license_texts_in_its_dist_info() {
    let wheel = wheel();
    let out = output_of(
        Command::new("python3")
            .args(["-I", "-c", LICENSES_IN_WHEEL])
            .arg(&wheel)
            .arg(repo_root()),
    );
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{}: {stderr}: {REBUILD}", wheel.display());
    assert!(stdout.contains(".dist-info/licenses/LICENSE-MIT\n"), "{stdout}");
    assert!(stdout.contains("dist-info/licenses/LICENSE-APACHE\n"), "{stdout}");
}

/// auditwheel's verdict on the wheel: the platform tag its ELF files' symbol versions allow.
#[test]
fn the_wheel_is_manylinux2014_by_its_symbol_versions() {
    let wheel = wheel();
    let python = pkgenv_python();
    let out = output_of(Command::new(&python).args(["-m", "auditwheel", "show"]).arg(&wheel));
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    // auditwheel wraps its lines; the verdict is the first quoted tag.
    let words = stdout.split_whitespace().collect::<Vec<_>>().join(" ");
    let tag = format!("\"manylinux_2_17_{}\"", std::env::consts::ARCH);
    assert!(
        words.contains(&format!("is consistent with the following platform tag: {tag}")),
        "{} needs a newer glibc than 2.17 (the shim or the binary links a newer symbol \
         version: call it through libc::syscall or look it up with dlsym): {stdout}",
        wheel.display()
    );
    let name = wheel.file_name().unwrap().to_string_lossy().into_owned();
    assert!(name.contains("manylinux2014_"), "{name}");
}

#[test]
fn the_wheel_installs_into_a_fresh_venv_and_gpuleak_run_traces_python_from_it() {
    let dir = TempDir::new();
    let venv = dir.path().join("venv");
    let host = pkgenv_python();
    let made = output_of(Command::new(&host).args(["-m", "venv", "--without-pip"]).arg(&venv));
    assert!(made.status.success(), "{made:?}");
    let vpython = venv.join("bin/python");
    // pip of target/pkgenv installs into the new environment; nothing comes from an index.
    let installed = output_of(
        Command::new(&host)
            .args(["-m", "pip", "--disable-pip-version-check", "--python"])
            .arg(&vpython)
            .args(["install", "--quiet", "--no-index", "--no-deps"])
            .arg(wheel()),
    );
    assert!(installed.status.success(), "{installed:?}");
    let vgpuleak = venv.join("bin/gpuleak");
    assert!(vgpuleak.is_file(), "the wheel installs the gpuleak command");

    // The installed command finds the shim inside the installed package by itself.
    let mut cmd = python_clean(sim_command(&vgpuleak));
    cmd.current_dir(dir.path())
        .args(["run", "-v", "--"])
        .arg(&vpython)
        .arg(script("pkg_train.py"));
    let out = output_of(&mut cmd);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let package = venv.join("lib").canonicalize().unwrap();
    let shim_line = stderr
        .lines()
        .find(|l| l.starts_with("gpuleak: preloading "))
        .unwrap_or("");
    assert!(
        shim_line.contains(&*package.to_string_lossy()) && shim_line.ends_with("/site-packages/gpuleak/libgpuleak.so"),
        "the venv's own shim is preloaded: {stderr}"
    );
    assert!(stdout.contains(&format!("gpuleak from {}", venv.display())), "{stdout}");
    assert!(stdout.contains("active True"), "{stdout}");
    // gpuleak.check(): the fixed step passes, the leaking one raises with its bytes.
    assert!(stdout.contains("step 1 ok\n"), "{stdout}");
    assert!(stdout.contains("step 2 leaked 262144\n"), "{stdout}");
    assert!(
        stderr.contains("1 process traced: 1 leaked allocation (256.0 KiB)"),
        "{stderr}"
    );
    let traces = traces_in(dir.path());
    assert_eq!(traces.len(), 1, "{traces:?}");

    // python -m gpuleak runs the packaged command: report, and run itself.
    let mut report = python_clean(sim_command(&vpython));
    report.args(["-m", "gpuleak", "report"]).arg(&traces[0]);
    let out = output_of(&mut report);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stdout.contains("leaked: 262144 bytes in 1 allocation"), "{stdout}");

    let second = dir.path().join("again");
    std::fs::create_dir(&second).unwrap();
    let mut run = python_clean(sim_command(&vpython));
    run.current_dir(&second)
        .args(["-m", "gpuleak", "run", "-v", "--"])
        .arg(&vpython)
        .arg(script("pkg_train.py"));
    let out = output_of(&mut run);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("step 2 leaked 262144\n"), "{stdout}");
    assert!(stderr.contains("/site-packages/gpuleak/libgpuleak.so"), "{stderr}");
    assert_eq!(traces_in(&second).len(), 1);
}

#[test]
fn without_the_shim_the_api_does_nothing_and_pytest_gpuleak_runs_itself_again_under_it() {
    let python = pkgenv_python();
    let mut no_shim = python_clean(sim_command(&python));
    let out = output_of(no_shim.arg(script("pkg_no_shim.py")));
    let (stdout, stderr) = text(&out);
    assert!(out.status.success(), "{stdout}\n{stderr}");
    assert_eq!(stdout, "ok no_shim\n");

    // `pytest --gpuleak` alone: pytest runs again with the package's shim preloaded, and the
    // verdicts are those under `gpuleak run`, with and without xdist workers.
    for workers in [1, 2] {
        let dir = TempDir::new();
        let file = script("pkg_pytest_leaks.py");
        let mut pytest = python_clean(sim_command(&python));
        pytest
            .current_dir(dir.path())
            .args(["-m", "pytest", "-p", "no:cacheprovider", "-rA", "--gpuleak"])
            .arg(format!("--rootdir={}", file.parent().unwrap().display()))
            .arg(&file);
        if workers > 1 {
            pytest.args(["-n", "2"]);
        }
        let out = output_of(&mut pytest);
        let (_, stderr) = text(&out);
        assert!(
            stderr.contains("gpuleak: running pytest again with LD_PRELOAD=")
                && stderr.contains("/site-packages/gpuleak/libgpuleak.so"),
            "{stderr}"
        );
        assert_eq!(
            stderr.matches("running pytest again").count(),
            1,
            "once, not in the workers: {stderr}"
        );
        assert_plugin_verdicts(&out, workers, dir.path());
    }

    // Where it cannot run again (it already did, and the shim is still not there), one line
    // says what to run.
    let dir = TempDir::new();
    let mut pytest = python_clean(sim_command(&python));
    pytest
        .current_dir(dir.path())
        .env("GPULEAK_PYTEST_REEXEC", "1")
        .args(["-m", "pytest", "-p", "no:cacheprovider", "--gpuleak"])
        .arg(script("pkg_pytest_leaks.py"));
    let out = output_of(&mut pytest);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(4), "a usage error: {stdout}\n{stderr}");
    assert!(
        stderr.contains("libgpuleak.so is not loaded") && stderr.contains("gpuleak run -- pytest --gpuleak"),
        "{stderr}"
    );

    // Loaded but told to record nothing: as useless, and said as clearly.
    let mut disabled = python_clean(sim_command(gpuleak_bin()));
    disabled
        .current_dir(dir.path())
        .env("GPULEAK_DISABLE", "1")
        .args(["run", "--"])
        .arg(&python)
        .args(["-m", "pytest", "-p", "no:cacheprovider", "--gpuleak"])
        .arg(script("pkg_pytest_leaks.py"));
    let out = output_of(&mut disabled);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(4), "a usage error: {stdout}\n{stderr}");
    assert!(stderr.contains("GPULEAK_DISABLE=1 is set"), "{stderr}");
}

#[test]
fn check_raises_on_a_leaking_block_and_not_on_its_fixed_twin() {
    let dir = TempDir::new();
    let python = pkgenv_python();
    let out = gpuleak_run(
        dir.path(),
        &["--".as_ref(), python.as_os_str(), script("pkg_check.py").as_os_str()],
    );
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    for case in [
        "ok api trace=",
        "ok leak_raises frames=",
        "ok fixed_twin\n",
        "ok under_the_limit\n",
        "ok frees_older_memory\n",
        "ok exception_passes_through\n",
        "ok decorator\n",
        "done\n",
    ] {
        assert!(stdout.contains(case), "missing {case:?} in:\n{stdout}\n{stderr}");
    }
    // The trace the API named is the one gpuleak run wrote.
    let traces = traces_in(dir.path());
    assert_eq!(traces.len(), 1);
    let named = stdout.lines().find_map(|l| l.strip_prefix("ok api trace=")).unwrap();
    assert_eq!(
        Path::new(named).canonicalize().unwrap(),
        traces[0].canonicalize().unwrap()
    );
    // The message names the leak's size, the call that made it and its stack with the Python
    // line that leaked, cut at the function holding the `with` block.
    assert!(
        stdout.contains("1048576 bytes (1.0 MiB) still live (device, allocated by cuMemAlloc_v2):\n    #0 "),
        "{stdout}"
    );
    let leaky = format!(
        "leaky_block {}:{} (python)\nok fixed_twin",
        script("pkg_check.py").display(),
        line_of("pkg_check.py", "        KEPT.append(alloc(MIB))")
    );
    assert!(stdout.contains(&format!(" {leaky}")), "missing {leaky:?}:\n{stdout}");
}

/// One pytest run's outcome per test name, from `-rA`'s summary lines.
fn outcomes(stdout: &str) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = stdout
        .lines()
        .filter_map(|l| {
            let (status, rest) = l.split_once(' ')?;
            if !matches!(status, "PASSED" | "FAILED" | "ERROR") {
                return None;
            }
            let test = rest.split(" - ").next()?.rsplit("::").next()?.to_string();
            Some((test, status.to_string()))
        })
        .collect();
    v.sort();
    v
}

fn pytest_under_gpuleak(dir: &Path, extra: &[&str]) -> Output {
    let python = pkgenv_python();
    let mut args: Vec<&std::ffi::OsStr> = vec!["--".as_ref(), python.as_os_str()];
    args.extend(["-m", "pytest", "-p", "no:cacheprovider", "-rA", "--gpuleak"].map(std::ffi::OsStr::new));
    args.extend(extra.iter().map(std::ffi::OsStr::new));
    // Test ids (the baseline's keys) are relative to the root directory: the same in every run.
    let file = script("pkg_pytest_leaks.py");
    let rootdir = format!("--rootdir={}", file.parent().unwrap().display());
    args.push(rootdir.as_ref());
    args.push(file.as_os_str());
    gpuleak_run(dir, &args)
}

fn expected(failed: &[&str]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = [
        "test_leaks_1_mib_at_a_1_mb_limit",
        "test_leaks_2_mib",
        "test_leaks_2_mib_fixed",
        "test_leaks_512_kib_under_the_limit",
        "test_peak_8_mib",
        "test_peak_8_mib_fixed",
        "test_unmarked_leak",
    ]
    .iter()
    .map(|t| {
        let status = if failed.contains(t) { "FAILED" } else { "PASSED" };
        (t.to_string(), status.to_string())
    })
    .collect();
    v.sort();
    v
}

fn assert_plugin_verdicts(out: &Output, workers: usize, dir: &Path) {
    let (stdout, stderr) = text(out);
    assert_eq!(
        out.status.code(),
        Some(1),
        "pytest's exit code passes through:\n{stdout}\n{stderr}"
    );
    assert_eq!(
        outcomes(&stdout),
        expected(&["test_leaks_2_mib", "test_peak_8_mib"]),
        "\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains("gpuleak: 2097152 bytes (2.0 MiB) allocated in the test outlived it (limit 1048576 bytes)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("allocated by cuMemAlloc_v2):\n    #0 "),
        "the leak's stack: {stdout}"
    );
    // ...through the leaking line, up to the test function, where it is cut.
    let file = script("pkg_pytest_leaks.py").display().to_string();
    let leaking = format!(
        " make_cache {file}:{} (python)",
        line_of("pkg_pytest_leaks.py", "    CACHE.append(alloc(size))")
    );
    let test = format!(
        " test_leaks_2_mib {file}:{} (python)",
        line_of("pkg_pytest_leaks.py", "    make_cache(2 * MIB)")
    );
    let lines: Vec<&str> = stdout.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.ends_with(&leaking))
        .unwrap_or_else(|| panic!("no frame {leaking:?}:\n{stdout}"));
    assert!(lines[at + 1].ends_with(&test), "{test:?} after {leaking:?}:\n{stdout}");
    assert!(
        !lines[at + 2].trim_start().starts_with('#'),
        "the stack goes on past the test:\n{stdout}"
    );
    assert!(
        stdout.contains(
            "gpuleak: the test had 8388608 bytes (8.0 MiB) of GPU memory allocated at once, over its limit of 4194304 bytes"
        ),
        "{stdout}"
    );
    assert!(
        stdout.contains("gpuleak: 7 tests measured, 4 left GPU memory allocated (3.8 MiB)"),
        "{stdout}"
    );
    // One trace per process that ran tests (the xdist controller runs none and makes no CUDA
    // call, so it writes none).
    assert_eq!(traces_in(dir).len(), workers, "{stderr}");
}

#[test]
fn the_pytest_plugin_fails_the_leaking_tests_and_passes_their_fixed_twins() {
    let dir = TempDir::new();
    let out = pytest_under_gpuleak(dir.path(), &[]);
    assert_plugin_verdicts(&out, 1, dir.path());
}

#[test]
fn the_pytest_plugin_works_with_xdist_workers() {
    let dir = TempDir::new();
    let out = pytest_under_gpuleak(dir.path(), &["-n", "2"]);
    let (stdout, _) = text(&out);
    assert!(stdout.contains("created: 2/2 workers"), "{stdout}");
    assert_plugin_verdicts(&out, 2, dir.path());
}

#[test]
fn the_pytest_baseline_fails_a_test_whose_leak_grew_and_passes_the_others() {
    let dir = TempDir::new();
    let baseline = dir.path().join("baseline.json");
    let b = baseline.to_str().unwrap();
    // Written with xdist: the controller gathers the workers' numbers.
    let out = pytest_under_gpuleak(
        dir.path(),
        &["-n", "2", "--gpuleak-baseline", b, "--gpuleak-update-baseline"],
    );
    let (stdout, stderr) = text(&out);
    assert!(
        stdout.contains(&format!("gpuleak: baseline written to {b}")),
        "{stdout}\n{stderr}"
    );
    let written = std::fs::read_to_string(&baseline).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&written).unwrap();
    let leaked = |t: &str| doc["tests"][format!("pkg_pytest_leaks.py::{t}")]["leaked_bytes"].as_u64();
    assert_eq!(leaked("test_unmarked_leak"), Some(262_144), "{written}");
    assert_eq!(leaked("test_leaks_2_mib_fixed"), Some(0), "{written}");
    assert_eq!(leaked("test_leaks_1_mib_at_a_1_mb_limit"), Some(1 << 20), "{written}");
    assert_eq!(leaked("test_leaks_512_kib_under_the_limit"), Some(524_288), "{written}");
    assert_eq!(
        doc["tests"]["pkg_pytest_leaks.py::test_peak_8_mib"]["peak_bytes"].as_u64(),
        Some(8 << 20)
    );

    // The baseline as recorded passes every test it lists (the markers still fail theirs)...
    let out = pytest_under_gpuleak(dir.path(), &["--gpuleak-baseline", b]);
    let (stdout, stderr) = text(&out);
    assert_eq!(
        outcomes(&stdout),
        expected(&["test_leaks_2_mib", "test_peak_8_mib"]),
        "\n{stdout}\n{stderr}"
    );
    // ...and one whose entry is lower than the leak now fails, naming the file.
    let lowered = written.replacen("\"leaked_bytes\": 262144", "\"leaked_bytes\": 1000", 1);
    assert_ne!(lowered, written);
    std::fs::write(&baseline, lowered).unwrap();
    let out = pytest_under_gpuleak(dir.path(), &["--gpuleak-baseline", b]);
    let (stdout, stderr) = text(&out);
    assert_eq!(
        outcomes(&stdout),
        expected(&["test_leaks_2_mib", "test_peak_8_mib", "test_unmarked_leak"]),
        "\n{stdout}\n{stderr}"
    );
    assert!(
        stdout.contains(&format!(
            "gpuleak: the test leaked 262144 bytes, more than the 1000 bytes of its baseline in {b}"
        )),
        "{stdout}"
    );
}

#[test]
fn no_framework_cache_sets_the_switches_of_pytorch_jax_numba_and_cupy() {
    let dir = TempDir::new();
    // A stand-in cupy that records the allocator calls, and a sitecustomize of the user's,
    // which must still run.
    let site = dir.path().join("site");
    std::fs::create_dir_all(site.join("cupy")).unwrap();
    std::fs::write(site.join("cupy/__init__.py"), "from . import cuda\n").unwrap();
    std::fs::write(
        site.join("cupy/cuda.py"),
        "calls = []\n\
         def set_allocator(allocator=0):\n    calls.append(('set_allocator', allocator))\n\
         def set_pinned_memory_allocator(allocator=0):\n    calls.append(('set_pinned_memory_allocator', allocator))\n",
    )
    .unwrap();
    std::fs::write(
        site.join("sitecustomize.py"),
        "import os\nos.environ['PKG_USER_SITECUSTOMIZE'] = 'ran'\n",
    )
    .unwrap();
    let python = pkgenv_python();
    let run = |flags: &[&str]| {
        let mut cmd = python_clean(sim_command(gpuleak_bin()));
        cmd.current_dir(dir.path())
            .env("PYTHONPATH", &site)
            .arg("run")
            .args(flags)
            .arg("--")
            .arg(&python)
            .arg(script("pkg_framework_env.py"));
        let out = output_of(&mut cmd);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        (stdout, stderr)
    };
    let (stdout, stderr) = run(&["--no-framework-cache", "-v"]);
    for line in [
        "env PYTORCH_NO_CUDA_MEMORY_CACHING=1",
        "env XLA_PYTHON_CLIENT_ALLOCATOR=platform",
        "env XLA_PYTHON_CLIENT_PREALLOCATE=false",
        "env GPULEAK_NO_FRAMEWORK_CACHE=1",
        "env NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT=0",
        "user sitecustomize ran",
        "cupy calls [('set_allocator', None), ('set_pinned_memory_allocator', None)]",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "missing {line:?}:\n{stdout}\n{stderr}"
        );
    }
    // -v says what it set and why.
    for var in [
        "gpuleak: PYTORCH_NO_CUDA_MEMORY_CACHING=1 (",
        "gpuleak: XLA_PYTHON_CLIENT_ALLOCATOR=platform (",
        "gpuleak: XLA_PYTHON_CLIENT_PREALLOCATE=false (",
        "gpuleak: NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT=0 (",
        "gpuleak: PYTHONPATH=",
    ] {
        assert!(stderr.contains(var), "missing {var:?}:\n{stderr}");
    }
    // The sitecustomize's directory is gone once the command has ended.
    let pythonpath = stderr
        .lines()
        .find_map(|l| l.strip_prefix("gpuleak: PYTHONPATH="))
        .unwrap();
    let hook_dir = pythonpath.split(':').next().unwrap();
    assert!(!Path::new(hook_dir).exists(), "{hook_dir} was left behind");
    assert!(
        pythonpath.contains(&*site.to_string_lossy()),
        "the user's PYTHONPATH is kept: {pythonpath}"
    );

    // The real CuPy (imported, no CUDA call made): its pool's malloc by default (inside the
    // adapter's out-of-memory watch), the raw one under the flag.
    let cupy = |flags: &[&str]| {
        let mut args: Vec<&std::ffi::OsStr> = flags.iter().map(std::ffi::OsStr::new).collect();
        let file = script("pkg_cupy_allocator.py");
        args.extend(["--".as_ref(), python.as_os_str(), file.as_os_str()]);
        let out = gpuleak_run(dir.path(), &args);
        let (stdout, stderr) = text(&out);
        assert!(out.status.success(), "{stdout}\n{stderr}");
        stdout
    };
    assert_eq!(cupy(&["--no-framework-cache"]), "cupy 14.2.0 allocator _malloc\n");
    assert_eq!(
        cupy(&[]),
        "cupy 14.2.0 allocator gpuleak_malloc around MemoryPool.malloc\n"
    );

    // The twin: a plain run changes none of it.
    let (stdout, stderr) = run(&[]);
    for line in [
        "env PYTORCH_NO_CUDA_MEMORY_CACHING=None",
        "env XLA_PYTHON_CLIENT_ALLOCATOR=None",
        "env GPULEAK_NO_FRAMEWORK_CACHE=None",
        "env NUMBA_CUDA_MAX_PENDING_DEALLOCS_COUNT=None",
        "user sitecustomize ran",
        "cupy calls []",
    ] {
        assert!(
            stdout.lines().any(|l| l == line),
            "missing {line:?}:\n{stdout}\n{stderr}"
        );
    }
}

#[test]
fn check_sees_numba_cuda_device_arrays_and_no_framework_cache_flushes_its_deferred_frees() {
    let dir = TempDir::new();
    let python = pkgenv_python();
    let file = script("pkg_numba.py");
    let leak_line = std::fs::read_to_string(&file)
        .unwrap()
        .lines()
        .position(|l| l.ends_with("# the leak"))
        .unwrap()
        + 1;
    let run = |flags: &[&str]| {
        let mut args: Vec<&std::ffi::OsStr> = flags.iter().map(std::ffi::OsStr::new).collect();
        args.extend(["--".as_ref(), python.as_os_str(), file.as_os_str()]);
        let out = gpuleak_run(dir.path(), &args);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
        stdout
    };
    // Each device array is a real allocation once numba frees at once: the leak is reported
    // at its line, the fixed twin passes.
    let stdout = run(&["--no-framework-cache"]);
    assert_eq!(
        stdout,
        format!("leak leaked 1048576 at pkg_numba.py:{leak_line}\nfixed ok\n")
    );
    // Without it numba-cuda defers the frees (in batches of 10), so the twin's two arrays (1 MiB
    // and the 1 KiB copy) are still allocated when its block ends: what --no-framework-cache is
    // for.
    let stdout = run(&[]);
    assert!(stdout.contains("\nfixed leaked 1049600 at pkg_numba.py:"), "{stdout}");
}

#[test]
fn gpuleak_trace_path_names_each_process_s_own_trace_and_is_null_without_the_shim() {
    let dir = TempDir::new();
    let out = gpuleak_run(dir.path(), &["--".as_ref(), client("pkg_trace_path").as_os_str()]);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let field = |key: &str| {
        stdout
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .unwrap_or_else(|| panic!("no {key:?} in {stdout}"))
            .to_string()
    };
    let (parent, again, child) = (field("parent "), field("again "), field("child "));
    assert_eq!(parent, again);
    assert_ne!(parent, child, "a forked child writes its own trace");
    let mut named: Vec<PathBuf> = [&parent, &child]
        .iter()
        .map(|p| Path::new(p.as_str()).canonicalize().unwrap())
        .collect();
    named.sort();
    let written: Vec<PathBuf> = traces_in(dir.path())
        .iter()
        .map(|p| p.canonicalize().unwrap())
        .collect();
    assert_eq!(named, written, "{stderr}");
    // The twin: without the shim the weak symbol is NULL and the macro says so.
    let plain = stdout_of(&mut sim_command(client("pkg_trace_path")));
    assert_eq!(plain, "parent (null)\nagain (null)\nchild (null)\n");
}

#[test]
fn the_package_s_python_unit_tests_pass() {
    let dir = TempDir::new();
    let mut cmd = python_clean(sim_command(pkgenv_python()));
    cmd.current_dir(dir.path())
        .args(["-m", "pytest", "-p", "no:cacheprovider", "-q"])
        .arg(format!("--rootdir={}", dir.path().display()))
        .arg(script("pkg_unit.py"));
    let out = output_of(&mut cmd);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("18 passed"), "{stdout}");
}

/// A generated suite of `tests` tests: clean ones (a buffer allocated and freed, a buffer kept
/// in a fixture's scope and freed at its teardown) and, at the indices of `leaking`, a test
/// that keeps its buffer in a module-level list, each from a line of its own.
fn generated_suite(dir: &Path, tests: usize, leaking: &[usize]) -> PathBuf {
    let mut py = format!(
        "import sys\nsys.path.insert(0, {:?})\nfrom pkg_cuda import alloc, free  # noqa: E402\n\nKEPT = []\n\n",
        script("pkg_cuda.py").parent().unwrap().display().to_string()
    );
    for (n, _) in leaking.iter().enumerate() {
        py += &format!("\ndef keep_{n}(size):\n    KEPT.append(alloc(size))  # the leak {n}\n\n");
    }
    for i in 0..tests {
        if let Some(n) = leaking.iter().position(|&l| l == i) {
            py += &format!("\ndef test_{i:03}():\n    keep_{n}({} << 10)\n", 64 * (n + 1));
        } else {
            py += &format!("\ndef test_{i:03}():\n    free(alloc({} << 10))\n", 16 + i % 7);
        }
    }
    let file = dir.join("test_generated.py");
    std::fs::write(&file, py).unwrap();
    file
}

/// A `gpuleak` that counts its runs in `count` and then runs the workspace's.
fn counting_gpuleak(dir: &Path, count: &Path) -> PathBuf {
    let wrapper = dir.join("gpuleak-counting");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\necho \"$*\" >> '{}'\nexec '{}' \"$@\"\n",
            count.display(),
            gpuleak_bin().display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).unwrap();
    wrapper
}

#[test]
fn the_pytest_plugin_runs_the_analyzer_only_for_the_3_leaking_tests_of_300() {
    let python = pkgenv_python();
    let leaking = [41, 150, 299];
    for workers in [1, 2] {
        let dir = TempDir::new();
        let suite = generated_suite(dir.path(), 300, &leaking);
        let count = dir.path().join("analyzer-runs");
        let mut pytest = python_clean(sim_command(&python));
        pytest
            .current_dir(dir.path())
            .env("GPULEAK_BIN", counting_gpuleak(dir.path(), &count))
            .args(["-m", "pytest", "-p", "no:cacheprovider", "-rA", "--gpuleak"])
            .args(["--gpuleak-limit-leaks", "0"])
            .arg(&suite);
        if workers > 1 {
            pytest.args(["-n", "2"]);
        }
        let out = output_of(&mut pytest);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
        let failed: Vec<String> = outcomes(&stdout)
            .into_iter()
            .filter(|(_, s)| s != "PASSED")
            .map(|(t, _)| t)
            .collect();
        let want: Vec<String> = leaking.iter().map(|i| format!("test_{i:03}")).collect();
        assert_eq!(failed, want, "{stdout}\n{stderr}");
        assert!(stdout.contains("297 passed"), "{stdout}");
        // Each failure names its own leaking line, then the test.
        let file = suite.display().to_string();
        let text = std::fs::read_to_string(&suite).unwrap();
        let line = |needle: &str| 1 + text.lines().position(|l| l.contains(needle)).unwrap();
        for (n, i) in leaking.iter().enumerate() {
            let keep = format!(" keep_{n} {file}:{} (python)", line(&format!("# the leak {n}")));
            let test = format!(" test_{i:03} {file}:{} (python)", line(&format!("def test_{i:03}")) + 1);
            let head = format!(
                "gpuleak: {} bytes ({}.0 KiB) allocated in the test outlived it (limit 0 bytes) at 1 site",
                (64 * (n + 1)) << 10,
                64 * (n + 1)
            );
            assert!(stdout.contains(&head), "{head:?}:\n{stdout}");
            let lines: Vec<&str> = stdout.lines().collect();
            let at = lines
                .iter()
                .position(|l| l.ends_with(&keep))
                .unwrap_or_else(|| panic!("no frame {keep:?}:\n{stdout}"));
            assert!(lines[at + 1].ends_with(&test), "{test:?} after {keep:?}:\n{stdout}");
        }
        // The clean tests were judged in the process: the analyzer read the trace 3 times.
        let runs = std::fs::read_to_string(&count).unwrap_or_default();
        assert_eq!(runs.lines().count(), 3, "analyzer runs:\n{runs}");
        assert_eq!(traces_in(dir.path()).len(), workers, "{stderr}");
    }
}

#[test]
fn the_pytest_summary_names_the_largest_allocators_of_the_tests_with_the_most_memory() {
    let python = pkgenv_python();
    let dir = TempDir::new();
    let file = script("pkg_pytest_leaks.py");
    for workers in [1, 2] {
        let mut pytest = python_clean(sim_command(&python));
        pytest
            .current_dir(dir.path())
            .args([
                "-m",
                "pytest",
                "-p",
                "no:cacheprovider",
                "--gpuleak",
                "--gpuleak-summary",
            ])
            .args(["--gpuleak-summary-tests", "2"])
            .arg(format!("--rootdir={}", file.parent().unwrap().display()))
            .arg(&file);
        if workers > 1 {
            pytest.args(["-n", "2"]);
        }
        let out = output_of(&mut pytest);
        let (stdout, stderr) = text(&out);
        assert_eq!(out.status.code(), Some(1), "{stdout}\n{stderr}");
        let summary = stdout
            .split("gpuleak summary: the tests with the most GPU memory at once")
            .nth(1)
            .unwrap_or_else(|| panic!("no summary:\n{stdout}"));
        let f = file.display().to_string();
        let alloc_line = line_of("pkg_cuda.py", "    return ok(cu.cuMemAlloc(size))");
        let cuda = script("pkg_cuda.py").display().to_string();
        let expected = format!(
            "pkg_pytest_leaks.py::test_peak_8_mib:\n  highest: 8.0 MiB; 1 allocation of 8.0 MiB in all; left allocated: 0 B\n  \
             largest allocators:\n       8.0 MiB at its highest: alloc {cuda}:{alloc_line} (python) <- test_peak_8_mib {f}:{} (python)\n\
             pkg_pytest_leaks.py::test_peak_8_mib_fixed:\n  highest: 2.0 MiB; 4 allocations of 8.0 MiB in all; left allocated: 0 B\n  \
             largest allocators:\n       2.0 MiB at its highest: alloc {cuda}:{alloc_line} (python) <- test_peak_8_mib_fixed {f}:{} (python)\n",
            line_of("pkg_pytest_leaks.py", "    a = alloc(8 * MIB)"),
            line_of("pkg_pytest_leaks.py", "        a = alloc(2 * MIB)"),
        );
        // Ties at the highest bytes go to the test that allocated more in all.
        assert!(!summary.contains("::test_leaks_2_mib:"), "two tests only:\n{summary}");
        assert!(
            summary.contains(&expected),
            "{workers} workers: {expected}\nin:\n{stdout}"
        );
    }
}
