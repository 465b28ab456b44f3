//! The check as one JSON document (`docs/check.md` describes every field). Fields are only ever
//! added, never removed or renamed. Its `leaks` and `findings` have the shape of the report's,
//! so the document can serve as the next run's baseline.

use std::io::{self, Write};

use serde::Serialize;

use crate::model::LeakAt;
use crate::report::{Frame, ProcessReport};

use super::{Change, Counted, Outcome, Tolerance, Violation};

/// The document's schema version.
pub const SCHEMA_VERSION: u64 = 1;

/// Writes the check to `out`, with a final newline.
pub fn write(o: &Outcome, out: &mut impl Write) -> io::Result<()> {
    let mut text = serde_json::to_string_pretty(&document(o)).map_err(io::Error::other)?;
    text.push('\n');
    out.write_all(text.as_bytes())
}

#[derive(Serialize)]
struct Document {
    schema_version: u64,
    result: &'static str,
    exit_code: u8,
    reason: String,
    config: ConfigJ,
    checked: CountedJ,
    violations: Vec<ViolationJ>,
    improvements: Vec<SiteJ>,
    suppressions: Vec<SuppressionJ>,
    baseline: Option<BaselineJ>,
    leaks: Vec<LeakJ>,
    findings: Vec<FindingJ>,
    processes: Vec<ProcessJ>,
    notes: Vec<String>,
}

#[derive(Serialize)]
struct ConfigJ {
    max_leaked_bytes: Option<u64>,
    max_leaks: Option<u64>,
    every_leak_fails: bool,
    fail_on: &'static str,
    baseline: Option<String>,
    tolerance: ToleranceJ,
}

#[derive(Serialize)]
struct ToleranceJ {
    bytes: Option<u64>,
    percent: Option<f64>,
}

#[derive(Serialize)]
struct CountedJ {
    leaked_bytes: u64,
    leaked_allocations: u64,
    leak_sites: u64,
    suppressed_bytes: u64,
    suppressed_sites: u64,
    findings: u64,
    suppressed_findings: u64,
    violations: u64,
}

#[derive(Serialize)]
struct ViolationJ {
    check: &'static str,
    severity: &'static str,
    message: String,
    trace: String,
    pid: Option<u32>,
    site: Option<String>,
    bytes: u64,
    count: u64,
    change: Option<&'static str>,
    baseline_bytes: Option<u64>,
    baseline_allocations: Option<u64>,
    stack: Vec<FrameJ>,
}

#[derive(Serialize)]
struct SiteJ {
    site: String,
    change: &'static str,
    bytes: u64,
    allocations: u64,
    baseline_bytes: Option<u64>,
    baseline_allocations: Option<u64>,
    stack: Vec<FrameJ>,
}

#[derive(Serialize)]
struct ComparedJ {
    site: String,
    change: &'static str,
    bytes: u64,
    allocations: u64,
    baseline_bytes: Option<u64>,
    baseline_allocations: Option<u64>,
}

#[derive(Serialize)]
struct SuppressionJ {
    #[serde(rename = "type")]
    kind: &'static str,
    pattern: String,
    file: String,
    line: usize,
    groups: u64,
    allocations: u64,
    bytes: u64,
}

#[derive(Serialize)]
struct BaselineJ {
    path: String,
    sites: Vec<ComparedJ>,
}

#[derive(Serialize)]
struct LeakJ {
    bytes: u64,
    allocations: u64,
    kind: &'static str,
    stack: Vec<FrameJ>,
    at: &'static str,
    api: String,
    via: Option<String>,
    owner: Option<String>,
    pool: Option<&'static str>,
    pid: Option<u32>,
    trace: String,
    site: String,
    suppressed_by: Option<String>,
}

