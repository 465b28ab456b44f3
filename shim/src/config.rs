//! The `GPULEAK_*` settings, parsed once into an immutable [`Config`] when tracing starts.
//! A bad value produces one line on stderr and the default; it never stops the program.
//!
//! Every setting, with its default and meaning, is in the one table of `docs/settings.md`; the
//! end-to-end test `docs::settings_table_matches_the_code` fails when a name this module reads
//! is missing there, or when the table names one nothing reads.
//!
//! In secure-execution mode (a setuid or setgid program, file capabilities: `AT_SECURE`) no
//! setting is read and nothing is recorded ([`passthrough_only`]).
//!
//! The operations settings (metrics, snapshots, budgets, faults and live accounting) are read
//! into [`Ops`] by `ops` at the first intercepted memory, stream or event call; every one is off
//! by default.

use std::ffi::{OsStr, OsString};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::FileTypeExt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use gpuleak_format::{size, Api};
use gpuleak_unwind::Method;

/// Parsed settings.
#[derive(Debug, Clone)]
pub struct Config {
    /// Trace path, `%p` already replaced; `None` means the default name.
    pub output: Option<OsString>,
    /// Frames per stack.
    pub stack_depth: usize,
    /// Unwinder requested.
    pub unwind: Method,
    /// Capture stacks for successful frees too.
    pub free_stacks: bool,
    /// Stacks on the hot stream-ordering calls: 0 never, 1 always, N one call in N per
    /// thread. Off by default: those calls must cost at most tens of nanoseconds, and the
    /// analyzer explains their findings with the stacks of the allocations, streams and
    /// events involved.
    pub sync_stacks: u32,
    /// One successful stream-ordered allocation or free in this many, per thread, samples its
    /// pool's reserved and used bytes (`PoolUsage` records); 0 never.
    pub pool_sample: u32,
    /// Clock of the record times (`CLOCK_MONOTONIC_COARSE` or `CLOCK_MONOTONIC`).
    pub clock: libc::clockid_t,
    /// Creation stacks for streams and events (off by default: stream and event calls capture
    /// no stack unless asked, like the other hot stream-ordering calls).
    pub object_stacks: bool,
    /// Python frames in stacks (`GPULEAK_PYTHON`, on by default; only Python processes are
    /// affected).
    pub python: bool,
    /// Record nothing.
    pub disabled: bool,
    /// The bytes the trace keeps on disk (`GPULEAK_MAX_TRACE`); `None`: unbounded.
    pub max_trace: Option<crate::writer::Bound>,
}

/// `GPULEAK_POOL_SAMPLE` when unset.
pub const POOL_SAMPLE_DEFAULT: u32 = 64;

/// The most frames a stack may have.
pub const MAX_DEPTH: usize = 256;

fn warn(var: &str, value: &str, expected: &str, default: &str) {
    crate::diag::line(format_args!("{var}={value:?} is not {expected}; using {default}"));
}

fn var(name: &str) -> Option<String> {
    std::env::var_os(name).map(|v| v.to_string_lossy().into_owned())
}

fn flag(name: &str, default: bool) -> bool {
    match var(name).as_deref() {
        None | Some("") => default,
        Some("0") | Some("false") | Some("no") | Some("off") => false,
        Some("1") | Some("true") | Some("yes") | Some("on") => true,
        Some(other) => {
            warn(name, other, "0 or 1", if default { "1" } else { "0" });
            default
        }
    }
}

/// Whether an `AT_SECURE` value from the auxiliary vector puts the shim in pass-through mode.
/// The kernel sets it for a setuid or setgid program, one with file capabilities, or after a
/// security module's transition: the user who started the program (and wrote its environment)
/// is not the one whose rights it runs with, so a trace path, a port or a signal from that
/// environment could make the shim act with rights its author never had.
pub fn secure_from_auxv(at_secure: libc::c_ulong) -> bool {
    at_secure != 0
}

