//! Site keys: what makes a leak (or a finding) in one run the same as one in another run.
//!
//! A key is built from the user's frames of the symbolized stack (`report::user_code`: the
//! program's own Python files and native code, not the interpreter, the standard library,
//! installed packages, CUDA's or a framework's libraries), innermost first, one piece per
//! frame; a stack without any frame of the user's is keyed by all its frames. So upgrading
//! cuda-bindings, CPython or a framework keeps every key: their frames and offsets are not in
//! it. Only the user's frames from the site's frame outward count, so two callers of one
//! helper stay two sites. Each piece is:
//!
//! | the frame has | its piece |
//! |---|---|
//! | function, file and line | `function@file:line` (the file's base name) |
//! | function and file, no line | `function@file` |
//! | function only (a symbol table) | `function@module` (the base name without its version) |
//! | no function, a module | `module+0xOFFSET` (the offset from the module's load bias) |
//! | nothing | `?` |
//!
//! joined with `|`. Nothing in it depends on where things were loaded (ASLR), on process or
//! thread ids, or on where the sources were checked out (only the base name of a file is
//! kept), so a rebuild of unchanged sources keeps every key of symbolized frames. Trailing
//! frames that only start the process or a thread (`_start`, `__libc_start_main`,
//! `start_thread`, `clone3`, and any frame in the C library or the dynamic loader) are left out:
//! they say nothing about the site and change with the C library.

use std::fmt;
use std::fmt::Write as _;

use crate::symbolize::Frame;

/// The key of a leak site or a finding's site (see the module's documentation).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SiteKey(String);

/// The key of a stack that has no frames.
const NO_STACK: &str = "(no stack)";

