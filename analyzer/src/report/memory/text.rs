//! The memory section of the text report: a chart of live bytes per device, the peak and its
//! sites, growth, fragmentation (worst moment, pinning sites), churn, failed allocations, the
//! size histogram and `--at` snapshots.

use std::fmt::Write as _;

use gpuleak_format::StackId;

use super::{device_name, MemoryView, PinSite};
use crate::memory::series::Span;
use crate::run::human_bytes;

/// Columns and rows of the terminal chart.
const CHART_COLUMNS: usize = 64;
const CHART_ROWS: usize = 6;
/// Sites listed per table.
const LISTED: usize = 5;

/// Appends the memory section to `s`.
pub fn write(m: &MemoryView, s: &mut String) {
    let r = &m.replay;
    let _ = writeln!(s, "\nWhere the memory went ({} memory events):", r.events);
    if r.events == 0 {
        s.push_str("  no allocation in the trace\n");
        return;
    }
    for d in &r.devices {
        let peak = d.peak.0;
        let _ = writeln!(
            s,
            "\n{}: peak {} live at {} (sizes asked for)",
            device_name(d.device),
            human_bytes(peak),
            when(d.peak.2)
        );
        chart(&d.live, s);
        let extra = d.granted_peak.saturating_sub(peak);
        let _ = writeln!(
            s,
            "  granted: peak {}, {}",
            human_bytes(d.granted_peak),
            if extra > 0 {
                format!(
                    "{} more than asked for (device allocations rounded up to 256 bytes)",
                    human_bytes(extra)
                )
            } else {
                "as asked".to_string()
            }
        );
        let allocs = d.allocations.last().copied().unwrap_or(0);
        let frees = d.frees.last().copied().unwrap_or(0);
        let _ = write!(s, "  {allocs} allocations, {frees} frees");
        if let Some(&r) = d.vmm_reserved.iter().max().filter(|r| **r > 0) {
            let _ = write!(s, "; VMM reserved up to {}", human_bytes(r));
            let mapped = d.vmm_mapped.iter().max().copied().unwrap_or(0);
            let _ = write!(s, ", mapped up to {}", human_bytes(mapped));
        }
        if let Some(&p) = d.pool.iter().max().filter(|p| **p > 0) {
            let _ = write!(s, "; caching allocators held up to {}", human_bytes(p));
        }
        s.push('\n');
        if d.pool_samples > 0 {
            let reserved = d.pool_reserved.iter().max().copied().unwrap_or(0);
            let used = d.pool_used.iter().max().copied().unwrap_or(0);
            let _ = writeln!(
                s,
                "  stream-ordered pools ({} samples): reserved up to {}, used up to {}",
                d.pool_samples,
                human_bytes(reserved),
                human_bytes(used)
            );
            for p in r.pools.iter().filter(|p| p.device == d.device) {
                let destroyed = if p.destroyed.is_some() { ", then destroyed" } else { "" };
                let _ = writeln!(
                    s,
                    "    pool {:#x}: {} reserved, {} used at the last sample ({} unused){destroyed}",
                    p.pool,
                    human_bytes(p.reserved),
                    human_bytes(p.used),
                    human_bytes(p.reserved.saturating_sub(p.used))
                );
            }
        }
        // With several devices, each one's own peak by site (the process's is below).
        if r.devices.len() > 1 && !d.peak_sites.is_empty() {
            s.push_str("  at its peak:\n");
            for site in d.peak_sites.iter().take(3) {
                let _ = writeln!(s, "    {:>10}  {}", human_bytes(site.bytes), name(m, site.stack));
            }
            if d.peak_sites.len() > 3 {
                let _ = writeln!(s, "    ... and {} more sites", d.peak_sites.len() - 3);
            }
        }
        if let Some(w) = &d.worst {
            let _ = writeln!(
                s,
                "  worst fragmentation {:.2} at {}: {} in {} holes, largest {}",
                w.fragmentation,
                when(w.time_ns),
                human_bytes(w.free),
                w.holes,
                human_bytes(w.largest_hole),
            );
            let i = r.devices.iter().position(|x| x.device == d.device).unwrap_or(0);
            pins(m, &m.pins[i], "    ", s);
        } else if d.has_addresses {
            s.push_str("  fragmentation: none (no hole between live allocations)\n");
        }
    }

    let _ = writeln!(s, "\nPeak: {} live at {}", human_bytes(r.peak.0), when(r.peak.2));
    for (id, bytes) in m.peak_sites.iter().take(LISTED) {
        let _ = writeln!(s, "  {:>10}  {}", human_bytes(*bytes), name(m, *id));
    }
    more(m.peak_sites.len(), s);

    if !m.growth.is_empty() {
        s.push_str("\nGrowing sites (see the growth findings):\n");
        for g in &m.growth {
            let _ = writeln!(
                s,
                "  {} -> {}  {}",
                human_bytes(g.from_bytes),
                human_bytes(g.to_bytes),
                name(m, g.stack)
            );
            let _ = writeln!(s, "    {}", sparkline(&g.floors, 48));
        }
    }

    if !m.churn.is_empty() {
        s.push_str("\nChurn (many short-lived allocations; candidates for a pool):\n");
        for id in &m.churn {
            if let Some(v) = m.sites.get(id) {
                let _ = writeln!(
                    s,
                    "  {:>8} allocations, {} in all  {}",
                    v.summary.allocations,
                    human_bytes(v.summary.bytes),
                    v.label
                );
            }
        }
    }

    if r.failed > 0 {
        let _ = writeln!(s, "\nFailed allocations: {}", r.failed);
        for o in &m.ooms {
            let _ = writeln!(
                s,
                "  {} of {} on {} at {} failed ({}){}\n    {} live, {} in holes, largest hole {} (fragmentation {:.2})",
                o.oom.api,
                human_bytes(o.oom.size),
                device_name(o.oom.device),
                when(o.oom.time_ns),
                o.oom.result.0,
                if o.fragmented { ": fragmentation" } else { "" },
                human_bytes(o.oom.live),
                human_bytes(o.oom.free_in_span),
                human_bytes(o.oom.largest_hole),
                o.oom.fragmentation,
            );
            for site in o.oom.sites.iter().take(3) {
                let _ = writeln!(s, "    {:>10} live  {}", human_bytes(site.bytes), name(m, site.stack));
            }
            pins(m, &o.pins, "    ", s);
        }
        more_ooms(r.failed, m.ooms.len(), s);
    }

    let h = &r.histogram;
    if !h.counts.is_empty() {
        s.push_str("\nAllocation sizes:\n");
        let top = h.counts.iter().max().copied().unwrap_or(1).max(1);
        for (class, &n) in h.counts.iter().enumerate().filter(|(_, n)| **n > 0) {
            let upto = if class >= 64 { u64::MAX } else { 1u64 << class };
            let bar = "#".repeat(((n * 40).div_ceil(top)) as usize);
            let _ = writeln!(s, "  <= {:>9} {n:>9}  {bar}", human_bytes(upto));
        }
    }

    if let Some(snap) = &m.snapshot {
        match &snap.to {
            None => {
                let _ = writeln!(
                    s,
                    "\nSnapshot {} ({}) at {}: {} live",
                    snap.from.id,
                    snap.from.reason,
                    when(snap.from.time_ns),
                    human_bytes(snap.from.live)
                );
                for (id, bytes, _) in snap.rows.iter().take(20) {
                    let _ = writeln!(s, "  {:>10}  {}", human_bytes(*bytes), name(m, *id));
                }
            }
            Some(to) => {
                let _ = writeln!(
                    s,
                    "\nSnapshot {} -> {}: live {} -> {}",
                    snap.from.id,
                    to.id,
                    human_bytes(snap.from.live),
                    human_bytes(to.live)
                );
                for (id, a, b) in snap.rows.iter().take(20) {
                    let sign = if b >= a { '+' } else { '-' };
                    let _ = writeln!(
                        s,
                        "  {sign}{:>10}  ({} -> {})  {}",
                        human_bytes(a.abs_diff(*b)),
                        human_bytes(*a),
                        human_bytes(*b),
                        name(m, *id)
                    );
                }
                if snap.rows.is_empty() {
                    s.push_str("  no site changed\n");
                }
            }
        }
    }
}