/// True in secure-execution mode, where the shim only passes calls through: no setting is
/// read, no file, socket, thread or signal handler is created. Says so once per process, on
/// stderr, the first time it is asked.
pub fn passthrough_only() -> bool {
    static SAID: AtomicBool = AtomicBool::new(false);
    let secure = secure_from_auxv(crate::sys::getauxval(libc::AT_SECURE));
    if secure && !SAID.swap(true, Ordering::AcqRel) {
        crate::diag::line(format_args!(
            "secure-execution mode (setuid, setgid or file capabilities): nothing is traced, calls pass through unchanged"
        ));
    }
    secure
}

/// `GPULEAK_DISABLE`, read once per process (both the tracer and the operations features ask,
/// and a bad value must be reported once).
pub fn disable_setting() -> bool {
    static DISABLE: OnceLock<bool> = OnceLock::new();
    *DISABLE.get_or_init(|| flag("GPULEAK_DISABLE", false))
}

/// Where the trace goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TraceTarget {
    /// Create the trace here (the writer never overwrites: an existing name gets `.1`, ...).
    File(OsString),
    /// No trace: `GPULEAK_OUTPUT` names an existing thing that is neither a regular file nor a
    /// directory (`/dev/null`, a terminal, a pipe, a socket), which a trace cannot be beside
    /// (the writer would create `/dev/null.1`) or inside.
    Nowhere {
        /// The path, as given.
        path: OsString,
        /// What it is (`a character device`, `a pipe`...).
        kind: &'static str,
    },
}

