//! Where the memory went (issue 5): timeline, peak, growth, fragmentation and OOM forensics of
//! C clients on the simulated driver, and the HTML page rendered in headless Chromium.
//!
//! Clients: `memory_steps` (staircase: growth; plateau and steady: its twins) and
//! `memory_fragment` (interleaved: an allocation fails from fragmentation, pinned by
//! `load_weights`; grouped and full: its twins), `memory_marked` (marks and snapshots through
//! the control API, shim/include/gpuleak.h). Snapshots (`--at`) are also tested on a trace
//! written through the format crate.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use gpuleak_e2e::{client, gpuleak_bin, gpuleak_report as report, shim_command, TempDir};
use gpuleak_format::{
    Addrs, Alloc, Api, BlockCursor, Body, Ctx, CtxCreate, CuResult, Exit, FileHeader, Free, Ptr, Record, Seq, Snapshot,
    Stack, StackId, Stream, BLOCK_SIZE, FORMAT_VERSION, HEADER_SIZE,
};
use serde_json::Value;

use crate::trace::assert_ok;

mod devices;
mod history;
mod page;

const MIB: u64 = 1 << 20;

/// Runs `memory_steps MODE` or `memory_fragment MODE` (on a 64 MiB device) under the shim.
fn traced(dir: &TempDir, program: &str, mode: &str) -> PathBuf {
    let trace = dir.path().join(format!("{program}-{mode}.trace"));
    let mut cmd = shim_command(client(program), &trace);
    cmd.arg(mode).env("SIMCUDA_MEM_BYTES", "64MiB");
    let out = cmd.output().unwrap();
    assert_ok(&out);
    trace
}

/// `gpuleak report --memory --format json` of one trace.
fn memory_json(trace: &Path) -> Value {
    let out = report(&["--memory", "--format", "json"], &[trace]);
    assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

fn functions(stack: &Value) -> Vec<&str> {
    stack
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["function"].as_str().unwrap_or("?"))
        .collect()
}

fn findings<'a>(doc: &'a Value, check: &str) -> Vec<&'a Value> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == check)
        .collect()
}

#[test]
fn a_staircase_freed_at_teardown_is_growth_with_its_slope_and_stack() {
    let dir = TempDir::new();
    let doc = memory_json(&traced(&dir, "memory_steps", "staircase"));
    assert_eq!(u(&doc["summary"]["leaked_bytes"]), 0, "everything is freed at the end");
    let growth = findings(&doc, "growth");
    assert_eq!(growth.len(), 1, "{:#}", doc["findings"]);
    let g = growth[0];
    assert_eq!(g["severity"], "warning");
    assert_eq!(functions(&g["stack"])[0], "keep_history");
    assert_eq!(u(&g["slope_bytes_per_step"]), MIB);
    assert_eq!(u(&g["to_bytes"]) - u(&g["from_bytes"]), 39 * MIB);
    assert_eq!(g["steps_from"], "inferred");
    // The peak: 40 history buffers and one scratch buffer, the history site first.
    let m = &doc["process"]["memory"];
    assert_eq!(u(&m["peak"]["bytes"]), 40 * MIB + 64 * 1024);
    let by_site = m["peak"]["by_site"].as_array().unwrap();
    assert_eq!(u(&by_site[0]["bytes"]), 40 * MIB);
    assert_eq!(by_site[0]["stack_id"], g["stack_id"]);
    // The timeline: bounded, and its live bytes reach the peak.
    let device = &m["devices"][0];
    assert_eq!(device["device"], "device 0");
    // Sizes in whole KiB: granted as asked.
    assert_eq!(device["granted_bytes"], device["live_bytes"]);
    let live = device["live_bytes_max"].as_array().unwrap();
    assert!(!live.is_empty() && live.len() <= 512);
    assert_eq!(live.iter().map(u).max(), Some(40 * MIB + 64 * 1024));
    assert_eq!(u(device["allocations"].as_array().unwrap().last().unwrap()), 120);
}

