//! `gpuleak check`: a CI gate over one or more reports. It fails (exit 1) on leaks over the
//! limits, on leak sites that are new or grew since a baseline, and on findings, less what a
//! LeakSanitizer-style suppressions file silences; it writes text, JSON, JUnit XML or SARIF.
//! `docs/check.md` describes the command line and every output.
//!
//! ```no_run
//! use gpuleak_analyzer::check::{self, Config};
//! use gpuleak_analyzer::report::{self, Options, Report};
//! use gpuleak_analyzer::TraceFile;
//!
//! let file = TraceFile::open("app.trace".as_ref()).unwrap();
//! let report = Report::new(vec![report::from_file(&file, &Options::default())]);
//! let outcome = check::evaluate(report, &Config::default());
//! let mut out = Vec::new();
//! check::text::write(&outcome, &mut out).unwrap();
//! std::process::exit(outcome.exit_code().into());
//! ```

pub mod baseline;
pub mod json;
pub mod junit;
pub mod sarif;
pub mod size;
pub mod suppress;
pub mod text;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use crate::report::{Frame, Held, ProcessReport, Report, Severity};

pub use crate::site::{self, SiteKey};
pub use baseline::{Baseline, Change, Totals};
pub use size::Tolerance;
pub use suppress::Suppressions;

/// Exit status when nothing failed.
pub const EXIT_CLEAN: u8 = 0;
/// Exit status when something failed.
pub const EXIT_FINDINGS: u8 = 1;
/// Exit status on errors (bad arguments, unreadable files), set by the command line.
pub const EXIT_ERROR: u8 = 2;

/// What fails a run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Most leaked bytes a process may have (unsuppressed).
    pub max_leaked_bytes: Option<u64>,
    /// Most leaked allocations a process may have (unsuppressed).
    pub max_leaks: Option<u64>,
    /// Findings of this severity or worse fail.
    pub fail_on: Severity,
    /// What is silenced.
    pub suppressions: Suppressions,
    /// The earlier run to compare with.
    pub baseline: Option<Baseline>,
    /// How much a site may grow over the baseline.
    pub tolerance: Tolerance,
}

impl Default for Config {
    fn default() -> Config {
        Config {
            max_leaked_bytes: None,
            max_leaks: None,
            fail_on: Severity::Error,
            suppressions: Suppressions::default(),
            baseline: None,
            tolerance: Tolerance::None,
        }
    }
}

impl Config {
    /// Whether every leak site fails by itself: when no limit and no baseline were given.
    pub fn every_leak_fails(&self) -> bool {
        self.max_leaked_bytes.is_none() && self.max_leaks.is_none() && self.baseline.is_none()
    }
}

/// What the check says of one leak group or finding.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Status {
    /// Its site.
    pub site: SiteKey,
    /// The suppression that silenced it (an index into `Config::suppressions.list`).
    pub suppressed_by: Option<usize>,
}

/// A reason the run fails.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The rule: `leak`, `leak-growth`, `leak-limit`, or a finding's check (`bad-free`).
    pub check: &'static str,
    /// How bad.
    pub severity: Severity,
    /// The process (an index into the report's processes) it belongs to: for a site summed
    /// over processes, the first process that has it.
    pub process: usize,
    /// One sentence.
    pub message: String,
    /// The site, when the violation has one (every check but `leak-limit`).
    pub site: Option<SiteKey>,
    /// Its stack (for `leak-limit`: the process's largest leak's).
    pub stack: Vec<Frame>,
    /// Bytes involved (a finding: 0).
    pub bytes: u64,
    /// Allocations involved, or a finding's occurrences.
    pub count: u64,
    /// How it compares with the baseline, when one was given.
    pub change: Option<Change>,
    /// For a finding: its index in its process's findings.
    pub finding: Option<usize>,
}

/// A baseline site that shrank or disappeared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Improvement {
    /// The site.
    pub site: SiteKey,
    /// `Smaller` or `Gone`.
    pub change: Change,
    /// This run's totals.
    pub now: Totals,
    /// The site's stack (this run's, or the baseline's when gone).
    pub stack: Vec<Frame>,
}

/// How much a suppression silenced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Usage {
    /// Leak groups, or findings.
    pub groups: u64,
    /// Allocations, or finding occurrences.
    pub allocations: u64,
    /// Bytes (0 for findings).
    pub bytes: u64,
}