/// Resolves `GPULEAK_OUTPUT` (`%p` already expanded; `None`: unset) against the file system:
/// unset gives `gpuleak.<program>.<pid>.trace` in the working directory; a path that ends in
/// `/` or names a directory (through a symbolic link too) gets that name inside it; a device,
/// pipe or socket gives [`TraceTarget::Nowhere`]; anything else (a new name, a regular file
/// the writer will not overwrite) is kept as it is.
pub fn trace_target(output: Option<&OsStr>, program: &OsStr, pid: u32) -> TraceTarget {
    let default_name = || crate::writer::default_path(program, pid);
    let Some(path) = output else {
        return TraceTarget::File(default_name());
    };
    let inside = |dir: &OsStr| {
        let mut p = dir.to_os_string();
        if !dir.as_bytes().ends_with(b"/") {
            p.push("/");
        }
        p.push(default_name());
        TraceTarget::File(p)
    };
    if path.as_bytes().ends_with(b"/") {
        return inside(path);
    }
    let Ok(meta) = std::fs::metadata(path) else {
        return TraceTarget::File(path.to_os_string());
    };
    let t = meta.file_type();
    if t.is_dir() {
        return inside(path);
    }
    if t.is_file() {
        return TraceTarget::File(path.to_os_string());
    }
    let kind = if t.is_char_device() {
        "a character device"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_fifo() {
        "a pipe"
    } else if t.is_socket() {
        "a socket"
    } else {
        "not a regular file"
    };
    TraceTarget::Nowhere {
        path: path.to_os_string(),
        kind,
    }
}

/// Replaces `%p` with `pid` and `%%` with `%`.
pub fn expand(template: &[u8], pid: u32) -> Vec<u8> {
    let mut out = Vec::with_capacity(template.len() + 8);
    let mut it = template.iter().copied().peekable();
    while let Some(c) = it.next() {
        if c == b'%' {
            match it.peek() {
                Some(b'p') => {
                    it.next();
                    out.extend_from_slice(pid.to_string().as_bytes());
                    continue;
                }
                Some(b'%') => {
                    it.next();
                }
                _ => {}
            }
        }
        out.push(c);
    }
    out
}

impl Config {
    /// Reads the environment.
    pub fn from_env(pid: u32) -> Config {
        let output = std::env::var_os("GPULEAK_OUTPUT")
            .filter(|v| !v.is_empty())
            .map(|v| OsString::from_vec(expand(&v.into_vec(), pid)));
        let stack_depth = match var("GPULEAK_STACK_DEPTH") {
            None => 64,
            Some(v) => match v.trim().parse::<usize>() {
                Ok(n) if n <= MAX_DEPTH => n,
                _ => {
                    warn("GPULEAK_STACK_DEPTH", &v, "a number from 0 to 256", "64");
                    64
                }
            },
        };
        // The DWARF unwinder is x86-64 only; aarch64 code keeps frame records (GCC and
        // clang emit them by default there), so the frame-pointer walk is its default.
        let (best, best_name) = if cfg!(target_arch = "x86_64") {
            (Method::Dwarf, "dwarf")
        } else {
            (Method::FramePointer, "fp")
        };
        let unwind = match var("GPULEAK_UNWIND").as_deref() {
            None | Some("") => best,
            Some("dwarf") => Method::Dwarf,
            Some("libunwind") => Method::LibUnwind,
            Some("fp") => Method::FramePointer,
            Some("gcc") => Method::Gcc,
            Some(other) => {
                warn("GPULEAK_UNWIND", other, "one of dwarf, libunwind, fp, gcc", best_name);
                best
            }
        };
        let sync_stacks = match var("GPULEAK_SYNC_STACKS") {
            None => 0,
            Some(v) => match v.trim() {
                "" => 0,
                t => t.parse::<u32>().unwrap_or_else(|_| {
                    warn("GPULEAK_SYNC_STACKS", &v, "0, 1 or a sampling period N", "0");
                    0
                }),
            },
        };
        let pool_sample = match var("GPULEAK_POOL_SAMPLE") {
            None => POOL_SAMPLE_DEFAULT,
            Some(v) => match v.trim() {
                "" => POOL_SAMPLE_DEFAULT,
                t => t.parse::<u32>().ok().filter(|&n| n != u32::MAX).unwrap_or_else(|| {
                    warn("GPULEAK_POOL_SAMPLE", &v, "0 or a sampling period N", "64");
                    POOL_SAMPLE_DEFAULT
                }),
            },
        };
        let clock = match var("GPULEAK_CLOCK").as_deref() {
            None | Some("") | Some("coarse") => libc::CLOCK_MONOTONIC_COARSE,
            Some("precise") => libc::CLOCK_MONOTONIC,
            Some(other) => {
                warn("GPULEAK_CLOCK", other, "coarse or precise", "coarse");
                libc::CLOCK_MONOTONIC_COARSE
            }
        };
        Config {
            output,
            stack_depth,
            unwind,
            free_stacks: flag("GPULEAK_FREE_STACKS", false),
            sync_stacks,
            pool_sample,
            clock,
            object_stacks: flag("GPULEAK_OBJECT_STACKS", false),
            python: flag("GPULEAK_PYTHON", true),
            disabled: disable_setting(),
            max_trace: max_trace(var("GPULEAK_MAX_TRACE").as_deref()),
        }
    }
}

/// `GPULEAK_MAX_TRACE`: a size, or `0` / `off` for no bound; unset, [`Bound::DEFAULT`].
///
/// [`Bound::DEFAULT`]: crate::writer::Bound::DEFAULT
pub fn max_trace(value: Option<&str>) -> Option<crate::writer::Bound> {
    use crate::writer::Bound;
    let default = Some(Bound::new(Bound::DEFAULT));
    let Some(v) = value.map(str::trim).filter(|v| !v.is_empty()) else {
        return default;
    };
    if v == "0" || v.eq_ignore_ascii_case("off") {
        return None;
    }
    match size::parse_size(v) {
        Ok(0) => None,
        Ok(n) if n < Bound::MIN => {
            crate::diag::line(format_args!(
                "GPULEAK_MAX_TRACE={v:?} is below the smallest bound, 1MiB; using 1MiB"
            ));
            Some(Bound::new(Bound::MIN))
        }
        Ok(n) => Some(Bound::new(n)),
        Err(why) => {
            crate::diag::line(format_args!("GPULEAK_MAX_TRACE={v:?}: {why}; using 2GiB"));
            default
        }
    }
}

/// Which calls of a function a fault rule fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nth {
    /// Only the Nth call (from 1).
    At(u64),
    /// Calls N, 2N, 3N, ...
    Every(u64),
}

/// One `GPULEAK_FAIL` rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultRule {
    /// The exact entry point whose calls are counted.
    pub api: Api,
    /// Which of its calls fail.
    pub nth: Nth,
    /// The error they return.
    pub error: u32,
}

/// The most `GPULEAK_FAIL` rules.
pub const MAX_FAULT_RULES: usize = 16;

