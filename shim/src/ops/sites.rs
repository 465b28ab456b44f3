//! Short names of allocation sites for metrics labels and the OOM summary: the first
//! frame of the user's code in a stack (outside the shim, the C and C++ runtime, the
//! interpreter and installed Python packages, CUDA's and frameworks' libraries, by module
//! path, as the analyzer's `report::user_code` rule has it for native frames), else the
//! first frame outside the shim and `libcuda*`, named by `dladdr` (`symbol`, or `module+0xoffset` where the module exports no symbol
//! there). The frame is found once per stack, by one extra unwind when a thread meets a
//! stack it has not noted before; the name only when a label is asked for.

use std::cell::Cell;
use std::collections::HashMap;
use std::ffi::CStr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

use gpuleak_format::StackId;

/// Stack id → (first program frame, its name once asked for).
type FirstFrames = HashMap<u32, (u64, Option<String>)>;
/// Behind a pointer so that a forked child can start over with a fresh lock (the parent's
/// may have been held by a thread that does not exist in the child); old ones are leaked.
static FIRST_FRAMES: AtomicPtr<Mutex<Option<FirstFrames>>> = AtomicPtr::new(std::ptr::null_mut());

fn first_frames() -> std::sync::MutexGuard<'static, Option<FirstFrames>> {
    let mut p = FIRST_FRAMES.load(Ordering::Acquire);
    if p.is_null() {
        let fresh = Box::into_raw(Box::new(Mutex::new(None)));
        p = match FIRST_FRAMES.compare_exchange(std::ptr::null_mut(), fresh, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => fresh,
            Err(other) => {
                // SAFETY: `fresh` was never shared.
                drop(unsafe { Box::from_raw(fresh) });
                other
            }
        };
    }
    // SAFETY: published mutexes are leaked, never freed.
    let m = unsafe { &*p };
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Stack ids a thread has already noted, direct-mapped (in its [`crate::scratch`] block; all
/// zeros: none).
pub struct Noted([Cell<u32>; 64]);

/// The calling thread's noted ids; `None` when it has none (exiting, or out of memory).
fn noted() -> Option<&'static Noted> {
    crate::scratch::current().map(|b| &b.noted)
}

