//! The check as one JSON document (`docs/check.md` describes every field). Fields are only ever
//! added, never removed or renamed. Its `leaks` and `findings` have the shape of the report's,
//! so the document can serve as the next run's baseline.

use std::io::{self, Write};

use crate::json::{opt_str, render, stack, Layout, J};
use crate::model::LeakAt;
use crate::report::ProcessReport;

use super::{Change, Counted, Outcome, Tolerance, Violation};

/// The document's schema version.
pub const SCHEMA_VERSION: u64 = 1;

/// Writes the check to `out`, with a final newline.
pub fn write(o: &Outcome, out: &mut impl Write) -> io::Result<()> {
    let mut text = String::with_capacity(4096);
    render(&document(o), Layout::Expanded, &mut text);
    text.push('\n');
    out.write_all(text.as_bytes())
}

fn opt_u(n: Option<u64>) -> J {
    n.map_or(J::Null, J::U)
}

fn text(s: impl Into<String>) -> J {
    J::S(s.into())
}

fn strings(list: impl IntoIterator<Item = String>) -> J {
    J::A(list.into_iter().map(J::S).collect())
}

fn counted(c: &Counted, violations: usize) -> J {
    J::O(vec![
        ("leaked_bytes", J::U(c.leaked_bytes)),
        ("leaked_allocations", J::U(c.leaked_allocations)),
        ("leak_sites", J::U(c.leak_groups)),
        ("suppressed_bytes", J::U(c.suppressed_bytes)),
        ("suppressed_sites", J::U(c.suppressed_groups)),
        ("findings", J::U(c.findings)),
        ("suppressed_findings", J::U(c.suppressed_findings)),
        ("violations", J::U(violations as u64)),
    ])
}

fn pid(p: &ProcessReport) -> J {
    opt_u(p.process.as_ref().map(|i| u64::from(i.pid)))
}

fn trace(p: &ProcessReport) -> J {
    J::S(p.trace.display().to_string())
}

fn result(failed: bool) -> J {
    text(if failed { "fail" } else { "pass" })
}

fn was(change: Change) -> (Option<u64>, Option<u64>) {
    match change {
        Change::Grew { was } | Change::WithinTolerance { was } | Change::Smaller { was } | Change::Gone { was } => {
            (Some(was.bytes), Some(was.allocations))
        }
        Change::New | Change::Unchanged => (None, None),
    }
}

fn violation(o: &Outcome, v: &Violation) -> J {
    let p = &o.report.processes[v.process];
    let (baseline_bytes, baseline_allocations) = match v.change {
        Some(c) => was(c),
        None => (None, None),
    };
    J::O(vec![
        ("check", text(v.check)),
        ("severity", text(v.severity.name())),
        ("message", text(v.message.as_str())),
        ("trace", trace(p)),
        ("pid", pid(p)),
        ("site", opt_str(v.site.as_ref().map(|s| s.as_str()))),
        ("bytes", J::U(v.bytes)),
        ("count", J::U(v.count)),
        ("change", opt_str(v.change.map(Change::name))),
        ("baseline_bytes", opt_u(baseline_bytes)),
        ("baseline_allocations", opt_u(baseline_allocations)),
        ("stack", stack(&v.stack)),
    ])
}

/// A site compared with the baseline: its fields, and its stack when `stack_of` is given.
fn site((key, now, change): &(super::SiteKey, super::Totals, Change), stack_of: Option<J>) -> J {
    let (baseline_bytes, baseline_allocations) = match change {
        Change::Unchanged => (Some(now.bytes), Some(now.allocations)),
        c => was(*c),
    };
    let mut fields = vec![
        ("site", text(key.as_str())),
        ("change", text(change.name())),
        ("bytes", J::U(now.bytes)),
        ("allocations", J::U(now.allocations)),
        ("baseline_bytes", opt_u(baseline_bytes)),
        ("baseline_allocations", opt_u(baseline_allocations)),
    ];
    if let Some(stack_of) = stack_of {
        fields.push(("stack", stack_of));
    }
    J::O(fields)
}

fn tolerance(t: Tolerance) -> J {
    let (bytes, percent) = match t {
        Tolerance::None => (J::U(0), J::Null),
        Tolerance::Bytes(b) => (J::U(b), J::Null),
        Tolerance::Percent(p) => (J::Null, J::F(p)),
    };
    J::O(vec![("bytes", bytes), ("percent", percent)])
}

