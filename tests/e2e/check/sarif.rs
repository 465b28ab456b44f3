//! SARIF that code scanning accepts: `gpuleak check --format sarif` of C programs validated by
//! `tests/python/validate_sarif.py` (the OASIS 2.1.0 schema and GitHub's extra rules), the same
//! fingerprints from two runs of one program, and broken twins of a valid log that the
//! validator must reject, so that its passing means something.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gpuleak_e2e::{client, shim_command, TempDir};
use serde_json::{json, Value};

use super::{assert_exit, check, traces};
use crate::trace::assert_ok;

/// The host's Python with the validator's packages (scripts/python-env).
fn validator_python() -> PathBuf {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/pyenv/bin/python");
    assert!(path.is_file(), "{} is missing: run scripts/python-env", path.display());
    path
}

/// Runs the validator on `file`.
fn validate(file: &Path) -> Output {
    Command::new(validator_python())
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("python/validate_sarif.py"))
        .arg(file)
        .output()
        .expect("run validate_sarif.py")
}

/// Asserts that `doc` is valid SARIF for code scanning (written to `dir` as `name`).
#[track_caller]
pub(crate) fn assert_valid(dir: &Path, name: &str, doc: &[u8]) {
    let file = dir.join(name);
    std::fs::write(&file, doc).unwrap();
    let out = validate(&file);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{name} is not valid SARIF:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The results' `(ruleId, fingerprint)` pairs, sorted.
fn fingerprints(doc: &Value) -> Vec<(String, String)> {
    let mut all: Vec<(String, String)> = doc["runs"][0]["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["ruleId"].as_str().unwrap().to_string(),
                r["partialFingerprints"]["gpuleakSite/v1"]
                    .as_str()
                    .unwrap_or_else(|| panic!("no fingerprint: {r:#}"))
                    .to_string(),
            )
        })
        .collect();
    all.sort();
    all
}

#[test]
fn sarif_of_c_programs_is_valid_for_code_scanning_with_fingerprints_stable_across_runs() {
    let t = &traces();
    let dir = TempDir::new();
    // A second run of the same programs: other pids and addresses.
    let again = TempDir::new();
    let traced = |name: &str| {
        let trace = again.path().join(format!("{name}.trace"));
        assert_ok(&shim_command(client(name), &trace).output().unwrap());
        trace
    };
    let (leaks, families, clean) = (traced("report_leaks"), traced("shim_families"), traced("report_clean"));
    // Leaks and bad frees by default; processes over a limit (results without a site of their
    // own) and bad frees with a limit.
    for (name, args, rules) in [
        ("default", &[][..], &["leak", "bad-free"][..]),
        ("limit", &["--max-leaks", "0"][..], &["leak-limit", "bad-free"][..]),
    ] {
        let args = [&["--format", "sarif"][..], args].concat();
        let out = check(&args, &[&t.leaks, &t.families, &t.clean]);
        assert_exit(&out, 1);
        assert_valid(dir.path(), &format!("{name}-first.sarif"), &out.stdout);
        let first: Value = serde_json::from_slice(&out.stdout).unwrap();
        let results = first["runs"][0]["results"].as_array().unwrap();
        let got: std::collections::BTreeSet<&str> = results.iter().map(|r| r["ruleId"].as_str().unwrap()).collect();
        assert_eq!(got, rules.iter().copied().collect(), "{name}");
        for r in results {
            assert_eq!(r["locations"].as_array().unwrap().len(), 1, "{r:#}");
            let uri = r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
                .as_str()
                .unwrap();
            // Relative to the repository's root, where code scanning looks.
            assert!(uri.starts_with("tests/clients/"), "{uri}");
        }

        let out = check(&args, &[&leaks, &families, &clean]);
        assert_valid(dir.path(), &format!("{name}-second.sarif"), &out.stdout);
        let second: Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_ne!(
            first["runs"][0]["results"][0]["properties"]["pid"],
            second["runs"][0]["results"][0]["properties"]["pid"]
        );
        assert_eq!(fingerprints(&first), fingerprints(&second), "{name}");
        let distinct: std::collections::BTreeSet<_> = fingerprints(&first).into_iter().collect();
        assert_eq!(distinct.len(), results.len(), "{name}: one fingerprint per result");
    }

    // The clean twin: valid, with no results.
    let out = check(&["--format", "sarif"], &[&t.clean]);
    assert_exit(&out, 0);
    assert_valid(dir.path(), "clean.sarif", &out.stdout);
}

