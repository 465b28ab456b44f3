//! Tracing state of the process: started on the first recorded CUDA call, never before (a
//! process that never calls CUDA writes no file), restarted in a forked child.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::sync::atomic::{AtomicPtr, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Mutex;

use gpuleak_format::{
    Addrs, Alloc, Api, Body, Ctx, CuResult, Exit, Fields, Free, Lost, Module, ProcessInfo, Ptr, PyFrames, RecordRef,
    Seq, Stack, StackId, Stream,
};

use crate::config::{Config, MAX_DEPTH};
use crate::guard::{self, HookGuard};
use crate::modules;
use crate::python::{self, Codes, PyFrame};
use crate::stacks::{self, Stacks};
use crate::writer::{self, Writer};

const OFF: u8 = 0;
const STARTING: u8 = 1;
const ON: u8 = 2;
const DISABLED: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(OFF);
static CURRENT: AtomicPtr<Tracer> = AtomicPtr::new(std::ptr::null_mut());

/// Frames that belong to the shim itself sit on top of every captured stack.
const OWN_FRAMES: usize = 16;

/// Per-thread stack buffers, kept between captures so nothing is zeroed on the hot path.
#[derive(Clone)]
struct StackScratch {
    /// The tracer the last stack was interned in (a forked child has a new one).
    owner: usize,
    id: u32,
    /// The unwinder's keys of recent captures with the stack ids they made (key 0: none), at
    /// slot `key % KEYED`, room for twice as many as the unwinder keeps memos: a loop
    /// allocating from many sites in turn replays each site's capture, and finds its id here.
    keyed: [(u64, u32); KEYED],
    len: usize,
    last: [u64; MAX_DEPTH],
    buf: [u64; MAX_DEPTH + OWN_FRAMES],
}

/// Recent capture keys remembered per thread (a power of two). The unwinder numbers a thread's
/// walks in turn, so the keys of its memos (the last walks, mostly) fall in distinct slots.
const KEYED: usize = (2 * gpuleak_unwind::MEMOS).next_power_of_two();

/// The slot of `keyed` for `key`.
#[inline(always)]
fn keyed_slot(key: u64) -> usize {
    key as usize & (KEYED - 1)
}

impl StackScratch {
    const EMPTY: StackScratch = StackScratch {
        owner: 0,
        id: 0,
        keyed: [(0, 0); KEYED],
        len: 0,
        last: [0; MAX_DEPTH],
        buf: [0; MAX_DEPTH + OWN_FRAMES],
    };

    /// The stack id of a recent capture with `key` by this thread for the tracer `owner`: the
    /// unwinder copied that capture's frames, so nothing needs filtering, comparing or looking
    /// up. Forgets everything kept for another tracer (a forked child's new one).
    #[inline(always)]
    fn recent(&mut self, owner: usize, key: u64) -> Option<StackId> {
        if self.owner != owner {
            self.keyed = [(0, 0); KEYED];
            self.len = 0;
            return None;
        }
        if key == 0 {
            return None;
        }
        let (k, id) = self.keyed[keyed_slot(key)];
        (k == key).then_some(StackId(id))
    }

    /// Moves the program's frames among the first `n` of `buf` to its front, at most `depth`,
    /// and returns how many: the shim's own frames (its wrappers, also the runtime tag wrappers
    /// between the program and the runtime, all inside `own_text`) are never the program's.
    #[inline(always)]
    fn keep_program_frames(&mut self, n: usize, (lo, hi): (u64, u64), depth: usize) -> usize {
        let mut kept = 0;
        for i in 0..n {
            let a = self.buf[i];
            if (a < lo || a >= hi) && kept < depth {
                self.buf[kept] = a;
                kept += 1;
            }
        }
        kept
    }

    /// Keeps `id` as the stack of the capture with `key` (0: none).
    #[inline(always)]
    fn remember(&mut self, key: u64, id: u32) {
        if key != 0 {
            self.keyed[keyed_slot(key)] = (key, id);
        }
    }
}

/// A Python thread's capture state besides [`StackScratch`] (apart from it, so that processes
/// without Python keep the native scratch and its path exactly as they were).
struct PyScratch {
    /// The hash of the Python frames of the thread's last stack (0: none).
    last: u64,
    frames: [PyFrame; python::MAX_FRAMES],
}