/// Totals of one process after suppressions.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Counted {
    /// Unsuppressed leaked bytes.
    pub leaked_bytes: u64,
    /// Unsuppressed leaked allocations.
    pub leaked_allocations: u64,
    /// Unsuppressed leak groups.
    pub leak_groups: u64,
    /// Suppressed leak bytes.
    pub suppressed_bytes: u64,
    /// Suppressed leak groups.
    pub suppressed_groups: u64,
    /// Unsuppressed findings.
    pub findings: u64,
    /// Suppressed findings.
    pub suppressed_findings: u64,
}

impl Counted {
    fn add(&mut self, o: &Counted) {
        self.leaked_bytes = self.leaked_bytes.saturating_add(o.leaked_bytes);
        self.leaked_allocations = self.leaked_allocations.saturating_add(o.leaked_allocations);
        self.leak_groups += o.leak_groups;
        self.suppressed_bytes = self.suppressed_bytes.saturating_add(o.suppressed_bytes);
        self.suppressed_groups += o.suppressed_groups;
        self.findings += o.findings;
        self.suppressed_findings += o.suppressed_findings;
    }
}

/// The check of a report.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// The report checked.
    pub report: Report,
    /// What was asked.
    pub config: Config,
    /// Per process, per leak group: its site and suppression.
    pub leaks: Vec<Vec<Status>>,
    /// Per process, per finding: its site and suppression.
    pub findings: Vec<Vec<Status>>,
    /// Per process: totals after suppressions.
    pub counted: Vec<Counted>,
    /// Sum of `counted`.
    pub total: Counted,
    /// Per suppression (as in `config.suppressions.list`): what it silenced.
    pub usage: Vec<Usage>,
    /// With a baseline: every site of this run and the baseline, compared.
    pub changes: Vec<(SiteKey, Totals, Change)>,
    /// Why the run fails; empty when it passes.
    pub violations: Vec<Violation>,
    /// Baseline sites that shrank or disappeared.
    pub improvements: Vec<Improvement>,
}

impl Outcome {
    /// Whether the run passes.
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// 0 when it passes, 1 when it fails.
    pub fn exit_code(&self) -> u8 {
        if self.passed() {
            EXIT_CLEAN
        } else {
            EXIT_FINDINGS
        }
    }

    /// The violations of one process.
    pub fn violations_of(&self, process: usize) -> impl Iterator<Item = &Violation> {
        self.violations.iter().filter(move |v| v.process == process)
    }

    /// Why the run failed, or that it passed: `2 new leak sites, 1 bad-free`.
    pub fn reason(&self) -> String {
        if self.passed() {
            return "passed".to_string();
        }
        let mut counts: Vec<(&str, u64)> = Vec::new();
        // A process over both limits is one process over a limit.
        let mut over_limit = Vec::new();
        for v in &self.violations {
            if v.check == "leak-limit" {
                if over_limit.contains(&v.process) {
                    continue;
                }
                over_limit.push(v.process);
            }
            let what = match (v.check, v.change) {
                ("leak", Some(Change::New)) => "new leak site",
                ("leak", _) => "leak site",
                ("leak-growth", _) => "grown leak site",
                ("leak-limit", _) => "process over a leak limit",
                (check, _) => check,
            };
            match counts.iter_mut().find(|(w, _)| *w == what) {
                Some((_, n)) => *n += 1,
                None => counts.push((what, 1)),
            }
        }
        let parts: Vec<String> = counts
            .iter()
            .map(|&(what, n)| match (n, what) {
                (1, _) => format!("1 {what}"),
                (_, "process over a leak limit") => format!("{n} processes over a leak limit"),
                (_, w) if w.ends_with("site") => format!("{n} {w}s"),
                _ => format!("{n} {what}"),
            })
            .collect();
        format!("failed: {}", parts.join(", "))
    }
}