#[test]
fn a_warm_up_plateau_and_a_steady_loop_are_not_growth() {
    let dir = TempDir::new();
    for mode in ["plateau", "steady"] {
        let doc = memory_json(&traced(&dir, "memory_steps", mode));
        assert_eq!(doc["findings"], serde_json::json!([]), "{mode}");
        let m = &doc["process"]["memory"];
        assert_eq!(m["growth"], serde_json::json!([]), "{mode}");
        assert_eq!(u(&m["failed_allocations"]), 0, "{mode}");
    }
}

#[test]
fn an_allocation_failing_from_fragmentation_is_found_with_the_pinning_site() {
    let dir = TempDir::new();
    let doc = memory_json(&traced(&dir, "memory_fragment", "interleaved"));
    let frag = findings(&doc, "fragmentation");
    assert_eq!(frag.len(), 1, "{:#}", doc["findings"]);
    let f = frag[0];
    assert_eq!(functions(&f["stack"])[0], "big_batch");
    assert_eq!(u(&f["requested_bytes"]), 4 * MIB);
    assert_eq!(u(&f["largest_hole"]), MIB);
    assert!(u(&f["free_in_span"]) >= 30 * MIB, "{f:#}");
    let related = f["related_stacks"].as_array().unwrap();
    assert_eq!(related[0]["role"], "pinned by");
    assert_eq!(functions(&related[0]["stack"])[0], "load_weights");
    // The forensics of the failed call: live bytes by site, holes and pins.
    let m = &doc["process"]["memory"];
    let oom = &m["ooms"][0];
    assert_eq!(oom["fragmented"], true);
    assert_eq!(u(&oom["result"]), 2);
    assert_eq!(u(&oom["live_bytes"]), 32 * MIB);
    assert_eq!(u(&oom["live_by_site"][0]["bytes"]), 32 * MIB);
    assert!(u(&oom["pinning"][0]["allocations"]) >= 30);
    assert!(oom["fragmentation"].as_f64().unwrap() > 0.9);
    // The worst moment of the device, with the same pinning site.
    let worst = &m["devices"][0]["worst_fragmentation"];
    assert!(worst["fragmentation"].as_f64().unwrap() > 0.9, "{worst:#}");
    assert_eq!(m["devices"][0]["pinning"][0]["stack_id"], oom["pinning"][0]["stack_id"]);
}

#[test]
fn no_fragmentation_finding_when_the_free_memory_is_one_range_or_the_device_is_full() {
    let dir = TempDir::new();
    let grouped = memory_json(&traced(&dir, "memory_fragment", "grouped"));
    assert!(
        findings(&grouped, "fragmentation").is_empty(),
        "{:#}",
        grouped["findings"]
    );
    assert_eq!(u(&grouped["process"]["memory"]["failed_allocations"]), 0);
    // Full: the request fails, and the forensics say why: nothing free between allocations.
    let full = memory_json(&traced(&dir, "memory_fragment", "full"));
    assert!(findings(&full, "fragmentation").is_empty(), "{:#}", full["findings"]);
    let oom = &full["process"]["memory"]["ooms"][0];
    assert_eq!(oom["fragmented"], false);
    assert_eq!(u(&oom["free_in_span"]), 0);
    assert_eq!(u(&oom["live_bytes"]), 64 * MIB);
}

#[test]
fn without_memory_options_the_report_runs_no_memory_pass() {
    let dir = TempDir::new();
    let trace = traced(&dir, "memory_steps", "staircase");
    let out = report(&["--format", "json"], &[&trace]);
    assert_ok(&out);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["findings"], serde_json::json!([]));
    assert_eq!(doc["process"]["memory"], Value::Null);
    // The text report with --memory has the chart and the growth.
    let out = report(&["--memory"], &[&trace]);
    assert_ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    for expected in [
        "warning: growth:",
        "Where the memory went",
        "device 0: peak 40.1 MiB",
        "█",
        "keep_history",
    ] {
        assert!(text.contains(expected), "no {expected:?} in\n{text}");
    }
}

