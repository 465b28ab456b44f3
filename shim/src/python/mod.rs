//! Python frames: the CPython frames of the allocating thread, read without the GIL.
//!
//! Nothing happens in a process that is not Python: the interpreter is looked up (through
//! the real `dlsym`, never by linking libpython) at the first stack capture of a process that
//! has `GPULEAK_PYTHON` on, and the answer is kept. In a Python process each capture then
//! reads the calling thread's own frame chain:
//!
//! * the thread state comes from `PyGILState_GetThisThreadState()`, which reads a thread-local
//!   and needs no GIL (PyTorch and cuda-bindings release the GIL before they allocate);
//! * the thread is inside our hook, so its frames cannot change under us, and no other thread
//!   changes them (the frames keep their code objects alive);
//! * per frame, only a pair is kept: the code object's address and the instruction offset
//!   (plus the address of its line table, which tells a reused code object address apart).
//!   Each code object is described once in the trace (`PyCode`: file, qualified name, first
//!   line, line table bytes), and the analyzer computes lines offline.
//!
//! Reads are defensive: every pointer must be aligned and in the user address range, every
//! code object must have `PyCode_Type` as its type, offsets must fall inside the code, and a
//! walk stops after [`MAX_FRAMES`] frames. The first walks of a process go through
//! `process_vm_readv`, or `/proc/self/mem` where a seccomp filter refuses that (a failed read
//! is an error, never a fault), until one walk has found a
//! real code object: that proves the version's layout against the live interpreter; a failed
//! read switches Python frames off with one line on stderr. On 3.13 and later the layout is
//! first compared with the offsets the interpreter publishes for debuggers. Strings and line
//! tables are always copied that way (once per code object).

mod code;
mod layout;
mod read;

use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};

use crate::leaked::Leaked;
pub use code::Codes;
use layout::{Chain, Entry, Instr, Layout, CODE_ARRAY_ENTRIES};
use read::Mem;

/// The most Python frames kept per stack (the innermost ones).
pub const MAX_FRAMES: usize = 128;

/// Careful walks that found no code object before Python frames give up (a layout that does
/// not match, for example a free-threaded or `Py_TRACE_REFS` build).
const CAREFUL_TRIES: u32 = 256;

/// One Python frame as captured: cheap to take, described later.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PyFrame {
    /// The code object's address.
    pub code: u64,
    /// Its line table's address (with `code`, identifies the code object).
    pub table: u64,
    /// Bytes from the start of the bytecode.
    pub offset: u32,
    /// Whether this frame is the first one its eval-loop call ran (the outermost Python
    /// frame of a native `_PyEval_EvalFrameDefault` frame).
    pub entry: bool,
    /// For an entry frame on 3.12+: the address of the frame the eval loop pushed below it,
    /// a local variable of that `_PyEval_EvalFrameDefault` call on this thread's stack (0:
    /// unknown). It tells which native frame ran this group; see [`NativeFrames`].
    pub boundary: u64,
}

/// The calling thread's frames with their stack pointers, taken once per new stack with
/// Python frames, to tell which native frame is the eval loop of each group.
pub struct NativeFrames {
    ips: Vec<u64>,
    sps: Vec<u64>,
}

impl NativeFrames {
    /// The most frames looked at.
    const MAX: usize = 512;

    /// The frames of the calling thread now (libgcc's walk: about 150 ns a frame).
    #[cold]
    pub fn here() -> NativeFrames {
        let (mut ips, mut sps) = (vec![0; Self::MAX], vec![0; Self::MAX]);
        let n = gpuleak_unwind::capture_with_sp(0, &mut ips, &mut sps);
        ips.truncate(n);
        sps.truncate(n);
        NativeFrames { ips, sps }
    }

    /// Which of `native` (the return addresses of a capture of this thread, innermost first,
    /// whose frames are all still live) is the `_PyEval_EvalFrameDefault` call that holds the
    /// eval loop's own frame at `boundary`: the frame whose locals contain that address. Its
    /// return address can be anywhere in the function, so this finds the eval loop where the
    /// symbol's range cannot: in stripped builds and in builds that split the function (GCC
    /// moves the call into the tail-calling interpreter of Debian's 3.14 and 3.15 into a
    /// `.cold` part, outside the symbol). `None` below `from`, or when no frame holds it.
    pub fn eval_frame(&self, boundary: u64, native: &[u64], from: usize) -> Option<usize> {
        let j =
            (0..self.ips.len().saturating_sub(1)).find(|&j| self.sps[j] <= boundary && boundary < self.sps[j + 1])?;
        let ip = self.ips[j];
        // The same return address may recur (recursion through the interpreter): take the
        // occurrence with as many of its kind inside it. (The frames this walk has and
        // `native` lacks, the shim's own, are in another module.)
        let inner = self.ips[..j].iter().filter(|&&a| a == ip).count();
        let k = native.iter().enumerate().filter(|&(_, &a)| a == ip).nth(inner)?.0;
        (k >= from).then_some(k)
    }
}