/// `CUDA_ERROR_OUT_OF_MEMORY`: what a budget and, by default, a fault rule return.
pub const CUDA_ERROR_OUT_OF_MEMORY: u32 = 2;

/// The allocation entry points that fault rules may name (each handled by `exports::memory`),
/// with their per-thread twins.
pub const FAILABLE: &[Api] = &[
    Api::cuMemAlloc_v2,
    Api::cuMemAllocPitch_v2,
    Api::cuMemAllocManaged,
    Api::cuMemAllocHost_v2,
    Api::cuMemHostAlloc,
    Api::cuMemHostRegister_v2,
    Api::cuMemAllocAsync,
    Api::cuMemAllocFromPoolAsync,
    Api::cuMemAddressReserve,
    Api::cuMemCreate,
    Api::cuMemImportFromShareableHandle,
    Api::cuMulticastCreate,
    Api::cuArrayCreate_v2,
    Api::cuArray3DCreate_v2,
    Api::cuMipmappedArrayCreate,
    Api::cuIpcOpenMemHandle_v2,
    Api::cuIpcOpenMemHandle,
    Api::cuMemPoolImportPointer,
];

/// Operations settings: metrics, snapshots, OOM dumps, budget, fault injection.
#[derive(Debug, Clone, Default)]
pub struct Ops {
    /// Address of the metrics endpoint.
    pub metrics: Option<SocketAddr>,
    /// Ports to try from `metrics`'s (1: exactly that one; `PORT+`: the first free of 64).
    pub metrics_ports: u16,
    /// Per-device budget in bytes.
    pub limit: Option<u64>,
    /// Fault injection rules.
    pub faults: Vec<FaultRule>,
    /// Signal that asks for a snapshot.
    pub snapshot_signal: Option<i32>,
    /// Period of automatic snapshots.
    pub snapshot_period: Option<Duration>,
    /// A snapshot record on out of memory.
    pub oom_snapshot: bool,
    /// A summary on stderr on out of memory.
    pub oom_summary: bool,
    /// Keep the live map from the start.
    pub live: bool,
    /// `GPULEAK_DISABLE=1`: everything off.
    pub disabled: bool,
}

/// The longest `GPULEAK_SNAPSHOT_PERIOD`; longer ones are cut to it.
pub const MAX_SNAPSHOT_PERIOD: Duration = Duration::from_secs(24 * 3600);

/// Parses a duration: `500ms`, `10s`, `5m`, `1h`, or a bare number of seconds; never zero.
pub fn parse_duration(text: &str) -> Option<Duration> {
    let t = text.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let n: u64 = t[..split].parse().ok()?;
    let d = match t[split..].trim() {
        "ms" => Duration::from_millis(n),
        "" | "s" => Duration::from_secs(n),
        "m" | "min" => Duration::from_secs(n.checked_mul(60)?),
        "h" => Duration::from_secs(n.checked_mul(3600)?),
        _ => return None,
    };
    (!d.is_zero()).then_some(d)
}

/// Parses a signal name or number (`USR2`, `SIGHUP`, `RTMIN+3`, `RTMAX-2`, `12`); only
/// signals a program can spare (never KILL, STOP or the fault signals).
pub fn parse_signal(text: &str) -> Option<i32> {
    let t = text.trim();
    let name = t.strip_prefix("SIG").unwrap_or(t);
    let sig = match name {
        "USR1" => libc::SIGUSR1,
        "USR2" => libc::SIGUSR2,
        "HUP" => libc::SIGHUP,
        "WINCH" => libc::SIGWINCH,
        "URG" => libc::SIGURG,
        "RTMIN" => libc::SIGRTMIN(),
        "RTMAX" => libc::SIGRTMAX(),
        _ => {
            // Digits only: `parse` would also take a sign (`RTMIN+-32` is SIGINT).
            let number = |t: &str| -> Option<i32> {
                (!t.is_empty() && t.len() <= 3 && t.bytes().all(|b| b.is_ascii_digit()))
                    .then(|| t.parse().ok())
                    .flatten()
            };
            if let Some(off) = name.strip_prefix("RTMIN+") {
                let sig = libc::SIGRTMIN() + number(off)?;
                (sig <= libc::SIGRTMAX()).then_some(sig)?
            } else if let Some(off) = name.strip_prefix("RTMAX-") {
                let sig = libc::SIGRTMAX() - number(off)?;
                (sig >= libc::SIGRTMIN()).then_some(sig)?
            } else {
                number(name)?
            }
        }
    };
    let forbidden = [
        libc::SIGKILL,
        libc::SIGSTOP,
        libc::SIGSEGV,
        libc::SIGBUS,
        libc::SIGFPE,
        libc::SIGILL,
        libc::SIGABRT,
        libc::SIGTRAP,
        libc::SIGSYS,
    ];
    (sig >= 1 && sig <= libc::SIGRTMAX() && !forbidden.contains(&sig)).then_some(sig)
}