impl SiteKey {
    /// The key of `stack`, innermost frame first.
    pub fn of(stack: &[Frame]) -> SiteKey {
        let kept = stack.len() - stack.iter().rev().take_while(|f| is_entry(f)).count();
        let frames = if kept == 0 { stack } else { &stack[..kept] };
        if frames.is_empty() {
            return SiteKey(NO_STACK.to_string());
        }
        let users: Vec<&Frame> = frames.iter().filter(|f| f.user).collect();
        let keyed: Vec<&Frame> = if users.is_empty() {
            frames.iter().collect()
        } else {
            users
        };
        let mut key = String::new();
        for (i, f) in keyed.into_iter().enumerate() {
            if i > 0 {
                key.push('|');
            }
            piece(f, &mut key);
        }
        SiteKey(key)
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// A short stable hash of the key (64-bit FNV-1a, 16 hex digits), for SARIF fingerprints.
    pub fn fingerprint(&self) -> String {
        fingerprint_of(&self.0)
    }
}

impl fmt::Display for SiteKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A short stable hash of `text` (64-bit FNV-1a, 16 hex digits).
pub fn fingerprint_of(text: &str) -> String {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

/// One frame's piece of a key (`function@file:line`, ...), as the table above gives it.
pub fn frame_piece(f: &Frame) -> String {
    let mut s = String::new();
    piece(f, &mut s);
    s
}

fn piece(f: &Frame, key: &mut String) {
    let file = f.file.as_deref().map(base_name);
    match (f.function.as_deref(), file, f.line) {
        (Some(function), Some(file), Some(line)) => {
            let _ = write!(key, "{function}@{file}:{line}");
        }
        (Some(function), Some(file), None) => {
            let _ = write!(key, "{function}@{file}");
        }
        (Some(function), None, _) => {
            let _ = write!(
                key,
                "{function}@{}",
                f.module.as_deref().map_or_else(|| "?".into(), unversioned)
            );
        }
        (None, Some(file), Some(line)) => {
            let _ = write!(key, "?@{file}:{line}");
        }
        (None, _, _) => match f.module.as_deref() {
            Some(module) => {
                let _ = write!(key, "{}+{:#x}", unversioned(module), f.address);
            }
            // An address in no module (JIT code) changes with every run.
            None => key.push('?'),
        },
    }
}

/// A module's name without the version after `.so` (`libfoo.so.1.2` is `libfoo.so`) or the
/// interpreter's tag of an extension module (`ext.cpython-311-x86_64-linux-gnu.so` is
/// `ext.so`).
fn unversioned(module: &str) -> String {
    let name = match module.find(".so.") {
        Some(at) => &module[..at + 3],
        None => module,
    };
    match name.find(".cpython-").or_else(|| name.find(".abi3.")) {
        Some(at) if name.ends_with(".so") => format!("{}.so", &name[..at]),
        _ => name.to_string(),
    }
}

/// The last component of a path.
fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Whether a frame only starts the process or a thread.
fn is_entry(f: &Frame) -> bool {
    let system_module = f.module.as_deref().is_some_and(|m| {
        ["libc.so", "libc-", "ld-linux", "ld64.so", "ld-musl", "libpthread"]
            .iter()
            .any(|p| m.starts_with(p))
    });
    let entry_function = matches!(
        f.function.as_deref(),
        Some(
            "_start"
                | "__libc_start_main"
                | "__libc_start_main_impl"
                | "__libc_start_call_main"
                | "start_thread"
                | "clone"
                | "clone3"
                | "__clone"
                | "__clone3"
                | "__GI___clone"
                | "__GI___clone3"
        )
    );
    system_module || entry_function
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A symbolized frame.
    pub(crate) fn frame(function: &str, file: &str, line: u32, module: &str) -> Frame {
        Frame {
            function: Some(function.to_string()),
            file: Some(file.to_string()),
            line: Some(line),
            module: Some(module.to_string()),
            address: 0x1234,
            inlined: false,
            user: false,
        }
    }

    /// The frames under `main` that every stack of a C program ends with.
    pub(crate) fn entry() -> Vec<Frame> {
        vec![
            frame(
                "__libc_start_call_main",
                "./csu/../sysdeps/nptl/libc_start_call_main.h",
                58,
                "libc.so.6",
            ),
            frame("__libc_start_main_impl", "./csu/../csu/libc-start.c", 360, "libc.so.6"),
            Frame {
                function: Some("_start".into()),
                file: None,
                line: None,
                module: Some("app".into()),
                address: 0x1101,
                inlined: false,
                user: false,
            },
        ]
    }

    #[test]
    fn a_key_names_function_file_and_line_without_paths_addresses_or_entry_frames() {
        let mut stack = vec![
            frame("make_scratch", "/home/me/src/app.c", 21, "app"),
            frame("main", "/home/me/src/app.c", 49, "app"),
        ];
        stack.extend(entry());
        let key = SiteKey::of(&stack);
        assert_eq!(key.as_str(), "make_scratch@app.c:21|main@app.c:49");

        // Another checkout, another load address, another C library: the same key.
        let mut moved = stack.clone();
        for f in &mut moved {
            f.address += 0x7000;
            if let Some(file) = &mut f.file {
                *file = file.replace("/home/me/src", "/builds/ci/src");
            }
        }
        moved.truncate(3);
        moved.push(frame("__libc_start_main", "libc-start.c", 392, "libc.so.6"));
        assert_eq!(SiteKey::of(&moved), key);

        // Another line is another site.
        stack[1].line = Some(50);
        assert_ne!(SiteKey::of(&stack), key);
    }

    #[test]
    fn frames_without_symbols_fall_back_to_module_and_offset() {
        let stack = vec![
            Frame {
                function: None,
                file: None,
                line: None,
                module: Some("libfoo.so".into()),
                address: 0x4f2,
                inlined: false,
                user: false,
            },
            Frame {
                function: Some("foo_init".into()),
                file: None,
                line: None,
                module: Some("libfoo.so".into()),
                address: 0x900,
                inlined: false,
                user: false,
            },
            Frame {
                function: None,
                file: None,
                line: None,
                module: None,
                address: 0x7f00_dead_beef,
                inlined: false,
                user: false,
            },
        ];
        assert_eq!(SiteKey::of(&stack).as_str(), "libfoo.so+0x4f2|foo_init@libfoo.so|?");
        assert_eq!(SiteKey::of(&[]).as_str(), NO_STACK);
        // A stack made only of entry frames keeps them.
        assert_eq!(
            SiteKey::of(&entry()).as_str(),
            "__libc_start_call_main@libc_start_call_main.h:58|__libc_start_main_impl@libc-start.c:360|_start@app"
        );
    }

    /// A cuda-bindings call from a Python script, as `Stacks` marks it: interpreter and
    /// bindings frames with the given cuda-bindings offset and CPython line.
    pub(crate) fn python_stack(bindings_offset: u64, cpython_line: u32) -> Vec<Frame> {
        let native = |function: Option<&str>, file: Option<&str>, line, module: &str, address| Frame {
            function: function.map(str::to_string),
            file: file.map(str::to_string),
            line,
            module: Some(module.to_string()),
            address,
            inlined: false,
            user: false,
        };
        let python = |function: &str, line: u32, user: bool| Frame {
            function: Some(function.to_string()),
            file: Some(
                if user {
                    "/home/me/train/leaky.py"
                } else {
                    "/usr/lib/python3.11/threading.py"
                }
                .into(),
            ),
            line: Some(line),
            module: Some("python".into()),
            address: 0x20,
            inlined: false,
            user,
        };
        let mut stack = vec![
            native(
                None,
                None,
                None,
                "cydriver.cpython-311-x86_64-linux-gnu.so",
                bindings_offset,
            ),
            native(
                Some("_PyObject_VectorcallTstate"),
                Some("Include/internal/pycore_call.h"),
                Some(cpython_line),
                "libpython3.11.so.1.0",
                0x1234,
            ),
            python("scratch", 16, true),
            python("train_step", 30, true),
            native(
                Some("_PyEval_EvalFrameDefault"),
                Some("ceval.c"),
                Some(cpython_line * 3),
                "libpython3.11.so.1.0",
                0x99,
            ),
            python("Thread.run", 982, false),
            native(
                Some("Py_BytesMain"),
                Some("main.c"),
                Some(734),
                "libpython3.11.so.1.0",
                0x77,
            ),
        ];
        stack.extend(entry());
        stack
    }

    #[test]
    fn a_key_holds_only_the_users_frames_so_upgrading_bindings_or_the_interpreter_keeps_it() {
        let key = SiteKey::of(&python_stack(0xb84a, 92));
        assert_eq!(key.as_str(), "scratch@leaky.py:16|train_step@leaky.py:30");
        assert_eq!(
            SiteKey::of(&python_stack(0xc0de, 97)),
            key,
            "another cuda-bindings and CPython"
        );
        let mut moved = python_stack(0xb84a, 92);
        moved[3].line = Some(31);
        assert_ne!(SiteKey::of(&moved), key, "another caller is another site");
    }

    #[test]
    fn module_names_lose_their_versions_in_keys() {
        assert_eq!(unversioned("libfoo.so.1.2"), "libfoo.so");
        assert_eq!(unversioned("libfoo.so"), "libfoo.so");
        assert_eq!(unversioned("ext.cpython-311-x86_64-linux-gnu.so"), "ext.so");
        assert_eq!(unversioned("ext.abi3.so"), "ext.so");
        assert_eq!(unversioned("app"), "app");
        let f = |module: &str| Frame {
            function: Some("helper".into()),
            file: None,
            line: None,
            module: Some(module.into()),
            address: 0x10,
            inlined: false,
            user: true,
        };
        assert_eq!(SiteKey::of(&[f("libmine.so.2")]), SiteKey::of(&[f("libmine.so.3.1")]));
    }

    #[test]
    fn fingerprints_are_stable_and_differ_between_keys() {
        let a = SiteKey("main@app.c:1".into());
        assert_eq!(a.fingerprint(), a.clone().fingerprint());
        assert_eq!(a.fingerprint().len(), 16);
        assert_ne!(a.fingerprint(), SiteKey("main@app.c:2".into()).fingerprint());
        assert_eq!(SiteKey(String::new()).fingerprint(), "cbf29ce484222325");
    }
}
