//! `gpuleak merge REPORT.json...`: the report of a job whose traces lie on many machines, from
//! the JSON reports made where the traces are (`gpuleak report --format json` on each node).
//!
//! The result is the document `gpuleak report --format json` writes over every trace at once,
//! byte for byte, when the inputs are given in the order their traces would be: processes
//! concatenated, totals summed, the leak lists merged largest first (stably, so processes keep
//! their order among equal sizes), notes about missing debug information kept in the first
//! process that has each, and the merged view of the leak sites and the per-rank table built
//! again over every process. Only the reports are read: memory grows with what they show, not
//! with the traces.
//!
//! Reports made with `--top` left groups out, which the merged view must count: they are
//! refused, as are reports of another schema version.

use std::collections::{HashMap, HashSet};
use std::path::Path;

use crate::site::SiteKey;

use super::json::SCHEMA_VERSION;
use super::ranks::{self, RankRow};
use super::Frame;
use crate::json::{render, Layout, J};

/// One input report, parsed.
struct Input<'p> {
    path: &'p Path,
    doc: J,
}

fn field<'j>(j: &'j J, key: &str, path: &Path, what: &str) -> Result<&'j J, String> {
    j.get(key).ok_or_else(|| {
        format!(
            "{}: {what} has no \"{key}\": not a report of gpuleak report --format json",
            path.display()
        )
    })
}

fn read(path: &Path, text: &str) -> Result<J, String> {
    let doc: J = serde_json::from_str(text).map_err(|e| format!("{}: not JSON: {e}", path.display()))?;
    let version = field(&doc, "schema_version", path, "the document")?.u();
    if version != Some(SCHEMA_VERSION) {
        return Err(format!(
            "{}: schema version {} (this gpuleak reads {SCHEMA_VERSION}): merge reports made by the same gpuleak",
            path.display(),
            version.map_or("unknown".to_string(), |v| v.to_string())
        ));
    }
    for key in [
        "summary",
        "leaks",
        "findings",
        "held_by_pool",
        "unreleased",
        "notes",
        "processes",
    ] {
        field(&doc, key, path, "the document")?;
    }
    for p in field(&doc, "processes", path, "the document")?.items() {
        let omitted = field(p, "omitted", path, "a process")?;
        let left_out: u64 = ["leaks", "held_by_pool", "unreleased"]
            .iter()
            .filter_map(|k| omitted.get(k).and_then(|o| o.get("groups")).and_then(J::u))
            .sum();
        if left_out > 0 {
            return Err(format!(
                "{}: the report left out {left_out} {} of process {} (--top): make the reports to merge without --top",
                path.display(),
                if left_out == 1 { "group" } else { "groups" },
                p.get("pid").and_then(J::u).map_or("?".to_string(), |p| p.to_string())
            ));
        }
        field(p, "symbol_notes", path, "a process")
            .map_err(|e| format!("{e} (made by an older gpuleak; make the reports again with this one)"))?;
    }
    Ok(doc)
}

/// Merges the report files `paths` (in the order of their traces) into one document; each is
/// read and parsed in turn, so only one file's text is in memory at a time.
pub fn merge_files<P: AsRef<Path>>(paths: &[P]) -> Result<String, String> {
    let mut parsed = Vec::with_capacity(paths.len());
    for path in paths {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        parsed.push(Input {
            path,
            doc: read(path, &text)?,
        });
    }
    finish(parsed)
}

fn finish(parsed: Vec<Input<'_>>) -> Result<String, String> {
    let mut out = String::new();
    render(&document(parsed)?, Layout::Report, &mut out);
    out.push('\n');
    Ok(out)
}

/// A leak group of one process, in the order of its process's list.
struct Group<'j> {
    process: usize,
    j: &'j J,
}

