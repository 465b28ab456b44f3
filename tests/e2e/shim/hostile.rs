//! Hostile programs (issue 39): programs that do legal things the shim must survive without
//! changing what they compute or write.

use std::path::Path;

use gpuleak_e2e::{client, shim_command, TempDir};
use serde_json::Value;

use super::stress::report;
use crate::trace::{assert_ok, dump, of_type};

/// Runs `shim_hostile_fds MODE` under the shim; returns its stdout, its stderr and the path of
/// the trace it wrote.
fn hostile_fds(dir: &Path, mode: &str) -> (String, String, std::path::PathBuf) {
    let trace = dir.join("t.trace");
    let own = dir.join("own.txt");
    let out = shim_command(client("shim_hostile_fds"), &trace)
        .arg(mode)
        .arg(&own)
        .output()
        .unwrap();
    assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    (stdout, stderr, trace)
}

/// The trace holds every allocation the program made (1 kept, 10 before MODE, 20,000 after),
/// the kept one is a leak, and nothing was lost.
fn assert_whole_trace(trace: &Path, mode: &str) {
    let records = dump(trace);
    assert_eq!(of_type(&records, "Alloc").len(), 1 + 10 + 20_000, "{mode}");
    assert_eq!(of_type(&records, "Free").len(), 10 + 20_000, "{mode}");
    assert!(of_type(&records, "Lost").is_empty(), "{mode}: nothing lost");
    assert_eq!(of_type(&records, "Exit").len(), 1, "{mode}");
    let r: Value = report(trace);
    assert_eq!(r["summary"]["leaked_allocations"], 1, "{mode}: {}", r["summary"]);
    assert_eq!(r["summary"]["leaked_bytes"], 1 << 20, "{mode}: {}", r["summary"]);
}

#[test]
fn a_program_that_closes_or_replaces_the_traces_descriptor_keeps_its_own_file_intact() {
    for mode in ["none", "close-range", "close-loop", "dup2"] {
        let dir = TempDir::new();
        let (stdout, stderr, trace) = hostile_fds(dir.path(), mode);
        assert_eq!(stdout.trim(), "lines 100000 good 100000", "{mode}: the program's file");
        assert_eq!(stderr, "", "{mode}: the trace was reopened in silence");
        assert_whole_trace(&trace, mode);
    }
}

#[test]
fn a_trace_that_cannot_be_reopened_stops_with_one_line_and_counts_what_it_lost() {
    let dir = TempDir::new();
    let (stdout, stderr, _) = hostile_fds(dir.path(), "rename");
    let mut lines = stdout.lines();
    let moved = lines.next().and_then(|l| l.strip_prefix("moved ")).unwrap().to_string();
    assert_eq!(lines.next(), Some("lines 100000 good 100000"), "the program's file");
    let ours: Vec<&str> = stderr.lines().filter(|l| l.starts_with("gpuleak:")).collect();
    assert_eq!(ours.len(), 1, "{stderr}");
    assert!(ours[0].contains("closed the trace's descriptor"), "{stderr}");
    assert!(
        ours[0].contains("recording stops here, the program continues"),
        "{stderr}"
    );
    // What was written before the loss reads back, and the end says how much was lost.
    let records = dump(Path::new(&moved));
    let lost: u64 = of_type(&records, "Lost")
        .iter()
        .filter(|r| r["reason"] == 1)
        .map(|r| r["count"].as_u64().unwrap())
        .sum();
    let kept = of_type(&records, "Alloc").len() + of_type(&records, "Free").len();
    assert!(lost > 0, "a Lost record counts the records not written");
    assert_eq!(
        kept as u64 + lost,
        1 + 2 * (10 + 20_000),
        "every record is written or counted"
    );
    assert_eq!(of_type(&records, "Exit").len(), 1, "the Exit record reaches the file");
    // Frees after the loss are missing, so the report may count more as leaked: it says why.
    let r = report(Path::new(&moved));
    assert!(
        r["summary"]["leaked_bytes"].as_u64().unwrap() >= 1 << 20,
        "{}",
        r["summary"]
    );
    let notes = r["notes"].to_string();
    assert!(notes.contains(&format!("the shim lost {lost} events")), "{notes}");
}

#[test]
fn many_short_threads_write_bytes_in_proportion_to_their_records() {
    for batch in ["1", "16"] {
        let dir = TempDir::new();
        let trace = dir.path().join("t.trace");
        let out = shim_command(client("shim_short_threads"), &trace)
            .args(["5000", batch])
            .output()
            .unwrap();
        assert_ok(&out);
        let printed: std::collections::BTreeSet<u64> = String::from_utf8_lossy(&out.stdout)
            .lines()
            .map(|l| l.strip_prefix("tid ").unwrap().parse().unwrap())
            .collect();
        assert_eq!(printed.len(), 5000, "batch {batch}");
        // Blocks are handed on from exiting threads: 5,000 one-allocation threads once took
        // a 64 KiB block each (313 MiB).
        let size = std::fs::metadata(&trace).unwrap().len();
        assert!(size < 4 << 20, "batch {batch}: {size} bytes for 10,000 records");
        // Each record still names the thread that made it.
        let records = dump(&trace);
        let allocs = of_type(&records, "Alloc");
        assert_eq!(allocs.len(), 5000, "batch {batch}");
        let tids: std::collections::BTreeSet<u64> = allocs.iter().map(|r| r["tid"].as_u64().unwrap()).collect();
        assert_eq!(tids, printed, "batch {batch}: the tids of the records are the threads'");
        let r = report(&trace);
        assert_eq!(r["summary"]["allocations"], 5000);
        assert_eq!(r["summary"]["frees"], 5000);
        assert_eq!(r["summary"]["leaked_allocations"], 0);
    }
}

