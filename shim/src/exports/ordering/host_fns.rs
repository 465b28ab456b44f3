//! Host functions (`cuLaunchHostFunc`, `cuLaunchHostFunc_v2`) and stream callbacks
//! (`cuStreamAddCallback`), each with `_ptsz`: handed to the driver wrapped, so that the trace
//! shows when each starts running.
//!
//! The driver runs a host function only once everything queued before it on its stream is
//! complete ("Host functions ... are executed in stream order", CUDA driver API,
//! `cuLaunchHostFunc`), and programs rely on that to hand host memory back: XLA's callback
//! after a copy into a pinned staging buffer returns the buffer to its host allocator, which
//! gives it out again for a copy on another stream. The analyzer can take that order into
//! account only if it sees when the function ran. So the shim passes the driver a trampoline
//! of its own and a small heap context (the program's function and data, and a number): the
//! trampoline writes a `HostFnRan` record with the number and then calls the program's
//! function with the program's data, which is all the driver would have done. The call
//! itself is a `HostFnQueued` record with the same number.
//!
//! Passed on unchanged, as a plain `HostFn` record: a call made while the thread is inside
//! another hook (a signal handler's), a call without a function (the driver refuses it, and
//! must see NULL to), and a call on a stream under capture, whose host function becomes a
//! graph node that runs at every launch of the graph (a context is freed after one run).
//! Whether the stream captures is asked of the driver only while a capture may be under way
//! ([`graph_nodes::may_be_captured`]). A refused call frees its context at once and returns
//! the driver's result unchanged; the program's function is then never called.
//!
//! The context is one allocation per wrapped call (host functions are rare next to launches
//! and copies: a few per training step). The trampoline reads it, lets go of it and then calls
//! the program's function, so a function that never returns (it exits the process, say)
//! leaves nothing held.

use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use gpuleak_format::{Api, CuResult, HostFn, HostFnQueued, Stream};

use super::super::graph_nodes;
use crate::cuda::*;
use crate::guard;
use crate::tracer;

/// The real `cuLaunchHostFunc[_ptsz]`.
type LaunchHostFunc = unsafe extern "C" fn(CUstream, *mut c_void, *mut c_void) -> CUresult;
/// The real `cuLaunchHostFunc_v2[_ptsz]`.
type LaunchHostFuncV2 = unsafe extern "C" fn(CUstream, *mut c_void, *mut c_void, u32) -> CUresult;
/// The real `cuStreamAddCallback[_ptsz]`.
type AddCallback = unsafe extern "C" fn(CUstream, *mut c_void, *mut c_void, u32) -> CUresult;

/// A program's `CUhostFn`. "C-unwind": whatever the program's function does on its way out
/// (a C++ exception) passes through the trampoline as it would have without the shim.
type ProgramHostFn = unsafe extern "C-unwind" fn(*mut c_void);
/// A program's `CUstreamCallback`.
type ProgramCallback = unsafe extern "C-unwind" fn(CUstream, CUresult, *mut c_void);

/// The last number given to a wrapped host function (the first is 1).
static LAST_ID: AtomicU64 = AtomicU64::new(0);

/// What the trampoline needs: the program's function and data, and the number its records
/// share.
struct Wrapped {
    /// The program's `CUhostFn` or `CUstreamCallback` (which one, the trampoline knows).
    function: *mut c_void,
    user: *mut c_void,
    id: u64,
    /// Parties that still hold the context: the hook, until the driver returned, and the
    /// trampoline, until it has read it. The last to let go frees it, so a driver that runs
    /// the function before the call that queued it returns (the simulator does) is no
    /// different from one that runs it later on a thread of its own.
    holders: AtomicU32,
}

/// Lets go of `w` for one of its holders, freeing it if that was the last.
///
/// # Safety
/// `w` came from `Box::into_raw` in [`hand_over`], and this holder has not let go of it
/// before (each of the two lets go once).
unsafe fn let_go(w: *mut Wrapped) {
    // SAFETY: the context is alive while this holder holds it (the contract).
    let last = unsafe { (*w).holders.fetch_sub(1, Ordering::AcqRel) } == 1;
    if last {
        // SAFETY: a Box (the contract), and both holders have let go: nothing refers to it.
        drop(unsafe { Box::from_raw(w) });
    }
}

