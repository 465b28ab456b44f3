//! A bounded trace written by the shim (`GPULEAK_MAX_TRACE`): a run many times the bound
//! rotates through segments, deletes the oldest, and still reports what the unbounded trace of
//! the same program reports (leaks made in its first moments and at its end with their stacks,
//! live streams and events, every total); under 16 threads, a fork, `kill -9` at random
//! moments, a file size limit and a full file system.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use gpuleak_e2e::{client, gpuleak_bin, shim_command, shim_command_via, TempDir};
use gpuleak_format::Trace;
use serde_json::Value;

use crate::trace::assert_ok;

/// Runs `trace_rotation ARGS` under the shim with `GPULEAK_MAX_TRACE=bound`, its trace in
/// `dir/t.trace`.
fn run(dir: &Path, bound: &str, args: &[&str]) -> Output {
    let out = shim_command(client("trace_rotation"), &dir.join("t.trace"))
        .env("GPULEAK_MAX_TRACE", bound)
        .args(args)
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("done 0"), "{out:?}");
    out
}

/// `gpuleak report --format json PATHS`, which must succeed.
fn report(paths: &[&Path]) -> Value {
    let out = Command::new(gpuleak_bin())
        .args(["report", "--format", "json"])
        .args(paths)
        .output()
        .unwrap();
    assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The files in `dir`, sorted by name.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    v.sort();
    v
}

fn total_bytes(dir: &Path) -> u64 {
    files(dir).iter().map(|p| std::fs::metadata(p).unwrap().len()).sum()
}

/// Whether a finding is about a stream or an event never destroyed (the program's own).
fn live_object(f: &Value) -> bool {
    matches!(f["check"].as_str(), Some("stream-leak") | Some("event-leak"))
}

/// The leaks, with their stacks and sizes, and the findings about live objects, without what
/// differs from run to run (process and thread ids, handles).
fn leaks_and_objects(report: &Value) -> (Vec<Value>, Vec<Value>) {
    let keep = |v: &Value, drop: &[&str]| {
        let mut v = v.clone();
        v.as_object_mut().unwrap().retain(|k, _| !drop.contains(&k.as_str()));
        v
    };
    let leaks = report["leaks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| keep(l, &["pid", "tid", "owner"]))
        .collect();
    let objects = report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| live_object(f))
        .map(|f| keep(f, &["pid", "ptr", "message"]))
        .collect();
    (leaks, objects)
}

/// The summary without the peak (it depends on how threads interleaved in each run).
fn totals(report: &Value) -> Value {
    let mut s = report["summary"].clone();
    s.as_object_mut().unwrap().remove("peak_bytes");
    s
}

#[test]
fn a_run_many_times_the_bound_reports_what_the_unbounded_trace_reports() {
    let (bounded, whole) = (TempDir::new(), TempDir::new());
    // About 1.8 million records, some twenty times the bound.
    let args = ["4", "90000"];
    run(bounded.path(), "1MiB", &args);
    run(whole.path(), "off", &args);
    let names = files(bounded.path());
    assert!(
        !names.iter().any(|p| p.ends_with("t.trace")),
        "the first segment was deleted: {names:?}"
    );
    assert!(names.len() >= 2, "{names:?}");
    let whole_size = total_bytes(whole.path());
    let kept = total_bytes(bounded.path());
    assert!(kept * 2 < whole_size, "kept {kept} of {whole_size} bytes");

    let (b, w) = (report(&[bounded.path()]), report(&[whole.path()]));
    assert_eq!(leaks_and_objects(&b), leaks_and_objects(&w));
    assert_eq!(totals(&b), totals(&w));
    // The leak of the first moments, long deleted, is there with its stack.
    let first = b["leaks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|l| l["bytes"] == 7777)
        .expect("leak_first");
    assert_eq!(first["stack"][0]["function"], "leak_first");
    assert!(b["leaks"].as_array().unwrap().iter().any(|l| l["bytes"] == 8888));
    assert_eq!(b["summary"]["allocations"], 4 * 90000 + 4 * 8 + 2);
    assert_eq!(
        b["findings"].as_array().unwrap().len(),
        w["findings"].as_array().unwrap().len()
    );

    // The memory pass covers the whole run through the checkpoints' history: every event, and
    // the staircase of kept allocations (up to 32 x 4 KiB, the first steps long deleted) found
    // as growth from nothing, as in the unbounded trace (where the growth ends depends on how
    // each run's threads interleaved).
    let memory = |dir: &Path| {
        let out = Command::new(gpuleak_bin())
            .args(["report", "--memory", "--format", "json"])
            .arg(dir)
            .output()
            .unwrap();
        assert_ok(&out);
        let r: Value = serde_json::from_slice(&out.stdout).unwrap();
        r["processes"][0]["memory"].clone()
    };
    let (b, w) = (memory(bounded.path()), memory(whole.path()));
    assert_eq!(b["events"], w["events"]);
    for m in [&b, &w] {
        let g = &m["growth"].as_array().unwrap()[0];
        assert_eq!(g["from_bytes"], 0, "{g:#}");
        let to = g["to_bytes"].as_u64().unwrap();
        assert!((16 * 4096..=32 * 4096).contains(&to), "{g:#}");
    }
}

#[test]
fn sixteen_threads_rotating_lose_nothing() {
    let dir = TempDir::new();
    run(dir.path(), "1MiB", &["16", "8000"]);
    let r = report(&[dir.path()]);
    // Every allocation and free of every thread, across every rotation.
    assert_eq!(r["summary"]["allocations"], 16 * 8000 + 16 * 8 + 2);
    assert_eq!(r["summary"]["frees"], 16 * 8000 + 16 * 4);
    assert_eq!(r["summary"]["leaked_allocations"], 16 * 4 + 2);
    assert_eq!(
        r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| live_object(f))
            .count(),
        2
    );
    assert!(r["findings"].as_array().unwrap().iter().all(live_object));
}

