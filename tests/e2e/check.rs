//! `gpuleak check` on traces of real C programs: limits, suppressions and baselines, each with a
//! run that must pass and one that must fail; JUnit XML and SARIF read back; exit 2 on errors.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gpuleak_e2e::{client, gpuleak_bin, shim_command, TempDir};
use serde_json::Value;

use crate::trace::assert_ok;

mod colour;
mod junit;
pub(crate) mod sarif;
mod xml;

/// Traces of report_leaks, report_clean and shim_families, in a directory of their own.
struct Traces {
    _dir: TempDir,
    leaks: PathBuf,
    clean: PathBuf,
    families: PathBuf,
}

fn traces() -> Traces {
    let dir = TempDir::new();
    let traced = |name: &str| {
        let trace = dir.path().join(format!("{name}.trace"));
        assert_ok(&shim_command(client(name), &trace).output().unwrap());
        trace
    };
    Traces {
        leaks: traced("report_leaks"),
        clean: traced("report_clean"),
        families: traced("shim_families"),
        _dir: dir,
    }
}

/// `gpuleak check ARGS TRACES`, without `NO_COLOR` and `FORCE_COLOR` from the environment.
fn check(args: &[&str], traces: &[&Path]) -> Output {
    Command::new(gpuleak_bin())
        .env_remove("NO_COLOR")
        .env_remove("FORCE_COLOR")
        .arg("check")
        .args(args)
        .args(traces)
        .output()
        .expect("run gpuleak check")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Asserts the exit code, showing the output when it differs.
#[track_caller]
fn assert_exit(out: &Output, code: i32) {
    assert_eq!(
        out.status.code(),
        Some(code),
        "--- stdout\n{}--- stderr\n{}",
        stdout(out),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn check_json(args: &[&str], traces: &[&Path]) -> (i32, Value) {
    let out = check(&[&["--format", "json"], args].concat(), traces);
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON: {e}\n{}", stdout(&out)));
    (out.status.code().unwrap(), doc)
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

#[test]
fn every_leak_fails_by_default_and_the_clean_twin_passes() {
    let t = &traces();
    let out = check(&[], &[&t.leaks]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    let failures: Vec<&str> = text.lines().filter(|l| l.starts_with("error[leak]")).collect();
    assert_eq!(failures.len(), 2, "{text}");
    assert!(
        failures[0].ends_with("; at pin_staging report_leaks.c:27 (report_leaks)"),
        "{text}"
    );
    assert!(failures[1].contains("6000 bytes in 2 allocations (device)"), "{text}");
    assert!(
        failures[1].ends_with("; at make_scratch report_leaks.c:21 (report_leaks)"),
        "{text}"
    );
    assert!(
        text.contains("\ngpuleak check: failed: 2 leak sites (exit 1);"),
        "{text}"
    );

    let out = check(&[], &[&t.clean]);
    assert_exit(&out, 0);
    assert!(stdout(&out).contains("gpuleak check: passed (exit 0)"));
}

#[test]
fn limits_pass_at_the_limit_and_fail_past_it() {
    let t = &traces();
    for (args, code) in [
        (&["--max-leaked-bytes", "16000"][..], 0),
        (&["--max-leaked-bytes", "16K"], 0),
        (&["--max-leaked-bytes", "15999"], 1),
        (&["--max-leaked-bytes", "15.6K"], 1),
        (&["--max-leaks", "3"], 0),
        (&["--max-leaks", "2"], 1),
        (&["--max-leaks", "3", "--max-leaked-bytes", "1MiB"], 0),
    ] {
        let out = check(args, &[&t.leaks]);
        assert_exit(&out, code);
        assert_exit(&check(args, &[&t.clean]), 0);
        if code == 1 {
            let text = stdout(&out);
            assert_eq!(
                text.lines().filter(|l| l.starts_with("error[leak-limit]")).count(),
                1,
                "{text}"
            );
        }
    }
    let (code, doc) = check_json(&["--max-leaked-bytes", "15999"], &[&t.leaks]);
    assert_eq!(code, 1);
    let v = &doc["violations"][0];
    assert_eq!(v["check"], "leak-limit");
    assert_eq!((u(&v["bytes"]), u(&v["count"])), (16000, 3));
    assert_eq!(v["stack"][0]["function"], "pin_staging", "the largest site");
}

#[test]
fn max_leaked_bytes_of_1_mb_is_1_mib_and_a_bad_size_says_what_is_accepted() {
    // ops_workload keeps one 1 MiB allocation: 1048576 bytes leaked.
    let dir = TempDir::new();
    let trace = dir.path().join("mib.trace");
    let mut cmd = shim_command(client("ops_workload"), &trace);
    assert_ok(&cmd.args(["steps", "1", "1"]).output().unwrap());
    // Every unit is a power of 1024, as pytest-memray reads them (docs/settings.md, "Sizes").
    for size in ["1 MB", "1MB", "1 MiB", "1M", "1mb", "1048576", "1024 KiB"] {
        assert_exit(&check(&["--max-leaked-bytes", size], &[&trace]), 0);
    }
    for size in ["1048575", "1023.99 KB", "0.99 MB"] {
        let out = check(&["--max-leaked-bytes", size], &[&trace]);
        assert_exit(&out, 1);
        let text = stdout(&out);
        assert!(
            text.lines().any(|l| l.starts_with("error[leak-limit]")
                && l.contains("1048576 bytes leaked, over the limit of 10")
                && l.contains(" bytes (--max-leaked-bytes)")),
            "{text}"
        );
    }
    // A bad size: exit 2, one message naming the value and the accepted forms.
    let accepted = "expected a number of bytes with an optional unit B, K/KB/KiB, M/MB/MiB, G/GB/GiB, \
                    T/TB/TiB or P/PB/PiB (any case, all powers of 1024)";
    for (size, why) in [
        ("12X", "unknown unit"),
        ("1 XB", "unknown unit"),
        ("1.2.3", "not a number"),
        ("MB", "not a number"),
    ] {
        let out = check(&["--max-leaked-bytes", size], &[&trace]);
        assert_exit(&out, 2);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "invalid value '{size}' for '--max-leaked-bytes <SIZE>': {why}; {accepted}"
            )),
            "{err}"
        );
    }
    let out = check(&["--baseline", "b.json", "--tolerance", "5 XB"], &[&trace]);
    assert_exit(&out, 2);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "'5 XB' for '--tolerance <BYTES_OR_PERCENT>': unknown unit; {accepted}"
        )),
        "{err}"
    );
}

