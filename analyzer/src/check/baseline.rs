//! Baselines: the JSON report of an earlier run, and how a run compares with it site by site.
//!
//! A baseline is the document `gpuleak report --format json` or `gpuleak check --format json`
//! printed. Only its `leaks` (bytes, allocations and stack of each group) and its `findings`
//! (check and stack) are read; fields a later version adds are ignored. Groups with the same
//! site key ([`SiteKey`]) are one site, summed over every process of the baseline.

use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::size::Tolerance;
use super::suppress::Suppressions;
use crate::report::user_code::UserCode;
use crate::report::Frame;
use crate::site::SiteKey;

/// Why a baseline could not be used.
#[derive(Debug)]
pub enum BaselineError {
    /// The file could not be read.
    Io(PathBuf, std::io::Error),
    /// The file is not JSON.
    Json(PathBuf, serde_json::Error),
    /// The JSON is not a gpuleak report.
    Shape(PathBuf, String),
}

impl fmt::Display for BaselineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BaselineError::Io(p, e) => write!(f, "{}: cannot read the baseline: {e}", p.display()),
            BaselineError::Json(p, e) => write!(
                f,
                "{}: the baseline is not JSON ({e}); make it with `gpuleak report --format json`",
                p.display()
            ),
            BaselineError::Shape(p, why) => write!(
                f,
                "{}: not a gpuleak JSON report: {why}; make it with `gpuleak report --format json`",
                p.display()
            ),
        }
    }
}

impl std::error::Error for BaselineError {}

/// Bytes and allocations of one site.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Totals {
    /// Bytes.
    pub bytes: u64,
    /// Allocations.
    pub allocations: u64,
}

impl Totals {
    /// Adds another group's totals.
    pub fn add(&mut self, o: Totals) {
        self.bytes = self.bytes.saturating_add(o.bytes);
        self.allocations = self.allocations.saturating_add(o.allocations);
    }
}

/// A site of the baseline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaselineSite {
    /// Summed over its groups.
    pub totals: Totals,
    /// The stack of its first group.
    pub stack: Vec<Frame>,
}

/// A finding of the baseline.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BaselineFinding {
    /// Its check (`bad-free`).
    pub check: String,
    /// Where it happened.
    pub stack: Vec<Frame>,
}

/// An earlier run's leak sites and findings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Baseline {
    /// The file.
    pub path: PathBuf,
    /// Leak sites by key.
    pub sites: BTreeMap<SiteKey, BaselineSite>,
    /// Findings.
    pub findings: Vec<BaselineFinding>,
}

impl Baseline {
    /// Reads a baseline file.
    pub fn read(path: &Path) -> Result<Baseline, BaselineError> {
        Baseline::read_with(path, &UserCode::default())
    }

    /// Reads a baseline file; the frames of a baseline written before frames said whether
    /// they are the user's are classified by `user_code` from what the report kept of them
    /// (a module's base name, a Python file's path).
    pub fn read_with(path: &Path, user_code: &UserCode) -> Result<Baseline, BaselineError> {
        let text = std::fs::read(path).map_err(|e| BaselineError::Io(path.to_owned(), e))?;
        let doc: Value = serde_json::from_slice(&text).map_err(|e| BaselineError::Json(path.to_owned(), e))?;
        Baseline::from_json_with(&doc, path, user_code)
    }

    /// Reads a baseline from a parsed report.
    pub fn from_json(doc: &Value, path: &Path) -> Result<Baseline, BaselineError> {
        Baseline::from_json_with(doc, path, &UserCode::default())
    }

    /// [`Baseline::from_json`] with older frames classified by `user_code`.
    pub fn from_json_with(doc: &Value, path: &Path, user_code: &UserCode) -> Result<Baseline, BaselineError> {
        let shape = |why: String| BaselineError::Shape(path.to_owned(), why);
        let doc = doc.as_object().ok_or_else(|| shape("not a JSON object".into()))?;
        let leaks = doc
            .get("leaks")
            .and_then(Value::as_array)
            .ok_or_else(|| shape("no \"leaks\" array".into()))?;
        let mut sites: BTreeMap<SiteKey, BaselineSite> = BTreeMap::new();
        for (i, leak) in leaks.iter().enumerate() {
            let field = |name: &str| leak.get(name).and_then(Value::as_u64);
            let bytes = field("bytes").ok_or_else(|| shape(format!("leaks[{i}] has no \"bytes\" number")))?;
            let totals = Totals {
                bytes,
                allocations: field("allocations").unwrap_or(1),
            };
            let stack = stack(leak.get("stack"), user_code).map_err(|why| shape(format!("leaks[{i}].stack: {why}")))?;
            sites
                .entry(SiteKey::of(&stack))
                .or_insert_with(|| BaselineSite {
                    totals: Totals::default(),
                    stack,
                })
                .totals
                .add(totals);
        }
        let mut findings = Vec::new();
        if let Some(list) = doc.get("findings") {
            let list = list
                .as_array()
                .ok_or_else(|| shape("\"findings\" is not an array".into()))?;
            for (i, f) in list.iter().enumerate() {
                let check = f
                    .get("check")
                    .and_then(Value::as_str)
                    .ok_or_else(|| shape(format!("findings[{i}] has no \"check\" string")))?;
                let stack =
                    stack(f.get("stack"), user_code).map_err(|why| shape(format!("findings[{i}].stack: {why}")))?;
                findings.push(BaselineFinding {
                    check: check.to_string(),
                    stack,
                });
            }
        }
        Ok(Baseline {
            path: path.to_owned(),
            sites,
            findings,
        })
    }