/// The trampoline's side: reads the context and lets go of it (after recording that the
/// function started), then returns the program's function and data.
///
/// # Safety
/// `data` is a context that [`hand_over`] made and the driver accepted, which calls its
/// trampoline once (a host function runs once; none is wrapped under capture).
unsafe fn started(data: *mut c_void) -> (*mut c_void, *mut c_void) {
    let w = data.cast::<Wrapped>();
    // SAFETY: the contract: the trampoline's hold keeps the context alive until it lets go.
    let (function, user, id) = unsafe { ((*w).function, (*w).user, (*w).id) };
    tracer::host_fn_ran(id);
    // SAFETY: the trampoline's one release, after its last read.
    unsafe { let_go(w) };
    (function, user)
}

/// What the driver calls in place of a program's host function: records that it started,
/// then calls the program's function with the program's data.
///
/// # Safety
/// As for [`started`], for a context of a `CUhostFn`.
unsafe extern "C-unwind" fn run_host_fn(data: *mut c_void) {
    // SAFETY: the contract.
    let (function, user) = unsafe { started(data) };
    // SAFETY: the program's non-NULL `CUhostFn` (only those are wrapped).
    let function = unsafe { std::mem::transmute::<*mut c_void, ProgramHostFn>(function) };
    // SAFETY: the program's host function with the program's data, on the driver's thread,
    // as the driver would have called it without the shim.
    unsafe { function(user) }
}

/// [`run_host_fn`] for a stream callback, which the driver also gives its stream and the
/// status of the work before it.
///
/// # Safety
/// As for [`started`], for a context of a `CUstreamCallback`.
unsafe extern "C-unwind" fn run_callback(stream: CUstream, status: CUresult, data: *mut c_void) {
    // SAFETY: the contract.
    let (function, user) = unsafe { started(data) };
    // SAFETY: the program's non-NULL `CUstreamCallback` (only those are wrapped).
    let function = unsafe { std::mem::transmute::<*mut c_void, ProgramCallback>(function) };
    // SAFETY: the program's callback with the driver's arguments and the program's data.
    unsafe { function(stream, status, user) }
}

/// Queues the program's `function` and `user` on `stream` through `call` (the real entry
/// point `api`, given the function and data to hand the driver): as they are, or, when
/// wrapped (see the module documentation), as `trampoline` with a context, which is let go
/// of once the driver returned (freed at once when it refused the call: a refused call
/// queues nothing, and a trampoline the driver ran anyway before refusing has let go
/// already). Returns the driver's result unchanged.
fn hand_over(
    (api, stream): (Api, CUstream),
    (function, user): (*mut c_void, *mut c_void),
    trampoline: *mut c_void,
    call: impl FnOnce(*mut c_void, *mut c_void) -> CUresult,
) -> CUresult {
    let Some(g) = guard::enter() else {
        return call(function, user);
    };
    let wrap = !function.is_null() && tracer::get().is_some() && !graph_nodes::may_be_captured(api, stream);
    if !wrap {
        let r = call(function, user);
        tracer::event_fields(
            &g,
            &HostFn {
                api,
                result: CuResult(r),
                stream: Stream(stream as u64),
            },
        );
        return r;
    }
    let id = LAST_ID.fetch_add(1, Ordering::Relaxed) + 1;
    let w = Box::into_raw(Box::new(Wrapped {
        function,
        user,
        id,
        holders: AtomicU32::new(2),
    }));
    let r = call(trampoline, w.cast());
    if r == CUDA_SUCCESS {
        // SAFETY: made above; the hook's one release.
        unsafe { let_go(w) };
    } else {
        // SAFETY: made above as a Box; the driver refused the call, so nothing else refers
        // to it any more.
        drop(unsafe { Box::from_raw(w) });
    }
    tracer::event_fields(
        &g,
        &HostFnQueued {
            api,
            result: CuResult(r),
            stream: stream as u64,
            id,
        },
    );
    r
}

