//! Operations features for programs that run for days: live accounting per device, kind and
//! site ([`live`]), a per-device budget and fault injection on the allocation calls
//! ([`faults`]), snapshot records on a signal, a period, an out-of-memory failure or a
//! program's request ([`snapshot`]), a Prometheus endpoint ([`metrics`], served by the
//! background thread in [`server`]) and the C control API behind `gpuleak.h` ([`control`]).
//!
//! Every feature is off by default, and off costs one relaxed load of [`FLAGS`] and a branch
//! per intercepted memory, stream or event call (plus a compare of the result with
//! out-of-memory, for the default snapshot on OOM). Settings are read at the first such call
//! (never in a constructor or in `dlsym`); the background thread, its socket and the signal
//! handler are set up then too.

pub mod control;
pub mod faults;
pub mod graph_live;
pub mod live;
pub mod metrics;
pub mod server;
pub mod settings;
pub mod sites;
pub mod snapshot;

pub use live::Failure;
pub use settings::{settings, BUDGET, FAULTS, FLAGS, LIVE, RESTART, SNAPSHOT_DUE};

use std::sync::atomic::Ordering;

use gpuleak_format::{Api, MemKind, MemLocation, Stream};

use crate::config::{self, CUDA_ERROR_OUT_OF_MEMORY};
use crate::guard::HookGuard;
use crate::tracer;

/// The features on (reading the settings at the first call).
#[inline(always)]
pub fn flags() -> u32 {
    let f = FLAGS.load(Ordering::Relaxed);
    if f & settings::UNINIT != 0 {
        return init();
    }
    f
}

/// Whether site labels are wanted: live accounting is on (metrics, the OOM summary, a
/// budget). Reads the settings when no call has yet (a context call's stack may come before
/// the first allocation): every code object described from then on must be known to
/// [`sites`], or a later stack's innermost frame of the user's could not be told from the
/// interpreter's.
pub fn labels_wanted() -> bool {
    flags() & LIVE != 0
}

#[cold]
#[inline(never)]
fn init() -> u32 {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let mut ops = config::Ops::from_env();
        if ops.disabled {
            ops = config::Ops {
                disabled: true,
                ..config::Ops::default()
            };
        }
        let mut bits = 0;
        if ops.live || ops.limit.is_some() || ops.metrics.is_some() || ops.oom_summary {
            bits |= LIVE;
        }
        if ops.limit.is_some() {
            bits |= BUDGET;
        }
        if !ops.faults.is_empty() {
            faults::set_rules(&ops.faults);
            bits |= FAULTS;
        }
        let signal = ops.snapshot_signal;
        let mut background = ops.metrics.is_some() || ops.snapshot_period.is_some();
        let _ = settings::SETTINGS.set(ops);
        register_fork_handler();
        FLAGS.store(bits, Ordering::Release);
        if let Some(sig) = signal {
            background |= snapshot::install_signal(sig);
        }
        if background {
            server::start_background();
        }
    });
    FLAGS.load(Ordering::Acquire) & !settings::UNINIT
}

fn register_fork_handler() {
    crate::sys::at_fork_child(in_forked_child);
}

/// In a forked child (single-threaded, async-signal-safe work only): the parent's live
/// state and background thread are not the child's. Its own trace starts empty, so does
/// its accounting; the thread is started again at the child's next intercepted call.
extern "C" fn in_forked_child() {
    live::forget_in_child();
    graph_live::forget_in_child();
    sites::forget_in_child();
    faults::forget_in_child();
    snapshot::forget_in_child();
    if server::forget_in_child() {
        FLAGS.fetch_or(RESTART, Ordering::AcqRel);
    }
}

/// Work that a hook does only when some feature is on: a due snapshot, a restart after fork.
#[inline]
fn housekeeping(g: &HookGuard, f: u32) {
    if f & SNAPSHOT_DUE != 0 {
        snapshot::write_due(g);
    }
    if f & RESTART != 0 && FLAGS.fetch_and(!RESTART, Ordering::AcqRel) & RESTART != 0 {
        server::start_background();
    }
}