/// The unwinder's replay key of a capture combined with the hash of its Python frames (0
/// without Python frames: the key itself). The same native frames often run different Python
/// code, so a replayed native capture alone must not give back a stack id. 0 (no key) stays 0.
#[inline(always)]
fn with_python(key: u64, py_hash: u64) -> u64 {
    if key == 0 {
        0
    } else {
        key ^ py_hash
    }
}

thread_local! {
    // Const-initialised, no destructor: safe from any context.
    static SCRATCH: std::cell::RefCell<StackScratch> = const { std::cell::RefCell::new(StackScratch::EMPTY) };
    static PY_SCRATCH: std::cell::RefCell<PyScratch> = const {
        std::cell::RefCell::new(PyScratch {
            last: 0,
            frames: [PyFrame::EMPTY; python::MAX_FRAMES],
        })
    };
}

/// A started trace.
pub struct Tracer {
    writer: Writer,
    seq: AtomicU64,
    start_ns: u64,
    clock: libc::clockid_t,
    object_stacks: bool,
    depth: usize,
    free_stacks: bool,
    sync_stacks: u32,
    stacks: Stacks,
    modules: Mutex<ModuleSet>,
    own_text: (u64, u64),
    ctx_getter: AtomicUsize,
    /// Python frames wanted (`GPULEAK_PYTHON`); the interpreter is looked up at the first
    /// capture.
    python: bool,
    codes: Box<Codes>,
}

#[derive(Default)]
struct ModuleSet {
    ranges: Vec<(u64, u64)>,
    loader_generation: (u64, u64),
}

/// A sequence number and time taken before a driver call (frees, teardown).
#[derive(Clone, Copy)]
pub struct Pending {
    seq: u64,
    time: u64,
}

#[inline]
fn clock_ns(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: clock_gettime writes the timespec we pass.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The running tracer, starting it on first use. `None` when disabled or start-up failed.
#[inline]
pub fn get() -> Option<&'static Tracer> {
    let p = CURRENT.load(Ordering::Acquire);
    if !p.is_null() {
        // SAFETY: a published tracer is leaked and never freed.
        return Some(unsafe { &*p });
    }
    // Disabled (by setting or a failed start): a plain load, no compare-and-swap per call.
    if STATE.load(Ordering::Relaxed) == DISABLED {
        return None;
    }
    start_slow()
}

#[cold]
fn start_slow() -> Option<&'static Tracer> {
    loop {
        match STATE.compare_exchange(OFF, STARTING, Ordering::AcqRel, Ordering::Acquire) {
            Ok(_) => {
                let t = start();
                let (p, s) = match t {
                    Some(t) => (Box::into_raw(Box::new(t)), ON),
                    None => (std::ptr::null_mut(), DISABLED),
                };
                CURRENT.store(p, Ordering::Release);
                STATE.store(s, Ordering::Release);
                if !p.is_null() {
                    // SAFETY: just published, never freed.
                    let t = unsafe { &*p };
                    t.write_preamble();
                    return Some(t);
                }
                return None;
            }
            Err(DISABLED) => return None,
            Err(ON) => {
                let p = CURRENT.load(Ordering::Acquire);
                // SAFETY: published and never freed.
                return (!p.is_null()).then(|| unsafe { &*p });
            }
            Err(_) => std::thread::yield_now(),
        }
    }
}

fn program_name() -> OsString {
    std::fs::read("/proc/self/comm")
        .map(|mut v| {
            while v.last() == Some(&b'\n') {
                v.pop();
            }
            v.retain(|c| c.is_ascii_alphanumeric() || b"-_.+".contains(c));
            OsString::from_vec(v)
        })
        .unwrap_or_else(|_| "program".into())
}

