//! The user's code: which frames of a stack are the program's own, and the one frame that
//! names a site everywhere a site gets a short name (tables, legends, `check` lines, SARIF
//! locations, JUnit messages, baseline keys).
//!
//! A frame is the user's when it is (the format crate's
//! [`user_code`](gpuleak_format::user_code), which the shim's metrics labels follow too)
//!
//! - a Python frame of a file outside the interpreter's standard library and the installed
//!   packages: not under `site-packages/` or `dist-packages/`, not under the interpreter's
//!   `lib/pythonX.Y/`, not a frozen module (`<frozen ...>`);
//! - or a native frame of the program or of a library that is none of: the C and C++ runtime
//!   (libc, libm, libstdc++, libgcc, libffi, the dynamic loader...), the interpreter
//!   (`libpython*`, the `python` executable, any module under the interpreter's `lib/pythonX.Y/`
//!   or an installed package's directory), CUDA's libraries (libcuda, libcudart, libcublas,
//!   libnccl...), a known framework's (libtorch, libc10, jaxlib, XLA, CuPy, numba), or the
//!   shim.
//!
//! `--focus GLOB` makes matching frames the user's, `--hide GLOB` makes them never the user's
//! (hide wins); the shim's frames are never the user's. A glob (`*` any run of characters,
//! `?` one character) is matched against the whole file path and the whole module path of a
//! frame, and, when it has no `/`, against their base names too.
//!
//! The site's frame ([`site_frame`]) is the innermost frame of the user's; when no frame is
//! the user's, the innermost frame with a source line, as before.

use gpuleak_format::user_code::{is_python_executable, is_user_module, is_user_python_file};

use crate::model::file_name;

use super::Frame;

/// Which frames are the user's: the built-in rule with the `--focus` and `--hide` globs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserCode {
    focus: Vec<String>,
    hide: Vec<String>,
}

impl UserCode {
    /// The rule with frames matching a `focus` glob taken as the user's and frames matching a
    /// `hide` glob never.
    pub fn new(focus: Vec<String>, hide: Vec<String>) -> UserCode {
        UserCode { focus, hide }
    }

    /// Whether `f` is the user's; `module_path` is the full path of its module when known
    /// (else its base name in `f.module` is all there is).
    pub fn is_users(&self, f: &Frame, module_path: Option<&str>) -> bool {
        let python = is_python(f);
        let module = if python {
            None
        } else {
            module_path.or(f.module.as_deref())
        };
        if module.is_some_and(|m| file_name(m).starts_with("libgpuleak")) {
            return false;
        }
        let names = [f.file.as_deref(), module];
        let matches = |globs: &[String]| {
            globs
                .iter()
                .any(|g| names.iter().flatten().any(|name| glob_matches_path(g, name)))
        };
        if matches(&self.hide) {
            return false;
        }
        if matches(&self.focus) {
            return true;
        }
        if python {
            return f.file.as_deref().is_some_and(is_user_python_file);
        }
        module.is_some_and(is_user_module)
    }
}

/// The frame that names a site: the innermost of the user's frames; when no frame is the
/// user's, the innermost frame with a source line, else the innermost with a function name,
/// else the innermost.
pub fn site_frame(stack: &[Frame]) -> Option<&Frame> {
    let has_line = |f: &&Frame| f.file.is_some() && f.line.is_some();
    stack
        .iter()
        .find(|f| f.user)
        .or_else(|| stack.iter().find(has_line))
        .or_else(|| stack.iter().find(|f| f.function.is_some()))
        .or_else(|| stack.first())
}

/// The site's short name: `function file:line` of its [`site_frame`] (the file's base name),
/// `function` alone without a line, `module+0xOFFSET` without a function.
pub fn site_name(stack: &[Frame]) -> Option<String> {
    site_frame(stack).map(short_name)
}

/// A frame's short name, as [`site_name`] writes it.
pub fn short_name(f: &Frame) -> String {
    match (&f.function, &f.file, f.line) {
        (Some(function), Some(file), Some(line)) => format!("{function} {}:{line}", file_name(file)),
        (Some(function), _, _) => function.clone(),
        (None, Some(file), Some(line)) => format!("{}:{line}", file_name(file)),
        (None, _, _) => format!("{}+{:#x}", f.module.as_deref().unwrap_or("?"), f.address),
    }
}