fn name(m: &MemoryView, id: StackId) -> String {
    m.sites
        .get(&id)
        .map_or_else(|| format!("stack {}", id.0), |v| v.label.clone())
}

fn pins(m: &MemoryView, pins: &[PinSite], indent: &str, s: &mut String) {
    for p in pins.iter().take(3) {
        let _ = writeln!(
            s,
            "{indent}pinned by {} allocation{} ({}) from {};\n{indent}  freeing one would make a {} hole",
            p.allocations,
            if p.allocations == 1 { "" } else { "s" },
            human_bytes(p.bytes),
            name(m, p.stack),
            human_bytes(p.largest_joined)
        );
    }
}

fn more(n: usize, s: &mut String) {
    if n > LISTED {
        let _ = writeln!(s, "  ... and {} more sites", n - LISTED);
    }
}

fn more_ooms(failed: u64, shown: usize, s: &mut String) {
    if failed > shown as u64 {
        let _ = writeln!(s, "  ... and {} more failed allocations", failed - shown as u64);
    }
}

/// `1.234 s` into the trace.
fn when(ns: u64) -> String {
    format!("{:.3} s", ns as f64 / 1e9)
}

/// One line of eighths.
fn sparkline(values: &[u64], width: usize) -> String {
    const BARS: [char; 8] = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    let cols = columns(values, width);
    let top = cols.iter().max().copied().unwrap_or(0).max(1);
    cols.iter()
        .map(|&v| BARS[((v as u128 * 7).div_ceil(top as u128)) as usize])
        .collect()
}