/// Remembers the first program frame of `stack`, which the calling thread just allocated
/// from.
pub fn note(stack: StackId) {
    if stack == StackId::NONE {
        return;
    }
    let slot = (stack.0 as usize) % 64;
    if noted().is_none_or(|n| n.0[slot].get() == stack.0) {
        return;
    }
    // No lock is held across the unwind and `dladdr` (which takes the loader's lock: a
    // library constructor that allocates while another thread waits here must not deadlock).
    let known = |m: &Option<FirstFrames>| m.as_ref().is_some_and(|m| m.contains_key(&stack.0));
    if !known(&first_frames()) {
        let frame = first_program_frame();
        let mut map = first_frames();
        map.get_or_insert_with(HashMap::new)
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
    FIRST_FRAMES.store(std::ptr::null_mut(), Ordering::Release);
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

/// Base-name prefixes of modules that are never the user's code (the analyzer's list in
/// `report::user_code`).
const NOT_USERS: &[&[u8]] = &[
    b"libc.so",
    b"libc-",
    b"libm.so",
    b"libm-",
    b"libmvec",
    b"libdl.so",
    b"libdl-",
    b"libpthread",
    b"librt.so",
    b"librt-",
    b"libstdc++",
    b"libc++",
    b"libgcc_s",
    b"libatomic",
    b"libffi",
    b"libunwind",
    b"ld-linux",
    b"ld64.so",
    b"ld-musl",
    b"linux-vdso",
    b"libpython",
    b"libcuda",
    b"libcublas",
    b"libcudnn",
    b"libnccl",
    b"libcufft",
    b"libcurand",
    b"libcusparse",
    b"libcusolver",
    b"libcupti",
    b"libnvrtc",
    b"libnvJitLink",
    b"libnvidia-",
    b"libnvToolsExt",
    b"libnvtx",
    b"cydriver.",
    b"cyruntime.",
    b"cynvrtc.",
    b"libtorch",
    b"libc10",
    b"libxla",
    b"xla_extension",
    b"xla_cuda_plugin",
    b"libjax",
    b"libcupy",
    b"libnumba",
    b"librmm",
];

/// Directories whose modules are never the user's code: installed Python packages and
/// frameworks.
const NOT_USERS_DIRS: &[&[u8]] = &[
    b"site-packages",
    b"dist-packages",
    b"jaxlib",
    b"jax_plugins",
    b"cupy",
    b"cupy_backends",
    b"numba",
    b"torch",
];

/// Whether a module (by path) may hold the user's code.
fn is_user_module(path: &[u8]) -> bool {
    let name = basename(path);
    let python = name.strip_prefix(b"python").is_some_and(|v| {
        v.iter()
            .all(|c| c.is_ascii_digit() || matches!(c, b'.' | b't' | b'd' | b'm'))
    });
    if python || NOT_USERS.iter().any(|p| name.starts_with(p)) {
        return false;
    }
    let mut dirs = path.split(|&c| c == b'/').peekable();
    let mut previous: &[u8] = b"";
    while let Some(d) = dirs.next() {
        if dirs.peek().is_none() {
            break;
        }
        // The interpreter's lib/pythonX.Y/ (its extension modules in lib-dynload).
        let versioned = d
            .strip_prefix(b"python")
            .is_some_and(|v| !v.is_empty() && v.iter().all(|c| c.is_ascii_digit() || matches!(c, b'.' | b't')));
        if NOT_USERS_DIRS.contains(&d) || (versioned && (previous == b"lib" || previous == b"lib64")) {
            return false;
        }
        previous = d;
    }
    true
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

/// A short name for a stack's site: the symbol of its first program frame, or
/// `module+0xoffset`, or `stack N` when nothing better is known.
pub fn label(stack: StackId) -> String {
    let found = {
        let map = first_frames();
        map.as_ref().and_then(|m| m.get(&stack.0)).cloned()
    };
    let Some((addr, name)) = found else {
        return format!("stack {}", stack.0);
    };
    if let Some(n) = name {
        return n;
    }
    // Named outside the lock (`dladdr` takes the loader's lock), then remembered.
    let made = name_of(addr).unwrap_or_else(|| format!("stack {}", stack.0));
    let mut map = first_frames();
    if let Some(e) = map.as_mut().and_then(|m| m.get_mut(&stack.0)) {
        e.1 = Some(made.clone());
    }
    made
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
    use super::is_user_module;

    #[test]
    fn runtimes_interpreters_and_packages_are_not_the_users_code() {
        for (path, users) in [
            (&b"/home/me/build/app"[..], true),
            (b"/home/me/build/libmine.so", true),
            (b"/usr/lib/x86_64-linux-gnu/libc.so.6", false),
            (b"/usr/lib/x86_64-linux-gnu/libffi.so.8", false),
            (b"/usr/lib/libcudart.so.12", false),
            (b"/usr/lib/libpython3.11.so.1.0", false),
            (b"/usr/bin/python3.11", false),
            (
                b"/v/lib/python3.11/site-packages/cuda/bindings/cydriver.cpython-311-x86_64-linux-gnu.so",
                false,
            ),
            (
                b"/usr/lib/python3.11/lib-dynload/_ctypes.cpython-311-x86_64-linux-gnu.so",
                false,
            ),
            (b"/v/lib/python3.10/site-packages/torch/lib/libtorch_cuda.so", false),
            (b"/home/me/pythonic/libmine.so", true),
        ] {
            assert_eq!(is_user_module(path), users, "{}", String::from_utf8_lossy(path));
        }
    }
}
