//! Reading one side of a diff: a trace, a directory of traces, a JSON report
//! (`gpuleak report --format json`) or a trace's snapshot (`TRACE@N`).
//!
//! Traces are reported on with the memory pass (for the peak, the growth and the timeline) and
//! their leak groups keyed as `check --baseline` keys them; a JSON report is read as a baseline
//! is ([`Baseline`]). A snapshot's sites are the bytes live at it.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::{GrowthTotals, Measure, Side, Source};
use crate::check::baseline::{Baseline, BaselineError, BaselineSite, Totals};
use crate::file::{OpenError, TraceFile};
use crate::model::LeakAt;
use crate::report::memory::{At, MemoryView};
use crate::report::{self, Frame, Held, Options, ProcessReport};
use crate::site::SiteKey;

/// Why a side could not be read.
#[derive(Debug)]
pub enum InputError {
    /// A trace could not be opened.
    Open(OpenError),
    /// A JSON report could not be read.
    Report(BaselineError),
    /// A trace could not be read whole: its comparison would be wrong.
    Unreadable(String),
    /// No trace of `TRACE@N` has snapshot N.
    NoSnapshot {
        /// The argument.
        input: String,
        /// The id asked for.
        id: u64,
        /// The ids the traces have.
        has: Vec<u64>,
    },
}

impl fmt::Display for InputError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputError::Open(e) => write!(f, "{e}"),
            InputError::Report(e) => write!(f, "{e}"),
            InputError::Unreadable(why) => write!(
                f,
                "{why}; diff cannot compare a trace it could not read whole (`gpuleak report` shows what could be read)"
            ),
            InputError::NoSnapshot { input, id, has } if has.is_empty() => {
                write!(f, "{input}: no snapshot {id}: the trace has no Snapshot record")
            }
            InputError::NoSnapshot { input, id, has } => {
                let ids: Vec<String> = has.iter().map(u64::to_string).collect();
                write!(
                    f,
                    "{input}: no snapshot {id} (snapshots in the trace: {})",
                    ids.join(", ")
                )
            }
        }
    }
}

impl std::error::Error for InputError {}

/// How traces are read: the report's options that matter to a diff.
#[derive(Debug, Clone, Default)]
pub struct Reading {
    /// Debug directories, sysroot, `--focus`/`--hide`, `--pool-as-leak` (`top`, `memory` and
    /// `at` are set per side).
    pub options: Options,
    /// Traces read at once (0: one).
    pub jobs: usize,
    /// What each site counts.
    pub measure: Measure,
}

/// What an argument names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Argument {
    /// Traces, or a directory of them.
    Traces(PathBuf),
    /// A JSON report.
    Report(PathBuf),
    /// `TRACE@N`.
    Snapshot(PathBuf, u64),
}

impl Argument {
    /// An existing file whose first non-blank byte is `{` is a JSON report; a path that does
    /// not exist but ends in `@N` with the part before existing is a snapshot; anything else is
    /// traces (and fails to open, when it is not).
    pub fn parse(arg: &str) -> Argument {
        let path = Path::new(arg);
        if !path.exists() {
            if let Some((trace, id)) = arg.rsplit_once('@') {
                if let (Ok(id), true) = (id.parse::<u64>(), Path::new(trace).exists()) {
                    return Argument::Snapshot(PathBuf::from(trace), id);
                }
            }
        }
        if path.is_file() && starts_with_brace(path) {
            return Argument::Report(path.to_owned());
        }
        Argument::Traces(path.to_owned())
    }
}

