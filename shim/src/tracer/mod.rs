//! Tracing state of the process: started on the first recorded CUDA call, never before (a
//! process that never calls CUDA writes no file), restarted in a forked child.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt;
use std::sync::atomic::{AtomicU32, AtomicU8, Ordering};
use std::sync::Mutex;

use gpuleak_format::{
    Alloc, Api, Body, Ctx, CuResult, Exit, Fields, Free, HostFnRan, Lost, Module, ProcessInfo, Ptr, Rank, RecordRef,
    Seq, StackId, Stream,
};

use crate::config::{self, Config, TraceTarget, MAX_DEPTH};
use crate::guard::{self, HookGuard};
use crate::leaked::Leaked;
use crate::modules;
use crate::python::{self, Codes};
use crate::stacks::{self, Stacks};
use crate::writer::{self, Writer};

mod capture;

const OFF: u8 = 0;
const STARTING: u8 = 1;
const ON: u8 = 2;
const DISABLED: u8 = 3;

static STATE: AtomicU8 = AtomicU8::new(OFF);
static CURRENT: Leaked<Tracer> = Leaked::new();

/// A started trace.
pub struct Tracer {
    writer: Writer,
    start_ns: u64,
    clock: libc::clockid_t,
    object_stacks: bool,
    depth: usize,
    free_stacks: bool,
    sync_stacks: u32,
    stacks: Stacks,
    modules: Mutex<ModuleSet>,
    own_text: (u64, u64),
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
    crate::sys::clock_ns(clock)
}

/// The running tracer, starting it on first use. `None` when disabled or start-up failed.
#[inline]
pub fn get() -> Option<&'static Tracer> {
    if let Some(t) = CURRENT.get() {
        return Some(t);
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
                let Some(t) = start() else {
                    STATE.store(DISABLED, Ordering::Release);
                    return None;
                };
                let t = CURRENT.publish(t);
                STATE.store(ON, Ordering::Release);
                t.write_preamble();
                return Some(t);
            }
            Err(DISABLED) => return None,
            Err(ON) => return CURRENT.get(),
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

/// One successful stream-ordered call in this many, on each thread, samples its pool
/// (`GPULEAK_POOL_SAMPLE`, parsed with the other settings when tracing starts; 0 never).
static POOL_EVERY: AtomicU32 = AtomicU32::new(crate::config::POOL_SAMPLE_DEFAULT);

/// The pool sampling period (see `exports::pools`).
pub fn pool_every() -> u32 {
    POOL_EVERY.load(Ordering::Relaxed)
}

fn start() -> Option<Tracer> {
    // A setuid program: not one setting read, not one file created (the line is said once).
    if config::passthrough_only() {
        return None;
    }
    let pid = crate::sys::getpid();
    let config = Config::from_env(pid);
    POOL_EVERY.store(config.pool_sample, Ordering::Relaxed);
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
    let path = match config::trace_target(config.output.as_deref(), &program_name(), pid) {
        TraceTarget::File(path) => path,
        TraceTarget::Nowhere { path, kind } => {
            crate::diag::line(format_args!(
                "GPULEAK_OUTPUT={:?} is {kind}, not a file or a directory; tracing is off, the program continues",
                path.to_string_lossy()
            ));
            return None;
        }
    };
    let writer = match Writer::create(&path, pid, start_unix, config.max_trace) {
        Ok(w) => w,
        Err(e) => {
            crate::diag::line(format_args!("{e}; tracing is off, the program continues"));
            return None;
        }
    };
    let depth = match config.stack_depth.min(MAX_DEPTH) {
        0 => 0,
        depth => start_unwinder(config.unwind, depth),
    };
    let own_text = own_text_range();
    crate::table::resolve_up_front();
    Some(Tracer {
        writer,
        start_ns,
        clock: config.clock,
        object_stacks: config.object_stacks,
        depth,
        free_stacks: config.free_stacks,
        sync_stacks: config.sync_stacks,
        stacks: Stacks::new(),
        modules: Mutex::new(ModuleSet::default()),
        own_text,
        python: config.python,
        codes: Box::default(),
    })
}

/// Prepares the unwinder and checks that it can walk this thread's stack; returns the depth to
/// record (0: no stacks). Prints at most one line: why stacks are missing, or which method
/// replaced the one asked for.
fn start_unwinder(method: gpuleak_unwind::Method, depth: usize) -> usize {
    let used = match gpuleak_unwind::init(method) {
        Ok(used) => used,
        Err(e) => {
            crate::diag::line(format_args!(
                "cannot capture stacks ({e}); allocations are recorded without stacks"
            ));
            return 0;
        }
    };
    // The walkers learn a thread's stack bounds from pthread_getattr_np, which for the main
    // thread reads /proc/self/maps: with no descriptor free every method but gcc walks nothing
    // on it, and the fallback chain ends on one that records empty stacks. Only that cause
    // turns stacks off: a first call from a coroutine or an alternate signal stack may walk
    // nothing here and more elsewhere.
    let mut probe = [0u64; 4];
    if gpuleak_unwind::capture(0, &mut probe) == 0 {
        if let Some(why) = unwind_failure() {
            crate::diag::line(format_args!(
                "cannot capture stacks: {why}; allocations are recorded without stacks"
            ));
            return 0;
        }
    }
    if used != method {
        let why = gpuleak_unwind::init_fallback_reason().map_or_else(String::new, |e| format!(" ({e})"));
        crate::diag::line(format_args!(
            "GPULEAK_UNWIND: {method} is unavailable{why}; stacks come from {used}"
        ));
    }
    depth
}

