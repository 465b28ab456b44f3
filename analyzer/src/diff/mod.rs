//! `gpuleak diff A B`: two runs (or two moments of one run) side by side, site by site.
//!
//! Each side ([`Side`]) is read by [`input`] from a trace, a directory of traces, a JSON
//! report or a trace's snapshot (`TRACE@N`), as leak sites keyed by [`SiteKey`], the key
//! `gpuleak check --baseline` matches sites by. [`compare`] sorts the sites into new, grown,
//! shrunk and gone; any change of bytes counts, with no tolerance. [`text`], [`json`] and
//! [`html`] write the result; `docs/diff.md` describes the command line and the JSON.
//!
//! ```no_run
//! use gpuleak_analyzer::diff::{self, input, Measure};
//!
//! let reading = input::Reading::default();
//! let a = input::load("before.trace", &reading).unwrap();
//! let b = input::load("after.trace", &reading).unwrap();
//! let d = diff::compare(a, b, Measure::Leaked);
//! let mut out = Vec::new();
//! diff::json::write(&d, &mut out).unwrap();
//! std::process::exit(d.exit_code().into());
//! ```

pub mod html;
pub mod input;
pub mod json;
pub mod text;

use std::collections::BTreeMap;

use crate::check::baseline::{self, BaselineSite, Change, Totals};
use crate::check::{SiteKey, Tolerance, EXIT_CLEAN, EXIT_FINDINGS};
use crate::report::Frame;

/// What is compared per site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Measure {
    /// Leaked bytes (at exit or at a context teardown), as `check --baseline` compares them.
    #[default]
    Leaked,
    /// Bytes still live at the end (leaked at exit, and held by caching allocators).
    Live,
}

impl Measure {
    /// `leaked` or `live`.
    pub fn name(self) -> &'static str {
        match self {
            Measure::Leaked => "leaked",
            Measure::Live => "live",
        }
    }
}

/// What a side was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    /// Traces (a file or a directory of them).
    Trace,
    /// A JSON report.
    Report,
    /// The live sites at a trace's `Snapshot` record with this id.
    Snapshot(u64),
}

impl Source {
    /// `trace`, `report` or `snapshot`.
    pub fn name(self) -> &'static str {
        match self {
            Source::Trace => "trace",
            Source::Report => "report",
            Source::Snapshot(_) => "snapshot",
        }
    }
}

/// Sites whose live bytes kept rising (the memory pass's growth), summed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct GrowthTotals {
    /// Growing sites.
    pub sites: u64,
    /// Their rise, summed (to-bytes less from-bytes).
    pub bytes: u64,
}

/// One side of a diff.
#[derive(Debug, Clone)]
pub struct Side {
    /// The argument as given.
    pub input: String,
    /// What it was read from.
    pub source: Source,
    /// Its sites, with the stack of the first group of each.
    pub sites: BTreeMap<SiteKey, BaselineSite>,
    /// Highest live bytes of the run (several processes: the sum of their peaks); `None` for a
    /// snapshot, or a report without it.
    pub peak_bytes: Option<u64>,
    /// The memory pass's growing sites; `None` when the pass did not run (a JSON report made
    /// without `--memory`) or for a snapshot.
    pub growth: Option<GrowthTotals>,
    /// Live bytes over time, (ns since the first point, bytes), for a side of one process
    /// whose memory pass ran; up to the snapshot for a snapshot; else empty.
    pub timeline: Vec<(u64, u64)>,
}

impl Side {
    /// The sites' totals, summed.
    pub fn total(&self) -> Totals {
        let mut t = Totals::default();
        for s in self.sites.values() {
            t.add(s.totals);
        }
        t
    }
}

/// One site that differs between the sides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SiteChange {
    /// Its key.
    pub site: SiteKey,
    /// Totals in A (zero when new).
    pub before: Totals,
    /// Totals in B (zero when gone).
    pub after: Totals,
    /// B's stack, or A's when gone.
    pub stack: Vec<Frame>,
}

impl SiteChange {
    /// Bytes after less bytes before.
    pub fn delta(&self) -> i128 {
        i128::from(self.after.bytes) - i128::from(self.before.bytes)
    }
}

/// The comparison of two sides.
#[derive(Debug, Clone)]
pub struct Diff {
    /// The earlier side.
    pub a: Side,
    /// The later side.
    pub b: Side,
    /// What was compared.
    pub measure: Measure,
    /// In B only, largest first.
    pub new: Vec<SiteChange>,
    /// More bytes in B, largest rise first.
    pub grown: Vec<SiteChange>,
    /// Fewer bytes in B (but some), largest fall first.
    pub shrunk: Vec<SiteChange>,
    /// In A only, largest first.
    pub gone: Vec<SiteChange>,
    /// Sites with the same bytes in both.
    pub unchanged: u64,
}

impl Diff {
    /// What the bytes are: `leaked` or `live` (`--live`, or both sides snapshots, whose sites
    /// are what is live at them), `mixed` for a snapshot against a whole run's leaks.
    pub fn compared(&self) -> &'static str {
        let snapshot = |s: &Side| matches!(s.source, Source::Snapshot(_));
        match (self.measure, snapshot(&self.a), snapshot(&self.b)) {
            (Measure::Live, _, _) | (_, true, true) => "live",
            (Measure::Leaked, false, false) => "leaked",
            _ => "mixed",
        }
    }

    /// 1 when a site is new or grew (as `check --baseline` fails), else 0.
    pub fn exit_code(&self) -> u8 {
        if self.new.is_empty() && self.grown.is_empty() {
            EXIT_CLEAN
        } else {
            EXIT_FINDINGS
        }
    }
}

