//! Suppressions in the manner of LeakSanitizer: a file of `TYPE:PATTERN` lines.
//!
//! ```text
//! # third-party code we cannot fix
//! leak:libfoo.so
//! leak:^cache_init$
//! bad-free:legacy_*_release
//! ```
//!
//! `leak:` lines silence leak groups, `bad-free:` lines silence bad-free findings, and a
//! stream-ordering check's name (`unordered-free:`, `cross-stream-race:`, `stream-leak:`...)
//! silences findings of that check. A pattern is matched against the module of every frame
//! of a stack, and against the function and the source file of the user's frames
//! (`report::user_code`; of every frame when no frame is the user's): so `leak:main` silences
//! the program's own `main`, never the interpreter's. A file is matched by its base name
//! unless the pattern has a `/`, so where the sources are checked out changes nothing. The
//! stacks are: for a leak group, its allocation stack; for
//! a bad free, the free's own stack (not its allocation's); for a stream-ordering finding,
//! every stack that explains it (the call's, the allocation's, the other access's or last
//! use's, the free's, the stream's or event's creation), because without
//! `GPULEAK_SYNC_STACKS` the call itself has no stack and the code at fault may be on either
//! side; for a `fragmentation` finding, the failed call's stack and the pinning sites'
//! (`growth:` matches the growing site's stack). `*` matches any run of characters, and the pattern may match anywhere in the name
//! unless it starts with `^` (then it must match at the start) or ends with `$` (at the end).
//! Blank lines and lines starting with `#` are skipped; surrounding spaces are trimmed. The
//! first pattern that matches a group is the one credited with it.

use std::fmt;
use std::path::Path;

use crate::model::file_name;
use crate::report::user_code::is_python;
use crate::report::{Finding, Frame};
use crate::streams::Check;

/// The types a suppression may have: `leak` and each finding's check.
pub const TYPES: [&str; 17] = [
    "leak",
    "bad-free",
    "growth",
    "fragmentation",
    "unordered-free",
    "use-after-free",
    "cross-stream-race",
    "graph-race",
    "wait-on-unrecorded-event",
    "stream-leak",
    "event-leak",
    "semaphore-leak",
    "unsynchronized-at-exit",
    "pool-leak",
    "tensor-leak",
    "tensor-growth",
    "framework-oom",
];

/// Why a suppressions file could not be used.
#[derive(Debug)]
pub enum SuppressionError {
    /// The file could not be read.
    Io(String, std::io::Error),
    /// A line is not a suppression.
    Syntax {
        /// The file.
        source: String,
        /// Line number, from 1.
        line: usize,
        /// What is wrong with it.
        why: String,
    },
}

impl fmt::Display for SuppressionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SuppressionError::Io(source, e) => write!(f, "{source}: cannot read the suppressions: {e}"),
            SuppressionError::Syntax { source, line, why } => write!(f, "{source}:{line}: {why}"),
        }
    }
}

impl std::error::Error for SuppressionError {}

/// One `TYPE:PATTERN` line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Suppression {
    /// `leak`, or the check of the findings it silences (`bad-free`).
    pub kind: &'static str,
    /// The pattern as written, anchors included.
    pub pattern: String,
    /// The file it came from.
    pub source: String,
    /// Its line number there, from 1.
    pub line: usize,
    glob: Glob,
}

impl Suppression {
    /// `TYPE:PATTERN`, as written in the file.
    pub fn text(&self) -> String {
        format!("{}:{}", self.kind, self.pattern)
    }

    /// Whether the pattern matches the stack: the module of any frame, or the function or
    /// file of one of the user's frames (of any frame when none is the user's, as the site
    /// key has it). A file is matched by its base name unless the pattern has a `/`.
    pub fn matches_stack(&self, stack: &[Frame]) -> bool {
        let any_users = stack.iter().any(|f| f.user);
        stack.iter().any(|f| {
            // Python frames carry the pseudo-module `python`, which is no library.
            let module = f.module.as_deref().filter(|_| !is_python(f));
            if module.is_some_and(|m| self.glob.matches(m)) {
                return true;
            }
            if any_users && !f.user {
                return false;
            }
            f.function.as_deref().is_some_and(|n| self.glob.matches(n))
                || f.file.as_deref().is_some_and(|p| self.matches_file(p))
        })
    }

