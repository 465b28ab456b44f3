//! The stacks of stream-ordering findings: the calls' own (`GPULEAK_SYNC_STACKS`, sampled or
//! not), the hint that names the setting when they were not recorded, and the text report.

use std::process::Command;

use gpuleak_e2e::{client, gpuleak_bin, shim_command, TempDir};
use serde_json::Value;

use super::{findings_of, functions, related, traced};
use crate::trace::{assert_ok, dump, of_type};

#[test]
fn sampled_stacks_name_the_calls_themselves() {
    let (findings, _) = findings_of(&["cross-stream-race"], &[("GPULEAK_SYNC_STACKS", "1")]);
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let f = &findings[0];
    // The copy's own stack, the kernel's beside it, and the buffer's allocation.
    assert_eq!(functions(&f["stack"])[0], "race");
    let other = related(f, "other access at").expect("the kernel's stack");
    assert_eq!(functions(other)[0], "produce");
    assert_eq!(functions(&f["allocation_stack"])[0], "make_buffer");
    assert_eq!(f["stack_role"], serde_json::Value::Null);
    assert!(!f["message"].as_str().unwrap().contains("not recorded"), "{f:#}");
}

/// Without their stacks (the default), a finding says which setting records the calls'.
#[test]
fn a_finding_without_the_stacks_of_its_calls_names_the_setting_that_records_them() {
    for (check, hint) in [
        (
            "cross-stream-race",
            "; the calls' stacks were not recorded (GPULEAK_SYNC_STACKS=1 records them)",
        ),
        (
            "unordered-free",
            "; the calls' stacks were not recorded (GPULEAK_FREE_STACKS=1 and GPULEAK_SYNC_STACKS=1 record them)",
        ),
        (
            "unsynchronized-at-exit",
            "; the call's stack was not recorded (GPULEAK_SYNC_STACKS=1 records it)",
        ),
    ] {
        let (findings, _) = findings_of(&[check], &[]);
        let message = findings[0]["message"].as_str().unwrap();
        assert!(message.ends_with(hint), "{check}: {message}");
        // With the settings the stacks are there and the hint is gone.
        let (findings, _) = findings_of(&[check], &[("GPULEAK_SYNC_STACKS", "1"), ("GPULEAK_FREE_STACKS", "1")]);
        let message = findings[0]["message"].as_str().unwrap();
        assert!(!message.contains("not recorded"), "{check}: {message}");
    }
}

#[test]
fn the_text_report_shows_the_finding_and_its_stacks() {
    let dir = TempDir::new();
    let trace = traced(&dir, "report_ordering", &["unsynchronized-at-exit"], &[]);
    let out = Command::new(gpuleak_bin()).arg("report").arg(&trace).output().unwrap();
    assert_ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("warning: unsynchronized-at-exit: work queued on stream"),
        "{text}"
    );
    assert!(text.contains("  stream created at:"), "{text}");
    assert!(text.contains("  allocated at (no stack of the call itself):"), "{text}");
}

/// `GPULEAK_SYNC_STACKS=N` samples one call in N per thread; a bad value is one line on
/// stderr and the default (no stacks).
#[test]
fn sync_stacks_can_be_sampled() {
    let copies_with_stacks = |value: &str| {
        let dir = TempDir::new();
        let trace = dir.path().join("t.trace");
        let out = shim_command(client("shim_ordering"), &trace)
            .env("GPULEAK_SYNC_STACKS", value)
            .output()
            .unwrap();
        assert_ok(&out);
        let records = dump(&trace);
        // A batch of copies is one call: its records share the call's stack (or its lack).
        let (batched, copies): (Vec<&Value>, Vec<&Value>) = of_type(&records, "Copy")
            .into_iter()
            .partition(|c| c["api"].as_str().unwrap().contains("BatchAsync"));
        assert_eq!((copies.len(), batched.len()), (52, 16));
        for pair in batched.chunks(2) {
            assert_eq!(pair[0]["stack"], pair[1]["stack"], "{pair:?}");
        }
        if value == "1" {
            assert!(batched.iter().all(|c| c["stack"] != 0));
        }
        let sampled = copies.iter().filter(|c| c["stack"] != 0).count();
        (sampled, String::from_utf8_lossy(&out.stderr).into_owned())
    };
    assert_eq!(copies_with_stacks("1").0, 52);
    // The first 48 copies are this thread's first calls of the kind: the 1st, 3rd, ... 47th;
    // the 4 copies with attributes come later, one call in two again.
    assert_eq!(copies_with_stacks("2").0, 26);
    assert_eq!(copies_with_stacks("0").0, 0);
    let (sampled, stderr) = copies_with_stacks("often");
    assert_eq!(sampled, 0);
    assert_eq!(
        stderr.lines().filter(|l| l.contains("GPULEAK_SYNC_STACKS")).count(),
        1,
        "{stderr}"
    );
}
