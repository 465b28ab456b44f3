//! The shim under real C programs on the simulated driver: every door, every allocation
//! family, transparency, threads, crashes, fork, processes that never touch CUDA, settings
//! that once misbehaved, and setuid programs (where it only passes calls through).

mod bounded;
mod doors;
mod hostile;
mod libraries;
mod settings;
mod setuid;
mod small_stacks;
mod stacks;
mod stress;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use gpuleak_e2e::{client, shim_command, sim_command, TempDir};

use crate::trace::{assert_ok, calls, dump, dump_lossy, hex, mask_host_addresses, of_type, recorded_calls};

/// The client's calls, as it printed them, equal the trace's records one for one.
fn assert_trace_matches_program(name: &str, args: &[&str]) -> Vec<serde_json::Value> {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = shim_command(client(name), &trace).args(args).output().unwrap();
    assert_ok(&out);
    let records = dump(&trace);
    let printed = calls(&out.stdout);
    assert!(!printed.is_empty(), "{name} printed no calls");
    assert_eq!(recorded_calls(&records), printed, "{name}: trace and program disagree");
    records
}

#[test]
fn every_allocation_family_is_recorded_once_through_exported_symbols() {
    let records = assert_trace_matches_program("shim_families", &[]);
    let apis: std::collections::BTreeSet<&str> = of_type(&records, "Alloc")
        .iter()
        .map(|r| r["api"].as_str().unwrap())
        .collect();
    for family in [
        "cuMemAlloc_v2",
        "cuMemAllocPitch_v2",
        "cuMemAllocManaged",
        "cuMemAllocHost_v2",
        "cuMemHostAlloc",
        "cuMemHostRegister_v2",
        "cuMemAllocAsync",
        "cuMemAllocAsync_ptsz",
        "cuMemAllocFromPoolAsync",
        "cuMemAddressReserve",
        "cuMemCreate",
        "cuArrayCreate_v2",
        "cuArray3DCreate_v2",
        "cuIpcOpenMemHandle_v2",
    ] {
        assert!(apis.contains(family), "no {family} record");
    }
    for r in of_type(&records, "Alloc") {
        let failed = r["result"] != 0;
        assert_ne!(r["stack"], 0, "every allocation carries a stack: {r}");
        if failed {
            assert_eq!(hex(&r["ptr"]), 0, "a failed allocation is never an allocation: {r}");
        }
    }
    // Bad frees are recorded as failures with the stack of the bad call.
    let bad: Vec<_> = of_type(&records, "Free")
        .into_iter()
        .filter(|r| r["result"] != 0)
        .collect();
    assert_eq!(bad.len(), 2, "unknown pointer and double free");
    assert!(bad.iter().all(|r| r["stack"] != 0));
    // Contexts, streams and events.
    assert_eq!(of_type(&records, "CtxCreate").len(), 2);
    assert_eq!(of_type(&records, "CtxDestroy").len(), 1);
    assert_eq!(of_type(&records, "StreamCreate").len(), 1);
    assert_eq!(of_type(&records, "EventCreate").len(), 1);
    assert_eq!(of_type(&records, "Exit").len(), 1);
}

#[test]
fn the_program_computes_the_same_with_and_without_the_shim() {
    for name in [
        "shim_families",
        "shim_dlsym",
        "shim_resolver",
        "shim_runtime",
        "shim_runtime_static",
    ] {
        let dir = TempDir::new();
        let plain = sim_command(client(name)).output().unwrap();
        let traced = shim_command(client(name), &dir.path().join("t.trace"))
            .output()
            .unwrap();
        assert_ok(&plain);
        assert_ok(&traced);
        assert_eq!(
            mask_host_addresses(&String::from_utf8_lossy(&plain.stdout)),
            mask_host_addresses(&String::from_utf8_lossy(&traced.stdout)),
            "{name}: output differs under the shim"
        );
        assert_eq!(
            String::from_utf8_lossy(&traced.stderr),
            "",
            "{name}: the shim printed something"
        );
    }
}