/// The interpreter found in this process.
pub struct Runtime {
    layout: &'static Layout,
    this_thread_state: unsafe extern "C" fn() -> *mut c_void,
    /// `Py_IsFinalizing` (3.13) or `_Py_IsFinalizing`: once the runtime finalizes, the thread
    /// states of daemon threads are freed while their thread-locals still point to them.
    finalizing: unsafe extern "C" fn() -> libc::c_int,
    code_type: u64,
    pub(crate) str_type: u64,
    pub(crate) bytes_type: u64,
    /// `_PyEval_EvalFrameDefault`'s code range (0, 0 when unknown).
    eval: (u64, u64),
    /// Set once a careful walk has proven the layout; direct reads after.
    proven: AtomicBool,
    careful_left: AtomicU32,
    off: AtomicBool,
}

/// Whether this process's interpreter has been looked for: one of the states below. A plain
/// state machine rather than a `OnceLock`, which would make a thread wait without bound for the
/// lookup of another (and a child forked during a lookup wait forever); here a thread waits at
/// most [`LOOKUP_WAIT`].
static STATE: AtomicU8 = AtomicU8::new(UNKNOWN);
const UNKNOWN: u8 = 0;
const LOOKING: u8 = 1;
const PRESENT: u8 = 2;
/// No usable interpreter (or Python frames turned off after a failed read): one load on the
/// hot path of every other process.
const ABSENT: u8 = 3;

/// The interpreter found (leaked, never freed), once `STATE` is `PRESENT`.
static RUNTIME: Leaked<Runtime> = Leaked::new();

const RTLD_DEFAULT: *mut c_void = std::ptr::null_mut();
/// `RTLD_DL_SYMENT` for `dladdr1` (glibc's dlfcn.h).
const RTLD_DL_SYMENT: libc::c_int = 1;

fn sym(name: &CStr) -> u64 {
    crate::dlsym::real_dlsym(RTLD_DEFAULT, name) as u64
}

/// The interpreter of this process, looked up on the first call; a capture made while another
/// thread looks waits for its answer, up to [`LOOKUP_WAIT`].
#[inline(always)]
pub fn runtime() -> Option<&'static Runtime> {
    match STATE.load(Ordering::Acquire) {
        PRESENT => present(),
        UNKNOWN => look(),
        LOOKING => wait_for_lookup(),
        _ => None,
    }
}

#[inline(always)]
fn present() -> Option<&'static Runtime> {
    // Published before PRESENT (release/acquire), so never `None` here.
    RUNTIME.get()
}

/// The longest a capture waits for another thread's lookup (which takes tens of microseconds:
/// a few `dlsym` calls and one read of the debug offsets). Bounded, so that a lookup that
/// cannot finish, because it waits for a lock the waiting thread holds (the loader's, when CUDA
/// is called from a library constructor), only costs this once: the capture then goes on
/// without Python frames.
const LOOKUP_WAIT: std::time::Duration = std::time::Duration::from_millis(50);

/// Many threads whose first CUDA calls come at once (a free-threaded program's workers, or
/// data-loader threads) would otherwise all record their first stacks without Python frames.
#[cold]
#[inline(never)]
fn wait_for_lookup() -> Option<&'static Runtime> {
    let start = std::time::Instant::now();
    let mut spins = 0u32;
    loop {
        match STATE.load(Ordering::Acquire) {
            PRESENT => return present(),
            LOOKING if start.elapsed() < LOOKUP_WAIT => {
                spins += 1;
                if spins < 100 {
                    std::hint::spin_loop();
                } else {
                    std::thread::sleep(std::time::Duration::from_micros(20));
                }
            }
            // A forked child whose parent was looking (`forget_in_child`): look here.
            UNKNOWN => return look(),
            _ => return None,
        }
    }
}

