//! `gpuleak run`: preloading, one trace per process, exit codes and the summary.

use gpuleak_e2e::{client, gpuleak_bin, sim_command, TempDir};

use crate::trace::{dump, of_type};

fn gpuleak_run(dir: &std::path::Path, args: &[&std::ffi::OsStr]) -> std::process::Output {
    sim_command(gpuleak_bin())
        .current_dir(dir)
        .arg("run")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn run_traces_the_command_and_prints_the_next_command() {
    let dir = TempDir::new();
    let out = gpuleak_run(dir.path(), &["--".as_ref(), client("report_leaks").as_os_str()]);
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1 process traced: 3 leaked allocations"), "{err}");
    let traces: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(traces.len(), 1);
    let name = traces[0].file_name().unwrap().to_string_lossy().into_owned();
    assert!(
        name.starts_with("gpuleak.report_leaks.") && name.ends_with(".trace"),
        "{name}"
    );
    assert!(err.contains(&format!("next: gpuleak report ./{name}")), "{err}");
    assert_eq!(of_type(&dump(&traces[0]), "Alloc").len(), 4, "three leaked, one freed");
}

#[test]
fn the_command_s_exit_code_passes_through_unless_error_exitcode_applies() {
    let dir = TempDir::new();
    // shim_crash exits 3 when CUDA cannot start (no device): its code must pass through.
    let mut cmd = sim_command(gpuleak_bin());
    cmd.current_dir(dir.path())
        .env("SIMCUDA_DEVICES", "0")
        .args(["run", "--error-exitcode", "9", "--"])
        .arg(client("shim_crash"));
    assert_eq!(cmd.output().unwrap().status.code(), Some(3));
    // Killed by a signal: 128 + SIGSEGV, as a shell reports it.
    let out = gpuleak_run(
        dir.path(),
        &[
            "--".as_ref(),
            client("shim_crash").as_os_str(),
            "segv".as_ref(),
            "2".as_ref(),
        ],
    );
    assert_eq!(out.status.code(), Some(128 + 11));
    // Leaks and a successful command: --error-exitcode turns 0 into N.
    let leaky = gpuleak_run(
        dir.path(),
        &[
            "--error-exitcode".as_ref(),
            "9".as_ref(),
            "--".as_ref(),
            client("report_leaks").as_os_str(),
        ],
    );
    assert_eq!(leaky.status.code(), Some(9));
    // Its clean twin keeps 0.
    let clean = gpuleak_run(
        dir.path(),
        &[
            "--error-exitcode".as_ref(),
            "9".as_ref(),
            "--".as_ref(),
            client("report_clean").as_os_str(),
        ],
    );
    assert_eq!(
        clean.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&clean.stderr)
    );
}

