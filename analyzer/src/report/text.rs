//! The report as text for a terminal, readable in 80 columns (in the manner of heaptrack and
//! AddressSanitizer): a header per process, each leak group with its stack, then findings and
//! notes; for several processes, then the merged view of their leak sites and the totals.

use std::io::{self, Write};

use gpuleak_format::MemKind;

use crate::model::{file_name, LeakAt};

use super::user_code::{shown, Shown};
use super::{Finding, Frame, Held, MergedSite, ProcessReport, Report, Severity, Summary};

/// Width the text is laid out for.
const WIDTH: usize = 80;
/// Processes named for a merged site; the others are counted.
const NAMED_PROCESSES: usize = 6;

pub use crate::colour::Style;

/// How the text looks: its colours, and whether Python stacks show every native frame
/// (`--native-frames`).
#[derive(Debug, Clone, Copy)]
struct Look {
    style: Style,
    native_frames: bool,
}

impl std::ops::Deref for Look {
    type Target = Style;

    fn deref(&self) -> &Style {
        &self.style
    }
}

/// The colour of a severity's name.
fn severity(style: Style, s: Severity) -> String {
    match s {
        Severity::Error => style.red(s.name()),
        Severity::Warning => style.yellow(s.name()),
        Severity::Note => style.cyan(s.name()),
    }
}

/// Writes `report` as text.
pub fn write(report: &Report, style: Style, out: &mut impl Write) -> io::Result<()> {
    let style = Look {
        style,
        native_frames: report.native_frames,
    };
    let mut s = String::with_capacity(4096);
    for (i, p) in report.processes.iter().enumerate() {
        if i > 0 {
            s.push('\n');
        }
        process(p, style, &mut s);
    }
    if report.processes.len() > 1 {
        if !report.merged.is_empty() {
            s.push('\n');
            merged(report, style, &mut s);
        }
        ranks(report, style, &mut s);
        s.push('\n');
        s.push_str(&style.bold(&format!("Total over {} processes:", report.processes.len())));
        s.push('\n');
        totals(&report.summary, &mut s);
    }
    out.write_all(s.as_bytes())
}

fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

fn process(p: &ProcessReport, style: Look, s: &mut String) {
    let ended = match (p.exited, p.exit_code) {
        (_, Some(code)) => format!("exited with {code}"),
        (true, None) => "exited".to_string(),
        (false, None) => "no exit record".to_string(),
    };
    match &p.process {
        Some(info) => {
            let rank = match &info.rank {
                Some(r) => match r.world_size {
                    Some(w) => format!(", rank {} of {w}", r.rank),
                    None => format!(", rank {}", r.rank),
                },
                None => String::new(),
            };
            s.push_str(&style.bold(&format!("gpuleak report: pid {}{rank} ({ended})", info.pid)));
            s.push_str(&format!("\nprogram: {}\n", info.exe));
        }
        None => {
            s.push_str(&style.bold(&format!("gpuleak report: unknown process ({ended})")));
            s.push('\n');
        }
    }
    s.push_str(&format!("trace: {}\n", p.trace.display()));
    totals(&p.summary, s);

    if p.leaks.is_empty() {
        s.push_str("\nNo leaks.\n");
    }
    for h in &p.leaks {
        s.push('\n');
        held(h, style, s);
    }
    omitted(p.omitted[0], "leak", s);

    if !p.held_by_pool.is_empty() {
        s.push('\n');
        wrap(
            &style.bold("Held by caching allocators, not counted as leaks (--pool-as-leak counts them):"),
            "",
            s,
        );
        for h in &p.held_by_pool {
            s.push('\n');
            held(h, style, s);
        }
        omitted(p.omitted[1], "pool", s);
    }

    if !p.unreleased.is_empty() {
        s.push('\n');
        wrap(
            &style.bold("Not released, but not memory the program owns (not counted as leaked bytes):"),
            "",
            s,
        );
        for h in &p.unreleased {
            s.push('\n');
            held(h, style, s);
        }
        omitted(p.omitted[2], "unreleased", s);
    }

    for v in &p.frameworks {
        s.push('\n');
        wrap(&crate::frameworks::join::summary_line(v), "  ", s);
    }

    for f in &p.findings {
        s.push('\n');
        finding(f, style, s);
    }
    if let Some(m) = &p.memory {
        super::memory::text::write(m, s);
    }
    if !p.notes.is_empty() {
        s.push('\n');
        for n in &p.notes {
            wrap(&format!("{}: {n}", severity(*style, Severity::Note)), "  ", s);
        }
    }
}