#[test]
fn collapsed_stacks_weigh_leaked_or_peak_bytes() {
    let dir = TempDir::new();
    let trace = traced(&dir, "memory_steps", "staircase");
    let out = report(&["--format", "collapsed", "--weight", "peak"], &[&trace]);
    assert_ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("keep_history"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.starts_with("memory_steps ["), "{line}");
    assert!(line.contains(";main memory_steps.c:"), "{line}");
    assert!(
        line.ends_with(&format!(";keep_history memory_steps.c:22 {}", 40 * MIB)),
        "{line}"
    );
    // Leaked bytes: nothing leaks, so nothing is printed.
    let out = report(&["--format", "collapsed"], &[&trace]);
    assert_ok(&out);
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
}

/// A trace with two stacks, three snapshots and allocations between them, written through
/// the format crate: snapshot 1 after site 1 allocated 1000 bytes; 2 after site 2 allocated
/// 500 and site 1 another 1000; 3 after site 1 freed its first.
fn snapshot_trace(path: &Path) {
    snapshot_trace_timed(path, 1000, ["api"; 3]);
}

/// [`snapshot_trace`] with records `ns` apart (0: a trace without times) and the three
/// snapshots' reasons.
fn snapshot_trace_timed(path: &Path, ns: u64, reasons: [&str; 3]) {
    let mut file = vec![0u8; HEADER_SIZE + BLOCK_SIZE];
    FileHeader {
        version: FORMAT_VERSION,
        block_size: BLOCK_SIZE as u32,
        pid: 77,
        start_unix_ns: 0,
    }
    .write((&mut file[..HEADER_SIZE]).try_into().unwrap());
    let block = &mut file[HEADER_SIZE..];
    let mut cursor = BlockCursor::start(block, 77, 0, 0);
    let alloc = |ptr: u64, size: u64, stack: u32| -> Body<'static> {
        Alloc {
            api: Api::cuMemAlloc_v2,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            ctx: Ctx(1),
            stream: Stream(0),
            ptr: Ptr(ptr),
            size,
            stack: StackId(stack),
            aux: 0,
        }
        .into()
    };
    let snapshot = |id: u64| -> Body<'static> {
        Snapshot {
            id,
            reason: reasons[id as usize - 1].to_string().into(),
        }
        .into()
    };
    let bodies: Vec<Body<'static>> = vec![
        Stack {
            id: StackId(1),
            frames: Addrs(vec![0x1000].into()),
        }
        .into(),
        Stack {
            id: StackId(2),
            frames: Addrs(vec![0x2000].into()),
        }
        .into(),
        CtxCreate {
            api: Api::cuCtxCreate_v2,
            result: CuResult::SUCCESS,
            ctx: Ctx(1),
            device: 0,
            flags: 0,
        }
        .into(),
        alloc(0x7000_0000, 1000, 1),
        snapshot(1),
        alloc(0x7000_1000, 500, 2),
        alloc(0x7000_2000, 1000, 1),
        snapshot(2),
        Free {
            api: Api::cuMemFree_v2,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            stream: Stream(0),
            ptr: Ptr(0x7000_0000),
            size: 0,
            stack: StackId::NONE,
        }
        .into(),
        snapshot(3),
        Exit { code: 0, how: 0 }.into(),
    ];
    for (i, body) in bodies.into_iter().enumerate() {
        let record = Record {
            seq: Seq(i as u64 + 1),
            time_ns: i as u64 * ns,
            body,
        };
        cursor.append(block, &record).unwrap();
    }
    std::fs::write(path, file).unwrap();
}

