//! The check as SARIF 2.1.0 (the static-analysis format GitHub code scanning and other CI
//! systems read): one run of the `gpuleak` driver, a rule per check id, and a result per
//! violation with the whole stack in `stacks`.
//!
//! Every result carries what code scanning needs to show and track it:
//!
//! - exactly one location: the site's frame (`report::user_code`, the user's frame), or the
//!   user's innermost frame that has a source line when the site's has none; a frame without
//!   any source file is located at its module, line 1, and says so in the location's message;
//! - `partialFingerprints["gpuleakSite/v1"]`: a hash of the site key (no pids, addresses or
//!   paths), or for a process over a limit, of the check and the program's stable name;
//! - a `ruleId` whose rule has a `fullDescription` and `help`.
//!
//! Object keys are written in alphabetical order at every depth.
//!
//! Source files under the source root (the enclosing git checkout of the current directory,
//! else the current directory) are given relative to `SRCROOT`, which `originalUriBaseIds`
//! sets to that root, so that code scanning maps them to the repository.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use super::{process_name, Change, Outcome, Violation};
use crate::json::{render, Layout, J};
use crate::report::user_code::{short_name, site_frame};
use crate::report::{Frame, Severity};

/// The SARIF version written.
pub const VERSION: &str = "2.1.0";
/// The schema URI written.
pub const SCHEMA: &str = "https://json.schemastore.org/sarif-2.1.0.json";
/// Where gpuleak lives.
const INFORMATION_URI: &str = "https://github.com/gpuleak/gpuleak";
/// The base id of files under the source root.
const SRCROOT: &str = "SRCROOT";

/// The rules gpuleak has: id, name, short description, full description, default level.
const RULES: [(&str, &str, &str, &str, &str); 19] = [
    (
        "leak",
        "GpuMemoryLeak",
        "GPU memory leaked",
        "Memory allocated through the CUDA driver was still allocated at exit, or when its \
         context was torn down. Without a baseline or limits every leak site fails; with a \
         baseline, only sites the baseline does not have.",
        "error",
    ),
    (
        "leak-growth",
        "GpuLeakGrowth",
        "A leak site grew since the baseline",
        "A leak site leaks more bytes than in the baseline, beyond the tolerance.",
        "error",
    ),
    (
        "leak-limit",
        "GpuLeakLimit",
        "A process leaked more than the limit",
        "A process's leaked bytes or leaked allocations (after suppressions) are over \
         --max-leaked-bytes or --max-leaks. The location is the process's largest leak site.",
        "error",
    ),
    (
        "bad-free",
        "BadFree",
        "A free of memory that is not a live allocation",
        "A free function was called on an address that was never allocated, was already \
         freed, or belongs to another memory family.",
        "error",
    ),
    (
        "unordered-free",
        "UnorderedFree",
        "Memory freed on one stream while another may still use it",
        "cuMemFreeAsync of memory whose last use on another stream is not ordered before the \
         free, or a graph's free node with no path to it from a node that uses the memory.",
        "error",
    ),
    (
        "use-after-free",
        "UseAfterFree",
        "GPU work uses memory already freed",
        "A copy, memset or kernel names an address inside memory freed earlier, or a graph \
         node uses memory that a free node of the same graph freed before it.",
        "error",
    ),
    (
        "cross-stream-race",
        "CrossStreamRace",
        "Two streams touch the same bytes without ordering",
        "Two streams touch overlapping bytes of one allocation, at least one writing, with no \
         event or synchronization ordering them.",
        "error",
    ),
    (
        "graph-race",
        "GraphRace",
        "Two nodes of a graph touch the same bytes without a path between them",
        "Two nodes of one launched CUDA graph touch overlapping bytes of one allocation, at \
         least one writing, with no path between them in the graph.",
        "error",
    ),
    (
        "wait-on-unrecorded-event",
        "WaitOnUnrecordedEvent",
        "A wait on an event never recorded",
        "cuStreamWaitEvent or cuEventSynchronize on an event not recorded (a no-op) while some \
         stream had outstanding work.",
        "warning",
    ),
    (
        "stream-leak",
        "StreamLeak",
        "A stream never destroyed",
        "A stream was created and never destroyed.",
        "warning",
    ),
    (
        "event-leak",
        "EventLeak",
        "An event never destroyed",
        "An event was created and never destroyed.",
        "warning",
    ),
    (
        "semaphore-leak",
        "SemaphoreLeak",
        "An external semaphore never destroyed",
        "An external semaphore was imported and never destroyed; the driver keeps the handle \
         it took over until then.",
        "warning",
    ),
    (
        "unsynchronized-at-exit",
        "UnsynchronizedAtExit",
        "Work on a stream no host thread waited for",
        "Work was queued on a stream that no host thread waited for before the end of the \
         trace or a context teardown.",
        "warning",
    ),
    (
        "pool-leak",
        "PoolLeak",
        "A memory pool never destroyed",
        "A memory pool was created or imported and never destroyed.",
        "warning",
    ),
    (
        "growth",
        "LiveMemoryGrowth",
        "Live memory of a site kept growing",
        "The live bytes of one allocation site kept growing over the run (gpuleak report \
         --memory).",
        "warning",
    ),
    (
        "fragmentation",
        "Fragmentation",
        "An allocation failed for fragmentation",
        "An allocation failed although the device had enough free memory, split into holes \
         between live allocations; the pinning sites are named.",
        "warning",
    ),
    (
        "tensor-leak",
        "TensorLeak",
        "Tensors still allocated at exit",
        "Tensors of a framework's caching allocator (PyTorch) allocated at this line were still \
         allocated in its state at exit; memory it only cached is not counted \
         (docs/frameworks.md).",
        "error",
    ),
    (
        "tensor-growth",
        "TensorGrowth",
        "Live tensors of a line kept growing",
        "The live tensor bytes allocated at this line rose at least twice and never fell over \
         the framework states written while the program ran (docs/frameworks.md).",
        "warning",
    ),
    (
        "framework-oom",
        "FrameworkOutOfMemory",
        "A framework ran out of memory",
        "A framework's caching allocator ran out of device memory; the finding names its live \
         tensors, its cached free memory and largest free block, and the memory outside it.",
        "error",
    ),
];