    /// The baseline less what `suppressions` silence, so that a suppressed site is neither new
    /// nor gone.
    pub fn without(mut self, suppressions: &Suppressions) -> Baseline {
        self.sites.retain(|_, s| suppressions.find("leak", &s.stack).is_none());
        self.findings
            .retain(|f| suppressions.find(&f.check, &f.stack).is_none());
        self
    }

    /// Whether the baseline has a finding of `check` at `site`.
    pub fn has_finding(&self, check: &str, site: &SiteKey) -> bool {
        self.findings
            .iter()
            .any(|f| f.check == check && SiteKey::of(&f.stack) == *site)
    }
}

/// The frames of a stack in a report; a frame without `user` (a report older than it) is
/// classified by `user_code`.
fn stack(v: Option<&Value>, user_code: &UserCode) -> Result<Vec<Frame>, String> {
    let Some(v) = v else {
        return Ok(Vec::new());
    };
    let frames = v.as_array().ok_or("not an array")?;
    frames
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let f = f.as_object().ok_or_else(|| format!("frame {i} is not an object"))?;
            let text = |name: &str| f.get(name).and_then(Value::as_str).map(str::to_string);
            let address = match f.get("address") {
                Some(Value::String(s)) => {
                    let hex = s.strip_prefix("0x").unwrap_or(s);
                    u64::from_str_radix(hex, 16).map_err(|_| format!("frame {i}: bad address {s:?}"))?
                }
                Some(Value::Number(n)) => n.as_u64().unwrap_or(0),
                _ => 0,
            };
            let mut frame = Frame {
                function: text("function"),
                file: text("file"),
                line: f
                    .get("line")
                    .and_then(Value::as_u64)
                    .and_then(|l| u32::try_from(l).ok()),
                module: text("module"),
                address,
                inlined: f.get("inlined").and_then(Value::as_bool).unwrap_or(false),
                user: false,
            };
            frame.user = match f.get("user").and_then(Value::as_bool) {
                Some(user) => user,
                None => user_code.is_users(&frame, None),
            };
            Ok(frame)
        })
        .collect()
}

/// How a site compares with the baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Change {
    /// Not in the baseline: fails.
    New,
    /// More bytes than the baseline allows: fails.
    Grew {
        /// The baseline's totals.
        was: Totals,
    },
    /// More bytes, within the tolerance.
    WithinTolerance {
        /// The baseline's totals.
        was: Totals,
    },
    /// The same bytes.
    Unchanged,
    /// Fewer bytes: an improvement.
    Smaller {
        /// The baseline's totals.
        was: Totals,
    },
    /// In the baseline, not in this run: an improvement.
    Gone {
        /// The baseline's totals.
        was: Totals,
    },
}

impl Change {
    /// Whether the change fails the check.
    pub fn fails(self) -> bool {
        matches!(self, Change::New | Change::Grew { .. })
    }

    /// `new`, `grew`, `within-tolerance`, `unchanged`, `smaller` or `gone`.
    pub fn name(self) -> &'static str {
        match self {
            Change::New => "new",
            Change::Grew { .. } => "grew",
            Change::WithinTolerance { .. } => "within-tolerance",
            Change::Unchanged => "unchanged",
            Change::Smaller { .. } => "smaller",
            Change::Gone { .. } => "gone",
        }
    }
}