/// Checks a report.
pub fn evaluate(report: Report, config: &Config) -> Outcome {
    let supp = &config.suppressions;
    let mut usage = vec![Usage::default(); supp.list.len()];
    let mut leaks = Vec::with_capacity(report.processes.len());
    let mut findings = Vec::with_capacity(report.processes.len());
    let mut counted = Vec::with_capacity(report.processes.len());
    for p in &report.processes {
        let mut c = Counted::default();
        let statuses: Vec<Status> = p
            .leaks
            .iter()
            .map(|h| {
                let suppressed_by = supp.find("leak", &h.stack);
                match suppressed_by {
                    Some(i) => {
                        usage[i].groups += 1;
                        usage[i].allocations = usage[i].allocations.saturating_add(h.allocations);
                        usage[i].bytes = usage[i].bytes.saturating_add(h.bytes);
                        c.suppressed_groups += 1;
                        c.suppressed_bytes = c.suppressed_bytes.saturating_add(h.bytes);
                    }
                    None => {
                        c.leak_groups += 1;
                        c.leaked_allocations = c.leaked_allocations.saturating_add(h.allocations);
                        c.leaked_bytes = c.leaked_bytes.saturating_add(h.bytes);
                    }
                }
                Status {
                    site: SiteKey::of(&h.stack),
                    suppressed_by,
                }
            })
            .collect();
        leaks.push(statuses);
        let statuses: Vec<Status> = p
            .findings
            .iter()
            .map(|f| {
                let suppressed_by = supp.find_finding(f);
                match suppressed_by {
                    Some(i) => {
                        usage[i].groups += 1;
                        usage[i].allocations = usage[i].allocations.saturating_add(f.count);
                        c.suppressed_findings += 1;
                    }
                    None => c.findings += 1,
                }
                Status {
                    site: SiteKey::of(&f.stack),
                    suppressed_by,
                }
            })
            .collect();
        findings.push(statuses);
        counted.push(c);
    }
    let mut total = Counted::default();
    for c in &counted {
        total.add(c);
    }

    let mut outcome = Outcome {
        report,
        config: config.clone(),
        leaks,
        findings,
        counted,
        total,
        usage,
        changes: Vec::new(),
        violations: Vec::new(),
        improvements: Vec::new(),
    };
    // A suppressed site is neither new nor gone.
    let baseline = config.baseline.clone().map(|b| b.without(supp));
    limits(&mut outcome);
    if let Some(baseline) = &baseline {
        against_baseline(&mut outcome, baseline);
    }
    failing_findings(&mut outcome, baseline.as_ref());
    // Each process's violations together, in the order they were found.
    outcome.violations.sort_by_key(|v| v.process);
    outcome
}

/// The unsuppressed leak groups of process `p`, with their statuses.
fn unsuppressed<'a>(o: &'a Outcome, p: usize) -> impl Iterator<Item = (&'a Held, &'a Status)> + 'a {
    o.report.processes[p]
        .leaks
        .iter()
        .zip(&o.leaks[p])
        .filter(|(_, s)| s.suppressed_by.is_none())
}

