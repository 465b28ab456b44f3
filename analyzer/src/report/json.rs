//! The report as one JSON document (every field in `docs/report.md`).
//!
//! The contract's fields come first in each object; the fields gpuleak adds follow them.
//! Fields are only ever added, never removed or renamed.

use std::io::{self, Write};

use gpuleak_format::Api;

use crate::model::LeakAt;

use super::{Extra, Finding, Held, MergedSite, ProcessReport, Report, Summary};
use crate::json::{opt_str, render, stack, Layout, J};

/// The report's schema version.
pub const SCHEMA_VERSION: u64 = 1;

fn api(a: Api) -> J {
    if a == Api::NONE {
        J::Null
    } else {
        J::S(a.to_string())
    }
}

/// Writes `report` to `out`, with a final newline.
pub fn write(report: &Report, out: &mut impl Write) -> io::Result<()> {
    let mut s = String::with_capacity(4096);
    render(&document(report), Layout::Report, &mut s);
    s.push('\n');
    out.write_all(s.as_bytes())
}

fn document(report: &Report) -> J {
    let pid_of = |p: &ProcessReport| p.process.as_ref().map(|p| p.pid);
    let mut leaks: Vec<(&Held, Option<u32>)> = Vec::new();
    let mut pool: Vec<(&Held, Option<u32>)> = Vec::new();
    let mut unreleased: Vec<(&Held, Option<u32>)> = Vec::new();
    let mut findings = Vec::new();
    let mut notes = Vec::new();
    for p in &report.processes {
        leaks.extend(p.leaks.iter().map(|h| (h, pid_of(p))));
        pool.extend(p.held_by_pool.iter().map(|h| (h, pid_of(p))));
        unreleased.extend(p.unreleased.iter().map(|h| (h, pid_of(p))));
        findings.extend(p.findings.iter().map(|f| finding(f, pid_of(p))));
        notes.extend(p.notes.iter().map(|n| J::S(n.clone())));
    }
    for list in [&mut leaks, &mut pool, &mut unreleased] {
        // Stable: processes keep their own order among equal sizes.
        list.sort_by_key(|h| std::cmp::Reverse(h.0.bytes));
    }
    let held_list = |list: Vec<(&Held, Option<u32>)>| J::A(list.into_iter().map(|(h, pid)| held(h, pid)).collect());
    let mut doc = vec![
        ("schema_version", J::U(SCHEMA_VERSION)),
        ("summary", summary(&report.summary)),
        ("leaks", held_list(leaks)),
        ("findings", J::A(findings)),
        ("held_by_pool", held_list(pool)),
        ("unreleased", held_list(unreleased)),
        ("notes", J::A(notes)),
    ];
    if let [only] = report.processes.as_slice() {
        doc.push(("process", process(only)));
    }
    doc.push(("processes", J::A(report.processes.iter().map(process).collect())));
    if report.processes.len() > 1 {
        doc.push((
            "merged_leaks",
            J::A(report.merged.iter().map(|m| merged(m, report)).collect()),
        ));
        let (sites, bytes) = report.merged_omitted;
        doc.push((
            "merged_omitted",
            J::O(vec![("sites", J::U(sites)), ("bytes", J::U(bytes))]),
        ));
    }
    let ranks = super::ranks::table(report);
    if !ranks.is_empty() {
        doc.push(("ranks", J::A(ranks.iter().map(|r| rank_row(r, report)).collect())));
    }
    J::O(doc)
}

/// A row of the per-rank table.
fn rank_row(r: &super::ranks::RankRow, report: &Report) -> J {
    let p = &report.processes[r.process];
    let info = p.process.as_ref();
    rank_row_of(
        r,
        info.map(|i| u64::from(i.pid)),
        info.map(|i| i.hostname.as_str()),
        &p.trace.display().to_string(),
    )
}

/// A row of the per-rank table, for the process `pid` on `hostname` traced into `trace`.
pub(crate) fn rank_row_of(r: &super::ranks::RankRow, pid: Option<u64>, hostname: Option<&str>, trace: &str) -> J {
    J::O(vec![
        ("rank", J::U(r.rank)),
        ("pid", pid.map_or(J::Null, J::U)),
        ("hostname", opt_str(hostname)),
        ("trace", J::S(trace.to_string())),
        ("peak_bytes", J::U(r.peak_bytes)),
        ("leaked_bytes", J::U(r.leaked_bytes)),
        ("growth_bytes", r.growth_bytes.map_or(J::Null, J::U)),
        ("findings", J::U(r.findings)),
        (
            "outliers",
            J::A(r.outliers.iter().map(|o| J::S(o.to_string())).collect()),
        ),
    ])
}