/// A CUDA error code by number or by `CUDA_ERROR_*` name (the common ones).
pub fn parse_error_code(text: &str) -> Option<u32> {
    let t = text.trim();
    if let Ok(n) = t.parse::<u32>() {
        return (n != 0).then_some(n);
    }
    const NAMES: &[(&str, u32)] = &[
        ("CUDA_ERROR_INVALID_VALUE", 1),
        ("CUDA_ERROR_OUT_OF_MEMORY", 2),
        ("CUDA_ERROR_NOT_INITIALIZED", 3),
        ("CUDA_ERROR_DEINITIALIZED", 4),
        ("CUDA_ERROR_NO_DEVICE", 100),
        ("CUDA_ERROR_INVALID_DEVICE", 101),
        ("CUDA_ERROR_INVALID_CONTEXT", 201),
        ("CUDA_ERROR_MAP_FAILED", 205),
        ("CUDA_ERROR_ALREADY_MAPPED", 208),
        ("CUDA_ERROR_ECC_UNCORRECTABLE", 214),
        ("CUDA_ERROR_OPERATING_SYSTEM", 304),
        ("CUDA_ERROR_INVALID_HANDLE", 400),
        ("CUDA_ERROR_ILLEGAL_ADDRESS", 700),
        ("CUDA_ERROR_LAUNCH_FAILED", 719),
        ("CUDA_ERROR_NOT_PERMITTED", 800),
        ("CUDA_ERROR_NOT_SUPPORTED", 801),
        ("CUDA_ERROR_UNKNOWN", 999),
    ];
    NAMES.iter().find(|(n, _)| *n == t).map(|&(_, c)| c)
}

/// Parses `GPULEAK_FAIL`; the error says what is wrong with which rule.
pub fn parse_fail_rules(text: &str) -> Result<Vec<FaultRule>, String> {
    let mut rules = Vec::new();
    for rule in text.split(',').map(str::trim).filter(|r| !r.is_empty()) {
        let mut parts = rule.split(':').map(str::trim);
        let name = parts.next().unwrap_or_default();
        let api = Api::from_name(name)
            .filter(|a| FAILABLE.contains(&a.base()))
            .ok_or_else(|| format!("rule {rule:?}: {name:?} is not an allocation function the shim intercepts"))?;
        let mut nth = None;
        let mut error = CUDA_ERROR_OUT_OF_MEMORY;
        for part in parts {
            if let Some(code) = part.strip_prefix("err=") {
                error = parse_error_code(code)
                    .ok_or_else(|| format!("rule {rule:?}: {code:?} is not a CUDA error number or name"))?;
            } else if let Some(n) = part.strip_prefix("every=") {
                nth = Some(Nth::Every(
                    n.parse()
                        .ok()
                        .filter(|&n| n > 0)
                        .ok_or_else(|| format!("rule {rule:?}: every= needs a number from 1"))?,
                ));
            } else {
                nth = Some(Nth::At(part.parse().ok().filter(|&n| n > 0).ok_or_else(|| {
                    format!("rule {rule:?}: {part:?} is not a call number from 1, every=N or err=CODE")
                })?));
            }
        }
        let nth = nth.ok_or_else(|| format!("rule {rule:?}: which call? add :N or :every=N"))?;
        rules.push(FaultRule { api, nth, error });
    }
    if rules.len() > MAX_FAULT_RULES {
        return Err(format!("{} rules, at most {MAX_FAULT_RULES}", rules.len()));
    }
    Ok(rules)
}