fn starts_with_brace(path: &Path) -> bool {
    use std::io::Read;
    let mut head = [0u8; 256];
    let Ok(n) = std::fs::File::open(path).and_then(|mut f| f.read(&mut head)) else {
        return false;
    };
    head[..n].iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{')
}

/// Reads one side.
pub fn load(arg: &str, reading: &Reading) -> Result<Side, InputError> {
    match Argument::parse(arg) {
        Argument::Report(path) => from_report(arg, &path, reading),
        Argument::Traces(path) => from_traces(arg, &path, None, reading),
        Argument::Snapshot(path, id) => from_traces(arg, &path, Some(id), reading),
    }
}

fn from_traces(arg: &str, path: &Path, snapshot: Option<u64>, reading: &Reading) -> Result<Side, InputError> {
    let files = TraceFile::open_all(&[path.to_owned()]).map_err(InputError::Open)?;
    let options = Options {
        top: None,
        memory: true,
        at: snapshot.map(|from| At { from, to: None }),
        ..reading.options.clone()
    };
    let processes = report::from_files(&files, &options, reading.jobs.max(1), None);
    if let Some(why) = processes
        .iter()
        .find_map(|p| p.damage.problem().map(|why| format!("{}: {why}", p.trace.display())))
    {
        return Err(InputError::Unreadable(why));
    }
    let mut sites = BTreeMap::new();
    let memories: Vec<&MemoryView> = processes.iter().filter_map(|p| p.memory.as_deref()).collect();
    let timeline_of = |m: &MemoryView, until: Option<u64>| {
        let live: Vec<u64> = (0..m.replay.times.len())
            .map(|i| {
                m.replay
                    .devices
                    .iter()
                    .filter_map(|d| d.live.get(i))
                    .map(|s| s.last)
                    .sum()
            })
            .collect();
        let times: Vec<u64> = m.replay.times.clone();
        timeline(&times, &live, until)
    };
    if let Some(id) = snapshot {
        let mut found = false;
        let mut timeline = Vec::new();
        for m in &memories {
            let Some(snap) = &m.snapshot else { continue };
            found = true;
            for s in &snap.from.sites {
                let stack = m.sites.get(&s.stack).map(|v| v.stack.clone()).unwrap_or_default();
                add(&mut sites, stack, s.bytes, s.allocations);
            }
            if memories.len() == 1 {
                timeline = timeline_of(m, Some(snap.from.time_ns));
            }
        }
        if !found {
            let mut has: Vec<u64> = memories
                .iter()
                .flat_map(|m| m.replay.snapshot_ids.iter().copied())
                .collect();
            has.sort_unstable();
            has.dedup();
            return Err(InputError::NoSnapshot {
                input: arg.to_string(),
                id,
                has,
            });
        }
        return Ok(Side {
            input: arg.to_string(),
            source: Source::Snapshot(id),
            sites,
            peak_bytes: None,
            growth: None,
            timeline,
        });
    }
    for p in &processes {
        for h in counted(p, reading.measure) {
            add(&mut sites, h.stack.clone(), h.bytes, h.allocations);
        }
    }
    let mut growth = GrowthTotals::default();
    for m in &memories {
        for g in &m.growth {
            growth.sites += 1;
            growth.bytes = growth.bytes.saturating_add(g.to_bytes.saturating_sub(g.from_bytes));
        }
    }
    Ok(Side {
        input: arg.to_string(),
        source: Source::Trace,
        sites,
        peak_bytes: Some(processes.iter().map(|p| p.summary.peak_bytes).sum()),
        growth: (!memories.is_empty()).then_some(growth),
        timeline: match memories.as_slice() {
            [m] => timeline_of(m, None),
            _ => Vec::new(),
        },
    })
}

/// The groups a site counts: leaks, or what is live at the end.
fn counted(p: &ProcessReport, measure: Measure) -> Vec<&Held> {
    match measure {
        Measure::Leaked => p.leaks.iter().collect(),
        Measure::Live => p
            .leaks
            .iter()
            .filter(|h| h.at == LeakAt::Exit)
            .chain(&p.held_by_pool)
            .collect(),
    }
}

fn add(sites: &mut BTreeMap<SiteKey, BaselineSite>, stack: Vec<Frame>, bytes: u64, allocations: u64) {
    sites
        .entry(SiteKey::of(&stack))
        .or_insert_with(|| BaselineSite {
            totals: Totals::default(),
            stack,
        })
        .totals
        .add(Totals { bytes, allocations });
}

/// (ns since the first point, bytes), the points after `until` left out.
fn timeline(times: &[u64], live: &[u64], until: Option<u64>) -> Vec<(u64, u64)> {
    let start = times.first().copied().unwrap_or(0);
    times
        .iter()
        .zip(live)
        .take_while(|(t, _)| until.is_none_or(|u| **t <= u))
        .map(|(t, b)| (t.saturating_sub(start), *b))
        .collect()
}

fn from_report(arg: &str, path: &Path, reading: &Reading) -> Result<Side, InputError> {
    let text = std::fs::read(path).map_err(|e| InputError::Report(BaselineError::Io(path.to_owned(), e)))?;
    let doc: Value =
        serde_json::from_slice(&text).map_err(|e| InputError::Report(BaselineError::Json(path.to_owned(), e)))?;
    let user_code = &reading.options.user_code;
    let baseline = match reading.measure {
        Measure::Leaked => Baseline::from_json_with(&doc, path, user_code),
        // Live at the end: leaks at exit and what caching allocators hold.
        Measure::Live => {
            let mut live: Vec<Value> = doc
                .get("leaks")
                .and_then(Value::as_array)
                .map(|l| {
                    l.iter()
                        .filter(|g| g.get("at").and_then(Value::as_str) != Some("teardown"))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            if let Some(pool) = doc.get("held_by_pool").and_then(Value::as_array) {
                live.extend(pool.iter().cloned());
            }
            let mut only = serde_json::Map::new();
            if doc.get("leaks").is_some() {
                only.insert("leaks".into(), Value::Array(live));
            }
            Baseline::from_json_with(&Value::Object(only), path, user_code)
        }
    }
    .map_err(InputError::Report)?;

    let processes: Vec<&Value> = match (doc.get("processes").and_then(Value::as_array), doc.get("process")) {
        (Some(list), _) => list.iter().collect(),
        (None, Some(p)) => vec![p],
        _ => Vec::new(),
    };
    let memories: Vec<&Value> = processes
        .iter()
        .filter_map(|p| p.get("memory"))
        .filter(|m| m.is_object())
        .collect();
    let mut growth = GrowthTotals::default();
    for g in memories
        .iter()
        .filter_map(|m| m.get("growth").and_then(Value::as_array))
        .flatten()
    {
        let n = |k: &str| g.get(k).and_then(Value::as_u64).unwrap_or(0);
        growth.sites += 1;
        growth.bytes = growth
            .bytes
            .saturating_add(n("to_bytes").saturating_sub(n("from_bytes")));
    }
    let timeline = match memories.as_slice() {
        [m] => {
            let numbers = |v: Option<&Value>| -> Vec<u64> {
                v.and_then(Value::as_array)
                    .map(|a| a.iter().map(|x| x.as_u64().unwrap_or(0)).collect())
                    .unwrap_or_default()
            };
            let times = numbers(m.get("times_ns"));
            let mut live = vec![0u64; times.len()];
            for d in m.get("devices").and_then(Value::as_array).into_iter().flatten() {
                for (sum, b) in live.iter_mut().zip(numbers(d.get("live_bytes"))) {
                    *sum = sum.saturating_add(b);
                }
            }
            timeline(&times, &live, None)
        }
        _ => Vec::new(),
    };
    Ok(Side {
        input: arg.to_string(),
        source: Source::Report,
        sites: baseline.sites,
        peak_bytes: doc.pointer("/summary/peak_bytes").and_then(Value::as_u64),
        growth: (!memories.is_empty()).then_some(growth),
        timeline,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_argument_is_a_report_a_snapshot_or_traces() {
        let dir = std::env::temp_dir().join(format!("gpuleak-diff-args-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let report = dir.join("r.json");
        std::fs::write(&report, "\n  {\"leaks\": []}").unwrap();
        let trace = dir.join("t.trace");
        std::fs::write(&trace, b"GPULEAK\0").unwrap();
        let s = |p: &Path| p.to_str().unwrap().to_string();
        assert_eq!(Argument::parse(&s(&report)), Argument::Report(report.clone()));
        assert_eq!(Argument::parse(&s(&trace)), Argument::Traces(trace.clone()));
        assert_eq!(
            Argument::parse(&format!("{}@12", s(&trace))),
            Argument::Snapshot(trace.clone(), 12)
        );
        assert_eq!(Argument::parse(&s(&dir)), Argument::Traces(dir.clone()));
        // Not a snapshot: no number, or no such trace.
        let bad = format!("{}@x", s(&trace));
        assert_eq!(Argument::parse(&bad), Argument::Traces(PathBuf::from(&bad)));
        let missing = format!("{}/none@1", s(&dir));
        assert_eq!(Argument::parse(&missing), Argument::Traces(PathBuf::from(&missing)));
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_timeline_starts_at_zero_and_stops_at_the_snapshot() {
        assert_eq!(
            timeline(&[100, 200, 300], &[1, 2, 3], None),
            [(0, 1), (100, 2), (200, 3)]
        );
        assert_eq!(timeline(&[100, 200, 300], &[1, 2, 3], Some(250)), [(0, 1), (100, 2)]);
    }
}
