//! One self-contained HTML page: the report's data as inline JSON, drawn by a hand-written
//! script (`page.js`) into tables (leaks and findings with their stacks, growth, failed
//! allocations) and SVG (timelines on a time axis with the run's marks, per-device live bytes and
//! fragmentation, flame graphs of leaked and of peak bytes with zoom, search and an inverted
//! view). No network access, no library: the page opens from a file anywhere. Every list and
//! series in it is bounded (downsampled or cut), never one point per event, so the page's size
//! does not grow with the trace's length.

use super::super::{Finding, Report};
use super::collapsed::frame_name;
use super::{device_name, MemoryView};
use crate::json::{render, Layout, J};
use crate::report::user_code::{shown, shown_frames, site_name, Shown};
use crate::run::human_bytes;

/// The page for `report`.
pub fn write(report: &Report) -> String {
    let native_frames = report.native_frames;
    let data = J::A(report.processes.iter().map(|p| process(p, native_frames)).collect());
    let mut json = String::new();
    render(&data, Layout::Report, &mut json);
    // Inside <script>, "</" could end the element; "<\/" means the same to JSON.parse.
    let json = json.replace("</", "<\\/");
    let mut page = String::with_capacity(json.len() + SCRIPT.len() + 4096);
    page.push_str(HEAD);
    page.push_str("<script type=\"application/json\" id=\"data\">");
    page.push_str(&json);
    page.push_str("</script>\n<script>\n");
    page.push_str(SCRIPT);
    page.push_str("</script>\n</body>\n</html>\n");
    page
}

/// Rows of the leak table, at most, and of the tables of memory held by caching allocators and
/// of unreleased handles (the JSON report has every group).
pub const LEAK_ROWS: usize = 500;
/// Findings listed, at most.
pub const FINDING_ROWS: usize = 500;
/// Stacks in a flame graph, at most: the largest; the rest are one "smaller stacks" frame.
pub const FLAME_STACKS: usize = 2000;

/// A flame graph's stacks (frames outermost first), the largest [`FLAME_STACKS`] of them.
fn flame(mut stacks: Vec<(Vec<String>, u64)>) -> J {
    stacks.retain(|(_, b)| *b > 0);
    stacks.sort_by_key(|s| std::cmp::Reverse(s.1));
    if stacks.len() > FLAME_STACKS {
        let rest = stacks.split_off(FLAME_STACKS);
        let bytes = rest.iter().map(|(_, b)| *b).sum();
        stacks.push((vec![format!("({} smaller stacks)", rest.len())], bytes));
    }
    J::A(
        stacks
            .into_iter()
            .map(|(frames, bytes)| {
                J::O(vec![
                    ("frames", J::A(frames.into_iter().map(J::S).collect())),
                    ("bytes", J::U(bytes)),
                ])
            })
            .collect(),
    )
}

/// A stack as the text report shows it, innermost first: `[line, user]` per line, `user` true
/// for the user's frames; a run of frames folded is one line.
fn stack_lines(frames: &[super::super::Frame], native_frames: bool) -> J {
    J::A(
        shown(frames, native_frames)
            .into_iter()
            .map(|line| match line {
                Shown::Frame(i, f) => {
                    let mut text = format!("#{i} {}", frame_name(f));
                    if let Some(module) = &f.module {
                        text.push_str(&format!(" ({module})"));
                    }
                    J::A(vec![J::S(text), J::Bool(f.user)])
                }
                Shown::Folded { frames, interpreter } => {
                    J::A(vec![J::S(Shown::folded_text(frames, interpreter)), J::Bool(false)])
                }
            })
            .collect(),
    )
}

/// One row of the leak table: what the text report's headline says, and the stack.
fn leak(h: &super::super::Held, native_frames: bool) -> J {
    let at = match h.at {
        crate::model::LeakAt::Exit => "exit".to_string(),
        crate::model::LeakAt::Teardown { api, .. } => format!("teardown ({api})"),
    };
    let mut by = h.api.to_string();
    if h.via != gpuleak_format::Api::NONE {
        by.push_str(&format!(" via {}", h.via));
    }
    J::O(vec![
        (
            "site",
            J::S(site_name(&h.stack).unwrap_or_else(|| format!("stack {}", h.stack_id.0))),
        ),
        ("bytes", J::U(h.bytes)),
        ("allocations", J::U(h.allocations)),
        ("kind", J::S(h.kind.name().to_string())),
        ("at", J::S(at)),
        ("by", J::S(by)),
        ("stack", stack_lines(&h.stack, native_frames)),
    ])
}

