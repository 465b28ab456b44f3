//! Support for gpuleak's end-to-end tests: real C programs run against the simulated CUDA
//! driver (`simcuda/`), with or without `libgpuleak.so` preloaded.
//!
//! `build.rs` compiles the simulator into [`sim_dir`] and every `tests/clients/*.c` into an
//! executable that [`client`] finds by name. [`sim_command`] runs a program on the simulator
//! with a clean environment; [`shim_command`] adds the shim and a trace path.
//!
//! The clients, the simulator and the shim can be of another architecture than the tests and
//! `gpuleak` (`scripts/test-aarch64`): `GPULEAK_E2E_TARGET` at build time cross-compiles the C
//! side (see `build.rs`), `GPULEAK_E2E_SHIM` names the shim built for it, and
//! `GPULEAK_E2E_RUNNER` (a command line, e.g. `qemu-aarch64-static`) runs every program that
//! [`sim_command`] starts.
//!
//! ```no_run
//! use gpuleak_e2e::{client, shim_command, sim_command, stdout_of, TempDir};
//!
//! // A client on the simulator alone...
//! let text = stdout_of(sim_command(client("sim_heap")).arg("first-fit"));
//! assert!(text.starts_with("A 0x700000000000"));
//!
//! // ...and the same kind of program under the shim, writing a trace.
//! let dir = TempDir::new();
//! let trace = dir.path().join("run.gltrace");
//! let status = shim_command(client("shim_families"), &trace).status().unwrap();
//! assert!(status.success());
//! ```

use std::ffi::{OsStr, OsString};
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};

/// The directory holding the simulated `libcuda.so.1`, `libcudart.so.12` and
/// `libcudart_static.a`.
pub fn sim_dir() -> PathBuf {
    PathBuf::from(env!("GPULEAK_E2E_SIM_DIR"))
}

/// A stand-in library built from `tests/libraries/` (`libtorch_blas.so`, `libcublas.so.13`).
pub fn stand_in_library(name: &str) -> PathBuf {
    let path = Path::new(env!("GPULEAK_E2E_LIB_DIR")).join(name);
    assert!(path.is_file(), "no stand-in library {name} at {}", path.display());
    path
}

/// The executable built from `tests/clients/<name>.c`.
pub fn client(name: &str) -> PathBuf {
    let path = Path::new(env!("GPULEAK_E2E_BIN_DIR")).join(name);
    assert!(
        path.is_file(),
        "no test client {name} at {}: is there a tests/clients/{name}.c?",
        path.display()
    );
    path
}

/// `target/<profile>` of the running test binary (which lives in `target/<profile>/deps/`).
pub fn target_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("path of the test executable");
    let dir = exe.parent().expect("the test executable lives in a directory");
    if dir.file_name() == Some(OsStr::new("deps")) {
        dir.parent().expect("deps/ has a parent").to_path_buf()
    } else {
        dir.to_path_buf()
    }
}

/// A workspace artifact next to the tests, which `cargo test -p gpuleak-e2e` does not build.
fn built(name: &str) -> PathBuf {
    let dir = target_dir();
    let path = dir.join(name);
    if !path.is_file() {
        let command = if dir.file_name() == Some(OsStr::new("release")) {
            "cargo build --release --workspace"
        } else {
            "cargo build --workspace"
        };
        panic!("{} is missing: build it first: {command}", path.display());
    }
    path
}

/// `libgpuleak.so`, built in the same profile as the tests, or `GPULEAK_E2E_SHIM`.
pub fn shim_lib() -> PathBuf {
    match std::env::var_os("GPULEAK_E2E_SHIM").filter(|v| !v.is_empty()) {
        Some(path) => PathBuf::from(path),
        None => built("libgpuleak.so"),
    }
}

/// The command line that runs the clients (`GPULEAK_E2E_RUNNER`, split at whitespace), if the
/// clients are of another architecture than the tests.
pub fn runner() -> Option<Vec<String>> {
    let line = std::env::var("GPULEAK_E2E_RUNNER").ok()?;
    let words: Vec<String> = line.split_whitespace().map(str::to_string).collect();
    (!words.is_empty()).then_some(words)
}