#[derive(Serialize)]
struct FindingJ {
    check: &'static str,
    severity: &'static str,
    message: String,
    stack: Vec<FrameJ>,
    count: u64,
    api: String,
    ptr: String,
    pid: Option<u32>,
    trace: String,
    site: String,
    suppressed_by: Option<String>,
    fails: bool,
}

#[derive(Serialize)]
struct ProcessJ {
    trace: String,
    pid: Option<u32>,
    exe: Option<String>,
    exit_code: Option<i32>,
    result: &'static str,
    checked: CountedJ,
    notes: Vec<String>,
}

#[derive(Serialize)]
struct FrameJ {
    function: Option<String>,
    file: Option<String>,
    line: Option<u32>,
    module: Option<String>,
    address: String,
    inlined: bool,
    user: bool,
}

fn stack(frames: &[Frame]) -> Vec<FrameJ> {
    frames
        .iter()
        .map(|f| FrameJ {
            function: f.function.clone(),
            file: f.file.clone(),
            line: f.line,
            module: f.module.clone(),
            address: format!("{:#x}", f.address),
            inlined: f.inlined,
            user: f.user,
        })
        .collect()
}

fn counted(c: &Counted, violations: usize) -> CountedJ {
    CountedJ {
        leaked_bytes: c.leaked_bytes,
        leaked_allocations: c.leaked_allocations,
        leak_sites: c.leak_groups,
        suppressed_bytes: c.suppressed_bytes,
        suppressed_sites: c.suppressed_groups,
        findings: c.findings,
        suppressed_findings: c.suppressed_findings,
        violations: violations as u64,
    }
}

fn pid(p: &ProcessReport) -> Option<u32> {
    p.process.as_ref().map(|i| i.pid)
}

fn trace(p: &ProcessReport) -> String {
    p.trace.display().to_string()
}

fn result(failed: bool) -> &'static str {
    if failed {
        "fail"
    } else {
        "pass"
    }
}

fn was(change: Change) -> (Option<u64>, Option<u64>) {
    match change {
        Change::Grew { was } | Change::WithinTolerance { was } | Change::Smaller { was } | Change::Gone { was } => {
            (Some(was.bytes), Some(was.allocations))
        }
        Change::New | Change::Unchanged => (None, None),
    }
}

fn violation(o: &Outcome, v: &Violation) -> ViolationJ {
    let p = &o.report.processes[v.process];
    let (baseline_bytes, baseline_allocations) = match v.change {
        Some(c) => was(c),
        None => (None, None),
    };
    ViolationJ {
        check: v.check,
        severity: v.severity.name(),
        message: v.message.clone(),
        trace: trace(p),
        pid: pid(p),
        site: v.site.as_ref().map(|s| s.as_str().to_string()),
        bytes: v.bytes,
        count: v.count,
        change: v.change.map(Change::name),
        baseline_bytes,
        baseline_allocations,
        stack: stack(&v.stack),
    }
}

