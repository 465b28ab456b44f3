//! The check as text for a CI log: one line per violation with its top frame, then
//! improvements, suppressions, notes, a summary and the result. With colour, the severities and
//! the verdicts: red for errors and failures, yellow for warnings, green for passes.

use std::fmt::Write as _;
use std::io::{self, Write};

use crate::colour::Style;
use crate::model::file_name;
use crate::report::user_code::site_frame;
use crate::report::{Frame, Severity};

use super::{plural, process_name, Change, Outcome, Totals};

/// Writes the check as plain text.
pub fn write(o: &Outcome, out: &mut impl Write) -> io::Result<()> {
    write_styled(o, Style::PLAIN, out)
}

/// Writes the check as text in `style`.
pub fn write_styled(o: &Outcome, style: Style, out: &mut impl Write) -> io::Result<()> {
    let mut s = String::with_capacity(2048);
    for v in &o.violations {
        let label = format!("{}[{}]", v.severity.name(), v.check);
        let _ = write!(
            s,
            "{} {}: {}",
            match v.severity {
                Severity::Error => style.red(&label),
                Severity::Warning => style.yellow(&label),
                Severity::Note => style.cyan(&label),
            },
            process_name(&o.report.processes[v.process]),
            v.message
        );
        if let Some(f) = top_frame(&v.stack) {
            let _ = write!(s, "; at {}", frame(f));
        }
        s.push('\n');
    }

    if !o.improvements.is_empty() {
        s.push_str("\nImprovements since the baseline:\n");
        for i in &o.improvements {
            let at = top_frame(&i.stack)
                .map(|f| format!("; at {}", frame(f)))
                .unwrap_or_default();
            match i.change {
                Change::Gone { was } => {
                    let _ = writeln!(s, "  gone: {}{at}", totals(was));
                }
                Change::Smaller { was } => {
                    let _ = writeln!(s, "  smaller: {}, was {}{at}", totals(i.now), totals(was));
                }
                _ => {}
            }
        }
    }

    let list = &o.config.suppressions.list;
    let used: Vec<usize> = (0..list.len()).filter(|&i| o.usage[i].groups > 0).collect();
    if !used.is_empty() {
        s.push_str("\nSuppressions used:\n  groups       bytes  suppression\n");
        for &i in &used {
            let (u, sup) = (&o.usage[i], &list[i]);
            let _ = writeln!(
                s,
                "{:>8} {:>11}  {} ({}:{})",
                u.groups,
                u.bytes,
                sup.text(),
                sup.source,
                sup.line
            );
        }
    }
    if used.len() < list.len() {
        s.push_str("\nSuppressions that matched nothing:\n");
        for (i, sup) in list.iter().enumerate() {
            if o.usage[i].groups == 0 {
                let _ = writeln!(s, "  {} ({}:{})", sup.text(), sup.source, sup.line);
            }
        }
    }

    let notes: Vec<(usize, &String)> = o
        .report
        .processes
        .iter()
        .enumerate()
        .flat_map(|(i, p)| p.notes.iter().map(move |n| (i, n)))
        .collect();
    if !notes.is_empty() {
        s.push('\n');
        for (i, n) in notes {
            let _ = writeln!(s, "note: {}: {n}", process_name(&o.report.processes[i]));
        }
    }

    s.push('\n');
    let several = o.report.processes.len() > 1;
    if several {
        for (i, p) in o.report.processes.iter().enumerate() {
            let failures = o.violations_of(i).count() as u64;
            let _ = writeln!(
                s,
                "{}: {}; {}",
                process_name(p),
                counts(&o.counted[i]),
                if failures == 0 {
                    style.green("passed")
                } else {
                    style.red(&format!("failed ({})", plural(failures, "violation", "violations")))
                }
            );
        }
    }
    let _ = writeln!(
        s,
        "{}: {}",
        plural(o.report.processes.len() as u64, "trace", "traces"),
        counts(&o.total)
    );
    let mode = match (&o.config.baseline, o.config.every_leak_fails()) {
        (Some(b), _) => format!(
            "against the baseline {} (tolerance {})",
            b.path.display(),
            o.config.tolerance
        ),
        (None, true) => "every leak fails".to_string(),
        (None, false) => "leaks within the limits pass".to_string(),
    };
    let mut limits = Vec::new();
    if let Some(m) = o.config.max_leaked_bytes {
        limits.push(format!("at most {m} leaked bytes"));
    }
    if let Some(m) = o.config.max_leaks {
        limits.push(format!(
            "at most {}",
            plural(m, "leaked allocation", "leaked allocations")
        ));
    }
    let limits = if limits.is_empty() {
        String::new()
    } else {
        format!(", {} per process", limits.join(" and "))
    };
    let verdict = format!("gpuleak check: {} (exit {})", o.reason(), o.exit_code());
    let _ = writeln!(
        s,
        "{}; {mode}{limits}, {} findings fail",
        if o.passed() {
            style.green(&verdict)
        } else {
            style.red(&verdict)
        },
        o.config.fail_on.name()
    );
    out.write_all(s.as_bytes())
}

fn counts(c: &super::Counted) -> String {
    let mut s = format!(
        "{} bytes leaked in {} ({})",
        c.leaked_bytes,
        plural(c.leaked_allocations, "allocation", "allocations"),
        plural(c.leak_groups, "site", "sites")
    );
    if c.suppressed_groups > 0 {
        let _ = write!(
            s,
            ", {} bytes in {} suppressed",
            c.suppressed_bytes,
            plural(c.suppressed_groups, "site", "sites")
        );
    }
    let _ = write!(s, ", {}", plural(c.findings, "finding", "findings"));
    if c.suppressed_findings > 0 {
        let _ = write!(s, " ({} suppressed)", c.suppressed_findings);
    }
    s
}

fn totals(t: Totals) -> String {
    format!(
        "{} bytes in {}",
        t.bytes,
        plural(t.allocations, "allocation", "allocations")
    )
}

/// The frame a violation is shown at: the site's frame ([`site_frame`]).
pub fn top_frame(stack: &[Frame]) -> Option<&Frame> {
    site_frame(stack)
}

/// `function file:line (module)`, as the text report shows frames.
fn frame(f: &Frame) -> String {
    let mut s = f.function.clone().unwrap_or_else(|| format!("{:#x}", f.address));
    if let Some(file) = &f.file {
        let _ = write!(s, " {}", file_name(file));
        if let Some(line) = f.line {
            let _ = write!(s, ":{line}");
        }
    }
    if let Some(m) = &f.module {
        let _ = write!(s, " ({m})");
    }
    s
}