#[test]
fn suppressions_silencing_both_sites_pass_with_counts_and_one_site_fails() {
    let t = &traces();
    let dir = TempDir::new();
    let both = dir.path().join("both.supp");
    fs::write(
        &both,
        "# report_leaks' two sites\nleak:make_scratch\n\nleak:^pin_stag*$\nleak:no_such_function\n",
    )
    .unwrap();
    let out = check(&["--suppressions", both.to_str().unwrap()], &[&t.leaks]);
    assert_exit(&out, 0);
    let text = stdout(&out);
    let supp = both.display();
    assert!(
        text.contains(&format!(
            "Suppressions used:\n  groups       bytes  suppression\n       1        6000  leak:make_scratch ({supp}:2)\n       1       10000  leak:^pin_stag*$ ({supp}:4)\n"
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "Suppressions that matched nothing:\n  leak:no_such_function ({supp}:5)\n"
        )),
        "{text}"
    );
    assert!(text.contains("16000 bytes in 2 sites suppressed"), "{text}");

    let (code, doc) = check_json(&["--suppressions", both.to_str().unwrap()], &[&t.leaks]);
    assert_eq!(code, 0);
    let counts: Vec<(u64, u64)> = doc["suppressions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (u(&s["groups"]), u(&s["bytes"])))
        .collect();
    assert_eq!(counts, [(1, 6000), (1, 10000), (0, 0)]);
    assert_eq!(doc["leaks"][0]["suppressed_by"], "leak:^pin_stag*$");

    // A file name matches too; one site silenced leaves the other failing.
    let one = dir.path().join("one.supp");
    fs::write(&one, "leak:make_scratch\n").unwrap();
    let out = check(&["--suppressions", one.to_str().unwrap()], &[&t.leaks]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    assert_eq!(
        text.lines().filter(|l| l.starts_with("error[leak]")).count(),
        1,
        "{text}"
    );
    assert!(text.contains("at pin_staging"), "{text}");

    // bad-free suppressions silence shim_families' findings, not its leaks.
    let frees = dir.path().join("frees.supp");
    fs::write(&frees, "bad-free:shim_families.c\n").unwrap();
    let (code, doc) = check_json(
        &["--suppressions", frees.to_str().unwrap(), "--max-leaked-bytes", "1077"],
        &[&t.families],
    );
    assert_eq!(code, 0, "{doc:#}");
    assert_eq!(u(&doc["suppressions"][0]["groups"]), 2);
    assert_exit(&check(&["--max-leaked-bytes", "1077"], &[&t.families]), 1);
}

/// Functions and files match the program's own frames only; modules match any frame: the C
/// library's start-up frames are in every stack, but not the program's.
#[test]
fn suppressions_match_the_programs_functions_and_any_frames_module() {
    let t = &traces();
    let dir = TempDir::new();
    let groups = |lines: &str| -> (u64, u64) {
        let supp = dir.path().join("supp.txt");
        fs::write(&supp, lines).unwrap();
        let (_, doc) = check_json(&["--suppressions", supp.to_str().unwrap()], &[&t.leaks]);
        let leaks = doc["leaks"].as_array().expect("leaks");
        let suppressed = leaks.iter().filter(|l| !l["suppressed_by"].is_null()).count();
        (suppressed as u64, leaks.len() as u64)
    };
    let (_, all) = groups("leak:nothing\n");
    assert_eq!(all, 2);
    for (lines, want) in [
        ("leak:__libc_start_call_main\n", 0),
        ("leak:libc-start.c\n", 0),
        ("leak:^main$\n", all),
        ("leak:report_leaks.c\n", all),
        ("leak:libc.so\n", all),
        ("leak:tests\n", 0),
        ("leak:*/tests/clients/*\n", all),
    ] {
        assert_eq!(groups(lines).0, want, "{lines:?}");
    }
}

#[test]
fn a_baseline_of_the_same_program_passes_and_of_its_clean_twin_fails_on_new_sites() {
    let t = &traces();
    let dir = TempDir::new();
    let report_json = |trace: &Path, name: &str| {
        let out = Command::new(gpuleak_bin())
            .args(["report", "--format", "json"])
            .arg(trace)
            .output()
            .unwrap();
        assert_ok(&out);
        let path = dir.path().join(name);
        fs::write(&path, &out.stdout).unwrap();
        path
    };
    let leaks_base = report_json(&t.leaks, "leaks.json");
    let clean_base = report_json(&t.clean, "clean.json");

    let out = check(&["--baseline", leaks_base.to_str().unwrap()], &[&t.leaks]);
    assert_exit(&out, 0);

    let out = check(&["--baseline", clean_base.to_str().unwrap()], &[&t.leaks]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    assert_eq!(text.matches("error[leak] report_leaks (pid ").count(), 2, "{text}");
    assert_eq!(text.matches("new leak site: ").count(), 2, "{text}");
    assert!(text.contains("failed: 2 new leak sites (exit 1)"), "{text}");

    let (code, doc) = check_json(&["--baseline", clean_base.to_str().unwrap()], &[&t.leaks]);
    assert_eq!(code, 1);
    let sites: Vec<(&str, &str)> = doc["violations"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| (v["change"].as_str().unwrap(), v["site"].as_str().unwrap()))
        .collect();
    assert_eq!(
        sites,
        [
            ("new", "pin_staging@report_leaks.c:27|main@report_leaks.c:51"),
            ("new", "make_scratch@report_leaks.c:21|main@report_leaks.c:49")
        ]
    );

    // The other way round, the sites are gone: improvements, not failures.
    let out = check(&["--baseline", leaks_base.to_str().unwrap()], &[&t.clean]);
    assert_exit(&out, 0);
    assert_eq!(stdout(&out).matches("\n  gone: ").count(), 2, "{}", stdout(&out));

    // The check's own JSON is a baseline too.
    let check_base = dir.path().join("check.json");
    fs::write(&check_base, check(&["--format", "json"], &[&t.leaks]).stdout).unwrap();
    assert_exit(&check(&["--baseline", check_base.to_str().unwrap()], &[&t.leaks]), 0);
    assert_exit(
        &check(&["--baseline", check_base.to_str().unwrap()], &[&t.leaks, &t.families]),
        1,
    );
}

#[test]
fn junit_xml_goes_to_the_file_and_the_text_to_stdout() {
    let t = &traces();
    let dir = TempDir::new();
    let xml_path = dir.path().join("junit.xml");
    let out = check(
        &["--format", "junit", "-o", xml_path.to_str().unwrap()],
        &[&t.leaks, &t.clean, &t.families],
    );
    assert_exit(&out, 1);
    assert!(
        stdout(&out).contains("gpuleak check: failed"),
        "the text goes to stdout"
    );
    let xml = fs::read_to_string(&xml_path).unwrap();
    let root = xml::parse(&xml).unwrap_or_else(|e| panic!("not well-formed: {e}\n{xml}"));
    assert_eq!(root.name, "testsuites");
    // A case per failing site (two, none, four), a passing one for the clean process.
    assert_eq!((root.attr("tests"), root.attr("failures")), (Some("7"), Some("6")));
    let suites = root.children("testsuite");
    assert_eq!(suites.len(), 1);
    let cases = suites[0].children("testcase");
    let failures: Vec<usize> = cases.iter().map(|c| c.children("failure").len()).collect();
    assert_eq!(failures, [1, 1, 0, 1, 1, 1, 1]);
    let types: Vec<&str> = cases[3..]
        .iter()
        .map(|c| c.children("failure")[0].attr("type").unwrap())
        .collect();
    assert_eq!(types, ["leak", "leak", "bad-free", "bad-free"]);
    // The pid and the trace are in the case's output, not its name.
    let clean = cases[2].children("system-out")[0].text();
    assert!(clean.starts_with("process: report_clean (pid "), "{clean}");
    assert!(clean.contains(&format!("trace: {}", t.clean.display())), "{clean}");

    // A passing run is a suite with no failures.
    let out = check(&["--format", "junit"], &[&t.clean]);
    assert_exit(&out, 0);
    let root = xml::parse(&stdout(&out)).unwrap();
    assert_eq!(root.attr("failures"), Some("0"));
}

#[test]
fn sarif_has_a_gpuleak_driver_rules_and_a_located_result_per_violation() {
    let t = &traces();
    let out = check(&["--format", "sarif", "--max-leaks", "0"], &[&t.families, &t.clean]);
    assert_exit(&out, 1);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["version"], "2.1.0");
    assert!(doc["$schema"].as_str().unwrap().contains("sarif-2.1.0"));
    let run = &doc["runs"][0];
    let driver = &run["tool"]["driver"];
    assert_eq!(driver["name"], "gpuleak");
    let rules: Vec<&str> = driver["rules"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    for id in ["leak", "leak-growth", "bad-free"] {
        assert!(rules.contains(&id), "{rules:?}");
    }
    let results = run["results"].as_array().unwrap();
    let ids: Vec<&str> = results.iter().map(|r| r["ruleId"].as_str().unwrap()).collect();
    assert_eq!(ids, ["leak-limit", "bad-free", "bad-free"]);
    for r in results {
        assert_eq!(rules[u(&r["ruleIndex"]) as usize], r["ruleId"]);
        assert_eq!(r["level"], "error");
        let physical = &r["locations"][0]["physicalLocation"];
        // Under the current directory (the tests' package directory), relative to SRCROOT.
        let artifact = &physical["artifactLocation"];
        assert_eq!(artifact["uriBaseId"], "SRCROOT", "{artifact}");
        let base = run["originalUriBaseIds"]["SRCROOT"]["uri"].as_str().unwrap();
        let uri = format!("{base}{}", artifact["uri"].as_str().unwrap());
        assert!(uri.starts_with("file:///"), "{uri}");
        assert!(uri.ends_with("/tests/clients/shim_families.c"), "{uri}");
        assert!(u(&physical["region"]["startLine"]) > 0);
    }
    let limit = results[0]["message"]["text"].as_str().unwrap();
    assert!(limit.contains("2 allocations leaked, over the limit of 0"), "{limit}");
    assert_eq!(u(&results[0]["properties"]["bytes"]), 1077);
    assert_eq!(
        results[1]["locations"][0]["physicalLocation"]["region"]["startLine"],
        114
    );
    assert_eq!(u(&run["invocations"][0]["exitCode"]), 1);
}

#[test]
fn errors_exit_2_with_a_message_saying_where() {
    let t = &traces();
    let dir = TempDir::new();
    // A corrupted trace.
    let bogus = dir.path().join("bogus.trace");
    let mut bytes = fs::read(&t.leaks).unwrap();
    bytes[..8].copy_from_slice(b"NOTATRCE");
    fs::write(&bogus, bytes).unwrap();
    let out = check(&[], &[&t.leaks, &bogus]);
    assert_exit(&out, 2);
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!("gpuleak: {}: ", bogus.display())),
        "{stderr}"
    );

    // A bad suppressions line.
    let supp = dir.path().join("bad.supp");
    fs::write(&supp, "leak:make_scratch\nleek:pin_staging\n").unwrap();
    let out = check(&["--suppressions", supp.to_str().unwrap()], &[&t.leaks]);
    assert_exit(&out, 2);
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "gpuleak: {}:2: unknown suppression type \"leek\" (known: leak, bad-free, growth, fragmentation, \
             unordered-free, use-after-free, cross-stream-race, graph-race, wait-on-unrecorded-event, stream-leak, \
             event-leak, semaphore-leak, unsynchronized-at-exit, pool-leak, tensor-leak, tensor-growth, framework-oom)\n",
            supp.display()
        )
    );

    // A baseline that is missing, not JSON, or not a report.
    let missing = dir.path().join("missing.json");
    let not_json = dir.path().join("not.json");
    fs::write(&not_json, "{ nope").unwrap();
    let not_report = dir.path().join("other.json");
    fs::write(&not_report, "{\"version\": 2}").unwrap();
    for b in [&missing, &not_json, &not_report] {
        let out = check(&["--baseline", b.to_str().unwrap()], &[&t.leaks]);
        assert_exit(&out, 2);
        assert!(String::from_utf8_lossy(&out.stderr).starts_with(&format!("gpuleak: {}: ", b.display())));
    }

    // Bad arguments: a size, a tolerance without a baseline, no trace.
    assert_exit(&check(&["--max-leaked-bytes", "12X"], &[&t.leaks]), 2);
    assert_exit(&check(&["--tolerance", "10%"], &[&t.leaks]), 2);
    assert_exit(&check(&["--format", "xml"], &[&t.leaks]), 2);
    assert_exit(&check(&[], &[]), 2);
}