/// SIGUSR1 raised inside the 3rd, 8th and 13th `cuMemAlloc_v2` calls.
const INSIDE_ALLOCS: &str = "cuMemAlloc_v2:3:sig10,cuMemAlloc_v2:8:sig10,cuMemAlloc_v2:13:sig10";

/// Runs `shim_signals MODE` with `SIMCUDA_FAIL=faults`; returns its stdout and records.
fn signals(mode: &str, faults: &str) -> (String, Vec<Value>, Value) {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = shim_command(client("shim_signals"), &trace)
        .arg(mode)
        .env("SIMCUDA_FAIL", faults)
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(String::from_utf8_lossy(&out.stderr), "", "{mode}");
    let stdout = String::from_utf8_lossy(&out.stdout).trim().to_string();
    (stdout, dump(&trace), report(&trace))
}

fn allocs_of(records: &[Value], bytes: u64) -> usize {
    of_type(records, "Alloc").iter().filter(|r| r["size"] == bytes).count()
}

#[test]
fn a_longjmp_out_of_a_cuda_call_does_not_stop_its_thread_from_being_traced() {
    let (stdout, records, _) = signals("longjmp", INSIDE_ALLOCS);
    assert_eq!(stdout, "jumped 3");
    // The jumps abandoned three calls; every call after them is recorded.
    assert_eq!(allocs_of(&records, 12345), 1000);
    assert_eq!(allocs_of(&records, 4096), 17);
}

#[test]
fn calls_of_a_signal_handler_inside_a_cuda_call_are_counted_and_outside_one_recorded() {
    // The handler's allocation and free run inside the interrupted call: passed through, and
    // counted in a Lost record (reason 3) that the report names.
    let (stdout, records, r) = signals("nested", INSIDE_ALLOCS);
    assert_eq!(stdout, "handled 3");
    assert_eq!(allocs_of(&records, 777), 0);
    assert_eq!(allocs_of(&records, 4096), 20);
    let nested: Vec<&Value> = of_type(&records, "Lost")
        .into_iter()
        .filter(|r| r["reason"] == 3)
        .collect();
    assert_eq!(nested.len(), 1, "{nested:?}");
    assert_eq!(nested[0]["count"], 6, "3 allocations and 3 frees");
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("6 CUDA calls were made while their thread was inside another CUDA call"),
        "{notes}"
    );
    // The twin: the same handler between two calls is traced like any code.
    let (stdout, records, _) = signals("outside", "");
    assert_eq!(stdout, "handled 4");
    assert_eq!(allocs_of(&records, 777), 4);
    assert!(of_type(&records, "Lost").is_empty());
}

#[test]
fn no_intercepted_call_after_the_first_takes_the_loaders_lock() {
    // The getters and the real functions are looked up as tracing starts: a later lookup
    // (dlsym takes the loader's lock) left by a longjmp would hang the next one. The loader
    // logs every lookup with LD_DEBUG=symbols; LD_BIND_NOW keeps lazy binding out of the log.
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let mut cmd = shim_command(client("shim_signals"), &trace);
    cmd.arg("getters");
    let debug = [("LD_DEBUG", "symbols"), ("LD_BIND_NOW", "1")];
    if gpuleak_e2e::runner().is_some() {
        // Under the emulator the guest's loader takes its environment from QEMU_SET_ENV.
        let mut set = cmd
            .get_envs()
            .find(|(k, _)| *k == "QEMU_SET_ENV")
            .and_then(|(_, v)| v.map(|v| v.to_os_string()))
            .unwrap_or_default();
        for (k, v) in debug {
            set.push(format!(",{k}={v}"));
        }
        cmd.env("QEMU_SET_ENV", set);
    } else {
        cmd.envs(debug);
    }
    let out = cmd.output().unwrap();
    assert_ok(&out);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let after: Vec<&str> = stderr
        .lines()
        .skip_while(|l| *l != "traced")
        .take_while(|l| *l != "done")
        .filter(|l| l.contains("symbol="))
        .collect();
    assert!(stderr.contains("traced") && stderr.contains("done"), "{stderr}");
    assert!(after.is_empty(), "lookups after tracing started: {after:#?}");
}

#[test]
fn the_shim_never_calls_malloc_once_tracing_started() {
    // A signal handler's CUDA call may interrupt the program inside malloc: the shim's own
    // allocations come from a heap of its own. 2,048 new stacks to intern on two threads.
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = shim_command(client("shim_no_malloc"), &trace).output().unwrap();
    assert_ok(&out);
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "shim mallocs 0");
    let records = dump(&trace);
    assert_eq!(of_type(&records, "Alloc").len(), 1 + 2048);
    assert!(of_type(&records, "Stack").len() > 2048, "every call stack is new");
}