/// The executable of the Rust example `name` (`examples/`, e.g. `gpuleak-example-cudarc`):
/// in `GPULEAK_E2E_EXAMPLES` if set (`scripts/test-aarch64` builds them for its target), else
/// beside the tests.
pub fn example(name: &str) -> PathBuf {
    match std::env::var_os("GPULEAK_E2E_EXAMPLES").filter(|v| !v.is_empty()) {
        Some(dir) => {
            let path = Path::new(&dir).join(name);
            assert!(path.is_file(), "{} is missing (GPULEAK_E2E_EXAMPLES)", path.display());
            path
        }
        None => {
            assert!(
                runner().is_none(),
                "GPULEAK_E2E_RUNNER is set without GPULEAK_E2E_EXAMPLES: {name} must be built for \
                 the clients' architecture (scripts/test-aarch64 sets both)"
            );
            built(name)
        }
    }
}

/// The CPython that runs the Python clients (`tests/python/`), with NVIDIA's CUDA Python
/// packages that `scripts/python-env` pins: `GPULEAK_E2E_PYTHON` if set (`scripts/test-aarch64`
/// names an aarch64 CPython in its sysroot, which the [`runner`] runs), else
/// `target/pyenv/bin/python`. Start it through [`sim_command`] or [`shim_command`], which add the
/// runner.
pub fn python() -> PathBuf {
    match std::env::var_os("GPULEAK_E2E_PYTHON").filter(|v| !v.is_empty()) {
        Some(path) => {
            let path = PathBuf::from(path);
            assert!(path.is_file(), "GPULEAK_E2E_PYTHON={} is not a file", path.display());
            path
        }
        None => {
            assert!(
                runner().is_none(),
                "GPULEAK_E2E_RUNNER is set without GPULEAK_E2E_PYTHON: the Python clients need a \
                 CPython of the clients' architecture (scripts/test-aarch64 sets both)"
            );
            let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/pyenv/bin/python");
            assert!(
                path.is_file(),
                "{} is missing: run scripts/python-env (the third_party tests check its packages)",
                path.display()
            );
            path
        }
    }
}

/// The `gpuleak` command line, built in the same profile as the tests.
pub fn gpuleak_bin() -> PathBuf {
    built("gpuleak")
}

/// `tests/data`: resolver request logs and the list of driver calls real clients make.
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("data")
}

/// A command for `program` that finds the simulated driver first on `LD_LIBRARY_PATH`, with
/// `LD_PRELOAD`, `NO_COLOR`, `FORCE_COLOR` and every `GPULEAK_*` and `SIMCUDA_*` variable removed from its environment,
/// so that nothing from the developer's shell changes what a test sees. With a
/// [`runner`], the runner runs `program`.
pub fn sim_command(program: impl AsRef<OsStr>) -> Command {
    sim_command_via(&[], program)
}

/// [`sim_command`] started through a host command line `via` (e.g. `sh -c 'ulimit ...; exec
/// "$@"' sh`), which the [`runner`] never runs: `via`, then the runner, then `program`.
/// The variables the shim reads a process's rank from (shim/src/rank.rs).
pub const LAUNCHER_VARIABLES: [&str; 17] = [
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "TORCHELASTIC_RUN_ID",
    "OMPI_COMM_WORLD_RANK",
    "OMPI_COMM_WORLD_LOCAL_RANK",
    "OMPI_COMM_WORLD_SIZE",
    "MV2_COMM_WORLD_RANK",
    "MV2_COMM_WORLD_LOCAL_RANK",
    "MV2_COMM_WORLD_SIZE",
    "PMI_RANK",
    "PMI_SIZE",
    "MPI_LOCALRANKID",
    "PMIX_RANK",
    "SLURM_PROCID",
    "SLURM_LOCALID",
    "SLURM_NTASKS",
];

