//! The Prometheus metrics page (text exposition format 0.0.4) that [`super::server`] serves on
//! `GPULEAK_METRICS`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use gpuleak_format::MemKind;

use super::live::{self, SLOTS, UNKNOWN};
use super::settings::settings;
use super::snapshot;

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
    let f = crate::dlsym::driver_fn(crate::dlsym::Getter::cuDeviceTotalMem_v2)?;
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
    let pid = crate::sys::getpid();
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
    match crate::rank::current() {
        Some(r) => with_rank(&out, r, &hostname()),
        None => out,
    }
}

/// The host's name (empty when it cannot be read).
fn hostname() -> String {
    let mut host = [0u8; 256];
    if crate::sys::gethostname(&mut host) != 0 {
        return String::new();
    }
    let len = host.iter().position(|&c| c == 0).unwrap_or(0);
    String::from_utf8_lossy(&host[..len]).into_owned()
}

/// The page with a `rank` label first on every sample, and the launcher's other facts on
/// `gpuleak_info`, so that the series of the ranks of a job sum and compare by rank.
fn with_rank(page: &str, r: &crate::rank::Rank, hostname: &str) -> String {
    let label = format!("rank=\"{}\"", r.rank);
    let mut out = String::with_capacity(page.len() + page.lines().count() * (label.len() + 3));
    for line in page.lines() {
        if line.starts_with('#') {
            out.push_str(line);
        } else if let Some(brace) = line.find('{') {
            out.push_str(&line[..=brace]);
            out.push_str(&label);
            if !line[brace + 1..].starts_with('}') {
                out.push(',');
            }
            out.push_str(&line[brace + 1..]);
        } else if let Some(space) = line.find(' ') {
            out.push_str(&line[..space]);
            out.push('{');
            out.push_str(&label);
            out.push('}');
            out.push_str(&line[space..]);
        } else {
            out.push_str(line);
        }
        if line.starts_with("gpuleak_info{") {
            // The launcher's facts ride on the info series only.
            let at = out.rfind("} 1").unwrap_or(out.len());
            let mut extra = format!(",launcher=\"{}\"", r.launcher);
            if let Some(l) = r.local_rank {
                extra.push_str(&format!(",local_rank=\"{l}\""));
            }
            if let Some(w) = r.world_size {
                extra.push_str(&format!(",world_size=\"{w}\""));
            }
            extra.push_str(&format!(",hostname=\"{}\"", escape(hostname)));
            out.insert_str(at, &extra);
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_sample_gets_the_rank_label() {
        let page = "# HELP a x\n# TYPE a gauge\na{device=\"0\"} 5\nb 7\ngpuleak_info{pid=\"9\",version=\"0.1.0\"} 1\n";
        let r = crate::rank::Rank {
            rank: 3,
            local_rank: Some(1),
            world_size: Some(8),
            launcher: "torchrun",
        };
        assert_eq!(
            with_rank(page, &r, "node-a"),
            "# HELP a x\n# TYPE a gauge\na{rank=\"3\",device=\"0\"} 5\nb{rank=\"3\"} 7\n\
             gpuleak_info{rank=\"3\",pid=\"9\",version=\"0.1.0\",launcher=\"torchrun\",local_rank=\"1\",world_size=\"8\",hostname=\"node-a\"} 1\n"
        );
    }
}