fn process(p: &super::super::ProcessReport, native_frames: bool) -> J {
    let title = match &p.process {
        Some(i) => format!("pid {} {}", i.pid, i.exe),
        None => p.trace.display().to_string(),
    };
    let outermost_first = |frames: &[super::super::Frame]| {
        shown_frames(frames, native_frames)
            .into_iter()
            .rev()
            .map(frame_name)
            .collect::<Vec<_>>()
    };
    let leaked = flame(p.leaks.iter().map(|h| (outermost_first(&h.stack), h.bytes)).collect());
    let findings = J::A(
        p.findings
            .iter()
            .take(FINDING_ROWS)
            .map(|f| finding(f, native_frames))
            .collect(),
    );
    let leaks = J::A(p.leaks.iter().take(LEAK_ROWS).map(|h| leak(h, native_frames)).collect());
    let (omitted_groups, omitted_bytes) = p.omitted[0];
    let mut fields = vec![
        ("title", J::S(title)),
        ("trace", J::S(p.trace.display().to_string())),
        ("leaked_bytes", J::U(p.summary.leaked_bytes)),
        ("peak_bytes", J::U(p.summary.peak_bytes)),
        ("allocations", J::U(p.summary.allocations)),
        ("leaks", leaks),
        ("leak_groups", J::U(p.leaks.len() as u64 + omitted_groups)),
        (
            "leaks_left_out",
            J::U(p.leaks.len().saturating_sub(LEAK_ROWS) as u64 + omitted_groups),
        ),
        ("omitted_bytes", J::U(omitted_bytes)),
        (
            "pool",
            J::A(
                p.held_by_pool
                    .iter()
                    .take(LEAK_ROWS)
                    .map(|h| leak(h, native_frames))
                    .collect(),
            ),
        ),
        (
            "unreleased",
            J::A(
                p.unreleased
                    .iter()
                    .take(LEAK_ROWS)
                    .map(|h| leak(h, native_frames))
                    .collect(),
            ),
        ),
        ("leaked", leaked),
        ("findings", findings),
        ("finding_count", J::U(p.findings.len() as u64)),
    ];
    if let Some(m) = &p.memory {
        fields.push(("memory", memory(m, native_frames)));
    }
    J::O(fields)
}

fn finding(f: &Finding, native_frames: bool) -> J {
    let at = site_name(&f.stack).unwrap_or_default();
    J::O(vec![
        ("check", J::S(f.check.to_string())),
        ("severity", J::S(f.severity.name().to_string())),
        ("message", J::S(f.message.clone())),
        ("at", J::S(at)),
        ("stack", stack_lines(&f.stack, native_frames)),
    ])
}

