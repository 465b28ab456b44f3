"use strict";
// gpuleak report --format html: draws the report's data (the JSON in #data) into tables and SVG.
// No library and no network: the page opens from a file anywhere.
(function () {
  var NS = "http://www.w3.org/2000/svg";
  var COLOURS = ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f"];
  var redraws = [];

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
  function count(n) {
    if (n >= 1e9) return +(n / 1e9).toPrecision(3) + "G";
    if (n >= 1e6) return +(n / 1e6).toPrecision(3) + "M";
    if (n >= 1e4) return +(n / 1e3).toPrecision(3) + "k";
    return String(Math.round(n));
  }
  function seconds(ns, step) {
    var s = ns / 1e9, d = step === undefined ? 3 : Math.max(0, Math.min(9, Math.ceil(-Math.log10(step / 1e9))));
    return s.toFixed(d) + " s";
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
  // A stack, innermost first; the user's frames in bold.
  function stackList(parent, lines) {
    var ol = el("ol", { "class": "stack" }, parent);
    lines.forEach(function (l) {
      el("li", { "class": l[1] ? "user" : (l[0].indexOf("... ") === 0 ? "folded" : "") }, ol, l[0]);
    });
    return ol;
  }
  // A table whose rows open to show a stack: a click on the row shows or hides the row below.
  // Past SHORT rows the rest wait behind a button, so that the charts below stay in reach.
  var SHORT = 20;
  function expandable(parent, cls, head, rows) {
    var t = el("table", { "class": cls }, parent), tr = el("tr", {}, t);
    head.forEach(function (h) { el("th", h[1] ? { "class": h[1] } : {}, tr, h[0]); });
    rows.forEach(function (r, n) {
      var row = el("tr", n < SHORT ? { "class": "expandable" } : { "class": "expandable later", hidden: "" }, t);
      r.cells.forEach(function (c, i) {
        var td = el("td", c[1] ? { "class": c[1] } : {}, row);
        if (i === r.toggleAt) el("span", { "class": "toggle" }, td, r.stack.length ? "\u25b8" : "");
        td.appendChild(document.createTextNode(String(c[0])));
      });
      var more = el("tr", { "class": "stack-row", hidden: "" }, t);
      stackList(el("td", { colspan: head.length }, more), r.stack);
      row.addEventListener("click", function () {
        var open = more.hasAttribute("hidden");
        if (open) more.removeAttribute("hidden"); else more.setAttribute("hidden", "");
        var tg = row.querySelector(".toggle");
        if (tg && r.stack.length) tg.textContent = open ? "\u25be" : "\u25b8";
      });
    });
    if (rows.length > SHORT) {
      var all = el("button", { type: "button", "class": "show-all" }, parent, "show all " + rows.length + " rows");
      all.addEventListener("click", function () {
        q(t, "tr.later").forEach(function (row) { row.removeAttribute("hidden"); row.classList.remove("later"); });
        all.remove();
      });
    }
    return t;
  }
  function q(root, sel) { return Array.prototype.slice.call(root.querySelectorAll(sel)); }

  var tip = null;
  function showTip(evt, title, lines) {
    if (!tip) tip = el("div", { "class": "tip", id: "tip" }, document.body);
    tip.textContent = "";
    el("b", {}, tip, title);
    lines.forEach(function (l) { el("div", {}, tip, l); });
    tip.style.display = "block";
    var x = evt.clientX + 14, y = evt.clientY + 14;
    tip.style.left = Math.max(0, Math.min(x, window.innerWidth - tip.offsetWidth - 4)) + "px";
    tip.style.top = Math.max(0, Math.min(y, window.innerHeight - tip.offsetHeight - 4)) + "px";
  }
  function hideTip() { if (tip) tip.style.display = "none"; }

  // Round tick positions over [a, b].
  function ticks(a, b, n) {
    var span = b - a;
    if (!(span > 0)) return { step: 1, at: [a] };
    var raw = span / n, mag = Math.pow(10, Math.floor(Math.log10(raw))), f = raw / mag;
    var step = (f < 1.5 ? 1 : f < 3.5 ? 2 : f < 7.5 ? 5 : 10) * mag, at = [];
    for (var x = Math.ceil(a / step) * step; x <= b + step * 1e-9; x += step) at.push(x);
    return { step: step, at: at };
  }
  // First index whose position is at or after x.
  function bucketAt(xs, x) {
    var lo = 0, hi = xs.length - 1;
    if (hi < 0) return -1;
    while (lo < hi) { var mid = (lo + hi) >> 1; if (xs[mid] < x) lo = mid + 1; else hi = mid; }
    return lo;
  }

  // The process's timelines: one x axis (time, or memory events when the trace has no times)
  // shared by every chart of the process, zoomed together.
  function Timeline(sec, m) {
    var self = this;
    this.m = m;
    // Time when the times go forward and differ (a short run on the coarse clock can have all
    // its records in one tick), else memory events.
    var t = m.times, ordered = t.length > 0;
    for (var i = 1; i < t.length; i++) if (t[i] < t[i - 1]) { ordered = false; break; }
    this.useTime = ordered && m.time_range[1] > m.time_range[0] && t[t.length - 1] > m.time_range[0];
    this.origin = this.useTime ? m.time_range[0] : 0;
    var end = this.useTime ? m.time_range[1] : Math.max(1, m.events);
    this.full = [this.origin, end];
    this.domain = this.full.slice();
    var origin = this.origin;
    // A bucket before the first memory event holds no time: it starts the axis.
    this.xs = this.useTime ? m.times.map(function (x) { return Math.max(x, origin); }) : m.times.map(function (_, j) { return Math.min(end, (j + 1) * m.bucket_events); });
    this.sxs = this.useTime ? m.site_times.map(function (x) { return Math.max(x, origin); }) : m.site_times.map(function (_, j) { return Math.min(end, (j + 1) * m.site_bucket_events); });
    this.markers = m.markers.map(function (k) {
      return { kind: k[0], name: k[1], x: self.useTime ? k[2] : k[3] };
    });
    this.charts = [];
    var bar = el("div", { "class": "toolbar timeline-bar" }, sec);
    this.range = el("span", { "class": "range" }, bar);
    this.reset = el("button", { "class": "reset", type: "button", disabled: "" }, bar, "reset zoom");
    this.reset.addEventListener("click", function () { self.zoom(self.full[0], self.full[1]); });
    el("span", { "class": "hint" }, bar, "drag across a chart to zoom; hover for the site and its stack");
    var counts = {};
    m.markers.forEach(function (k) { counts[k[0]] = (counts[k[0]] || 0) + 1; });
    var said = Object.keys(counts).map(function (k) { return counts[k] + " " + k.replace("-", " ") + (counts[k] > 1 ? "s" : ""); });
    if (said.length) el("span", { "class": "marker-count" }, bar, "drawn: " + said.join(", "));
    this.sayRange();
  }
  Timeline.prototype.fmt = function (x, step) {
    return this.useTime ? seconds(x - this.origin, step) : count(x);
  };
  Timeline.prototype.sayRange = function () {
    var zoomed = this.domain[0] !== this.full[0] || this.domain[1] !== this.full[1];
    this.range.textContent = (zoomed ? "showing " + this.fmt(this.domain[0]) + " to " + this.fmt(this.domain[1]) + " of " : "whole run: ") +
      (this.useTime ? seconds(this.full[1] - this.origin) : count(this.full[1]) + " memory events");
    if (zoomed) this.reset.removeAttribute("disabled"); else this.reset.setAttribute("disabled", "");
  };
  Timeline.prototype.zoom = function (a, b) {
    if (b < a) { var c = a; a = b; b = c; }
    if (!(b > a)) return;
    this.domain = [Math.max(this.full[0], a), Math.min(this.full[1], b)];
    this.sayRange();
    var self = this;
    this.charts.forEach(function (c) { self.draw(c); });
  };
  // series: [{ys, base (stacked areas only), site (true: on the site axis), colour, label, stack}]
  Timeline.prototype.chart = function (parent, series, opts) {
    var c = { holder: el("div", { "class": "chart" }, parent), series: series, opts: opts };
    var legend = el("div", { "class": "legend" }, parent);
    series.slice().reverse().forEach(function (s) {
      var span = el("span", {}, legend);
      el("i", { style: "background:" + s.colour }, span);
      span.appendChild(document.createTextNode(s.label));
    });
    this.charts.push(c);
    this.draw(c);
    return c;
  };
  Timeline.prototype.draw = function (c) {
    var self = this, opts = c.opts, series = c.series;
    c.holder.textContent = "";
    var W = Math.max(320, c.holder.clientWidth || 900), H = opts.height || 220, L = 74, R = 12, B = 34, T = 10;
    var svg = el("svg:svg", { width: W, height: H, "class": opts.cls, viewBox: "0 0 " + W + " " + H }, c.holder);
    var d0 = this.domain[0], d1 = this.domain[1];
    var top = 1;
    if (opts.top) top = opts.top;
    else series.forEach(function (s) {
      var xs = s.site ? self.sxs : self.xs;
      for (var j = 0; j < s.ys.length; j++) {
        var from = j ? xs[j - 1] : self.full[0];
        if (xs[j] >= d0 && from <= d1 && s.ys[j] > top) top = s.ys[j];
      }
    });
    function X(x) { return L + (x - d0) / Math.max(1e-9, d1 - d0) * (W - L - R); }
    function Y(y) { return H - B - (y / top) * (H - B - T); }
    var clip = "clip" + (Timeline.clips = (Timeline.clips || 0) + 1);
    el("svg:rect", { x: L, y: 0, width: W - L - R, height: H - B }, el("svg:clipPath", { id: clip }, svg));
    // The y axis: 0 and the top; the x axis: round ticks and what it counts.
    el("svg:text", { x: 4, y: T + 10 }, svg, opts.fmt(top));
    el("svg:text", { x: 4, y: H - B }, svg, opts.fmt(0));
    el("svg:line", { x1: L, y1: H - B, x2: W - R, y2: H - B, stroke: "#999" }, svg);
    var tk = ticks(d0 - this.origin, d1 - this.origin, Math.max(2, Math.floor((W - L - R) / 110)));
    tk.at.forEach(function (v) {
      var x = X(v + self.origin);
      el("svg:line", { x1: x, y1: H - B, x2: x, y2: H - B + 4, stroke: "#999" }, svg);
      el("svg:text", { x: x, y: H - B + 15, "text-anchor": "middle", "class": "tick" }, svg, self.useTime ? seconds(v, tk.step) : count(v));
    });
    el("svg:text", { x: W - R, y: H - 3, "text-anchor": "end", "class": "axis-label" }, svg,
      this.useTime ? "time since the trace began" : "memory events (the trace has no times)");
    var g = el("svg:g", { "clip-path": "url(#" + clip + ")" }, svg);
    // Each bucket's value holds from the bucket before's end to its own: steps, not ramps.
    series.forEach(function (s) {
      var xs = s.site ? self.sxs : self.xs, n = Math.min(s.ys.length, xs.length);
      if (!n) return;
      var d = "M" + X(self.full[0]).toFixed(1) + "," + Y(s.ys[0]).toFixed(1);
      for (var j = 0; j < n; j++) {
        if (j) d += "V" + Y(s.ys[j]).toFixed(1);
        d += "H" + X(xs[j]).toFixed(1);
      }
      if (s.base) {
        d += "V" + Y(s.base[n - 1]).toFixed(1);
        for (var k = n - 1; k >= 0; k--) {
          d += "H" + X(k ? xs[k - 1] : self.full[0]).toFixed(1);
          if (k) d += "V" + Y(s.base[k - 1]).toFixed(1);
        }
        d += "Z";
      }
      var p = el("svg:path", { d: d, "class": s.base ? "area" : "line", fill: s.base ? s.colour : "none",
        stroke: s.base ? "none" : s.colour, "stroke-width": 1.5, "fill-opacity": 0.8 }, g);
      el("svg:title", {}, p, s.label);
    });
    this.markers.forEach(function (k) {
      if (k.x < d0 || k.x > d1) return;
      var ln = el("svg:line", { x1: X(k.x), y1: T, x2: X(k.x), y2: H - B, "class": "marker " + k.kind }, svg);
      el("svg:title", {}, ln, k.name);
    });
    if (opts.mark !== undefined && opts.mark >= d0 && opts.mark <= d1) {
      el("svg:line", { x1: X(opts.mark), y1: T, x2: X(opts.mark), y2: H - B, stroke: "#b00", "stroke-dasharray": "4 3", "class": "peak" }, svg);
    }
    // Hover and drag: one transparent rectangle over the plot.
    var over = el("svg:rect", { x: L, y: T, width: W - L - R, height: H - B - T, fill: "transparent", "class": "overlay" }, svg);
    var sel = null, start = null;
    function at(evt) {
      var r = svg.getBoundingClientRect();
      return { px: evt.clientX - r.left, py: evt.clientY - r.top };
    }
    function value(px) { return d0 + (px - L) / (W - L - R) * (d1 - d0); }
    over.addEventListener("mousedown", function (evt) {
      start = at(evt).px;
      sel = el("svg:rect", { x: start, y: T, width: 0, height: H - B - T, "class": "selection" }, svg);
      evt.preventDefault();
    });
    over.addEventListener("mousemove", function (evt) {
      var p = at(evt);
      if (sel) {
        sel.setAttribute("x", Math.min(start, p.px));
        sel.setAttribute("width", Math.abs(p.px - start));
        return;
      }
      self.hover(evt, series, value(p.px), top * (H - B - p.py) / (H - B - T), opts, (d1 - d0) / (W - L - R));
    });
    function end(evt) {
      if (!sel) return;
      var p = at(evt), a = start;
      sel.remove(); sel = null; start = null;
      if (Math.abs(p.px - a) > 3) self.zoom(value(Math.min(a, p.px)), value(Math.max(a, p.px)));
    }
    over.addEventListener("mouseup", end);
    over.addEventListener("mouseleave", function (evt) { end(evt); hideTip(); });
  };
  // The tooltip: for stacked areas the site under the pointer and its stack; for lines every
  // series' value; the time, and a mark within a few pixels.
  Timeline.prototype.hover = function (evt, series, x, y, opts, perPixel) {
    var lines = [], title = "", near = null;
    this.markers.forEach(function (k) { if (Math.abs(k.x - x) <= 4 * perPixel && (!near || Math.abs(k.x - x) < Math.abs(near.x - x))) near = k; });
    var when = "at " + (this.useTime ? seconds(x - this.origin) : "event " + count(x));
    if (series.length && series[0].base) {
      var j = bucketAt(this.sxs, x), hit = null;
      if (j < 0) return;
      series.forEach(function (s) { if (!hit && y >= s.base[j] && y <= s.ys[j] && s.ys[j] > s.base[j]) hit = s; });
      if (!hit) {
        series.forEach(function (s) { if (s.ys[j] > s.base[j] && (!hit || s.ys[j] - s.base[j] > hit.ys[j] - hit.base[j])) hit = s; });
      }
      if (!hit) { title = "nothing live " + when; }
      else {
        title = hit.label;
        lines.push(bytes(hit.ys[j] - hit.base[j]) + " live " + when);
        (hit.stack || []).forEach(function (l) { lines.push(l[0]); });
      }
    } else {
      var i = bucketAt(this.xs, x);
      if (i < 0) return;
      title = when;
      series.forEach(function (s) { if (i < s.ys.length) lines.push(s.label + ": " + opts.fmt(s.ys[i])); });
    }
    if (near) lines.unshift(near.kind.replace("-", " ") + ": " + near.name);
    showTip(evt, title, lines);
  };

  // An icicle of stacks (outermost frame on top, or innermost with `inverted`): click a frame
  // to zoom to it, its ancestors stay above it; search highlights frames and says the share of
  // bytes in stacks that match.
  function Flame(parent, stacks, cls) {
    var self = this;
    this.stacks = stacks;
    this.cls = cls;
    this.total = 0;
    stacks.forEach(function (s) { self.total += s.bytes; });
    var bar = el("div", { "class": "toolbar flame-bar" }, parent);
    this.search = el("input", { type: "search", "class": "flame-search", placeholder: "search frames", size: 28 }, bar);
    var lab = el("label", {}, bar);
    this.invert = el("input", { type: "checkbox", "class": "flame-invert" }, lab);
    lab.appendChild(document.createTextNode(" inverted (innermost frame on top)"));
    this.resetButton = el("button", { type: "button", "class": "flame-reset" }, bar, "reset zoom");
    this.matched = el("span", { "class": "flame-matched" }, bar);
    this.holder = el("div", { "class": "flame-holder" }, parent);
    this.search.addEventListener("input", function () { self.draw(); });
    this.invert.addEventListener("change", function () { self.build(); self.draw(); });
    this.resetButton.addEventListener("click", function () { self.focus = self.root; self.draw(); });
    this.build();
    this.draw();
  }
  Flame.prototype.build = function () {
    var inverted = this.invert.checked;
    var root = { name: "all", bytes: 0, kids: {}, parent: null, depth: 0 };
    this.stacks.forEach(function (s) {
      var node = root, frames = inverted ? s.frames.slice().reverse() : s.frames;
      root.bytes += s.bytes;
      frames.forEach(function (f) {
        if (!node.kids[f]) node.kids[f] = { name: f, bytes: 0, kids: {}, parent: node, depth: node.depth + 1 };
        node = node.kids[f];
        node.bytes += s.bytes;
      });
    });
    this.root = root;
    this.focus = root;
  };
  Flame.prototype.draw = function () {
    var self = this, W = Math.max(320, this.holder.clientWidth || 900), RH = 17;
    var term = this.search.value.trim().toLowerCase();
    var matches = function (name) { return term !== "" && name.toLowerCase().indexOf(term) >= 0; };
    if (term) {
      var hit = 0;
      this.stacks.forEach(function (s) { if (s.frames.some(matches)) hit += s.bytes; });
      this.matched.textContent = "matched " + bytes(hit) + " of " + bytes(this.total) + " (" + (100 * hit / Math.max(1, this.total)).toFixed(1) + "%)";
    } else this.matched.textContent = "";
    var chain = [], n = this.focus;
    while (n) { chain.unshift(n); n = n.parent; }
    var rows = [];
    chain.forEach(function (a, i) { if (i < chain.length - 1) rows.push({ node: a, x: 0, w: W, ancestor: true }); });
    var fb = Math.max(1, this.focus.bytes);
    function lay(node, x) {
      var w = node.bytes / fb * W;
      if (w < 0.5) return;
      rows.push({ node: node, x: x, w: w });
      var kids = Object.keys(node.kids).map(function (k) { return node.kids[k]; });
      kids.sort(function (a, b) { return b.bytes - a.bytes; });
      var at = x;
      kids.forEach(function (k) { lay(k, at); at += k.bytes / fb * W; });
    }
    lay(this.focus, 0);
    var depth = 0;
    rows.forEach(function (r) { if (r.node.depth > depth) depth = r.node.depth; });
    this.holder.textContent = "";
    var svg = el("svg:svg", { width: W, height: (depth + 1) * RH + 2, "class": this.cls }, this.holder);
    rows.forEach(function (r) {
      var g = el("svg:g", { "class": "frame" }, svg);
      var name = r.node.name, cls = "flame" + (r.ancestor ? " ancestor" : "") + (matches(name) ? " match" : "");
      el("svg:rect", { x: r.x, y: r.node.depth * RH, width: r.w, height: RH - 1, "class": cls,
        fill: r.node.depth === 0 ? "#bbb" : COLOURS[(name.length + r.node.depth) % COLOURS.length] }, g);
      el("svg:title", {}, g, name + ": " + bytes(r.node.bytes) + " (" + (100 * r.node.bytes / Math.max(1, self.total)).toFixed(1) + "%)");
      if (r.w > 40) {
        var chars = Math.floor(r.w / 6.5);
        el("svg:text", { x: r.x + 3, y: r.node.depth * RH + 12 }, g, name.length > chars ? name.slice(0, chars - 1) + "\u2026" : name);
      }
      g.addEventListener("click", function () { self.focus = r.node; self.draw(); });
    });
  };

  function process(parent, p) {
    var sec = el("section", { "class": "process" }, parent);
    el("h2", {}, sec, p.title);
    el("p", { "class": "totals" }, sec, "trace " + p.trace + ": peak " + bytes(p.peak_bytes) + ", leaked " + bytes(p.leaked_bytes) +
      " in " + p.leak_groups + " group" + (p.leak_groups === 1 ? "" : "s") + ", " + p.allocations + " allocations");
    // Groups of allocations held at the end, one row each, as the text report lists them.
    var held = function (cls, list) {
      expandable(sec, cls, [["site"], ["bytes", "num"], ["allocations", "num"], ["kind"], ["at"], ["allocated by"]],
        list.map(function (h) {
          return { toggleAt: 0, stack: h.stack,
            cells: [[h.site, "site"], [bytes(h.bytes), "num bytes"], [h.allocations, "num"], [h.kind], [h.at], [h.by]] };
        }));
    };
    el("h3", {}, sec, "Leaks");
    if (p.leaks.length) {
      held("leaks", p.leaks);
      if (p.leaks_left_out) el("p", {}, sec, p.leaks_left_out + " smaller groups left out here (" + bytes(p.omitted_bytes) + " left out by --top); the JSON report has every one");
    } else el("p", {}, sec, "no leaks");
    if (p.pool.length) {
      el("h3", {}, sec, "Held by caching allocators (not counted as leaks; --pool-as-leak counts them)");
      held("pool", p.pool);
    }
    if (p.unreleased.length) {
      el("h3", {}, sec, "Unreleased registrations, IPC mappings and reservations");
      held("unreleased", p.unreleased);
    }
    el("h3", {}, sec, "Findings");
    if (p.findings.length) {
      expandable(sec, "findings", [["severity"], ["check"], ["message"], ["at"]],
        p.findings.map(function (f) {
          return { toggleAt: 3, stack: f.stack, cells: [[f.severity, f.severity], [f.check], [f.message], [f.at, "site"]] };
        }));
      if (p.finding_count > p.findings.length) el("p", {}, sec, (p.finding_count - p.findings.length) + " more findings in the JSON report");
    } else el("p", {}, sec, "no findings");
    var m = p.memory;
    if (m) {
      var tl = new Timeline(sec, m);
      // Live bytes stacked by site, with a marker at the peak.
      var stackedChart = function (stacked, peakSeq, peakTime, cls) {
        var base = null, series = [];
        stacked.forEach(function (s, i) {
          var top = s.live.map(function (v, j) { return v + (base ? base[j] : 0); });
          series.push({ ys: top, base: base || s.live.map(function () { return 0; }), site: true,
            colour: COLOURS[i % COLOURS.length], label: s.label, stack: s.stack });
          base = top;
        });
        series.reverse();
        var peakX;
        if (tl.useTime) peakX = peakTime;
        else if (m.events > 0) {
          var idx = m.seqs.findIndex(function (q) { return q >= peakSeq; });
          if (idx >= 0) peakX = tl.xs[idx];
        }
        tl.chart(sec, series, { fmt: bytes, cls: cls, mark: peakX });
      };
      el("h3", {}, sec, "Live bytes by allocation site");
      stackedChart(m.stacked, m.peak_seq, m.peak_time, "timeline");
      var several = m.devices.length > 1;
      m.devices.forEach(function (d) {
        if (several && d.stacked.length) {
          el("h3", {}, sec, d.name + ": live bytes by allocation site (peak " + bytes(d.peak) + ")");
          stackedChart(d.stacked, d.peak_seq, undefined, "timeline-device");
          table(sec, ["site at the device's peak", "bytes"], d.peak_sites).setAttribute("class", "device-peak");
        }
        el("h3", {}, sec, d.name + ": live bytes" + (d.addresses ? ", free between live allocations, fragmentation" : "") +
          " (peak " + bytes(d.peak) + " asked for, " + bytes(d.granted_peak) + " granted)");
        var lines = [{ ys: d.live, colour: "#4e79a7", label: "live bytes (requested)" }];
        if (d.granted_peak > d.peak) lines.push({ ys: d.granted, colour: "#9c755f", label: "live bytes (granted: sizes rounded up to 256 bytes)" });
        if (d.addresses) lines.push({ ys: d.free, colour: "#e15759", label: "free in used span" });
        if (Math.max.apply(null, d.reserved) > 0) lines.push({ ys: d.reserved, colour: "#59a14f", label: "VMM reserved" });
        if (d.pool_samples > 0) {
          lines.push({ ys: d.pool_reserved, colour: "#edc948", label: "stream-ordered pools: reserved (sampled)" });
          lines.push({ ys: d.pool_used, colour: "#ff9da7", label: "stream-ordered pools: used (sampled)" });
        }
        if (Math.max.apply(null, d.pool) > 0) lines.push({ ys: d.pool, colour: "#b07aa1", label: "held by caching allocators" });
        tl.chart(sec, lines, { fmt: bytes, cls: "device", height: 160 });
        if (d.addresses) {
          tl.chart(sec, [{ ys: d.frag, colour: "#f28e2b", label: "fragmentation (1 - largest hole / free)" }],
            { fmt: function (v) { return (v / 1e6).toFixed(2); }, cls: "fragmentation", height: 100, top: 1e6 });
        }
        var rate = d.allocs.map(function (v, j) { return v - (j ? d.allocs[j - 1] : 0); });
        tl.chart(sec, [{ ys: rate, colour: "#76b7b2", label: "allocations per bucket of " + m.bucket_events + " memory events" }],
          { fmt: function (v) { return String(Math.round(v)); }, cls: "rate", height: 80 });
        if (d.worst) el("p", {}, sec, d.worst);
        if (d.pins.length) table(sec, ["pinning site", "allocations", "bytes", "hole if one were freed"], d.pins);
      });
      redraws.push(function () { tl.charts.forEach(function (c) { tl.draw(c); }); });
      el("h3", {}, sec, "Flame graph of bytes live at the peak");
      if (m.peak.length) { var fp = new Flame(sec, m.peak, "flame-peak"); redraws.push(function () { fp.draw(); }); }
      else el("p", {}, sec, "nothing live at the peak");
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
    if (p.leaked.length) { var fl = new Flame(sec, p.leaked, "flame-leaked"); redraws.push(function () { fl.draw(); }); }
    else el("p", {}, sec, "nothing leaked to draw");
  }
  try {
    var data = JSON.parse(document.getElementById("data").textContent);
    var root = document.getElementById("report");
    root.textContent = "";
    data.forEach(function (p) { process(root, p); });
    var pending = null;
    window.addEventListener("resize", function () {
      clearTimeout(pending);
      pending = setTimeout(function () { redraws.forEach(function (f) { f(); }); }, 150);
    });
    document.body.setAttribute("data-rendered", "ok");
    // Milliseconds from the start of navigation until everything was drawn (bench/memory).
    document.body.setAttribute("data-render-ms", String(Math.round(performance.now())));
  } catch (e) {
    document.body.setAttribute("data-rendered", "error: " + e);
  }
})();
