//! The background thread (`gpuleak-ops`): serves Prometheus metrics (text exposition format
//! 0.0.4) on `GPULEAK_METRICS`, writes period snapshots and the signal's snapshots while the
//! program makes no CUDA calls.
//!
//! Started at the first intercepted call that finds a feature needing it, never in a
//! constructor. One connection at a time with short timeouts; it blocks every signal, so the
//! program's handlers keep running on the program's threads. In a forked child the thread
//! does not exist: the inherited socket is closed and the thread started again at the
//! child's next intercepted call (serving metrics only if the address is free: the parent
//! usually still holds it, and the child then says so in one line and serves none, unless
//! the setting asked for the first free port, `PORT+`).

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use gpuleak_format::MemKind;

use super::live::{self, SLOTS, UNKNOWN};
use super::{settings, snapshot, FLAGS, SNAPSHOT_DUE};
use crate::guard;

static STARTED: AtomicBool = AtomicBool::new(false);
static LISTENER_FD: AtomicI32 = AtomicI32::new(-1);

/// Starts the background thread (once per process).
pub fn start_background() {
    if STARTED.swap(true, Ordering::AcqRel) {
        return;
    }
    let s = settings();
    let listener = s.metrics.and_then(|addr| match bind(addr, s.metrics_ports) {
        Ok(l) => {
            if l.set_nonblocking(true).is_err() {
                crate::diag::line(format_args!("cannot serve metrics on {addr}: socket setup failed"));
                return None;
            }
            LISTENER_FD.store(l.as_raw_fd(), Ordering::Release);
            Some(l)
        }
        Err(e) => {
            let tried = if s.metrics_ports > 1 {
                format!(
                    " (ports {} to {})",
                    addr.port(),
                    addr.port().saturating_add(s.metrics_ports - 1)
                )
            } else {
                String::new()
            };
            crate::diag::line(format_args!(
                "cannot serve metrics on {addr}{tried}: {e}; metrics are off"
            ));
            None
        }
    });
    let period = s.snapshot_period;
    let spawned = std::thread::Builder::new()
        .name("gpuleak-ops".into())
        .spawn(move || run(listener, period));
    if let Err(e) = spawned {
        crate::diag::line(format_args!(
            "cannot start the metrics and snapshot thread: {e}; it is off"
        ));
    }
}

/// Binds `addr`, or with `ports > 1` the first free port from `addr`'s on.
fn bind(addr: std::net::SocketAddr, ports: u16) -> std::io::Result<TcpListener> {
    let mut last = None;
    for i in 0..ports {
        let Some(port) = addr.port().checked_add(i) else { break };
        match TcpListener::bind(std::net::SocketAddr::new(addr.ip(), port)) {
            Ok(l) => return Ok(l),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::from(std::io::ErrorKind::AddrInUse)))
}

/// In a forked child: closes the parent's socket; true if a thread must be started again.
pub fn forget_in_child() -> bool {
    let fd = LISTENER_FD.swap(-1, Ordering::AcqRel);
    if fd >= 0 {
        // SAFETY: our own listening socket's descriptor, inherited; nothing in the child
        // uses it (the thread that owned it does not exist here).
        unsafe { libc::close(fd) };
    }
    STARTED.swap(false, Ordering::AcqRel)
}

fn block_signals() {
    // SAFETY: fills a local signal set and applies it to this thread only.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut set);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
    }
}

fn run(listener: Option<TcpListener>, period: Option<Duration>) {
    block_signals();
    const TICK: Duration = Duration::from_millis(100);
    let mut next = period.map(|p| Instant::now() + p);
    loop {
        let wait = next.map_or(TICK, |n| n.saturating_duration_since(Instant::now()).min(TICK));
        match &listener {
            Some(l) => {
                let mut pfd = libc::pollfd {
                    fd: l.as_raw_fd(),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd.
                let ready = unsafe { libc::poll(&mut pfd, 1, wait.as_millis() as libc::c_int) };
                if ready > 0 {
                    if let Ok((stream, _)) = l.accept() {
                        serve(stream);
                    }
                }
            }
            None => std::thread::sleep(wait),
        }
        if let (Some(p), Some(n)) = (period, next) {
            let now = Instant::now();
            if now >= n {
                snapshot::period_due();
                // A late tick (a stopped process) is one snapshot, not a burst.
                next = Some(if now - n > p { now + p } else { n + p });
            }
        }
        if FLAGS.load(Ordering::Acquire) & SNAPSHOT_DUE != 0 {
            if let Some(g) = guard::enter() {
                snapshot::write_due(&g);
            }
        }
    }
}

fn serve(mut stream: TcpStream) {
    let timeout = Some(Duration::from_secs(2));
    if stream.set_nonblocking(false).is_err()
        || stream.set_read_timeout(timeout).is_err()
        || stream.set_write_timeout(timeout).is_err()
    {
        return;
    }
    let mut req = Vec::with_capacity(1024);
    let mut buf = [0u8; 1024];
    while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 16 * 1024 {
        match stream.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => req.extend_from_slice(&buf[..n]),
        }
    }
    let line = req.split(|&c| c == b'\r' || c == b'\n').next().unwrap_or_default();
    let mut parts = line.split(|&c| c == b' ');
    let (method, path) = (parts.next().unwrap_or_default(), parts.next().unwrap_or_default());
    let path = path.split(|&c| c == b'?').next().unwrap_or_default();
    let (status, body) = match (method, path) {
        (b"GET" | b"HEAD", b"/metrics") => ("200 OK", render()),
        (b"GET" | b"HEAD", _) => ("404 Not Found", "metrics are at /metrics\n".to_string()),
        _ => ("405 Method Not Allowed", String::new()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = stream.write_all(head.as_bytes());
    if method != b"HEAD" {
        let _ = stream.write_all(body.as_bytes());
    }
}

fn device_label(slot: usize) -> String {
    if slot == UNKNOWN {
        "unknown".into()
    } else {
        slot.to_string()
    }
}

/// Escapes a label value (backslash, quote, newline).
fn escape(v: &str) -> String {
    v.replace('\\', "\\\\").replace('"', "\\\"").replace('\n', "\\n")
}

fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} {kind}");
}

