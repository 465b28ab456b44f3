//! The HTML pages in headless Chromium (`/usr/bin/chromium`, installed by
//! `scripts/system-deps`): [`dom`] renders a page and returns its DOM; [`drive`] also runs a
//! script of the test's in the page once it has drawn itself (clicks, typing, mouse moves, all
//! through the page's own event handlers) and returns what that script reported.
//!
//! The script is appended to a copy of the page (the page allows inline scripts, nothing else),
//! so the page the user gets is never changed for a test.

use std::path::{Path, PathBuf};
use std::process::Command;

use gpuleak_e2e::TempDir;
use serde_json::Value;

/// Width and height of the browser's window: wide enough to see that charts use the page's
/// width (the old page drew 900 px whatever the window).
pub const WINDOW: (u32, u32) = (1400, 1000);

/// Helpers every driver script can use: `q(sel, root)` (an array of elements), `text(sel,
/// root)`, `mouse(target, type, x, y)`, `type_in(input, text)`, and `report(value)`, which the
/// script must call once with what it found.
const PRELUDE: &str = r#"
function q(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }
function text(sel, root) { var e = (root || document).querySelector(sel); return e ? e.textContent : null; }
function mouse(target, type, x, y) {
  target.dispatchEvent(new MouseEvent(type, { clientX: x, clientY: y, bubbles: true, cancelable: true, view: window }));
}
function type_in(input, value) { input.value = value; input.dispatchEvent(new Event("input", { bubbles: true })); }
function report(value) {
  var s = document.createElement("script");
  s.type = "application/json";
  s.id = "driver-results";
  s.textContent = JSON.stringify(value).replace(/</g, "\\u003c");
  document.body.appendChild(s);
}
"#;

/// Runs Chromium on `url` and returns the DOM it ends with.
fn chromium(url: &str, profile: &Path) -> String {
    let out = Command::new("/usr/bin/chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--virtual-time-budget=5000",
        ])
        .arg(format!("--window-size={},{}", WINDOW.0, WINDOW.1))
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg("--dump-dom")
        .arg(url)
        .output()
        .expect("run /usr/bin/chromium (installed by scripts/system-deps)");
    assert!(
        out.status.success(),
        "chromium failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Renders `page` and returns the DOM after its script ran.
pub fn dom(page: &Path, profile: &Path) -> String {
    chromium(&format!("file://{}", page.display()), profile)
}

/// Renders a copy of `page` with `script` run after the page's own (see the module
/// documentation) and returns what `script` passed to `report`, with the DOM it left.
pub fn drive(page: &Path, script: &str) -> (Value, String) {
    let mut html = std::fs::read_to_string(page).expect("the page");
    html.push_str("<script>\n\"use strict\";\n");
    html.push_str(PRELUDE);
    html.push_str("try {\n");
    html.push_str(script);
    html.push_str("\n} catch (e) { report({ driver_error: String(e) + \"\\n\" + e.stack }); }\n</script>\n");
    let copy: PathBuf = page.with_extension("driven.html");
    std::fs::write(&copy, html).unwrap();
    let profile = TempDir::new();
    let dom = dom(&copy, profile.path());
    assert!(
        dom.contains("data-rendered=\"ok\""),
        "the page's script failed:\n{}",
        &dom[..dom.len().min(3000)]
    );
    let start = dom
        .find("<script type=\"application/json\" id=\"driver-results\">")
        .unwrap_or_else(|| {
            panic!(
                "the driver reported nothing:\n{}",
                &dom[dom.len().saturating_sub(3000)..]
            )
        })
        + "<script type=\"application/json\" id=\"driver-results\">".len();
    let end = start + dom[start..].find("</script>").expect("the end of the results");
    let found: Value = serde_json::from_str(&dom[start..end]).expect("the driver's results are JSON");
    assert!(
        found.get("driver_error").is_none(),
        "the driver failed: {}",
        found["driver_error"]
    );
    (found, dom)
}

/// The page's `bytes()`: how the page writes a number of bytes (`2.9 KiB`, `1000 B`).
pub fn page_bytes(n: u64) -> String {
    let units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut i = 0;
    while v >= 1024.0 && i < units.len() - 1 {
        v /= 1024.0;
        i += 1;
    }
    if i == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", units[i])
    }
}

/// A frame of a JSON report's stack as the page names it: `function file:line` (the file's
/// base name), `function`, or `module+0xADDRESS`.
pub fn frame_name(f: &Value) -> String {
    let base = |p: &str| p.rsplit('/').next().unwrap_or(p).to_string();
    match (f["function"].as_str(), f["file"].as_str(), f["line"].as_u64()) {
        (Some(func), Some(file), Some(line)) => format!("{func} {}:{line}", base(file)),
        (Some(func), _, _) => func.to_string(),
        _ => format!(
            "{}+{}",
            f["module"].as_str().unwrap_or("?"),
            f["address"].as_str().unwrap_or("?")
        ),
    }
}

/// A JSON report's site name for `stack`: the innermost of the user's frames, else the first
/// with a line (the report's rule, `docs/report.md`).
pub fn site_name(stack: &Value) -> String {
    let frames = stack.as_array().expect("a stack");
    let site = frames
        .iter()
        .find(|f| f["user"] == true)
        .or_else(|| frames.iter().find(|f| f["file"].is_string() && f["line"].is_u64()))
        .or_else(|| frames.iter().find(|f| f["function"].is_string()))
        .or(frames.first())
        .expect("a frame");
    frame_name(site)
}