#[test]
fn eight_threads_of_100k_pairs_lose_nothing() {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = shim_command(client("shim_threads"), &trace)
        .args(["8", "100000"])
        .output()
        .unwrap();
    assert_ok(&out);
    let records = dump(&trace);
    let allocs = of_type(&records, "Alloc");
    let frees = of_type(&records, "Free");
    assert_eq!(allocs.len(), 800_000);
    assert_eq!(frees.len(), 800_000);
    assert!(allocs.iter().chain(&frees).all(|r| r["result"] == 0));
    let seqs: Vec<u64> = records.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "records come out in one strict order"
    );
    let tids: std::collections::BTreeSet<u64> = allocs.iter().map(|r| r["tid"].as_u64().unwrap()).collect();
    assert_eq!(tids.len(), 8);
    // Each pointer is freed after it is allocated and before it is handed out again.
    let mut live = std::collections::HashSet::new();
    for r in &records {
        match r["type"].as_str().unwrap() {
            "Alloc" => assert!(live.insert(hex(&r["ptr"])), "address handed out twice: {r}"),
            "Free" => assert!(live.remove(&hex(&r["ptr"])), "free of a pointer not live: {r}"),
            _ => {}
        }
    }
    assert!(live.is_empty());
}

fn run_until_ready(mode: &str, n: usize, trace: &std::path::Path) -> std::process::Child {
    let mut child = shim_command(client("shim_crash"), trace)
        .args([mode, &n.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    child
}

#[test]
fn kill_9_leaves_a_readable_trace_with_every_recorded_allocation() {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let mut child = run_until_ready("hang", 3000, &trace);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let records = dump(&trace);
    assert_eq!(of_type(&records, "Alloc").len(), 3000);
    assert!(of_type(&records, "Exit").is_empty(), "killed: no exit record");
}

#[test]
fn segv_and_abort_lose_nothing() {
    for mode in ["segv", "abort"] {
        let dir = TempDir::new();
        let trace = dir.path().join("t.trace");
        let mut child = run_until_ready(mode, 2500, &trace);
        let status = child.wait().unwrap();
        assert!(!status.success(), "{mode} should crash");
        let records = dump(&trace);
        assert_eq!(of_type(&records, "Alloc").len(), 2500, "{mode}");
    }
}

#[test]
fn a_forked_child_writes_its_own_trace_and_a_child_without_cuda_none() {
    let dir = TempDir::new();
    let template = dir.path().join("t.%p.trace");
    let out = shim_command(client("shim_fork"), &template).output().unwrap();
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let pids: Vec<u32> = text
        .lines()
        .find_map(|l| l.strip_prefix("children "))
        .unwrap()
        .split(' ')
        .map(|p| p.parse().unwrap())
        .collect();
    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "parent and CUDA child only: {files:?}");
    assert!(
        !files.contains(&format!("t.{}.trace", pids[1])),
        "the child without CUDA wrote a trace"
    );
    let child = dump(&dir.path().join(format!("t.{}.trace", pids[0])));
    assert_eq!(of_type(&child, "ProcessInfo")[0]["pid"], pids[0]);
    assert_eq!(of_type(&child, "Alloc").len(), 3);
    assert_eq!(of_type(&child, "Free").len(), 1);
    // The child allocates from the parent's call site: its own trace must hold that stack.
    let stack_ids: std::collections::BTreeSet<u64> = of_type(&child, "Stack")
        .iter()
        .map(|s| s["id"].as_u64().unwrap())
        .collect();
    for a in of_type(&child, "Alloc") {
        assert!(
            stack_ids.contains(&a["stack"].as_u64().unwrap()),
            "child alloc refers to a stack not in its trace: {a}"
        );
    }
    let parent_file = files.iter().find(|f| **f != format!("t.{}.trace", pids[0])).unwrap();
    let parent = dump(&dir.path().join(parent_file));
    assert_eq!(of_type(&parent, "Alloc").len(), 1);
    assert_eq!(of_type(&parent, "Free").len(), 1);
}

#[test]
fn a_process_that_never_calls_cuda_writes_nothing_and_behaves_the_same() {
    let dir = TempDir::new();
    let plain = sim_command(client("no_cuda")).current_dir(dir.path()).output().unwrap();
    let mut cmd = shim_command(client("no_cuda"), &dir.path().join("t.trace"));
    cmd.env_remove("GPULEAK_OUTPUT").current_dir(dir.path());
    let traced = cmd.output().unwrap();
    assert_ok(&traced);
    assert_eq!(plain.stdout, traced.stdout);
    assert_eq!(
        String::from_utf8_lossy(&traced.stdout).trim(),
        "printf found, cuMemAlloc_v2 missing"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no file for a process without CUDA"
    );
}

#[test]
fn the_default_trace_name_carries_program_and_pid_and_never_overwrites() {
    let dir = TempDir::new();
    let mut cmd = shim_command(client("shim_crash"), &dir.path().join("unused"));
    cmd.env_remove("GPULEAK_OUTPUT")
        .current_dir(dir.path())
        .args(["exit", "3"]);
    let out = cmd.output().unwrap();
    assert_ok(&out);
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1);
    assert!(
        names[0].starts_with("gpuleak.shim_crash.") && names[0].ends_with(".trace"),
        "{names:?}"
    );
    // An explicit name that exists is not overwritten either.
    let fixed = dir.path().join("fixed.trace");
    for _ in 0..2 {
        assert_ok(
            &shim_command(client("shim_crash"), &fixed)
                .args(["exit", "3"])
                .output()
                .unwrap(),
        );
    }
    assert_eq!(of_type(&dump(&fixed), "Alloc").len(), 3);
    assert_eq!(of_type(&dump(&dir.path().join("fixed.trace.1")), "Alloc").len(), 3);
}