/// The fingerprint key: the version says how the hash is made, so a change of it starts new
/// alerts rather than mixing two kinds.
const FINGERPRINT: &str = "gpuleakSite/v1";

/// Writes the check as SARIF, with files under the source root (the git checkout around the
/// current directory, else the current directory) relative to it.
pub fn write(o: &Outcome, out: &mut impl Write) -> io::Result<()> {
    let root = std::env::current_dir().ok().map(|cwd| source_root(&cwd));
    let mut text = String::with_capacity(16384);
    render(&document(o, root.as_deref()), Layout::Expanded, &mut text);
    text.push('\n');
    out.write_all(text.as_bytes())
}

/// The closest directory from `cwd` up that holds `.git` (a checkout or a worktree), else
/// `cwd`: code scanning wants paths relative to the repository's root.
pub fn source_root(cwd: &Path) -> PathBuf {
    cwd.ancestors()
        .find(|d| d.join(".git").exists())
        .unwrap_or(cwd)
        .to_path_buf()
}

/// The SARIF log, with files under `root` relative to it.
pub(crate) fn document(o: &Outcome, root: Option<&Path>) -> J {
    let mut rules: Vec<J> = RULES
        .iter()
        .map(|&(id, name, short, full, level)| rule(id, name, short, full, level))
        .collect();
    let mut ids: Vec<&str> = RULES.iter().map(|r| r.0).collect();
    for v in &o.violations {
        if !ids.contains(&v.check) {
            ids.push(v.check);
            let full = format!("gpuleak's {} check (docs/check.md).", v.check);
            rules.push(rule(v.check, v.check, v.check, &full, "error"));
        }
    }
    let roots = Roots::new(root);
    let names = super::junit::process_names(&o.report.processes);
    let results: Vec<J> = o
        .violations
        .iter()
        .map(|v| {
            let index = ids.iter().position(|id| *id == v.check).unwrap_or(0);
            result(o, v, index, &roots, &names[v.process])
        })
        .collect();
    let notifications: Vec<J> = o
        .report
        .processes
        .iter()
        .flat_map(|p| {
            p.notes.iter().map(move |n| {
                J::O(vec![
                    ("level", text("note")),
                    ("message", message(format!("{}: {n}", process_name(p)))),
                ])
            })
        })
        .collect();
    let mut run = vec![
        (
            "tool",
            J::O(vec![(
                "driver",
                J::O(vec![
                    ("name", text("gpuleak")),
                    ("version", text(env!("CARGO_PKG_VERSION"))),
                    ("informationUri", text(INFORMATION_URI)),
                    ("rules", J::A(rules)),
                ]),
            )]),
        ),
        (
            "invocations",
            J::A(vec![J::O(vec![
                ("executionSuccessful", J::Bool(true)),
                ("exitCode", J::U(u64::from(o.exit_code()))),
                ("toolExecutionNotifications", J::A(notifications)),
            ])]),
        ),
        ("results", J::A(results)),
    ];
    if let Some(root) = root {
        let uri = format!("file://{}/", encode(&root.to_string_lossy()).trim_end_matches('/'));
        run.push((
            "originalUriBaseIds",
            J::O(vec![(SRCROOT, J::O(vec![("uri", J::S(uri))]))]),
        ));
    }
    let mut log = J::O(vec![
        ("$schema", text(SCHEMA)),
        ("version", text(VERSION)),
        ("runs", J::A(vec![J::O(run)])),
    ]);
    log.sort_keys();
    log
}

