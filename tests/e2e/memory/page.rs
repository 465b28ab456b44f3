//! The HTML page as a user sees it, in headless Chromium: what it shows is checked against the
//! JSON report of the same traces (leak rows, their names and bytes, totals, findings), and the
//! page is used through its own controls (a row opened to its stack, a flame graph searched,
//! zoomed and inverted, the timeline hovered and zoomed to a range and back).
//!
//! Traces: `report_leaks` (two leak sites) and its twin `report_clean` (none), `memory_marked
//! leak` (40 marks, two snapshots, a growing site), and a trace written through the format
//! crate with and without times (the event axis is the fallback).

use std::path::Path;

use gpuleak_e2e::{client, gpuleak_report as report, shim_command, TempDir};
use serde_json::{json, Value};

use super::snapshot_trace_timed;
use crate::browser::{drive, frame_name, page_bytes, site_name, WINDOW};
use crate::trace::assert_ok;

/// Runs a C client with `args` under the shim.
fn traced_plain(dir: &TempDir, program: &str, args: &[&str]) -> std::path::PathBuf {
    let trace = dir.path().join(format!("{program}.trace"));
    let out = shim_command(client(program), &trace).args(args).output().unwrap();
    assert_ok(&out);
    trace
}

/// The JSON report of one trace.
fn json_of(trace: &Path) -> Value {
    let out = report(&["--format", "json"], &[trace]);
    assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The page of `traces`.
fn page_of(dir: &TempDir, name: &str, traces: &[&Path]) -> std::path::PathBuf {
    let page = dir.path().join(name);
    assert_ok(&report(&["--format", "html", "-o", page.to_str().unwrap()], traces));
    page
}

/// For each process: its title, totals line, leak rows (site, bytes cells), findings (check,
/// at), whether the first leak row's stack is hidden before and shown after a click and the
/// lines it shows, and the leaked-bytes flame graph searched for `SEARCH[i]` and for a name in
/// no stack, zoomed on the frame named `ZOOM[i]`, and inverted.
const TABLES_AND_FLAMES: &str = r#"
var SEARCH = window.SEARCH || [], ZOOM = window.ZOOM || [];
var out = q("section.process").map(function (sec, i) {
  var p = { title: text("h2", sec), totals: text("p.totals", sec) };
  var rows = q("table.leaks tr.expandable", sec);
  p.leak_sites = rows.map(function (r) { return r.querySelector("td.site").textContent.replace(/^[\u25b8\u25be]/, ""); });
  p.leak_bytes = rows.map(function (r) { return r.querySelector("td.bytes").textContent; });
  p.no_leaks = q("p", sec).some(function (e) { return e.textContent === "no leaks"; });
  ["pool", "unreleased"].forEach(function (list) {
    p[list] = q("table." + list + " tr.expandable", sec).map(function (r) {
      return [r.querySelector("td.site").textContent.replace(/^[\u25b8\u25be]/, ""), r.querySelector("td.bytes").textContent];
    });
  });
  p.findings = q("table.findings tr.expandable", sec).map(function (r) {
    return [r.children[1].textContent, r.children[3].textContent.replace(/^[\u25b8\u25be]/, "")];
  });
  if (rows.length) {
    var more = rows[0].nextElementSibling;
    p.hidden_before = more.hasAttribute("hidden") && more.getBoundingClientRect().height === 0;
    rows[0].click();
    p.hidden_after = more.hasAttribute("hidden") || more.getBoundingClientRect().height === 0;
    p.stack = q("li", more).map(function (li) { return [li.textContent, li.className]; });
    rows[0].click();
    p.hidden_again = more.hasAttribute("hidden");
  }
  var bars = q(".flame-bar", sec), bar = bars[bars.length - 1];
  var leaked = sec.querySelector("svg.flame-leaked");
  if (leaked) {
    var holder = leaked.parentNode, svgOf = function () { return holder.querySelector("svg"); };
    var frames = function () {
      return q("g.frame", svgOf()).map(function (g) {
        var r = g.querySelector("rect");
        return { name: g.querySelector("title").textContent.replace(/: [^:]*$/, ""), x: +r.getAttribute("x"),
          y: +r.getAttribute("y"), w: +r.getAttribute("width"), match: r.classList.contains("match") };
      });
    };
    p.flame_width = +svgOf().getAttribute("width");
    p.flame_names = frames().map(function (f) { return f.name; });
    type_in(bar.querySelector(".flame-search"), SEARCH[i]);
    p.matched_names = frames().filter(function (f) { return f.match; }).map(function (f) { return f.name; });
    p.matched_text = text(".flame-matched", bar);
    type_in(bar.querySelector(".flame-search"), "no_such_frame_anywhere");
    p.unmatched_count = frames().filter(function (f) { return f.match; }).length;
    p.unmatched_text = text(".flame-matched", bar);
    type_in(bar.querySelector(".flame-search"), "");
    var target = q("g.frame", svgOf()).filter(function (g) { return g.querySelector("title").textContent.indexOf(ZOOM[i] + ": ") === 0; })[0];
    p.zoom_found = !!target;
    if (target) {
      target.dispatchEvent(new MouseEvent("click", { bubbles: true }));
      var zf = frames().filter(function (f) { return f.name === ZOOM[i]; });
      p.zoomed_width = zf.length ? zf[zf.length - 1].w : -1;
      bar.querySelector(".flame-reset").click();
      zf = frames().filter(function (f) { return f.name === ZOOM[i]; });
      p.reset_width = zf.length ? zf[0].w : -1;
    }
    bar.querySelector(".flame-invert").click();
    p.inverted_first_row = frames().filter(function (f) { return f.y === 17; }).map(function (f) { return f.name; });
  }
  return p;
});
report(out);
"#;

#[test]
fn the_leak_table_and_flame_graph_show_what_the_json_report_says_and_open_search_zoom_and_invert() {
    let dir = TempDir::new();
    let leaks = traced_plain(&dir, "report_leaks", &[]);
    let clean = traced_plain(&dir, "report_clean", &[]);
    let page = page_of(&dir, "leaks.html", &[&leaks, &clean]);
    let docs = [json_of(&leaks), json_of(&clean)];
    let expected_leaks = docs[0]["leaks"].as_array().unwrap();
    assert_eq!(expected_leaks.len(), 2, "report_leaks has two sites");
    let first_site = site_name(&expected_leaks[0]["stack"]);
    let script = format!(
        "window.SEARCH = {}; window.ZOOM = {};\n{TABLES_AND_FLAMES}",
        json!([first_site.split(' ').next().unwrap(), ""]),
        json!([first_site, ""])
    );
    let (found, _) = drive(&page, &script);
    let found = found.as_array().unwrap();
    assert_eq!(found.len(), 2, "{found:#?}");
    for (doc, p) in docs.iter().zip(found) {
        let pid = doc["process"]["pid"].as_u64().unwrap();
        assert!(
            p["title"].as_str().unwrap().starts_with(&format!("pid {pid} ")),
            "{p:#}"
        );
        let summary = &doc["process"]["summary"];
        let groups = doc["leaks"].as_array().unwrap().len();
        let totals = p["totals"].as_str().unwrap();
        let leaked = format!(
            "leaked {} in {groups} group{}",
            page_bytes(summary["leaked_bytes"].as_u64().unwrap()),
            if groups == 1 { "" } else { "s" }
        );
        assert!(totals.contains(&leaked), "{totals:?} lacks {leaked:?}");
        assert!(totals.contains(&format!("peak {}", page_bytes(summary["peak_bytes"].as_u64().unwrap()))));
        // One row per leak group, in the JSON report's order, named by the user's frame.
        let sites: Vec<String> = doc["leaks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| site_name(&h["stack"]))
            .collect();
        let bytes: Vec<String> = doc["leaks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|h| page_bytes(h["bytes"].as_u64().unwrap()))
            .collect();
        assert_eq!(p["leak_sites"], json!(sites), "{p:#}");
        assert_eq!(p["leak_bytes"], json!(bytes));
        assert_eq!(p["no_leaks"], json!(groups == 0));
        for list in ["held_by_pool", "unreleased"] {
            assert_eq!(p[list.trim_start_matches("held_by_")], held_rows(&doc[list]), "{list}");
        }
        let findings: Vec<Value> = doc["findings"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| json!([f["check"], site_name(&f["stack"])]))
            .collect();
        assert_eq!(p["findings"], json!(findings));
    }
    let (with, clean_page) = (&found[0], &found[1]);
    // The twin: no rows, no flame graph of leaks.
    assert!(clean_page["flame_names"].is_null(), "{clean_page:#}");
    assert_eq!(clean_page["leak_sites"], json!([]));

    // A click opens the row to the stack, innermost first, the user's frames marked, and a
    // second click closes it.
    assert_eq!(with["hidden_before"], true);
    assert_eq!(with["hidden_after"], false);
    assert_eq!(with["hidden_again"], true);
    let stack = expected_leaks[0]["stack"].as_array().unwrap();
    let shown: Vec<&str> = with["stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l[0].as_str().unwrap())
        .collect();
    assert_eq!(shown.len(), stack.len(), "{shown:#?}");
    for (i, (line, frame)) in shown.iter().zip(stack).enumerate() {
        assert!(
            line.starts_with(&format!("#{i} {}", frame_name(frame))),
            "{line:?} vs {frame}"
        );
    }
    let user_lines: Vec<bool> = with["stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l[1] == "user")
        .collect();
    let user_frames: Vec<bool> = stack.iter().map(|f| f["user"] == true).collect();
    assert_eq!(user_lines, user_frames);
    assert!(user_lines.iter().any(|u| *u), "no frame of the user's is marked");

    // The flame graph is as wide as the page, and search marks the frames that match with
    // the share of bytes of the stacks that hold one; a name in no stack marks nothing.
    let width = with["flame_width"].as_f64().unwrap();
    assert!(width > f64::from(WINDOW.0) * 0.8, "flame graph {width} px wide");
    let function = first_site.split(' ').next().unwrap();
    let matched: Vec<&str> = with["matched_names"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        !matched.is_empty() && matched.iter().all(|n| n.contains(function)),
        "{matched:?}"
    );
    let first_bytes = expected_leaks[0]["bytes"].as_u64().unwrap();
    let total = docs[0]["process"]["summary"]["leaked_bytes"].as_u64().unwrap();
    let share = format!(
        "matched {} of {} ({:.1}%)",
        page_bytes(first_bytes),
        page_bytes(total),
        100.0 * first_bytes as f64 / total as f64
    );
    assert_eq!(with["matched_text"], share.as_str());
    assert_eq!(with["unmatched_count"], 0);
    assert_eq!(
        with["unmatched_text"],
        format!("matched 0 B of {} (0.0%)", page_bytes(total)).as_str()
    );
    // A click on the site's frame spreads it over the whole width; reset zoom puts it back
    // to its share.
    assert_eq!(with["zoom_found"], true, "{:#?}", with["flame_names"]);
    assert!((with["zoomed_width"].as_f64().unwrap() - width).abs() < 0.5, "{with:#}");
    let reset = with["reset_width"].as_f64().unwrap();
    assert!(
        (reset - width * first_bytes as f64 / total as f64).abs() < 1.0,
        "{reset} of {width}"
    );
    // Inverted: the first row under the root holds the innermost frames of the leaks.
    let mut innermost: Vec<String> = expected_leaks.iter().map(|h| frame_name(&h["stack"][0])).collect();
    innermost.sort();
    innermost.dedup();
    let mut first_row: Vec<String> = with["inverted_first_row"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_string())
        .collect();
    first_row.sort();
    assert_eq!(first_row, innermost);
}

/// The timeline of the first process: axis, marks drawn by kind, the stacked areas' paths,
/// the hover's tooltip near the bottom of the chart late in the run (after the fourth-last
/// mark, else at the given share of the width), a drag
/// from between marks 9 and 10 to between marks 19 and 20 (or over the second quarter: range
/// text, marks left, tick labels) and reset.
const TIMELINE: &str = r#"
var HOVER_AT = window.HOVER_AT || 0.75;
var sec = q("section.process")[0];
var svg = function () { return sec.querySelector("svg.timeline"); };
var t = {};
t.width = +svg().getAttribute("width");
t.axis = text(".axis-label", svg());
t.ticks = q(".tick", svg()).map(function (e) { return e.textContent; });
var kinds = function () {
  var k = {};
  q("line.marker", svg()).forEach(function (l) { var c = l.getAttribute("class").split(" ")[1]; k[c] = (k[c] || 0) + 1; });
  return k;
};
t.markers = kinds();
t.marker_titles = q("line.marker title", svg()).map(function (e) { return e.textContent; });
t.area_paths = q("path.area", svg()).map(function (p) { return p.getAttribute("d"); });
t.line_paths = q("path.line", sec).map(function (p) { return p.getAttribute("d"); });
var over = svg().querySelector("rect.overlay"), r = over.getBoundingClientRect();
// Late in the run: just after the fourth-last mark when the run marks its steps (on a busy
// machine the program's start can take most of the run's time, its steps squeezed to the
// right), else at HOVER_AT of the width.
var steps = q("line.marker.mark", svg());
var hx = steps.length >= 8
  ? svg().getBoundingClientRect().left + +steps[steps.length - 4].getAttribute("x1") + 1
  : r.left + r.width * HOVER_AT;
mouse(over, "mousemove", hx, r.bottom - 2);
var tip = document.getElementById("tip");
t.tip_title = tip ? text("b", tip) : null;
t.tip_lines = tip ? q("div", tip).map(function (d) { return d.textContent; }) : [];
mouse(over, "mouseleave", hx, r.bottom + 50);
t.range_before = text(".range", sec);
t.reset_disabled_before = sec.querySelector("button.reset").disabled;
// From between marks 9 and 10 to between marks 19 and 20 (or over the second quarter).
var ml = q("line.marker.mark", svg()), left = svg().getBoundingClientRect().left;
var between = function (a, b) { return left + (+ml[a].getAttribute("x1") + +ml[b].getAttribute("x1")) / 2; };
var xa = ml.length > 20 ? between(9, 10) : r.left + r.width * 0.25;
var xb = ml.length > 20 ? between(19, 20) : r.left + r.width * 0.5;
t.drag_width = xb - xa;
// The axis is time: on a busy machine the program's start or a stall can take most of the run,
// and its steps then lie a pixel apart. The chart is first zoomed to the steps (a drag from
// just before the first mark to just after the last), then the drag between marks is made.
t.zoomed_to_steps = false;
if (ml.length > 20 && xb - xa < 40) {
  var x0 = left + +ml[0].getAttribute("x1") - 3, x1 = left + +ml[ml.length - 1].getAttribute("x1") + 3;
  mouse(over, "mousedown", x0, r.top + 10);
  mouse(over, "mousemove", (x0 + x1) / 2, r.top + 10);
  mouse(over, "mouseup", x1, r.top + 10);
  t.zoomed_to_steps = true;
  over = svg().querySelector("rect.overlay");
  r = over.getBoundingClientRect();
  ml = q("line.marker.mark", svg());
  left = svg().getBoundingClientRect().left;
  xa = between(9, 10);
  xb = between(19, 20);
}
// Marks within a pixel of an end of the drag may fall on either side of it (two steps a
// pixel apart when the run's timing is uneven): the ones clearly inside and those near an end.
t.marks_inside = [];
t.marks_near_ends = [];
ml.forEach(function (l) {
  var x = left + +l.getAttribute("x1"), name = l.querySelector("title").textContent;
  if (x > xa + 1 && x < xb - 1) t.marks_inside.push(name);
  else if (Math.abs(x - xa) <= 1 || Math.abs(x - xb) <= 1) t.marks_near_ends.push(name);
});
mouse(over, "mousedown", xa, r.top + 10);
mouse(over, "mousemove", (xa + xb) / 2, r.top + 10);
t.selection = !!svg().querySelector("rect.selection");
mouse(over, "mouseup", xb, r.top + 10);
t.zoomed_titles = q("line.marker title", svg()).map(function (e) { return e.textContent; });
t.range_zoomed = text(".range", sec);
t.reset_disabled_zoomed = sec.querySelector("button.reset").disabled;
t.markers_zoomed = kinds();
t.ticks_zoomed = q(".tick", svg()).map(function (e) { return e.textContent; });
t.device_ticks_zoomed = q("svg.device .tick", sec).map(function (e) { return e.textContent; });
sec.querySelector("button.reset").click();
t.range_reset = text(".range", sec);
t.markers_reset = kinds();
t.ticks_reset = q(".tick", svg()).map(function (e) { return e.textContent; });
report(t);
"#;

/// `[site, bytes]` as the page shows each group of a JSON report's list.
fn held_rows(list: &Value) -> Value {
    list.as_array()
        .unwrap()
        .iter()
        .map(|h| json!([site_name(&h["stack"]), page_bytes(h["bytes"].as_u64().unwrap())]))
        .collect()
}

#[test]
fn unreleased_handles_have_their_own_table_beside_the_leaks() {
    let dir = TempDir::new();
    let trace = dir.path().join("vmm.trace");
    let out = shim_command(client("report_vmm_refs"), &trace)
        .arg("leak")
        .output()
        .unwrap();
    assert_ok(&out);
    let doc = json_of(&trace);
    assert!(!doc["unreleased"].as_array().unwrap().is_empty(), "{doc:#}");
    let page = page_of(&dir, "vmm.html", &[&trace]);
    let (found, _) = drive(
        &page,
        &format!("window.SEARCH = ['x']; window.ZOOM = ['x'];\n{TABLES_AND_FLAMES}"),
    );
    let p = &found[0];
    assert_eq!(p["unreleased"], held_rows(&doc["unreleased"]), "{p:#}");
    assert_eq!(p["pool"], held_rows(&doc["held_by_pool"]));
    let leaks: Vec<String> = doc["leaks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| site_name(&h["stack"]))
        .collect();
    assert_eq!(p["leak_sites"], json!(leaks));
}

/// A trace of `groups` leaks, each from a stack of its own (written through the format crate).
fn many_leaks_trace(path: &Path, groups: u32) {
    use gpuleak_format::{
        Addrs, Alloc, Api, BlockCursor, Body, Ctx, CtxCreate, CuResult, Exit, FileHeader, Ptr, Record, Seq, Stack,
        StackId, Stream, BLOCK_SIZE, FORMAT_VERSION, HEADER_SIZE,
    };
    let mut file = vec![0u8; HEADER_SIZE + BLOCK_SIZE];
    FileHeader {
        version: FORMAT_VERSION,
        block_size: BLOCK_SIZE as u32,
        pid: 78,
        start_unix_ns: 0,
    }
    .write((&mut file[..HEADER_SIZE]).try_into().unwrap());
    let block = &mut file[HEADER_SIZE..];
    let mut cursor = BlockCursor::start(block, 78, 0, 0);
    let mut bodies: Vec<Body<'static>> = vec![CtxCreate {
        api: Api::cuCtxCreate_v2,
        result: CuResult::SUCCESS,
        ctx: Ctx(1),
        device: 0,
        flags: 0,
    }
    .into()];
    for i in 1..=groups {
        bodies.push(
            Stack {
                id: StackId(i),
                frames: Addrs(vec![0x1000 + u64::from(i) * 16].into()),
            }
            .into(),
        );
        bodies.push(
            Alloc {
                api: Api::cuMemAlloc_v2,
                via: Api::NONE,
                result: CuResult::SUCCESS,
                ctx: Ctx(1),
                stream: Stream(0),
                ptr: Ptr(0x7000_0000 + u64::from(i) * 0x10000),
                size: 1000 + u64::from(i),
                stack: StackId(i),
                aux: 0,
            }
            .into(),
        );
    }
    bodies.push(Exit { code: 0, how: 0 }.into());
    for (i, body) in bodies.into_iter().enumerate() {
        let record = Record {
            seq: Seq(i as u64 + 1),
            time_ns: i as u64 * 1000,
            body,
        };
        cursor.append(block, &record).unwrap();
    }
    std::fs::write(path, file).unwrap();
}

/// Rows shown and hidden, the button's text, then the same after a click on it.
const SHOW_ALL: &str = r#"
var t = document.querySelector("table.leaks"), button = function () { return document.querySelector("button.show-all"); };
var shown = function () { return q("tr.expandable", t).filter(function (r) { return r.getBoundingClientRect().height > 0; }).length; };
var out = { rows: q("tr.expandable", t).length, shown: shown(), button: button() ? button().textContent : null };
if (button()) button().click();
out.shown_after = shown();
out.button_after = button() ? button().textContent : null;
report(out);
"#;

#[test]
fn a_long_leak_table_shows_twenty_rows_and_a_button_for_the_rest() {
    let dir = TempDir::new();
    let (many, few) = (dir.path().join("many.trace"), dir.path().join("few.trace"));
    many_leaks_trace(&many, 25);
    many_leaks_trace(&few, 20);
    assert_eq!(json_of(&many)["leaks"].as_array().unwrap().len(), 25);
    let (t, _) = drive(&page_of(&dir, "many.html", &[&many]), SHOW_ALL);
    assert_eq!(
        t,
        json!({"rows": 25, "shown": 20, "button": "show all 25 rows", "shown_after": 25, "button_after": null})
    );
    // The twin: twenty rows fit, no button.
    let (t, _) = drive(&page_of(&dir, "few.html", &[&few]), SHOW_ALL);
    assert_eq!(
        t,
        json!({"rows": 20, "shown": 20, "button": null, "shown_after": 20, "button_after": null})
    );
}

/// Whether an SVG path is drawn with horizontal and vertical moves only (steps, not ramps).
fn steps_only(d: &str) -> bool {
    d.starts_with('M') && d.contains('H') && !d.contains('L') && !d.contains('C')
}

#[test]
fn the_timeline_has_a_time_axis_with_the_runs_marks_names_the_site_under_the_pointer_and_zooms_to_a_range() {
    let dir = TempDir::new();
    // The precise clock: on the coarse one this short run can fall within one tick.
    let marked = dir.path().join("marked.trace");
    let mut cmd = shim_command(client("memory_marked"), &marked);
    cmd.args(["leak"])
        .env("SIMCUDA_MEM_BYTES", "64MiB")
        .env("GPULEAK_CLOCK", "precise");
    assert_ok(&cmd.output().unwrap());
    let page = page_of(&dir, "marked.html", &[&marked]);
    let (t, _) = drive(&page, TIMELINE);
    let doc = super::memory_json(&marked);
    let m = &doc["process"]["memory"];
    let growth = super::findings(&doc, "growth");
    let keep = site_name(&growth[0]["stack"]);
    assert!(keep.starts_with("keep memory_marked.c:"), "{keep}");

    // Charts use the page's width.
    assert!(t["width"].as_f64().unwrap() > f64::from(WINDOW.0) * 0.8, "{t:#}");
    // A real time axis: round ticks in seconds.
    assert_eq!(t["axis"], "time since the trace began");
    let ticks: Vec<&str> = t["ticks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(ticks.len() >= 3 && ticks.iter().all(|s| s.ends_with(" s")), "{ticks:?}");
    // Every mark and snapshot of the trace is drawn, named.
    assert_eq!(m["marks"], 40);
    assert_eq!(t["markers"], json!({"mark": 40, "snapshot": 2}), "{t:#}");
    let titles: Vec<&str> = t["marker_titles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        titles.contains(&"snapshot 1 (early)") && titles.contains(&"snapshot 2 (late)"),
        "{titles:?}"
    );
    assert!(
        titles.iter().filter(|n| n.starts_with("step ")).count() == 40,
        "{titles:?}"
    );
    // Allocations are steps: every area and line is drawn with horizontal and vertical moves.
    let paths: Vec<&str> = t["area_paths"]
        .as_array()
        .unwrap()
        .iter()
        .chain(t["line_paths"].as_array().unwrap())
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(paths.len() >= 3, "{paths:?}");
    for d in &paths {
        assert!(steps_only(d), "a ramp: {d}");
    }
    // Hover near the bottom late in the run: the growing site, its bytes and its stack.
    assert_eq!(t["tip_title"], keep.as_str(), "{t:#}");
    let lines: Vec<&str> = t["tip_lines"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert!(
        lines.iter().any(|l| l.contains(" live at ") && l.ends_with(" s")),
        "{lines:?}"
    );
    assert!(
        lines.iter().any(|l| l.starts_with("#") && l.contains(&keep)),
        "{lines:?}"
    );
    // A drag over the second quarter zooms every chart of the process to it.
    assert!(t["range_before"].as_str().unwrap().starts_with("whole run: "));
    assert_eq!(t["reset_disabled_before"], true);
    assert_eq!(t["selection"], true, "no selection drawn while dragging");
    assert!(t["range_zoomed"].as_str().unwrap().starts_with("showing "), "{t:#}");
    assert_eq!(t["reset_disabled_zoomed"], false);
    // Steps 10 to 19 are left, and only they.
    let zoomed: Vec<&str> = t["zoomed_titles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    // (Steps 9 or 20 too when they are within a pixel of the drag's ends, as a run under load
    // or an emulator can place them; but never a step clearly outside it.)
    let names = |key: &str| -> Vec<String> {
        t[key]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap().to_string())
            .collect()
    };
    let (inside, near) = (names("marks_inside"), names("marks_near_ends"));
    let zoomed_steps: Vec<String> = zoomed
        .iter()
        .filter(|n| n.starts_with("step "))
        .map(|n| n.to_string())
        .collect();
    let steps: Vec<String> = (10..20).map(|i| format!("step {i}")).collect();
    for step in &steps {
        assert!(zoomed_steps.contains(step), "{step} not left after the zoom: {t:#}");
    }
    for step in &zoomed_steps {
        assert!(
            steps.contains(step) || near.contains(step),
            "{step} left after the zoom, though outside the drag: {t:#}"
        );
    }
    for name in inside.iter().filter(|n| n.starts_with("step ")) {
        assert!(
            zoomed_steps.contains(name),
            "{name} inside the drag but not left: {t:#}"
        );
    }
    assert_ne!(t["ticks_zoomed"], t["ticks"]);
    assert_eq!(
        t["device_ticks_zoomed"].as_array().unwrap()[..2],
        t["ticks_zoomed"].as_array().unwrap()[..2]
    );
    // Reset: the whole run again.
    assert!(t["range_reset"].as_str().unwrap().starts_with("whole run: "));
    assert_eq!(t["markers_reset"], t["markers"]);
    assert_eq!(t["ticks_reset"], t["ticks"]);
}

#[test]
fn a_trace_without_times_is_drawn_over_its_memory_events_and_one_with_times_over_time_with_its_tests() {
    let dir = TempDir::new();
    for (ns, axis, unit) in [
        (0, "memory events (the trace has no times)", ""),
        (1000, "time since the trace began", " s"),
    ] {
        let trace = dir.path().join(format!("snap-{ns}.trace"));
        // Snapshots as the pytest plugin writes them around a test, and one of the program's.
        snapshot_trace_timed(
            &trace,
            ns,
            ["pytest begin t.py::test_a", "pytest end t.py::test_a", "api"],
        );
        let page = page_of(&dir, &format!("snap-{ns}.html"), &[&trace]);
        let (t, _) = drive(&page, TIMELINE);
        assert_eq!(t["axis"], axis, "{t:#}");
        let ticks: Vec<&str> = t["ticks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert!(ticks.len() >= 2, "{ticks:?}");
        assert!(
            ticks
                .iter()
                .all(|s| s.ends_with(unit) && (unit.is_empty() != s.ends_with(" s"))),
            "{ticks:?}"
        );
        assert_eq!(
            t["markers"],
            json!({"test-begin": 1, "test-end": 1, "snapshot": 1}),
            "{t:#}"
        );
        let titles: Vec<&str> = t["marker_titles"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_str().unwrap())
            .collect();
        assert_eq!(titles, ["t.py::test_a", "t.py::test_a", "snapshot 3 (api)"]);
    }
}