fn document(inputs: Vec<Input<'_>>) -> Result<J, String> {
    // Processes, with the notes about missing debug information kept in the first process
    // that has each (as gpuleak report does over every trace).
    let mut processes: Vec<J> = Vec::new();
    // (input, pid) -> index of the process in `processes`.
    let mut index: HashMap<(usize, Option<u64>), usize> = HashMap::new();
    let mut seen_symbol_notes: HashSet<String> = HashSet::new();
    for (i, input) in inputs.iter().enumerate() {
        for p in input.doc.get("processes").map_or(&[][..], J::items) {
            let pid = p.get("pid").and_then(J::u);
            if index.insert((i, pid), processes.len()).is_some() {
                return Err(format!(
                    "{}: two processes with pid {}: the leaks cannot be told apart; report them separately",
                    input.path.display(),
                    pid.map_or("unknown".to_string(), |p| p.to_string())
                ));
            }
            let mut p = p.clone();
            let symbol: Vec<String> = p
                .get("symbol_notes")
                .map_or(&[][..], J::items)
                .iter()
                .filter_map(|n| n.s().map(str::to_string))
                .collect();
            let again: Vec<&String> = symbol.iter().filter(|n| seen_symbol_notes.contains(*n)).collect();
            if !again.is_empty() {
                for key in ["notes", "symbol_notes"] {
                    if let Some(J::A(items)) = p.get_mut(key) {
                        items.retain(|n| n.s().is_none_or(|s| !again.iter().any(|a| a.as_str() == s)));
                    }
                }
            }
            seen_symbol_notes.extend(symbol);
            processes.push(p);
        }
    }

    let mut summary: Option<J> = None;
    for input in &inputs {
        let s = input.doc.get("summary").unwrap_or(&J::Null);
        match &mut summary {
            None => summary = Some(s.clone()),
            Some(J::O(total)) => {
                for (k, v) in total.iter_mut() {
                    if let (J::U(t), Some(n)) = (&mut *v, s.get(k).and_then(J::u)) {
                        *t = t.saturating_add(n);
                    }
                }
            }
            Some(_) => {}
        }
    }
    let summary = summary.unwrap_or(J::O(Vec::new()));

    // The lists: each input's is sorted largest first, stably over its processes; sorting
    // their concatenation stably gives the order of one report over every process.
    let list = |key: &str| -> J {
        let mut all: Vec<&J> = inputs
            .iter()
            .flat_map(|i| i.doc.get(key).map_or(&[][..], J::items))
            .collect();
        if key != "findings" {
            all.sort_by_key(|h| std::cmp::Reverse(h.get("bytes").and_then(J::u).unwrap_or(0)));
        }
        J::A(all.into_iter().cloned().collect())
    };
    let notes = J::A(
        processes
            .iter()
            .flat_map(|p| p.get("notes").map_or(&[][..], J::items))
            .cloned()
            .collect(),
    );
    let mut doc = vec![
        ("schema_version", J::U(SCHEMA_VERSION)),
        ("summary", summary),
        ("leaks", list("leaks")),
        ("findings", list("findings")),
        ("held_by_pool", list("held_by_pool")),
        ("unreleased", list("unreleased")),
        ("notes", notes),
    ];
    if let [only] = processes.as_slice() {
        doc.push(("process", only.clone()));
    }

    let merged = if processes.len() > 1 {
        // Each process's leak groups in the order of its own list (the stable order of the
        // input's list restricted to the process).
        let mut groups: Vec<Vec<Group<'_>>> = (0..processes.len()).map(|_| Vec::new()).collect();
        for (i, input) in inputs.iter().enumerate() {
            for h in input.doc.get("leaks").map_or(&[][..], J::items) {
                let pid = h.get("pid").and_then(J::u);
                let Some(&process) = index.get(&(i, pid)) else {
                    return Err(format!(
                        "{}: a leak of pid {} that no process of the report has",
                        input.path.display(),
                        pid.map_or("unknown".to_string(), |p| p.to_string())
                    ));
                };
                groups[process].push(Group { process, j: h });
            }
        }
        Some(merged_sites(&groups, &processes))
    } else {
        None
    };
    let rows = rank_rows(&processes);
    doc.push(("processes", J::A(processes)));
    if let Some(merged) = merged {
        doc.push(("merged_leaks", J::A(merged)));
        doc.push(("merged_omitted", J::O(vec![("sites", J::U(0)), ("bytes", J::U(0))])));
    }
    if !rows.is_empty() {
        doc.push(("ranks", J::A(rows)));
    }
    Ok(J::O(doc))
}

fn frame(j: &J) -> Frame {
    let s = |k: &str| j.get(k).and_then(J::s).map(str::to_string);
    Frame {
        function: s("function"),
        file: s("file"),
        line: j.get("line").and_then(J::u).and_then(|l| u32::try_from(l).ok()),
        module: s("module"),
        address: s("address")
            .and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok())
            .unwrap_or(0),
        inlined: matches!(j.get("inlined"), Some(J::Bool(true))),
        user: matches!(j.get("user"), Some(J::Bool(true))),
    }
}

