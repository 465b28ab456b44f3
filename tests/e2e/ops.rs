//! Operations (issue 7): the shim's metrics endpoint scraped by a real Prometheus, snapshots on
//! demand, OOM dumps, budgets and fault injection, on C clients on the simulated driver.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use gpuleak_e2e::{client, shim_command, sim_command, TempDir};
use serde_json::Value;

use crate::trace::{assert_ok, calls, dump, of_type, recorded_calls};

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

// ---------------------------------------------------------------------------------------
// Metrics.

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A plain HTTP/1.0 GET on loopback; (status line, body).
fn http_get(port: u16, path: &str) -> std::io::Result<(String, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    Ok((head.to_string(), body.to_string()))
}

fn url_encode(q: &str) -> String {
    q.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'_' | b'-' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A traced `ops_workload hold` serving metrics; ends when dropped.
struct Held {
    child: Child,
    _dir: TempDir,
    port: u16,
}

impl Held {
    fn start(env: &[(&str, &str)]) -> Held {
        Held::start_with(&[], env)
    }

    fn start_with(args: &[&str], env: &[(&str, &str)]) -> Held {
        let port = free_port();
        Held::start_on(&format!("127.0.0.1:{port}"), port, args, env)
    }

    /// Serving on `addr` (a `GPULEAK_METRICS` value), expected at `port`.
    fn start_on(addr: &str, port: u16, args: &[&str], env: &[(&str, &str)]) -> Held {
        let dir = TempDir::new();
        let mut child = shim_command(client("ops_workload"), &dir.path().join("t.trace"))
            .arg("hold")
            .args(args)
            .env("GPULEAK_METRICS", addr)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.contains("ready") {
            line.clear();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "hold ended early");
        }
        Held { child, _dir: dir, port }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn threads(&self) -> usize {
        std::fs::read_dir(format!("/proc/{}/task", self.child.id()))
            .unwrap()
            .count()
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.wait();
    }
}

/// The metric names a page declares (`# TYPE` lines).
fn declared_names(page: &str) -> Vec<String> {
    page.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_whitespace().next())
        .map(String::from)
        .collect()
}

/// The `gpuleak_*` names an expression or file mentions.
fn mentioned_names(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(i) = rest.find("gpuleak_") {
        let tail = &rest[i..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        out.push(tail[..end].to_string());
        rest = &tail[end..];
    }
    out
}

#[test]
fn the_metrics_endpoint_serves_the_live_state_in_prometheus_text_format() {
    let held = Held::start(&[("GPULEAK_LIMIT", "1GiB")]);
    let (head, page) = http_get(held.port, "/metrics").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(head.contains("Content-Type: text/plain; version=0.0.4"), "{head}");
    let value = |series: &str| -> f64 {
        page.lines()
            .find_map(|l| l.strip_prefix(series).and_then(|v| v.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("no {series} in\n{page}"))
            .parse()
            .unwrap()
    };
    // Site A: 1 + 1 + 2 MiB live (one 1 MiB freed), site B: 4 MiB.
    assert_eq!(value("gpuleak_live_bytes{device=\"0\",kind=\"device\"}"), 8388608.0);
    assert_eq!(value("gpuleak_live_allocations{device=\"0\",kind=\"device\"}"), 4.0);
    assert_eq!(value("gpuleak_allocations_total{device=\"0\",kind=\"device\"}"), 5.0);
    assert_eq!(value("gpuleak_frees_total{device=\"0\",kind=\"device\"}"), 1.0);
    assert_eq!(value("gpuleak_device_live_bytes{device=\"0\"}"), 8388608.0);
    assert_eq!(value("gpuleak_device_memory_bytes{device=\"0\"}"), 1073741824.0);
    assert_eq!(value("gpuleak_budget_bytes"), 1073741824.0);
    assert_eq!(value("gpuleak_live_streams"), 2.0);
    assert_eq!(value("gpuleak_live_events"), 1.0);
    assert_eq!(value("gpuleak_live_pools"), 1.0);
    assert_eq!(
        value("gpuleak_failed_allocations_total{kind=\"device\",reason=\"driver\"}"),
        0.0
    );
    // The freed 1 MiB is a hole in a 9 MiB span.
    let frag = value("gpuleak_fragmentation_ratio{device=\"0\"}");
    assert!((frag - 1.0 / 9.0).abs() < 1e-3, "{frag}");
    // Sites: the largest first, each with a stack id; the rest as "other".
    let sites: Vec<&str> = page
        .lines()
        .filter(|l| l.starts_with("gpuleak_site_live_bytes{"))
        .collect();
    assert!(
        sites[0].ends_with(" 4194304") && sites[0].contains("stack=\""),
        "{sites:?}"
    );
    assert!(sites
        .last()
        .unwrap()
        .starts_with("gpuleak_site_live_bytes{site=\"other\",stack=\"other\"} 0"));
    let site_total: f64 = sites
        .iter()
        .map(|l| l.rsplit(' ').next().unwrap().parse::<f64>().unwrap())
        .sum();
    assert_eq!(site_total, 8388608.0);
    // One background thread, and other paths are not found.
    assert_eq!(held.threads(), 2);
    assert!(http_get(held.port, "/").unwrap().0.starts_with("HTTP/1.1 404"));
    assert_eq!(value("gpuleak_snapshots_total"), 0.0);
}

#[test]
fn with_port_plus_each_process_serves_on_the_first_free_port() {
    let base = free_port();
    let setting = format!("127.0.0.1:{base}+");
    let first = Held::start_on(&setting, base, &[], &[]);
    let second = Held::start_on(&setting, base, &[], &[]);
    // Each process answers on its own port, named by its pid; the first took the base port.
    // (Other programs may hold ports of the range: only our two pids count.)
    let pids = [first.pid(), second.pid()];
    let mut served = Vec::new();
    for port in base..base.saturating_add(32) {
        let Ok((_, page)) = http_get(port, "/metrics") else {
            continue;
        };
        let pid = page
            .lines()
            .find_map(|l| l.strip_prefix("gpuleak_info{pid=\""))
            .and_then(|l| l.split('"').next())
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid.filter(|p| pids.contains(p)) {
            served.push((port, pid));
        }
    }
    assert_eq!(served.len(), 2, "{served:?}");
    assert_eq!(served[0], (base, first.pid()));
    assert_eq!(served[1].1, second.pid());
    // Without the +, the second process says so in one line and serves nothing.
    let dir = TempDir::new();
    let out = shim_command(client("ops_workload"), &dir.path().join("t.trace"))
        .args(["calls", "1"])
        .env("GPULEAK_METRICS", format!("127.0.0.1:{base}"))
        .output()
        .unwrap();
    assert_ok(&out);
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("gpuleak: cannot serve metrics on 127.0.0.1:{base}: ")),
        "{err}"
    );
}

