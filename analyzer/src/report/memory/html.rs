//! One self-contained HTML page: the report's data as inline JSON, drawn by a small hand-written
//! script into SVG (timeline of live bytes stacked by site, per-device live bytes and
//! fragmentation, flame graphs of leaked and of peak bytes) and tables (findings, growth,
//! fragmentation, failed allocations). No network access, no library: the page opens from a
//! file anywhere. Every series in it is bounded (downsampled), never one point per event.

use super::super::json::{render, J};
use super::super::{Finding, Report};
use super::collapsed::frame_name;
use super::{device_name, MemoryView};
use crate::report::user_code::{shown_frames, site_name};
use crate::run::human_bytes;

/// The page for `report`.
pub fn write(report: &Report) -> String {
    let native_frames = report.native_frames;
    let data = J::A(report.processes.iter().map(|p| process(p, native_frames)).collect());
    let mut json = String::new();
    render(&data, 0, &mut json);
    // Inside <script>, "</" could end the element; "<\/" means the same to JSON.parse.
    let json = json.replace("</", "<\\/");
    let mut page = String::with_capacity(json.len() + SCRIPT.len() + 4096);
    page.push_str(HEAD);
    page.push_str("<script type=\"application/json\" id=\"data\">");
    page.push_str(&json);
    page.push_str("</script>\n<script>\n");
    page.push_str(SCRIPT);
    page.push_str("</script>\n</body>\n</html>\n");
    page
}

fn flame(stacks: Vec<(Vec<String>, u64)>) -> J {
    J::A(
        stacks
            .into_iter()
            .filter(|(_, b)| *b > 0)
            .map(|(frames, bytes)| {
                J::O(vec![
                    ("frames", J::A(frames.into_iter().map(J::S).collect())),
                    ("bytes", J::U(bytes)),
                ])
            })
            .collect(),
    )
}

fn process(p: &super::super::ProcessReport, native_frames: bool) -> J {
    let title = match &p.process {
        Some(i) => format!("pid {} {}", i.pid, i.exe),
        None => p.trace.display().to_string(),
    };
    let outermost_first = |frames: &[super::super::Frame]| {
        shown_frames(frames, native_frames)
            .into_iter()
            .rev()
            .map(frame_name)
            .collect::<Vec<_>>()
    };
    let leaked = flame(p.leaks.iter().map(|h| (outermost_first(&h.stack), h.bytes)).collect());
    let findings = J::A(p.findings.iter().map(finding).collect());
    let mut fields = vec![
        ("title", J::S(title)),
        ("trace", J::S(p.trace.display().to_string())),
        ("leaked_bytes", J::U(p.summary.leaked_bytes)),
        ("peak_bytes", J::U(p.summary.peak_bytes)),
        ("allocations", J::U(p.summary.allocations)),
        ("leaked", leaked),
        ("findings", findings),
    ];
    if let Some(m) = &p.memory {
        fields.push(("memory", memory(m, native_frames)));
    }
    J::O(fields)
}

fn finding(f: &Finding) -> J {
    let at = site_name(&f.stack).unwrap_or_default();
    J::O(vec![
        ("check", J::S(f.check.to_string())),
        ("severity", J::S(f.severity.name().to_string())),
        ("message", J::S(f.message.clone())),
        ("at", J::S(at)),
    ])
}