#[test]
fn a_directory_is_checked_trace_by_trace_on_any_number_of_threads() {
    let dir = TempDir::new();
    for (name, client_name) in [
        ("a.trace", "report_leaks"),
        ("b.trace", "report_clean"),
        ("c.trace", "report_leaks"),
    ] {
        let trace = dir.path().join(name);
        assert_ok(&shim_command(client(client_name), &trace).output().unwrap());
    }
    fs::write(dir.path().join("run.log"), "not a trace\n").unwrap();

    let out = check(&[], &[dir.path()]);
    assert_exit(&out, 1);
    let text = stdout(&out);
    assert_eq!(
        text.lines().filter(|l| l.starts_with("error[leak]")).count(),
        4,
        "{text}"
    );
    let processes: Vec<&str> = text
        .lines()
        .filter(|l| l.contains(" (pid "))
        .filter(|l| !l.starts_with("error"))
        .collect();
    assert_eq!(processes.len(), 3, "{text}");
    assert!(processes[0].starts_with("report_leaks (pid ") && processes[0].ends_with("failed (2 violations)"));
    assert!(processes[1].starts_with("report_clean (pid ") && processes[1].ends_with("; passed"));
    assert!(
        text.contains("\n3 traces: 32000 bytes leaked in 6 allocations (4 sites)"),
        "{text}"
    );
    assert!(out.stderr.is_empty(), "no progress bar when stderr is not a terminal");
    assert_eq!(check(&["-j", "1"], &[dir.path()]).stdout, out.stdout);

    // Limits hold per process, in every trace of the directory.
    assert_exit(&check(&["--max-leaked-bytes", "16000"], &[dir.path()]), 0);
    let (code, doc) = check_json(&["--max-leaked-bytes", "15999", "--jobs", "3"], &[dir.path()]);
    assert_eq!(code, 1);
    assert_eq!(doc["violations"].as_array().unwrap().len(), 2);
    assert_eq!(doc["processes"].as_array().unwrap().len(), 3);

    // A directory with no trace is an error.
    let empty = TempDir::new();
    let out = check(&[], &[empty.path()]);
    assert_exit(&out, 2);
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no gpuleak trace in this directory"));
}

