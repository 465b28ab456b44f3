//! The check as JUnit XML, the test report format most CI systems read. The document is valid
//! against Jenkins' `junit-10.xsd` (which GitLab, GitHub test reporters and Azure Pipelines
//! read too): one test suite; per process, one passing test case when nothing of it fails, else
//! one failing test case per check and site, with exactly one `<failure>` that lists every
//! violation of that case.
//!
//! Test names never hold a pid or a trace path, so that a CI system sees the same tests run
//! after run: `PROGRAM: CHECK at SITE`, where PROGRAM is the program's file name, numbered
//! (`#1`, `#2`, by start time) when several processes ran the same program, and SITE the
//! violation's top frame as a site key piece (`make_scratch@report_leaks.c:21`).
//!
//! Written by hand: every text and attribute goes through [`escape_text`] or [`escape_attr`],
//! and characters XML 1.0 cannot carry at all are replaced.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::{plural, site, text::top_frame, Outcome, Violation};
use crate::model::file_name;
use crate::report::ProcessReport;

/// The suite's (and the test cases' class) name.
const SUITE: &str = "gpuleak check";

/// One test case: its name and the violations that fail it (none: it passes).
struct Case<'a> {
    name: String,
    process: usize,
    violations: Vec<&'a Violation>,
}

/// Per process, the name its test cases start with: the program's file name (the trace's
/// without a `ProcessInfo` record), then ` rank R` for a process of a distributed job
/// (docs/ranks.md), followed by ` #N` when several processes have that same name, N counting
/// from 1 in order of start time (then of the command line).
pub fn process_names(processes: &[ProcessReport]) -> Vec<String> {
    let program = |p: &ProcessReport| match &p.process {
        Some(info) => match &info.rank {
            Some(r) => format!("{} rank {}", file_name(&info.exe), r.rank),
            None => file_name(&info.exe).to_string(),
        },
        None => file_name(&p.trace.to_string_lossy()).to_string(),
    };
    let programs: Vec<String> = processes.iter().map(program).collect();
    let mut names = programs.clone();
    for (i, name) in programs.iter().enumerate() {
        let same: Vec<usize> = (0..processes.len()).filter(|&j| programs[j] == *name).collect();
        if same.len() < 2 {
            continue;
        }
        let started = |j: usize| processes[j].process.as_ref().map_or(u64::MAX, |p| p.start_unix_ns);
        let rank = same.iter().filter(|&&j| (started(j), j) < (started(i), i)).count();
        names[i] = format!("{name} #{}", rank + 1);
    }
    names
}

/// What a violation's test case is named after, beside its process: its check and its top
/// frame (`leak at make_scratch@report_leaks.c:21`); a limit has no site of its own.
fn case_of(v: &Violation) -> String {
    if v.site.is_none() {
        return v.check.to_string();
    }
    match top_frame(&v.stack) {
        Some(f) => format!("{} at {}", v.check, site::frame_piece(f)),
        None => format!("{} at (no stack)", v.check),
    }
}

/// The test cases, in process order: a process's failing cases in the order of their first
/// violation, or its one passing case.
fn cases(o: &Outcome) -> Vec<Case<'_>> {
    let names = process_names(&o.report.processes);
    let mut cases: Vec<Case<'_>> = Vec::new();
    for (p, process_name) in names.into_iter().enumerate() {
        let first = cases.len();
        for v in o.violations_of(p) {
            let name = format!("{process_name}: {}", case_of(v));
            match cases[first..].iter_mut().find(|c| c.name == name) {
                Some(c) => c.violations.push(v),
                None => cases.push(Case {
                    name,
                    process: p,
                    violations: vec![v],
                }),
            }
        }
        if cases.len() == first {
            cases.push(Case {
                name: process_name,
                process: p,
                violations: Vec::new(),
            });
        }
    }
    cases
}

/// A violation as a failure's text: check and sentence, site, and the whole stack.
/// The violation's sentence and the user's frame it happened at (`report::user_code`).
fn message(v: &Violation) -> String {
    match crate::report::user_code::site_name(&v.stack) {
        Some(at) => format!("{}; at {at}", v.message),
        None => v.message.clone(),
    }
}

fn detail(v: &Violation) -> String {
    let mut detail = format!("{}: {}\n", v.check, message(v));
    if let Some(site) = &v.site {
        let _ = writeln!(detail, "site: {site}");
    }
    for (n, f) in v.stack.iter().enumerate() {
        let _ = write!(detail, "    #{n} {}", f.function.as_deref().unwrap_or("??"));
        if let Some(file) = &f.file {
            let _ = write!(detail, " {file}");
            if let Some(line) = f.line {
                let _ = write!(detail, ":{line}");
            }
        }
        match &f.module {
            Some(m) => {
                let _ = writeln!(detail, " ({}+{:#x})", file_name(m), f.address);
            }
            None => {
                let _ = writeln!(detail, " ({:#x})", f.address);
            }
        }
    }
    detail
}

/// The one `<failure>` of a case: the check and sentence of its only violation, or of several,
/// the checks and the sentences numbered.
fn failure(violations: &[&Violation]) -> String {
    let (kind, message) = match violations {
        [v] => (v.check.to_string(), message(v)),
        _ => {
            let mut checks: Vec<&str> = Vec::new();
            for v in violations {
                if !checks.contains(&v.check) {
                    checks.push(v.check);
                }
            }
            let listed: Vec<String> = violations
                .iter()
                .enumerate()
                .map(|(i, v)| format!("({}) {}", i + 1, message(v)))
                .collect();
            (
                checks.join(", "),
                format!("{} problems: {}", violations.len(), listed.join("; ")),
            )
        }
    };
    let text: Vec<String> = violations.iter().map(|v| detail(v)).collect();
    format!(
        "<failure type=\"{}\" message=\"{}\">{}</failure>",
        escape_attr(&kind),
        escape_attr(&message),
        escape_text(&text.join("\n"))
    )
}

