//! A setuid program with the shim preloaded: secure-execution mode (`AT_SECURE`) makes the shim
//! pass every call through and create nothing, not even a file its unprivileged user names.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::process::{Command, Output};

use gpuleak_e2e::{client, runner, shim_lib, sim_dir, TempDir};

use crate::trace::{assert_ok, dump, of_type};

/// The unprivileged user the setuid copy is started as.
const NOBODY: &str = "65534";

/// Why this host cannot run a setuid test, if it cannot: it takes root (to make a setuid-root
/// copy), `setpriv` (to start it as nobody), and clients of the host's own architecture.
fn cannot_run_setuid() -> Option<&'static str> {
    if runner().is_some() {
        return Some("the clients run under an emulator");
    }
    if std::fs::metadata("/proc/self").map(|m| m.uid()).ok() != Some(0) {
        return Some("not running as root");
    }
    let setpriv = Command::new("setpriv").arg("--version").output();
    if !setpriv.is_ok_and(|o| o.status.success()) {
        return Some("no setpriv");
    }
    None
}

fn chmod(path: &Path, mode: u32) {
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
}

/// `run/`: the client `shim_setuid` (setuid root), the simulated driver and the shim (a
/// library preloaded into a setuid program must be setuid itself and found on the program's
/// search path: its RUNPATH is its working directory); `rootonly/`: a directory only root
/// may write.
struct SetuidRoom {
    _dir: TempDir,
    run: std::path::PathBuf,
    root_only: std::path::PathBuf,
}

impl SetuidRoom {
    fn new() -> SetuidRoom {
        let dir = TempDir::new();
        chmod(dir.path(), 0o755);
        let run = dir.path().join("run");
        let root_only = dir.path().join("rootonly");
        for d in [&run, &root_only] {
            std::fs::create_dir(d).unwrap();
            chmod(d, 0o755);
        }
        std::fs::copy(client("shim_setuid"), run.join("shim_setuid")).unwrap();
        std::fs::copy(sim_dir().join("libcuda.so.1"), run.join("libcuda.so.1")).unwrap();
        std::fs::copy(shim_lib(), run.join("libgpuleak.so")).unwrap();
        chmod(&run.join("shim_setuid"), 0o4755);
        chmod(&run.join("libcuda.so.1"), 0o755);
        chmod(&run.join("libgpuleak.so"), 0o4755);
        SetuidRoom {
            _dir: dir,
            run,
            root_only,
        }
    }

    /// Runs the copy from `run/`, as `user` (`None`: as root), with `env` only (after
    /// `setpriv`, so that the preload reaches the client alone).
    fn run(&self, user: Option<&str>, env: &[(&str, &Path)]) -> Output {
        let mut cmd = match user {
            Some(uid) => {
                let mut c = Command::new("setpriv");
                c.args([
                    &format!("--reuid={uid}"),
                    &format!("--regid={uid}"),
                    "--clear-groups",
                    "env",
                    "-i",
                ]);
                c
            }
            None => {
                let mut c = Command::new("env");
                c.arg("-i");
                c
            }
        };
        for (key, value) in env {
            let mut pair = std::ffi::OsString::from(key);
            pair.push("=");
            pair.push(value);
            cmd.arg(pair);
        }
        cmd.arg(self.run.join("shim_setuid")).current_dir(&self.run);
        cmd.output().unwrap()
    }

    fn files(&self, dir: &Path) -> Vec<String> {
        gpuleak_e2e::file_names(dir)
    }
}

#[test]
fn a_setuid_program_run_by_nobody_is_passed_through_and_no_file_is_created() {
    if let Some(why) = cannot_run_setuid() {
        eprintln!("skipped: {why}");
        return;
    }
    let room = SetuidRoom::new();
    let plain = room.run(Some(NOBODY), &[]);
    assert_ok(&plain);
    let plain_out = String::from_utf8_lossy(&plain.stdout).into_owned();
    if !plain_out.starts_with("euid 0\n") {
        eprintln!("skipped: the setuid bit has no effect here (a nosuid mount?): {plain_out}");
        return;
    }
    assert_eq!(plain_out, "euid 0\nallocated 3 freed 3\nSIGUSR2 default\nthreads 1\n");
    let trace = room.root_only.join("t.trace");
    let env: &[(&str, &Path)] = &[
        ("LD_PRELOAD", Path::new("libgpuleak.so")),
        ("GPULEAK_OUTPUT", &trace),
        ("GPULEAK_SNAPSHOT_SIGNAL", Path::new("USR2")),
        ("GPULEAK_SNAPSHOT_PERIOD", Path::new("1h")),
        ("GPULEAK_STACK_DEPTH", Path::new("lots")),
    ];
    let secure = room.run(Some(NOBODY), env);
    assert_ok(&secure);
    assert_eq!(
        String::from_utf8_lossy(&secure.stdout),
        plain_out,
        "no signal handler, no thread: the program sees no shim"
    );
    assert_eq!(
        String::from_utf8_lossy(&secure.stderr),
        "gpuleak: secure-execution mode (setuid, setgid or file capabilities): nothing is traced, \
         calls pass through unchanged\n",
        "one line, and no setting read (GPULEAK_STACK_DEPTH=lots is not reported)"
    );
    assert_eq!(
        room.files(&room.root_only),
        Vec::<String>::new(),
        "nobody created a file as root"
    );
    assert_eq!(room.files(&room.run), ["libcuda.so.1", "libgpuleak.so", "shim_setuid"]);

    // The twin: the same copy, preload and settings, started by root (no change of user, so
    // no secure-execution mode), is traced: the shim was there all along.
    let root = room.run(None, &env[..2]);
    assert_ok(&root);
    assert_eq!(String::from_utf8_lossy(&root.stderr), "");
    let records = dump(&trace);
    assert_eq!(of_type(&records, "Alloc").len(), 3);
    assert_eq!(of_type(&records, "Free").len(), 3);
}