/// The process's place in its job (`null` when its launcher gave none).
fn rank(p: &ProcessReport) -> J {
    p.process.as_ref().and_then(|i| i.rank.as_ref()).map_or(J::Null, |r| {
        J::O(vec![
            ("rank", J::U(r.rank)),
            ("local_rank", r.local_rank.map_or(J::Null, J::U)),
            ("world_size", r.world_size.map_or(J::Null, J::U)),
            ("launcher", J::S(r.launcher.clone())),
        ])
    })
}

/// A merged leak site: the contract's group fields first, then who leaks from it.
fn merged(m: &MergedSite, report: &Report) -> J {
    let per_process = m
        .processes
        .iter()
        .map(|p| {
            let r = &report.processes[p.process];
            J::O(vec![
                ("pid", r.process.as_ref().map_or(J::Null, |i| J::U(u64::from(i.pid)))),
                ("trace", J::S(r.trace.display().to_string())),
                ("bytes", J::U(p.bytes)),
                ("allocations", J::U(p.allocations)),
                (
                    "rank",
                    r.process
                        .as_ref()
                        .and_then(|i| i.rank.as_ref())
                        .map_or(J::Null, |k| J::U(k.rank)),
                ),
            ])
        })
        .collect();
    J::O(vec![
        ("bytes", J::U(m.bytes)),
        ("allocations", J::U(m.allocations)),
        ("kind", J::S(m.kind.name().to_string())),
        ("stack", stack(&m.stack)),
        ("site", J::S(m.site.as_str().to_string())),
        ("process_count", J::U(m.processes.len() as u64)),
        ("api", api(m.api)),
        ("via", api(m.via)),
        ("per_process", J::A(per_process)),
    ])
}

fn summary(s: &Summary) -> J {
    J::O(vec![
        ("allocations", J::U(s.allocations)),
        ("frees", J::U(s.frees)),
        ("retains", J::U(s.retains)),
        ("leaked_allocations", J::U(s.leaked_allocations)),
        ("leaked_bytes", J::U(s.leaked_bytes)),
        ("peak_bytes", J::U(s.peak_bytes)),
        ("leaked_bytes_at_exit", J::U(s.leaked_bytes_at_exit)),
        ("leaked_bytes_at_teardown", J::U(s.leaked_bytes_at_teardown)),
        ("failed_allocations", J::U(s.failed_allocations)),
        ("pool_allocations", J::U(s.pool_allocations)),
        ("pool_bytes", J::U(s.pool_bytes)),
        ("unreleased_allocations", J::U(s.unreleased_allocations)),
        ("unreleased_bytes", J::U(s.unreleased_bytes)),
        ("findings", J::U(s.findings)),
    ])
}

fn process(p: &ProcessReport) -> J {
    let info = p.process.as_ref();
    let mut fields = vec![
        ("pid", info.map_or(J::Null, |i| J::U(u64::from(i.pid)))),
        ("ppid", info.map_or(J::Null, |i| J::U(u64::from(i.ppid)))),
        ("exe", opt_str(info.map(|i| i.exe.as_str()))),
        (
            "args",
            J::A(info.map_or(Vec::new(), |i| i.args.iter().map(|a| J::S(a.clone())).collect())),
        ),
        ("trace", J::S(p.trace.display().to_string())),
        ("exited", J::Bool(p.exited)),
        ("exit_code", p.exit_code.map_or(J::Null, |c| J::I(i64::from(c)))),
        ("summary", summary(&p.summary)),
        ("omitted", omitted(p)),
        ("notes", J::A(p.notes.iter().map(|n| J::S(n.clone())).collect())),
        (
            "memory",
            p.memory.as_deref().map_or(J::Null, super::memory::json::memory),
        ),
        ("hostname", opt_str(info.map(|i| i.hostname.as_str()))),
        ("rank", rank(p)),
        (
            "symbol_notes",
            J::A(p.symbol_notes.iter().map(|n| J::S(n.clone())).collect()),
        ),
    ];
    // Only in the reports of programs whose framework wrote its allocator state.
    if !p.frameworks.is_empty() {
        fields.push(("frameworks", J::A(p.frameworks.iter().map(framework).collect())));
    }
    J::O(fields)
}

