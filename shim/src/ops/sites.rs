//! Short names of allocation sites for metrics labels and the OOM summary, by the rule that
//! names a site in the analyzer's reports (the format crate's `user_code`):
//!
//! 1. the innermost Python frame in the user's files, as `qualname file.py:LINE` (the line
//!    from the code object's line table, by the format crate's `line_table`);
//! 2. else the innermost native frame of the user's code (outside the shim, the C and C++
//!    runtime, the interpreter and installed Python packages, CUDA's and frameworks'
//!    libraries, by module path), named by `dladdr`;
//! 3. else the first frame outside the shim and `libcuda*`, named the same way (`symbol`, or
//!    `module+0xoffset` where the module exports no symbol there).
//!
//! Nothing of this runs on the hot path. The native frame is found once per stack, by one
//! extra unwind when a thread meets a stack it has not noted before; the Python frame when
//! a new stack's Python frames are written (and only while live accounting is on, which
//! labels need); names and lines only when a label is asked for.

use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::Mutex;

use gpuleak_format::user_code::{file_name, is_user_python_file};
use gpuleak_format::{PyCode, StackId};

use crate::leaked::Leaked;

/// A code object of the user's files, as a label needs it.
struct UserCode {
    python: u32,
    first_line: u32,
    /// The file's base name.
    file: String,
    qualname: String,
    line_table: Vec<u8>,
}

/// What labels are made from, for the stacks of this process's trace.
#[derive(Default)]
struct Known {
    /// Stack id → (first program frame, its name once asked for).
    first: HashMap<u32, (u64, Option<String>)>,
    /// Stack id → its innermost Python frame in the user's files: (code id, offset).
    python: HashMap<u32, (u32, u32)>,
    /// Code id → the code object when its file is the user's, `None` when it is not.
    codes: HashMap<u32, Option<UserCode>>,
}

/// Behind a pointer so that a forked child can start over with a fresh lock (the parent's
/// may have been held by a thread that does not exist in the child); old ones are leaked.
static KNOWN: Leaked<Mutex<Option<Known>>> = Leaked::new();

fn known() -> std::sync::MutexGuard<'static, Option<Known>> {
    KNOWN
        .make_once(|| Mutex::new(None))
        .lock()
        .unwrap_or_else(|p| p.into_inner())
}

/// Remembers a code object the trace just described, when its file is the user's (only its
/// id otherwise).
pub fn python_code(code: &PyCode<'_>) {
    let users = is_user_python_file(&code.filename).then(|| UserCode {
        python: code.python,
        first_line: code.first_line,
        file: file_name(&code.filename).to_string(),
        qualname: code.qualname.to_string(),
        line_table: code.line_table.to_vec(),
    });
    known().get_or_insert_with(Known::default).codes.insert(code.id, users);
}

/// Remembers the innermost Python frame in the user's files of a new stack, from its
/// `PyFrames` triples `(position, code id, offset)`, innermost first.
pub fn python_frames(stack: StackId, triples: &[u64]) {
    let mut map = known();
    let k = map.get_or_insert_with(Known::default);
    let users = triples
        .chunks_exact(3)
        .map(|t| (t[1] as u32, t[2] as u32))
        .find(|(code, _)| matches!(k.codes.get(code), Some(Some(_))));
    if let Some(frame) = users {
        k.python.insert(stack.0, frame);
    }
}

/// The calling thread's noted ids; `None` when it has none (exiting, or out of memory).
fn noted() -> Option<&'static crate::scratch::Noted> {
    crate::scratch::current().map(|b| &b.noted)
}

/// Remembers the first program frame of `stack`, which the calling thread just allocated
/// from.
pub fn note(stack: StackId) {
    if stack == StackId::NONE {
        return;
    }
    let slot = (stack.0 as usize) % crate::scratch::NOTED;
    if noted().is_none_or(|n| n.0[slot].get() == stack.0) {
        return;
    }
    // No lock is held across the unwind and `dladdr` (which takes the loader's lock: a
    // library constructor that allocates while another thread waits here must not deadlock).
    let seen = |m: &Option<Known>| m.as_ref().is_some_and(|m| m.first.contains_key(&stack.0));
    if !seen(&known()) {
        let frame = first_program_frame();
        let mut map = known();
        map.get_or_insert_with(Known::default)
            .first
            .entry(stack.0)
            .or_insert((frame, None));
    }
    if let Some(n) = noted() {
        n.0[slot].set(stack.0);
    }
}

/// Forgets every noted stack (ids start over in a forked child's trace): atomic stores
/// only, for the single-threaded child.
pub fn forget_in_child() {
    KNOWN.forget();
    if let Some(n) = noted() {
        n.0.iter().for_each(|c| c.set(0));
    }
}

