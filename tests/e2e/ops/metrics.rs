//! The metrics endpoint: the live state in Prometheus text format, one port per process with
//! `+`, failed allocations by reason, no thread or socket without settings, a real Prometheus
//! scraping a traced program, and the alert rules and dashboard.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use gpuleak_e2e::{client, shim_command, TempDir};
use serde_json::Value;

use super::stderr;
use crate::trace::assert_ok;

pub(crate) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A plain HTTP/1.0 GET on loopback; (status line, body).
pub(crate) fn http_get(port: u16, path: &str) -> std::io::Result<(String, String)> {
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

/// A traced `ops_workload hold` serving metrics, its stderr kept in a file; ends when dropped.
pub(super) struct Held {
    child: Child,
    dir: TempDir,
    pub(super) port: u16,
}

impl Held {
    pub(super) fn start(env: &[(&str, &str)]) -> Held {
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
            .stderr(std::fs::File::create(dir.path().join("stderr")).unwrap())
            .spawn()
            .unwrap();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        while !line.contains("ready") {
            line.clear();
            assert!(stdout.read_line(&mut line).unwrap() > 0, "hold ended early");
        }
        Held { child, dir, port }
    }

    pub(super) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What the program and the shim wrote on stderr so far.
    pub(super) fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("stderr")).unwrap()
    }

    /// Lets the program end; its trace's records.
    pub(super) fn finish(mut self) -> Vec<Value> {
        drop(self.child.stdin.take());
        assert!(self.child.wait().unwrap().success());
        crate::trace::dump(&self.dir.path().join("t.trace"))
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
    // The label names the program's own frame (the user's native code), not the driver's or
    // the shim's: `ops_workload` has no Python frames and no exported symbols there.
    let label = sites[0].split("site=\"").nth(1).unwrap().split('"').next().unwrap();
    assert!(label.starts_with("ops_workload+0x"), "{label}");
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
    assert!(String::from_utf8_lossy(&out.stdout).contains("SUCCESS: 6 rules found"));
    // Each alert fires on its case and stays silent on its twins (a warm-up that levels off,
    // allocate/free cycles, a slow rise that stops, fragmentation that comes and goes).
    let out = Command::new("/usr/bin/promtool")
        .args(["test", "rules", "gpuleak-alerts.test.yml"])
        .current_dir(root.join("prometheus"))
        .output()
        .expect("promtool");
    assert_ok(&out);
    let text = std::fs::read_to_string(&rules).unwrap();
    let tests = std::fs::read_to_string(root.join("prometheus/gpuleak-alerts.test.yml")).unwrap();
    for alert in text.lines().filter_map(|l| l.trim().strip_prefix("- alert: ")) {
        assert!(
            tests.contains(&format!("alertname: {alert}\n")),
            "gpuleak-alerts.test.yml has no case that {alert} fires on"
        );
        assert!(
            tests.contains(&format!("alertname: {alert}, exp_alerts: []")),
            "gpuleak-alerts.test.yml has no case that {alert} stays silent on"
        );
    }
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

#[test]
fn a_rank_from_the_launcher_labels_every_sample_and_none_without_one() {
    let held = Held::start(&[
        ("RANK", "5"),
        ("LOCAL_RANK", "1"),
        ("WORLD_SIZE", "8"),
        ("TORCHELASTIC_RUN_ID", "job"),
    ]);
    let (_, page) = http_get(held.port, "/metrics").unwrap();
    let samples: Vec<&str> = page.lines().filter(|l| !l.starts_with('#')).collect();
    assert!(samples.len() > 10, "{page}");
    for line in &samples {
        assert!(
            line.contains("{rank=\"5\""),
            "a sample without the rank: {line}\n{page}"
        );
    }
    assert!(
        page.contains("gpuleak_live_bytes{rank=\"5\",device=\"0\",kind=\"device\"} 8388608\n"),
        "{page}"
    );
    assert!(
        page.contains(",launcher=\"torchrun\",local_rank=\"1\",world_size=\"8\",hostname=\""),
        "{page}"
    );
    drop(held);

    // Twin: the same program without a launcher has no rank label anywhere.
    let held = Held::start(&[]);
    let (_, page) = http_get(held.port, "/metrics").unwrap();
    assert!(!page.contains("rank="), "{page}");
    assert!(
        page.contains("gpuleak_live_bytes{device=\"0\",kind=\"device\"} 8388608\n"),
        "{page}"
    );
}
