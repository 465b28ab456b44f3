//! Host functions the shim wrapped (`HostFnQueued`, `HostFnRan`): a run orders the host after
//! what its stream had done when the function was queued.

use gpuleak_format::*;

use super::super::*;
use super::{Run, A, B, MAIN};

/// A pinned host staging buffer (`cuMemHostAlloc`).
const H: u64 = 0x11da_a000_0000;
const D: u64 = 0x3_0210_0000;

impl Run {
    fn queued(&mut self, stream: u64, id: u64) -> &mut Run {
        self.queued_with(Api::cuLaunchHostFunc, CuResult::SUCCESS, stream, id)
    }

    fn queued_with(&mut self, api: Api, result: CuResult, stream: u64, id: u64) -> &mut Run {
        self.r(HostFnQueued {
            api,
            result,
            stream,
            id,
        })
    }

    fn ran(&mut self, id: u64) -> &mut Run {
        // The driver's own thread runs host functions.
        self.on(MAIN + 100, HostFnRan { id })
    }

    /// Two non-blocking streams and the staging buffer.
    fn staging() -> Run {
        let mut r = Run::new();
        r.stream(A, 1)
            .stream(B, 1)
            .alloc_with(Api::cuMemHostAlloc, H, 2 << 20, 0)
            .alloc(D);
        r
    }

    /// A device-to-host copy into the staging buffer on `stream`.
    fn stage_out(&mut self, stream: u64) -> &mut Run {
        self.copy(Api::cuMemcpyDtoHAsync_v2, stream, H, D, 4)
    }

    /// A host-to-device copy from the staging buffer on `stream`.
    fn stage_in(&mut self, stream: u64) -> &mut Run {
        self.copy(Api::cuMemcpyHtoDAsync_v2, stream, D + 0x100, H, 4)
    }

    fn tidy_staging(&mut self) -> &mut Run {
        self.sync(A)
            .sync(B)
            .free_with(Api::cuMemFreeHost, H, 0)
            .free_with(Api::cuMemFree_v2, D, 0)
            .destroy(A)
            .destroy(B)
    }
}

/// XLA's host-side transfer in a JAX loop on an H100: a copy into a pinned staging buffer on
/// one stream, a host function after it on the same stream (when it runs, the buffer is
/// handed back to the host allocator), and a copy from the same buffer on another stream
/// once the allocator gave it out again. Seen running, the host function orders the two
/// copies; this was reported as a cross-stream race.
#[test]
fn regression_a_host_function_that_ran_orders_a_staging_buffer_reused_on_another_stream() {
    let mut r = Run::staging();
    r.stage_out(A).queued(A, 1).ran(1).stage_in(B);
    r.tidy_staging();
    assert_eq!(r.checks(), Vec::<&str>::new());
    // The same buffer given out again after the copy from it, through a host function on a
    // third stream that waited for that copy's stream (the trace's second report).
    const C: u64 = 0xc0;
    let mut r = Run::staging();
    r.stream(C, 1)
        .event(super::E)
        .stage_out(A)
        .queued(A, 1)
        .ran(1)
        .stage_in(B)
        .record(super::E, B)
        .wait(C, super::E)
        .queued(C, 2)
        .ran(2)
        .stage_out(A)
        .event_destroy(super::E)
        .sync(C)
        .destroy(C);
    r.tidy_staging();
    assert_eq!(r.checks(), Vec::<&str>::new());
    // Twin: the same without the run (an old trace's plain HostFn, or a run not yet seen
    // when the buffer is read): a race.
    let mut r = Run::staging();
    r.stage_out(A).queued(A, 1).stage_in(B).ran(1);
    r.tidy_staging();
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
    let mut r = Run::staging();
    r.stage_out(A)
        .r(HostFn {
            api: Api::cuLaunchHostFunc,
            result: CuResult::SUCCESS,
            stream: Stream(A),
        })
        .stage_in(B);
    r.tidy_staging();
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
}