/// An allocation call with at least one feature on: fault rules, then the budget, then the
/// driver, then the live map. `call` makes the real call and returns (result, pointer or
/// handle, aux, size recorded); `size` is what the program asked for.
#[cold]
#[inline(never)]
pub fn alloc(
    g: &HookGuard,
    f: u32,
    api: Api,
    stream: Stream,
    size: u64,
    aux: u64,
    call: impl FnOnce() -> (u32, u64, u64, u64),
) -> u32 {
    housekeeping(g, f);
    let mut kind = api.mem_kind().unwrap_or(MemKind::Device);
    if f & FAULTS != 0 {
        if let Some(error) = faults::hit(api) {
            let place = live::Place::here_if(f & LIVE != 0);
            return refused(g, api, stream, size, aux, kind, place, error, Failure::Injected);
        }
    }
    if kind == MemKind::Async && f & LIVE != 0 && capturing(stream) {
        // An allocation node of the graph being captured: no memory until a launch of the
        // graph allocates it (counted then, crate::exports::graphs).
        let (r, ptr, aux, recorded) = call();
        let stack = tracer::alloc(g, api, r, stream, ptr, recorded, aux);
        if r == 0 {
            graph_live::node_made(flags(), ptr, stack);
        }
        return r;
    }
    let mut place = live::Place::here_if(f & (LIVE | BUDGET) != 0);
    if api == Api::cuMemCreate {
        // Physical memory goes where its properties say, not always to the current device.
        match MemLocation::decode(aux) {
            MemLocation::Device(device) => place.device = device,
            // Host memory: accounted and reported as host memory, outside any device budget.
            MemLocation::Host => kind = MemKind::Host,
            MemLocation::Unknown => {}
        }
    }
    let mut reserved = false;
    if f & BUDGET != 0 && live::counts_toward_budget(kind) {
        let limit = settings().limit.unwrap_or(u64::MAX);
        if !live::reserve(place.device, size, limit) {
            return refused(
                g,
                api,
                stream,
                size,
                aux,
                kind,
                place,
                CUDA_ERROR_OUT_OF_MEMORY,
                Failure::Budget,
            );
        }
        reserved = true;
    }
    let (r, ptr, aux, recorded) = call();
    let stack = tracer::alloc(g, api, r, stream, ptr, recorded, aux);
    if r == 0 {
        if f & LIVE != 0 {
            sites::note(stack);
            live::added(api, kind, ptr, recorded, place, stack, reserved);
            if live::window_watch_due() {
                // After the allocation's record: the snapshot's live state includes it.
                live::window_watched(snapshot::write(g, "window over its watch"));
            }
        }
    } else {
        if reserved {
            live::unreserve(place.device, size);
        }
        live::failed(kind, Failure::Driver);
        if r == CUDA_ERROR_OUT_OF_MEMORY {
            out_of_memory(g, api, size, place.device, Failure::Driver);
        }
    }
    r
}

/// A call that a budget or fault rule refuses: never reaches the driver, recorded as a
/// failed allocation with the error returned.
#[allow(clippy::too_many_arguments)]
fn refused(
    g: &HookGuard,
    api: Api,
    stream: Stream,
    size: u64,
    aux: u64,
    kind: MemKind,
    place: live::Place,
    error: u32,
    why: Failure,
) -> u32 {
    tracer::alloc(g, api, error, stream, 0, size, aux);
    live::failed(kind, why);
    if error == CUDA_ERROR_OUT_OF_MEMORY {
        out_of_memory(g, api, size, place.device, why);
    }
    error
}

/// An allocation failed with out of memory while no feature was on (the default snapshot).
#[cold]
#[inline(never)]
pub fn out_of_memory_plain(g: &HookGuard, api: Api, size: u64) {
    out_of_memory(g, api, size, -1, Failure::Driver);
}

fn out_of_memory(g: &HookGuard, api: Api, size: u64, device: i32, why: Failure) {
    let s = settings();
    if s.oom_snapshot {
        snapshot::write(g, "oom");
    }
    if s.oom_summary {
        live::print_oom_summary(api, size, device, why);
    }
}

/// A free call with at least one feature on: the live entry is taken out before the driver
/// call (so that an allocation reusing the address on another thread cannot be removed by
/// mistake) and put back if the free fails.
#[cold]
#[inline(never)]
pub fn free(g: &HookGuard, f: u32, api: Api, stream: Stream, ptr: u64, call: impl FnOnce() -> u32) -> u32 {
    housekeeping(g, f);
    if f & LIVE == 0 || (api.mem_kind() == Some(MemKind::Async) && capturing(stream)) {
        // (A free under capture is a free node of the graph being captured: no free yet.)
        return call();
    }
    let taken = live::take(api, ptr);
    let r = call();
    live::freed(api, ptr, taken, r == 0);
    r
}

/// Whether stream-ordered work on `stream` is being captured into a graph, asked of the
/// driver's getter `cuStreamIsCapturing` (which changes nothing the program sees); false when
/// the driver cannot say. Never asked of the legacy default stream (0 or
/// `CU_STREAM_LEGACY`), which cannot be captured and whose query while another stream
/// captures is an error of its own.
fn capturing(stream: Stream) -> bool {
    const CU_STREAM_LEGACY: u64 = 1;
    const CU_STREAM_CAPTURE_STATUS_ACTIVE: u32 = 1;
    type IsCapturing = unsafe extern "C" fn(*mut libc::c_void, *mut u32) -> u32;
    if stream.0 == 0 || stream.0 == CU_STREAM_LEGACY {
        return false;
    }
    let Some(f) = crate::dlsym::driver_fn(crate::dlsym::Getter::cuStreamIsCapturing) else {
        return false;
    };
    // SAFETY: the driver's cuStreamIsCapturing, found by name, with its C signature.
    let f = unsafe { std::mem::transmute::<usize, IsCapturing>(f) };
    let mut status = 0u32;
    // SAFETY: the program's stream handle; `status` is a valid out-pointer.
    unsafe { f(stream.0 as *mut libc::c_void, &mut status) == 0 && status == CU_STREAM_CAPTURE_STATUS_ACTIVE }
}

/// A successful `cuMemRetainAllocationHandle`: one more reference to a live handle.
pub fn retained(g: &HookGuard, api: Api, handle: u64) {
    let f = flags();
    if f == 0 {
        return;
    }
    housekeeping(g, f);
    if f & LIVE != 0 {
        live::retained(api, handle);
    }
}

/// A stream, event or context call with at least one feature on.
#[cold]
#[inline(never)]
pub fn object(g: &HookGuard, f: u32, change: live::ObjectChange) {
    housekeeping(g, f);
    if f & LIVE != 0 {
        live::object(change);
    }
}