/// Why the unwinder walked nothing on this thread, when the cause is that /proc/self/maps
/// cannot be opened; `None` for any other cause.
fn unwind_failure() -> Option<String> {
    let fd = crate::sys::open(c"/proc/self/maps", libc::O_RDONLY | libc::O_CLOEXEC, 0);
    let errno = std::io::Error::last_os_error();
    if fd >= 0 {
        crate::sys::close(fd);
        return None;
    }
    if matches!(errno.raw_os_error(), Some(libc::EMFILE) | Some(libc::ENFILE)) {
        let limit = if let Some(limit) = crate::sys::getrlimit(libc::RLIMIT_NOFILE) {
            format!(" (RLIMIT_NOFILE is {})", limit.rlim_cur)
        } else {
            String::new()
        };
        return Some(format!(
            "no file descriptor is free{limit} to read the stack's bounds from /proc/self/maps"
        ));
    }
    Some(format!("cannot read /proc/self/maps ({errno})"))
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
        crate::sys::at_fork_child(in_forked_child);
    });
}

/// In a forked child: the parent's trace is not ours; the next CUDA call starts a new one.
extern "C" fn in_forked_child() {
    writer::GENERATION.fetch_add(1, Ordering::AcqRel);
    writer::in_forked_child();
    crate::scratch::in_forked_child();
    stacks::forget_recent();
    python::forget_in_child();
    let p = CURRENT.forget();
    if !p.is_null() {
        // SAFETY: the tracer is leaked, never freed, and unpublished now; the child has one
        // thread, this one, inside the fork handler: no other reference to it is in use.
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
    let Some(t) = CURRENT.get() else {
        return;
    };
    let unknown = crate::table::UNKNOWN_VARIANTS.load(Ordering::Relaxed);
    let lost = t.writer.lost.load(Ordering::Relaxed);
    let mut last: Vec<(Pending, Body<'_>)> = Vec::with_capacity(3);
    if unknown > 0 {
        let body = Lost {
            count: unknown as u64,
            reason: 2,
        };
        last.push((t.stamp(), body.into()));
    }
    if lost > 0 {
        last.push((t.stamp(), Lost { count: lost, reason: 1 }.into()));
    }
    let nested = guard::NESTED.load(Ordering::Relaxed);
    if nested > 0 {
        last.push((
            t.stamp(),
            Lost {
                count: nested,
                reason: 3,
            }
            .into(),
        ));
    }
    last.push((t.stamp(), Exit { code: 0, how: 0 }.into()));
    let refs: Vec<RecordRef<'_, '_>> = last
        .iter()
        .map(|(p, body)| RecordRef {
            seq: Seq(p.seq),
            time_ns: p.time,
            body,
        })
        .collect();
    t.writer.close(&refs);
}

impl Tracer {
    /// The absolute path of this process's trace file.
    pub fn trace_path(&self) -> &std::ffi::OsStr {
        self.writer.absolute_path()
    }

    #[inline]
    fn stamp(&self) -> Pending {
        Pending {
            seq: self.writer.take_seq(),
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
        let (pid, ppid) = (crate::sys::getpid(), crate::sys::getppid());
        let exe = crate::modules::main_program();
        let args: Vec<std::borrow::Cow<'_, str>> = std::fs::read("/proc/self/cmdline")
            .unwrap_or_default()
            .split(|&c| c == 0)
            .filter(|a| !a.is_empty())
            .map(|a| String::from_utf8_lossy(a).into_owned().into())
            .collect();
        let mut host = [0u8; 256];
        crate::sys::gethostname(&mut host);
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
        if let Some(r) = crate::rank::current() {
            self.now(
                &Rank {
                    rank: r.rank,
                    local_rank: r.local_rank.unwrap_or(Rank::UNKNOWN),
                    world_size: r.world_size.unwrap_or(Rank::UNKNOWN),
                    launcher: r.launcher.into(),
                }
                .into(),
            );
        }
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

    /// The current context, asked of the driver's own `cuCtxGetCurrent` (a getter that
    /// cannot change the program's error state).
    fn current_ctx(&self) -> u64 {
        let Some(f) = crate::dlsym::driver_fn(crate::dlsym::Getter::cuCtxGetCurrent) else {
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

/// Records that the driver started the host function the shim numbered `id`
/// ([`HostFnRan`]), from the wrapper the driver calls (`exports::ordering::host_fns`): on a
/// thread of the driver's, or on the thread that queued the function, inside the driver call
/// that queued it. It takes no guard, for the second case happens inside a hook, and needs
/// none: the driver runs host functions inside its own code, never inside the shim's own
/// writing on that thread (a hook writes only after the driver returned), so this write never
/// interrupts another on its thread. Starts no trace: nothing is written when none runs, or
/// after it was closed (counted as lost then, like any late record).
pub fn host_fn_ran(id: u64) {
    if let Some(t) = CURRENT.get() {
        t.now_fields(&HostFnRan { id });
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