#[test]
fn at_shows_a_snapshot_and_the_difference_between_two() {
    let dir = TempDir::new();
    let trace = dir.path().join("snapshots.trace");
    snapshot_trace(&trace);
    let out = report(&["--at", "2", "--format", "json"], &[&trace]);
    assert_ok(&out);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let snap = &doc["process"]["memory"]["snapshot"];
    assert_eq!((u(&snap["id"]), u(&snap["live_bytes"])), (2, 2500));
    let sites: Vec<(u64, u64)> = snap["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (u(&s["stack_id"]), u(&s["bytes"])))
        .collect();
    assert_eq!(sites, [(1, 2000), (2, 500)]);

    let out = report(&["--at", "1..3", "--format", "json"], &[&trace]);
    assert_ok(&out);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let snap = &doc["process"]["memory"]["snapshot"];
    assert_eq!((u(&snap["id"]), u(&snap["to_id"])), (1, 3));
    let deltas: Vec<(u64, i64)> = snap["sites"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (u(&s["stack_id"]), s["delta"].as_i64().unwrap()))
        .collect();
    // Site 1: 1000 then 1000 (one freed, one new): unchanged, so not listed.
    assert_eq!(deltas, [(2, 500)]);
    let text = String::from_utf8(report(&["--at", "1..3"], &[&trace]).stdout).unwrap();
    assert!(text.contains("Snapshot 1 -> 3: live 1000 B -> 1.5 KiB"), "{text}");

    // The page shows the difference as a table.
    let page = dir.path().join("snap.html");
    assert_ok(&report(
        &["--at", "1..3", "--format", "html", "-o", page.to_str().unwrap()],
        &[&trace],
    ));
    let profile = TempDir::new();
    let dom = rendered_dom(&page, profile.path());
    assert!(dom.contains("data-rendered=\"ok\""), "{dom}");
    assert!(dom.contains("Snapshot 1 -&gt; 3: live 1000 B -&gt; 1.5 KiB"), "{dom}");
    assert!(
        dom.contains("<table class=\"snapshot\"><tr><th>site</th><th>bytes</th><th>then</th></tr><tr><td>"),
        "{dom}"
    );

    // With several traces, one without the snapshot says so in its notes.
    let other = traced(&dir, "memory_steps", "steady");
    let out = report(&["--at", "2", "--format", "json"], &[&trace, &other]);
    assert_ok(&out);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(u(&doc["processes"][0]["memory"]["snapshot"]["id"]), 2);
    assert_eq!(doc["processes"][1]["memory"]["snapshot"], Value::Null);
    assert_eq!(doc["processes"][1]["notes"][0], "no Snapshot record 2 in this trace");

    // A snapshot the trace does not have is an error naming the ones it has.
    let out = report(&["--at", "9"], &[&trace]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("no trace has snapshot 9 (snapshots in the trace: 1, 2, 3)"),
        "{err}"
    );
}

/// Renders `page` in headless Chromium and returns the DOM after its script ran.
fn rendered_dom(page: &Path, profile: &Path) -> String {
    crate::browser::dom(page, profile)
}

#[test]
fn the_html_page_renders_its_charts_flame_graphs_and_findings_in_chromium() {
    let dir = TempDir::new();
    let staircase = traced(&dir, "memory_steps", "staircase");
    let fragment = traced(&dir, "memory_fragment", "interleaved");
    let page = dir.path().join("report.html");
    let out = report(
        &["--format", "html", "-o", page.to_str().unwrap()],
        &[&staircase, &fragment],
    );
    assert_ok(&out);
    let html = std::fs::read_to_string(&page).unwrap();
    // Self-contained: nothing fetched from anywhere.
    for outside in ["http://", "https://", "src=", "href="] {
        let found = html
            .match_indices(outside)
            .map(|(i, _)| &html[i.saturating_sub(20)..(i + 40).min(html.len())])
            .filter(|ctx| !ctx.contains("www.w3.org/2000/svg"))
            .collect::<Vec<_>>();
        assert!(found.is_empty(), "{outside} in the page: {found:?}");
    }
    let profile = TempDir::new();
    let dom = rendered_dom(&page, profile.path());
    assert!(
        dom.contains("data-rendered=\"ok\""),
        "the script failed:\n{}",
        &dom[..dom.len().min(3000)]
    );
    assert_eq!(dom.matches("<section class=\"process\"").count(), 2);
    // Timelines stacked by site (areas), device charts (lines), flame graphs with frames.
    assert!(dom.matches("class=\"area\"").count() >= 2, "no stacked areas");
    assert!(dom.matches("class=\"line\"").count() >= 8, "no device lines");
    assert!(dom.contains("class=\"peak\""), "no peak marker");
    assert_eq!(dom.matches("class=\"flame-peak\"").count(), 2);
    assert!(
        dom.contains("keep_history memory_steps.c:22: 40.0 MiB"),
        "no peak flame frame"
    );
    assert!(dom.contains("load_weights memory_fragment.c:24"), "no pinning site");
    // The findings tables: growth in one process, fragmentation in the other.
    assert_eq!(dom.matches("<table class=\"findings\"").count(), 2);
    assert!(
        dom.contains("<td class=\"warning\">warning</td><td>growth</td>"),
        "no growth row"
    );
    assert!(dom.contains("<td>fragmentation</td>"), "no fragmentation row");
    // No leaks: the page says so instead of drawing an empty flame graph.
    assert_eq!(dom.matches("<p>no leaks</p>").count(), 2);
}

fn check(args: &[&str], trace: &Path) -> Output {
    Command::new(gpuleak_bin())
        .arg("check")
        .args(args)
        .arg(trace)
        .output()
        .expect("run gpuleak check")
}

#[test]
fn check_with_memory_fails_on_growth_and_fragmentation_unless_suppressed() {
    let dir = TempDir::new();
    let staircase = traced(&dir, "memory_steps", "staircase");
    let fragment = traced(&dir, "memory_fragment", "interleaved");
    // Without --memory there is nothing to fail: everything is freed.
    assert_eq!(check(&["--fail-on", "warning"], &staircase).status.code(), Some(0));
    let out = check(&["--memory", "--fail-on", "warning"], &staircase);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stdout));
    assert!(String::from_utf8_lossy(&out.stdout).contains("warning[growth]"));
    // Warnings fail only with --fail-on warning.
    assert_eq!(check(&["--memory"], &staircase).status.code(), Some(0));
    assert_eq!(
        check(&["--memory", "--fail-on", "warning"], &fragment).status.code(),
        Some(1)
    );
    // Twins pass.
    let plateau = traced(&dir, "memory_steps", "plateau");
    let grouped = traced(&dir, "memory_fragment", "grouped");
    for twin in [&plateau, &grouped] {
        let out = check(&["--memory", "--fail-on", "warning"], twin);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    }
    // Suppressed by the growing site, and the fragmentation by its pinning site.
    let supp = dir.path().join("supp.txt");
    std::fs::write(&supp, "growth:keep_history\nfragmentation:^load_weights$\n").unwrap();
    let supp = supp.to_str().unwrap();
    for trace in [&staircase, &fragment] {
        let out = check(&["--memory", "--fail-on", "warning", "--suppressions", supp], trace);
        assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    }
    // A suppression of the other check leaves the finding failing.
    std::fs::write(dir.path().join("other.txt"), "fragmentation:keep_history\n").unwrap();
    let other = dir.path().join("other.txt");
    let out = check(
        &[
            "--memory",
            "--fail-on",
            "warning",
            "--suppressions",
            other.to_str().unwrap(),
        ],
        &staircase,
    );
    assert_eq!(out.status.code(), Some(1));
}