fn memory(m: &MemoryView, native_frames: bool) -> J {
    let r = &m.replay;
    let nums = |v: &[u64]| J::A(v.iter().map(|x| J::U(*x)).collect());
    let label = |id: &gpuleak_format::StackId| {
        m.sites
            .get(id)
            .map_or_else(|| format!("stack {}", id.0), |s| s.label.clone())
    };
    let peak = flame(
        m.peak_sites
            .iter()
            .map(|(id, b)| {
                let frames = m.sites.get(id).map_or(&[][..], |s| s.stack.as_slice());
                (
                    shown_frames(frames, native_frames)
                        .into_iter()
                        .rev()
                        .map(frame_name)
                        .collect(),
                    *b,
                )
            })
            .collect(),
    );
    let devices = r
        .devices
        .iter()
        .zip(&m.pins)
        .map(|(d, pins)| {
            J::O(vec![
                ("name", J::S(device_name(d.device))),
                ("addresses", J::Bool(d.has_addresses)),
                ("peak", J::U(d.peak.0)),
                ("peak_seq", J::U(d.peak.1)),
                (
                    "stacked",
                    J::A(
                        d.stacked
                            .iter()
                            .map(|(id, v)| J::O(vec![("label", J::S(label(id))), ("live", nums(v))]))
                            .collect(),
                    ),
                ),
                (
                    "peak_sites",
                    J::A(
                        d.peak_sites
                            .iter()
                            .take(10)
                            .map(|s| J::A(vec![J::S(label(&s.stack)), J::S(human_bytes(s.bytes))]))
                            .collect(),
                    ),
                ),
                ("live", nums(&d.live.iter().map(|p| p.max).collect::<Vec<_>>())),
                ("granted", nums(&d.granted.iter().map(|p| p.max).collect::<Vec<_>>())),
                ("granted_peak", J::U(d.granted_peak)),
                ("free", nums(&d.free_in_span)),
                ("reserved", nums(&d.vmm_reserved)),
                ("pool", nums(&d.pool)),
                ("pool_reserved", nums(&d.pool_reserved)),
                ("pool_used", nums(&d.pool_used)),
                ("pool_samples", J::U(d.pool_samples)),
                ("frag", nums(&d.fragmentation_ppm)),
                ("allocs", nums(&d.allocations)),
                ("frees", nums(&d.frees)),
                (
                    "worst",
                    J::S(d.worst.map_or_else(String::new, |w| {
                        format!(
                            "worst at {:.3} s: {} free between live allocations, largest hole {} (fragmentation {:.2})",
                            w.time_ns as f64 / 1e9,
                            human_bytes(w.free),
                            human_bytes(w.largest_hole),
                            w.fragmentation
                        )
                    })),
                ),
                (
                    "pins",
                    J::A(
                        pins.iter()
                            .map(|p| {
                                J::A(vec![
                                    J::S(label(&p.stack)),
                                    J::U(p.allocations),
                                    J::S(human_bytes(p.bytes)),
                                    J::S(human_bytes(p.largest_joined)),
                                ])
                            })
                            .collect(),
                    ),
                ),
            ])
        })
        .collect();
    let growth = J::A(
        m.growth
            .iter()
            .map(|g| {
                J::A(vec![
                    J::S(label(&g.stack)),
                    J::S(human_bytes(g.from_bytes)),
                    J::S(human_bytes(g.to_bytes)),
                    J::U(g.steps),
                    J::S(human_bytes(g.bytes_per_step)),
                ])
            })
            .collect(),
    );
    let ooms = J::A(
        m.ooms
            .iter()
            .map(|o| {
                J::A(vec![
                    J::S(o.oom.api.to_string()),
                    J::S(human_bytes(o.oom.size)),
                    J::S(device_name(o.oom.device)),
                    J::S(human_bytes(o.oom.live)),
                    J::S(human_bytes(o.oom.free_in_span)),
                    J::S(human_bytes(o.oom.largest_hole)),
                    J::S(format!("{:.2}", o.oom.fragmentation)),
                    J::S(o.pins.first().map_or_else(String::new, |p| label(&p.stack))),
                ])
            })
            .collect(),
    );
    let snapshot = m.snapshot.as_ref().map_or(J::Null, |snap| {
        let title = match &snap.to {
            Some(to) => format!(
                "Snapshot {} -> {}: live {} -> {}",
                snap.from.id,
                to.id,
                human_bytes(snap.from.live),
                human_bytes(to.live)
            ),
            None => format!(
                "Snapshot {} ({}): {} live",
                snap.from.id,
                snap.from.reason,
                human_bytes(snap.from.live)
            ),
        };
        let rows = snap
            .rows
            .iter()
            .take(100)
            .map(|(id, a, b)| J::A(vec![J::S(label(id)), J::S(human_bytes(*a)), J::S(human_bytes(*b))]))
            .collect();
        J::O(vec![("title", J::S(title)), ("rows", J::A(rows))])
    });
    J::O(vec![
        ("snapshot", snapshot),
        ("events", J::U(r.events)),
        ("bucket_events", J::U(r.bucket_events)),
        ("times", nums(&r.times)),
        ("seqs", nums(&r.seqs)),
        ("site_bucket_events", J::U(r.site_bucket_events)),
        ("peak_time", J::U(r.peak.2)),
        ("peak_seq", J::U(r.peak.1)),
        (
            "stacked",
            J::A(
                m.stacked
                    .iter()
                    .map(|(id, v)| J::O(vec![("label", J::S(label(id))), ("live", nums(v))]))
                    .collect(),
            ),
        ),
        ("devices", J::A(devices)),
        ("peak", peak),
        ("growth", growth),
        ("ooms", ooms),
        (
            "churn",
            J::A(
                m.churn
                    .iter()
                    .filter_map(|id| m.sites.get(id))
                    .map(|s| J::A(vec![J::S(s.label.clone()), J::U(s.summary.allocations)]))
                    .collect(),
            ),
        ),
    ])
}

