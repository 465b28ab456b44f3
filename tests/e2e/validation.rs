//! `scripts/validate-gpu`, the real-GPU validation of issue 8, run end to end on the simulated
//! driver (`SIM=1`), so that the script a GPU machine relies on keeps working as the report
//! evolves: its C workloads must come out "agrees" (gpuleak's leaked bytes and findings are the
//! expected ones), and "DIFFERS" when a workload leaks something else.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use gpuleak_e2e::{client, gpuleak_bin, output_of, sim_dir, TempDir};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// `SIM=1 bash scripts/SCRIPT OUT` with the workloads in `bin`, this build's gpuleak, the
/// simulated driver, none of the caller's `GPULEAK_*` settings, and `settings`.
fn sim_script(script: &str, bin: &Path, out: &Path, settings: &[(&str, &str)]) -> Command {
    let gpuleak = gpuleak_bin();
    let mut cmd = Command::new("bash");
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("GPULEAK_") {
            cmd.env_remove(&key);
        }
    }
    cmd.arg(root().join("scripts").join(script))
        .arg(out)
        .env("SIM", "1")
        .env("VALIDATION_BIN", bin)
        .env("SIM_LIB", sim_dir())
        .env(
            "GPULEAK_BIN_DIR",
            gpuleak.parent().expect("gpuleak lives in a directory"),
        )
        .env_remove("LD_PRELOAD")
        .envs(settings.iter().copied());
    cmd
}

/// Runs `SIM=1 scripts/validate-gpu OUT` with the workloads in `bin` and returns the row of
/// results.md whose workload is `name`, split into trimmed cells.
fn script_row(bin: &Path, out: &Path, name: &str) -> Vec<String> {
    script_row_with(bin, out, name, &[])
}

/// [`script_row`] with more settings for the script.
fn script_row_with(bin: &Path, out: &Path, name: &str, settings: &[(&str, &str)]) -> Vec<String> {
    let run = output_of(&mut sim_script("validate-gpu", bin, out, settings));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "scripts/validate-gpu failed with {}:\n{stderr}",
        run.status
    );
    let table = fs::read_to_string(out.join("results.md")).expect("results.md");
    assert!(table.contains("device: simulated driver (SIM=1)"), "{table}");
    let line = table
        .lines()
        .find(|l| l.starts_with(&format!("| {name} |")))
        .unwrap_or_else(|| panic!("no row {name} in\n{table}\n--- stderr\n{stderr}"));
    line.trim_matches('|')
        .split('|')
        .map(|c| c.trim().to_string())
        .collect()
}

#[test]
fn validate_gpu_script_agrees_on_the_c_workload() {
    let dir = TempDir::new();
    // validation/leak_driver.c, built against the simulator by tests/build.rs.
    let driver = client("leak_driver");
    let bin = driver.parent().expect("clients live in a directory");
    let row = script_row(bin, &dir.path().join("out"), "c");
    // workload, expected, leaked, findings, verdict, ...
    assert_eq!(row[1], "10489856; stream-leak,unsynchronized-at-exit", "{row:?}");
    assert_eq!(row[2], "10489856", "{row:?}");
    assert_eq!(row[3], "stream-leak,unsynchronized-at-exit", "{row:?}");
    assert_eq!(row[4], "agrees", "{row:?}");
    assert_ne!(row[8], "fail", "the traced run failed: {row:?}");
    // validation/ordered_driver.c: streams ordered by memory values, a graph's external event
    // and a copy into pageable memory; nothing leaked, nothing found.
    let table = fs::read_to_string(dir.path().join("out/results.md")).expect("results.md");
    let row: Vec<&str> = table
        .lines()
        .find(|l| l.starts_with("| c-ordered |"))
        .unwrap_or_else(|| panic!("no c-ordered row in\n{table}"))
        .trim_matches('|')
        .split('|')
        .map(str::trim)
        .collect();
    assert_eq!(&row[1..5], ["0; -", "0", "-", "agrees"], "{row:?}");
    assert_ne!(row[8], "fail", "the traced run failed: {row:?}");
}

/// A directory of workloads for the script: `leak_driver` as `script` says, and the real
/// `ordered_driver` beside it.
fn workloads(dir: &Path, script: &str) -> PathBuf {
    let bin = dir.join("bin");
    fs::create_dir_all(&bin).expect("workload directory");
    let wrapper = bin.join("leak_driver");
    fs::write(&wrapper, script).expect("wrapper");
    fs::set_permissions(&wrapper, fs::Permissions::from_mode(0o755)).expect("chmod");
    std::os::unix::fs::symlink(client("ordered_driver"), bin.join("ordered_driver")).expect("symlink");
    bin
}