#[test]
fn vmm_reservations_and_mappings_show_as_reserved_beside_live_memory() {
    // report_clean reserves two 2 MiB granules of address space, creates one 2 MiB physical
    // handle and maps it, and pins 10000 bytes of host memory.
    let dir = TempDir::new();
    let trace = dir.path().join("report_clean.trace");
    assert_ok(&shim_command(client("report_clean"), &trace).output().unwrap());
    let doc = memory_json(&trace);
    let devices = doc["process"]["memory"]["devices"].as_array().unwrap();
    let by_name = |name: &str| {
        devices
            .iter()
            .find(|d| d["device"] == name)
            .unwrap_or_else(|| panic!("no {name} in {devices:#?}"))
    };
    let max = |d: &Value, field: &str| d[field].as_array().unwrap().iter().map(u).max().unwrap_or(0);
    let device = by_name("device 0");
    assert_eq!(max(device, "vmm_reserved_bytes"), 4 * MIB);
    assert_eq!(max(device, "vmm_mapped_bytes"), 2 * MIB);
    // The handle is memory; the reservation is not.
    assert_eq!(u(&device["peak_bytes"]), 2 * MIB);
    let host = by_name("host");
    assert_eq!(u(&host["peak_bytes"]), 10000);
    assert_eq!(host["worst_fragmentation"], Value::Null);
}