/// Compares this run's sites with the baseline's: every site of either, in key order, with
/// this run's totals (zero for a gone site).
pub fn compare(
    now: &BTreeMap<SiteKey, Totals>,
    baseline: &BTreeMap<SiteKey, BaselineSite>,
    tolerance: Tolerance,
) -> Vec<(SiteKey, Totals, Change)> {
    let mut out = Vec::with_capacity(now.len().max(baseline.len()));
    for (key, &totals) in now {
        let change = match baseline.get(key) {
            None => Change::New,
            Some(b) => {
                let was = b.totals;
                if totals.bytes > was.bytes {
                    if tolerance.exceeded(was.bytes, totals.bytes) {
                        Change::Grew { was }
                    } else {
                        Change::WithinTolerance { was }
                    }
                } else if totals.bytes < was.bytes {
                    Change::Smaller { was }
                } else {
                    Change::Unchanged
                }
            }
        };
        out.push((key.clone(), totals, change));
    }
    for (key, b) in baseline {
        if !now.contains_key(key) {
            out.push((key.clone(), Totals::default(), Change::Gone { was: b.totals }));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::site::tests::{entry, frame};
    use serde_json::json;

    fn totals(bytes: u64, allocations: u64) -> Totals {
        Totals { bytes, allocations }
    }

    fn key(s: &str) -> SiteKey {
        SiteKey::of(&[frame(s, "app.c", 1, "app")])
    }

    fn sites(list: &[(&str, u64)]) -> BTreeMap<SiteKey, BaselineSite> {
        list.iter()
            .map(|&(name, bytes)| {
                (
                    key(name),
                    BaselineSite {
                        totals: totals(bytes, 1),
                        stack: vec![frame(name, "app.c", 1, "app")],
                    },
                )
            })
            .collect()
    }

    fn now(list: &[(&str, u64)]) -> BTreeMap<SiteKey, Totals> {
        list.iter()
            .map(|&(name, bytes)| (key(name), totals(bytes, 1)))
            .collect()
    }

    fn changes(
        now: &BTreeMap<SiteKey, Totals>,
        base: &BTreeMap<SiteKey, BaselineSite>,
        t: Tolerance,
    ) -> Vec<(String, &'static str)> {
        compare(now, base, t)
            .into_iter()
            .map(|(k, _, c)| (k.as_str().to_string(), c.name()))
            .collect()
    }

    #[test]
    fn the_same_sites_pass_and_a_new_site_fails() {
        let base = sites(&[("a", 100), ("b", 200)]);
        let same = compare(&now(&[("a", 100), ("b", 200)]), &base, Tolerance::None);
        assert!(same.iter().all(|(_, _, c)| *c == Change::Unchanged), "{same:?}");
        let more = compare(
            &now(&[("a", 100), ("b", 200), ("c", 1)]),
            &base,
            Tolerance::Bytes(1 << 20),
        );
        let new: Vec<_> = more.iter().filter(|(_, _, c)| c.fails()).collect();
        assert_eq!(new.len(), 1);
        assert_eq!(
            (new[0].0.clone(), new[0].2),
            (key("c"), Change::New),
            "new even within the tolerance"
        );
    }

    #[test]
    fn growth_within_the_tolerance_passes_and_beyond_it_fails() {
        let base = sites(&[("a", 1000)]);
        assert_eq!(
            changes(&now(&[("a", 1100)]), &base, Tolerance::Bytes(100)),
            [("a@app.c:1".to_string(), "within-tolerance")]
        );
        assert_eq!(
            changes(&now(&[("a", 1101)]), &base, Tolerance::Bytes(100)),
            [("a@app.c:1".to_string(), "grew")]
        );
        assert_eq!(
            changes(&now(&[("a", 1100)]), &base, Tolerance::Percent(10.0))[0].1,
            "within-tolerance"
        );
        assert_eq!(
            changes(&now(&[("a", 1101)]), &base, Tolerance::Percent(10.0))[0].1,
            "grew"
        );
        let grew = compare(&now(&[("a", 1001)]), &base, Tolerance::None);
        assert_eq!(grew[0].2, Change::Grew { was: totals(1000, 1) });
        assert!(grew[0].2.fails());
        assert!(!Change::WithinTolerance { was: totals(0, 0) }.fails());
    }

    #[test]
    fn a_site_that_disappeared_or_shrank_is_an_improvement_not_a_failure() {
        let base = sites(&[("a", 1000), ("b", 50)]);
        let c = compare(&now(&[("a", 10)]), &base, Tolerance::None);
        assert_eq!(
            c,
            [
                (key("a"), totals(10, 1), Change::Smaller { was: totals(1000, 1) }),
                (key("b"), totals(0, 0), Change::Gone { was: totals(50, 1) }),
            ]
        );
        assert!(c.iter().all(|(_, _, c)| !c.fails()));
        // An empty run against a baseline with leaks: everything is gone, nothing fails.
        assert!(compare(&BTreeMap::new(), &base, Tolerance::None)
            .iter()
            .all(|(_, _, c)| matches!(c, Change::Gone { .. })));
    }

    fn frame_json(function: &str, line: u32) -> Value {
        json!({"function": function, "file": "/src/app.c", "line": line, "module": "app", "address": "0x11e5", "inlined": false})
    }

    #[test]
    fn a_report_is_read_as_sites_summed_over_groups_and_processes() {
        let entry: Vec<Value> = entry()
            .iter()
            .map(|f| json!({"function": f.function, "file": f.file, "line": f.line, "module": f.module, "address": "0x10"}))
            .collect();
        let stack = |function: &str, line: u32| {
            let mut s = vec![frame_json(function, line)];
            s.extend(entry.iter().cloned());
            Value::Array(s)
        };
        let doc = json!({
            "schema_version": 1,
            "summary": {"leaked_bytes": 16000},
            "leaks": [
                {"bytes": 10000, "allocations": 1, "stack": stack("pin_staging", 27), "pid": 1},
                {"bytes": 6000, "allocations": 2, "stack": stack("make_scratch", 21), "pid": 1},
                {"bytes": 3000, "allocations": 1, "stack": stack("make_scratch", 21), "pid": 2, "a_later_field": [1]},
            ],
            "findings": [{"check": "bad-free", "severity": "error", "message": "m", "stack": stack("main", 114)}],
        });
        let b = Baseline::from_json(&doc, Path::new("base.json")).unwrap();
        let got: Vec<(&str, Totals)> = b.sites.iter().map(|(k, s)| (k.as_str(), s.totals)).collect();
        assert_eq!(
            got,
            [
                ("make_scratch@app.c:21", totals(9000, 3)),
                ("pin_staging@app.c:27", totals(10000, 1))
            ]
        );
        assert_eq!(b.sites.values().next().unwrap().stack[0].address, 0x11e5);
        assert!(b.has_finding(
            "bad-free",
            &SiteKey::of(&[frame("main", "elsewhere/app.c", 114, "app")])
        ));
        assert!(!b.has_finding("bad-free", &key("main")));

        let mut s = Suppressions::default();
        s.parse("leak:pin_*\nbad-free:main", "s").unwrap();
        let b = b.without(&s);
        assert_eq!(b.sites.len(), 1);
        assert!(b.findings.is_empty());
    }

    /// A report's JSON of one leak with `stack`, with or without the frames' `user` field.
    fn report_of(stack: &[Frame], with_user: bool) -> Value {
        let frames: Vec<Value> = stack
            .iter()
            .map(|f| {
                let mut v = json!({"function": f.function, "file": f.file, "line": f.line, "module": f.module,
                                   "address": format!("{:#x}", f.address), "inlined": f.inlined});
                if with_user {
                    v["user"] = json!(f.user);
                }
                v
            })
            .collect();
        json!({"leaks": [{"bytes": 4096, "allocations": 1, "stack": frames}]})
    }

    #[test]
    fn a_baseline_made_with_other_bindings_and_interpreter_versions_still_matches() {
        use crate::site::tests::python_stack;
        let now = SiteKey::of(&python_stack(0xb84a, 92));
        for with_user in [true, false] {
            // Recorded with another cuda-bindings (other offsets) and CPython (other lines);
            // reports older than the `user` field are classified from the frames they kept.
            let doc = report_of(&python_stack(0x7777, 97), with_user);
            let b = Baseline::from_json(&doc, Path::new("old.json")).unwrap();
            let keys: Vec<&SiteKey> = b.sites.keys().collect();
            assert_eq!(keys, [&now], "with user fields: {with_user}");
        }
        // --hide makes the script's frames not the user's in an old baseline too.
        let hide = UserCode::new(vec![], vec!["*/train/*".into()]);
        let doc = report_of(&python_stack(0x7777, 97), false);
        let b = Baseline::from_json_with(&doc, Path::new("old.json"), &hide).unwrap();
        assert!(b.sites.keys().next().unwrap().as_str().contains("cydriver"));
    }

    #[test]
    fn what_is_not_a_report_is_an_error() {
        let p = Path::new("b.json");
        let err = |v: Value| Baseline::from_json(&v, p).unwrap_err().to_string();
        assert!(err(json!([1])).contains("not a JSON object"));
        assert!(err(json!({"summary": {}})).contains("no \"leaks\" array"));
        assert!(err(json!({"leaks": [{"allocations": 1}]})).contains("leaks[0] has no \"bytes\""));
        assert!(err(json!({"leaks": [{"bytes": 1, "stack": 3}]})).contains("leaks[0].stack: not an array"));
        assert!(err(json!({"leaks": [], "findings": [{"stack": []}]})).contains("findings[0] has no \"check\""));
        assert!(Baseline::from_json(&json!({"leaks": []}), p).unwrap().sites.is_empty());
    }
}