#[test]
fn the_metrics_count_failed_allocations_by_reason() {
    // 8 MiB live leaves no room for 1 MiB more under an 8 MiB budget; the pinned host
    // allocation is failed by a rule. Both are refused without reaching the driver.
    let held = Held::start_with(
        &["extra"],
        &[
            ("GPULEAK_LIMIT", "8MiB"),
            ("GPULEAK_FAIL", "cuMemAllocHost_v2:1"),
            ("GPULEAK_OOM_SNAPSHOT", "1"),
        ],
    );
    let (_, page) = http_get(held.port, "/metrics").unwrap();
    for series in [
        "gpuleak_failed_allocations_total{kind=\"device\",reason=\"budget\"} 1",
        "gpuleak_failed_allocations_total{kind=\"device\",reason=\"driver\"} 0",
        "gpuleak_failed_allocations_total{kind=\"host\",reason=\"injected\"} 1",
        "gpuleak_live_bytes{device=\"0\",kind=\"device\"} 8388608",
        "gpuleak_budget_bytes 8388608",
        "gpuleak_snapshots_total 2",
    ] {
        assert!(page.lines().any(|l| l == series), "no {series} in\n{page}");
    }
    assert!(
        page.lines()
            .any(|l| l == "gpuleak_failed_allocations_total{kind=\"host\",reason=\"budget\"} 0"),
        "host memory is not budgeted: {page}"
    );
}

#[test]
fn without_operations_settings_there_is_no_thread_and_no_socket() {
    let dir = TempDir::new();
    let mut child = shim_command(client("ops_workload"), &dir.path().join("t.trace"))
        .arg("hold")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0);
    }
    let threads = std::fs::read_dir(format!("/proc/{}/task", child.id())).unwrap().count();
    let sockets = std::fs::read_dir(format!("/proc/{}/fd", child.id()))
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.unwrap().path()).ok())
        .filter(|p| p.to_string_lossy().starts_with("socket:"))
        .count();
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    assert_eq!((threads, sockets), (1, 0));
}

/// Prometheus, started on loopback with a temporary storage directory; killed when dropped.
struct Prometheus {
    child: Child,
    port: u16,
    _dir: TempDir,
}