#[test]
fn validate_gpu_script_says_differs_when_the_workload_leaks_otherwise() {
    let dir = TempDir::new();
    let real = client("leak_driver");
    // A workload that leaks 9 MiB + 4 KiB where the script expects 10 MiB + 4 KiB.
    let bin = workloads(dir.path(), &format!("#!/bin/sh\nexec '{}' 9\n", real.display()));
    let row = script_row(&bin, &dir.path().join("out"), "c");
    assert_eq!(row[2], (9 * 1048576 + 4096).to_string(), "{row:?}");
    assert_eq!(row[4], "DIFFERS", "{row:?}");
}

#[test]
fn validate_gpu_script_stops_a_hanging_workload_and_keeps_its_row() {
    let dir = TempDir::new();
    // A workload that hangs (as a tool on a GPU machine might): stopped after CASE_TIMEOUT, its
    // row written with "timeout" in the cells of the runs that were stopped.
    let bin = workloads(dir.path(), "#!/bin/sh\nexec sleep 60\n");
    let started = std::time::Instant::now();
    let row = script_row_with(
        &bin,
        &dir.path().join("out"),
        "c",
        &[("CASE_TIMEOUT", "2"), ("ONLY", "c")],
    );
    assert!(started.elapsed().as_secs() < 40, "not stopped: {row:?}");
    // workload, expected, leaked, findings, verdict, sanitizer, torch, plain s, gpuleak s
    assert_eq!(row[3], "timeout", "{row:?}");
    assert_eq!(row[4], "DIFFERS", "{row:?}");
    assert_eq!(row[7], "timeout", "{row:?}");
    assert_eq!(row[8], "timeout", "{row:?}");
    let table = fs::read_to_string(dir.path().join("out/results.md")).expect("results.md");
    assert!(!table.contains("| torch |"), "ONLY=c ran torch too:\n{table}");
}

/// Runs `SIM=1 scripts/validate-gpu-lease OUT` with the workloads in `bin` and `settings`;
/// returns its stderr.
fn lease(bin: &Path, out: &Path, settings: &[(&str, &str)]) -> String {
    let run = output_of(&mut sim_script("validate-gpu-lease", bin, out, settings));
    let stderr = String::from_utf8_lossy(&run.stderr).into_owned();
    assert!(
        run.status.success(),
        "scripts/validate-gpu-lease failed with {}:\n{stderr}",
        run.status
    );
    stderr
}

#[test]
fn the_lease_script_leaves_each_part_s_table_and_logs() {
    let dir = TempDir::new();
    let driver = client("leak_driver");
    let bin = driver.parent().expect("clients live in a directory");
    let out = dir.path().join("out");
    lease(bin, &out, &[("PARTS", "native")]);
    let table = fs::read_to_string(out.join("results-native.md")).expect("results-native.md");
    let row = table
        .lines()
        .find(|l| l.starts_with("| c |"))
        .unwrap_or_else(|| panic!("no c row in\n{table}"));
    assert!(row.contains("| agrees |"), "{row}");
    assert!(out.join("logs-native.tgz").is_file(), "no logs-native.tgz");
    // The parts not asked for left nothing; the work directory is gone.
    for part in ["fw", "cost", "driver"] {
        assert!(!out.join(format!("results-{part}.md")).exists(), "part {part} ran");
    }
    assert!(!out.join("work").exists());
}

#[test]
fn the_lease_script_stops_a_part_at_the_end_of_the_budget_and_skips_the_rest() {
    let dir = TempDir::new();
    let bin = workloads(dir.path(), "#!/bin/sh\nexec sleep 60\n");
    let out = dir.path().join("out");
    let started = std::time::Instant::now();
    let stderr = lease(&bin, &out, &[("PARTS", "native driver"), ("LEASE_SECONDS", "14")]);
    assert!(started.elapsed().as_secs() < 45, "not stopped:\n{stderr}");
    // The hanging part's table was kept as far as it got; the part after it had no time.
    assert!(out.join("results-native.md").is_file(), "{stderr}");
    assert!(stderr.contains("no time left for part driver"), "{stderr}");
}