/// One framework state joined with the driver (`docs/frameworks.md`).
fn framework(v: &crate::frameworks::FrameworkView) -> J {
    let device = |d: &crate::frameworks::join::DeviceView| {
        J::O(vec![
            ("device", J::I(i64::from(d.device))),
            ("segments", J::U(d.segments)),
            ("reserved_bytes", J::U(d.reserved)),
            ("live_tensors", J::U(d.tensors)),
            ("live_bytes", J::U(d.live_bytes)),
            ("requested_bytes", J::U(d.requested_bytes)),
            ("workspaces", J::U(d.workspaces)),
            ("workspace_bytes", J::U(d.workspace_bytes)),
            ("pending_free_bytes", J::U(d.pending_free_bytes)),
            ("cached_free_bytes", J::U(d.cached_free_bytes)),
            ("largest_free_block", J::U(d.largest_free_block)),
            ("unmatched_segments", J::U(d.unmatched_segments)),
            (
                "counters",
                d.counters.map_or(J::Null, |c| {
                    J::O(vec![
                        ("allocated", J::U(c.allocated)),
                        ("reserved", J::U(c.reserved)),
                        ("peak_reserved", J::U(c.peak_reserved)),
                    ])
                }),
            ),
            (
                "sites",
                J::A(
                    d.sites
                        .iter()
                        .take(crate::frameworks::join::TOP_SITES)
                        .map(|s| {
                            J::O(vec![
                                ("line", J::S(s.line())),
                                ("bytes", J::U(s.bytes)),
                                ("tensors", J::U(s.tensors)),
                                ("stack", stack(&super::frameworks::frames(&s.frames, s.user))),
                            ])
                        })
                        .collect(),
                ),
            ),
            (
                "sites_omitted",
                J::U(d.sites.len().saturating_sub(crate::frameworks::join::TOP_SITES) as u64),
            ),
        ])
    };
    J::O(vec![
        ("framework", J::S(v.framework.clone())),
        ("state", J::U(v.state)),
        ("reason", J::S(v.reason.clone())),
        ("snapshot", if v.snapshot == 0 { J::Null } else { J::U(v.snapshot) }),
        ("summary", J::S(crate::frameworks::join::summary_line(v))),
        ("devices", J::A(v.devices.iter().map(device).collect())),
        (
            "outside",
            J::A(
                v.outside
                    .iter()
                    .map(|o| {
                        J::O(vec![
                            ("owner", J::S(o.owner.to_string())),
                            ("bytes", J::U(o.bytes)),
                            ("allocations", J::U(o.allocations)),
                        ])
                    })
                    .collect(),
            ),
        ),
    ])
}

fn omitted(p: &ProcessReport) -> J {
    let pair = |(groups, bytes): (u64, u64)| J::O(vec![("groups", J::U(groups)), ("bytes", J::U(bytes))]);
    J::O(vec![
        ("leaks", pair(p.omitted[0])),
        ("held_by_pool", pair(p.omitted[1])),
        ("unreleased", pair(p.omitted[2])),
    ])
}

fn held(h: &Held, pid: Option<u32>) -> J {
    let (at, teardown) = match h.at {
        LeakAt::Exit => ("exit", J::Null),
        LeakAt::Teardown { api: a, ctx } => (
            "teardown",
            J::O(vec![("api", api(a)), ("ctx", J::S(format!("{:#x}", ctx.0)))]),
        ),
    };
    J::O(vec![
        ("bytes", J::U(h.bytes)),
        ("allocations", J::U(h.allocations)),
        ("kind", J::S(h.kind.name().to_string())),
        ("stack", stack(&h.stack)),
        ("at", J::S(at.to_string())),
        ("teardown", teardown),
        ("api", api(h.api)),
        ("via", api(h.via)),
        ("owner", opt_str(h.owner.as_deref())),
        ("pool", opt_str(h.pool.map(|p| p.name()))),
        ("released_but_mapped", J::U(h.released_but_mapped)),
        ("retains", J::U(h.retains)),
        ("releases_due", J::U(h.releases_due)),
        ("stack_id", J::U(u64::from(h.stack_id.0))),
        ("tid", J::U(u64::from(h.tid))),
        ("pid", pid.map_or(J::Null, |p| J::U(u64::from(p)))),
    ])
}

fn finding(f: &Finding, pid: Option<u32>) -> J {
    let mut fields = vec![
        ("check", J::S(f.check.to_string())),
        ("severity", J::S(f.severity.name().to_string())),
        ("message", J::S(f.message.clone())),
        ("stack", stack(&f.stack)),
        ("count", J::U(f.count)),
        ("api", api(f.api)),
        ("ptr", J::S(format!("{:#x}", f.ptr))),
        ("result", J::U(u64::from(f.result))),
        ("allocation_stack", f.allocation_stack.as_deref().map_or(J::Null, stack)),
        ("first_free_stack", f.first_free_stack.as_deref().map_or(J::Null, stack)),
        ("pid", pid.map_or(J::Null, |p| J::U(u64::from(p)))),
        ("stack_role", opt_str(f.stack_role)),
        (
            "related_stacks",
            J::A(
                f.related
                    .iter()
                    .map(|r| J::O(vec![("role", J::S(r.role.to_string())), ("stack", stack(&r.stack))]))
                    .collect(),
            ),
        ),
    ];
    for (name, value) in &f.extra {
        fields.push((
            name,
            match value {
                Extra::Null => J::Null,
                Extra::U(n) => J::U(*n),
                Extra::F(x) => J::F(*x),
                Extra::S(t) => J::S(t.clone()),
            },
        ));
    }
    J::O(fields)
}