#[cold]
#[inline(never)]
fn look() -> Option<&'static Runtime> {
    if STATE
        .compare_exchange(UNKNOWN, LOOKING, Ordering::AcqRel, Ordering::Acquire)
        .is_err()
    {
        return wait_for_lookup();
    }
    match detect() {
        Some(rt) => {
            let rt = RUNTIME.publish(rt);
            STATE.store(PRESENT, Ordering::Release);
            Some(rt)
        }
        None => {
            STATE.store(ABSENT, Ordering::Release);
            None
        }
    }
}

/// In a forked child: a lookup the parent had under way when it forked is looked for again.
pub fn forget_in_child() {
    let _ = STATE.compare_exchange(LOOKING, UNKNOWN, Ordering::AcqRel, Ordering::Acquire);
}

/// Turns Python frames off for the rest of the process.
fn turn_off() {
    STATE.store(ABSENT, Ordering::Release);
}

fn version() -> Option<(u32, u32)> {
    let v = sym(c"Py_Version");
    if v != 0 {
        // SAFETY: `Py_Version` is libpython's `const unsigned long` (3.11+).
        let hex = unsafe { std::ptr::read_volatile(v as *const libc::c_ulong) } as u64;
        return Some((((hex >> 24) & 0xff) as u32, ((hex >> 16) & 0xff) as u32));
    }
    let f = sym(c"Py_GetVersion");
    if f == 0 {
        return None;
    }
    type GetVersion = unsafe extern "C" fn() -> *const libc::c_char;
    // SAFETY: `Py_GetVersion` takes nothing and returns a static string; it needs no GIL.
    let s = unsafe { std::mem::transmute::<u64, GetVersion>(f)() };
    if s.is_null() {
        return None;
    }
    // SAFETY: a NUL-terminated static string.
    let text = unsafe { CStr::from_ptr(s) }.to_bytes();
    let mut parts = text
        .split(|&c| c == b'.' || c == b' ')
        .map(|p| std::str::from_utf8(p).ok().and_then(|p| p.parse::<u32>().ok()));
    Some((parts.next()??, parts.next()??))
}

fn symbol_range(addr: u64) -> (u64, u64) {
    if addr == 0 {
        return (0, 0);
    }
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    let mut entry: *const libc::Elf64_Sym = std::ptr::null();
    // SAFETY: dladdr1 only reads the loader's tables; both out-pointers are valid.
    let ok = unsafe {
        libc::dladdr1(
            addr as *const c_void,
            info.as_mut_ptr(),
            (&raw mut entry).cast(),
            RTLD_DL_SYMENT,
        )
    };
    if ok == 0 || entry.is_null() {
        return (0, 0);
    }
    // SAFETY: dladdr1 succeeded and pointed `entry` at the symbol's table entry.
    let size = unsafe { (*entry).st_size };
    if size == 0 {
        return (0, 0);
    }
    (addr, addr + size)
}

/// The layout of this build of `major.minor`: on 3.13 and later, the default or the
/// free-threaded one as the offsets the interpreter publishes for debuggers (read from the
/// start of `_PyRuntime`) say, and only if every offset it publishes that the walk uses agrees
/// with the layout: a build whose structures differ from its release's is refused here rather
/// than by failed walks. Earlier versions publish none (and have no free-threaded build).
fn build_layout(major: u32, minor: u32) -> Result<&'static Layout, String> {
    let Some(d) = layout::debug_offsets(major, minor) else {
        return layout::for_build(major, minor, false).ok_or_else(|| "not supported".into());
    };
    let runtime = sym(c"_PyRuntime");
    if runtime == 0 {
        return Err("no _PyRuntime symbol".into());
    }
    compare_published(major, minor, d, |off| {
        let mut b = [0u8; 8];
        if read::copy(runtime + off, &mut b) {
            Ok(u64::from_ne_bytes(b))
        } else {
            Err(format!("_PyRuntime unreadable at +{off}"))
        }
    })
}