    /// A file by its base name, or by its whole path when the pattern has a `/`: where the
    /// sources were checked out must not decide what a pattern without one silences.
    fn matches_file(&self, path: &str) -> bool {
        if self.pattern.contains('/') {
            self.glob.matches(path)
        } else {
            self.glob.matches(file_name(path))
        }
    }
}

/// Every suppression given, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Suppressions {
    /// The suppressions, files in command-line order, lines in file order.
    pub list: Vec<Suppression>,
}

impl Suppressions {
    /// Reads and adds a suppressions file.
    pub fn read(&mut self, path: &Path) -> Result<(), SuppressionError> {
        let source = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| SuppressionError::Io(source.clone(), e))?;
        self.parse(&text, &source)
    }

    /// Adds the suppressions in `text`, read from `source` (named in errors and output).
    pub fn parse(&mut self, text: &str, source: &str) -> Result<(), SuppressionError> {
        for (i, raw) in text.lines().enumerate() {
            let line = raw.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let syntax = |why: String| SuppressionError::Syntax {
                source: source.to_string(),
                line: i + 1,
                why,
            };
            let Some((kind, pattern)) = line.split_once(':') else {
                return Err(syntax(format!(
                    "expected TYPE:PATTERN (leak:... or bad-free:...), found {line:?}"
                )));
            };
            let kind = kind.trim();
            let Some(&kind) = TYPES.iter().find(|t| **t == kind) else {
                return Err(syntax(format!(
                    "unknown suppression type {kind:?} (known: {})",
                    TYPES.join(", ")
                )));
            };
            let pattern = pattern.trim();
            let glob = Glob::new(pattern);
            if glob.is_empty() {
                return Err(syntax(format!("empty pattern in {line:?}")));
            }
            self.list.push(Suppression {
                kind,
                pattern: pattern.to_string(),
                source: source.to_string(),
                line: i + 1,
                glob,
            });
        }
        Ok(())
    }

    /// The index of the first suppression of `kind` (`leak`, or a finding's check) matching
    /// `stack`.
    pub fn find(&self, kind: &str, stack: &[Frame]) -> Option<usize> {
        self.list.iter().position(|s| s.kind == kind && s.matches_stack(stack))
    }

    /// The index of the first suppression of a finding's check matching it: a stream-ordering
    /// finding by any of the stacks that explain it, a fragmentation failure by its own stack
    /// or a pinning site's, any other finding by its own stack.
    pub fn find_finding(&self, f: &Finding) -> Option<usize> {
        if !is_stream_check(f.check) && f.check != "fragmentation" {
            return self.find(f.check, &f.stack);
        }
        let stacks = || {
            std::iter::once(f.stack.as_slice())
                .chain(f.allocation_stack.as_deref())
                .chain(f.first_free_stack.as_deref())
                .chain(f.related.iter().map(|r| r.stack.as_slice()))
        };
        self.list
            .iter()
            .position(|s| s.kind == f.check && stacks().any(|stack| s.matches_stack(stack)))
    }
}

/// Whether `check` is one of the stream-ordering checks.
fn is_stream_check(check: &str) -> bool {
    Check::ALL.iter().any(|c| c.name() == check)
}

/// A pattern with `*` wildcards, optionally anchored.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Glob {
    /// The literal pieces between the `*`s.
    pieces: Vec<String>,
    /// Whether the text must start with the first piece.
    start: bool,
    /// Whether the text must end with the last piece.
    end: bool,
}

impl Glob {
    fn new(pattern: &str) -> Glob {
        let (start, rest) = match pattern.strip_prefix('^') {
            Some(rest) => (true, rest),
            None => (false, pattern),
        };
        let (end, rest) = match rest.strip_suffix('$') {
            Some(rest) => (true, rest),
            None => (false, rest),
        };
        Glob {
            pieces: rest.split('*').map(str::to_string).collect(),
            start,
            end,
        }
    }

