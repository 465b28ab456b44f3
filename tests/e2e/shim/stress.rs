//! Stress and faults (issue 8): many threads, many killed runs, many forked children, and a
//! trace that cannot be written; the program must run on unaffected and every trace must read.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use gpuleak_e2e::{client, gpuleak_bin, shim_command, shim_command_via, sim_command, TempDir};
use serde_json::Value;

use crate::trace::{assert_ok, dump, of_type};

/// `gpuleak report --format json` of `trace`, which must succeed.
pub(super) fn report(trace: &Path) -> Value {
    let out = Command::new(gpuleak_bin())
        .args(["report", "--format", "json", "-q"])
        .arg(trace)
        .output()
        .unwrap();
    assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn sixteen_threads_of_a_million_events_each_lose_nothing() {
    // 16 threads x 500k alloc/free pairs: 16M events, counted by the analyzer (a dump of them
    // would be gigabytes of JSON).
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = shim_command(client("shim_threads"), &trace)
        .args(["16", "500000"])
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "threads 16 pairs 500000 failures 0"
    );
    let r = report(&trace);
    let summary = &r["summary"];
    assert_eq!(summary["allocations"], 8_000_000, "{summary}");
    assert_eq!(summary["frees"], 8_000_000, "{summary}");
    assert_eq!(summary["leaked_allocations"], 0, "{summary}");
    assert_eq!(r["findings"], serde_json::json!([]), "no bad free, nothing lost");
}

/// A deterministic sequence of delays (xorshift), so that a failing trial can be replayed.
fn delays(seed: u64, n: usize, max_ms: u64) -> Vec<u64> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % (max_ms + 1)
        })
        .collect()
}

#[test]
fn a_hundred_runs_killed_at_random_moments_each_leave_a_readable_trace() {
    let dir = TempDir::new();
    let seed = 0x9e37_79b9_7f4a_7c15;
    let mut with_trace = 0;
    let mut events = 0u64;
    for (trial, delay) in delays(seed, 100, 40).into_iter().enumerate() {
        let trace = dir.path().join(format!("t{trial}.trace"));
        // Two threads allocating and freeing for far longer than the trial lasts.
        let mut child = shim_command(client("shim_threads"), &trace)
            .args(["2", "100000000"])
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(delay));
        child.kill().unwrap(); // SIGKILL
        child.wait().unwrap();
        if !trace.exists() {
            // Killed before its first CUDA call: no file, as for a process without CUDA.
            continue;
        }
        with_trace += 1;
        // The dump reads every block to its end without an error (its JSON is not parsed
        // here: a killed run holds up to a few hundred thousand records).
        let dumped = Command::new(gpuleak_bin())
            .arg("dump")
            .arg(&trace)
            .stdout(Stdio::null())
            .output()
            .unwrap();
        assert!(
            dumped.status.success(),
            "trial {trial} (seed {seed:#x}, {delay} ms): {}",
            String::from_utf8_lossy(&dumped.stderr)
        );
        // The report sees whole records only: no free without its allocation, no pointer
        // handed out twice (each would be a finding), at most one allocation per thread
        // still live when the kill came.
        let r = report(&trace);
        assert_eq!(r["findings"], serde_json::json!([]), "trial {trial}: {r:#}");
        let summary = &r["summary"];
        let (allocs, frees) = (
            summary["allocations"].as_u64().unwrap(),
            summary["frees"].as_u64().unwrap(),
        );
        assert!(allocs >= frees && allocs - frees <= 2, "trial {trial}: {summary}");
        events += allocs + frees;
    }
    assert!(
        with_trace >= 80,
        "only {with_trace} of 100 killed runs had started tracing"
    );
    assert!(events > 0);
}

#[test]
fn fifty_forked_children_each_write_their_own_trace() {
    let dir = TempDir::new();
    let out = shim_command(client("stress_fork"), &dir.path().join("t.%p.trace"))
        .arg("50")
        .output()
        .unwrap();
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("done 0 failed"), "{text}");
    let children: Vec<(usize, u32)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("child "))
        .map(|l| {
            let (i, pid) = l.split_once(' ').unwrap();
            (i.parse().unwrap(), pid.parse().unwrap())
        })
        .collect();
    assert_eq!(children.len(), 50);
    let files = std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(files, 51, "the parent's trace and one per child");
    for (i, pid) in children {
        let records = dump(&dir.path().join(format!("t.{pid}.trace")));
        assert_eq!(of_type(&records, "ProcessInfo")[0]["pid"], pid);
        assert_eq!(of_type(&records, "Alloc").len(), i + 1, "child {i}");
        assert_eq!(of_type(&records, "Free").len(), 1, "child {i}");
    }
}

/// Runs `shim_threads 1 PAIRS` under `sh -c 'ulimit -f BLOCKS; exec ...'` (512-byte blocks).
fn with_file_size_limit(trace: &Path, blocks: u64, pairs: &str) -> std::process::Output {
    let program = client("shim_threads");
    let limit = format!("ulimit -f {blocks} && exec \"$@\"");
    let mut cmd = shim_command_via(&["sh", "-c", &limit, "sh"], &program, trace);
    // Unbounded: a bounded trace goes on in a new segment instead (shim::bounded).
    cmd.env("GPULEAK_MAX_TRACE", "off").args(["1", pairs]);
    cmd.output().unwrap()
}