/// Ways to break a valid log, each with what the validator must say.
type Breakage = (&'static str, fn(&mut Value), &'static str);

const BREAKAGES: &[Breakage] = &[
    (
        "a result without a location",
        |d| {
            d["runs"][0]["results"][0].as_object_mut().unwrap().remove("locations");
        },
        "0 locations, not exactly one",
    ),
    (
        "a result with two locations",
        |d| {
            let loc = d["runs"][0]["results"][0]["locations"][0].clone();
            d["runs"][0]["results"][0]["locations"] = json!([loc.clone(), loc]);
        },
        "2 locations, not exactly one",
    ),
    (
        "a location without a line",
        |d| {
            d["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
                .as_object_mut()
                .unwrap()
                .remove("region");
        },
        "no region.startLine",
    ),
    (
        "a result without a fingerprint",
        |d| {
            d["runs"][0]["results"][0]
                .as_object_mut()
                .unwrap()
                .remove("partialFingerprints");
        },
        "no partialFingerprints",
    ),
    (
        "a fingerprint with a pid and an address",
        |d| d["runs"][0]["results"][0]["partialFingerprints"]["gpuleakSite/v1"] = json!("pid 4242 at 0x7f00beef"),
        "is not 16 hex digits",
    ),
    (
        "a result of a rule the driver does not have",
        |d| d["runs"][0]["results"][0]["ruleId"] = json!("no-such-rule"),
        "is not a rule of the driver",
    ),
    (
        "a rule without help",
        |d| {
            for rule in d["runs"][0]["tool"]["driver"]["rules"].as_array_mut().unwrap() {
                rule.as_object_mut().unwrap().remove("help");
            }
        },
        "has no help",
    ),
    (
        "a rule without a full description",
        |d| {
            for rule in d["runs"][0]["tool"]["driver"]["rules"].as_array_mut().unwrap() {
                rule.as_object_mut().unwrap().remove("fullDescription");
            }
        },
        "has no fullDescription",
    ),
    (
        "an artifact URI that is not a URI",
        |d| {
            d["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] =
                json!("tests/clients/a file with spaces.c")
        },
        "is not a 'uri-reference'",
    ),
    (
        "a base id not defined",
        |d| {
            d["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uriBaseId"] =
                json!("NOWHERE")
        },
        "is not in originalUriBaseIds",
    ),
    (
        "a level SARIF does not have",
        |d| d["runs"][0]["results"][0]["level"] = json!("fatal"),
        "'fatal' is not one of",
    ),
    (
        "another SARIF version",
        |d| d["version"] = json!("2.0.0"),
        "'2.0.0' is not one of ['2.1.0']",
    ),
];

#[test]
fn broken_twins_of_a_valid_log_fail_validation() {
    let t = &traces();
    let dir = TempDir::new();
    let out = check(&["--format", "sarif"], &[&t.leaks]);
    assert_exit(&out, 1);
    assert_valid(dir.path(), "valid.sarif", &out.stdout);
    let valid: Value = serde_json::from_slice(&out.stdout).unwrap();
    for (i, (what, breaks, says)) in BREAKAGES.iter().enumerate() {
        let mut doc = valid.clone();
        breaks(&mut doc);
        assert_ne!(doc, valid, "{what}: nothing changed");
        let file = dir.path().join(format!("broken-{i}.sarif"));
        std::fs::write(&file, doc.to_string()).unwrap();
        let out = validate(&file);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{what} passed validation: {stderr}");
        assert!(stderr.contains(says), "{what}: expected {says:?} in\n{stderr}");
    }
}
