//! The check of reports built from synthetic records: defaults, limits, suppressions, warnings,
//! a baseline read back from the check's own JSON, and the four outputs.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use gpuleak_format::{
    Addrs, Alloc, Api, Body, Ctx, CuResult, Exit, Free, Module as ModuleRecord, Ptr, Record, Seq, Stack, StackId,
    Stream,
};
use serde_json::Value;

use super::*;
use crate::replay::Replayer;
use crate::report::{self, FrameSource, Options};

const PROGRAM: u64 = 0x5555_0000_0000;

/// Stack ids, each one line of the program (`app.c`), called from `main`.
const SCRATCH: u32 = 1;
const STAGING: u32 = 2;
const FREE_SITE: u32 = 3;
const WARM_FREE: u32 = 4;

/// Names the program's addresses: 0x100 + 0x100·n is the site, 0x1000 + 0x100·n its caller.
struct Named;

impl FrameSource for Named {
    fn frames(&self, address: u64) -> Vec<Frame> {
        let offset = address - PROGRAM;
        let (function, line) = match offset {
            0x100 => ("make_scratch", 21),
            0x200 => ("pin_staging", 27),
            0x300 => ("release", 33),
            0x400 => ("warm_release", 40),
            o if o >= 0x1000 => ("main", 40 + (o - 0x1000) as u32 / 0x100),
            _ => ("unknown", 0),
        };
        vec![Frame {
            function: Some(function.into()),
            file: Some("/src/app.c".into()),
            line: Some(line),
            module: Some("app".into()),
            address: offset,
            inlined: false,
            user: false,
        }]
    }