#[test]
fn a_full_disk_stops_the_trace_with_one_line_and_the_program_runs_on() {
    let dir = TempDir::new();
    // 1 MiB of file at most: the 400k events of this run need about 5 MiB.
    let trace = dir.path().join("t.trace");
    let out = with_file_size_limit(&trace, 2048, "200000");
    assert_ok(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "threads 1 pairs 200000 failures 0"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(
            "reached the file size limit (RLIMIT_FSIZE = 1048576 bytes); recording stops here, the program continues"
        ),
        "{err}"
    );
    // What was written reads, and stops short.
    let records = dump(&trace);
    let allocs = of_type(&records, "Alloc").len();
    assert!(allocs > 1000 && allocs < 200_000, "{allocs}");
    assert!(std::fs::metadata(&trace).unwrap().len() <= 1 << 20);
    // The end of the run still reaches the file (in the block kept for it), and says how many
    // records were not written: every call is recorded or counted.
    assert_eq!(of_type(&records, "Exit").len(), 1, "the Exit record is kept");
    let lost: Vec<&Value> = of_type(&records, "Lost");
    assert_eq!(lost.len(), 1, "{lost:?}");
    assert_eq!(lost[0]["reason"], 1);
    let frees = of_type(&records, "Free").len() as u64;
    assert_eq!(allocs as u64 + frees + lost[0]["count"].as_u64().unwrap(), 400_000);
}

#[test]
fn an_output_directory_that_cannot_be_written_leaves_the_program_unaffected() {
    // The tests may run as root, for whom permission bits do not apply: /proc/self accepts no
    // new file from anyone.
    let plain = sim_command(client("shim_threads"))
        .args(["2", "1000"])
        .output()
        .unwrap();
    let out = shim_command(client("shim_threads"), Path::new("/proc/self/gpuleak.trace"))
        .args(["2", "1000"])
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(plain.stdout, out.stdout);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("gpuleak: cannot create trace /proc/self/gpuleak.trace: "),
        "{err}"
    );
}

#[test]
fn a_symlink_at_the_trace_path_is_never_followed_and_traces_are_private() {
    use std::os::unix::fs::{symlink, PermissionsExt};
    let dir = TempDir::new();
    let victim = dir.path().join("victim");
    std::fs::write(&victim, "keep me").unwrap();
    let trace = dir.path().join("t.trace");
    symlink(&victim, &trace).unwrap();
    let out = shim_command(client("shim_threads"), &trace)
        .args(["1", "10"])
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
    // The trace went next to it, under a new name, readable by its owner only.
    let written = dir.path().join("t.trace.1");
    assert_eq!(of_type(&dump(&written), "Alloc").len(), 10);
    let mode = std::fs::metadata(&written).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
}

/// A tmpfs of `size` mounted on a fresh directory, unmounted when dropped.
pub(super) struct SmallFileSystem {
    dir: TempDir,
}

impl SmallFileSystem {
    pub(super) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(super) fn mount(size: &str) -> SmallFileSystem {
        let dir = TempDir::new();
        let status = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .status()
            .expect("mount(8) runs");
        assert!(status.success(), "mounting a tmpfs needs root, as the tests run in CI");
        SmallFileSystem { dir }
    }
}

impl Drop for SmallFileSystem {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

#[test]
fn a_small_file_system_is_filled_before_recording_stops_and_the_end_is_kept() {
    let fs = SmallFileSystem::mount("2m");
    let trace = fs.dir.path().join("t.trace");
    // 400k events need about 5 MiB. Unbounded: a bounded trace deletes old segments instead
    // (shim::bounded).
    let out = shim_command(client("shim_threads"), &trace)
        .env("GPULEAK_MAX_TRACE", "off")
        .args(["1", "200000"])
        .output()
        .unwrap();
    assert_ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("No space left on device"), "{err}");
    // Growth ahead of use that does not fit falls back to what is needed now: the file fills
    // the file system rather than stopping at half of it.
    let size = std::fs::metadata(&trace).unwrap().len();
    assert!(size > 3 << 19, "the trace stopped at {size} bytes of 2 MiB");
    let records = dump(&trace);
    assert_eq!(of_type(&records, "Exit").len(), 1, "the Exit record is kept");
    assert_eq!(of_type(&records, "Lost").len(), 1);
}

#[test]
fn exit_while_other_threads_allocate_says_nothing_and_ends_the_trace() {
    let dir = TempDir::new();
    for (trial, delay) in delays(0x2545_f491_4f6c_dd1d, 20, 3000).into_iter().enumerate() {
        let trace = dir.path().join(format!("t{trial}.trace"));
        let out = shim_command(client("shim_threads"), &trace)
            .args(["4", "100000000", &delay.to_string()])
            .output()
            .unwrap();
        assert_ok(&out);
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "trial {trial} ({delay} us)");
        let records = dump(&trace);
        assert_eq!(of_type(&records, "Exit").len(), 1, "trial {trial}");
    }
}