/// A line of a stack as a report shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shown<'a> {
    /// A frame, with its index in the whole stack.
    Frame(usize, &'a Frame),
    /// A run of frames left out, and whether they are all the interpreter's.
    Folded {
        /// How many.
        frames: usize,
        /// Whether every one is in `libpython*` or the `python` executable.
        interpreter: bool,
    },
}

impl Shown<'_> {
    /// `... 18 interpreter frames`, `... 7 native frames`.
    pub fn folded_text(frames: usize, interpreter: bool) -> String {
        let what = if interpreter { "interpreter" } else { "native" };
        format!("... {frames} {what} frame{}", if frames == 1 { "" } else { "s" })
    }
}

/// The lines a report shows for `stack`: in a stack with Python frames, the Python frames and
/// the user's native frames, each run of two or more other native frames folded into one
/// line; every frame of other stacks, or of every stack with `native_frames`
/// (`--native-frames`).
pub fn shown(stack: &[Frame], native_frames: bool) -> Vec<Shown<'_>> {
    if native_frames || !has_python(stack) {
        return stack.iter().enumerate().map(|(i, f)| Shown::Frame(i, f)).collect();
    }
    let mut out = Vec::new();
    let mut run: Vec<(usize, &Frame)> = Vec::new();
    for (i, f) in stack.iter().enumerate() {
        if f.user || is_python(f) {
            flush(&mut run, &mut out);
            out.push(Shown::Frame(i, f));
        } else {
            run.push((i, f));
        }
    }
    flush(&mut run, &mut out);
    out
}

/// Ends a run of frames not shown: one line for it, or the frame itself when alone (it takes
/// no more room than the line that would fold it).
fn flush<'a>(run: &mut Vec<(usize, &'a Frame)>, out: &mut Vec<Shown<'a>>) {
    if let [(i, f)] = run[..] {
        out.push(Shown::Frame(i, f));
    } else if !run.is_empty() {
        let interpreter = run.iter().all(|(_, f)| is_interpreter(f));
        out.push(Shown::Folded {
            frames: run.len(),
            interpreter,
        });
    }
    run.clear();
}

/// The frames of `stack` that [`shown`] shows, for flame graphs (folded runs left out, so
/// that the same Python path is one flame whatever the interpreter did in between).
pub fn shown_frames(stack: &[Frame], native_frames: bool) -> Vec<&Frame> {
    shown(stack, native_frames)
        .into_iter()
        .filter_map(|s| match s {
            Shown::Frame(_, f) => Some(f),
            Shown::Folded { .. } => None,
        })
        .collect()
}

/// Whether a native frame is the interpreter's own (`libpython*`, the `python` executable).
fn is_interpreter(f: &Frame) -> bool {
    f.module
        .as_deref()
        .is_some_and(|m| m.starts_with("libpython") || is_python_executable(m))
}

/// Whether `f` is a Python frame (made from the trace's code objects).
pub fn is_python(f: &Frame) -> bool {
    f.module.as_deref() == Some(crate::symbolize::python::MODULE)
}

/// Whether a stack holds Python frames.
pub fn has_python(stack: &[Frame]) -> bool {
    stack.iter().any(is_python)
}

/// Whether `glob` matches `path`: the whole path, or its base name when the glob has no `/`.
pub fn glob_matches_path(glob: &str, path: &str) -> bool {
    glob_matches(glob.as_bytes(), path.as_bytes())
        || (!glob.contains('/') && glob_matches(glob.as_bytes(), file_name(path).as_bytes()))
}