/// Writes the check as a JUnit XML document.
pub fn write(o: &Outcome, out: &mut impl Write) -> io::Result<()> {
    let processes = &o.report.processes;
    let cases = cases(o);
    let failed = cases.iter().filter(|c| !c.violations.is_empty()).count();
    let mut s = String::with_capacity(4096);
    s.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    // junit-10.xsd allows `skipped` on a suite, not on the document's root.
    let counts = format!(
        "tests=\"{}\" failures=\"{failed}\" errors=\"0\" time=\"0\"",
        cases.len()
    );
    let _ = writeln!(s, "<testsuites name=\"{SUITE}\" {counts}>");
    let _ = writeln!(s, "  <testsuite name=\"{SUITE}\" {counts} skipped=\"0\">");

    let mut properties = Vec::new();
    if let Some(m) = o.config.max_leaked_bytes {
        properties.push(("max-leaked-bytes", m.to_string()));
    }
    if let Some(m) = o.config.max_leaks {
        properties.push(("max-leaks", m.to_string()));
    }
    properties.push(("fail-on", o.config.fail_on.name().to_string()));
    if let Some(b) = &o.config.baseline {
        properties.push(("baseline", b.path.display().to_string()));
        properties.push(("tolerance", o.config.tolerance.to_string()));
    }
    for sup in &o.config.suppressions.list {
        properties.push(("suppression", format!("{} ({}:{})", sup.text(), sup.source, sup.line)));
    }
    s.push_str("    <properties>\n");
    for (name, value) in properties {
        let _ = writeln!(
            s,
            "      <property name=\"{}\" value=\"{}\"/>",
            escape_attr(name),
            escape_attr(&value)
        );
    }
    s.push_str("    </properties>\n");

    for case in &cases {
        let p = &processes[case.process];
        let _ = writeln!(
            s,
            "    <testcase name=\"{}\" classname=\"{SUITE}\" time=\"0\">",
            escape_attr(&case.name)
        );
        if !case.violations.is_empty() {
            let _ = writeln!(s, "      {}", failure(&case.violations));
        }
        // The pid and the trace, which the name leaves out, and the process's totals.
        let c = &o.counted[case.process];
        let mut summary = format!("process: {}\ntrace: {}\n", super::process_name(p), p.trace.display());
        let _ = write!(
            summary,
            "{} bytes leaked in {} ({}), {} bytes suppressed, {}",
            c.leaked_bytes,
            plural(c.leaked_allocations, "allocation", "allocations"),
            plural(c.leak_groups, "site", "sites"),
            c.suppressed_bytes,
            plural(c.findings, "finding", "findings")
        );
        for n in &p.notes {
            let _ = write!(summary, "\nnote: {n}");
        }
        let _ = writeln!(s, "      <system-out>{}</system-out>", escape_text(&summary));
        s.push_str("    </testcase>\n");
    }
    s.push_str("  </testsuite>\n</testsuites>\n");
    out.write_all(s.as_bytes())
}

/// Whether XML 1.0 allows `c` in a document at all (even as a character reference).
fn allowed(c: char) -> bool {
    matches!(c, '\t' | '\n' | '\r' | '\u{20}'..='\u{D7FF}' | '\u{E000}'..='\u{FFFD}' | '\u{10000}'..)
}

/// Escapes character data: `&`, `<` and `>`; characters XML cannot carry become U+FFFD.
pub fn escape_text(text: &str) -> String {
    escape(text, false)
}

/// Escapes a double-quoted attribute value: as [`escape_text`], plus quotes, and tabs and line
/// breaks as references (a parser would turn them into spaces).
pub fn escape_attr(text: &str) -> String {
    escape(text, true)
}

fn escape(text: &str, attribute: bool) -> String {
    let mut s = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => s.push_str("&amp;"),
            '<' => s.push_str("&lt;"),
            '>' => s.push_str("&gt;"),
            // A bare CR would be read back as LF.
            '\r' => s.push_str("&#13;"),
            '"' if attribute => s.push_str("&quot;"),
            '\'' if attribute => s.push_str("&apos;"),
            '\n' if attribute => s.push_str("&#10;"),
            '\t' if attribute => s.push_str("&#9;"),
            c if allowed(c) => s.push(c),
            _ => s.push('\u{FFFD}'),
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_quotes_and_control_characters_are_escaped() {
        assert_eq!(escape_text("a<b>&c \"q\""), "a&lt;b&gt;&amp;c \"q\"");
        assert_eq!(
            escape_attr("operator<<(\"x\", 'y') &\n\tz"),
            "operator&lt;&lt;(&quot;x&quot;, &apos;y&apos;) &amp;&#10;&#9;z"
        );
        assert_eq!(escape_text("bell\u{7}nul\u{0}\r"), "bell\u{FFFD}nul\u{FFFD}&#13;");
        assert_eq!(escape_text("ünïcode ✓ \u{1F600}"), "ünïcode ✓ \u{1F600}");
        assert_eq!(escape_text("\u{FFFE}"), "\u{FFFD}");
        assert_eq!(escape_text("]]>"), "]]&gt;");
    }
}