fn document(o: &Outcome) -> J {
    let config = &o.config;
    let supp = &config.suppressions.list;
    let suppressed_by = |i: Option<usize>| i.map_or(J::Null, |i| J::S(supp[i].text()));
    let mut leaks = Vec::new();
    let mut findings = Vec::new();
    for (i, p) in o.report.processes.iter().enumerate() {
        for (h, s) in p.leaks.iter().zip(&o.leaks[i]) {
            let leak = J::O(vec![
                ("bytes", J::U(h.bytes)),
                ("allocations", J::U(h.allocations)),
                ("kind", text(h.kind.name())),
                ("stack", stack(&h.stack)),
                (
                    "at",
                    text(match h.at {
                        LeakAt::Exit => "exit",
                        LeakAt::Teardown { .. } => "teardown",
                    }),
                ),
                ("api", J::S(h.api.to_string())),
                (
                    "via",
                    if h.via == gpuleak_format::Api::NONE {
                        J::Null
                    } else {
                        J::S(h.via.to_string())
                    },
                ),
                ("owner", opt_str(h.owner.as_deref())),
                ("pool", opt_str(h.pool.map(|p| p.name()))),
                ("pid", pid(p)),
                ("trace", trace(p)),
                ("site", text(s.site.as_str())),
                ("suppressed_by", suppressed_by(s.suppressed_by)),
            ]);
            leaks.push((h.bytes, leak));
        }
        for (j, (f, s)) in p.findings.iter().zip(&o.findings[i]).enumerate() {
            let fails = o.violations_of(i).any(|v| v.finding == Some(j));
            findings.push(J::O(vec![
                ("check", text(f.check)),
                ("severity", text(f.severity.name())),
                ("message", text(f.message.as_str())),
                ("stack", stack(&f.stack)),
                ("count", J::U(f.count)),
                ("api", J::S(f.api.to_string())),
                ("ptr", J::S(format!("{:#x}", f.ptr))),
                ("pid", pid(p)),
                ("trace", trace(p)),
                ("site", text(s.site.as_str())),
                ("suppressed_by", suppressed_by(s.suppressed_by)),
                ("fails", J::Bool(fails)),
            ]));
        }
    }
    // Largest first over every process, as in the report; stable within equal sizes.
    leaks.sort_by_key(|(bytes, _)| std::cmp::Reverse(*bytes));

    let improvements = o
        .improvements
        .iter()
        .map(|i| site(&(i.site.clone(), i.now, i.change), Some(stack(&i.stack))))
        .collect();
    let baseline = config.baseline.as_ref().map_or(J::Null, |b| {
        J::O(vec![
            ("path", J::S(b.path.display().to_string())),
            ("sites", J::A(o.changes.iter().map(|c| site(c, None)).collect())),
        ])
    });
    let processes = o
        .report
        .processes
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let n = o.violations_of(i).count();
            J::O(vec![
                ("trace", trace(p)),
                ("pid", pid(p)),
                ("exe", opt_str(p.process.as_ref().map(|i| i.exe.as_str()))),
                ("exit_code", p.exit_code.map_or(J::Null, |c| J::I(i64::from(c)))),
                ("result", result(n > 0)),
                ("checked", counted(&o.counted[i], n)),
                ("notes", strings(p.notes.iter().cloned())),
            ])
        })
        .collect();

    J::O(vec![
        ("schema_version", J::U(SCHEMA_VERSION)),
        ("result", result(!o.passed())),
        ("exit_code", J::U(u64::from(o.exit_code()))),
        ("reason", J::S(o.reason())),
        (
            "config",
            J::O(vec![
                ("max_leaked_bytes", opt_u(config.max_leaked_bytes)),
                ("max_leaks", opt_u(config.max_leaks)),
                ("every_leak_fails", J::Bool(config.every_leak_fails())),
                ("fail_on", text(config.fail_on.name())),
                (
                    "baseline",
                    opt_str(
                        config
                            .baseline
                            .as_ref()
                            .map(|b| b.path.display().to_string())
                            .as_deref(),
                    ),
                ),
                ("tolerance", tolerance(config.tolerance)),
            ]),
        ),
        ("checked", counted(&o.total, o.violations.len())),
        (
            "violations",
            J::A(o.violations.iter().map(|v| violation(o, v)).collect()),
        ),
        ("improvements", J::A(improvements)),
        (
            "suppressions",
            J::A(
                supp.iter()
                    .zip(&o.usage)
                    .map(|(s, u)| {
                        J::O(vec![
                            ("type", text(s.kind)),
                            ("pattern", text(s.pattern.as_str())),
                            ("file", text(s.source.as_str())),
                            ("line", J::U(s.line as u64)),
                            ("groups", J::U(u.groups)),
                            ("allocations", J::U(u.allocations)),
                            ("bytes", J::U(u.bytes)),
                        ])
                    })
                    .collect(),
            ),
        ),
        ("baseline", baseline),
        ("leaks", J::A(leaks.into_iter().map(|(_, l)| l).collect())),
        ("findings", J::A(findings)),
        ("processes", J::A(processes)),
        (
            "notes",
            strings(o.report.processes.iter().flat_map(|p| p.notes.iter().cloned())),
        ),
    ])
}
