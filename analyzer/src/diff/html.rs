//! The diff as one self-contained HTML page (no script, no outside reference): both sides'
//! live bytes over time on one axis (time from each run's first event) as an SVG drawn here,
//! the totals, peak and growth side by side, then a table per list with each site's stack.

use std::fmt::Write as _;

use super::{Diff, Side, SiteChange, Source};
use crate::report::Frame;

/// Colours of A and B.
const COLOURS: [&str; 2] = ["#1f77b4", "#d62728"];

/// The page.
pub fn write(d: &Diff) -> String {
    let mut s = String::with_capacity(16 * 1024);
    s.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>gpuleak diff</title>\n<style>\n\
         body{font:14px system-ui,sans-serif;margin:1.5em;color:#222}\n\
         table{border-collapse:collapse;margin:.5em 0 1.5em}\n\
         td,th{border:1px solid #ccc;padding:.25em .6em;text-align:right;vertical-align:top}\n\
         td.l,th.l{text-align:left}\n.up{color:#b00}.down{color:#070}\n\
         pre{margin:.2em 0;font-size:12px}\n</style></head>\n<body>\n",
    );
    let _ = writeln!(s, "<h1>gpuleak diff</h1>");
    let _ = writeln!(
        s,
        "<p>Compared: {} bytes per site. <span style=\"color:{}\">A</span>: {}. <span style=\"color:{}\">B</span>: {}.</p>",
        d.compared(),
        COLOURS[0],
        esc(&describe(&d.a)),
        COLOURS[1],
        esc(&describe(&d.b))
    );
    summary(d, &mut s);
    chart(d, &mut s);
    for (what, list) in [
        ("New", &d.new),
        ("Grown", &d.grown),
        ("Shrunk", &d.shrunk),
        ("Gone", &d.gone),
    ] {
        sites(what, list, &mut s);
    }
    s.push_str("</body></html>\n");
    s
}

fn describe(side: &Side) -> String {
    match side.source {
        Source::Snapshot(id) => format!("{} (snapshot {id})", side.input),
        Source::Report => format!("{} (JSON report)", side.input),
        Source::Trace => side.input.clone(),
    }
}

fn esc(t: &str) -> String {
    let mut o = String::with_capacity(t.len());
    for c in t.chars() {
        match c {
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '&' => o.push_str("&amp;"),
            '"' => o.push_str("&quot;"),
            _ => o.push(c),
        }
    }
    o
}

fn delta_cell(before: Option<u64>, after: Option<u64>) -> String {
    match (before, after) {
        (Some(a), Some(b)) => {
            let v = i128::from(b) - i128::from(a);
            let class = if v > 0 {
                "up"
            } else if v < 0 {
                "down"
            } else {
                ""
            };
            format!("<td class=\"{class}\">{v:+}</td>")
        }
        _ => "<td>-</td>".to_string(),
    }
}

fn summary(d: &Diff, s: &mut String) {
    let (a, b) = (d.a.total(), d.b.total());
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    s.push_str("<table><tr><th class=\"l\"></th><th>A</th><th>B</th><th>change</th></tr>\n");
    let mut row = |name: &str, x: Option<u64>, y: Option<u64>| {
        let _ = writeln!(
            s,
            "<tr><td class=\"l\">{name}</td><td>{}</td><td>{}</td>{}</tr>",
            opt(x),
            opt(y),
            delta_cell(x, y)
        );
    };
    row(&format!("{} bytes", d.compared()), Some(a.bytes), Some(b.bytes));
    row("allocations", Some(a.allocations), Some(b.allocations));
    row("sites", Some(d.a.sites.len() as u64), Some(d.b.sites.len() as u64));
    row("peak bytes", d.a.peak_bytes, d.b.peak_bytes);
    row(
        "growing sites",
        d.a.growth.map(|g| g.sites),
        d.b.growth.map(|g| g.sites),
    );
    row("growth bytes", d.a.growth.map(|g| g.bytes), d.b.growth.map(|g| g.bytes));
    s.push_str("</table>\n");
    let _ = writeln!(
        s,
        "<p>{} new, {} grown, {} shrunk, {} gone, {} unchanged.</p>",
        d.new.len(),
        d.grown.len(),
        d.shrunk.len(),
        d.gone.len(),
        d.unchanged
    );
}

/// Both timelines in one SVG, time from each run's start on x, live bytes on y.
fn chart(d: &Diff, s: &mut String) {
    let lines = [&d.a.timeline, &d.b.timeline];
    if lines.iter().all(|l| l.is_empty()) {
        s.push_str("<p>No timeline: the sides are JSON reports made without <code>--memory</code>, or several processes.</p>\n");
        return;
    }
    let (w, h, pad) = (800.0_f64, 240.0_f64, 50.0_f64);
    // Time from each run's start; a trace without times (all zero) puts each side's points
    // evenly over its run instead.
    let timed = lines.iter().all(|l| l.is_empty() || l.last().is_some_and(|p| p.0 > 0));
    let xs: Vec<Vec<f64>> = lines
        .iter()
        .map(|l| {
            l.iter()
                .enumerate()
                .map(|(i, p)| {
                    if timed {
                        p.0 as f64
                    } else {
                        i as f64 / (l.len().max(2) - 1) as f64
                    }
                })
                .collect()
        })
        .collect();
    let max_t = xs
        .iter()
        .flatten()
        .copied()
        .fold(0.0_f64, f64::max)
        .max(f64::MIN_POSITIVE);
    let max_b = lines
        .iter()
        .flat_map(|l| l.iter().map(|p| p.1))
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let _ = writeln!(
        s,
        "<h2>Live bytes over time</h2>\n<svg id=\"timeline\" xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" role=\"img\">",
        w + pad * 2.0,
        h + pad
    );
    let _ = writeln!(
        s,
        "<line x1=\"{pad}\" y1=\"{h}\" x2=\"{}\" y2=\"{h}\" stroke=\"#888\"/><line x1=\"{pad}\" y1=\"0\" x2=\"{pad}\" y2=\"{h}\" stroke=\"#888\"/>",
        pad + w
    );
    let end = if timed {
        format!("{:.3} s", max_t / 1e9)
    } else {
        "end of run (no times in the trace)".to_string()
    };
    let _ = writeln!(
        s,
        "<text x=\"{pad}\" y=\"{}\" font-size=\"11\">0</text><text x=\"{}\" y=\"{}\" font-size=\"11\" text-anchor=\"end\">{end}</text><text x=\"2\" y=\"12\" font-size=\"11\">{} B</text>",
        h + 14.0,
        pad + w,
        h + 14.0,
        max_b as u64
    );
    for (i, line) in lines.iter().enumerate() {
        let points: Vec<String> = line
            .iter()
            .zip(&xs[i])
            .map(|(&(_, b), &x)| format!("{:.1},{:.1}", pad + x / max_t * w, h - b as f64 / max_b * h))
            .collect();
        let _ = writeln!(
            s,
            "<polyline class=\"side-{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"1.5\" points=\"{}\"/>",
            if i == 0 { "a" } else { "b" },
            COLOURS[i],
            points.join(" ")
        );
    }
    s.push_str("</svg>\n");
}

fn frame_line(i: usize, f: &Frame) -> String {
    let name = match (&f.function, &f.module) {
        (Some(function), _) => function.clone(),
        (None, Some(module)) => format!("{module}+{:#x}", f.address),
        (None, None) => format!("{:#x}", f.address),
    };
    let mut line = format!("#{i} {name}");
    if let Some(file) = &f.file {
        let _ = write!(line, " {}", crate::model::file_name(file));
        if let Some(l) = f.line {
            let _ = write!(line, ":{l}");
        }
    }
    if let Some(module) = &f.module {
        let _ = write!(line, " ({module})");
    }
    line
}

fn sites(what: &str, list: &[SiteChange], s: &mut String) {
    let _ = writeln!(s, "<h2>{what} ({})</h2>", list.len());
    if list.is_empty() {
        return;
    }
    let _ = writeln!(
        s,
        "<table class=\"{}\"><tr><th class=\"l\">site</th><th>bytes A</th><th>bytes B</th><th>change</th><th>allocations A</th><th>allocations B</th></tr>",
        what.to_lowercase()
    );
    for c in list {
        let stack: Vec<String> = c
            .stack
            .iter()
            .enumerate()
            .map(|(i, f)| esc(&frame_line(i, f)))
            .collect();
        let _ = writeln!(
            s,
            "<tr><td class=\"l\"><details><summary>{}</summary><pre>{}</pre></details></td><td>{}</td><td>{}</td>{}<td>{}</td><td>{}</td></tr>",
            esc(c.site.as_str()),
            stack.join("\n"),
            c.before.bytes,
            c.after.bytes,
            delta_cell(Some(c.before.bytes), Some(c.after.bytes)),
            c.before.allocations,
            c.after.allocations
        );
    }
    s.push_str("</table>\n");
}