/// `cuLaunchHostFunc[_ptsz]`.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]), and `real` is the real function of the row:
/// `func` is NULL or the program's `CUhostFn`.
pub unsafe fn launch_host_func(
    api: Api,
    real: LaunchHostFunc,
    stream: CUstream,
    func: *mut c_void,
    user: *mut c_void,
) -> CUresult {
    let trampoline = run_host_fn as ProgramHostFn as *mut c_void;
    hand_over((api, stream), (func, user), trampoline, |f, u| {
        // SAFETY: the program's call, with its function and data, or with a trampoline of the
        // same `CUhostFn` signature and its context, which the driver calls as it would the
        // program's (the contract above).
        unsafe { real(stream, f, u) }
    })
}

/// `cuLaunchHostFunc_v2[_ptsz]` (CUDA 13.1, what the runtime of 13.1 and later resolves
/// `cuLaunchHostFunc` to): the same, with the host task's sync mode, which is only forwarded.
///
/// # Safety
/// As for [`launch_host_func`].
pub unsafe fn launch_host_func_v2(
    api: Api,
    real: LaunchHostFuncV2,
    stream: CUstream,
    func: *mut c_void,
    user: *mut c_void,
    sync_mode: u32,
) -> CUresult {
    let trampoline = run_host_fn as ProgramHostFn as *mut c_void;
    hand_over((api, stream), (func, user), trampoline, |f, u| {
        // SAFETY: as in `launch_host_func`, the sync mode unchanged.
        unsafe { real(stream, f, u, sync_mode) }
    })
}

/// `cuStreamAddCallback[_ptsz]`.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]), and `real` is the real function of the row:
/// `callback` is NULL or the program's `CUstreamCallback`.
pub unsafe fn add_callback(
    api: Api,
    real: AddCallback,
    stream: CUstream,
    callback: *mut c_void,
    user: *mut c_void,
    flags: u32,
) -> CUresult {
    let trampoline = run_callback as ProgramCallback as *mut c_void;
    hand_over((api, stream), (callback, user), trampoline, |f, u| {
        // SAFETY: as in `launch_host_func`, with a trampoline of the `CUstreamCallback`
        // signature, the flags unchanged.
        unsafe { real(stream, f, u, flags) }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    static CALLED_WITH: AtomicU64 = AtomicU64::new(0);

    extern "C-unwind" fn program_fn(user: *mut c_void) {
        CALLED_WITH.fetch_add(user as u64, Ordering::Relaxed);
    }

    /// A context as `hand_over` makes it, for `program_fn` with data `user`.
    fn context(user: u64) -> *mut Wrapped {
        let function = program_fn as ProgramHostFn as *mut c_void;
        Box::into_raw(Box::new(Wrapped {
            function,
            user: user as *mut c_void,
            id: 1,
            holders: AtomicU32::new(2),
        }))
    }

    /// No trace runs in this test process (nothing started one): the trampoline records
    /// nothing and still calls the program's function with its data, whichever of the driver
    /// (inside the call, like the simulator, or after it on a thread of its own) and the hook
    /// lets go of the context last.
    #[test]
    fn the_trampoline_calls_the_program_s_function_with_its_data_with_no_trace_running() {
        let before = CALLED_WITH.load(Ordering::Relaxed);
        let w = context(5);
        // SAFETY: a context made for `run_host_fn`, run once, then the hook's one release.
        unsafe {
            run_host_fn(w.cast());
            let_go(w);
        }
        let w = context(7) as usize;
        // SAFETY: the hook's one release, before the driver's thread runs the function.
        unsafe { let_go(w as *mut Wrapped) };
        std::thread::spawn(move || {
            // SAFETY: the context made above, run once on another thread, as a driver does.
            unsafe { run_host_fn(w as *mut c_void) }
        })
        .join()
        .unwrap();
        assert_eq!(CALLED_WITH.load(Ordering::Relaxed) - before, 12);
    }
}
