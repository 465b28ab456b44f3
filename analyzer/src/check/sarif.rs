//! The check as SARIF 2.1.0 (the static-analysis format GitHub code scanning and other CI
//! systems read): one run of the `gpuleak` driver, a rule per check id, and a result per
//! violation located at the top frame of its stack that has a file and line, with the whole
//! stack in `stacks`.
//!
//! Source files under the current directory are given relative to `SRCROOT` (the current
//! directory, as `originalUriBaseIds` says), so that code scanning can map them to the
//! repository when `gpuleak check` runs from the checkout's root.

use std::io::{self, Write};
use std::path::Path;

use serde_json::{json, Value};

use super::{process_name, Change, Outcome, Violation};
use crate::report::{Frame, Severity};

/// The SARIF version written.
pub const VERSION: &str = "2.1.0";
/// The schema URI written.
pub const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";
/// Where gpuleak lives.
const INFORMATION_URI: &str = "https://github.com/gpuleak/gpuleak";
/// The base id of files under the source root.
const SRCROOT: &str = "SRCROOT";

/// The rules gpuleak has: id, name, short description, full description.
const RULES: [(&str, &str, &str, &str); 4] = [
    (
        "leak",
        "GpuMemoryLeak",
        "GPU memory leaked",
        "Memory allocated through the CUDA driver was still allocated at exit, or when its \
         context was torn down. Without a baseline or limits every leak site fails; with a \
         baseline, only sites the baseline does not have.",
    ),
    (
        "leak-growth",
        "GpuLeakGrowth",
        "A leak site grew since the baseline",
        "A leak site leaks more bytes than in the baseline, beyond the tolerance.",
    ),
    (
        "leak-limit",
        "GpuLeakLimit",
        "A process leaked more than the limit",
        "A process's leaked bytes or leaked allocations (after suppressions) are over \
         --max-leaked-bytes or --max-leaks.",
    ),
    (
        "bad-free",
        "BadFree",
        "A free of memory that is not a live allocation",
        "A free function was called on an address that was never allocated, was already \
         freed, or belongs to another memory family.",
    ),
];

/// Writes the check as SARIF, with files under the current directory relative to it.
pub fn write(o: &Outcome, out: &mut impl Write) -> io::Result<()> {
    let root = std::env::current_dir().ok();
    let mut text = serde_json::to_string_pretty(&document(o, root.as_deref())).map_err(io::Error::other)?;
    text.push('\n');
    out.write_all(text.as_bytes())
}

/// The SARIF log, with files under `root` relative to it.
pub fn document(o: &Outcome, root: Option<&Path>) -> Value {
    let mut rules: Vec<Value> = RULES
        .iter()
        .map(|&(id, name, short, full)| rule(id, name, short, full, "error"))
        .collect();
    let mut ids: Vec<&str> = RULES.iter().map(|r| r.0).collect();
    for v in &o.violations {
        if !ids.contains(&v.check) {
            ids.push(v.check);
            rules.push(rule(v.check, v.check, v.check, v.check, "error"));
        }
    }
    let results: Vec<Value> = o
        .violations
        .iter()
        .map(|v| {
            let index = ids.iter().position(|id| *id == v.check).unwrap_or(0);
            result(o, v, index, root)
        })
        .collect();
    let notifications: Vec<Value> = o
        .report
        .processes
        .iter()
        .flat_map(|p| {
            p.notes
                .iter()
                .map(move |n| json!({"level": "note", "message": {"text": format!("{}: {n}", process_name(p))}}))
        })
        .collect();
    let mut run = json!({
        "tool": {
            "driver": {
                "name": "gpuleak",
                "version": env!("CARGO_PKG_VERSION"),
                "informationUri": INFORMATION_URI,
                "rules": rules,
            }
        },
        "invocations": [{
            "executionSuccessful": true,
            "exitCode": o.exit_code(),
            "toolExecutionNotifications": notifications,
        }],
        "results": results,
    });
    if let Some(root) = root {
        run["originalUriBaseIds"] = json!({
            SRCROOT: {"uri": format!("file://{}/", encode(&root.to_string_lossy()).trim_end_matches('/'))}
        });
    }
    json!({
        "$schema": SCHEMA,
        "version": VERSION,
        "runs": [run],
    })
}