/// Compares A's sites with B's: a site in B only is new, in A only gone; one in both grew or
/// shrank on any change of its bytes (its allocation count alone changes nothing).
pub fn compare(a: Side, b: Side, measure: Measure) -> Diff {
    let now: BTreeMap<SiteKey, Totals> = b.sites.iter().map(|(k, s)| (k.clone(), s.totals)).collect();
    let mut d = Diff {
        new: Vec::new(),
        grown: Vec::new(),
        shrunk: Vec::new(),
        gone: Vec::new(),
        unchanged: 0,
        measure,
        a: Side {
            sites: BTreeMap::new(),
            ..a.clone()
        },
        b: Side {
            sites: BTreeMap::new(),
            ..b.clone()
        },
    };
    for (site, after, change) in baseline::compare(&now, &a.sites, Tolerance::None) {
        let stack = match b.sites.get(&site).or_else(|| a.sites.get(&site)) {
            Some(s) => s.stack.clone(),
            None => Vec::new(),
        };
        let entry = |before: Totals| SiteChange {
            site: site.clone(),
            before,
            after,
            stack: stack.clone(),
        };
        match change {
            Change::New => d.new.push(entry(Totals::default())),
            Change::Grew { was } | Change::WithinTolerance { was } => d.grown.push(entry(was)),
            Change::Smaller { was } => d.shrunk.push(entry(was)),
            Change::Gone { was } => d.gone.push(entry(was)),
            Change::Unchanged => d.unchanged += 1,
        }
    }
    // Largest change first; the key breaks ties, so the order is stable.
    for list in [&mut d.new, &mut d.grown, &mut d.shrunk, &mut d.gone] {
        list.sort_by(|x, y| y.delta().abs().cmp(&x.delta().abs()).then_with(|| x.site.cmp(&y.site)));
    }
    d.a.sites = a.sites;
    d.b.sites = b.sites;
    d
}

/// `N unit` or `N units`.
pub(crate) fn plural(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::site::tests::frame;

    fn side(list: &[(&str, u64, u64)]) -> Side {
        let sites = list
            .iter()
            .map(|&(name, bytes, allocations)| {
                let stack = vec![frame(name, "app.c", 1, "app")];
                (
                    SiteKey::of(&stack),
                    BaselineSite {
                        totals: Totals { bytes, allocations },
                        stack,
                    },
                )
            })
            .collect();
        Side {
            input: "x".into(),
            source: Source::Trace,
            sites,
            peak_bytes: None,
            growth: None,
            timeline: Vec::new(),
        }
    }

    fn names(list: &[SiteChange]) -> Vec<(String, i128)> {
        list.iter()
            .map(|c| (c.stack[0].function.clone().unwrap(), c.delta()))
            .collect()
    }

    #[test]
    fn sites_are_new_grown_shrunk_or_gone_on_any_change_of_bytes() {
        let a = side(&[
            ("same", 100, 1),
            ("grows", 100, 1),
            ("shrinks", 100, 2),
            ("goes", 50, 1),
            ("more_calls", 64, 1),
        ]);
        let b = side(&[
            ("same", 100, 1),
            ("grows", 101, 1),
            ("shrinks", 1, 1),
            ("comes", 7, 1),
            ("more_calls", 64, 2),
        ]);
        let d = compare(a, b, Measure::Leaked);
        assert_eq!(names(&d.new), [("comes".to_string(), 7)]);
        assert_eq!(names(&d.grown), [("grows".to_string(), 1)], "one byte more is growth");
        assert_eq!(names(&d.shrunk), [("shrinks".to_string(), -99)]);
        assert_eq!(names(&d.gone), [("goes".to_string(), -50)]);
        assert_eq!(d.unchanged, 2, "the same bytes in more allocations is no change");
        assert_eq!(
            d.grown[0].before,
            Totals {
                bytes: 100,
                allocations: 1
            }
        );
        assert_eq!(d.gone[0].after, Totals::default());
        assert_eq!(d.exit_code(), EXIT_FINDINGS);
        assert_eq!(d.a.sites.len(), 5, "the sides keep their sites");
        assert_eq!(d.compared(), "leaked");
        let mut d = d;
        d.a.source = Source::Snapshot(1);
        assert_eq!(d.compared(), "mixed");
        d.b.source = Source::Snapshot(2);
        assert_eq!(d.compared(), "live");
    }

    #[test]
    fn the_same_run_twice_or_only_improvements_exit_zero() {
        let a = side(&[("x", 100, 1), ("y", 10, 1)]);
        let d = compare(a.clone(), a.clone(), Measure::Leaked);
        assert!(d.new.is_empty() && d.grown.is_empty() && d.shrunk.is_empty() && d.gone.is_empty());
        assert_eq!((d.unchanged, d.exit_code()), (2, EXIT_CLEAN));
        let d = compare(a, side(&[("x", 1, 1)]), Measure::Live);
        assert_eq!((d.shrunk.len(), d.gone.len(), d.exit_code()), (1, 1, EXIT_CLEAN));
    }

    #[test]
    fn lists_are_largest_change_first_then_by_key() {
        let d = compare(
            side(&[]),
            side(&[("b", 10, 1), ("a", 10, 1), ("c", 500, 1)]),
            Measure::Leaked,
        );
        assert_eq!(
            names(&d.new),
            [("c".to_string(), 500), ("a".to_string(), 10), ("b".to_string(), 10)]
        );
    }
}