#[test]
fn a_fork_during_rotations_gives_the_child_a_trace_of_its_own() {
    let dir = TempDir::new();
    let out = run(dir.path(), "1MiB", &["4", "30000", "fork"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let child: u32 = text
        .lines()
        .find_map(|l| l.strip_prefix("child "))
        .unwrap()
        .parse()
        .unwrap();
    let r = report(&[dir.path()]);
    let processes = r["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 2, "{processes:#?}");
    let c = processes.iter().find(|p| p["pid"] == child).expect("the child");
    assert_eq!(c["summary"]["allocations"], 2);
    assert_eq!(c["summary"]["leaked_bytes"], 5555);
    let parent = processes.iter().find(|p| p["pid"] != child).unwrap();
    assert_eq!(parent["summary"]["allocations"], 4 * 30000 + 4 * 8 + 2);
    assert_eq!(parent["summary"]["frees"], 4 * 30000 + 4 * 4);
}

/// `trace_rotation` with 4 threads and no end in sight, under a bound of 1 MiB, its trace in
/// `dir/t.trace`: for killing.
fn endless(dir: &Path) -> std::process::Child {
    shim_command(client("trace_rotation"), &dir.join("t.trace"))
        .env("GPULEAK_MAX_TRACE", "1MiB")
        .args(["4", "100000000"])
        .stdout(Stdio::null())
        .spawn()
        .unwrap()
}

/// A few random delays from `seed` (xorshift), in microseconds below `max_us`.
fn delays(mut seed: u64, n: usize, max_us: u64) -> Vec<u64> {
    (0..n)
        .map(|_| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % max_us
        })
        .collect()
}

#[test]
fn kill_9_at_random_moments_leaves_a_trace_that_reports_consistently() {
    let mut unfinished = 0;
    for (trial, delay) in delays(0x9e37_79b9_7f4a_7c15, 50, 400_000).into_iter().enumerate() {
        let dir = TempDir::new();
        let mut child = endless(dir.path());
        std::thread::sleep(Duration::from_micros(20_000 + delay));
        child.kill().unwrap();
        child.wait().unwrap();
        let names = files(dir.path());
        // A kill during a rotation leaves a newest segment whose checkpoint is unfinished
        // (being waited for, read or written).
        if let Some(newest) = names.last().filter(|_| names.len() > 1) {
            let bytes = std::fs::read(newest).unwrap();
            let (_, finished) = Trace::new(&bytes).unwrap().checkpoint_blocks();
            unfinished += usize::from(!finished);
        }
        let r = report(&[dir.path()]);
        // Every free finds its allocation and nothing is made up: at most one allocation in
        // flight per thread, the two of main and the staircase are live. (A kernel launched
        // and not yet waited for when the kill came is work never waited for at the end of
        // the trace, as in an unbounded one.)
        let findings: Vec<&Value> = r["findings"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|f| !live_object(f) && f["check"] != "unsynchronized-at-exit")
            .collect();
        assert!(
            findings.is_empty(),
            "trial {trial} ({delay} us): {findings:#?} in {names:?}"
        );
        let live = r["summary"]["leaked_allocations"].as_u64().unwrap();
        assert!(
            live <= 4 + 1 + 4 * 16,
            "trial {trial}: {live} live allocations in {names:?}"
        );
        // The totals agree with what is live, but for frees numbered and not yet written when
        // the kill came (one a thread at most: the driver had freed the memory, another thread
        // may have been given it again, and the report says it missed a free).
        let allocs = r["summary"]["allocations"].as_u64().unwrap();
        let frees = r["summary"]["frees"].as_u64().unwrap();
        let in_flight = (allocs - frees).checked_sub(live);
        assert!(
            in_flight.is_some_and(|n| n <= 4),
            "trial {trial}: {allocs} - {frees} vs {live} live"
        );
    }
    eprintln!("{unfinished} of 50 kills landed during a rotation");
    assert!(unfinished > 0, "no kill landed during a rotation");
}

/// Runs `shim_threads 1 PAIRS` under `ulimit -f BLOCKS` (512-byte blocks) with `bound`.
fn with_file_size_limit(trace: &Path, blocks: u64, pairs: &str, bound: &str) -> Output {
    let limit = format!("ulimit -f {blocks} && exec \"$@\"");
    let mut cmd = shim_command_via(&["sh", "-c", &limit, "sh"], client("shim_threads"), trace);
    cmd.env("GPULEAK_MAX_TRACE", bound).args(["1", pairs]);
    cmd.output().unwrap()
}

#[test]
fn a_file_size_limit_ends_segments_early_and_nothing_is_lost() {
    for bound in ["2GiB", "3MiB"] {
        let dir = TempDir::new();
        // 1 MiB of file at most: the 400k events of this run need about 5 MiB.
        let out = with_file_size_limit(&dir.path().join("t.trace"), 2048, "200000", bound);
        assert_ok(&out);
        assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{bound}");
        for f in files(dir.path()) {
            assert!(std::fs::metadata(&f).unwrap().len() <= 1 << 20, "{f:?}");
        }
        let r = report(&[dir.path()]);
        assert_eq!(r["summary"]["allocations"], 200_000, "{bound}");
        assert_eq!(r["summary"]["frees"], 200_000, "{bound}");
    }
}

#[test]
fn a_full_file_system_deletes_old_segments_rather_than_stop_recording() {
    let fs = super::stress::SmallFileSystem::mount("2m");
    let trace = fs.path().join("t.trace");
    // 400k events need about 5 MiB; segments of 1 MiB fill the 2 MiB file system twice over.
    let out = shim_command(client("shim_threads"), &trace)
        .env("GPULEAK_MAX_TRACE", "4MiB")
        .args(["1", "200000"])
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "threads 1 pairs 200000 failures 0"
    );
    // At most one line, when the disk was full at a moment when no segment could go yet: a
    // record that then finds no room waits, or, at exit, goes to the block kept for it.
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.lines().count() <= 1, "{err}");
    let r = report(&[fs.path()]);
    assert!(
        r["notes"]
            .as_array()
            .unwrap()
            .iter()
            .all(|n| !n.as_str().unwrap().contains("lost")),
        "{r:#}"
    );
    assert_eq!(r["summary"]["allocations"], 200_000);
    assert_eq!(r["summary"]["frees"], 200_000);
}

#[test]
fn a_process_still_rotating_can_be_reported_again_and_again() {
    let dir = TempDir::new();
    let mut child = endless(dir.path());
    // Until the process has written a segment's header (under emulation it starts slowly).
    let started = std::time::Instant::now();
    let written = || {
        std::fs::read_dir(dir.path()).unwrap().any(|e| {
            let mut head = [0u8; 8];
            std::fs::File::open(e.unwrap().path())
                .is_ok_and(|mut f| std::io::Read::read_exact(&mut f, &mut head).is_ok() && head == *b"GPULEAK\0")
        })
    };
    while !written() {
        assert!(started.elapsed() < Duration::from_secs(60), "no trace after a minute");
        std::thread::sleep(Duration::from_millis(10));
    }
    std::thread::sleep(Duration::from_millis(50));
    for i in 0..20 {
        let out = Command::new(gpuleak_bin())
            .args(["report", "--format", "json"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "report {i}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

#[test]
fn gpuleak_run_sums_up_a_bounded_trace_as_one_process() {
    let dir = TempDir::new();
    let out = gpuleak_e2e::sim_command(gpuleak_bin())
        .current_dir(dir.path())
        .env("GPULEAK_MAX_TRACE", "1MiB")
        .args(["run", "--"])
        .arg(client("trace_rotation"))
        .args(["4", "20000"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let names = files(dir.path());
    assert!(
        names.len() >= 2 && !names.iter().any(|p| p.extension().is_some_and(|e| e == "trace")),
        "{names:?}"
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1 process traced: 18 leaked allocations"), "{err}");
}

#[test]
fn a_first_segment_whose_checkpoint_is_unfinished_is_an_error_naming_it() {
    let dir = TempDir::new();
    run(dir.path(), "1MiB", &["2", "20000"]);
    let names = files(dir.path());
    let first = &names[0];
    // Its checkpoint's last block zeroed, as a writer stopped while writing it leaves it.
    let mut bytes = std::fs::read(first).unwrap();
    let (blocks, finished) = Trace::new(&bytes).unwrap().checkpoint_blocks();
    assert!(finished);
    let last = *blocks.last().unwrap();
    let at = gpuleak_format::HEADER_SIZE + last * gpuleak_format::BLOCK_SIZE;
    bytes[at..at + gpuleak_format::BLOCK_SIZE].fill(0);
    std::fs::write(first, &bytes).unwrap();
    let out = Command::new(gpuleak_bin())
        .arg("report")
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&first.display().to_string()) && err.contains("checkpoint is unfinished"),
        "{err}"
    );
}