fn start() -> Option<Tracer> {
    // SAFETY: getpid cannot fail.
    let pid = unsafe { libc::getpid() } as u32;
    let config = Config::from_env(pid);
    crate::exports::pools::set_pool_every(config.pool_sample);
    if config.disabled {
        return None;
    }
    register_process_hooks();
    let start_unix = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    // Both clocks count from the same origin; the coarse one lags by up to one tick, which
    // the saturating subtraction in `stamp` absorbs.
    let start_ns = clock_ns(libc::CLOCK_MONOTONIC_COARSE);
    let path = config
        .output
        .clone()
        .unwrap_or_else(|| writer::default_path(&program_name(), pid));
    let writer = match Writer::create(&path, pid, start_unix) {
        Ok(w) => w,
        Err(e) => {
            crate::diag::line(format_args!("{e}; tracing is off, the program continues"));
            return None;
        }
    };
    let depth = config.stack_depth.min(MAX_DEPTH);
    if depth > 0 {
        match gpuleak_unwind::init(config.unwind) {
            Err(e) => crate::diag::line(format_args!(
                "stack unwinder unavailable ({e}); recording without stacks"
            )),
            Ok(used) if used != config.unwind => {
                let why = gpuleak_unwind::init_fallback_reason().map_or_else(String::new, |e| format!(" ({e})"));
                crate::diag::line(format_args!(
                    "GPULEAK_UNWIND: {} is unavailable{why}; stacks come from {used}",
                    config.unwind
                ));
            }
            Ok(_) => {}
        }
    }
    let own_text = own_text_range();
    Some(Tracer {
        writer,
        seq: AtomicU64::new(1),
        start_ns,
        clock: config.clock,
        object_stacks: config.object_stacks,
        depth,
        free_stacks: config.free_stacks,
        sync_stacks: config.sync_stacks,
        stacks: Stacks::new(),
        modules: Mutex::new(ModuleSet::default()),
        own_text,
        ctx_getter: AtomicUsize::new(0),
        python: config.python,
        codes: Box::default(),
    })
}

fn own_text_range() -> (u64, u64) {
    let here = own_text_range as *const () as u64;
    modules::loaded()
        .0
        .into_iter()
        .find(|m| m.start <= here && here < m.end)
        .map_or((0, 0), |m| (m.start, m.end))
}

fn register_process_hooks() {
    static REGISTERED: std::sync::Once = std::sync::Once::new();
    // A forked child starts tracing again but inherits the handler: register it once.
    REGISTERED.call_once(|| {
        // SAFETY: registering a plain extern "C" function with no preconditions.
        unsafe { libc::pthread_atfork(None, None, Some(in_forked_child)) };
    });
}

/// In a forked child: the parent's trace is not ours; the next CUDA call starts a new one.
extern "C" fn in_forked_child() {
    writer::GENERATION.fetch_add(1, Ordering::AcqRel);
    stacks::forget_recent();
    python::forget_in_child();
    let p = CURRENT.swap(std::ptr::null_mut(), Ordering::AcqRel);
    if !p.is_null() {
        // SAFETY: the tracer is leaked, and the child is single-threaded right now.
        unsafe { (*p).writer.abandon_in_child() };
    }
    STATE.store(OFF, Ordering::Release);
}

/// Written at unload (after the program's atexit handlers and static destructors, which
/// may still free memory).
#[used]
#[unsafe(link_section = ".fini_array")]
static AT_UNLOAD: extern "C" fn() = at_unload;

extern "C" fn at_unload() {
    let p = CURRENT.load(Ordering::Acquire);
    if p.is_null() {
        return;
    }
    // SAFETY: published and never freed.
    let t = unsafe { &*p };
    let unknown = crate::hooks::UNKNOWN_VARIANTS.load(Ordering::Relaxed);
    if unknown > 0 {
        t.now(
            &Lost {
                count: unknown as u64,
                reason: 2,
            }
            .into(),
        );
    }
    t.now(&Exit { code: 0, how: 0 }.into());
    t.writer.close();
}

impl Tracer {
    /// The absolute path of this process's trace file.
    pub fn trace_path(&self) -> &std::ffi::OsStr {
        self.writer.absolute_path()
    }

    #[inline]
    fn stamp(&self) -> Pending {
        Pending {
            seq: self.seq.fetch_add(1, Ordering::AcqRel),
            time: clock_ns(self.clock).saturating_sub(self.start_ns),
        }
    }

    #[inline]
    fn at(&self, p: Pending, body: &Body<'_>) {
        self.writer.write(RecordRef {
            seq: Seq(p.seq),
            time_ns: p.time,
            body,
        });
    }

    fn now(&self, body: &Body<'_>) {
        self.at(self.stamp(), body)
    }

    /// [`now`](Self::now) for a body known by its type (no `Body` built: the hot hooks).
    #[inline]
    fn now_fields<'b, F: Fields<'b>>(&self, body: &F) {
        self.at_fields(self.stamp(), body)
    }

    /// [`at`](Self::at) for a body known by its type.
    #[inline]
    fn at_fields<'b, F: Fields<'b>>(&self, p: Pending, body: &F) {
        self.writer.write_fields(Seq(p.seq), p.time, body);
    }

