//! The simulated driver and runtime on their own, with no interposer: every behaviour the
//! shim's tests rely on is pinned here first. Each test runs a `tests/clients/sim_*.c`
//! program, which prints one `key value` fact per line, and judges the facts.

mod arrays;
mod context;
mod copy;
mod graph_edges;
mod graph_params;
mod heap;
mod pool;
mod prefetch;
mod resolver;
mod runtime;
mod semaphores;
mod streams;
mod vmm;

use std::collections::HashMap;
use std::process::Command;

use gpuleak_e2e::{client, sim_command, stdout_of};

/// The `key value` lines a client printed.
pub struct Facts {
    text: String,
    values: HashMap<String, String>,
}

impl Facts {
    pub fn parse(text: String) -> Facts {
        let values = text
            .lines()
            .filter_map(|line| line.split_once(' '))
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Facts { text, values }
    }

    /// The rest of the line after `key`.
    pub fn get(&self, key: &str) -> &str {
        self.values
            .get(key)
            .unwrap_or_else(|| panic!("no `{key}` line in the output:\n{}", self.text))
    }

    /// A number printed in decimal or as 0x-prefixed hex.
    pub fn num(&self, key: &str) -> u64 {
        parse_number(self.get(key))
            .unwrap_or_else(|| panic!("`{key}` is not a number: {:?}\n{}", self.get(key), self.text))
    }

    /// Asserts that `key` printed exactly `expected` (a CUresult, a 0/1 check, a list).
    #[track_caller]
    pub fn expect(&self, key: &str, expected: &str) {
        assert_eq!(self.get(key), expected, "`{key}` in:\n{}", self.text);
    }

    /// Asserts each (key, expected) pair.
    #[track_caller]
    pub fn expect_all(&self, pairs: &[(&str, &str)]) {
        for (key, expected) in pairs {
            self.expect(key, expected);
        }
    }
}

pub fn parse_number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// `program subcommand` on the simulator with extra environment; must exit 0.
pub fn run_with(program: &str, subcommand: &str, env: &[(&str, &str)]) -> Facts {
    let mut cmd = sim_command(client(program));
    cmd.arg(subcommand).envs(env.iter().copied());
    Facts::parse(stdout_of(&mut cmd))
}

pub fn run(program: &str, subcommand: &str) -> Facts {
    run_with(program, subcommand, &[])
}

/// Runs `cmd` and returns (stdout, stderr), requiring exit status 0.
pub fn stdout_and_stderr(cmd: &mut Command) -> (String, String) {
    let out = gpuleak_e2e::output_of(cmd);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        out.status.success(),
        "{cmd:?} failed with {}\n{stdout}\n{stderr}",
        out.status
    );
    (stdout, stderr)
}

#[test]
fn temp_dirs_are_unique_and_removed_on_drop() {
    let a = gpuleak_e2e::TempDir::new();
    let b = gpuleak_e2e::TempDir::new();
    assert_ne!(a.path(), b.path());
    std::fs::write(a.path().join("file"), "x").unwrap();
    let path = a.path().to_path_buf();
    drop(a);
    assert!(!path.exists(), "{} survived its TempDir", path.display());
    assert!(b.path().is_dir());
}

#[test]
fn sim_command_isolates_the_environment() {
    let cmd = sim_command("true");
    let envs: HashMap<_, _> = cmd.get_envs().collect();
    let path = envs
        .get(std::ffi::OsStr::new("LD_LIBRARY_PATH"))
        .and_then(|v| *v)
        .expect("LD_LIBRARY_PATH is set");
    let first = std::env::split_paths(path).next().expect("one entry");
    assert_eq!(first, gpuleak_e2e::sim_dir());
    assert_eq!(
        envs.get(std::ffi::OsStr::new("LD_PRELOAD")),
        Some(&None),
        "LD_PRELOAD removed"
    );
    assert!(gpuleak_e2e::sim_dir().join("libcuda.so.1").is_file());
    assert!(gpuleak_e2e::sim_dir().join("libcudart_static.a").is_file());
}