/// `*` matches any run of bytes, `?` one byte, anything else itself.
fn glob_matches(glob: &[u8], text: &[u8]) -> bool {
    let (mut g, mut t) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while t < text.len() {
        if g < glob.len() && (glob[g] == b'?' || glob[g] == text[t]) {
            g += 1;
            t += 1;
        } else if g < glob.len() && glob[g] == b'*' {
            star = Some((g, t));
            g += 1;
        } else if let Some((sg, st)) = star {
            g = sg + 1;
            t = st + 1;
            star = Some((sg, st + 1));
        } else {
            return false;
        }
    }
    glob[g..].iter().all(|&c| c == b'*')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn native(function: &str, file: &str, module: &str) -> Frame {
        Frame {
            function: Some(function.into()),
            file: (!file.is_empty()).then(|| file.into()),
            line: Some(1),
            module: Some(file_name(module).into()),
            address: 0x10,
            inlined: false,
            user: false,
        }
    }

    fn python(function: &str, file: &str) -> Frame {
        Frame {
            module: Some("python".into()),
            ..native(function, file, "python")
        }
    }

    /// Frames paired with their module paths, as `Stacks` classifies them.
    fn classify(rule: &UserCode, frames: &[(Frame, &str)]) -> Vec<Frame> {
        frames
            .iter()
            .map(|(f, path)| {
                let path = (!path.is_empty()).then_some(*path);
                Frame {
                    user: rule.is_users(f, path),
                    ..f.clone()
                }
            })
            .collect()
    }

    const PY: &str = "/root/.pyenv/versions/3.11.7/lib/libpython3.11.so.1.0";
    const CYDRIVER: &str =
        "/proj/.venv/lib/python3.11/site-packages/cuda/bindings/cydriver.cpython-311-x86_64-linux-gnu.so";

    /// A cuda-bindings call from a training script, innermost first.
    fn training_stack() -> Vec<(Frame, &'static str)> {
        vec![
            (
                native("cuMemAlloc_v2", "", "/usr/lib/libcuda.so.1"),
                "/usr/lib/libcuda.so.1",
            ),
            (native("", "", CYDRIVER), CYDRIVER),
            (native("_PyObject_VectorcallTstate", "pycore_call.h", PY), PY),
            (python("scratch", "/home/me/train/leaky.py"), ""),
            (python("train_step", "/home/me/train/leaky.py"), ""),
            (
                python("Thread.run", "/root/.pyenv/versions/3.11.7/lib/python3.11/threading.py"),
                "",
            ),
            (python("<module>", "<frozen runpy>"), ""),
            (native("Py_BytesMain", "main.c", PY), PY),
            (
                native("_start", "", "/root/.pyenv/versions/3.11.7/bin/python3.11"),
                "/root/.pyenv/versions/3.11.7/bin/python3.11",
            ),
        ]
    }

    #[test]
    fn the_site_of_a_python_stack_is_the_innermost_frame_of_the_users_script() {
        let stack = classify(&UserCode::default(), &training_stack());
        let users: Vec<&str> = stack
            .iter()
            .filter(|f| f.user)
            .map(|f| f.function.as_deref().unwrap())
            .collect();
        assert_eq!(users, ["scratch", "train_step"]);
        assert_eq!(site_frame(&stack).unwrap().function.as_deref(), Some("scratch"));
    }

    #[test]
    fn focus_and_hide_move_the_site() {
        let hide = UserCode::new(vec![], vec!["*/leaky.py".into()]);
        let stack = classify(&hide, &training_stack());
        assert!(stack.iter().all(|f| !f.user), "{stack:?}");
        // No frame is the user's: the innermost with a source line, as before.
        assert_eq!(
            site_frame(&stack).unwrap().function.as_deref(),
            Some("_PyObject_VectorcallTstate")
        );

        let focus = UserCode::new(vec!["cydriver*".into()], vec![]);
        let stack = classify(&focus, &training_stack());
        assert_eq!(site_frame(&stack).unwrap().module.as_deref(), Some(file_name(CYDRIVER)));

        let focus = UserCode::new(vec!["*/threading.py".into()], vec!["*/train/*".into()]);
        let stack = classify(&focus, &training_stack());
        assert_eq!(site_frame(&stack).unwrap().function.as_deref(), Some("Thread.run"));

        // Never the shim's frames, focus or not.
        let shim = native("hook", "", "/x/libgpuleak.so");
        assert!(!UserCode::new(vec!["*".into()], vec![]).is_users(&shim, Some("/x/libgpuleak.so")));
    }

    #[test]
    fn a_c_programs_own_frames_and_libraries_are_the_users_and_runtimes_are_not() {
        let rule = UserCode::default();
        for (module, users) in [
            ("/home/me/build/app", true),
            ("/home/me/build/libmine.so", true),
            ("/usr/lib/x86_64-linux-gnu/libfoo.so.3", true),
            ("/usr/lib/x86_64-linux-gnu/libc.so.6", false),
            ("/usr/lib/x86_64-linux-gnu/libstdc++.so.6", false),
            ("/lib64/ld-linux-x86-64.so.2", false),
            ("/usr/lib/libcudart.so.12", false),
            ("/usr/lib/libnccl.so.2", false),
            (
                "/opt/venv/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so",
                false,
            ),
            (
                "/opt/venv/lib/python3.10/site-packages/mine/ext.cpython-310-x86_64-linux-gnu.so",
                false,
            ),
            (
                "/usr/lib/python3.10/lib-dynload/_ctypes.cpython-310-x86_64-linux-gnu.so",
                false,
            ),
            ("/usr/bin/python3.10", false),
            ("/home/me/src/ext.cpython-310-x86_64-linux-gnu.so", true),
            ("/x/libgpuleak.so", false),
            // Known by name alone (an older baseline).
            ("cydriver.cpython-311-x86_64-linux-gnu.so", false),
            ("app", true),
        ] {
            let f = native("f", "", module);
            assert_eq!(rule.is_users(&f, Some(module)), users, "{module}");
        }
        let unknown = Frame {
            module: None,
            ..native("f", "", "x")
        };
        assert!(!rule.is_users(&unknown, None), "JIT code in no module");
        // No frame is the user's: the innermost names the site, as before.
        let stack = vec![native("a", "", "libc.so.6"), native("b", "", "libc.so.6")];
        assert_eq!(site_frame(&stack).unwrap().function.as_deref(), Some("a"));
        assert!(site_frame(&[]).is_none());
    }

    #[test]
    fn python_stacks_fold_runs_of_native_frames_that_are_not_the_users() {
        let stack = classify(&UserCode::default(), &training_stack());
        let lines: Vec<String> = shown(&stack, false)
            .iter()
            .map(|s| match s {
                Shown::Frame(i, f) => format!("#{i} {}", f.function.as_deref().unwrap_or("?")),
                Shown::Folded { frames, interpreter } => Shown::folded_text(*frames, *interpreter),
            })
            .collect();
        assert_eq!(
            lines,
            [
                "... 3 native frames",
                "#3 scratch",
                "#4 train_step",
                "#5 Thread.run",
                "#6 <module>",
                "... 2 interpreter frames"
            ]
        );
        assert_eq!(shown(&stack, true).len(), stack.len(), "--native-frames");
        let names: Vec<&str> = shown_frames(&stack, false)
            .iter()
            .map(|f| f.function.as_deref().unwrap())
            .collect();
        assert_eq!(names, ["scratch", "train_step", "Thread.run", "<module>"]);

        // A stack without Python frames is shown whole, whoever's its frames are.
        let c = vec![native("a", "", "libc.so.6"), native("b", "", "libc.so.6")];
        assert_eq!(shown(&c, false).len(), 2);
    }

    #[test]
    fn globs_match_whole_paths_or_base_names() {
        assert!(glob_matches_path("*/site-packages/*", "/a/site-packages/b.py"));
        assert!(!glob_matches_path("site-packages", "/a/site-packages/b.py"));
        assert!(glob_matches_path("b.py", "/a/site-packages/b.py"));
        assert!(glob_matches_path("lib?oo*", "/x/libfoo.so.1"));
        assert!(!glob_matches_path("/x/lib", "/x/libfoo.so.1"));
        assert!(glob_matches_path("*", ""));
        assert!(glob_matches_path("a*b*c", "axxbyyc"));
        assert!(!glob_matches_path("a*b*c", "axxbyy"));
    }
}