    fn write_preamble(&self) {
        // SAFETY: getpid/getppid cannot fail.
        let (pid, ppid) = unsafe { (libc::getpid() as u32, libc::getppid() as u32) };
        let exe = crate::modules::main_program();
        let args: Vec<std::borrow::Cow<'_, str>> = std::fs::read("/proc/self/cmdline")
            .unwrap_or_default()
            .split(|&c| c == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned().into())
            .collect();
        let mut host = [0u8; 256];
        // SAFETY: gethostname writes at most len bytes into our buffer.
        unsafe { libc::gethostname(host.as_mut_ptr().cast(), host.len() - 1) };
        let host_len = host.iter().position(|&c| c == 0).unwrap_or(0);
        let start_unix = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let unwinder = if self.depth == 0 {
            "none"
        } else {
            gpuleak_unwind::current_method().name()
        };
        self.now(
            &ProcessInfo {
                pid,
                ppid,
                exe: exe.into(),
                args,
                hostname: String::from_utf8_lossy(&host[..host_len]).into_owned().into(),
                shim_version: env!("CARGO_PKG_VERSION").into(),
                unwinder: unwinder.into(),
                stack_depth: self.depth as u32,
                start_unix_ns: start_unix,
            }
            .into(),
        );
        let mut set = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        self.refresh_modules(&mut set);
    }

    fn refresh_modules(&self, set: &mut ModuleSet) {
        let (mods, generation) = modules::loaded();
        set.loader_generation = generation;
        for m in mods {
            if set.ranges.iter().any(|&(s, e)| s == m.start && e == m.end) {
                continue;
            }
            set.ranges.retain(|&(s, e)| e <= m.start || s >= m.end);
            set.ranges.push((m.start, m.end));
            self.now(
                &Module {
                    base: m.base,
                    start: m.start,
                    end: m.end,
                    path: m.path.into(),
                    build_id: m.build_id.into(),
                }
                .into(),
            );
        }
        set.ranges.sort_unstable();
    }

    /// Makes sure every frame's module has been recorded (libraries loaded after start-up).
    fn cover(&self, frames: &[u64]) {
        let mut set = self.modules.lock().unwrap_or_else(|p| p.into_inner());
        let covered = |set: &ModuleSet, a: u64| {
            let i = set.ranges.partition_point(|&(s, _)| s <= a);
            i > 0 && a < set.ranges[i - 1].1
        };
        if frames.iter().all(|&a| covered(&set, a)) {
            return;
        }
        if modules::generation() != set.loader_generation {
            self.refresh_modules(&mut set);
        }
    }

    /// Captures the calling thread's stack above the shim and interns it.
    #[inline(never)]
    fn stack(&self) -> StackId {
        if self.depth == 0 {
            return StackId::NONE;
        }
        if self.python {
            if let Some(rt) = python::runtime() {
                return self.stack_python(rt);
            }
        }
        let reused = SCRATCH.try_with(|s| s.try_borrow_mut().ok().map(|mut s| self.stack_in(&mut s)));
        match reused {
            Ok(Some(id)) => id,
            // Thread-locals gone (thread exit) or busy: a one-off scratch on the stack.
            _ => self.stack_in(&mut StackScratch::EMPTY.clone()),
        }
    }

    #[inline(always)]
    fn stack_in(&self, s: &mut StackScratch) -> StackId {
        let (n, key) = gpuleak_unwind::capture_keyed(0, &mut s.buf[..self.depth + OWN_FRAMES]);
        let owner = self as *const Tracer as usize;
        if let Some(id) = s.recent(owner, key) {
            return id;
        }
        let kept = s.keep_program_frames(n, self.own_text, self.depth);
        if kept == 0 {
            return StackId::NONE;
        }
        // A loop allocating from one place repeats this thread's last stack: no hash, no
        // table lookup.
        if s.owner == owner && s.len == kept && s.last[..kept] == s.buf[..kept] {
            s.remember(key, s.id);
            return StackId(s.id);
        }
        let frames = &s.buf[..kept];
        let id = self.stacks.intern(stacks::hash(frames), |id| {
            self.cover(frames);
            self.now(
                &Stack {
                    id,
                    frames: Addrs(frames.into()),
                }
                .into(),
            );
        });
        s.owner = owner;
        s.len = kept;
        s.id = id.0;
        s.remember(key, id.0);
        s.last[..kept].copy_from_slice(&s.buf[..kept]);
        id
    }

