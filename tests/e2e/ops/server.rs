//! The background thread never harms the host (issue 39): slow and idle clients delay neither
//! a scrape nor the snapshots, descriptors the program took back are never used, and bad
//! snapshot settings say so in one line and leave the thread working.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use gpuleak_e2e::{client, shim_command, shim_command_via, TempDir};

use super::metrics::{free_port, http_get, Held};
use super::{run_workload, sequence, stderr};
use crate::trace::assert_ok;

/// `gpuleak_snapshots_total` on a metrics page.
fn snapshots_total(page: &str) -> u64 {
    page.lines()
        .find_map(|l| l.strip_prefix("gpuleak_snapshots_total "))
        .unwrap_or_else(|| panic!("no gpuleak_snapshots_total in\n{page}"))
        .parse()
        .unwrap()
}

/// A scrape and how long it took; panics if it fails (after at most 8 s).
fn timed_scrape(port: u16) -> (String, Duration) {
    let start = Instant::now();
    let (head, page) =
        http_get(port, "/metrics").unwrap_or_else(|e| panic!("scrape failed after {:?}: {e}", start.elapsed()));
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    (page, start.elapsed())
}

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(8))).unwrap();
    s
}

#[test]
fn a_slow_client_and_idle_connections_delay_neither_a_scrape_nor_the_snapshots() {
    // Before: one connection at a time with a 2 s read timeout, on the thread that also
    // ticks the snapshots. A byte a second held it for ever; each idle connection cost 2 s.
    let held = Held::start(&[("GPULEAK_SNAPSHOT_PERIOD", "200ms")]);
    let (page, _) = timed_scrape(held.port);
    let before = snapshots_total(&page);
    let stop = Arc::new(AtomicBool::new(false));
    let slow = {
        let stop = Arc::clone(&stop);
        let mut s = connect(held.port);
        std::thread::spawn(move || {
            for b in b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n" {
                if stop.load(Ordering::Relaxed) || s.write_all(&[*b]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_secs(1));
            }
        })
    };
    let mut idle: Vec<TcpStream> = (0..5).map(|_| connect(held.port)).collect();
    std::thread::sleep(Duration::from_millis(2500));
    let (page, took) = timed_scrape(held.port);
    assert!(
        took < Duration::from_secs(2),
        "a scrape beside a slow client took {took:?}"
    );
    let during = snapshots_total(&page) - before;
    assert!(
        during >= 4,
        "about 12 period snapshots in 2.5 s at 200 ms beside the slow client, not {during}"
    );
    // More idle connections than the shim keeps (16): the oldest make room, the scrape is
    // served.
    idle.extend((0..20).map(|_| connect(held.port)));
    let (_, took) = timed_scrape(held.port);
    assert!(
        took < Duration::from_secs(2),
        "a scrape beside 25 idle connections took {took:?}"
    );
    // An idle connection is closed at its deadline (5 s), not held for ever.
    let mut last = connect(held.port);
    let start = Instant::now();
    let mut buf = [0u8; 16];
    let end = loop {
        match last.read(&mut buf) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            end => break end,
        }
    };
    assert!(
        matches!(end, Ok(0))
            || end
                .as_ref()
                .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionReset),
        "{end:?} after {:?}",
        start.elapsed()
    );
    assert!(start.elapsed() < Duration::from_secs(8));
    stop.store(true, Ordering::Relaxed);
    slow.join().unwrap();
    drop(idle);
    assert_eq!(held.stderr(), "");
    let records = held.finish();
    let periods = sequence(&records).iter().filter(|s| *s == "Snapshot:period").count() as u64;
    assert!(periods >= before + during, "{periods} in the trace");
}

#[test]
fn the_shim_never_accepts_on_a_listening_descriptor_the_program_replaced() {
    let port = free_port();
    let dir = TempDir::new();
    let out = shim_command(client("ops_takeover"), &dir.path().join("t.trace"))
        .args([&port.to_string(), "listener"])
        .env("GPULEAK_METRICS", format!("127.0.0.1:{port}"))
        .output()
        .unwrap();
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains("found -1"), "{text}");
    // Every connection went to the program's accept, with its data; its socket stays open.
    assert!(
        text.contains("accepted 3\nhello 3\nlistener open yes\n"),
        "{text}\n{}",
        stderr(&out)
    );
    let err = stderr(&out);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("gpuleak: the metrics socket (descriptor ") && err.contains("metrics are off"),
        "{err}"
    );
}

