//! The check as JUnit XML, the test report format most CI systems read (Jenkins' `junit-10.xsd`
//! layout, which GitLab, GitHub actions and Azure Pipelines accept): one test suite, one test
//! case per trace (process), and one `<failure>` per violation of that process.
//!
//! Written by hand: every text and attribute goes through [`escape_text`] or [`escape_attr`],
//! and characters XML 1.0 cannot carry at all are replaced.

use std::fmt::Write as _;
use std::io::{self, Write};

use super::{plural, process_name, Outcome};
use crate::model::file_name;

/// The suite's (and the test cases' class) name.
const SUITE: &str = "gpuleak check";

/// Writes the check as a JUnit XML document.
pub fn write(o: &Outcome, out: &mut impl Write) -> io::Result<()> {
    let processes = &o.report.processes;
    let failed_cases = (0..processes.len())
        .filter(|&i| o.violations_of(i).next().is_some())
        .count();
    let mut s = String::with_capacity(4096);
    s.push_str("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let counts = format!(
        "tests=\"{}\" failures=\"{failed_cases}\" errors=\"0\" skipped=\"0\" time=\"0\"",
        processes.len()
    );
    let _ = writeln!(s, "<testsuites name=\"{SUITE}\" {counts}>");
    let _ = writeln!(s, "  <testsuite name=\"{SUITE}\" {counts}>");

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

    for (i, p) in processes.iter().enumerate() {
        let _ = writeln!(
            s,
            "    <testcase name=\"{}\" classname=\"{SUITE}\" time=\"0\">",
            escape_attr(&format!("{}: {}", process_name(p), p.trace.display()))
        );
        for v in o.violations_of(i) {
            let mut detail = format!("{}: {}\n", v.check, v.message);
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
            let _ = writeln!(
                s,
                "      <failure type=\"{}\" message=\"{}\">{}</failure>",
                escape_attr(v.check),
                escape_attr(&v.message),
                escape_text(&detail)
            );
        }
        let c = &o.counted[i];
        let mut summary = format!(
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