/// One merged site being summed.
struct Site<'j> {
    key: SiteKey,
    bytes: u64,
    allocations: u64,
    first: &'j J,
    /// (process, bytes, allocations).
    per_process: Vec<(usize, u64, u64)>,
}

/// The merged view, as [`super::merged::sites`] builds it, over the groups of every process.
fn merged_sites(groups: &[Vec<Group<'_>>], processes: &[J]) -> Vec<J> {
    let mut index: HashMap<SiteKey, usize> = HashMap::new();
    let mut sites: Vec<Site<'_>> = Vec::new();
    for g in groups.iter().flatten() {
        let stack: Vec<Frame> = g.j.get("stack").map_or(&[][..], J::items).iter().map(frame).collect();
        let key = SiteKey::of(&stack);
        let at = *index.entry(key.clone()).or_insert_with(|| {
            sites.push(Site {
                key,
                bytes: 0,
                allocations: 0,
                first: g.j,
                per_process: Vec::new(),
            });
            sites.len() - 1
        });
        let (bytes, allocations) = (
            g.j.get("bytes").and_then(J::u).unwrap_or(0),
            g.j.get("allocations").and_then(J::u).unwrap_or(0),
        );
        let site = &mut sites[at];
        site.bytes = site.bytes.saturating_add(bytes);
        site.allocations = site.allocations.saturating_add(allocations);
        match site.per_process.last_mut() {
            Some(last) if last.0 == g.process => {
                last.1 = last.1.saturating_add(bytes);
                last.2 = last.2.saturating_add(allocations);
            }
            _ => site.per_process.push((g.process, bytes, allocations)),
        }
    }
    sites.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(b.per_process.len().cmp(&a.per_process.len()))
            .then(b.allocations.cmp(&a.allocations))
            .then(a.key.cmp(&b.key))
    });
    let copy = |j: &J, k: &str| j.get(k).map_or(J::Null, J::clone);
    sites
        .into_iter()
        .map(|s| {
            let per_process = s
                .per_process
                .iter()
                .map(|&(p, bytes, allocations)| {
                    let proc_ = &processes[p];
                    J::O(vec![
                        ("pid", copy(proc_, "pid")),
                        ("trace", copy(proc_, "trace")),
                        ("bytes", J::U(bytes)),
                        ("allocations", J::U(allocations)),
                        (
                            "rank",
                            proc_.get("rank").and_then(|r| r.get("rank")).map_or(J::Null, J::clone),
                        ),
                    ])
                })
                .collect();
            J::O(vec![
                ("bytes", J::U(s.bytes)),
                ("allocations", J::U(s.allocations)),
                ("kind", copy(s.first, "kind")),
                ("stack", copy(s.first, "stack")),
                ("site", J::S(s.key.as_str().to_string())),
                ("process_count", J::U(s.per_process.len() as u64)),
                ("api", copy(s.first, "api")),
                ("via", copy(s.first, "via")),
                ("per_process", J::A(per_process)),
            ])
        })
        .collect()
}

/// The per-rank table over the processes' objects.
fn rank_rows(processes: &[J]) -> Vec<J> {
    let rows: Vec<RankRow> = processes
        .iter()
        .enumerate()
        .filter_map(|(i, p)| {
            let rank = p.get("rank")?.get("rank")?.u()?;
            let summary = p.get("summary");
            let num = |k: &str| summary.and_then(|s| s.get(k)).and_then(J::u).unwrap_or(0);
            let growth = p.get("memory").and_then(|m| m.get("growth")).map(|g| {
                g.items().iter().fold(0u64, |s, g| {
                    let from = g.get("from_bytes").and_then(J::u).unwrap_or(0);
                    let to = g.get("to_bytes").and_then(J::u).unwrap_or(0);
                    s.saturating_add(to.saturating_sub(from))
                })
            });
            Some(RankRow {
                process: i,
                rank,
                peak_bytes: num("peak_bytes"),
                leaked_bytes: num("leaked_bytes"),
                growth_bytes: growth,
                findings: num("findings"),
                outliers: Vec::new(),
            })
        })
        .collect();
    ranks::flag(rows)
        .iter()
        .map(|r| {
            let p = &processes[r.process];
            super::json::rank_row_of(
                r,
                p.get("pid").and_then(J::u),
                p.get("hostname").and_then(J::s),
                p.get("trace").and_then(J::s).unwrap_or(""),
            )
        })
        .collect()
}