#[test]
fn bad_settings_give_one_line_and_defaults() {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = shim_command(client("shim_crash"), &trace)
        .env("GPULEAK_STACK_DEPTH", "lots")
        .args(["exit", "2"])
        .output()
        .unwrap();
    assert_ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("gpuleak: GPULEAK_STACK_DEPTH=\"lots\""), "{err}");
    let records = dump(&trace);
    assert_eq!(of_type(&records, "ProcessInfo")[0]["stack_depth"], 64);

    // The same for the pool sampling period, read with the others when tracing starts.
    let trace = dir.path().join("pool.trace");
    let out = shim_command(client("shim_crash"), &trace)
        .env("GPULEAK_POOL_SAMPLE", "often")
        .args(["exit", "2"])
        .output()
        .unwrap();
    assert_ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim_end(),
        "gpuleak: GPULEAK_POOL_SAMPLE=\"often\" is not 0 or a sampling period N; using 64"
    );
}

#[test]
fn an_unwritable_output_leaves_the_program_unaffected() {
    let plain = sim_command(client("shim_families")).output().unwrap();
    let out = shim_command(
        client("shim_families"),
        std::path::Path::new("/nonexistent-dir/x.trace"),
    )
    .output()
    .unwrap();
    assert_ok(&out);
    assert_eq!(
        mask_host_addresses(&String::from_utf8_lossy(&plain.stdout)),
        mask_host_addresses(&String::from_utf8_lossy(&out.stdout))
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot create trace /nonexistent-dir/x.trace"), "{err}");
}

#[test]
fn dump_of_a_truncated_trace_names_the_offset_and_keeps_what_came_before() {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    assert_ok(
        &shim_command(client("shim_crash"), &trace)
            .args(["exit", "50"])
            .output()
            .unwrap(),
    );
    let bytes = std::fs::read(&trace).unwrap();
    let whole = dump(&trace);
    let cut_at = whole.iter().filter(|r| r["type"] == "Alloc").nth(20).unwrap()["offset"]
        .as_u64()
        .unwrap() as usize
        + 3;
    let short = dir.path().join("short.trace");
    std::fs::write(&short, &bytes[..cut_at]).unwrap();
    let (records, stderr, ok) = dump_lossy(&short);
    assert!(!ok, "a truncated trace is an error");
    assert!(stderr.contains("truncated") && stderr.contains("offset"), "{stderr}");
    assert_eq!(of_type(&records, "Alloc").len(), 20);
    std::fs::write(&short, b"not a trace at all").unwrap();
    let (_, stderr, ok) = dump_lossy(&short);
    assert!(!ok && stderr.contains("not a gpuleak trace"), "{stderr}");
}
