//! The HTML page of a Python program in headless Chromium: the leak table names the user's
//! Python lines, as the JSON report does, and a row opens to the Python stack with the
//! interpreter's frames folded into one line each; the flame graph's search finds a Python
//! function.

use std::process::Command;

use gpuleak_e2e::{gpuleak_bin, TempDir};
use serde_json::Value;

use super::{line_of, report, traced, SCRIPT};
use crate::browser::{drive, page_bytes, site_name};
use crate::trace::assert_ok;

/// The leak rows (site, bytes), the first row's stack once opened, and the search's result.
const DRIVER: &str = r#"
var sec = q("section.process")[0];
var rows = q("table.leaks tr.expandable", sec);
var out = {
  sites: rows.map(function (r) { return r.querySelector("td.site").textContent.replace(/^[\u25b8\u25be]/, ""); }),
  bytes: rows.map(function (r) { return r.querySelector("td.bytes").textContent; }),
};
rows[0].click();
out.stack = q("li", rows[0].nextElementSibling).map(function (li) { return [li.textContent, li.className]; });
var bars = q(".flame-bar", sec), bar = bars[bars.length - 1];
type_in(bar.querySelector(".flame-search"), "leak_with_gil_held");
out.matched = text(".flame-matched", bar);
report(out);
"#;

#[test]
fn the_leak_table_names_the_scripts_lines_and_opens_to_the_python_stack() {
    let dir = TempDir::new();
    let trace = traced(&dir, &[]);
    let doc = report(&trace);
    let page = dir.path().join("python.html");
    let out = Command::new(gpuleak_bin())
        .args(["report", "--format", "html", "-o"])
        .arg(&page)
        .arg(&trace)
        .output()
        .unwrap();
    assert_ok(&out);
    let (found, _) = drive(&page, DRIVER);

    let leaks = doc["leaks"].as_array().unwrap();
    let sites: Vec<String> = leaks.iter().map(|h| site_name(&h["stack"])).collect();
    let bytes: Vec<String> = leaks.iter().map(|h| page_bytes(h["bytes"].as_u64().unwrap())).collect();
    assert_eq!(found["sites"], serde_json::json!(sites), "{found:#}");
    assert_eq!(found["bytes"], serde_json::json!(bytes));
    // The user's Python lines, not the interpreter's or the bindings' frames.
    for (function, marker) in [
        ("leak_through_bindings", "# LEAK: bindings"),
        ("leak_with_gil_held", "# LEAK: pydll"),
        ("leak_with_gil_released", "# LEAK: cdll"),
    ] {
        let name = format!("{function} {SCRIPT}:{}", line_of(marker));
        assert!(sites.contains(&name), "{name} not in {sites:#?}");
    }

    // The largest leak's stack: its user frames in bold, the interpreter's runs folded.
    let stack: Vec<(&str, &str)> = found["stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l[0].as_str().unwrap(), l[1].as_str().unwrap()))
        .collect();
    let first_user = stack.iter().position(|(_, c)| *c == "user").expect("a user frame");
    assert!(stack[first_user].0.contains(&sites[0]), "{stack:#?}");
    assert!(
        stack
            .iter()
            .any(|(t, c)| *c == "folded" && t.contains("interpreter frame")),
        "{stack:#?}"
    );
    assert!(
        stack.len() < leaks[0]["stack"].as_array().unwrap().len(),
        "nothing folded: {stack:#?}"
    );

    // Search: the share of the PyDLL leak among the leaked bytes.
    let total = doc["process"]["summary"]["leaked_bytes"].as_u64().unwrap();
    let pydll: u64 = leaks
        .iter()
        .filter(|h| site_name(&h["stack"]).starts_with("leak_with_gil_held "))
        .map(|h| h["bytes"].as_u64().unwrap())
        .sum();
    let want = format!(
        "matched {} of {} ({:.1}%)",
        page_bytes(pydll),
        page_bytes(total),
        100.0 * pydll as f64 / total as f64
    );
    assert_eq!(found["matched"], Value::from(want));
}