    /// [`stack`](Self::stack) in a Python process: the native capture of
    /// [`stack_in`](Self::stack_in) plus the thread's Python frames, which take part in every
    /// cache check (the same native frames often run different Python code).
    #[cold]
    #[inline(never)]
    fn stack_python(&self, rt: &python::Runtime) -> StackId {
        let got = SCRATCH.try_with(|s| {
            PY_SCRATCH.try_with(|p| match (s.try_borrow_mut(), p.try_borrow_mut()) {
                (Ok(mut s), Ok(mut p)) => Some(self.stack_in_python(rt, &mut s, &mut p)),
                _ => None,
            })
        });
        match got {
            Ok(Ok(Some(id))) => id,
            // Thread-locals gone (thread exit) or busy: one-off scratches on the stack.
            _ => {
                let mut p = PyScratch {
                    last: 0,
                    frames: [PyFrame::EMPTY; python::MAX_FRAMES],
                };
                self.stack_in_python(rt, &mut StackScratch::EMPTY.clone(), &mut p)
            }
        }
    }

    fn stack_in_python(&self, rt: &python::Runtime, s: &mut StackScratch, p: &mut PyScratch) -> StackId {
        let (n, key) = gpuleak_unwind::capture_keyed(0, &mut s.buf[..self.depth + OWN_FRAMES]);
        let (py_n, py_hash) = rt.capture(&mut p.frames);
        let key = with_python(key, py_hash);
        let owner = self as *const Tracer as usize;
        if let Some(id) = s.recent(owner, key) {
            return id;
        }
        let kept = s.keep_program_frames(n, self.own_text, self.depth);
        if kept == 0 {
            return StackId::NONE;
        }
        if s.owner == owner && s.len == kept && p.last == py_hash && s.last[..kept] == s.buf[..kept] {
            s.remember(key, s.id);
            return StackId(s.id);
        }
        let frames = &s.buf[..kept];
        let pyframes = &p.frames[..py_n];
        let id = self.stacks.intern(stacks::hash(frames) ^ py_hash, |id| {
            self.cover(frames);
            self.now(
                &Stack {
                    id,
                    frames: Addrs(frames.into()),
                }
                .into(),
            );
            if !pyframes.is_empty() {
                self.write_python(rt, id, frames, pyframes);
            }
        });
        s.owner = owner;
        s.len = kept;
        p.last = py_hash;
        s.id = id.0;
        s.remember(key, id.0);
        s.last[..kept].copy_from_slice(&s.buf[..kept]);
        id
    }

    /// Writes where the Python frames of a new stack go among its native frames, describing
    /// their code objects first.
    ///
    /// The rule: each native frame inside `_PyEval_EvalFrameDefault` ran one group of Python
    /// frames (those from an entry frame inwards), so the innermost group goes just before
    /// (on the inner side of) the innermost eval-loop frame, the next group before the next
    /// one, and so on; groups left over (native frames cut by the depth limit, or an eval loop
    /// that cannot be found) go after the last native frame, in order. A group's eval-loop
    /// frame is the one holding its boundary frame on the stack (3.12+,
    /// [`python::NativeFrames`]), else the next one inside the function's symbol.
    #[cold]
    fn write_python(&self, rt: &python::Runtime, id: StackId, native: &[u64], py: &[PyFrame]) {
        let mut triples = Vec::with_capacity(py.len() * 3);
        let mut next = 0;
        let mut i = 0;
        let mut here = None;
        while i < py.len() {
            let end = (i..py.len()).find(|&j| py[j].entry).unwrap_or(py.len() - 1);
            let at = match py[end].boundary {
                0 => None,
                b => here
                    .get_or_insert_with(python::NativeFrames::here)
                    .eval_frame(b, native, next),
            }
            .or_else(|| (next..native.len()).find(|&k| rt.in_eval_loop(native[k])))
            .unwrap_or(native.len());
            for f in &py[i..=end] {
                if let Some(code) = self.codes.id(rt, f, |c| self.now(&c.into())) {
                    triples.extend([at as u64, code as u64, f.offset as u64]);
                }
            }
            next = (at + 1).min(native.len());
            i = end + 1;
        }
        if !triples.is_empty() {
            self.now(
                &PyFrames {
                    stack: id,
                    frames: Addrs(triples.into()),
                }
                .into(),
            );
        }
    }