    fn warnings(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}

/// Records of one process.
struct Script(Vec<Record<'static>>);

impl Script {
    fn new() -> Script {
        let mut s = Script(Vec::new());
        s.push(ModuleRecord {
            base: PROGRAM,
            start: PROGRAM,
            end: PROGRAM + 0x10_0000,
            path: "/usr/bin/app".into(),
            build_id: Cow::Borrowed(&[]),
        });
        for id in [SCRATCH, STAGING, FREE_SITE, WARM_FREE] {
            let site = PROGRAM + 0x100 * u64::from(id);
            let caller = PROGRAM + 0x1000 + 0x100 * u64::from(id);
            s.push(Stack {
                id: StackId(id),
                frames: Addrs(Cow::Owned(vec![site, caller])),
            });
        }
        s
    }

    fn push(&mut self, body: impl Into<Body<'static>>) -> &mut Self {
        let seq = self.0.len() as u64 + 1;
        self.0.push(Record {
            seq: Seq(seq),
            time_ns: seq,
            body: body.into(),
        });
        self
    }

    fn alloc(&mut self, ptr: u64, size: u64, stack: u32) -> &mut Self {
        self.push(Alloc {
            api: Api::cuMemAlloc_v2,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            ctx: Ctx(1),
            stream: Stream(0),
            ptr: Ptr(ptr),
            size,
            stack: StackId(stack),
            aux: 0,
        })
    }

    /// A free of a pointer never allocated: an error when the driver rejects it, else a warning.
    fn bad_free(&mut self, ptr: u64, rejected: bool, stack: u32) -> &mut Self {
        self.push(Free {
            api: Api::cuMemFree_v2,
            via: Api::NONE,
            result: if rejected { CuResult(1) } else { CuResult::SUCCESS },
            stream: Stream(0),
            ptr: Ptr(ptr),
            size: 0,
            stack: StackId(stack),
        })
    }

    fn process(&mut self, trace: &str) -> ProcessReport {
        self.push(Exit { code: 0, how: 0 });
        let mut replayer = Replayer::new(None);
        for r in &self.0 {
            replayer.apply(1, r);
        }
        report::build(replayer.finish(), PathBuf::from(trace), &Named, &Options::default())
    }
}

/// Leaks 3000 bytes twice from `make_scratch` and 10000 from `pin_staging`.
fn leaky() -> Report {
    let p = Script::new()
        .alloc(0x7000_0000, 3000, SCRATCH)
        .alloc(0x7100_0000, 3000, SCRATCH)
        .alloc(0x7200_0000, 10000, STAGING)
        .process("leaky.trace");
    Report::new(vec![p])
}

fn clean() -> Report {
    Report::new(vec![Script::new().process("clean.trace")])
}

/// [`leaky`] with a third leak of 3000 bytes from `make_scratch`.
fn grown() -> Report {
    Report::new(vec![Script::new()
        .alloc(0x7000_0000, 3000, SCRATCH)
        .alloc(0x7100_0000, 3000, SCRATCH)
        .alloc(0x7150_0000, 3000, SCRATCH)
        .alloc(0x7200_0000, 10000, STAGING)
        .process("grown.trace")])
}

fn checks(o: &Outcome) -> Vec<&'static str> {
    o.violations.iter().map(|v| v.check).collect()
}

fn suppressions(text: &str) -> Suppressions {
    let mut s = Suppressions::default();
    s.parse(text, "supp.txt").unwrap();
    s
}

#[test]
fn every_leak_site_fails_by_default_and_a_clean_run_passes() {
    let o = evaluate(leaky(), &Config::default());
    assert_eq!(checks(&o), ["leak", "leak"]);
    assert_eq!(o.exit_code(), EXIT_FINDINGS);
    assert_eq!(o.violations[0].bytes, 10000);
    assert_eq!(o.violations[1].count, 2);
    assert_eq!(
        o.violations[0].site.as_ref().unwrap().as_str(),
        "pin_staging@app.c:27|main@app.c:42"
    );
    assert_eq!(o.reason(), "failed: 2 leak sites");

    let o = evaluate(clean(), &Config::default());
    assert!(o.passed());
    assert_eq!(o.exit_code(), EXIT_CLEAN);
    assert_eq!(o.reason(), "passed");
}

#[test]
fn limits_pass_at_the_limit_and_fail_past_it() {
    let with = |bytes: Option<u64>, leaks: Option<u64>| {
        evaluate(
            leaky(),
            &Config {
                max_leaked_bytes: bytes,
                max_leaks: leaks,
                ..Config::default()
            },
        )
    };
    assert!(with(Some(16000), None).passed());
    assert!(with(None, Some(3)).passed());
    assert!(with(Some(16000), Some(3)).passed());
    let o = with(Some(15999), None);
    assert_eq!(checks(&o), ["leak-limit"]);
    let v = &o.violations[0];
    assert!(
        v.message
            .starts_with("16000 bytes leaked, over the limit of 15999 bytes"),
        "{}",
        v.message
    );
    assert_eq!(v.stack[0].function.as_deref(), Some("pin_staging"), "the largest site");
    assert_eq!((v.bytes, v.count, v.site.as_ref()), (16000, 3, None));
    assert_eq!(checks(&with(None, Some(2))), ["leak-limit"]);
    assert_eq!(checks(&with(Some(0), Some(0))), ["leak-limit", "leak-limit"]);
    // Regression: one process over both limits was counted as two processes.
    assert_eq!(with(Some(0), Some(0)).reason(), "failed: 1 process over a leak limit");
    let mut two = leaky();
    two.processes.push(leaky().processes.remove(0));
    let limits = Config {
        max_leaked_bytes: Some(0),
        max_leaks: Some(0),
        ..Config::default()
    };
    assert_eq!(evaluate(two, &limits).reason(), "failed: 2 processes over a leak limit");
}

#[test]
fn suppressions_silence_leaks_and_count_what_they_silenced() {
    let config = |text: &str| Config {
        suppressions: suppressions(text),
        ..Config::default()
    };
    let o = evaluate(leaky(), &config("leak:make_scratch\nleak:^pin_*$\nleak:unused\n"));
    assert!(o.passed(), "{:?}", o.violations);
    assert_eq!(
        o.usage,
        [
            Usage {
                groups: 1,
                allocations: 2,
                bytes: 6000
            },
            Usage {
                groups: 1,
                allocations: 1,
                bytes: 10000
            },
            Usage::default()
        ]
    );
    assert_eq!((o.total.suppressed_bytes, o.total.leaked_bytes), (16000, 0));
    assert_eq!(
        o.leaks[0].iter().filter_map(|s| s.suppressed_by).collect::<Vec<_>>(),
        [1, 0]
    );

    let o = evaluate(leaky(), &config("leak:make_scratch"));
    assert_eq!(checks(&o), ["leak"]);
    assert_eq!(o.violations[0].bytes, 10000);
    // Limits count what is left.
    let o = evaluate(
        leaky(),
        &Config {
            max_leaked_bytes: Some(10000),
            ..config("leak:scratch")
        },
    );
    assert!(o.passed());
}

#[test]
fn error_findings_fail_warnings_only_with_fail_on_warning() {
    let report = || {
        Report::new(vec![Script::new()
            .bad_free(0xdead, true, FREE_SITE)
            .bad_free(0xbeef, false, WARM_FREE)
            .process("frees.trace")])
    };
    let o = evaluate(report(), &Config::default());
    assert_eq!(checks(&o), ["bad-free"]);
    assert_eq!(o.violations[0].severity, Severity::Error);
    assert_eq!(o.violations[0].finding, Some(0));
    let o = evaluate(
        report(),
        &Config {
            fail_on: Severity::Warning,
            ..Config::default()
        },
    );
    assert_eq!(checks(&o), ["bad-free", "bad-free"]);
    assert_eq!(o.violations[1].severity, Severity::Warning);
    let o = evaluate(
        report(),
        &Config {
            suppressions: suppressions("bad-free:^release$"),
            ..Config::default()
        },
    );
    assert!(o.passed());
    assert_eq!((o.usage[0].groups, o.total.suppressed_findings), (1, 1));
}

/// The check's JSON of `report`, read back as a baseline.
fn baseline_of(report: Report) -> Baseline {
    let mut out = Vec::new();
    json::write(&evaluate(report, &Config::default()), &mut out).unwrap();
    let doc: Value = serde_json::from_slice(&out).unwrap();
    Baseline::from_json(&doc, Path::new("base.json")).unwrap()
}

fn against(report: Report, baseline: Baseline, tolerance: Tolerance) -> Outcome {
    evaluate(
        report,
        &Config {
            baseline: Some(baseline),
            tolerance,
            ..Config::default()
        },
    )
}

#[test]
fn a_run_passes_against_its_own_baseline_and_fails_on_new_or_grown_sites() {
    assert!(against(leaky(), baseline_of(leaky()), Tolerance::None).passed());

    let o = against(leaky(), baseline_of(clean()), Tolerance::None);
    assert_eq!(checks(&o), ["leak", "leak"]);
    assert!(o.violations.iter().all(|v| v.change == Some(Change::New)));
    assert_eq!(o.reason(), "failed: 2 new leak sites");

    let o = against(grown(), baseline_of(leaky()), Tolerance::None);
    assert_eq!(checks(&o), ["leak-growth"]);
    let v = &o.violations[0];
    assert_eq!(
        v.change,
        Some(Change::Grew {
            was: Totals {
                bytes: 6000,
                allocations: 2
            }
        })
    );
    assert!(
        v.message.contains("was 6000 bytes in 2 allocations (+3000 bytes"),
        "{}",
        v.message
    );
    assert!(against(grown(), baseline_of(leaky()), Tolerance::Bytes(3000)).passed());
    assert!(against(grown(), baseline_of(leaky()), Tolerance::Percent(50.0)).passed());
    assert!(!against(grown(), baseline_of(leaky()), Tolerance::Percent(49.0)).passed());

    // Gone sites are improvements.
    let o = against(clean(), baseline_of(leaky()), Tolerance::None);
    assert!(o.passed());
    let gone: Vec<u64> = o
        .improvements
        .iter()
        .map(|i| match i.change {
            Change::Gone { was } => was.bytes,
            c => panic!("{c:?}"),
        })
        .collect();
    assert_eq!(gone, [10000, 6000]);
}

#[test]
fn against_a_baseline_only_new_findings_fail() {
    let frees = |extra: bool| {
        let mut s = Script::new();
        s.bad_free(0xdead, true, FREE_SITE);
        if extra {
            s.bad_free(0xbeef, true, WARM_FREE);
        }
        Report::new(vec![s.process("frees.trace")])
    };
    assert!(against(frees(false), baseline_of(frees(false)), Tolerance::None).passed());
    let o = against(frees(true), baseline_of(frees(false)), Tolerance::None);
    assert_eq!(checks(&o), ["bad-free"]);
    assert_eq!(o.violations[0].stack[0].function.as_deref(), Some("warm_release"));
}

#[test]
fn text_has_a_line_per_violation_then_suppressions_and_the_result() {
    let o = evaluate(
        leaky(),
        &Config {
            suppressions: suppressions("leak:make_scratch\nleak:nothing_at_all\n"),
            ..Config::default()
        },
    );
    let mut out = Vec::new();
    text::write(&o, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines[0],
        "error[leak] leaky.trace: 10000 bytes in 1 allocation (device) leaked at exit, allocated by \
         cuMemAlloc_v2; at pin_staging app.c:27 (app)"
    );
    assert!(
        text.contains("Suppressions used:\n  groups       bytes  suppression\n       1        6000  leak:make_scratch (supp.txt:1)\n"),
        "{text}"
    );
    assert!(
        text.contains("Suppressions that matched nothing:\n  leak:nothing_at_all (supp.txt:2)\n"),
        "{text}"
    );
    assert!(
        text.contains(
            "1 trace: 10000 bytes leaked in 1 allocation (1 site), 6000 bytes in 1 site suppressed, 0 findings\n"
        ),
        "{text}"
    );
    assert!(
        text.ends_with("gpuleak check: failed: 1 leak site (exit 1); every leak fails, error findings fail\n"),
        "{text}"
    );
}

#[test]
fn junit_has_a_case_per_failing_site_and_one_per_passing_process() {
    let mut report = leaky();
    report.processes.push(clean().processes.remove(0));
    // A name that needs escaping.
    report.processes[0].trace = PathBuf::from("dir/a<b>&\"c\".trace");
    let o = evaluate(report, &Config::default());
    let mut out = Vec::new();
    junit::write(&o, &mut out).unwrap();
    let xml = String::from_utf8(out).unwrap();
    assert!(
        xml.starts_with(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<testsuites name=\"gpuleak check\" tests=\"3\" failures=\"2\" errors=\"0\" time=\"0\">\n"
        ),
        "{xml}"
    );
    assert_eq!(xml.matches("<testcase ").count(), 3);
    assert_eq!(xml.matches("<failure type=\"leak\"").count(), 2);
    // Without a ProcessInfo record, the trace's file name stands for the program.
    assert!(
        xml.contains("name=\"a&lt;b&gt;&amp;&quot;c&quot;.trace: leak at "),
        "{xml}"
    );
    assert!(xml.contains("<testcase name=\"clean.trace\" "), "{xml}");
    assert!(!xml.contains("a<b"), "{xml}");
}

#[test]
fn processes_of_one_program_are_numbered_by_start_time() {
    use crate::model::Process;
    let started = |trace: &str, exe: &str, start_unix_ns: u64| {
        let mut p = clean().processes.remove(0);
        p.trace = PathBuf::from(trace);
        p.process = Some(Process {
            pid: 1000 + start_unix_ns as u32,
            exe: exe.into(),
            start_unix_ns,
            ..Process::default()
        });
        p
    };
    let processes = [
        started("x.trace", "/bin/worker", 30),
        started("y.trace", "/bin/main", 5),
        started("z.trace", "/usr/bin/worker", 10),
        started("w.trace", "/bin/worker", 30),
    ];
    assert_eq!(
        junit::process_names(&processes),
        ["worker #2", "main", "worker #1", "worker #3"]
    );
}

/// The SARIF log as serde_json reads it back.
fn sarif_value(o: &Outcome, root: Option<&Path>) -> Value {
    let mut text = String::new();
    crate::json::render(&sarif::document(o, root), crate::json::Layout::Expanded, &mut text);
    serde_json::from_str(&text).unwrap()
}

#[test]
fn sarif_has_rules_and_located_results() {
    let o = against(leaky(), baseline_of(clean()), Tolerance::None);
    let doc = sarif_value(&o, Some(Path::new("/src")));
    assert_eq!(doc["version"], "2.1.0");
    let run = &doc["runs"][0];
    assert_eq!(run["tool"]["driver"]["name"], "gpuleak");
    let rules: Vec<&str> = run["tool"]["driver"]["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(rules[..4], ["leak", "leak-growth", "leak-limit", "bad-free"]);
    // A rule for every type of finding a check can fail on, each with help.
    for kind in crate::check::suppress::TYPES {
        assert!(rules.contains(&kind), "{kind}");
    }
    for rule in run["tool"]["driver"]["rules"].as_array().unwrap() {
        assert!(rule["help"]["text"].as_str().is_some_and(|t| t.len() > 20), "{rule}");
        assert!(rule["fullDescription"]["text"].as_str().is_some(), "{rule}");
    }
    let results = run["results"].as_array().unwrap();
    assert_eq!(results.len(), 2);
    let r = &results[0];
    assert_eq!(
        (&r["ruleId"], &r["ruleIndex"], &r["level"]),
        (&"leak".into(), &0.into(), &"error".into())
    );
    assert_eq!(r["baselineState"], "new");
    let physical = &r["locations"][0]["physicalLocation"];
    assert_eq!(
        physical["artifactLocation"],
        serde_json::json!({"uri": "app.c", "uriBaseId": "SRCROOT"})
    );
    assert_eq!(physical["region"]["startLine"], 27);
    assert_eq!(r["stacks"][0]["frames"].as_array().unwrap().len(), 2);
    assert!(r["message"]["text"].as_str().unwrap().contains("10000 bytes"));
    assert_eq!(run["originalUriBaseIds"]["SRCROOT"]["uri"], "file:///src/");
    assert_eq!(run["invocations"][0]["exitCode"], 1);
    for r in results {
        assert_eq!(r["locations"].as_array().unwrap().len(), 1, "{r}");
        let fp = r["partialFingerprints"]["gpuleakSite/v1"].as_str().unwrap();
        assert_eq!(fp.len(), 16, "{r}");
    }
}

#[test]
fn ranks_name_their_processes_whatever_their_start_order() {
    use crate::model::{Process, Rank};
    let ranked = |rank: Option<u64>, start_unix_ns: u64| {
        let mut p = clean().processes.remove(0);
        p.process = Some(Process {
            pid: 2000 + start_unix_ns as u32,
            exe: "/opt/train".into(),
            start_unix_ns,
            rank: rank.map(|rank| Rank {
                rank,
                launcher: "torchrun".into(),
                ..Rank::default()
            }),
            ..Process::default()
        });
        p
    };
    // Rank 1 started first; a child of rank 0 (same rank, later) gets a number.
    let processes = [
        ranked(Some(0), 20),
        ranked(Some(1), 10),
        ranked(Some(0), 30),
        ranked(None, 5),
    ];
    assert_eq!(
        junit::process_names(&processes),
        ["train rank 0 #1", "train rank 1", "train rank 0 #2", "train"]
    );
}

/// Regression: `check`'s JSON and SARIF were printed by serde_json's pretty printer until
/// they moved to the analyzer's one writer; the expanded layout must print them the same, byte
/// for byte (SARIF's keys sorted as serde_json's maps sorted them, the JSON's in field order).
#[test]
fn check_documents_print_as_serde_json_printed_them() {
    let weird = || {
        Report::new(vec![Script::new()
            .alloc(0x7000_0000, 3000, SCRATCH)
            .bad_free(0xdead, true, FREE_SITE)
            .bad_free(0xbeef, false, WARM_FREE)
            .process("we\u{8}ird\u{c}\u{7f}\u{1}é\"\\.trace")])
    };
    let mut two = leaky();
    two.processes.push(weird().processes.remove(0));
    let outcomes = vec![
        evaluate(leaky(), &Config::default()),
        evaluate(
            weird(),
            &Config {
                fail_on: Severity::Warning,
                suppressions: suppressions("leak:scratch\nbad-free:^warm_release$\nleak:none\n"),
                ..Config::default()
            },
        ),
        evaluate(
            two,
            &Config {
                max_leaked_bytes: Some(10),
                max_leaks: Some(1),
                ..Config::default()
            },
        ),
        against(grown(), baseline_of(leaky()), Tolerance::Bytes(3000)),
        against(grown(), baseline_of(leaky()), Tolerance::Percent(2.5)),
        against(grown(), baseline_of(leaky()), Tolerance::Percent(1e-5)),
        against(grown(), baseline_of(leaky()), Tolerance::Percent(50.0)),
        against(grown(), baseline_of(leaky()), Tolerance::Percent(1e20)),
        against(weird(), baseline_of(leaky()), Tolerance::None),
    ];
    let serde_pretty = |text: &str| {
        let mut again = serde_json::to_string_pretty(&serde_json::from_str::<Value>(text).unwrap()).unwrap();
        again.push('\n');
        again
    };
    for o in &outcomes {
        let mut out = Vec::new();
        json::write(o, &mut out).unwrap();
        let text = String::from_utf8(out).unwrap();
        // serde_json's maps sort keys: compare with this writer's output sorted the same way.
        let mut doc: crate::json::J = serde_json::from_str(&text).unwrap();
        let crate::json::J::O(fields) = &doc else {
            panic!("{text}")
        };
        let keys: Vec<&str> = fields.iter().map(|(k, _)| *k).collect();
        assert_eq!(
            keys,
            [
                "schema_version",
                "result",
                "exit_code",
                "reason",
                "config",
                "checked",
                "violations",
                "improvements",
                "suppressions",
                "baseline",
                "leaks",
                "findings",
                "processes",
                "notes"
            ]
        );
        doc.sort_keys();
        let mut sorted = String::new();
        crate::json::render(&doc, crate::json::Layout::Expanded, &mut sorted);
        sorted.push('\n');
        assert_eq!(sorted, serde_pretty(&text));

        for root in [None, Some(Path::new("/src")), Some(Path::new("/elsewhere"))] {
            let mut text = String::new();
            crate::json::render(&sarif::document(o, root), crate::json::Layout::Expanded, &mut text);
            text.push('\n');
            assert_eq!(text, serde_pretty(&text));
        }
    }
}