fn memory(m: &MemoryView, native_frames: bool) -> J {
    let r = &m.replay;
    let nums = |v: &[u64]| J::A(v.iter().map(|x| J::U(*x)).collect());
    let label = |id: &gpuleak_format::StackId| {
        m.sites
            .get(id)
            .map_or_else(|| format!("stack {}", id.0), |s| s.label.clone())
    };
    // A stacked site: its name, its stack (for the hover) and its live bytes per bucket.
    let stacked = |list: &[(gpuleak_format::StackId, Vec<u64>)]| {
        J::A(
            list.iter()
                .map(|(id, v)| {
                    let stack = m
                        .sites
                        .get(id)
                        .map_or(J::A(Vec::new()), |s| stack_lines(&s.stack, native_frames));
                    J::O(vec![("label", J::S(label(id))), ("stack", stack), ("live", nums(v))])
                })
                .collect(),
        )
    };
    let peak = flame(
        m.peak_sites
            .iter()
            .map(|(id, b)| {
                let frames = m.sites.get(id).map_or(&[][..], |s| s.stack.as_slice());
                (
                    shown_frames(frames, native_frames)
                        .into_iter()
                        .rev()
                        .map(frame_name)
                        .collect(),
                    *b,
                )
            })
            .collect(),
    );
    let devices = r
        .devices
        .iter()
        .zip(&m.pins)
        .map(|(d, pins)| {
            J::O(vec![
                ("name", J::S(device_name(d.device))),
                ("addresses", J::Bool(d.has_addresses)),
                ("peak", J::U(d.peak.0)),
                ("peak_seq", J::U(d.peak.1)),
                ("stacked", stacked(&d.stacked)),
                (
                    "peak_sites",
                    J::A(
                        d.peak_sites
                            .iter()
                            .take(10)
                            .map(|s| J::A(vec![J::S(label(&s.stack)), J::S(human_bytes(s.bytes))]))
                            .collect(),
                    ),
                ),
                ("live", nums(&d.live.iter().map(|p| p.max).collect::<Vec<_>>())),
                ("granted", nums(&d.granted.iter().map(|p| p.max).collect::<Vec<_>>())),
                ("granted_peak", J::U(d.granted_peak)),
                ("free", nums(&d.free_in_span)),
                ("reserved", nums(&d.vmm_reserved)),
                ("pool", nums(&d.pool)),
                ("pool_reserved", nums(&d.pool_reserved)),
                ("pool_used", nums(&d.pool_used)),
                ("pool_samples", J::U(d.pool_samples)),
                ("frag", nums(&d.fragmentation_ppm)),
                ("allocs", nums(&d.allocations)),
                ("frees", nums(&d.frees)),
                (
                    "worst",
                    J::S(d.worst.map_or_else(String::new, |w| {
                        format!(
                            "worst at {:.3} s: {} free between live allocations, largest hole {} (fragmentation {:.2})",
                            w.time_ns as f64 / 1e9,
                            human_bytes(w.free),
                            human_bytes(w.largest_hole),
                            w.fragmentation
                        )
                    })),
                ),
                (
                    "pins",
                    J::A(
                        pins.iter()
                            .map(|p| {
                                J::A(vec![
                                    J::S(label(&p.stack)),
                                    J::U(p.allocations),
                                    J::S(human_bytes(p.bytes)),
                                    J::S(human_bytes(p.largest_joined)),
                                ])
                            })
                            .collect(),
                    ),
                ),
            ])
        })
        .collect();
    let growth = J::A(
        m.growth
            .iter()
            .map(|g| {
                J::A(vec![
                    J::S(label(&g.stack)),
                    J::S(human_bytes(g.from_bytes)),
                    J::S(human_bytes(g.to_bytes)),
                    J::U(g.steps),
                    J::S(human_bytes(g.bytes_per_step)),
                ])
            })
            .collect(),
    );
    let ooms = J::A(
        m.ooms
            .iter()
            .map(|o| {
                J::A(vec![
                    J::S(o.oom.api.to_string()),
                    J::S(human_bytes(o.oom.size)),
                    J::S(device_name(o.oom.device)),
                    J::S(human_bytes(o.oom.live)),
                    J::S(human_bytes(o.oom.free_in_span)),
                    J::S(human_bytes(o.oom.largest_hole)),
                    J::S(format!("{:.2}", o.oom.fragmentation)),
                    J::S(o.pins.first().map_or_else(String::new, |p| label(&p.stack))),
                ])
            })
            .collect(),
    );
    let snapshot = m.snapshot.as_ref().map_or(J::Null, |snap| {
        let title = match &snap.to {
            Some(to) => format!(
                "Snapshot {} -> {}: live {} -> {}",
                snap.from.id,
                to.id,
                human_bytes(snap.from.live),
                human_bytes(to.live)
            ),
            None => format!(
                "Snapshot {} ({}): {} live",
                snap.from.id,
                snap.from.reason,
                human_bytes(snap.from.live)
            ),
        };
        let rows = snap
            .rows
            .iter()
            .take(100)
            .map(|(id, a, b)| J::A(vec![J::S(label(id)), J::S(human_bytes(*a)), J::S(human_bytes(*b))]))
            .collect();
        J::O(vec![("title", J::S(title)), ("rows", J::A(rows))])
    });
    J::O(vec![
        ("snapshot", snapshot),
        ("events", J::U(r.events)),
        ("bucket_events", J::U(r.bucket_events)),
        ("times", nums(&r.times)),
        ("seqs", nums(&r.seqs)),
        ("site_times", nums(&r.site_times)),
        ("site_bucket_events", J::U(r.site_bucket_events)),
        ("time_range", nums(&[r.time_range.0, r.time_range.1])),
        (
            "markers",
            J::A(
                r.markers
                    .iter()
                    .map(|k| {
                        J::A(vec![
                            J::S(k.kind.name().to_string()),
                            J::S(k.name.clone()),
                            J::U(k.time_ns),
                            J::U(k.events),
                        ])
                    })
                    .collect(),
            ),
        ),
        ("peak_time", J::U(r.peak.2)),
        ("peak_seq", J::U(r.peak.1)),
        ("stacked", stacked(&m.stacked)),
        ("devices", J::A(devices)),
        ("peak", peak),
        ("growth", growth),
        ("ooms", ooms),
        (
            "churn",
            J::A(
                m.churn
                    .iter()
                    .filter_map(|id| m.sites.get(id))
                    .map(|s| J::A(vec![J::S(s.label.clone()), J::U(s.summary.allocations)]))
                    .collect(),
            ),
        ),
    ])
}