/// [`build_layout`] on the words `word(offset)` of a `_Py_DebugOffsets`.
fn compare_published(
    major: u32,
    minor: u32,
    d: &layout::DebugOffsets,
    word: impl Fn(u64) -> Result<u64, String>,
) -> Result<&'static Layout, String> {
    if word(0)?.to_ne_bytes() != *layout::DEBUG_COOKIE {
        return Err("no debug offsets at the start of _PyRuntime".into());
    }
    let hex = word(layout::DEBUG_VERSION)?;
    if ((hex >> 24) & 0xff, (hex >> 16) & 0xff) != (major as u64, minor as u64) {
        return Err(format!("the debug offsets are of another version ({hex:#x})"));
    }
    let free_threaded = word(layout::DEBUG_FREE_THREADED)? != 0;
    let build = if free_threaded { "free-threaded build" } else { "build" };
    let layout = layout::for_build(major, minor, free_threaded).ok_or_else(|| format!("a {build} not supported"))?;
    for (name, ours, at) in layout.published(d) {
        let theirs = word(at)?;
        if theirs != ours {
            return Err(format!(
                "this {build} puts {name} at {theirs}, not {ours} as its release does"
            ));
        }
    }
    Ok(layout)
}

fn detect() -> Option<Runtime> {
    let state = sym(c"PyGILState_GetThisThreadState");
    if state == 0 {
        return None;
    }
    let (major, minor) = version()?;
    if layout::for_build(major, minor, false).is_none() {
        crate::diag::line(format_args!(
            "Python {major}.{minor}: no Python frames in stacks (supported: 3.10 to 3.15)"
        ));
        return None;
    }
    // Builds whose object header is larger than the default one (named before the offsets
    // below would differ because of it).
    if sym(c"_Py_PrintReferenceAddresses") != 0 {
        crate::diag::line(format_args!(
            "Python {major}.{minor} built with Py_TRACE_REFS: no Python frames in stacks"
        ));
        return None;
    }
    let layout = match build_layout(major, minor) {
        Ok(layout) => layout,
        Err(why) => {
            crate::diag::line(format_args!(
                "Python {major}.{minor}: {why}; no Python frames in stacks"
            ));
            return None;
        }
    };
    let finalizing = match sym(c"Py_IsFinalizing") {
        0 => sym(c"_Py_IsFinalizing"),
        f => f,
    };
    if finalizing == 0 {
        return None;
    }
    let (code_type, str_type, bytes_type) = (sym(c"PyCode_Type"), sym(c"PyUnicode_Type"), sym(c"PyBytes_Type"));
    if code_type == 0 || str_type == 0 || bytes_type == 0 {
        return None;
    }
    Some(Runtime {
        layout,
        // SAFETY: the address of libpython's `PyGILState_GetThisThreadState`, found by name.
        this_thread_state: unsafe { std::mem::transmute::<u64, unsafe extern "C" fn() -> *mut c_void>(state) },
        // SAFETY: libpython's `Py_IsFinalizing`/`_Py_IsFinalizing` (no arguments, an int),
        // found by name.
        finalizing: unsafe { std::mem::transmute::<u64, unsafe extern "C" fn() -> libc::c_int>(finalizing) },
        code_type,
        str_type,
        bytes_type,
        eval: symbol_range(sym(c"_PyEval_EvalFrameDefault")),
        proven: AtomicBool::new(false),
        careful_left: AtomicU32::new(CAREFUL_TRIES),
        off: AtomicBool::new(false),
    })
}

/// Mixes one value into a running hash of Python frames.
#[inline(always)]
fn mix(h: u64, v: u64) -> u64 {
    (h ^ v).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29)
}

impl Runtime {
    /// Whether a native return address lies in the interpreter's eval loop.
    #[inline(always)]
    pub fn in_eval_loop(&self, addr: u64) -> bool {
        addr.wrapping_sub(self.eval.0) < self.eval.1 - self.eval.0
    }

    /// Writes the calling thread's Python frames into `out`, innermost first; returns how
    /// many, and a hash of them (0 when there are none).
    #[inline]
    pub fn capture(&self, out: &mut [PyFrame]) -> (usize, u64) {
        if self.proven.load(Ordering::Relaxed) {
            return self.walk(Mem::Direct, out).map_or((0, 0), |(n, h, _)| (n, h));
        }
        self.capture_careful(out)
    }