pub fn sim_command_via(via: &[&str], program: impl AsRef<OsStr>) -> Command {
    let mut words: Vec<OsString> = via.iter().map(OsString::from).collect();
    words.extend(runner().unwrap_or_default().into_iter().map(OsString::from));
    words.push(program.as_ref().to_owned());
    let mut cmd = Command::new(&words[0]);
    cmd.args(&words[1..]);
    for (key, _) in std::env::vars_os() {
        let name = key.to_string_lossy();
        if name.starts_with("GPULEAK_") || name.starts_with("SIMCUDA_") {
            cmd.env_remove(&key);
        }
    }
    cmd.env_remove("LD_PRELOAD");
    cmd.env_remove("NO_COLOR").env_remove("FORCE_COLOR");
    // A test run inside a distributed launcher (a CI job under Slurm or MPI) must not give
    // every traced client its rank: tests that want one set it.
    for name in LAUNCHER_VARIABLES {
        cmd.env_remove(name);
    }
    let mut paths = vec![sim_dir()];
    if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
        paths.extend(std::env::split_paths(&old));
    }
    cmd.env("LD_LIBRARY_PATH", std::env::join_paths(paths).expect("LD_LIBRARY_PATH"));
    cmd
}

/// [`sim_command`] with `libgpuleak.so` preloaded, writing its trace to `trace`.
pub fn shim_command(program: impl AsRef<OsStr>, trace: &Path) -> Command {
    shim_command_via(&[], program, trace)
}

/// [`sim_command_via`] with `libgpuleak.so` preloaded into `program`, writing its trace to
/// `trace`. With a [`runner`] (qemu's user-mode emulator) the preload goes to the emulated
/// program alone, through `QEMU_SET_ENV`: the host's loader would refuse a shim of another
/// architecture in the host programs on the way (`via`) with a line on stderr.
pub fn shim_command_via(via: &[&str], program: impl AsRef<OsStr>, trace: &Path) -> Command {
    let mut cmd = sim_command_via(via, program);
    if runner().is_some() {
        let mut preload = OsString::from("LD_PRELOAD=");
        preload.push(shim_lib());
        cmd.env("QEMU_SET_ENV", preload);
    } else {
        cmd.env("LD_PRELOAD", shim_lib());
    }
    cmd.env("GPULEAK_OUTPUT", trace);
    cmd
}

/// Runs `gpuleak report ARGS TRACES` to completion and returns its output.
/// Without `NO_COLOR` and `FORCE_COLOR`, so that the text is the same plain text whatever the
/// developer's shell sets.
pub fn gpuleak_report(args: &[&str], traces: &[&Path]) -> Output {
    output_of(
        Command::new(gpuleak_bin())
            .arg("report")
            .args(args)
            .args(traces)
            .env_remove("NO_COLOR")
            .env_remove("FORCE_COLOR"),
    )
}

/// Runs `cmd` to completion, panicking if it cannot be started.
pub fn output_of(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {:?}: {e}", cmd.get_program()))
}

/// Runs `cmd`, requires exit status 0 and returns its stdout; on failure the panic shows the
/// status, stdout and stderr.
pub fn stdout_of(cmd: &mut Command) -> String {
    let out = output_of(cmd);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{:?} failed with {}\n--- stdout\n{stdout}\n--- stderr\n{}",
        cmd,
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A fresh directory under the system temporary directory, removed with its contents on drop.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates a new, empty, uniquely named directory.
    pub fn new() -> TempDir {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        loop {
            let n = COUNTER.fetch_add(1, Ordering::Relaxed);
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            let name = format!("gpuleak-e2e-{}-{n}-{nanos}", std::process::id());
            let path = std::env::temp_dir().join(name);
            match fs::create_dir(&path) {
                Ok(()) => return TempDir { path },
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
                Err(e) => panic!("creating {}: {e}", path.display()),
            }
        }
    }

    /// The directory's path.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Default for TempDir {
    fn default() -> Self {
        TempDir::new()
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.path);
    }
}

/// The names of the entries of `dir`, sorted.
pub fn file_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}