fn text(s: impl Into<String>) -> J {
    J::S(s.into())
}

/// A SARIF message: `{"text": ...}`.
fn message(s: impl Into<String>) -> J {
    J::O(vec![("text", text(s))])
}

fn rule(id: &str, name: &str, short: &str, full: &str, level: &str) -> J {
    let help_uri = format!("{INFORMATION_URI}/blob/main/docs/check.md");
    J::O(vec![
        ("id", text(id)),
        ("name", text(name)),
        ("shortDescription", message(short)),
        ("fullDescription", message(full)),
        (
            "help",
            J::O(vec![
                ("text", text(format!("{full} See {help_uri}."))),
                ("markdown", text(format!("{full} See [docs/check.md]({help_uri})."))),
            ]),
        ),
        ("helpUri", text(help_uri)),
        ("defaultConfiguration", J::O(vec![("level", text(level))])),
    ])
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Note => "note",
    }
}

/// The source root as given and as the file system resolves it (a checkout reached through
/// a symbolic link is named either way in debug info).
struct Roots {
    given: Option<PathBuf>,
    resolved: Option<PathBuf>,
}

impl Roots {
    fn new(root: Option<&Path>) -> Roots {
        Roots {
            given: root.map(Path::to_path_buf),
            resolved: root.and_then(|r| r.canonicalize().ok()),
        }
    }

    /// `path` relative to the root, when under it.
    fn relative<'a>(&self, path: &'a Path) -> Option<&'a Path> {
        [&self.given, &self.resolved]
            .into_iter()
            .flatten()
            .find_map(|r| path.strip_prefix(r).ok())
    }
}

/// A stable fingerprint of a violation: its site key's hash; for a violation without a site
/// (a process over a limit), the hash of its check and the program's stable name.
fn fingerprint(v: &Violation, program: &str) -> String {
    match &v.site {
        Some(site) => site.fingerprint(),
        None => crate::site::fingerprint_of(&format!("{}|{program}", v.check)),
    }
}

fn result(o: &Outcome, v: &Violation, rule_index: usize, roots: &Roots, program: &str) -> J {
    let p = &o.report.processes[v.process];
    let mut r = vec![
        ("ruleId", text(v.check)),
        ("ruleIndex", J::U(rule_index as u64)),
        ("level", text(level(v.severity))),
        ("message", message(format!("{}: {}", process_name(p), v.message))),
        (
            "locations",
            J::A(vec![result_location(
                v,
                p.process.as_ref().map(|i| i.exe.as_str()),
                roots,
            )]),
        ),
        (
            "partialFingerprints",
            J::O(vec![(FINGERPRINT, J::S(fingerprint(v, program)))]),
        ),
        (
            "properties",
            J::O(vec![
                ("trace", J::S(p.trace.display().to_string())),
                ("pid", p.process.as_ref().map_or(J::Null, |i| J::U(u64::from(i.pid)))),
                ("bytes", J::U(v.bytes)),
                ("count", J::U(v.count)),
                ("site", v.site.as_ref().map_or(J::Null, |s| text(s.as_str()))),
            ]),
        ),
    ];
    if !v.stack.is_empty() {
        let frames: Vec<J> = v.stack.iter().map(|f| stack_frame(f, roots)).collect();
        let what = if v.check.starts_with("leak") {
            "allocation stack"
        } else {
            "stack"
        };
        r.push((
            "stacks",
            J::A(vec![J::O(vec![("message", message(what)), ("frames", J::A(frames))])]),
        ));
    }
    if let Some(change) = v.change {
        let state = match change {
            Change::New => "new",
            Change::Grew { .. } | Change::WithinTolerance { .. } | Change::Smaller { .. } => "updated",
            Change::Unchanged => "unchanged",
            Change::Gone { .. } => "absent",
        };
        r.push(("baselineState", text(state)));
    }
    J::O(r)
}