#[test]
fn every_process_of_the_run_gets_its_own_trace_in_the_output_directory() {
    let dir = TempDir::new();
    let out = gpuleak_run(
        dir.path(),
        &[
            "-o".as_ref(),
            "traces/".as_ref(),
            "--".as_ref(),
            client("shim_fork").as_os_str(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let traces: Vec<_> = std::fs::read_dir(dir.path().join("traces")).unwrap().collect();
    assert_eq!(traces.len(), 2, "parent and the CUDA child");
    assert!(String::from_utf8_lossy(&out.stderr).contains("2 processes traced"));
}

#[test]
fn run_keeps_the_user_s_preload_and_finds_the_shim_beside_itself() {
    let dir = TempDir::new();
    // A harmless library the user preloads must stay preloaded.
    let mut cmd = sim_command(gpuleak_bin());
    cmd.current_dir(dir.path())
        .env("LD_PRELOAD", "libm.so.6")
        .args(["run", "--", "sh", "-c", "echo $LD_PRELOAD"]);
    let out = cmd.output().unwrap();
    let seen = String::from_utf8_lossy(&out.stdout);
    assert!(seen.trim().ends_with("libgpuleak.so:libm.so.6"), "{seen}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("made no CUDA call; no trace written"));
    // A wrong GPULEAK_LIB is an error of gpuleak's own: exit 2 with a clear line.
    let mut bad = sim_command(gpuleak_bin());
    bad.current_dir(dir.path())
        .env("GPULEAK_LIB", "/nonexistent/libgpuleak.so")
        .args(["run", "--", "true"]);
    let out = bad.output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("GPULEAK_LIB=/nonexistent/libgpuleak.so is not a file"));
}

#[test]
fn a_command_that_changes_directory_before_cuda_still_has_its_trace_found() {
    let dir = TempDir::new();
    std::fs::create_dir(dir.path().join("elsewhere")).unwrap();
    // The relative default output must not follow the process into `elsewhere`.
    let script = format!("cd elsewhere && exec '{}'", client("report_leaks").display());
    let out = gpuleak_run(
        dir.path(),
        &["--".as_ref(), "sh".as_ref(), "-c".as_ref(), script.as_ref()],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    assert!(err.contains("1 process traced: 3 leaked allocations"), "{err}");
    let moved: Vec<_> = std::fs::read_dir(dir.path().join("elsewhere")).unwrap().collect();
    assert!(moved.is_empty(), "no trace written in the new directory: {moved:?}");
    // Same with a relative -o.
    let out = gpuleak_run(
        dir.path(),
        &[
            "-o".as_ref(),
            "traces/run.trace".as_ref(),
            "--".as_ref(),
            "sh".as_ref(),
            "-c".as_ref(),
            script.as_ref(),
        ],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1 process traced: 3 leaked allocations"), "{err}");
    assert_eq!(std::fs::read_dir(dir.path().join("traces")).unwrap().count(), 1);
}

/// Regression: a command that could not be started exited 2, gpuleak's own error code, where
/// shells and env(1) exit 127 (not found) or 126 (found, cannot run).
#[test]
fn a_command_not_found_exits_127_and_one_that_cannot_run_126_with_one_line_each() {
    use std::os::unix::fs::PermissionsExt;
    let dir = TempDir::new();
    let plain = dir.path().join("plain.txt");
    std::fs::write(&plain, "not a program\n").unwrap();
    std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o644)).unwrap();
    let subdir = dir.path().join("sub");
    std::fs::create_dir(&subdir).unwrap();
    let missing = dir.path().join("missing");
    let cases: [(&std::ffi::OsStr, i32, String); 4] = [
        (
            "gpuleak-no-such-command".as_ref(),
            127,
            "gpuleak: gpuleak-no-such-command: command not found (not in PATH)".into(),
        ),
        (
            missing.as_os_str(),
            127,
            format!("gpuleak: {}: no such file", missing.display()),
        ),
        (
            plain.as_os_str(),
            126,
            format!("gpuleak: {}: cannot run: permission denied", plain.display()),
        ),
        (
            subdir.as_os_str(),
            126,
            format!("gpuleak: {}: cannot run: is a directory", subdir.display()),
        ),
    ];
    for (command, code, message) in cases {
        let out = gpuleak_run(dir.path(), &["--".as_ref(), command]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{command:?}: {err}");
        assert!(err.starts_with(&message), "{command:?}: {err}");
        assert_eq!(err.lines().count(), 1, "one line: {err}");
    }
}

/// The signals ignored (the `SigIgn` mask of `/proc/self/status`) of `grep` started with
/// SIGINT and SIGQUIT as `sh -c` leaves them (`trap '' INT QUIT` ignores them, `trap - INT QUIT`
/// restores the default), directly and under `gpuleak run`.
fn ignored_signals(trap: &str, under_gpuleak: bool) -> String {
    let dir = TempDir::new();
    let grep = if under_gpuleak {
        format!("'{}' run -- grep SigIgn /proc/self/status", gpuleak_bin().display())
    } else {
        "grep SigIgn /proc/self/status".to_string()
    };
    let out = sim_command("sh")
        .current_dir(dir.path())
        .arg("-c")
        .arg(format!("trap {trap} INT QUIT; {grep}"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    text.lines().find(|l| l.starts_with("SigIgn:")).unwrap().to_string()
}

/// gpuleak ignores Ctrl-C and Ctrl-\ while the command runs (to summarize after it), but the
/// command does not inherit that: it gets the dispositions gpuleak was started with.
#[test]
fn the_command_gets_ctrl_c_as_it_would_without_gpuleak() {
    let alone = ignored_signals("-", false);
    let mask = u64::from_str_radix(alone.trim_start_matches("SigIgn:").trim(), 16).unwrap();
    assert_eq!(mask & 0b110, 0, "SIGINT and SIGQUIT not ignored to begin with: {alone}");
    assert_eq!(ignored_signals("-", true), alone);
    // The twin: a command started with them ignored (as under nohup) keeps them ignored.
    let ignoring = ignored_signals("''", false);
    let mask = u64::from_str_radix(ignoring.trim_start_matches("SigIgn:").trim(), 16).unwrap();
    assert_eq!(mask & 0b110, 0b110, "{ignoring}");
    assert_eq!(ignored_signals("''", true), ignoring);
}