impl Prometheus {
    fn start(target_port: u16) -> Prometheus {
        let bin = Path::new("/usr/bin/prometheus");
        assert!(
            bin.is_file(),
            "{} is missing: run scripts/system-deps (installs Debian's prometheus)",
            bin.display()
        );
        let dir = TempDir::new();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n  evaluation_interval: 1s\n\
                 scrape_configs:\n  - job_name: gpuleak\n    static_configs:\n      - targets: ['127.0.0.1:{target_port}']\n"
            ),
        )
        .unwrap();
        let port = free_port();
        let data: PathBuf = dir.path().join("data");
        let child = Command::new(bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", data.display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .arg("--log.level=error")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        Prometheus { child, port, _dir: dir }
    }

    /// Runs an instant query until it returns at least one series, or gives up.
    fn query(&self, q: &str, deadline: Instant) -> Vec<Value> {
        loop {
            if let Ok((head, body)) = http_get(self.port, &format!("/api/v1/query?query={}", url_encode(q))) {
                if head.contains(" 200 ") {
                    let v: Value = serde_json::from_str(&body).unwrap();
                    let result = v["data"]["result"].as_array().cloned().unwrap_or_default();
                    if !result.is_empty() {
                        return result;
                    }
                }
            }
            assert!(Instant::now() < deadline, "prometheus never returned {q}");
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sample(result: &[Value]) -> f64 {
    result[0]["value"][1].as_str().unwrap().parse().unwrap()
}

#[test]
fn a_real_prometheus_scrapes_the_live_state_of_a_running_traced_program() {
    let held = Held::start(&[]);
    let prom = Prometheus::start(held.port);
    let deadline = Instant::now() + Duration::from_secs(60);
    let up = prom.query("up{job=\"gpuleak\"} == 1", deadline);
    assert_eq!(sample(&up), 1.0);
    let live = prom.query("gpuleak_live_bytes{kind=\"device\"}", deadline);
    assert_eq!(live.len(), 1);
    assert_eq!(live[0]["metric"]["device"], "0");
    assert_eq!(live[0]["metric"]["instance"], format!("127.0.0.1:{}", held.port));
    assert_eq!(sample(&live), 8388608.0);
    assert_eq!(sample(&prom.query("gpuleak_live_streams", deadline)), 2.0);
    assert_eq!(sample(&prom.query("gpuleak_live_events", deadline)), 1.0);
    assert_eq!(sample(&prom.query("gpuleak_frees_total", deadline)), 1.0);
    assert_eq!(
        sample(&prom.query("gpuleak_device_live_bytes / gpuleak_device_memory_bytes", deadline)),
        8388608.0 / 1073741824.0
    );
    let top = prom.query("topk(1, gpuleak_site_live_bytes)", deadline);
    assert_eq!(sample(&top), 4194304.0);
    assert_ne!(top[0]["metric"]["site"], "other");
    // Every metric name the dashboard and the alert rules use is one the shim exports.
    let (_, page) = http_get(held.port, "/metrics").unwrap();
    let exported = declared_names(&page);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("ops");
    for file in ["grafana/gpuleak-dashboard.json", "prometheus/gpuleak-alerts.yml"] {
        let text = std::fs::read_to_string(root.join(file)).unwrap();
        let names = mentioned_names(&text);
        assert!(!names.is_empty(), "{file} uses no gpuleak metric");
        for n in names {
            assert!(
                exported.contains(&n),
                "{file} uses {n}, which the shim does not export ({exported:?})"
            );
        }
    }
}

#[test]
fn the_alert_rules_pass_promtool_and_the_dashboard_is_valid_json() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().join("ops");
    let rules = root.join("prometheus/gpuleak-alerts.yml");
    let out = Command::new("/usr/bin/promtool")
        .arg("check")
        .arg("rules")
        .arg(&rules)
        .output()
        .expect("promtool (from Debian's prometheus package; run scripts/system-deps)");
    assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("SUCCESS: 4 rules found"));
    let text = std::fs::read_to_string(&rules).unwrap();
    assert!(
        text.contains("> 0.85") && text.contains("for: 3m"),
        "the 85% for 3 minutes rule"
    );
    let dashboard: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("grafana/gpuleak-dashboard.json")).unwrap()).unwrap();
    let panels = dashboard["panels"].as_array().unwrap();
    assert!(panels.len() >= 8);
    for p in panels {
        for t in p["targets"].as_array().unwrap() {
            assert!(t["expr"].as_str().unwrap().contains("gpuleak_"), "{p}");
        }
    }
}