/// The page's style and first lines, before the data.
const HEAD: &str = include_str!("page_head.html");

/// The code that draws the page from the data (no library, no network).
const SCRIPT: &str = include_str!("page.js");

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::TraceFile;
    use crate::report::load::tests::write_trace;
    use crate::report::{from_files, Options};

    #[test]
    fn a_flame_graph_keeps_its_largest_stacks_and_sums_the_rest_into_one_frame() {
        let stacks = (1..=FLAME_STACKS as u64 + 1000)
            .map(|i| (vec![format!("f{i}")], i))
            .chain(std::iter::once((vec!["empty".to_string()], 0)))
            .collect();
        let J::A(kept) = flame(stacks) else {
            panic!("not an array")
        };
        assert_eq!(kept.len(), FLAME_STACKS + 1);
        let mut s = String::new();
        render(&kept[FLAME_STACKS], Layout::Report, &mut s);
        let last: serde_json::Value = serde_json::from_str(&s).unwrap();
        // The 1,000 smallest: 1 + 2 + ... + 1000 bytes.
        assert_eq!(last["frames"][0], "(1000 smaller stacks)");
        assert_eq!(last["bytes"], 500_500);
    }

    #[test]
    fn text_from_the_trace_cannot_close_the_script_that_carries_the_data() {
        let dir = std::env::temp_dir().join(format!("gpuleak-html-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // The trace's path is shown in the page: make it hold "</script>".
        let odd = dir.join("a<");
        std::fs::create_dir_all(&odd).unwrap();
        let path = odd.join("script><b>x.trace");
        write_trace(&path, 4321, 3000);
        let files = TraceFile::open_all(std::slice::from_ref(&path)).unwrap();
        let options = Options {
            memory: true,
            ..Options::default()
        };
        let report = Report::new(from_files(&files, &options, 1, None));
        let page = write(&report);
        // Two scripts: the data and the code, each closed once.
        assert_eq!(page.matches("</script>").count(), 2, "{page}");
        assert!(page.contains("a<\\/script><b>x.trace"));
        assert!(!page.contains("https://"));
        // The data is JSON that parses back, with the memory of the process.
        let start = page.find("id=\"data\">").unwrap() + "id=\"data\">".len();
        let end = start + page[start..].find("</script>").unwrap();
        let data: serde_json::Value = serde_json::from_str(&page[start..end]).unwrap();
        assert!(data[0]["title"].as_str().unwrap().starts_with("pid 4321"));
        assert!(data[0]["memory"]["devices"].as_array().is_some_and(|d| !d.is_empty()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
