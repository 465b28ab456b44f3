//! Operations (issue 7): the shim's metrics endpoint scraped by a real Prometheus, snapshots on
//! demand, OOM dumps, budgets and fault injection, on C clients on the simulated driver.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use gpuleak_e2e::{client, shim_command, sim_command, TempDir};
use serde_json::Value;

use crate::trace::{assert_ok, calls, dump, of_type, recorded_calls};

pub(crate) mod metrics;
mod server;

/// Runs `ops_workload` under the shim with `env`; returns its output and the trace records.
fn run_workload(args: &[&str], env: &[(&str, &str)]) -> (Output, Vec<Value>) {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let mut cmd = shim_command(client("ops_workload"), &trace);
    cmd.args(args).envs(env.iter().copied());
    let out = cmd.output().unwrap();
    let records = dump(&trace);
    (out, records)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The results of the program's allocation calls, in order.
fn results(out: &Output) -> Vec<i64> {
    calls(&out.stdout).iter().map(|c| c.result).collect()
}

/// Record types in sequence order, allocations shown as `Alloc:<result>`.
fn sequence(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .filter_map(|r| match r["type"].as_str()? {
            "Alloc" => Some(format!("Alloc:{}", r["result"])),
            "Snapshot" => Some(format!("Snapshot:{}", r["reason"].as_str()?)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_budget_turns_a_passing_program_into_an_oom_without_calling_the_driver() {
    // Five 64 MiB allocations fit the simulated 1 GiB device...
    let (plain, _) = run_workload(&["steps", "5", "64"], &[]);
    assert_ok(&plain);
    assert_eq!(results(&plain), vec![0; 5]);
    // ...but not a 200 MiB budget: the fourth fails as out of memory, as on a smaller card.
    let (out, records) = run_workload(
        &["steps", "5", "64"],
        &[("GPULEAK_LIMIT", "200MiB"), ("GPULEAK_OOM_SNAPSHOT", "1")],
    );
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert_eq!(results(&out), vec![0, 0, 0, 2]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("out of memory at step 4"));
    assert_eq!(
        recorded_calls(&records),
        calls(&out.stdout),
        "refused calls are recorded as failures"
    );
    assert_eq!(
        sequence(&records),
        ["Alloc:0", "Alloc:0", "Alloc:0", "Alloc:2", "Snapshot:oom"],
        "an OOM snapshot right after the refused call"
    );
    // No summary unless asked, and nothing else on stderr.
    assert_eq!(stderr(&out), "");
    // 192 MiB + 8 MiB is within the budget: exactly at the limit passes.
    let (at_limit, _) = run_workload(&["steps", "1", "200"], &[("GPULEAK_LIMIT", "200MiB")]);
    assert_ok(&at_limit);
    let (over, _) = run_workload(&["steps", "1", "201"], &[("GPULEAK_LIMIT", "200MiB")]);
    assert_eq!(results(&over), vec![2]);
    // The budget is per device and counts live memory: frees give it back.
    let (churn, _) = run_workload(&["calls", "50"], &[("GPULEAK_LIMIT", "8KiB")]);
    assert_ok(&churn);
    assert_eq!(results(&churn), vec![0; 50], "freed memory returns to the budget");
}

#[test]
fn a_budget_of_1mb_1_mib_or_1m_is_the_same_1048576_bytes() {
    // Sizes mean one thing everywhere (docs/settings.md, "Sizes"): every unit is a power of 1024, as
    // pytest-memray reads them, so "1MB" is not 1000000 bytes.
    for limit in ["1MB", "1 MiB", "1M", "1 mb", "1024KB"] {
        // One 1 MiB allocation fits exactly...
        let (fits, _) = run_workload(&["steps", "1", "1"], &[("GPULEAK_LIMIT", limit)]);
        assert_eq!(results(&fits), vec![0], "GPULEAK_LIMIT={limit:?}: {}", stderr(&fits));
        assert_ok(&fits);
        // ...a second does not.
        let (over, _) = run_workload(&["steps", "2", "1"], &[("GPULEAK_LIMIT", limit)]);
        assert_eq!(results(&over), vec![0, 2], "GPULEAK_LIMIT={limit:?}");
        assert_eq!(stderr(&over), "", "a good size says nothing");
    }
}

#[test]
fn a_bad_budget_prints_one_line_with_the_accepted_forms_and_sets_no_limit() {
    for (limit, why) in [
        ("lots", "not a number"),
        ("1 XB", "unknown unit"),
        ("-1MB", "not a number"),
        ("99999999999 TiB", "too large"),
        ("0", "a budget of 0 bytes would refuse every allocation"),
    ] {
        let (out, _) = run_workload(&["steps", "2", "1"], &[("GPULEAK_LIMIT", limit)]);
        assert_ok(&out);
        assert_eq!(results(&out), vec![0, 0], "no budget with GPULEAK_LIMIT={limit:?}");
        let err = stderr(&out);
        let head = format!("gpuleak: GPULEAK_LIMIT={limit:?}: {why}; expected a number of bytes with an optional unit B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB or P/PB/PiB (any case, all powers of 1024)");
        assert!(err.starts_with(&head), "{err}");
        assert!(err.ends_with("; using no limit\n"), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
    }
}

#[test]
fn an_oom_from_the_driver_writes_a_snapshot_and_on_request_a_summary_of_who_holds_memory() {
    let env = [
        ("SIMCUDA_MEM_BYTES", "160MiB"),
        ("GPULEAK_OOM_SUMMARY", "1"),
        ("GPULEAK_OOM_SNAPSHOT", "1"),
    ];
    let (out, records) = run_workload(&["steps", "5", "64"], &env);
    assert_eq!(results(&out), vec![0, 0, 2], "the simulated card holds two");
    assert_eq!(sequence(&records), ["Alloc:0", "Alloc:0", "Alloc:2", "Snapshot:oom"]);
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert!(
        lines[0].starts_with("gpuleak: out of memory: cuMemAlloc_v2 of 64.0 MiB on device 0 failed (the driver"),
        "{err}"
    );
    assert!(
        lines[1].contains("128.0 MiB live on device 0 in 2 allocations"),
        "{err}"
    );
    assert!(
        lines[2].contains("128.0 MiB in     2 allocations") && lines[2].contains("(stack "),
        "{err}"
    );
    assert_eq!(lines.len(), 3, "one screen: {err}");
    // Each is asked for: by default neither (every operations feature is off by default).
    let (quiet, records) = run_workload(&["steps", "5", "64"], &[env[0]]);
    assert_eq!(stderr(&quiet), "");
    assert_eq!(results(&quiet), vec![0, 0, 2]);
    assert_eq!(of_type(&records, "Snapshot").len(), 0);
    let (snapshot_only, records) = run_workload(&["steps", "5", "64"], &[env[0], env[2]]);
    assert_eq!(stderr(&snapshot_only), "");
    assert_eq!(of_type(&records, "Snapshot").len(), 1);
}

#[test]
fn fault_injection_fails_exactly_the_chosen_calls_with_the_chosen_error() {
    let allocs = |records: &[Value]| -> Vec<_> {
        recorded_calls(records)
            .into_iter()
            .filter(|c| c.event == "alloc")
            .collect()
    };
    let (out, records) = run_workload(&["calls", "7"], &[("GPULEAK_FAIL", "cuMemAlloc_v2:3")]);
    assert_eq!(results(&out), vec![0, 0, 2, 0, 0, 0, 0]);
    assert_eq!(allocs(&records), calls(&out.stdout));
    let (out, records) = run_workload(
        &["calls", "12"],
        &[(
            "GPULEAK_FAIL",
            "cuMemAlloc_v2:every=4:err=CUDA_ERROR_INVALID_VALUE,cuMemAlloc_v2:2:err=999",
        )],
    );
    assert_eq!(results(&out), vec![0, 999, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1]);
    assert_eq!(allocs(&records), calls(&out.stdout));
    assert_eq!(
        of_type(&records, "Snapshot").len(),
        0,
        "not out of memory: no OOM snapshot"
    );
    // A rule for another function leaves these calls alone.
    let (out, _) = run_workload(&["calls", "3"], &[("GPULEAK_FAIL", "cuMemAllocHost_v2:1")]);
    assert_eq!(results(&out), vec![0, 0, 0]);
}

#[test]
fn fault_injection_counts_exactly_under_many_threads() {
    let dir = TempDir::new();
    let out = shim_command(client("shim_threads"), &dir.path().join("t.trace"))
        .args(["8", "1000"])
        .env("GPULEAK_FAIL", "cuMemAlloc_v2:every=7")
        .output()
        .unwrap();
    // 8000 calls: exactly floor(8000 / 7) of them fail, whichever threads make them.
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("failures 1142"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let records = dump(&dir.path().join("t.trace"));
    let failed = of_type(&records, "Alloc").iter().filter(|r| r["result"] != 0).count();
    assert_eq!(failed, 1142);
}

#[test]
fn live_accounting_stays_exact_under_many_threads() {
    // 8 threads each hold at most one block of at most 4 KiB at a time: 32 KiB can never be
    // exceeded unless a free is lost or counted twice (or the budget check races).
    let dir = TempDir::new();
    let out = shim_command(client("shim_threads"), &dir.path().join("t.trace"))
        .args(["8", "3000"])
        .env("GPULEAK_LIMIT", "32KiB")
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("failures 0"));
    // The twin: a budget below the largest block must refuse some calls.
    let tight = shim_command(client("shim_threads"), &dir.path().join("u.trace"))
        .args(["8", "3000"])
        .env("GPULEAK_LIMIT", "2KiB")
        .output()
        .unwrap();
    assert!(!tight.status.success(), "a 2 KiB budget refuses the larger blocks");
}

/// Runs `ops_workload signal MODE`, sends SIGUSR2 once it is ready, lets it finish.
fn signal_run(mode: &str, env: &[(&str, &str)]) -> (String, Vec<Value>) {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let mut child = shim_command(client("ops_workload"), &trace)
        .args(["signal", mode])
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    while !text.contains("ready") {
        let mut line = String::new();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "client ended early: {text}");
        text.push_str(&line);
    }
    let sent = Command::new("kill")
        .args(["-USR2", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    std::thread::sleep(Duration::from_millis(300));
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    stdout.read_to_string(&mut text).unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "{status}: {text}\n{err}");
    assert_eq!(err, "");
    (text, dump(&trace))
}

#[test]
fn a_snapshot_signal_mid_run_writes_a_snapshot_between_the_calls() {
    let (_, records) = signal_run("none", &[("GPULEAK_SNAPSHOT_SIGNAL", "USR2")]);
    assert_eq!(sequence(&records), ["Alloc:0", "Snapshot:signal", "Alloc:0"]);
    assert_eq!(of_type(&records, "Snapshot")[0]["id"], 1);
}

#[test]
fn a_program_with_its_own_handler_for_the_snapshot_signal_keeps_it() {
    let (text, records) = signal_run("own", &[("GPULEAK_SNAPSHOT_SIGNAL", "SIGUSR2")]);
    assert!(
        text.contains("handler ran 1"),
        "the program's handler still runs: {text}"
    );
    assert_eq!(sequence(&records), ["Alloc:0", "Snapshot:signal", "Alloc:0"]);
    // Without the setting the shim installs nothing.
    let (text, records) = signal_run("own", &[]);
    assert!(text.contains("handler ran 1"), "{text}");
    assert_eq!(of_type(&records, "Snapshot").len(), 0);
}

#[test]
fn a_snapshot_period_writes_snapshots_while_the_program_is_idle() {
    let (out, records) = run_workload(&["period", "1000"], &[("GPULEAK_SNAPSHOT_PERIOD", "200ms")]);
    assert_ok(&out);
    let seq = sequence(&records);
    assert_eq!(seq.first().map(String::as_str), Some("Alloc:0"));
    let second = seq.iter().rposition(|s| s == "Alloc:0").unwrap();
    assert!(second > 0);
    // The program makes no call for a second: the background thread writes them.
    let periods = seq[..second].iter().filter(|s| *s == "Snapshot:period").count();
    assert!((3..=6).contains(&periods), "about 5 in 1 s at 200 ms: {seq:?}");
    let ids: Vec<u64> = of_type(&records, "Snapshot")
        .iter()
        .map(|r| r["id"].as_u64().unwrap())
        .collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>());
}

#[test]
fn a_forked_child_starts_its_own_background_thread_and_accounting() {
    let dir = TempDir::new();
    let template = dir.path().join("t.%p.trace");
    let out = shim_command(client("ops_workload"), &template)
        .args(["fork", "800"])
        .env("GPULEAK_SNAPSHOT_PERIOD", "200ms")
        .env("GPULEAK_LIMIT", "12KiB")
        .output()
        .unwrap();
    assert_ok(&out);
    assert_eq!(stderr(&out), "");
    let text = String::from_utf8_lossy(&out.stdout);
    let pid: u32 = text
        .lines()
        .find_map(|l| l.strip_prefix("child "))
        .unwrap()
        .parse()
        .unwrap();
    // The parent's 4 KiB is not the child's: its 4 + 8 KiB fit the 12 KiB budget.
    assert_eq!(results(&out), vec![0, 0, 0]);
    let child = dump(&dir.path().join(format!("t.{pid}.trace")));
    let seq = sequence(&child);
    let second = seq.iter().rposition(|s| s == "Alloc:0").unwrap();
    let periods = seq[..second].iter().filter(|s| *s == "Snapshot:period").count();
    assert!(periods >= 2, "the child's own thread writes its snapshots: {seq:?}");
    assert_eq!(of_type(&child, "Snapshot")[0]["id"], 1, "ids start over in the child");
}

#[test]
fn bad_operations_settings_print_one_line_each_and_leave_the_feature_off() {
    let env = [
        ("GPULEAK_METRICS", "0.0.0.0:9"),
        ("GPULEAK_LIMIT", "lots"),
        ("GPULEAK_FAIL", "cuMemAlloc:2"),
        ("GPULEAK_SNAPSHOT_SIGNAL", "KILL"),
        ("GPULEAK_SNAPSHOT_PERIOD", "3 fortnights"),
        ("GPULEAK_OOM_SUMMARY", "maybe"),
    ];
    let (out, records) = run_workload(&["calls", "3"], &env);
    assert_ok(&out);
    assert_eq!(results(&out), vec![0, 0, 0], "no fault, no budget");
    let err = stderr(&out);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), env.len(), "{err}");
    for (name, value) in env {
        let line = lines
            .iter()
            .find(|l| l.starts_with(&format!("gpuleak: {name}=")))
            .unwrap_or_else(|| panic!("no line for {name}: {err}"));
        assert!(line.contains(&format!("{value:?}")), "{line}");
    }
    assert!(err.contains("loopback"), "{err}");
    assert!(err.contains("\"cuMemAlloc\" is not an allocation function"), "{err}");
    assert_eq!(of_type(&records, "Snapshot").len(), 0);
}

#[test]
fn the_control_api_works_with_and_without_the_shim() {
    let plain = sim_command(client("ops_control")).output().unwrap();
    assert_ok(&plain);
    assert_eq!(
        String::from_utf8_lossy(&plain.stdout),
        "api absent\nlive before 0 during 0 all 0 after 0\nsnapshots 0 0\n"
    );
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let traced = shim_command(client("ops_control"), &trace).output().unwrap();
    assert_ok(&traced);
    assert_eq!(stderr(&traced), "");
    // The first gpuleak_live_bytes call turns accounting on: 1 + 3 MiB live, then 3 MiB.
    assert_eq!(
        String::from_utf8_lossy(&traced.stdout),
        "api present\nlive before 0 during 4194304 all 4194304 after 3145728\nsnapshots 1 2\n"
    );
    let records = dump(&trace);
    let marks: Vec<(String, u64)> = of_type(&records, "Mark")
        .iter()
        .map(|r| (r["name"].as_str().unwrap().to_string(), r["value"].as_u64().unwrap()))
        .collect();
    assert_eq!(marks, [("step".into(), 1), ("step".into(), 2), ("step".into(), 3)]);
    let regions: Vec<(&str, u64)> = of_type(&records, "Region")
        .iter()
        .map(|r| (r["name"].as_str().unwrap(), r["begin"].as_u64().unwrap()))
        .collect();
    assert_eq!(regions, [("load", 1), ("load", 0)]);
    let snaps: Vec<(u64, &str)> = of_type(&records, "Snapshot")
        .iter()
        .map(|r| (r["id"].as_u64().unwrap(), r["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(snaps, [(1, "after load"), (2, "api")]);
    // The region encloses the two allocations.
    let kinds: Vec<&str> = records
        .iter()
        .map(|r| r["type"].as_str().unwrap())
        .filter(|t| ["Region", "Alloc"].contains(t))
        .collect();
    assert_eq!(kinds, ["Region", "Alloc", "Alloc", "Region"]);
}

#[test]
fn a_window_counts_what_was_allocated_in_it_and_its_watch_writes_snapshots_at_its_highest() {
    let plain = sim_command(client("ops_window")).output().unwrap();
    assert_ok(&plain);
    assert_eq!(
        String::from_utf8_lossy(&plain.stdout),
        "first: 0 allocations 0 bytes 0 live 0 peak 0 watch 0\n\
         second, opened: 0 allocations 0 bytes 0 live 0 peak 0 watch 0\n\
         second: 0 allocations 0 bytes 0 live 0 peak 0 watch 0\n\
         second, freed: 0 allocations 0 bytes 0 live 0 peak 0 watch 0\n"
    );
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let traced = shim_command(client("ops_window"), &trace).output().unwrap();
    assert_ok(&traced);
    assert_eq!(stderr(&traced), "");
    assert_eq!(
        String::from_utf8_lossy(&traced.stdout),
        "first: 5 allocations 2 bytes 3 live 1 peak 3 watch 0\n\
         second, opened: 5 allocations 0 bytes 0 live 0 peak 0 watch 0\n\
         second: 5 allocations 4 bytes 8 live 8 peak 8 watch 2\n\
         second, freed: 5 allocations 4 bytes 8 live 0 peak 8 watch 2\n"
    );
    // Each watch snapshot follows the record of the allocation that passed the watch.
    let records = dump(&trace);
    let snaps: Vec<(u64, &str)> = of_type(&records, "Snapshot")
        .iter()
        .map(|r| (r["id"].as_u64().unwrap(), r["reason"].as_str().unwrap()))
        .collect();
    assert_eq!(snaps, [(1, "window over its watch"), (2, "window over its watch")]);
    for (i, r) in records.iter().enumerate() {
        if r["type"] == "Snapshot" {
            assert_eq!(records[i - 1]["type"], "Alloc", "{:?}", records[i - 1]);
            assert_eq!(records[i - 1]["size"].as_u64(), Some(2 << 20), "{:?}", records[i - 1]);
        }
    }
}