/// The highest value in each of `width` (or fewer) columns.
fn columns(values: &[u64], width: usize) -> Vec<u64> {
    if values.len() <= width {
        return values.to_vec();
    }
    (0..width)
        .map(|c| {
            let a = c * values.len() / width;
            let b = ((c + 1) * values.len() / width).max(a + 1);
            values[a..b].iter().max().copied().unwrap_or(0)
        })
        .collect()
}

/// A chart of live bytes, `CHART_ROWS` high, the highest value per column.
fn chart(live: &[Span], s: &mut String) {
    let cols = columns(&live.iter().map(|p| p.max).collect::<Vec<_>>(), CHART_COLUMNS);
    let top = cols.iter().max().copied().unwrap_or(0);
    if top == 0 {
        return;
    }
    const PARTS: [char; 9] = [' ', '▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];
    for row in (0..CHART_ROWS).rev() {
        let label = if row == CHART_ROWS - 1 {
            human_bytes(top)
        } else {
            String::new()
        };
        let mut line = format!("  {label:>10} |");
        for &v in &cols {
            // Eighths of a row filled in this column.
            let eighths = (v as u128 * (CHART_ROWS as u128 * 8)).div_ceil(top as u128) as usize;
            let here = eighths.saturating_sub(row * 8).min(8);
            line.push(PARTS[here]);
        }
        s.push_str(line.trim_end());
        s.push('\n');
    }
    let _ = writeln!(s, "  {:>10} +{}", "0", "-".repeat(cols.len()));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chart_fills_eighths_up_to_the_highest_column() {
        let live: Vec<Span> = (0..=8u64)
            .map(|v| Span {
                min: v,
                max: v * 6,
                last: v,
            })
            .collect();
        let mut s = String::new();
        chart(&live, &mut s);
        let lines: Vec<&str> = s.lines().collect();
        assert_eq!(lines.len(), CHART_ROWS + 1);
        assert!(lines[0].ends_with("|       ▂█"), "{s}");
        assert!(lines[1].ends_with("|      ▄██"), "{s}");
        assert!(lines[CHART_ROWS - 1].ends_with("| ▆███████"), "{s}");
        assert_eq!(sparkline(&[0, 1, 2, 4], 10), "▁▃▅█");
    }
}