fn totals(t: &Summary, s: &mut String) {
    let mut leaks = format!(
        "leaked: {} in {}",
        plural(t.leaked_bytes, "byte", "bytes"),
        plural(t.leaked_allocations, "allocation", "allocations")
    );
    if t.leaked_bytes_at_teardown > 0 {
        leaks.push_str(&format!(
            " ({} at exit, {} at context teardown)",
            t.leaked_bytes_at_exit, t.leaked_bytes_at_teardown
        ));
    }
    if t.pool_bytes > 0 {
        leaks.push_str(&format!("; held by pools: {}", plural(t.pool_bytes, "byte", "bytes")));
    }
    wrap(&leaks, "  ", s);
    let mut calls = format!(
        "calls: {}, {}",
        plural(t.allocations, "allocation", "allocations"),
        plural(t.frees, "free", "frees")
    );
    if t.retains > 0 {
        calls.push_str(&format!(", {}", plural(t.retains, "handle retain", "handle retains")));
    }
    if t.failed_allocations > 0 {
        calls.push_str(&format!(", {} failed", t.failed_allocations));
    }
    calls.push_str(&format!("; peak {} live", plural(t.peak_bytes, "byte", "bytes")));
    if t.findings > 0 {
        calls.push_str(&format!("; {}", plural(t.findings, "finding", "findings")));
    }
    wrap(&calls, "  ", s);
}

fn held(h: &Held, style: Look, s: &mut String) {
    let mut what = format!(
        "{} in {} ({})",
        plural(h.bytes, "byte", "bytes"),
        plural(h.allocations, "allocation", "allocations"),
        h.kind.name()
    );
    if let Some(pool) = h.pool {
        let owner = h.owner.as_deref().map(file_name).unwrap_or("?");
        what.push_str(&format!(" held by the {} pool ({owner})", pool.name()));
    }
    match h.at {
        LeakAt::Exit => what.push_str(" at exit,"),
        LeakAt::Teardown { api, .. } => what.push_str(&format!(" at context teardown ({api}),")),
    }
    // Graph memory: a launch allocated it; the stack is where its allocation node was made.
    let mut by = if h.kind == MemKind::Graph {
        format!("allocated by a graph launch, node made by {}", h.api)
    } else {
        format!("allocated by {}", h.api)
    };
    if h.via != gpuleak_format::Api::NONE {
        by.push_str(&format!(" via {}", h.via));
    }
    if h.released_but_mapped > 0 {
        by.push_str(&format!(
            ", {} released but still mapped",
            plural(h.released_but_mapped, "handle", "handles")
        ));
    }
    if h.retains > 0 {
        // Each reference needs its own release: say which call, and how many are missing.
        let (taken, how, release) = match h.kind {
            MemKind::Ipc => ("opened again", "", ("cuIpcCloseMemHandle", "cuIpcCloseMemHandles")),
            MemKind::PoolImport => ("imported again", "", ("cuMemFree", "cuMemFrees")),
            _ => (
                "retained",
                " by cuMemRetainAllocationHandle",
                ("cuMemRelease", "cuMemReleases"),
            ),
        };
        by.push_str(&format!(
            ", {taken} {}{how}, {} still due",
            plural(h.retains, "time", "times"),
            plural(h.releases_due, release.0, release.1)
        ));
    }
    by.push(':');
    headline(&what, &by, style, s);
    frames(&h.stack, style.native_frames, s);
}