static TOTAL_MEM: [AtomicU64; SLOTS] = [const { AtomicU64::new(0) }; SLOTS];
static GET_TOTAL_MEM: AtomicUsize = AtomicUsize::new(0);

/// A device's memory size from the driver's `cuDeviceTotalMem_v2` (needs no context),
/// asked once per device.
fn total_memory(slot: usize) -> Option<u64> {
    if slot == UNKNOWN {
        return None;
    }
    let known = TOTAL_MEM[slot].load(Ordering::Relaxed);
    if known != 0 {
        return Some(known);
    }
    let mut f = GET_TOTAL_MEM.load(Ordering::Relaxed);
    if f == 0 {
        let handle = crate::dl::libcuda();
        let p = if handle.is_null() {
            crate::dl::real_dlsym(-1isize as *mut _, c"cuDeviceTotalMem_v2")
        } else {
            crate::dl::real_dlsym(handle, c"cuDeviceTotalMem_v2")
        };
        f = if p.is_null() { 1 } else { p as usize };
        GET_TOTAL_MEM.store(f, Ordering::Relaxed);
    }
    if f == 1 {
        return None;
    }
    type TotalMem = unsafe extern "C" fn(*mut usize, i32) -> u32;
    // SAFETY: the driver's cuDeviceTotalMem_v2, found by name.
    let get: TotalMem = unsafe { std::mem::transmute::<usize, TotalMem>(f) };
    let mut bytes = 0usize;
    // SAFETY: writes one size_t into `bytes`.
    if unsafe { get(&mut bytes, slot as i32) } != 0 || bytes == 0 {
        return None;
    }
    TOTAL_MEM[slot].store(bytes as u64, Ordering::Relaxed);
    Some(bytes as u64)
}

/// Holes between live allocations within the address span they occupy, per device slot:
/// 1 - live bytes / (end of the highest - start of the lowest). Device, managed and
/// stream-ordered memory only (their addresses share one space per device).
fn fragmentation() -> [Option<f64>; SLOTS] {
    let mut ranges: Vec<Vec<(u64, u64)>> = vec![Vec::new(); SLOTS];
    live::table().for_each(|ptr, e| {
        if matches!(e.kind, MemKind::Device | MemKind::Managed | MemKind::Async) && e.size > 0 {
            ranges[usize::from(e.slot)].push((ptr, e.size));
        }
    });
    let mut out = [None; SLOTS];
    for (slot, r) in ranges.iter().enumerate() {
        if r.is_empty() {
            continue;
        }
        let lo = r.iter().map(|&(p, _)| p).min().unwrap_or(0);
        let hi = r.iter().map(|&(p, s)| p.saturating_add(s)).max().unwrap_or(0);
        let live: u64 = r.iter().map(|&(_, s)| s).sum();
        let span = hi.saturating_sub(lo);
        out[slot] = Some(if span == 0 {
            0.0
        } else {
            (1.0 - live as f64 / span as f64).max(0.0)
        });
    }
    out
}

/// How many sites get their own `gpuleak_site_live_bytes` series; the rest are `other`.
pub const TOP_SITES: usize = 10;