    /// A pattern of nothing but anchors (`*` alone matches everything and is not empty).
    fn is_empty(&self) -> bool {
        self.pieces.len() == 1 && self.pieces[0].is_empty()
    }

    fn matches(&self, text: &str) -> bool {
        let n = self.pieces.len();
        let mut rest = text;
        for (i, piece) in self.pieces.iter().enumerate() {
            let first = i == 0;
            let last = i + 1 == n;
            if first && self.start {
                match rest.strip_prefix(piece.as_str()) {
                    Some(r) => rest = r,
                    None => return false,
                }
                if last && self.end {
                    return rest.is_empty();
                }
            } else if last && self.end {
                // The last piece must end the text; pieces before it were matched as early as
                // possible, which leaves it the most room.
                return rest.ends_with(piece.as_str());
            } else {
                match rest.find(piece.as_str()) {
                    Some(at) => rest = &rest[at + piece.len()..],
                    None => return false,
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::site::tests::frame;

    fn parsed(text: &str) -> Suppressions {
        let mut s = Suppressions::default();
        s.parse(text, "supp.txt").unwrap();
        s
    }

    fn syntax_error(text: &str) -> String {
        let mut s = Suppressions::default();
        s.parse(text, "supp.txt").unwrap_err().to_string()
    }

    #[test]
    fn lines_comments_and_blanks() {
        let s = parsed("# a comment\n\n  leak:make_scratch  \nbad-free: legacy_release\n\t# another\nleak:^x$\n");
        let got: Vec<(&str, &str, usize)> = s.list.iter().map(|s| (s.kind, s.pattern.as_str(), s.line)).collect();
        assert_eq!(
            got,
            [
                ("leak", "make_scratch", 3),
                ("bad-free", "legacy_release", 4),
                ("leak", "^x$", 6)
            ]
        );
        assert_eq!(s.list[0].text(), "leak:make_scratch");
        assert_eq!(s.list[0].source, "supp.txt");
        assert!(parsed("").list.is_empty());
    }

    #[test]
    fn every_finding_check_is_a_type() {
        for c in Check::ALL {
            assert!(TYPES.contains(&c.name()), "{}", c.name());
        }
        let s = parsed("stream-leak:make_stream\nunsynchronized-at-exit:^worker$\ncross-stream-race:libfoo.so\n");
        let kinds: Vec<&str> = s.list.iter().map(|s| s.kind).collect();
        assert_eq!(kinds, ["stream-leak", "unsynchronized-at-exit", "cross-stream-race"]);
    }

    #[test]
    fn bad_lines_are_errors_with_their_line_number() {
        assert_eq!(
            syntax_error("leak:ok\n\nrace:foo\n"),
            "supp.txt:3: unknown suppression type \"race\" (known: leak, bad-free, growth, fragmentation, \
             unordered-free, use-after-free, cross-stream-race, graph-race, wait-on-unrecorded-event, stream-leak, \
             event-leak, semaphore-leak, unsynchronized-at-exit, pool-leak, tensor-leak, tensor-growth, framework-oom)"
        );
        assert!(syntax_error("leak:a\njust_a_name\n").starts_with("supp.txt:2: expected TYPE:PATTERN"));
        assert!(syntax_error("leak:\n").starts_with("supp.txt:1: empty pattern"));
        assert!(syntax_error("leak:^$\n").starts_with("supp.txt:1: empty pattern"));
        // LSan's types for heap races or signed overflow are not gpuleak's.
        assert!(syntax_error("called_from_lib:libfoo.so").contains("unknown suppression type"));
    }

    #[test]
    fn patterns_match_anywhere_unless_anchored() {
        let m = |pattern: &str, text: &str| Glob::new(pattern).matches(text);
        assert!(m("scratch", "make_scratch"));
        assert!(m("make", "make_scratch"));
        assert!(!m("scratchy", "make_scratch"));
        assert!(m("^make", "make_scratch"));
        assert!(!m("^scratch", "make_scratch"));
        assert!(m("scratch$", "make_scratch"));
        assert!(!m("make$", "make_scratch"));
        assert!(m("^make_scratch$", "make_scratch"));
        assert!(!m("^make_scratch$", "make_scratch2"));
        assert!(m("make*ch", "make_scratch"));
        assert!(m("^m*h$", "make_scratch"));
        assert!(!m("^m*k$", "make_scratch"));
        assert!(m("*", ""));
        assert!(m("^*$", "anything"));
        assert!(m("a*a$", "aXa"));
        assert!(m("a$", "aXa"), "LSan's first-occurrence search gets this one wrong");
        assert!(m("ns::Cache<*>::grow", "ns::Cache<int>::grow"));
        assert!(!m("^a*b*c$", "acb"));
        assert!(m("^a*b*c$", "abbc"));
    }

    #[test]
    fn a_leak_pattern_matches_function_file_or_module_of_any_frame() {
        let stack = [
            frame("make_scratch", "/src/app/scratch.c", 21, "libscratch.so"),
            frame("main", "/src/app/main.c", 49, "app"),
        ];
        let s = parsed("leak:nothing_here\nleak:^main$\nleak:scratch.c\nbad-free:make_scratch\n");
        // `^main$` is the first match, on frame 1's function.
        assert_eq!(s.find("leak", &stack), Some(1));
        let by = |p: &str| parsed(&format!("leak:{p}")).find("leak", &stack).is_some();
        assert!(by("make_scratch"), "function");
        assert!(by("/src/app/main.c"), "file");
        assert!(by("libscratch.so"), "module");
        assert!(by("^app$"), "module of frame 1");
        assert!(by("^scratch.c$"), "a file by its base name");
        assert!(
            !by("^src"),
            "anchored against no name (a file without a slash: its base name)"
        );
        assert!(!by("libother.so"));
        // A leak suppression silences no finding, and the other way round.
        assert_eq!(s.find("bad-free", &stack), Some(3));
        assert_eq!(parsed("leak:main").find("bad-free", &stack), None);
        assert_eq!(s.find("leak", &[]), None);
    }

    #[test]
    fn functions_and_files_match_only_the_users_frames_and_modules_any_frame() {
        let user = |f: Frame| Frame { user: true, ..f };
        // A script's leak: CPython's `main` and `Py_BytesMain` below the script's frames.
        let mut script = frame("leak_fn", "/work/main/tests/client.py", 47, "python");
        script = user(script);
        let stack = [
            frame("cuMemAlloc_v2", "", 0, "libcuda.so.1"),
            frame(
                "_PyObject_VectorcallTstate",
                "Include/internal/pycore_call.h",
                92,
                "libpython3.11.so.1.0",
            ),
            script,
            frame("Py_BytesMain", "Modules/main.c", 734, "python3.11"),
            frame("main", "Programs/python.c", 15, "python3.11"),
        ];
        let by = |p: &str| parsed(&format!("leak:{p}")).find("leak", &stack).is_some();
        assert!(by("leak_fn"), "the user's function");
        assert!(by("client.py"), "the user's file, by base name");
        assert!(by("*/tests/client.py"), "the user's file, by path");
        assert!(
            !by("main"),
            "the interpreter's main and the checkout's path are not the user's"
        );
        assert!(!by("pycore_call.h"), "the interpreter's file");
        assert!(!by("_PyObject_Vectorcall"), "the interpreter's function");
        assert!(by("libpython3.11"), "modules match any frame");
        assert!(by("libcuda.so"), "modules match any frame");
        assert!(!by("^python$"), "Python frames' pseudo-module is no module");

        // A C program's own `main` is the user's.
        let c = [
            user(frame("make_scratch", "/work/main/src/app.c", 21, "app")),
            user(frame("main", "/work/main/src/app.c", 49, "app")),
        ];
        let by = |p: &str| parsed(&format!("leak:{p}")).find("leak", &c).is_some();
        assert!(by("^main$"));
        assert!(!by("work"), "a directory of the checkout");
        assert!(by("/work/main/"), "a pattern with a slash matches the whole path");
    }
}