/// A group's first line, `what` then `by`: broken before `by` rather than anywhere when it
/// does not fit.
fn headline(what: &str, by: &str, style: Look, s: &mut String) {
    if what.chars().count() + 1 + by.chars().count() <= WIDTH {
        s.push_str(&style.bold(&format!("{what} {by}")));
        s.push('\n');
    } else {
        wrap(&style.bold(what), "  ", s);
        wrap(&style.bold(&format!("  {by}")), "    ", s);
    }
}

/// The merged view: each leak site once, with the processes that leak from it (the largest
/// few by name, the rest counted).
fn merged(report: &Report, style: Look, s: &mut String) {
    let n = report.processes.len() as u64;
    wrap(
        &style.bold(&format!(
            "Merged over {n} processes: each leak site once, largest first:"
        )),
        "",
        s,
    );
    for m in &report.merged {
        s.push('\n');
        site(m, report, style, s);
    }
    let (sites, bytes) = report.merged_omitted;
    if sites > 0 {
        s.push_str(&format!(
            "\n... and {sites} more leak {} ({}), left out by --top\n",
            if sites == 1 { "site" } else { "sites" },
            plural(bytes, "byte", "bytes")
        ));
    }
}

/// The rank of process `i` of the report, when every process knows its rank.
fn rank_of(report: &Report, i: usize) -> Option<u64> {
    if !report
        .processes
        .iter()
        .all(|p| p.process.as_ref().is_some_and(|i| i.rank.is_some()))
    {
        return None;
    }
    Some(report.processes[i].process.as_ref()?.rank.as_ref()?.rank)
}

fn site(m: &MergedSite, report: &Report, style: Look, s: &mut String) {
    let by_rank = rank_of(report, 0).is_some();
    let each = match m.processes.as_slice() {
        [first, rest @ ..] if by_rank && !rest.is_empty() && rest.iter().all(|p| p.bytes == first.bytes) => {
            format!(", {} each", plural(first.bytes, "byte", "bytes"))
        }
        _ => String::new(),
    };
    let what = format!(
        "{} in {} ({}) on {} of {}{each},",
        plural(m.bytes, "byte", "bytes"),
        plural(m.allocations, "allocation", "allocations"),
        m.kind.name(),
        m.processes.len(),
        if by_rank {
            plural(report.processes.len() as u64, "rank", "ranks")
        } else {
            plural(report.processes.len() as u64, "process", "processes")
        },
    );
    let what = if by_rank {
        what
    } else {
        what.replacen(") on ", ") in ", 1)
    };
    let mut by = format!("allocated by {}", m.api);
    if m.via != gpuleak_format::Api::NONE {
        by.push_str(&format!(" via {}", m.via));
    }
    by.push(':');
    headline(&what, &by, style, s);
    let mut largest: Vec<_> = m.processes.iter().collect();
    largest.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.process.cmp(&b.process)));
    let mut items: Vec<String> = largest
        .iter()
        .take(NAMED_PROCESSES)
        .map(|p| {
            let who = match &report.processes[p.process].process {
                Some(info) if by_rank => format!("rank {} (pid {})", rank_of(report, p.process).unwrap_or(0), info.pid),
                Some(info) => format!("pid {}", info.pid),
                None => report.processes[p.process].trace.display().to_string(),
            };
            format!("{who} ({})", plural(p.bytes, "byte", "bytes"))
        })
        .collect();
    if let Some(rest) = largest.get(NAMED_PROCESSES..).filter(|r| !r.is_empty()) {
        items.push(format!(
            "and {} more {} ({})",
            rest.len(),
            match (by_rank, rest.len() == 1) {
                (true, true) => "rank",
                (true, false) => "ranks",
                (false, true) => "process",
                (false, false) => "processes",
            },
            plural(rest.iter().map(|p| p.bytes).sum(), "byte", "bytes")
        ));
    }
    // Lines break between processes, never inside one.
    let mut line = String::from("  in");
    for (i, item) in items.iter().enumerate() {
        let comma = items.get(i + 1).is_some_and(|next| !next.starts_with("and "));
        let piece = if comma { format!("{item},") } else { item.clone() };
        if i > 0 && line.chars().count() + 1 + piece.chars().count() > WIDTH {
            s.push_str(&line);
            s.push('\n');
            line = format!("    {piece}");
        } else {
            line.push(' ');
            line.push_str(&piece);
        }
    }
    s.push_str(&line);
    s.push('\n');
    frames(&m.stack, style.native_frames, s);
}

