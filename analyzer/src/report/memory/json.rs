//! The `memory` object of a process in the JSON report (docs/memory.md lists every field).

use super::{device_name, MemoryView, PinSite};
use crate::json::{stack, J};
use crate::memory::SiteBytes;

/// The `memory` object.
pub(crate) fn memory(m: &MemoryView) -> J {
    let r = &m.replay;
    let u = J::U;
    let list = |v: &[u64]| J::A(v.iter().map(|x| J::U(*x)).collect());
    let devices = r
        .devices
        .iter()
        .zip(&m.pins)
        .map(|(d, pins)| {
            J::O(vec![
                ("device", J::S(device_name(d.device))),
                ("ordinal", J::I(i64::from(d.device))),
                ("peak_bytes", u(d.peak.0)),
                ("peak_seq", u(d.peak.1)),
                ("peak_time_ns", u(d.peak.2)),
                ("live_bytes", list(&d.live.iter().map(|p| p.last).collect::<Vec<_>>())),
                (
                    "live_bytes_max",
                    list(&d.live.iter().map(|p| p.max).collect::<Vec<_>>()),
                ),
                (
                    "granted_bytes",
                    list(&d.granted.iter().map(|p| p.last).collect::<Vec<_>>()),
                ),
                (
                    "granted_bytes_max",
                    list(&d.granted.iter().map(|p| p.max).collect::<Vec<_>>()),
                ),
                ("granted_peak_bytes", u(d.granted_peak)),
                ("granted_rule", J::S(crate::memory::GRANTED_RULE.to_string())),
                ("allocations", list(&d.allocations)),
                ("frees", list(&d.frees)),
                ("vmm_reserved_bytes", list(&d.vmm_reserved)),
                ("vmm_mapped_bytes", list(&d.vmm_mapped)),
                ("pool_bytes", list(&d.pool)),
                ("pool_reserved_bytes", list(&d.pool_reserved)),
                ("pool_used_bytes", list(&d.pool_used)),
                ("pool_samples", u(d.pool_samples)),
                ("fragmentation_ppm", list(&d.fragmentation_ppm)),
                ("largest_hole", list(&d.largest_hole)),
                ("free_in_span", list(&d.free_in_span)),
                (
                    "worst_fragmentation",
                    d.worst.map_or(J::Null, |w| {
                        J::O(vec![
                            ("fragmentation", J::F(w.fragmentation)),
                            ("free_in_span", u(w.free)),
                            ("largest_hole", u(w.largest_hole)),
                            ("stranded_bytes", u(w.stranded)),
                            ("holes", u(w.holes)),
                            ("live_bytes", u(w.live)),
                            ("seq", u(w.seq)),
                            ("time_ns", u(w.time_ns)),
                        ])
                    }),
                ),
                ("pinning", pin_list(pins)),
                (
                    "peak_by_site",
                    J::A(
                        d.peak_sites
                            .iter()
                            .map(|s| J::O(vec![("stack_id", u(u64::from(s.stack.0))), ("bytes", u(s.bytes))]))
                            .collect(),
                    ),
                ),
                (
                    "stacked",
                    J::A(
                        d.stacked
                            .iter()
                            .map(|(id, v)| J::O(vec![("stack_id", u(u64::from(id.0))), ("live_bytes", list(v))]))
                            .collect(),
                    ),
                ),
            ])
        })
        .collect();
    let site_bytes = |v: &[SiteBytes]| {
        J::A(
            v.iter()
                .map(|s| {
                    J::O(vec![
                        ("stack_id", u(u64::from(s.stack.0))),
                        ("bytes", u(s.bytes)),
                        ("allocations", u(s.allocations)),
                    ])
                })
                .collect(),
        )
    };
    let ooms = m
        .ooms
        .iter()
        .map(|o| {
            J::O(vec![
                ("api", J::S(o.oom.api.to_string())),
                ("result", u(u64::from(o.oom.result.0))),
                ("requested_bytes", u(o.oom.size)),
                ("device", J::S(device_name(o.oom.device))),
                ("seq", u(o.oom.seq)),
                ("time_ns", u(o.oom.time_ns)),
                ("live_bytes", u(o.oom.live)),
                ("free_in_span", u(o.oom.free_in_span)),
                ("largest_hole", u(o.oom.largest_hole)),
                ("fragmentation", J::F(o.oom.fragmentation)),
                ("fragmented", J::Bool(o.fragmented)),
                ("stack", stack(&o.stack)),
                ("live_by_site", site_bytes(&o.oom.sites)),
                ("pinning", pin_list(&o.pins)),
            ])
        })
        .collect();
    let sites = m
        .sites
        .values()
        .map(|v| {
            let s = &v.summary;
            J::O(vec![
                ("stack_id", u(u64::from(s.stack.0))),
                ("label", J::S(v.label.clone())),
                ("kind", J::S(s.kind.name().to_string())),
                ("api", J::S(s.api.to_string())),
                ("device", J::S(device_name(s.device))),
                ("allocations", u(s.allocations)),
                ("frees", u(s.frees)),
                ("bytes", u(s.bytes)),
                ("high_bytes", u(s.high)),
                ("peak_bytes", u(s.at_peak)),
                ("live_bytes", u(s.live)),
                ("mean_lifetime_seq", u(s.mean_lifetime)),
                ("pool", J::Bool(s.pool)),
                ("stack", stack(&v.stack)),
            ])
        })
        .collect();
    let growth = m
        .growth
        .iter()
        .map(|g| {
            J::O(vec![
                ("stack_id", u(u64::from(g.stack.0))),
                ("from_bytes", u(g.from_bytes)),
                ("to_bytes", u(g.to_bytes)),
                ("steps", u(g.steps)),
                (
                    "steps_from",
                    J::S(if g.from_marks { "marks" } else { "inferred" }.into()),
                ),
                ("slope_bytes_per_step", u(g.bytes_per_step)),
                ("slope_bytes_per_second", g.bytes_per_second.map_or(J::Null, J::F)),
                ("floors", list(&g.floors)),
            ])
        })
        .collect();
    let mut fields = vec![
        ("events", u(r.events)),
        ("bucket_events", u(r.bucket_events)),
        ("times_ns", list(&r.times)),
        ("seqs", list(&r.seqs)),
        ("devices", J::A(devices)),
        (
            "peak",
            J::O(vec![
                ("bytes", u(r.peak.0)),
                ("seq", u(r.peak.1)),
                ("time_ns", u(r.peak.2)),
                (
                    "by_site",
                    J::A(
                        m.peak_sites
                            .iter()
                            .map(|(id, b)| J::O(vec![("stack_id", u(u64::from(id.0))), ("bytes", u(*b))]))
                            .collect(),
                    ),
                ),
            ]),
        ),
        (
            "stacked",
            J::O(vec![
                ("bucket_events", u(r.site_bucket_events)),
                ("times_ns", list(&r.site_times)),
                (
                    "sites",
                    J::A(
                        m.stacked
                            .iter()
                            .map(|(id, v)| J::O(vec![("stack_id", u(u64::from(id.0))), ("live_bytes", list(v))]))
                            .collect(),
                    ),
                ),
            ]),
        ),
        ("growth", J::A(growth)),
        ("churn", J::A(m.churn.iter().map(|id| u(u64::from(id.0))).collect())),
        (
            "pools",
            J::A(
                r.pools
                    .iter()
                    .map(|p| {
                        J::O(vec![
                            ("pool", u(p.pool)),
                            ("device", J::S(device_name(p.device))),
                            ("samples", u(p.samples)),
                            ("reserved_bytes_max", u(p.reserved_max)),
                            ("used_bytes_max", u(p.used_max)),
                            ("reserved_bytes", u(p.reserved)),
                            ("used_bytes", u(p.used)),
                            ("seq", u(p.seq)),
                            ("time_ns", u(p.time_ns)),
                            ("destroyed_seq", p.destroyed.map_or(J::Null, u)),
                        ])
                    })
                    .collect(),
            ),
        ),
        ("failed_allocations", u(r.failed)),
        ("ooms", J::A(ooms)),
        (
            "size_histogram",
            J::A(
                r.histogram
                    .counts
                    .iter()
                    .zip(&r.histogram.bytes)
                    .enumerate()
                    .filter(|(_, (n, _))| **n > 0)
                    .map(|(class, (n, b))| {
                        J::O(vec![
                            ("max_bytes", u(if class >= 64 { u64::MAX } else { 1u64 << class })),
                            ("allocations", u(*n)),
                            ("bytes", u(*b)),
                        ])
                    })
                    .collect(),
            ),
        ),
        ("marks", u(r.marks)),
        (
            "mark_names",
            J::A(
                r.mark_names
                    .iter()
                    .map(|(n, c)| J::O(vec![("name", J::S(n.clone())), ("count", u(*c))]))
                    .collect(),
            ),
        ),
        ("snapshot_ids", list(&r.snapshot_ids)),
        ("sites", J::A(sites)),
    ];
    if let Some(s) = &m.snapshot {
        let rows = s
            .rows
            .iter()
            .map(|(id, a, b)| {
                J::O(vec![
                    ("stack_id", u(u64::from(id.0))),
                    ("bytes", u(*a)),
                    ("to_bytes", u(*b)),
                    ("delta", J::I(delta(*a, *b))),
                ])
            })
            .collect();
        fields.push((
            "snapshot",
            J::O(vec![
                ("id", u(s.from.id)),
                ("reason", J::S(s.from.reason.clone())),
                ("seq", u(s.from.seq)),
                ("time_ns", u(s.from.time_ns)),
                ("live_bytes", u(s.from.live)),
                ("to_id", s.to.as_ref().map_or(J::Null, |t| u(t.id))),
                ("to_live_bytes", s.to.as_ref().map_or(J::Null, |t| u(t.live))),
                (
                    "peak_bytes_between",
                    s.to.as_ref().map_or(J::Null, |t| {
                        u(if t.seq >= s.from.seq { t } else { &s.from }.high_since_first)
                    }),
                ),
                ("sites", J::A(rows)),
            ]),
        ));
    }
    J::O(fields)
}

fn pin_list(pins: &[PinSite]) -> J {
    J::A(
        pins.iter()
            .map(|p| {
                J::O(vec![
                    ("stack_id", J::U(u64::from(p.stack.0))),
                    ("allocations", J::U(p.allocations)),
                    ("bytes", J::U(p.bytes)),
                    ("largest_joined_hole", J::U(p.largest_joined)),
                    ("oldest_seq", J::U(p.oldest_seq)),
                ])
            })
            .collect(),
    )
}

/// `to - from` as a signed number, saturated at the ends of `i64` (byte counts past 2^63 come
/// only from a corrupt trace, but must not overflow).
fn delta(from: u64, to: u64) -> i64 {
    let d = i128::from(to) - i128::from(from);
    i64::try_from(d).unwrap_or(if d > 0 { i64::MAX } else { i64::MIN })
}