/// A logical location naming `function`.
fn function_location(function: &str) -> J {
    J::A(vec![J::O(vec![
        ("fullyQualifiedName", text(function)),
        ("kind", text("function")),
    ])])
}

/// The one location of a result: the site's frame when it has a source line, else the
/// user's innermost frame with one, else the site's frame's file or module at line 1 (with a
/// message saying the line is unknown), else the program at line 1.
fn result_location(v: &Violation, exe: Option<&str>, roots: &Roots) -> J {
    let has_line = |f: &&Frame| f.file.is_some() && f.line.is_some_and(|l| l > 0);
    let site = site_frame(&v.stack);
    let lined = site
        .filter(has_line)
        .or_else(|| v.stack.iter().filter(|f| f.user).find(has_line));
    if let Some(f) = lined {
        return location(f, roots);
    }
    let (artifact_path, what) = match site {
        Some(f) => match (&f.file, &f.module) {
            (Some(file), _) => (file.clone(), short_name(f)),
            (None, Some(module)) => (module.clone(), short_name(f)),
            (None, None) => (exe.unwrap_or("unknown").to_string(), short_name(f)),
        },
        None => (exe.unwrap_or("unknown").to_string(), "the program".to_string()),
    };
    let mut loc = vec![
        (
            "physicalLocation",
            J::O(vec![
                ("artifactLocation", artifact(&artifact_path, roots)),
                ("region", J::O(vec![("startLine", J::U(1))])),
            ]),
        ),
        ("message", message(format!("no source line known: {what}"))),
    ];
    if let Some(function) = site.and_then(|f| f.function.as_deref()) {
        loc.push(("logicalLocations", function_location(function)));
    }
    J::O(loc)
}

fn location(f: &Frame, roots: &Roots) -> J {
    let mut loc = Vec::new();
    if let Some(file) = &f.file {
        let mut physical = vec![("artifactLocation", artifact(file, roots))];
        if let Some(line) = f.line.filter(|&l| l > 0) {
            physical.push(("region", J::O(vec![("startLine", J::U(u64::from(line)))])));
        }
        loc.push(("physicalLocation", J::O(physical)));
    }
    if let Some(function) = &f.function {
        loc.push(("logicalLocations", function_location(function)));
    }
    J::O(loc)
}

fn stack_frame(f: &Frame, roots: &Roots) -> J {
    let mut frame = vec![
        ("location", location(f, roots)),
        (
            "properties",
            J::O(vec![
                ("address", J::S(format!("{:#x}", f.address))),
                ("inlined", J::Bool(f.inlined)),
            ]),
        ),
    ];
    if let Some(m) = &f.module {
        frame.push(("module", text(m.as_str())));
    }
    J::O(frame)
}

/// A source file as an artifact location: relative to `SRCROOT` under `root`, else a `file:`
/// URI when absolute, else the relative path as the debug info has it.
fn artifact(file: &str, roots: &Roots) -> J {
    let path = Path::new(file);
    if path.is_absolute() {
        if let Some(relative) = roots.relative(path) {
            return J::O(vec![
                ("uri", J::S(encode(&relative.to_string_lossy()))),
                ("uriBaseId", text(SRCROOT)),
            ]);
        }
        return J::O(vec![("uri", J::S(format!("file://{}", encode(file))))]);
    }
    J::O(vec![("uri", J::S(encode(file)))])
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
        let root = Roots::new(Some(Path::new("/work/repo")));
        assert_eq!(
            artifact("/work/repo/src/a b.c", &root),
            J::O(vec![("uri", text("src/a%20b.c")), ("uriBaseId", text("SRCROOT"))])
        );
        assert_eq!(
            artifact("/usr/include/x.h", &root),
            J::O(vec![("uri", text("file:///usr/include/x.h"))])
        );
        assert_eq!(
            artifact("./csu/libc-start.c", &Roots::new(None)),
            J::O(vec![("uri", text("./csu/libc-start.c"))])
        );
        assert_eq!(encode("ns::f<int>#1%"), "ns%3A%3Af%3Cint%3E%231%25");
        assert_eq!(encode("ü"), "%C3%BC");
    }
}