/// The per-rank table: one line per rank, a `!` after each value that stands apart from the
/// other ranks' ([`super::ranks`]).
fn ranks(report: &Report, style: Look, s: &mut String) {
    let rows = super::ranks::table(report);
    if rows.is_empty() {
        return;
    }
    s.push('\n');
    wrap(
        &style.bold(&format!(
            "Ranks ({}; ! stands apart from the other ranks):",
            if rows.iter().any(|r| r.growth_bytes.is_some()) {
                "growth from the memory pass"
            } else {
                "growth needs --memory"
            }
        )),
        "",
        s,
    );
    let cell = |v: Option<u64>, col: &str, r: &super::ranks::RankRow| match v {
        None => "-".to_string(),
        Some(v) => format!(
            "{}{}",
            crate::run::human_bytes(v),
            if r.outliers.contains(&col) { " !" } else { "" }
        ),
    };
    s.push_str(&format!(
        "  {:>5}  {:<10} {:>7}  {:>12}  {:>12}  {:>12}  {:>8}\n",
        "rank", "host", "pid", "peak", "leaked", "growth", "findings"
    ));
    for r in &rows {
        let info = report.processes[r.process].process.as_ref();
        let host: String = info.map_or("?", |i| i.hostname.as_str()).chars().take(10).collect();
        let line = format!(
            "  {:>5}  {:<10} {:>7}  {:>12}  {:>12}  {:>12}  {:>8}",
            r.rank,
            host,
            info.map_or("?".to_string(), |i| i.pid.to_string()),
            cell(Some(r.peak_bytes), "peak", r),
            cell(Some(r.leaked_bytes), "leaked", r),
            cell(r.growth_bytes, "growth", r),
            r.findings
        );
        if r.outliers.is_empty() {
            s.push_str(&line);
        } else {
            s.push_str(&style.yellow(&line));
        }
        s.push('\n');
    }
}

fn finding(f: &Finding, style: Look, s: &mut String) {
    wrap(
        &format!("{}: {}: {}", severity(*style, f.severity), f.check, f.message),
        "  ",
        s,
    );
    if f.stack.is_empty() {
        s.push_str("    (no stack captured)\n");
    }
    if let Some(role) = f.stack_role {
        s.push_str(&format!("  {role} (no stack of the call itself):\n"));
    }
    frames(&f.stack, style.native_frames, s);
    if let Some(stack) = &f.first_free_stack {
        s.push_str(if f.check == "use-after-free" {
            "  freed at:\n"
        } else {
            "  first freed at:\n"
        });
        frames(stack, style.native_frames, s);
    }
    // A stream-ordering finding without a stack of its own shows the allocation's.
    if let Some(stack) = f.allocation_stack.as_ref().filter(|a| **a != f.stack) {
        s.push_str("  allocated at:\n");
        frames(stack, style.native_frames, s);
    }
    for r in &f.related {
        s.push_str(&format!("  {}:\n", r.role));
        frames(&r.stack, style.native_frames, s);
    }
}

fn omitted((groups, bytes): (u64, u64), what: &str, s: &mut String) {
    if groups > 0 {
        s.push_str(&format!(
            "\n... and {} more {what} groups ({}), left out by --top\n",
            groups,
            plural(bytes, "byte", "bytes")
        ));
    }
}