const HEAD: &str = r#"<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; img-src data:">
<title>gpuleak: where the memory went</title>
<style>
body { font: 14px/1.4 system-ui, sans-serif; margin: 1em 2em; color: #222; }
h1 { font-size: 1.4em; } h2 { font-size: 1.2em; margin-top: 1.5em; } h3 { font-size: 1em; }
svg { display: block; margin: .5em 0; background: #fafafa; border: 1px solid #ddd; }
svg text { font: 11px sans-serif; fill: #333; }
table { border-collapse: collapse; margin: .5em 0; }
td, th { border: 1px solid #ddd; padding: 2px 6px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
.error { color: #b00; } .warning { color: #a60; } .note { color: #06a; }
.legend span { display: inline-block; margin-right: 1em; }
.legend i { display: inline-block; width: 10px; height: 10px; margin-right: 4px; }
rect.flame { stroke: #fff; stroke-width: .5; }
</style>
</head>
<body>
<h1>gpuleak: where the memory went</h1>
<div id="report">rendering...</div>
"#;

const SCRIPT: &str = r##""use strict";
(function () {
  var NS = "http://www.w3.org/2000/svg";
  var COLOURS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"];
  function el(tag, attrs, parent, text) {
    var e = tag.indexOf("svg:") === 0 ? document.createElementNS(NS, tag.slice(4)) : document.createElement(tag);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }
  function bytes(n) {
    var u = ["B", "KiB", "MiB", "GiB", "TiB"], i = 0;
    while (n >= 1024 && i < u.length - 1) { n /= 1024; i++; }
    return i === 0 ? n + " B" : n.toFixed(1) + " " + u[i];
  }
  function table(parent, head, rows) {
    var t = el("table", {}, parent), tr = el("tr", {}, t);
    head.forEach(function (h) { el("th", {}, tr, h); });
    rows.forEach(function (r) {
      var row = el("tr", {}, t);
      r.forEach(function (c) { el("td", {}, row, String(c)); });
    });
    return t;
  }
  // Lines and areas over x in [0, 1] of the run's memory events.
  function chart(parent, series, opts) {
    var W = 900, H = opts.height || 220, L = 70, B = 20, T = 10;
    var svg = el("svg:svg", { width: W, height: H, "class": opts.cls, viewBox: "0 0 " + W + " " + H }, parent);
    var top = 1;
    series.forEach(function (s) { s.ys.forEach(function (y) { if (y > top) top = y; }); });
    if (opts.top) top = opts.top;
    function X(x) { return L + x * (W - L - 10); }
    function Y(y) { return H - B - (y / top) * (H - B - T); }
    el("svg:text", { x: 4, y: T + 10 }, svg, opts.fmt(top));
    el("svg:text", { x: 4, y: H - B }, svg, opts.fmt(0));
    el("svg:line", { x1: L, y1: H - B, x2: W - 10, y2: H - B, stroke: "#999" }, svg);
    series.forEach(function (s, i) {
      var n = s.ys.length, d = "";
      for (var j = 0; j < n; j++) {
        var x = Math.min(1, (j + 1) * s.width / Math.max(1, opts.events));
        d += (j ? "L" : "M") + X(x).toFixed(1) + "," + Y(s.ys[j]).toFixed(1);
      }
      if (s.base) {
        for (var k = n - 1; k >= 0; k--) {
          var xb = Math.min(1, (k + 1) * s.width / Math.max(1, opts.events));
          d += "L" + X(xb).toFixed(1) + "," + Y(s.base[k]).toFixed(1);
        }
        d += "Z";
      }
      var p = el("svg:path", { d: d, "class": s.base ? "area" : "line", fill: s.base ? s.colour : "none",
        stroke: s.base ? "none" : s.colour, "stroke-width": 1.5, "fill-opacity": 0.8 }, svg);
      el("svg:title", {}, p, s.label);
    });
    if (opts.mark !== undefined) {
      el("svg:line", { x1: X(opts.mark), y1: T, x2: X(opts.mark), y2: H - B, stroke: "#b00", "stroke-dasharray": "4 3", "class": "peak" }, svg);
    }
    var legend = el("div", { "class": "legend" }, parent);
    series.forEach(function (s) {
      var span = el("span", {}, legend);
      el("i", { style: "background:" + s.colour }, span);
      span.appendChild(document.createTextNode(s.label));
    });
    return svg;
  }
  // An icicle: the outermost frame on top, children below, widths by bytes.
  function flame(parent, stacks, cls) {
    var root = { name: "all", bytes: 0, kids: {} };
    stacks.forEach(function (s) {
      var node = root;
      root.bytes += s.bytes;
      s.frames.forEach(function (f) {
        if (!node.kids[f]) node.kids[f] = { name: f, bytes: 0, kids: {} };
        node = node.kids[f];
        node.bytes += s.bytes;
      });
    });
    var rows = [], W = 900, RH = 17;
    function lay(node, x, depth) {
      rows.push({ node: node, x: x, depth: depth });
      var kids = Object.keys(node.kids).map(function (k) { return node.kids[k]; });
      kids.sort(function (a, b) { return b.bytes - a.bytes; });
      var at = x;
      kids.forEach(function (k) { lay(k, at, depth + 1); at += k.bytes / Math.max(1, root.bytes); });
    }
    lay(root, 0, 0);
    var depth = 0;
    rows.forEach(function (r) { if (r.depth > depth) depth = r.depth; });
    var svg = el("svg:svg", { width: W, height: (depth + 1) * RH + 2, "class": cls }, parent);
    rows.forEach(function (r, i) {
      var w = r.node.bytes / Math.max(1, root.bytes) * W;
      if (w < 0.5) return;
      var g = el("svg:g", {}, svg);
      el("svg:rect", { x: r.x * W, y: r.depth * RH, width: w, height: RH - 1, "class": "flame",
        fill: r.depth === 0 ? "#bbb" : COLOURS[(r.node.name.length + r.depth) % COLOURS.length] }, g);
      el("svg:title", {}, g, r.node.name + ": " + bytes(r.node.bytes));
      if (w > 40) {
        var chars = Math.floor(w / 6.5);
        var name = r.node.name.length > chars ? r.node.name.slice(0, chars - 1) + "\u2026" : r.node.name;
        el("svg:text", { x: r.x * W + 3, y: r.depth * RH + 12 }, g, name);
      }
    });
    return svg;
  }
  function process(parent, p) {
    var sec = el("section", { "class": "process" }, parent);
    el("h2", {}, sec, p.title);
    el("p", {}, sec, "trace " + p.trace + ": peak " + bytes(p.peak_bytes) + ", leaked " + bytes(p.leaked_bytes) + ", " + p.allocations + " allocations");
    var m = p.memory;
    if (m) {
      // Live bytes stacked by site, with a marker at the peak (the first bucket that ends at
      // or after the peak's record).
      var stackedChart = function (stacked, peakSeq, cls) {
        var base = null, series = [];
        stacked.forEach(function (s, i) {
          var top = s.live.map(function (v, j) { return v + (base ? base[j] : 0); });
          series.push({ ys: top, base: base || s.live.map(function () { return 0; }), width: m.site_bucket_events,
            colour: COLOURS[i % COLOURS.length], label: s.label });
          base = top;
        });
        series.reverse();
        var peakX = undefined;
        if (m.events > 0) {
          var idx = m.seqs.findIndex(function (q) { return q >= peakSeq; });
          if (idx >= 0) peakX = Math.min(1, (idx + 1) * m.bucket_events / m.events);
        }
        chart(sec, series, { events: m.events, fmt: bytes, cls: cls, mark: peakX });
      };
      el("h3", {}, sec, "Live bytes by allocation site");
      stackedChart(m.stacked, m.peak_seq, "timeline");
      var several = m.devices.length > 1;
      m.devices.forEach(function (d) {
        if (several && d.stacked.length) {
          el("h3", {}, sec, d.name + ": live bytes by allocation site (peak " + bytes(d.peak) + ")");
          stackedChart(d.stacked, d.peak_seq, "timeline-device");
          table(sec, ["site at the device's peak", "bytes"], d.peak_sites).setAttribute("class", "device-peak");
        }
        el("h3", {}, sec, d.name + ": live bytes" + (d.addresses ? ", free between live allocations, fragmentation" : "") +
          " (peak " + bytes(d.peak) + " asked for, " + bytes(d.granted_peak) + " granted)");
        var lines = [{ ys: d.live, width: m.bucket_events, colour: "#4e79a7", label: "live bytes (requested)" }];
        if (d.granted_peak > d.peak) lines.push({ ys: d.granted, width: m.bucket_events, colour: "#9c755f", label: "live bytes (granted: sizes rounded up to 256 bytes)" });
        if (d.addresses) lines.push({ ys: d.free, width: m.bucket_events, colour: "#e15759", label: "free in used span" });
        if (Math.max.apply(null, d.reserved) > 0) lines.push({ ys: d.reserved, width: m.bucket_events, colour: "#59a14f", label: "VMM reserved" });
        if (d.pool_samples > 0) {
          lines.push({ ys: d.pool_reserved, width: m.bucket_events, colour: "#edc948", label: "stream-ordered pools: reserved (sampled)" });
          lines.push({ ys: d.pool_used, width: m.bucket_events, colour: "#ff9da7", label: "stream-ordered pools: used (sampled)" });
        }
        if (Math.max.apply(null, d.pool) > 0) lines.push({ ys: d.pool, width: m.bucket_events, colour: "#b07aa1", label: "held by caching allocators" });
        chart(sec, lines, { events: m.events, fmt: bytes, cls: "device", height: 160 });
        if (d.addresses) {
          chart(sec, [{ ys: d.frag, width: m.bucket_events, colour: "#f28e2b", label: "fragmentation (1 - largest hole / free)" }],
            { events: m.events, fmt: function (v) { return (v / 1e6).toFixed(2); }, cls: "fragmentation", height: 100, top: 1e6 });
        }
        var rate = d.allocs.map(function (v, j) { return v - (j ? d.allocs[j - 1] : 0); });
        chart(sec, [{ ys: rate, width: m.bucket_events, colour: "#76b7b2", label: "allocations per bucket of " + m.bucket_events + " memory events" }],
          { events: m.events, fmt: function (v) { return String(Math.round(v)); }, cls: "rate", height: 80 });
        if (d.worst) el("p", {}, sec, d.worst);
        if (d.pins.length) table(sec, ["pinning site", "allocations", "bytes", "hole if one were freed"], d.pins);
      });
      el("h3", {}, sec, "Flame graph of bytes live at the peak");
      if (m.peak.length) flame(sec, m.peak, "flame-peak"); else el("p", {}, sec, "nothing live at the peak");
      if (m.growth.length) {
        el("h3", {}, sec, "Growing sites");
        table(sec, ["site", "from", "to", "steps", "per step"], m.growth);
      }
      if (m.ooms.length) {
        el("h3", {}, sec, "Failed allocations");
        table(sec, ["call", "requested", "device", "live", "free in span", "largest hole", "fragmentation", "pinned by"], m.ooms);
      }
      if (m.snapshot) {
        el("h3", {}, sec, m.snapshot.title);
        table(sec, ["site", "bytes", "then"], m.snapshot.rows).setAttribute("class", "snapshot");
      }
      if (m.churn.length) {
        el("h3", {}, sec, "Churn (candidates for a pool)");
        table(sec, ["site", "allocations"], m.churn);
      }
    }
    el("h3", {}, sec, "Flame graph of leaked bytes");
    if (p.leaked.length) flame(sec, p.leaked, "flame-leaked"); else el("p", {}, sec, "no leaks");
    el("h3", {}, sec, "Findings");
    if (p.findings.length) {
      var t = table(sec, ["severity", "check", "message", "at"],
        p.findings.map(function (f) { return [f.severity, f.check, f.message, f.at]; }));
      t.setAttribute("class", "findings");
      Array.prototype.forEach.call(t.querySelectorAll("tr"), function (tr, i) {
        if (i > 0) tr.firstChild.setAttribute("class", p.findings[i - 1].severity);
      });
    } else el("p", {}, sec, "no findings");
  }
  try {
    var data = JSON.parse(document.getElementById("data").textContent);
    var root = document.getElementById("report");
    root.textContent = "";
    data.forEach(function (p) { process(root, p); });
    document.body.setAttribute("data-rendered", "ok");
    // Milliseconds from the start of navigation until everything was drawn (bench/memory).
    document.body.setAttribute("data-render-ms", String(Math.round(performance.now())));
  } catch (e) {
    document.body.setAttribute("data-rendered", "error: " + e);
  }
})();
"##;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::TraceFile;
    use crate::report::load::tests::write_trace;
    use crate::report::{from_files, Options};

    #[test]
    fn text_from_the_trace_cannot_close_the_script_that_carries_the_data() {
        let dir = std::env::temp_dir().join(format!("gpuleak-html-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        // The trace's path is shown in the page: make it hold "</script>".
        let odd = dir.join("a<");
        std::fs::create_dir_all(&odd).unwrap();
        let path = odd.join("script><b>x.trace");
        write_trace(&path, 4321, 3000);
        let files = TraceFile::open_all(std::slice::from_ref(&path)).unwrap();
        let options = Options {
            memory: true,
            ..Options::default()
        };
        let report = Report::new(from_files(&files, &options, 1, None));
        let page = write(&report);
        // Two scripts: the data and the code, each closed once.
        assert_eq!(page.matches("</script>").count(), 2, "{page}");
        assert!(page.contains("a<\\/script><b>x.trace"));
        assert!(!page.contains("https://"));
        // The data is JSON that parses back, with the memory of the process.
        let start = page.find("id=\"data\">").unwrap() + "id=\"data\">".len();
        let end = start + page[start..].find("</script>").unwrap();
        let data: serde_json::Value = serde_json::from_str(&page[start..end]).unwrap();
        assert!(data[0]["title"].as_str().unwrap().starts_with("pid 4321"));
        assert!(data[0]["memory"]["devices"].as_array().is_some_and(|d| !d.is_empty()));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