#[test]
fn a_trace_with_an_unreadable_block_exits_2_naming_the_offset_and_its_twin_passes() {
    use crate::report::unreadable::{corrupt_first_block, FIRST_BLOCK};
    let t = &traces();
    let dir = TempDir::new();
    // The correct twin passes.
    assert_exit(&check(&[], &[&t.clean]), 0);

    // Its first block's header overwritten: nothing could vouch for what that block held.
    let bad = dir.path().join("bad-block.trace");
    corrupt_first_block(&t.clean, &bad);
    let out = check(&[], &[&bad]);
    assert_exit(&out, 2);
    assert!(out.stdout.is_empty(), "{}", stdout(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "gpuleak: {}: unreadable trace: corrupted block header at offset {FIRST_BLOCK}\n",
            bad.display()
        )),
        "{stderr}"
    );
    assert!(stderr.contains("`gpuleak report` shows what could be read"), "{stderr}");

    // A record in the middle of a block overwritten: the rest of the block is unreadable.
    let records = crate::trace::dump(&t.clean);
    let alloc = crate::trace::of_type(&records, "Alloc")[0]["offset"].as_u64().unwrap() as usize;
    let mut bytes = fs::read(&t.clean).unwrap();
    bytes[alloc..alloc + 12].fill(0xff);
    let bad = dir.path().join("bad-record.trace");
    fs::write(&bad, bytes).unwrap();
    let out = check(&["--format", "json"], &[&bad]);
    assert_exit(&out, 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "gpuleak: {}: unreadable trace: corrupted trace: ",
            bad.display()
        )),
        "{stderr}"
    );
    let at: usize = stderr
        .split("at offset ")
        .nth(1)
        .unwrap()
        .split(|c: char| !c.is_ascii_digit())
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        (alloc..alloc + 12).contains(&at),
        "{at} is not in the bytes overwritten at {alloc}: {stderr}"
    );
}