/// How many ports `PORT+` tries: the first free one of PORT to PORT + 63.
pub const METRICS_PORT_SEARCH: u16 = 64;

/// Parses `GPULEAK_METRICS`: `HOST:PORT`, `localhost:PORT` or a bare port (on 127.0.0.1),
/// with an optional trailing `+` (the first free port from PORT on: one port per process of
/// a multi-process job); a non-loopback address only with `allow_remote`. Returns the
/// address and how many ports to try.
pub fn parse_metrics_addr(text: &str, allow_remote: bool) -> Result<(SocketAddr, u16), String> {
    let t = text.trim();
    let (t, ports) = match t.strip_suffix('+') {
        Some(rest) => (rest, METRICS_PORT_SEARCH),
        None => (t, 1),
    };
    let addr = if let Ok(port) = t.parse::<u16>() {
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)
    } else if let Some(port) = t.strip_prefix("localhost:") {
        let port = port.parse::<u16>().map_err(|_| "not HOST:PORT".to_string())?;
        SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), port)
    } else {
        t.parse::<SocketAddr>().map_err(|_| "not HOST:PORT".to_string())?
    };
    if !addr.ip().is_loopback() && !allow_remote {
        return Err("not a loopback address (set GPULEAK_METRICS_ALLOW_REMOTE=1 to serve beyond this machine)".into());
    }
    if addr.port() == 0 {
        return Err("port 0 would be a random port no scraper can find".into());
    }
    Ok((addr, ports))
}