    /// The current context, asked of the driver's own `cuCtxGetCurrent` (a getter that
    /// cannot change the program's error state).
    fn current_ctx(&self) -> u64 {
        let Some(f) = crate::dl::driver_fn(&self.ctx_getter, c"cuCtxGetCurrent") else {
            return 0;
        };
        type GetCurrent = unsafe extern "C" fn(*mut *mut libc::c_void) -> u32;
        // SAFETY: `f` is the driver's cuCtxGetCurrent, found by name.
        let get: GetCurrent = unsafe { std::mem::transmute::<usize, GetCurrent>(f) };
        let mut ctx = std::ptr::null_mut();
        // SAFETY: writes one pointer into `ctx`.
        if unsafe { get(&mut ctx) } == 0 {
            ctx as u64
        } else {
            0
        }
    }
}

/// Records an allocation (or a failed attempt) after the driver returned; returns the stack
/// id it recorded (the operations features attribute live bytes to it).
#[inline]
pub fn alloc(_g: &HookGuard, api: Api, result: u32, stream: Stream, ptr: u64, size: u64, aux: u64) -> StackId {
    let Some(t) = get() else { return StackId::NONE };
    let stack = t.stack();
    let ctx = Ctx(t.current_ctx());
    let via = guard::via();
    t.now_fields(&Alloc {
        api,
        via,
        result: CuResult(result),
        ctx,
        stream,
        ptr: Ptr(ptr),
        size,
        stack,
        aux,
    });
    stack
}

/// Takes a sequence number before a driver call that releases something.
#[inline]
pub fn before(_g: &HookGuard) -> Option<Pending> {
    get().map(Tracer::stamp)
}

/// Records a free, numbered before its driver call.
#[inline]
pub fn free(_g: &HookGuard, pending: Option<Pending>, api: Api, result: u32, stream: Stream, ptr: u64, size: u64) {
    let (Some(t), Some(p)) = (get(), pending) else { return };
    let stack = if result != 0 || t.free_stacks {
        t.stack()
    } else {
        StackId::NONE
    };
    t.at_fields(
        p,
        &Free {
            api,
            via: guard::via(),
            result: CuResult(result),
            stream,
            ptr: Ptr(ptr),
            size,
            stack,
        },
    );
}

/// Records an event now.
#[inline]
pub fn event<'b, F: Fields<'b>>(_g: &HookGuard, body: F) {
    if let Some(t) = get() {
        t.now_fields(&body);
    }
}

/// [`event`] for a body known by its type (the hot stream-ordering hooks).
#[inline]
pub fn event_fields<'b, F: Fields<'b>>(_g: &HookGuard, body: &F) {
    if let Some(t) = get() {
        t.now_fields(body);
    }
}

/// Records an event numbered before its driver call.
#[inline]
pub fn event_at<'b, F: Fields<'b>>(_g: &HookGuard, pending: Option<Pending>, body: F) {
    if let (Some(t), Some(p)) = (get(), pending) {
        t.at_fields(p, &body);
    }
}

/// The stack of a rare call that always has one (a memory pool's creation or destruction: a
/// handful per process, each far dearer in the driver than a stack).
pub fn call_stack(_g: &HookGuard) -> StackId {
    get().map_or(StackId::NONE, Tracer::stack)
}

/// Creation stack for streams and events (with `GPULEAK_OBJECT_STACKS=1`).
pub fn object_stack(_g: &HookGuard) -> StackId {
    match get() {
        Some(t) if t.object_stacks => t.stack(),
        _ => StackId::NONE,
    }
}

thread_local! {
    // Calls left until the next sampled stack on this thread (const, no destructor).
    static SYNC_SAMPLE: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

/// Records a hot stream-ordering call now (synchronize, wait, record, copy, launch...), with
/// a stack only as `GPULEAK_SYNC_STACKS` asks: never by default, every call, or one call in
/// N on each thread.
#[inline]
pub fn hot_event<'b, F: Fields<'b>>(_g: &HookGuard, make: impl FnOnce(StackId) -> F) {
    let Some(t) = get() else { return };
    let stack = match t.sync_stacks {
        0 => StackId::NONE,
        1 => t.stack(),
        n => {
            let due = SYNC_SAMPLE
                .try_with(|c| {
                    let left = c.get();
                    c.set(if left == 0 { n - 1 } else { left - 1 });
                    left == 0
                })
                .unwrap_or(false);
            if due {
                t.stack()
            } else {
                StackId::NONE
            }
        }
    };
    t.now_fields(&make(stack));
}