/// One line per frame shown ([`shown`]), `#N function file:line (module)`; the location moves
/// to a line of its own when the whole does not fit; a run of frames folded is one line.
pub(crate) fn frames(stack: &[Frame], native_frames: bool, s: &mut String) {
    for line in shown(stack, native_frames) {
        let (i, f) = match line {
            Shown::Frame(i, f) => (i, f),
            Shown::Folded { frames, interpreter } => {
                s.push_str(&format!("    {}\n", Shown::folded_text(frames, interpreter)));
                continue;
            }
        };
        let prefix = format!("    #{i} ");
        let name = match (&f.function, &f.module) {
            (Some(function), _) => elide(function, WIDTH - prefix.len()),
            (None, Some(module)) => format!("{module}+{:#x}", f.address),
            (None, None) => format!("{:#x}", f.address),
        };
        let mut location = String::new();
        if let Some(file) = &f.file {
            location.push_str(file_name(file));
            if let Some(line) = f.line {
                location.push_str(&format!(":{line}"));
            }
        }
        if let (Some(module), Some(_)) = (&f.module, &f.function) {
            if !location.is_empty() {
                location.push(' ');
            }
            location.push_str(&format!("({module})"));
        }
        let line = if location.is_empty() {
            format!("{prefix}{name}")
        } else {
            format!("{prefix}{name} {location}")
        };
        if line.chars().count() <= WIDTH || location.is_empty() {
            s.push_str(&line);
            s.push('\n');
        } else {
            s.push_str(&format!("{prefix}{name}\n"));
            s.push_str(&format!("{}{location}\n", " ".repeat(prefix.len() + 2)));
        }
    }
}

/// Shortens a long function name in the middle.
fn elide(name: &str, max: usize) -> String {
    let n = name.chars().count();
    if n <= max {
        return name.to_string();
    }
    let keep = max.saturating_sub(3);
    let head: String = name.chars().take(keep / 2).collect();
    let tail: String = name.chars().skip(n - (keep - keep / 2)).collect();
    format!("{head}...{tail}")
}

/// Writes `text` word-wrapped to [`WIDTH`] columns (escape sequences take no columns),
/// continuation lines starting with `indent`.
fn wrap(text: &str, indent: &str, s: &mut String) {
    let mut column = 0;
    for (i, word) in text.split(' ').enumerate() {
        let w = visible_len(word);
        if i > 0 {
            if column + 1 + w > WIDTH && column > indent.len() {
                s.push('\n');
                s.push_str(indent);
                column = indent.len();
            } else {
                s.push(' ');
                column += 1;
            }
        }
        s.push_str(word);
        column += w;
    }
    s.push('\n');
}

fn visible_len(word: &str) -> usize {
    let mut n = 0;
    let mut escape = false;
    for c in word.chars() {
        match c {
            '\x1b' => escape = true,
            'm' if escape => escape = false,
            _ if escape => {}
            _ => n += 1,
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn long_lines_wrap_at_80_columns_with_an_indent() {
        let mut s = String::new();
        let text = "word ".repeat(30);
        wrap(text.trim_end(), "  ", &mut s);
        assert!(s.lines().all(|l| l.len() <= WIDTH), "{s}");
        assert!(s.lines().nth(1).unwrap().starts_with("  word"));
    }

    #[test]
    fn colour_codes_take_no_columns() {
        assert_eq!(visible_len(&Style::COLOUR.bold("abc")), 3);
        assert_eq!(Style::PLAIN.bold("abc"), "abc");
    }

    #[test]
    fn frames_fit_or_move_their_location_to_a_line_of_their_own() {
        let mut s = String::new();
        let frame = |function: &str| Frame {
            function: Some(function.into()),
            file: Some("/src/very/long/path/to/a/source/file/named/something_rather_long.cc".into()),
            line: Some(1234),
            module: Some("libsomething_quite_long.so".into()),
            address: 0x10,
            inlined: false,
            user: false,
        };
        frames(&[frame("main"), frame(&"x".repeat(200))], false, &mut s);
        assert!(s.lines().all(|l| l.chars().count() <= WIDTH), "{s}");
        assert!(s.starts_with("    #0 main something_rather_long.cc:1234 (libsomething_quite_long.so)\n"));
        assert!(s.ends_with("\n         something_rather_long.cc:1234 (libsomething_quite_long.so)\n"));
        let unknown = Frame {
            function: None,
            file: None,
            line: None,
            module: Some("libc.so.6".into()),
            address: 0x2a24a,
            inlined: false,
            user: false,
        };
        let mut s = String::new();
        frames(&[unknown], false, &mut s);
        assert_eq!(s, "    #0 libc.so.6+0x2a24a\n");
    }
}