#[test]
fn the_shim_never_reads_writes_or_closes_a_connection_descriptor_the_program_replaced() {
    let port = free_port();
    let dir = TempDir::new();
    let mut child = shim_command(client("ops_takeover"), &dir.path().join("t.trace"))
        .args([&port.to_string(), "connection"])
        .env("GPULEAK_METRICS", format!("127.0.0.1:{port}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        assert!(stdout.read_line(&mut line).unwrap() > 0, "client ended early");
    }
    // Part of a request: the shim holds the connection, waiting for the rest.
    let mut scraper = connect(port);
    scraper.write_all(b"GET /metrics HTTP/1.1\r\n").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    child.stdin.take().unwrap().write_all(b"go\n").unwrap();
    let mut text = String::new();
    stdout.read_to_string(&mut text).unwrap();
    let status = child.wait().unwrap();
    let mut err = String::new();
    child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(status.success(), "{status}: {text}\n{err}");
    assert!(!text.contains("found -1"), "{text}");
    // The program's descriptor stays open, its data unread, and nothing is written to it.
    assert!(
        text.contains("kept yes\nrequest unread yes\nreply none\n"),
        "{text}\n{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("gpuleak: the metrics connection (descriptor ") && err.contains("metrics are off"),
        "{err}"
    );
}

#[test]
fn a_snapshot_period_too_long_for_the_clock_is_cut_to_a_day_and_the_thread_keeps_working() {
    // Before: `Instant + 2^63 s` overflowed and the background thread died (no metrics, no
    // snapshots while the program is idle).
    let held = Held::start(&[
        ("GPULEAK_SNAPSHOT_PERIOD", "9223372036854775807"),
        ("GPULEAK_SNAPSHOT_SIGNAL", "USR2"),
    ]);
    let (page, _) = timed_scrape(held.port);
    assert_eq!(snapshots_total(&page), 0);
    let sent = Command::new("kill")
        .args(["-USR2", &held.pid().to_string()])
        .status()
        .unwrap();
    assert!(sent.success());
    // The program is idle: the background thread writes the signal's snapshot.
    let deadline = Instant::now() + Duration::from_secs(10);
    while snapshots_total(&timed_scrape(held.port).0) == 0 {
        assert!(Instant::now() < deadline, "no snapshot from the background thread");
        std::thread::sleep(Duration::from_millis(100));
    }
    let err = held.stderr();
    assert_eq!(
        err,
        "gpuleak: GPULEAK_SNAPSHOT_PERIOD=\"9223372036854775807\" is longer than 24h; using 24h\n"
    );
    let records = held.finish();
    assert_eq!(
        sequence(&records)
            .iter()
            .filter(|s| s.starts_with("Snapshot"))
            .collect::<Vec<_>>(),
        ["Snapshot:signal"]
    );
}

/// `ops_workload disposition SIG` with `env`, started through `via`: (stdout, stderr).
fn disposition(via: &[&str], sig: &str, env: &[(&str, &str)]) -> (String, String) {
    let dir = TempDir::new();
    let out = shim_command_via(via, client("ops_workload"), &dir.path().join("t.trace"))
        .args(["disposition", sig])
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert_ok(&out);
    (String::from_utf8_lossy(&out.stdout).into_owned(), stderr(&out))
}

#[test]
fn a_snapshot_signal_that_nohup_ignores_stays_ignored() {
    // A handler would end the ignoring in every program the process execs (exec resets
    // handled signals to their default, which for SIGHUP is to die).
    let env = [("GPULEAK_SNAPSHOT_SIGNAL", "HUP")];
    let (text, err) = disposition(&["nohup"], "1", &env);
    assert!(text.contains("disposition ignored"), "{text}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("gpuleak: GPULEAK_SNAPSHOT_SIGNAL: this process ignores signal 1"),
        "{err}"
    );
    // The twin: without nohup the shim takes the signal, silently.
    let (text, err) = disposition(&[], "1", &env);
    assert!(text.contains("disposition handled"), "{text}");
    assert_eq!(err, "");
}

#[test]
fn a_malformed_realtime_signal_is_refused_instead_of_taken_as_another_signal() {
    // RTMIN+-32 used to parse as SIGRTMIN - 32: SIGINT, whose default the shim then replaced.
    let (text, err) = disposition(&[], "2", &[("GPULEAK_SNAPSHOT_SIGNAL", "RTMIN+-32")]);
    assert!(text.contains("disposition default"), "{text}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("gpuleak: GPULEAK_SNAPSHOT_SIGNAL=\"RTMIN+-32\" is not a signal"),
        "{err}"
    );
    // A well-formed one still works.
    let (text, err) = disposition(&[], "RTMIN+2", &[("GPULEAK_SNAPSHOT_SIGNAL", "RTMIN+2")]);
    assert!(text.contains("disposition handled"), "{text}");
    assert_eq!(err, "");
    let (out, _) = run_workload(&["calls", "1"], &[("GPULEAK_SNAPSHOT_SIGNAL", "RTMAX-1")]);
    assert_ok(&out);
    assert_eq!(stderr(&out), "");
}