fn document(o: &Outcome) -> Document {
    let config = &o.config;
    let supp = &config.suppressions.list;
    let suppressed_by = |i: Option<usize>| i.map(|i| supp[i].text());
    let mut leaks = Vec::new();
    let mut findings = Vec::new();
    for (i, p) in o.report.processes.iter().enumerate() {
        for (h, s) in p.leaks.iter().zip(&o.leaks[i]) {
            leaks.push(LeakJ {
                bytes: h.bytes,
                allocations: h.allocations,
                kind: h.kind.name(),
                stack: stack(&h.stack),
                at: match h.at {
                    LeakAt::Exit => "exit",
                    LeakAt::Teardown { .. } => "teardown",
                },
                api: h.api.to_string(),
                via: (h.via != gpuleak_format::Api::NONE).then(|| h.via.to_string()),
                owner: h.owner.clone(),
                pool: h.pool.map(|p| p.name()),
                pid: pid(p),
                trace: trace(p),
                site: s.site.as_str().to_string(),
                suppressed_by: suppressed_by(s.suppressed_by),
            });
        }
        for (j, (f, s)) in p.findings.iter().zip(&o.findings[i]).enumerate() {
            let fails = o.violations_of(i).any(|v| v.finding == Some(j));
            findings.push(FindingJ {
                check: f.check,
                severity: f.severity.name(),
                message: f.message.clone(),
                stack: stack(&f.stack),
                count: f.count,
                api: f.api.to_string(),
                ptr: format!("{:#x}", f.ptr),
                pid: pid(p),
                trace: trace(p),
                site: s.site.as_str().to_string(),
                suppressed_by: suppressed_by(s.suppressed_by),
                fails,
            });
        }
    }
    // Largest first over every process, as in the report; stable within equal sizes.
    leaks.sort_by_key(|l| std::cmp::Reverse(l.bytes));

    let site = |(key, now, change): &(super::SiteKey, super::Totals, Change), stack_of: Vec<FrameJ>| {
        let (baseline_bytes, baseline_allocations) = match change {
            Change::Unchanged => (Some(now.bytes), Some(now.allocations)),
            c => was(*c),
        };
        SiteJ {
            site: key.as_str().to_string(),
            change: change.name(),
            bytes: now.bytes,
            allocations: now.allocations,
            baseline_bytes,
            baseline_allocations,
            stack: stack_of,
        }
    };
    let improvements = o
        .improvements
        .iter()
        .map(|i| site(&(i.site.clone(), i.now, i.change), stack(&i.stack)))
        .collect();
    let baseline = config.baseline.as_ref().map(|b| BaselineJ {
        path: b.path.display().to_string(),
        sites: o
            .changes
            .iter()
            .map(|c| {
                let s = site(c, Vec::new());
                ComparedJ {
                    site: s.site,
                    change: s.change,
                    bytes: s.bytes,
                    allocations: s.allocations,
                    baseline_bytes: s.baseline_bytes,
                    baseline_allocations: s.baseline_allocations,
                }
            })
            .collect(),
    });

    Document {
        schema_version: SCHEMA_VERSION,
        result: result(!o.passed()),
        exit_code: o.exit_code(),
        reason: o.reason(),
        config: ConfigJ {
            max_leaked_bytes: config.max_leaked_bytes,
            max_leaks: config.max_leaks,
            every_leak_fails: config.every_leak_fails(),
            fail_on: config.fail_on.name(),
            baseline: config.baseline.as_ref().map(|b| b.path.display().to_string()),
            tolerance: match config.tolerance {
                Tolerance::None => ToleranceJ {
                    bytes: Some(0),
                    percent: None,
                },
                Tolerance::Bytes(b) => ToleranceJ {
                    bytes: Some(b),
                    percent: None,
                },
                Tolerance::Percent(p) => ToleranceJ {
                    bytes: None,
                    percent: Some(p),
                },
            },
        },
        checked: counted(&o.total, o.violations.len()),
        violations: o.violations.iter().map(|v| violation(o, v)).collect(),
        improvements,
        suppressions: supp
            .iter()
            .zip(&o.usage)
            .map(|(s, u)| SuppressionJ {
                kind: s.kind,
                pattern: s.pattern.clone(),
                file: s.source.clone(),
                line: s.line,
                groups: u.groups,
                allocations: u.allocations,
                bytes: u.bytes,
            })
            .collect(),
        baseline,
        leaks,
        findings,
        processes: o
            .report
            .processes
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let n = o.violations_of(i).count();
                ProcessJ {
                    trace: trace(p),
                    pid: pid(p),
                    exe: p.process.as_ref().map(|i| i.exe.clone()),
                    exit_code: p.exit_code,
                    result: result(n > 0),
                    checked: counted(&o.counted[i], n),
                    notes: p.notes.clone(),
                }
            })
            .collect(),
        notes: o
            .report
            .processes
            .iter()
            .flat_map(|p| p.notes.iter().cloned())
            .collect(),
    }
}
