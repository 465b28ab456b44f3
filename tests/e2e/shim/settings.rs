//! Settings whose values once misbehaved: each gives its one line on stderr (exactly once) and
//! a sane outcome, and a normal value still works as before.

use std::path::{Path, PathBuf};
use std::process::Output;

use gpuleak_e2e::{client, runner, shim_command, shim_command_via, sim_command, TempDir};

use crate::trace::{assert_ok, dump, of_type};

/// `shim_crash exit 3` (three allocations) under the shim with `GPULEAK_OUTPUT=output`, from
/// `cwd`, with extra settings.
fn traced(output: &Path, cwd: &Path, env: &[(&str, &str)]) -> Output {
    let mut cmd = shim_command(client("shim_crash"), output);
    cmd.current_dir(cwd).args(["exit", "3"]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert_ok(&out);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ready\n");
    out
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn files(dir: &Path) -> Vec<String> {
    gpuleak_e2e::file_names(dir)
}

/// `shim_crash.`, how the default trace name starts after `gpuleak.`; nothing under an emulator,
/// whose name the program's `/proc/self/comm` holds.
fn program_prefix() -> &'static str {
    if gpuleak_e2e::runner().is_some() {
        ""
    } else {
        "shim_crash."
    }
}

/// The one trace in `dir`, which must be `gpuleak.shim_crash.<pid>.trace` (the program's name
/// is its `/proc/self/comm`: under an emulator, the emulator's).
fn default_named_trace(dir: &Path) -> PathBuf {
    let names = files(dir);
    assert_eq!(names.len(), 1, "{names:?}");
    let program = program_prefix();
    assert!(
        names[0].starts_with(&format!("gpuleak.{program}")) && names[0].ends_with(".trace"),
        "{names:?}"
    );
    let path = dir.join(&names[0]);
    assert_eq!(of_type(&dump(&path), "Alloc").len(), 3);
    path
}

#[test]
fn a_bad_gpuleak_disable_warns_once() {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = traced(&trace, dir.path(), &[("GPULEAK_DISABLE", "maybe")]);
    assert_eq!(
        stderr(&out),
        "gpuleak: GPULEAK_DISABLE=\"maybe\" is not 0 or 1; using 0\n"
    );
    assert_eq!(of_type(&dump(&trace), "Alloc").len(), 3, "the default: traced");
    // The twin: GPULEAK_DISABLE=1 says nothing and writes nothing.
    let off = dir.path().join("off.trace");
    let out = traced(&off, dir.path(), &[("GPULEAK_DISABLE", "1")]);
    assert_eq!(stderr(&out), "");
    assert!(!off.exists());
}

#[test]
fn an_output_that_is_a_device_or_a_pipe_means_no_trace() {
    let dir = TempDir::new();
    let pipe = dir.path().join("pipe");
    let made = std::process::Command::new("mkfifo").arg(&pipe).status().unwrap();
    assert!(made.success());
    let link = dir.path().join("null");
    std::os::unix::fs::symlink("/dev/null", &link).unwrap();
    let stray = Path::new("/dev/null.1");
    let stray_before = stray.exists();
    for (output, kind) in [
        (Path::new("/dev/null"), "a character device"),
        (&link, "a character device"),
        (&pipe, "a pipe"),
    ] {
        let out = traced(output, dir.path(), &[]);
        if !stray_before && stray.exists() {
            // A regression must not leave its mess in /dev.
            let _ = std::fs::remove_file(stray);
            panic!("the shim created /dev/null.1");
        }
        assert_eq!(
            stderr(&out),
            format!(
                "gpuleak: GPULEAK_OUTPUT={:?} is {kind}, not a file or a directory; tracing is off, \
                 the program continues\n",
                output.to_string_lossy()
            )
        );
    }
    assert_eq!(
        files(dir.path()),
        ["null", "pipe"],
        "nothing beside the pipe or the link"
    );
}

#[test]
fn an_output_that_is_a_directory_gets_the_default_name_inside_it() {
    let dir = TempDir::new();
    for (sub, with_slash) in [("slash", true), ("plain", false)] {
        let d = dir.path().join(sub);
        std::fs::create_dir(&d).unwrap();
        let mut output = d.clone().into_os_string();
        if with_slash {
            output.push("/");
        }
        let out = traced(Path::new(&output), dir.path(), &[]);
        assert_eq!(stderr(&out), "", "{sub}");
        default_named_trace(&d);
    }
    // A path ending in `/` that does not exist: the default name inside it, which cannot be
    // created, in the one line.
    let missing = dir.path().join("missing");
    let mut output = missing.clone().into_os_string();
    output.push("/");
    let out = traced(Path::new(&output), dir.path(), &[]);
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    let program = program_prefix();
    let prefix = format!("gpuleak: cannot create trace {}/gpuleak.{program}", missing.display());
    assert!(err.starts_with(&prefix), "{err}");
    assert!(!missing.exists());
    // The twin: a file name is used as it is.
    let file = dir.path().join("file.trace");
    let out = traced(&file, dir.path(), &[]);
    assert_eq!(stderr(&out), "");
    assert_eq!(of_type(&dump(&file), "Alloc").len(), 3);
}

/// `shim_crash exit 3` with at most `files` descriptors (inherited ones above 2 closed first).
fn with_descriptor_limit(trace: &Path, files: u32) -> Output {
    let limit = format!("exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-; ulimit -n {files} && exec \"$@\"");
    let mut cmd = shim_command_via(&["sh", "-c", &limit, "sh"], client("shim_crash"), trace);
    let out = cmd.args(["exit", "3"]).output().unwrap();
    assert_ok(&out);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "ready\n");
    out
}

#[test]
fn four_file_descriptors_record_without_stacks_and_say_why_in_one_line() {
    if runner().is_some() {
        eprintln!("skipped: an emulator needs descriptors of its own");
        return;
    }
    // The program alone runs with four descriptors (stdin, stdout, stderr and one for
    // loading), the shim's trace takes the fourth.
    let plain = sim_command("sh")
        .args([
            "-c",
            "exec 3>&- 4>&- 5>&- 6>&- 7>&- 8>&- 9>&-; ulimit -n 4 && exec \"$@\"",
            "sh",
        ])
        .arg(client("shim_crash"))
        .args(["exit", "3"])
        .output()
        .unwrap();
    assert_ok(&plain);
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = with_descriptor_limit(&trace, 4);
    assert_eq!(
        stderr(&out),
        "gpuleak: cannot capture stacks: no file descriptor is free (RLIMIT_NOFILE is 4) to read \
         the stack's bounds from /proc/self/maps; allocations are recorded without stacks\n"
    );
    let records = dump(&trace);
    let info = &of_type(&records, "ProcessInfo")[0];
    assert_eq!(info["stack_depth"], 0, "{info}");
    assert_eq!(info["unwinder"], "none", "{info}");
    assert_eq!(of_type(&records, "Alloc").len(), 3);
    assert!(of_type(&records, "Stack").is_empty());
    // The twin: with a few descriptors more, stacks as usual and nothing said.
    let trace = dir.path().join("t64.trace");
    let out = with_descriptor_limit(&trace, 64);
    assert_eq!(stderr(&out), "");
    let records = dump(&trace);
    assert_eq!(of_type(&records, "ProcessInfo")[0]["stack_depth"], 64);
    assert!(of_type(&records, "Alloc").iter().all(|a| a["stack"] != 0));
}