impl Ops {
    /// Reads the environment; each bad value prints one line and leaves its feature off. In
    /// secure-execution mode nothing is read and everything is off ([`passthrough_only`]).
    pub fn from_env() -> Ops {
        if passthrough_only() {
            return Ops {
                disabled: true,
                ..Ops::default()
            };
        }
        let allow_remote = flag("GPULEAK_METRICS_ALLOW_REMOTE", false);
        let metrics_and_ports = var("GPULEAK_METRICS").filter(|v| !v.trim().is_empty()).and_then(|v| {
            parse_metrics_addr(&v, allow_remote)
                .map_err(|why| crate::diag::line(format_args!("GPULEAK_METRICS={v:?}: {why}; metrics are off")))
                .ok()
        });
        let metrics = metrics_and_ports.map(|(a, _)| a);
        let metrics_ports = metrics_and_ports.map_or(1, |(_, n)| n);
        let limit = var("GPULEAK_LIMIT").filter(|v| !v.trim().is_empty()).and_then(|v| {
            match size::parse_size(&v) {
                Ok(0) => crate::diag::line(format_args!(
                    "GPULEAK_LIMIT={v:?}: a budget of 0 bytes would refuse every allocation; expected {} above 0; \
                     using no limit",
                    size::ACCEPTED
                )),
                Ok(n) => return Some(n),
                Err(why) => crate::diag::line(format_args!("GPULEAK_LIMIT={v:?}: {why}; using no limit")),
            }
            None
        });
        let faults = var("GPULEAK_FAIL")
            .filter(|v| !v.trim().is_empty())
            .map(|v| {
                parse_fail_rules(&v).unwrap_or_else(|why| {
                    crate::diag::line(format_args!("GPULEAK_FAIL={v:?}: {why}; no faults are injected"));
                    Vec::new()
                })
            })
            .unwrap_or_default();
        let snapshot_signal = var("GPULEAK_SNAPSHOT_SIGNAL")
            .filter(|v| !v.trim().is_empty())
            .and_then(|v| {
                let s = parse_signal(&v);
                if s.is_none() {
                    warn(
                        "GPULEAK_SNAPSHOT_SIGNAL",
                        &v,
                        "a signal such as USR2, HUP or RTMIN+3",
                        "no signal",
                    );
                }
                s
            });
        let snapshot_period = var("GPULEAK_SNAPSHOT_PERIOD")
            .filter(|v| !v.trim().is_empty())
            .and_then(|v| {
                let d = parse_duration(&v);
                match d {
                    None => warn(
                        "GPULEAK_SNAPSHOT_PERIOD",
                        &v,
                        "a duration such as 500ms, 10s, 5m or 1h",
                        "no periodic snapshots",
                    ),
                    Some(d) if d > MAX_SNAPSHOT_PERIOD => {
                        crate::diag::line(format_args!(
                            "GPULEAK_SNAPSHOT_PERIOD={v:?} is longer than 24h; using 24h"
                        ));
                        return Some(MAX_SNAPSHOT_PERIOD);
                    }
                    Some(_) => {}
                }
                d
            });
        Ops {
            metrics,
            metrics_ports,
            limit,
            faults,
            snapshot_signal,
            snapshot_period,
            oom_snapshot: flag("GPULEAK_OOM_SNAPSHOT", false),
            oom_summary: flag("GPULEAK_OOM_SUMMARY", false),
            live: flag("GPULEAK_LIVE", false),
            disabled: disable_setting(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_known_unit_and_are_never_zero() {
        assert_eq!(parse_duration("10s"), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("10"), Some(Duration::from_secs(10)));
        assert_eq!(parse_duration("500ms"), Some(Duration::from_millis(500)));
        assert_eq!(parse_duration("5m"), Some(Duration::from_secs(300)));
        assert_eq!(parse_duration("1h"), Some(Duration::from_secs(3600)));
        assert_eq!(parse_duration("0s"), None);
        assert_eq!(parse_duration("10 parsecs"), None);
        assert_eq!(parse_duration("s"), None);
    }

    #[test]
    fn signals_by_name_or_number_but_never_the_fatal_ones() {
        assert_eq!(parse_signal("USR2"), Some(libc::SIGUSR2));
        assert_eq!(parse_signal("SIGUSR1"), Some(libc::SIGUSR1));
        assert_eq!(parse_signal("HUP"), Some(libc::SIGHUP));
        assert_eq!(parse_signal("RTMIN+2"), Some(libc::SIGRTMIN() + 2));
        assert_eq!(parse_signal("12"), Some(12));
        assert_eq!(parse_signal("KILL"), None);
        assert_eq!(parse_signal("9"), None);
        assert_eq!(parse_signal("11"), None);
        assert_eq!(parse_signal("0"), None);
        assert_eq!(parse_signal("USR3"), None);
        assert_eq!(parse_signal("RTMAX"), Some(libc::SIGRTMAX()));
        assert_eq!(parse_signal("RTMAX-1"), Some(libc::SIGRTMAX() - 1));
        assert_eq!(parse_signal("SIGRTMIN"), Some(libc::SIGRTMIN()));
    }

    #[test]
    fn malformed_realtime_signals_and_signed_numbers_are_refused() {
        // RTMIN+-32 used to be taken as SIGRTMIN - 32, SIGINT.
        for bad in [
            "RTMIN+-32",
            "RTMIN+",
            "RTMIN+ 1",
            "RTMIN++1",
            "RTMIN+1x",
            "RTMIN+99",
            "RTMIN+99999999999",
            "RTMAX-",
            "RTMAX--2",
            "RTMAX-+2",
            "RTMAX-99",
            "RTMAX+1",
            "RTMIN-1",
            "+12",
            "-2",
        ] {
            assert_eq!(parse_signal(bad), None, "{bad}");
        }
        let span = libc::SIGRTMAX() - libc::SIGRTMIN();
        assert_eq!(parse_signal(&format!("RTMIN+{span}")), Some(libc::SIGRTMAX()));
        assert_eq!(parse_signal(&format!("RTMAX-{span}")), Some(libc::SIGRTMIN()));
        assert_eq!(parse_signal(&format!("RTMIN+{}", span + 1)), None);
    }

    #[test]
    fn fault_rules_name_the_call_and_the_error() {
        assert_eq!(
            parse_fail_rules("cuMemAlloc_v2:3").unwrap(),
            vec![FaultRule {
                api: Api::cuMemAlloc_v2,
                nth: Nth::At(3),
                error: 2
            }]
        );
        assert_eq!(
            parse_fail_rules("cuMemAlloc_v2:every=5:err=CUDA_ERROR_INVALID_VALUE, cuMemHostAlloc:1:err=999").unwrap(),
            vec![
                FaultRule {
                    api: Api::cuMemAlloc_v2,
                    nth: Nth::Every(5),
                    error: 1
                },
                FaultRule {
                    api: Api::cuMemHostAlloc,
                    nth: Nth::At(1),
                    error: 999
                }
            ]
        );
        assert!(parse_fail_rules("cuMemAlloc:3").unwrap_err().contains("cuMemAlloc"));
        assert!(
            parse_fail_rules("cuMemFree_v2:3").is_err(),
            "frees are not allocation functions"
        );
        assert!(parse_fail_rules("cuMemAlloc_v2").is_err());
        assert!(parse_fail_rules("cuMemAlloc_v2:0").is_err());
        assert!(parse_fail_rules("cuMemAlloc_v2:every=0").is_err());
        assert!(parse_fail_rules("cuMemAlloc_v2:2:err=0").is_err());
        assert!(parse_fail_rules("cuMemAlloc_v2:2:err=CUDA_ERROR_NOPE").is_err());
        assert_eq!(parse_fail_rules("").unwrap(), vec![]);
    }

    #[test]
    fn metrics_bind_to_loopback_unless_remote_is_allowed() {
        assert_eq!(parse_metrics_addr("127.0.0.1:9400", false).unwrap().0.port(), 9400);
        assert_eq!(parse_metrics_addr("127.0.0.1:9400", false).unwrap().1, 1);
        assert_eq!(
            parse_metrics_addr("127.0.0.1:9400+", false).unwrap().1,
            METRICS_PORT_SEARCH
        );
        assert_eq!(
            parse_metrics_addr("9400+", false).unwrap().0.to_string(),
            "127.0.0.1:9400"
        );
        assert_eq!(
            parse_metrics_addr("9400", false).unwrap().0.to_string(),
            "127.0.0.1:9400"
        );
        assert!(parse_metrics_addr("127.0.0.1:0", false).is_err());
        assert_eq!(
            parse_metrics_addr("localhost:9", false).unwrap().0.to_string(),
            "127.0.0.1:9"
        );
        assert!(parse_metrics_addr("[::1]:9400", false).is_ok());
        assert!(parse_metrics_addr("0.0.0.0:9400", false).is_err());
        assert!(parse_metrics_addr("0.0.0.0:9400", true).is_ok());
        assert!(parse_metrics_addr("127.0.0.1", false).is_err());
        assert!(parse_metrics_addr("host:port", false).is_err());
    }

    #[test]
    fn secure_execution_means_pass_through_only() {
        assert!(secure_from_auxv(1));
        assert!(!secure_from_auxv(0));
        // The tests run as whoever started them: no setuid, no secure-execution mode.
        assert!(!passthrough_only());
    }

    #[test]
    fn trace_targets_follow_what_the_output_names() {
        let file = |p: &str| TraceTarget::File(p.into());
        let name = OsStr::new("prog");
        assert_eq!(trace_target(None, name, 7), file("gpuleak.prog.7.trace"));
        assert_eq!(
            trace_target(Some(OsStr::new("/tmp")), name, 7),
            file("/tmp/gpuleak.prog.7.trace")
        );
        assert_eq!(
            trace_target(Some(OsStr::new("/no-such-dir/")), name, 7),
            file("/no-such-dir/gpuleak.prog.7.trace")
        );
        assert_eq!(
            trace_target(Some(OsStr::new("/no-such-dir/t.trace")), name, 7),
            file("/no-such-dir/t.trace")
        );
        assert_eq!(
            trace_target(Some(OsStr::new("/dev/null")), name, 7),
            TraceTarget::Nowhere {
                path: "/dev/null".into(),
                kind: "a character device"
            }
        );
    }

    #[test]
    fn placeholders_expand() {
        assert_eq!(expand(b"/tmp/t.%p.trace", 42), b"/tmp/t.42.trace");
        assert_eq!(expand(b"a%%p%", 1), b"a%p%");
        assert_eq!(expand(b"%p%p", 7), b"77");
    }
}
