//! Files that are not whole traces: a FIFO and a device (refused at once, never waited on or
//! read without end), an empty file and a small one that are not traces, a trace with a
//! corrupted block, and one with a header and no record. Each gives a clear message naming
//! the file and, for a damaged trace, the offset.

use std::fs;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use gpuleak_e2e::{gpuleak_bin, TempDir};

use super::{report_json, traced};

/// Runs `gpuleak ARGS` and waits at most `limit`: a gpuleak that hangs fails the test instead
/// of the suite.
pub(crate) fn gpuleak_within(limit: Duration, args: &[&std::ffi::OsStr]) -> Output {
    let mut child = Command::new(gpuleak_bin())
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() {
        if start.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gpuleak {args:?} still running after {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// A FIFO at `path`, made by mkfifo(1).
pub(crate) fn mkfifo(path: &Path) {
    let status = Command::new("mkfifo").arg(path).status().unwrap();
    assert!(status.success(), "mkfifo {}", path.display());
}

/// The stderr of a run that must exit 2 with nothing on stdout.
#[track_caller]
fn error_of(out: &Output) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    stderr
}

#[test]
fn a_fifo_is_refused_at_once_not_waited_on() {
    let dir = TempDir::new();
    let fifo = dir.path().join("trace.fifo");
    mkfifo(&fifo);
    for command in ["report", "check", "dump"] {
        let out = gpuleak_within(Duration::from_secs(20), &[command.as_ref(), fifo.as_os_str()]);
        let stderr = error_of(&out);
        assert!(
            stderr.starts_with(&format!("gpuleak: {}: not a regular file (a FIFO)", fifo.display())),
            "{command}: {stderr}"
        );
    }
}

#[test]
fn dev_zero_is_refused_as_not_a_regular_file() {
    let out = gpuleak_within(Duration::from_secs(20), &["report".as_ref(), "/dev/zero".as_ref()]);
    let stderr = error_of(&out);
    assert!(
        stderr.starts_with("gpuleak: /dev/zero: not a regular file (a character device)"),
        "{stderr}"
    );
}

#[test]
fn an_empty_file_or_a_small_non_trace_is_not_called_a_truncated_trace() {
    let dir = TempDir::new();
    let empty = dir.path().join("empty.trace");
    fs::write(&empty, b"").unwrap();
    let stderr = error_of(&super::report(&[], &[&empty]));
    assert!(
        stderr.starts_with(&format!(
            "gpuleak: {}: empty file, not a gpuleak trace",
            empty.display()
        )),
        "{stderr}"
    );
    let small = dir.path().join("notes.trace");
    fs::write(&small, b"todo\n").unwrap();
    let stderr = error_of(&super::report(&[], &[&small]));
    assert_eq!(
        stderr,
        format!(
            "gpuleak: {}: not a gpuleak trace: bad magic bytes at offset 0\n",
            small.display()
        )
    );
    // Its twin: a trace cut inside its header is one.
    let dir2 = TempDir::new();
    let trace = traced(&dir2, "report_clean");
    let cut = dir.path().join("cut.trace");
    fs::write(&cut, &fs::read(&trace).unwrap()[..20]).unwrap();
    let stderr = error_of(&super::report(&[], &[&cut]));
    assert!(stderr.contains("truncated trace: file header at offset 0"), "{stderr}");
}

/// The offset of the first block of a trace (right after the file header).
pub(crate) const FIRST_BLOCK: usize = gpuleak_format::HEADER_SIZE;

/// A copy of `trace` at `to` whose first block's header is overwritten.
pub(crate) fn corrupt_first_block(trace: &Path, to: &Path) {
    let mut bytes = fs::read(trace).unwrap();
    bytes[FIRST_BLOCK..FIRST_BLOCK + 4].copy_from_slice(b"XXXX");
    fs::write(to, bytes).unwrap();
}

#[test]
fn a_corrupted_block_is_said_on_stderr_and_in_the_notes_with_its_offset() {
    let dir = TempDir::new();
    let trace = traced(&dir, "report_leaks");
    let bad = dir.path().join("bad.trace");
    corrupt_first_block(&trace, &bad);
    let out = super::report(&["--format", "json"], &[&bad]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "a report of what could be read: {stderr}");
    assert_eq!(
        stderr,
        format!(
            "gpuleak: warning: {}: unreadable trace: corrupted block header at offset {FIRST_BLOCK}; \
             the report covers what could be read\n",
            bad.display()
        )
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let notes = r["notes"].to_string();
    assert!(
        notes.contains(&format!(
            "unreadable records: corrupted block header at offset {FIRST_BLOCK}"
        )),
        "{notes}"
    );
    // The correct twin says nothing.
    let out = super::report(&[], &[&trace]);
    assert!(out.status.success() && out.stderr.is_empty(), "{out:?}");
}

#[test]
fn a_trace_with_a_header_and_no_record_says_so() {
    let dir = TempDir::new();
    let trace = traced(&dir, "report_clean");
    let header_only = dir.path().join("header-only.trace");
    fs::write(&header_only, &fs::read(&trace).unwrap()[..FIRST_BLOCK]).unwrap();
    let r = report_json(&["-q"], &[&header_only]);
    let notes = r["notes"].to_string();
    assert!(
        notes.contains("no records: the process made no CUDA call that was traced, or the trace was cut"),
        "{notes}"
    );
    let out = super::report(&[], &[&header_only]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!("gpuleak: warning: {}: no records:", header_only.display())),
        "{stderr}"
    );
    // The whole trace has records and no such note.
    assert!(!report_json(&[], &[&trace])["notes"].to_string().contains("no records"));
}