/// The metrics page.
pub fn render() -> String {
    let mut out = String::with_capacity(4096);
    let r = |c: &AtomicU64| c.load(Ordering::Relaxed);
    let used: Vec<(usize, MemKind)> = (0..SLOTS)
        .flat_map(|s| MemKind::ALL.iter().map(move |&k| (s, k)))
        .filter(|&(s, k)| r(&live::ALLOCS[s][k as usize]) > 0 || r(&live::LIVE_COUNT[s][k as usize]) > 0)
        .collect();
    let grids: [(&str, &str, &str, &live::Grid); 4] = [
        (
            "gpuleak_live_bytes",
            "gauge",
            "Memory live now (bytes the program asked for), by device and kind.",
            &live::LIVE_BYTES,
        ),
        (
            "gpuleak_live_allocations",
            "gauge",
            "Allocations live now, by device and kind.",
            &live::LIVE_COUNT,
        ),
        (
            "gpuleak_allocations_total",
            "counter",
            "Successful allocations, by device and kind.",
            &live::ALLOCS,
        ),
        (
            "gpuleak_frees_total",
            "counter",
            "Successful frees of allocations made while accounting was on, by device and kind.",
            &live::FREES,
        ),
    ];
    for (name, kind, help, grid) in grids {
        header(&mut out, name, kind, help);
        for &(s, k) in &used {
            let _ = writeln!(
                out,
                "{name}{{device=\"{}\",kind=\"{}\"}} {}",
                device_label(s),
                k.name(),
                r(&grid[s][k as usize])
            );
        }
    }
    header(
        &mut out,
        "gpuleak_failed_allocations_total",
        "counter",
        "Failed allocation calls, by kind and reason (driver, budget: GPULEAK_LIMIT, injected: GPULEAK_FAIL).",
    );
    for k in MemKind::ALL {
        let row = &live::FAILED[k as usize];
        let any_alloc = (0..SLOTS).any(|s| r(&live::ALLOCS[s][k as usize]) > 0);
        if !any_alloc && row.iter().all(|c| r(c) == 0) {
            continue;
        }
        for (i, reason) in ["driver", "budget", "injected"].iter().enumerate() {
            let _ = writeln!(
                out,
                "gpuleak_failed_allocations_total{{kind=\"{}\",reason=\"{reason}\"}} {}",
                k.name(),
                r(&row[i])
            );
        }
    }
    header(
        &mut out,
        "gpuleak_device_live_bytes",
        "gauge",
        "Device memory live now (device, managed, stream-ordered, VMM physical, arrays), by device.",
    );
    let devices: Vec<usize> = (0..SLOTS).filter(|&s| used.iter().any(|&(us, _)| us == s)).collect();
    for &s in &devices {
        let bytes = if s == UNKNOWN {
            MemKind::ALL
                .iter()
                .filter(|k| live::counts_toward_budget(**k))
                .map(|&k| r(&live::LIVE_BYTES[UNKNOWN][k as usize]))
                .sum()
        } else {
            live::device_bytes(s as i32)
        };
        let _ = writeln!(
            out,
            "gpuleak_device_live_bytes{{device=\"{}\"}} {bytes}",
            device_label(s)
        );
    }
    header(
        &mut out,
        "gpuleak_device_memory_bytes",
        "gauge",
        "Total memory of the device, as the driver reports it.",
    );
    for &s in &devices {
        if let Some(total) = total_memory(s) {
            let _ = writeln!(out, "gpuleak_device_memory_bytes{{device=\"{s}\"}} {total}");
        }
    }
    header(
        &mut out,
        "gpuleak_budget_bytes",
        "gauge",
        "The per-device budget set by GPULEAK_LIMIT (no sample without one).",
    );
    if let Some(limit) = settings().limit {
        let _ = writeln!(out, "gpuleak_budget_bytes {limit}");
    }
    header(
        &mut out,
        "gpuleak_fragmentation_ratio",
        "gauge",
        "Share of the address span of live device memory that lies in holes between allocations, by device.",
    );
    for (s, f) in fragmentation().iter().enumerate() {
        if let Some(f) = f {
            let _ = writeln!(
                out,
                "gpuleak_fragmentation_ratio{{device=\"{}\"}} {f:.6}",
                device_label(s)
            );
        }
    }
    for (name, help, count) in [
        (
            "gpuleak_live_streams",
            "Streams created and not destroyed.",
            &live::STREAMS,
        ),
        (
            "gpuleak_live_events",
            "Events created and not destroyed.",
            &live::EVENTS,
        ),
        (
            "gpuleak_live_pools",
            "Memory pools created or imported and not destroyed.",
            &live::POOLS,
        ),
    ] {
        header(&mut out, name, "gauge", help);
        let _ = writeln!(out, "{name} {}", count.load(Ordering::Relaxed).max(0));
    }
    header(
        &mut out,
        "gpuleak_site_live_bytes",
        "gauge",
        "Device memory live now by allocation site: the top sites by their stack id, the rest as site=\"other\".",
    );
    let sites = live::sites(None);
    for (stack, t) in sites.iter().take(TOP_SITES) {
        let _ = writeln!(
            out,
            "gpuleak_site_live_bytes{{site=\"{}\",stack=\"{}\"}} {}",
            escape(&super::sites::label(*stack)),
            stack.0,
            t.bytes
        );
    }
    let rest: u64 = sites.iter().skip(TOP_SITES).map(|(_, t)| t.bytes).sum();
    let _ = writeln!(out, "gpuleak_site_live_bytes{{site=\"other\",stack=\"other\"}} {rest}");
    header(
        &mut out,
        "gpuleak_info",
        "gauge",
        "Always 1: the traced process's id and the shim's version.",
    );
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::getpid() };
    let _ = writeln!(
        out,
        "gpuleak_info{{pid=\"{pid}\",version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    header(
        &mut out,
        "gpuleak_snapshots_total",
        "counter",
        "Snapshot records written to the trace.",
    );
    let _ = writeln!(out, "gpuleak_snapshots_total {}", snapshot::count());
    out
}