fn module_of(addr: u64) -> Option<(libc::Dl_info, &'static [u8])> {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only reads the loader's tables and fills `info`.
    if unsafe { libc::dladdr(addr as *const libc::c_void, info.as_mut_ptr()) } == 0 {
        return None;
    }
    // SAFETY: dladdr succeeded, so `info` is initialised.
    let info = unsafe { info.assume_init() };
    let name: &'static [u8] = if info.dli_fname.is_null() {
        b""
    } else {
        // SAFETY: the loader's own NUL-terminated path of a loaded object, which stays
        // valid while the object is loaded (the shim and the program are never unloaded).
        unsafe { CStr::from_ptr(info.dli_fname) }.to_bytes()
    };
    Some((info, name))
}

fn basename(path: &[u8]) -> &[u8] {
    path.rsplit(|&c| c == b'/').next().unwrap_or(path)
}

/// Whether a module (by path) may hold the user's code: the format crate's rule, which the
/// analyzer's reports follow too.
fn is_user_module(path: &[u8]) -> bool {
    gpuleak_format::user_code::is_user_module(&String::from_utf8_lossy(path))
}

/// The first return address in the user's code, else the first outside the shim and
/// `libcuda*`, or 0.
fn first_program_frame() -> u64 {
    let mut buf = [0u64; 48];
    let n = gpuleak_unwind::capture(0, &mut buf);
    let own = module_of(first_program_frame as *const () as u64).map_or(std::ptr::null_mut(), |(i, _)| i.dli_fbase);
    let mut fallback = 0;
    for &a in &buf[..n.min(buf.len())] {
        let Some((info, path)) = module_of(a) else { continue };
        if info.dli_fbase == own {
            continue;
        }
        if is_user_module(path) {
            return a;
        }
        if fallback == 0 && !basename(path).starts_with(b"libcuda") {
            fallback = a;
        }
    }
    fallback
}

/// A short name for a stack's site: `qualname file.py:LINE` of its innermost Python frame in
/// the user's files, else the symbol of its first program frame, or `module+0xoffset`, or
/// `stack N` when nothing better is known.
pub fn label(stack: StackId) -> String {
    let found = {
        let map = known();
        let Some(k) = map.as_ref() else {
            return format!("stack {}", stack.0);
        };
        if let Some(name) = python_label(k, stack) {
            return name;
        }
        k.first.get(&stack.0).cloned()
    };
    let Some((addr, name)) = found else {
        return format!("stack {}", stack.0);
    };
    if let Some(n) = name {
        return n;
    }
    // Named outside the lock (`dladdr` takes the loader's lock), then remembered.
    let made = name_of(addr).unwrap_or_else(|| format!("stack {}", stack.0));
    let mut map = known();
    if let Some(e) = map.as_mut().and_then(|m| m.first.get_mut(&stack.0)) {
        e.1 = Some(made.clone());
    }
    made
}

/// `qualname file.py:LINE` (or `qualname file.py` where the instruction has no line) of the
/// stack's innermost Python frame in the user's files.
fn python_label(k: &Known, stack: StackId) -> Option<String> {
    let (code, offset) = *k.python.get(&stack.0)?;
    let c = k.codes.get(&code)?.as_ref()?;
    Some(
        match gpuleak_format::line_table::line_at(c.python, c.first_line, &c.line_table, offset) {
            Some(line) => format!("{} {}:{line}", c.qualname, c.file),
            None => format!("{} {}", c.qualname, c.file),
        },
    )
}

fn name_of(addr: u64) -> Option<String> {
    if addr == 0 {
        return None;
    }
    // A return address points after the call: look up the call's own byte.
    let (info, path) = module_of(addr - 1)?;
    if !info.dli_sname.is_null() {
        // SAFETY: the loader's NUL-terminated symbol name.
        let sym = unsafe { CStr::from_ptr(info.dli_sname) }.to_string_lossy();
        return Some(sym.into_owned());
    }
    let base = info.dli_fbase as u64;
    Some(format!(
        "{}+{:#x}",
        String::from_utf8_lossy(basename(path)),
        addr.saturating_sub(base)
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_python_site_is_named_by_its_users_line_and_a_module_by_its_path() {
        let mut k = Known::default();
        // Three one-instruction entries (3.11): line 40, then 41, then 41.
        let table = [0x80, 0x00, 0xd8, 0x09, 0x0a, 0x88];
        k.codes.insert(
            3,
            Some(UserCode {
                python: 0x030b,
                first_line: 40,
                file: "leaky.py".into(),
                qualname: "Model.step".into(),
                line_table: table.to_vec(),
            }),
        );
        k.codes.insert(4, None);
        k.python.insert(7, (3, 2));
        k.python.insert(8, (3, 100));
        assert_eq!(python_label(&k, StackId(7)).as_deref(), Some("Model.step leaky.py:41"));
        assert_eq!(
            python_label(&k, StackId(8)).as_deref(),
            Some("Model.step leaky.py"),
            "no line"
        );
        assert_eq!(python_label(&k, StackId(9)), None, "no Python frame of the user's");

        assert!(is_user_module(b"/home/me/build/app"));
        assert!(!is_user_module(b"/usr/lib/libcudart.so.12"));
        assert!(is_user_module(b"/home/me/\xff/libmine.so"), "not UTF-8");
    }
}
