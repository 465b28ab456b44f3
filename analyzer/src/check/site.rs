//! Site keys: what makes a leak (or a finding) in one run the same as one in another run.
//!
//! A key is built from the symbolized stack, innermost frame first, one piece per frame:
//!
//! | the frame has | its piece |
//! |---|---|
//! | function, file and line | `function@file:line` (the file's base name) |
//! | function and file, no line | `function@file` |
//! | function only (a symbol table) | `function@module` |
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

use crate::report::Frame;

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
        let mut key = String::new();
        for (i, f) in frames.iter().enumerate() {
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
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for b in self.0.bytes() {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        format!("{h:016x}")
    }
}

impl fmt::Display for SiteKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
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
            let _ = write!(key, "{function}@{}", f.module.as_deref().unwrap_or("?"));
        }
        (None, Some(file), Some(line)) => {
            let _ = write!(key, "?@{file}:{line}");
        }
        (None, _, _) => match f.module.as_deref() {
            Some(module) => {
                let _ = write!(key, "{module}+{:#x}", f.address);
            }
            // An address in no module (JIT code) changes with every run.
            None => key.push('?'),
        },
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
            },
            Frame {
                function: Some("foo_init".into()),
                file: None,
                line: None,
                module: Some("libfoo.so".into()),
                address: 0x900,
                inlined: false,
            },
            Frame {
                function: None,
                file: None,
                line: None,
                module: None,
                address: 0x7f00_dead_beef,
                inlined: false,
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

    #[test]
    fn fingerprints_are_stable_and_differ_between_keys() {
        let a = SiteKey("main@app.c:1".into());
        assert_eq!(a.fingerprint(), a.clone().fingerprint());
        assert_eq!(a.fingerprint().len(), 16);
        assert_ne!(a.fingerprint(), SiteKey("main@app.c:2".into()).fingerprint());
        assert_eq!(SiteKey(String::new()).fingerprint(), "cbf29ce484222325");
    }
}