    #[cold]
    fn capture_careful(&self, out: &mut [PyFrame]) -> (usize, u64) {
        match self.walk(Mem::Careful, out) {
            Some((n, h, _)) if n > 0 => {
                self.proven.store(true, Ordering::Relaxed);
                (n, h)
            }
            Some((_, _, saw_frames)) => {
                // Frames but no code object in them: the layout may not be this build's.
                // (A thread without Python frames proves nothing either way.)
                if saw_frames && self.careful_left.fetch_sub(1, Ordering::Relaxed) == 1 {
                    turn_off();
                }
                (0, 0)
            }
            None => {
                if !self.off.swap(true, Ordering::Relaxed) {
                    turn_off();
                    crate::diag::line(format_args!(
                        "the Python {}.{}{} interpreter's frames could not be read; no Python frames in stacks",
                        self.layout.version >> 8,
                        self.layout.version & 0xff,
                        if self.layout.free_threaded { "t" } else { "" }
                    ));
                }
                (0, 0)
            }
        }
    }

    /// Where the bytecode that `frame` (running `code`) executes starts: the code object's own,
    /// or on free-threaded 3.14+ the copy of it that the frame's `tlbc_index` names (`None`
    /// inside: an index the array does not hold). Index 0 is the code object's own bytecode,
    /// what the main thread and every thread with `-X tlbc=0` run. The array is replaced by a
    /// larger copy when a thread with a higher index first runs the code, and the old one is
    /// freed after a grace period that this thread (in a CUDA call, perhaps detached from the
    /// interpreter) does not hold up: an entry read in that moment may come from freed memory,
    /// so it is checked like every pointer, and the offset against the code's length.
    #[inline(always)]
    fn bytecode(&self, mem: Mem, frame: u64, code: u64, code_start: u64) -> Option<Option<u64>> {
        let own = code + code_start;
        let Some(t) = self.layout.tlbc else {
            return Some(Some(own));
        };
        let index = mem.i32(frame + t.frame_index)?;
        if index == 0 {
            return Some(Some(own));
        }
        let array = mem.ptr(code + t.code_array)?;
        if index < 0 || !read::plausible(array) || index as u64 >= mem.ptr(array)? {
            return Some(None);
        }
        let start = mem.ptr(array + CODE_ARRAY_ENTRIES + 8 * index as u64)?;
        Some(read::plausible(start).then_some(start))
    }