fn leak_message(h: &Held) -> String {
    format!(
        "{} bytes in {} ({}) {}, allocated by {}",
        h.bytes,
        plural(h.allocations, "allocation", "allocations"),
        h.kind.name(),
        match h.at {
            crate::model::LeakAt::Exit => "leaked at exit".to_string(),
            crate::model::LeakAt::Teardown { api, .. } => format!("leaked at context teardown ({api})"),
        },
        h.api
    )
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// Per-process limits; without limits or a baseline, every leak group.
fn limits(o: &mut Outcome) {
    let config = &o.config;
    let mut found = Vec::new();
    for p in 0..o.report.processes.len() {
        let c = o.counted[p];
        if config.every_leak_fails() {
            for (h, s) in unsuppressed(o, p) {
                found.push(Violation {
                    check: "leak",
                    severity: Severity::Error,
                    process: p,
                    message: leak_message(h),
                    site: Some(s.site.clone()),
                    stack: h.stack.clone(),
                    bytes: h.bytes,
                    count: h.allocations,
                    change: None,
                    finding: None,
                });
            }
            continue;
        }
        let largest = unsuppressed(o, p).map(|(h, _)| h).max_by_key(|h| h.bytes);
        let mut over = |what: String| {
            let (largest_text, stack) = match largest {
                Some(h) => (format!("; the largest site: {}", leak_message(h)), h.stack.clone()),
                None => (String::new(), Vec::new()),
            };
            found.push(Violation {
                check: "leak-limit",
                severity: Severity::Error,
                process: p,
                message: format!("{what}{largest_text}"),
                site: None,
                stack,
                bytes: c.leaked_bytes,
                count: c.leaked_allocations,
                change: None,
                finding: None,
            });
        };
        if let Some(max) = config.max_leaked_bytes.filter(|&m| c.leaked_bytes > m) {
            over(format!(
                "{} bytes leaked, over the limit of {max} bytes (--max-leaked-bytes)",
                c.leaked_bytes
            ));
        }
        if let Some(max) = config.max_leaks.filter(|&m| c.leaked_allocations > m) {
            over(format!(
                "{} leaked, over the limit of {max} (--max-leaks)",
                plural(c.leaked_allocations, "allocation", "allocations")
            ));
        }
    }
    o.violations.extend(found);
}

fn against_baseline(o: &mut Outcome, baseline: &Baseline) {
    // Sites summed over every process; each remembers the first group that has it.
    let mut now: BTreeMap<SiteKey, Totals> = BTreeMap::new();
    let mut first: BTreeMap<SiteKey, (usize, &Held)> = BTreeMap::new();
    for p in 0..o.report.processes.len() {
        for (h, s) in unsuppressed(o, p) {
            now.entry(s.site.clone()).or_default().add(Totals {
                bytes: h.bytes,
                allocations: h.allocations,
            });
            first.entry(s.site.clone()).or_insert((p, h));
        }
    }
    let changes = baseline::compare(&now, &baseline.sites, o.config.tolerance);
    let mut violations = Vec::new();
    let mut improvements = Vec::new();
    for (site, totals, change) in &changes {
        let here = first.get(site);
        let stack = match (here, baseline.sites.get(site)) {
            (Some((_, h)), _) => h.stack.clone(),
            (None, Some(b)) => b.stack.clone(),
            (None, None) => Vec::new(),
        };
        let sum = |t: &Totals| {
            format!(
                "{} bytes in {}",
                t.bytes,
                plural(t.allocations, "allocation", "allocations")
            )
        };
        let what = |(_, h): &(usize, &Held)| format!("({}) allocated by {}", h.kind.name(), h.api);
        match *change {
            Change::New => {
                let here = here.expect("a new site is in this run");
                violations.push(Violation {
                    check: "leak",
                    severity: Severity::Error,
                    process: here.0,
                    message: format!("new leak site: {} {}, not in the baseline", sum(totals), what(here)),
                    site: Some(site.clone()),
                    stack,
                    bytes: totals.bytes,
                    count: totals.allocations,
                    change: Some(*change),
                    finding: None,
                });
            }
            Change::Grew { was } => {
                let here = here.expect("a grown site is in this run");
                violations.push(Violation {
                    check: "leak-growth",
                    severity: Severity::Error,
                    process: here.0,
                    message: format!(
                        "leak site grew: {} {}, was {} (+{} bytes, tolerance {})",
                        sum(totals),
                        what(here),
                        sum(&was),
                        totals.bytes - was.bytes,
                        o.config.tolerance
                    ),
                    site: Some(site.clone()),
                    stack,
                    bytes: totals.bytes,
                    count: totals.allocations,
                    change: Some(*change),
                    finding: None,
                });
            }
            Change::Smaller { .. } | Change::Gone { .. } => improvements.push(Improvement {
                site: site.clone(),
                change: *change,
                now: *totals,
                stack,
            }),
            Change::Unchanged | Change::WithinTolerance { .. } => {}
        }
    }
    // Largest first, like the report's lists.
    violations.sort_by_key(|v: &Violation| std::cmp::Reverse(v.bytes));
    improvements.sort_by_key(|i: &Improvement| {
        let was = match i.change {
            Change::Smaller { was } | Change::Gone { was } => was.bytes,
            _ => 0,
        };
        std::cmp::Reverse(was - i.now.bytes.min(was))
    });
    o.violations.extend(violations);
    o.improvements = improvements;
    o.changes = changes;
}

/// Findings at or over `fail_on`, unsuppressed, and (with a baseline) not in it.
fn failing_findings(o: &mut Outcome, baseline: Option<&Baseline>) {
    let mut found = Vec::new();
    for (p, process) in o.report.processes.iter().enumerate() {
        for (i, (f, s)) in process.findings.iter().zip(&o.findings[p]).enumerate() {
            if s.suppressed_by.is_some() || f.severity > o.config.fail_on {
                continue;
            }
            let change = match baseline {
                Some(b) if b.has_finding(f.check, &s.site) => continue,
                Some(_) => Some(Change::New),
                None => None,
            };
            found.push(Violation {
                check: f.check,
                severity: f.severity,
                process: p,
                message: f.message.clone(),
                site: Some(s.site.clone()),
                stack: f.stack.clone(),
                bytes: 0,
                count: f.count,
                change,
                finding: Some(i),
            });
        }
    }
    o.violations.extend(found);
}

/// The name a process goes by in outputs: the program's file name and pid, or the trace.
pub fn process_name(p: &ProcessReport) -> String {
    match &p.process {
        Some(info) => format!("{} (pid {})", crate::model::file_name(&info.exe), info.pid),
        None => p.trace.display().to_string(),
    }
}