#[test]
fn a_trace_with_a_header_and_no_record_does_not_pass() {
    let t = &traces();
    let dir = TempDir::new();
    let empty = dir.path().join("header-only.trace");
    fs::write(&empty, &fs::read(&t.clean).unwrap()[..gpuleak_format::HEADER_SIZE]).unwrap();
    let out = check(&[], &[&empty]);
    assert_exit(&out, 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.starts_with(&format!(
            "gpuleak: {}: no records: the process made no CUDA call that was traced, or the trace was cut",
            empty.display()
        )),
        "{stderr}"
    );
    // With a whole trace beside it, still an error: one trace unread fails the run.
    assert_exit(&check(&[], &[&t.clean, &empty]), 2);
}

#[test]
fn a_fifo_or_a_device_is_an_error_not_a_hang() {
    let dir = TempDir::new();
    let fifo = dir.path().join("trace.fifo");
    crate::report::unreadable::mkfifo(&fifo);
    for path in [fifo.as_os_str(), "/dev/zero".as_ref()] {
        let out =
            crate::report::unreadable::gpuleak_within(std::time::Duration::from_secs(20), &["check".as_ref(), path]);
        assert_exit(&out, 2);
        assert!(
            String::from_utf8_lossy(&out.stderr).contains(": not a regular file ("),
            "{out:?}"
        );
    }
}
