//! `gpuleak check --format junit` as CI systems take it: valid against the repository's
//! `tests/data/junit-ci.xsd` (a subset of Jenkins' `junit-10.xsd`) by xmllint, read by a parser
//! that follows GitLab's rules, with test names that stay the same from run to run.

use std::path::{Path, PathBuf};
use std::process::Command;

use gpuleak_e2e::{client, data_dir, shim_command, TempDir};

use super::xml::{self, Element};
use super::{assert_exit, check, stdout, traces};
use crate::trace::assert_ok;

/// Validates `xml` with `xmllint --schema` (Debian's libxml2-utils, installed by
/// scripts/system-deps), panicking with xmllint's complaint.
#[track_caller]
fn assert_valid(xml: &str) {
    let dir = TempDir::new();
    let file = dir.path().join("junit.xml");
    std::fs::write(&file, xml).unwrap();
    let out = Command::new("xmllint")
        .arg("--noout")
        .arg("--schema")
        .arg(data_dir().join("junit-ci.xsd"))
        .arg(&file)
        .output()
        .expect("run xmllint (libxml2-utils, installed by scripts/system-deps)");
    assert!(
        out.status.success(),
        "not valid against junit-ci.xsd:\n{}\n{xml}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A test case as GitLab keeps it.
#[derive(Debug, Clone, PartialEq)]
struct GitlabCase {
    suite: String,
    classname: String,
    name: String,
    file: Option<String>,
    time: f64,
    status: &'static str,
    /// The failure's (error's, skipped's) text, which GitLab shows.
    output: String,
    /// The `system-out` text, where GitLab looks for attachments.
    system_out: String,
}

/// Reads a JUnit document by GitLab's rules (its `Gitlab::Ci::Parsers::Test::Junit`): the root
/// is `testsuites` or `testsuite`; test cases count only inside a `testsuite`, which may nest;
/// a case has `name`, `classname`, `file` and `time`; its status is `failed` with a `failure`
/// child, else `error` with an `error` child, else `skipped` with a `skipped` child, else
/// `success`. Where GitLab would silently take an array (two `failure` children) or misread a
/// value (a `time` that is not a number, a case without a name), this returns an error.
fn gitlab_cases(doc: &str) -> Result<Vec<GitlabCase>, String> {
    let root = xml::parse(doc)?;
    let mut cases = Vec::new();
    match root.name.as_str() {
        "testsuites" => {
            for s in root.children("testsuite") {
                suite(s, &mut cases)?;
            }
        }
        "testsuite" => suite(&root, &mut cases)?,
        other => return Err(format!("root element {other}, not testsuites or testsuite")),
    }
    Ok(cases)
}

fn suite(s: &Element, cases: &mut Vec<GitlabCase>) -> Result<(), String> {
    let suite_name = s.attr("name").unwrap_or_default().to_string();
    for c in s.children("testcase") {
        let name = c
            .attr("name")
            .filter(|n| !n.is_empty())
            .ok_or("a testcase without a name")?;
        let time = match c.attr("time") {
            Some(t) => t.parse::<f64>().map_err(|e| format!("{name}: time {t:?}: {e}"))?,
            None => 0.0,
        };
        let mut status = "success";
        let mut output = String::new();
        for (child, s) in [("failure", "failed"), ("error", "error"), ("skipped", "skipped")] {
            let found = c.children(child);
            if found.len() > 1 {
                return Err(format!("{name}: {} <{child}> elements, GitLab reads one", found.len()));
            }
            if let (Some(f), "success") = (found.first(), status) {
                status = s;
                output = f.text();
            }
        }
        cases.push(GitlabCase {
            suite: suite_name.clone(),
            classname: c.attr("classname").unwrap_or_default().to_string(),
            name: name.to_string(),
            file: c.attr("file").map(str::to_string),
            time,
            status,
            output,
            system_out: c.children("system-out").first().map(|o| o.text()).unwrap_or_default(),
        });
    }
    for nested in s.children("testsuite") {
        suite(nested, cases)?;
    }
    Ok(())
}

/// The JUnit document of `gpuleak check ARGS TRACES`, checked by xmllint and by the GitLab
/// rules, with its exit code and cases.
fn junit(args: &[&str], traces: &[&Path]) -> (i32, String, Vec<GitlabCase>) {
    let out = check(&[&["--format", "junit"], args].concat(), traces);
    let doc = stdout(&out);
    assert_valid(&doc);
    let cases = gitlab_cases(&doc).unwrap_or_else(|e| panic!("{e}\n{doc}"));
    // One key per case: GitLab and Jenkins tell tests apart by class and name.
    let mut keys: Vec<(&str, &str)> = cases.iter().map(|c| (c.classname.as_str(), c.name.as_str())).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), cases.len(), "duplicate test names:\n{doc}");
    let root = xml::parse(&doc).unwrap();
    let failed = cases.iter().filter(|c| c.status == "failed").count();
    assert_eq!(root.attr("tests"), Some(cases.len().to_string().as_str()), "{doc}");
    assert_eq!(root.attr("failures"), Some(failed.to_string().as_str()), "{doc}");
    (out.status.code().unwrap(), doc, cases)
}

fn names(cases: &[GitlabCase]) -> Vec<&str> {
    cases.iter().map(|c| c.name.as_str()).collect()
}