/// Times (`0.004 s`) in the memory section become `T s`: the shim's clock moves in ticks.
fn mask_times(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    while let Some(i) = rest.find(" s") {
        let head = &rest[..i];
        // A time is digits, a point and three digits just before " s".
        let number = head
            .rsplit(|c: char| !(c.is_ascii_digit() || c == '.'))
            .next()
            .unwrap_or("");
        let is_time = number.len() >= 5 && number.as_bytes()[number.len() - 4] == b'.';
        if is_time {
            out.push_str(&head[..head.len() - number.len()]);
            out.push('T');
        } else {
            out.push_str(head);
        }
        out.push_str(" s");
        rest = &rest[i + 2..];
    }
    out.push_str(rest);
    out
}

#[test]
fn the_memory_text_of_a_fragmented_device_matches_its_golden_file() {
    let dir = TempDir::new();
    let trace = traced(&dir, "memory_fragment", "interleaved");
    let out = report(&["--memory"], &[&trace]);
    assert_ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    let section = &text[text.find("Where the memory went").expect("a memory section")..];
    let masked = mask_times(section);
    for line in masked.lines() {
        assert!(line.chars().count() <= 80, "longer than 80 columns: {line:?}");
    }
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("golden")
        .join("memory_fragment.txt");
    if std::env::var_os("GPULEAK_BLESS").is_some_and(|v| v == "1") {
        std::fs::write(&path, &masked).unwrap();
        return;
    }
    let expected = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e} (GPULEAK_BLESS=1 writes it)", path.display()));
    assert_eq!(
        masked,
        expected,
        "differs from {} (GPULEAK_BLESS=1 rewrites it)",
        path.display()
    );
}

#[test]
fn marks_and_snapshots_written_through_the_control_api_give_the_steps_and_the_states() {
    let dir = TempDir::new();
    let leak = traced(&dir, "memory_marked", "leak");
    let doc = memory_json(&leak);
    let m = &doc["process"]["memory"];
    assert_eq!(u(&m["marks"]), 40);
    assert_eq!(m["snapshot_ids"], serde_json::json!([1, 2]));
    let growth = findings(&doc, "growth");
    assert_eq!(growth.len(), 1, "{:#}", doc["findings"]);
    let g = growth[0];
    assert_eq!(g["steps_from"], "marks");
    assert_eq!(u(&g["slope_bytes_per_step"]), MIB);
    assert_eq!(functions(&g["stack"])[0], "keep");
    // The twin: a cache filled in the first 4 marked steps.
    let plateau = memory_json(&traced(&dir, "memory_marked", "plateau"));
    assert_eq!(plateau["findings"], serde_json::json!([]));
    assert_eq!(u(&plateau["process"]["memory"]["marks"]), 40);
    // Snapshots after steps 10 and 30: 20 more buffers from keep.
    let out = report(&["--at", "1..2"], &[&leak]);
    assert_ok(&out);
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Snapshot 1 -> 2: live 11.0 MiB -> 31.0 MiB"), "{text}");
    assert!(
        text.contains("+  20.0 MiB  (11.0 MiB -> 31.0 MiB)  keep memory_marked.c:"),
        "{text}"
    );
}