fn rule(id: &str, name: &str, short: &str, full: &str, level: &str) -> Value {
    json!({
        "id": id,
        "name": name,
        "shortDescription": {"text": short},
        "fullDescription": {"text": full},
        "helpUri": format!("{INFORMATION_URI}/blob/main/docs/check.md"),
        "defaultConfiguration": {"level": level},
    })
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Note => "note",
    }
}

fn result(o: &Outcome, v: &Violation, rule_index: usize, root: Option<&Path>) -> Value {
    let p = &o.report.processes[v.process];
    let mut r = json!({
        "ruleId": v.check,
        "ruleIndex": rule_index,
        "level": level(v.severity),
        "message": {"text": format!("{}: {}", process_name(p), v.message)},
        "properties": {
            "trace": p.trace.display().to_string(),
            "pid": p.process.as_ref().map(|i| i.pid),
            "bytes": v.bytes,
            "count": v.count,
            "site": v.site.as_ref().map(|s| s.as_str()),
        },
    });
    let top = crate::report::user_code::site_frame(&v.stack);
    if let Some(f) = top {
        r["locations"] = json!([location(f, root)]);
    }
    if !v.stack.is_empty() {
        let frames: Vec<Value> = v.stack.iter().map(|f| stack_frame(f, root)).collect();
        let what = if v.check.starts_with("leak") {
            "allocation stack"
        } else {
            "stack"
        };
        r["stacks"] = json!([{"message": {"text": what}, "frames": frames}]);
    }
    if let Some(site) = &v.site {
        r["partialFingerprints"] = json!({"gpuleakSite/v1": site.fingerprint()});
    }
    if let Some(change) = v.change {
        r["baselineState"] = json!(match change {
            Change::New => "new",
            Change::Grew { .. } | Change::WithinTolerance { .. } | Change::Smaller { .. } => "updated",
            Change::Unchanged => "unchanged",
            Change::Gone { .. } => "absent",
        });
    }
    r
}

fn location(f: &Frame, root: Option<&Path>) -> Value {
    let mut loc = json!({});
    if let Some(file) = &f.file {
        let mut physical = json!({"artifactLocation": artifact(file, root)});
        if let Some(line) = f.line.filter(|&l| l > 0) {
            physical["region"] = json!({"startLine": line});
        }
        loc["physicalLocation"] = physical;
    }
    if let Some(function) = &f.function {
        loc["logicalLocations"] = json!([{"fullyQualifiedName": function, "kind": "function"}]);
    }
    loc
}

fn stack_frame(f: &Frame, root: Option<&Path>) -> Value {
    let mut frame = json!({
        "location": location(f, root),
        "properties": {"address": format!("{:#x}", f.address), "inlined": f.inlined},
    });
    if let Some(m) = &f.module {
        frame["module"] = json!(m);
    }
    frame
}

/// A source file as an artifact location: relative to `SRCROOT` under `root`, else a `file:`
/// URI when absolute, else the relative path as the debug info has it.
fn artifact(file: &str, root: Option<&Path>) -> Value {
    let path = Path::new(file);
    if path.is_absolute() {
        if let Some(relative) = root.and_then(|r| path.strip_prefix(r).ok()) {
            return json!({"uri": encode(&relative.to_string_lossy()), "uriBaseId": SRCROOT});
        }
        return json!({"uri": format!("file://{}", encode(file))});
    }
    json!({"uri": encode(file)})
}

/// Percent-encodes a path for a URI, keeping `/` and RFC 3986's unreserved characters.
fn encode(path: &str) -> String {
    let mut s = String::with_capacity(path.len());
    for b in path.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            s.push(char::from(b));
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_become_uris_relative_to_the_root_when_under_it() {
        let root = Path::new("/work/repo");
        assert_eq!(
            artifact("/work/repo/src/a b.c", Some(root)),
            json!({"uri": "src/a%20b.c", "uriBaseId": "SRCROOT"})
        );
        assert_eq!(
            artifact("/usr/include/x.h", Some(root)),
            json!({"uri": "file:///usr/include/x.h"})
        );
        assert_eq!(
            artifact("./csu/libc-start.c", None),
            json!({"uri": "./csu/libc-start.c"})
        );
        assert_eq!(encode("ns::f<int>#1%"), "ns%3A%3Af%3Cint%3E%231%25");
        assert_eq!(encode("ü"), "%C3%BC");
    }
}