#[test]
fn a_host_function_orders_only_what_was_queued_before_it() {
    // A copy queued after the host function is not known complete when it runs.
    let mut r = Run::staging();
    r.queued(A, 1).stage_out(A).ran(1).stage_in(B);
    r.tidy_staging();
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
    // Nor is another stream's work, unless the host function's stream waited for it.
    let mut r = Run::staging();
    r.stage_out(B).queued(A, 1).ran(1).stage_in(A);
    r.tidy_staging();
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
    let mut r = Run::staging();
    r.event(super::E)
        .stage_out(B)
        .record(super::E, B)
        .wait(A, super::E)
        .queued(A, 1)
        .ran(1)
        .stage_in(A)
        .event_destroy(super::E);
    r.tidy_staging();
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn a_run_numbered_before_its_queue_record_counts_from_the_queue_record_on() {
    // The driver ran the function before cuLaunchHostFunc returned.
    let mut r = Run::staging();
    r.stage_out(A).ran(7).queued(A, 7).stage_in(B);
    r.tidy_staging();
    assert_eq!(r.checks(), Vec::<&str>::new());
    // Between the run and the queue record, another thread's copy is not ordered yet.
    let mut r = Run::staging();
    r.stage_out(A).ran(7);
    r.on(
        MAIN + 1,
        Copy {
            api: Api::cuMemcpyHtoDAsync_v2,
            result: CuResult::SUCCESS,
            stream: Stream(B),
            dst: Ptr(D + 0x100),
            src: H,
            bytes: 4,
            stack: StackId::NONE,
        },
    );
    r.queued(A, 7);
    r.tidy_staging();
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
    // A run kept for its queue record is used once: the next function of that id (a new
    // process's numbering would not repeat, but a trace may) waits for its own run.
    let mut r = Run::staging();
    r.ran(7).queued(A, 7).stage_out(A).queued(A, 7).stage_in(B);
    r.tidy_staging();
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
}

#[test]
fn unknown_ids_refused_calls_and_captures_order_nothing() {
    // A run of an id never queued.
    let mut r = Run::staging();
    r.stage_out(A).queued(A, 1).ran(2).ran(u64::MAX).stage_in(B);
    r.tidy_staging();
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
    // A refused call queued nothing: a run under its id (a driver that ran it anyway, or a
    // trace that lies) orders nothing.
    let mut r = Run::staging();
    r.stage_out(A)
        .ran(1)
        .queued_with(Api::cuLaunchHostFunc, CuResult(400), A, 1)
        .stage_in(B);
    r.tidy_staging();
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
    let mut r = Run::staging();
    r.stage_out(A)
        .queued_with(Api::cuLaunchHostFunc, CuResult(400), A, 1)
        .ran(1)
        .stage_in(B);
    r.tidy_staging();
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
    // A host function queued under capture is a graph node: its record orders nothing.
    let mut r = Run::staging();
    r.stage_out(A)
        .capture_on(A, 1, 0)
        .queued(A, 1)
        .ran(1)
        .capture_on(A, 0, 0x9000)
        .stage_in(B);
    r.tidy_staging();
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
}

#[test]
fn every_wrapped_entry_point_orders_and_the_function_itself_is_still_work_to_wait_for() {
    for (api, stream) in [
        (Api::cuLaunchHostFunc, A),
        (Api::cuLaunchHostFunc_ptsz, A),
        (Api::cuLaunchHostFunc_v2, A),
        (Api::cuLaunchHostFunc_v2_ptsz, A),
        (Api::cuStreamAddCallback, A),
        (Api::cuStreamAddCallback_ptsz, A),
    ] {
        let mut r = Run::staging();
        r.stage_out(stream)
            .queued_with(api, CuResult::SUCCESS, stream, 3)
            .ran(3)
            .stage_in(B);
        r.tidy_staging();
        assert_eq!(r.checks(), Vec::<&str>::new(), "{api}");
    }
    // Handle 0 of a _ptsz variant is the thread's own default stream.
    let mut r = Run::staging();
    r.copy(Api::cuMemcpyDtoHAsync_v2_ptsz, 0, H, D, 4)
        .queued_with(Api::cuLaunchHostFunc_ptsz, CuResult::SUCCESS, 0, 3)
        .ran(3)
        .stage_in(B);
    r.tidy_staging();
    r.sync_on(MAIN, Api::cuStreamSynchronize_ptsz, 0, 0);
    assert_eq!(r.checks(), Vec::<&str>::new());
    // Its run shows the function started, not that it returned: never waited for, it is
    // work left at exit.
    let mut r = Run::new();
    r.stream(A, 1).queued(A, 1).ran(1).destroy(A);
    let found = r.finish();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].check, Check::UnsynchronizedAtExit);
    assert_eq!(found[0].op.api, Api::cuLaunchHostFunc);
}

#[test]
fn host_functions_never_seen_running_are_bounded() {
    let mut r = Run::staging();
    for id in 0..(records::MAX_HOST_FNS as u64 + 10) {
        r.queued(A, id);
        r.ran(u64::MAX - id);
    }
    assert!(r.s.host_fns.len() <= records::MAX_HOST_FNS);
    assert!(r.s.ran_early.len() <= records::MAX_HOST_FNS);
}