    /// The walk: frames written, their hash, and whether the chain held any frame at all.
    /// `None`: a read failed (only in careful mode; direct reads never fail, they are only
    /// made once the layout is proven and on pointers that pass the checks).
    #[inline(always)]
    fn walk(&self, mem: Mem, out: &mut [PyFrame]) -> Option<(usize, u64, bool)> {
        // SAFETY: `Py_IsFinalizing` reads one atomic field of the runtime; it needs no GIL.
        if unsafe { (self.finalizing)() } != 0 {
            return Some((0, 0, false));
        }
        // SAFETY: `PyGILState_GetThisThreadState` reads a thread-local of the interpreter and
        // needs no GIL; it returns NULL on threads that have no thread state.
        let ts = unsafe { (self.this_thread_state)() } as u64;
        if ts == 0 {
            return Some((0, 0, false));
        }
        let l = self.layout;
        let mut frame = match l.chain {
            Chain::Frame(off) | Chain::Current(off) => mem.ptr(ts + off)?,
            Chain::CFrame { cframe, current } => {
                let c = mem.ptr(ts + cframe)?;
                if c == 0 {
                    return Some((0, 0, false));
                }
                mem.ptr(c + current)?
            }
        };
        let mut n = 0;
        let mut h = 0x243f_6a88_85a3_08d3u64;
        let mut steps = 0;
        while frame != 0 && n < out.len() && steps < 4 * MAX_FRAMES {
            steps += 1;
            if !read::plausible(frame) {
                break;
            }
            let previous = mem.ptr(frame + l.frame_previous)?;
            if let Entry::Owner(owner, runs_none) = l.entry {
                if mem.u8(frame + owner)? >= runs_none {
                    // The first such frame outside a group is its eval loop's (a thread's
                    // base frame may follow the outermost one).
                    if n > 0 && !out[n - 1].entry {
                        out[n - 1].entry = true;
                        out[n - 1].boundary = frame;
                    }
                    frame = previous;
                    continue;
                }
            }
            let code = mem.ptr(frame + l.frame_code)? & !l.frame_code_tags;
            if !read::plausible(code) || mem.ptr(code + l.objects.ob_type)? != self.code_type {
                frame = previous;
                continue;
            }
            let offset = match l.instr {
                Instr::LastI { lasti, co_code } => {
                    let units = mem.i32(frame + lasti)?;
                    let bytes = mem.ptr(code + co_code)?;
                    if units < 0 || !read::plausible(bytes) {
                        None
                    } else {
                        let len = mem.ptr(bytes + l.objects.ob_size)?;
                        let at = units as u64 * 2;
                        (at < len).then_some(at)
                    }
                }
                Instr::Pointer { ptr, code_start } => match self.bytecode(mem, frame, code, code_start)? {
                    Some(start) => {
                        let at = mem.ptr(frame + ptr)?.wrapping_sub(start);
                        // Below the start: a frame that has not begun (CPython skips those too).
                        let units = mem.ptr(code + l.objects.ob_size)?;
                        (at < units.saturating_mul(2)).then_some(at)
                    }
                    None => None,
                },
            };
            let Some(offset) = offset else {
                frame = previous;
                continue;
            };
            let entry = match l.entry {
                Entry::EveryFrame => true,
                Entry::Flag(off) => mem.u8(frame + off)? != 0,
                Entry::Owner(..) => false,
            };
            let table = mem.ptr(code + l.code_linetable)?;
            out[n] = PyFrame {
                code,
                table,
                offset: offset as u32,
                entry,
                boundary: 0,
            };
            h = mix(mix(mix(h, code), table), offset << 1 | entry as u64);
            n += 1;
            frame = previous;
        }
        if n == 0 {
            return Some((0, 0, steps > 0));
        }
        // The outermost frame always ends its group (a thread's first eval-loop call).
        out[n - 1].entry = true;
        Some((n, crate::fingerprint::finish_hash(h) | 1, true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `_Py_DebugOffsets` as version 3.`minor`'s default or free-threaded build publishes
    /// it, by offset.
    fn published(minor: u32, free_threaded: bool) -> std::collections::HashMap<u64, u64> {
        let (l, d) = (
            layout::for_build(3, minor, free_threaded).unwrap(),
            layout::debug_offsets(3, minor).unwrap(),
        );
        let mut words: std::collections::HashMap<u64, u64> =
            l.published(d).into_iter().map(|(_, ours, at)| (at, ours)).collect();
        words.insert(0, u64::from_ne_bytes(*layout::DEBUG_COOKIE));
        words.insert(layout::DEBUG_VERSION, 0x0300_0000 | u64::from(minor) << 16 | 0x02f0);
        words.insert(layout::DEBUG_FREE_THREADED, u64::from(free_threaded));
        words
    }

    fn compare(minor: u32, words: &std::collections::HashMap<u64, u64>) -> Result<&'static Layout, String> {
        compare_published(3, minor, layout::debug_offsets(3, minor).unwrap(), |off| {
            words.get(&off).copied().ok_or(format!("nothing at {off}"))
        })
    }

    #[test]
    fn published_offsets_that_match_pass_and_any_difference_is_named() {
        for minor in 13..=15 {
            for ft in [false, true] {
                let words = published(minor, ft);
                let l = compare(minor, &words).unwrap();
                assert_eq!((l.version, l.free_threaded), (0x0300 | minor, ft));

                // The flag chooses the layout: the other build's offsets do not pass.
                let mut flipped = words.clone();
                flipped.insert(layout::DEBUG_FREE_THREADED, u64::from(!ft));
                let err = compare(minor, &flipped).unwrap_err();
                assert!(err.contains("as its release does"), "{err}");
                assert_eq!(err.contains("free-threaded"), !ft, "{err}");

                let mut other_version = words.clone();
                other_version.insert(layout::DEBUG_VERSION, 0x030c_00f0);
                assert!(compare(minor, &other_version).unwrap_err().contains("another version"));

                let mut no_cookie = words.clone();
                no_cookie.insert(0, 0);
                assert!(compare(minor, &no_cookie).unwrap_err().contains("no debug offsets"));

                let d = layout::debug_offsets(3, minor).unwrap();
                let mut moved = words.clone();
                moved.insert(d.frame_owner, 80);
                let err = compare(minor, &moved).unwrap_err();
                assert!(err.contains("interpreter_frame.owner at 80"), "{err}");

                if minor >= 14 {
                    // A default build publishes 0 for thread-local bytecode; a free-threaded
                    // one where it is.
                    let mut tlbc = words.clone();
                    tlbc.insert(d.frame_tlbc_index, if ft { 0 } else { 72 });
                    let err = compare(minor, &tlbc).unwrap_err();
                    assert!(err.contains("interpreter_frame.tlbc_index at"), "{err}");
                }
            }
        }
    }
}