/// Regression: the root carried `skipped` (junit-10.xsd rejects it) and a test case held a
/// `<failure>` per violation, which GitLab reads as an array.
#[test]
fn every_junit_file_is_valid_and_reads_as_gitlab_reads_it() {
    let t = &traces();
    let dir = TempDir::new();
    let supp = dir.path().join("s.supp");
    std::fs::write(&supp, "leak:make_scratch\n").unwrap();
    let baseline = dir.path().join("clean.json");
    let out = Command::new(gpuleak_e2e::gpuleak_bin())
        .args(["report", "--format", "json", "-o"])
        .arg(&baseline)
        .arg(&t.clean)
        .output()
        .unwrap();
    assert_ok(&out);
    let all: [&Path; 3] = [&t.leaks, &t.clean, &t.families];
    let runs: [(&[&str], &[&Path], i32); 6] = [
        (&[], &all, 1),
        (&[], &[&t.clean], 0),
        (&["--max-leaks", "0", "--max-leaked-bytes", "1"], &all, 1),
        (&["--suppressions", supp.to_str().unwrap()], &[&t.leaks], 1),
        (&["--baseline", baseline.to_str().unwrap()], &all, 1),
        (&["--fail-on", "note", "--max-leaks", "100"], &[&t.families], 1),
    ];
    for (args, traces, code) in runs {
        let (exit, doc, cases) = junit(args, traces);
        assert_eq!(exit, code, "{args:?}\n{doc}");
        for c in &cases {
            assert_eq!(
                (c.suite.as_str(), c.classname.as_str()),
                ("gpuleak check", "gpuleak check")
            );
            assert_eq!((c.file.as_deref(), c.time), (None, 0.0));
            assert!(!c.name.contains("pid") && !c.name.contains(".trace"), "{}", c.name);
            assert!(matches!(c.status, "failed" | "success"), "{c:?}");
        }
    }

    let (_, _, cases) = junit(&[], &all);
    assert_eq!(
        names(&cases),
        [
            "report_leaks: leak at pin_staging@report_leaks.c:27",
            "report_leaks: leak at make_scratch@report_leaks.c:21",
            "report_clean",
            "shim_families: leak at main@shim_families.c:120",
            "shim_families: leak at main@shim_families.c:104",
            "shim_families: bad-free at main@shim_families.c:114",
            "shim_families: bad-free at main@shim_families.c:117",
        ]
    );
    let statuses: Vec<&str> = cases.iter().map(|c| c.status).collect();
    assert_eq!(
        statuses,
        ["failed", "failed", "success", "failed", "failed", "failed", "failed"]
    );
    assert!(cases[5].output.contains("shim_families.c:114"), "{}", cases[5].output);
}

/// Regression: two problems of one process (over both limits) were two `<failure>` elements
/// of one test case, and the text said "2 processes over a leak limit".
#[test]
fn a_test_case_with_two_problems_has_one_failure_listing_both() {
    let t = &traces();
    let args = ["--max-leaks", "0", "--max-leaked-bytes", "1"];
    let (_, doc, cases) = junit(&args, &[&t.leaks]);
    assert_eq!(names(&cases), ["report_leaks: leak-limit"], "{doc}");
    let root = xml::parse(&doc).unwrap();
    let case = root.children("testsuite")[0].children("testcase")[0];
    let failures = case.children("failure");
    assert_eq!(failures.len(), 1, "{doc}");
    let message = failures[0].attr("message").unwrap();
    assert!(
        message.starts_with("2 problems: (1) 16000 bytes leaked, over the limit of 1")
            && message.contains("; (2) 3 allocations leaked, over the limit of 0"),
        "{message}"
    );
    assert_eq!(failures[0].attr("type"), Some("leak-limit"));
    assert_eq!(failures[0].text().matches("leak-limit: ").count(), 2, "{doc}");

    let out = check(&args, &[&t.leaks]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    assert!(
        text.contains("gpuleak check: failed: 1 process over a leak limit (exit 1)"),
        "{text}"
    );
    let out = check(&args, &[&t.leaks, &t.families]);
    assert!(
        stdout(&out).contains("gpuleak check: failed: 2 processes over a leak limit, 2 bad-free (exit 1)"),
        "{}",
        stdout(&out)
    );
}

/// Regression: test names held the pid and the trace's path, so every run had new tests.
#[test]
fn two_runs_of_the_same_program_have_the_same_test_names() {
    let dir = TempDir::new();
    let traced = |name: &str| -> PathBuf {
        let trace = dir.path().join(name);
        assert_ok(&shim_command(client("shim_families"), &trace).output().unwrap());
        trace
    };
    let (first, second) = (traced("a.trace"), traced("b.trace"));
    let (_, _, one) = junit(&[], &[&first]);
    let (_, _, other) = junit(&[], &[&second]);
    assert_eq!(names(&one), names(&other));
    assert!(names(&one).iter().all(|n| n.starts_with("shim_families: ")), "{one:?}");

    // Two processes of one program are numbered by start time, whatever the command line's
    // order.
    let (_, _, both) = junit(&[], &[&second, &first]);
    assert_eq!(both.len(), 2 * one.len());
    for c in &both {
        let n = if c.system_out.contains("a.trace") { "#1" } else { "#2" };
        assert!(c.name.starts_with(&format!("shim_families {n}: ")), "{c:?}");
    }
    let (_, _, again) = junit(&[], &[&first, &second]);
    let sorted = |cases: &[GitlabCase]| {
        let mut n: Vec<String> = cases.iter().map(|c| c.name.clone()).collect();
        n.sort();
        n
    };
    assert_eq!(sorted(&both), sorted(&again));
}
