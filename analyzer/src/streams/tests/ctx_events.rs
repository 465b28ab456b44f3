//! Events over a whole context or green context: `cuCtxRecordEvent` captures every stream's
//! work so far, `cuCtxWaitEvent` makes every stream's later work wait for an event.

use gpuleak_format::*;

use super::{tidy, two_streams, Run, A, B, P};

/// A context handle (records carry it in their `stream` field).
const CTX: u64 = 0xc0;
const E: u64 = 0xe1;

fn ctx_record(r: &mut Run, api: Api, e: u64) -> &mut Run {
    r.r(EventRecord {
        api,
        result: CuResult::SUCCESS,
        event: Event(e),
        stream: Stream(CTX),
        flags: 0,
    })
}

fn ctx_wait(r: &mut Run, api: Api, e: u64) -> &mut Run {
    r.r(StreamWait {
        api,
        result: CuResult::SUCCESS,
        stream: Stream(CTX),
        event: Event(e),
        flags: 0,
    })
}

/// Two non-blocking streams (so that the legacy stream orders nothing) and an event.
fn pair() -> Run {
    let mut r = two_streams(1);
    r.event(E);
    r
}

fn done(r: &mut Run) -> Vec<&'static str> {
    tidy(r).event_destroy(E);
    r.checks()
}

#[test]
fn a_context_s_event_covers_the_work_of_every_stream_so_far() {
    for api in [Api::cuCtxRecordEvent, Api::cuGreenCtxRecordEvent] {
        // A kernel on A writes P; B waits for the context's event, then reads P.
        let mut r = pair();
        r.launch(A, P);
        ctx_record(&mut r, api, E).wait(B, E).read_back(B);
        assert_eq!(done(&mut r), Vec::<&str>::new(), "{api}");
        // The host waits for it too.
        let mut r = pair();
        r.launch(A, P);
        ctx_record(&mut r, api, E);
        r.sync_on(super::MAIN, Api::cuEventSynchronize, 0, E)
            .copy(Api::cuMemsetD8Async, B, P, 0, 1);
        assert_eq!(done(&mut r), Vec::<&str>::new(), "{api}");
    }
    // Twin: work queued after the record is not covered.
    let mut r = pair();
    ctx_record(&mut r, Api::cuCtxRecordEvent, E);
    r.launch(A, P).wait(B, E).read_back(B);
    assert_eq!(done(&mut r), vec!["cross-stream-race"]);
    // Twin: an event recorded on one stream covers only that stream's work.
    let mut r = pair();
    r.launch(A, P).record(E, B).wait(B, E).read_back(B);
    assert_eq!(done(&mut r), vec!["cross-stream-race"]);
}

#[test]
fn after_a_context_s_wait_every_stream_s_later_work_waits_for_the_event() {
    for api in [Api::cuCtxWaitEvent, Api::cuGreenCtxWaitEvent] {
        // B's memset waits for the kernel on A through the event, though B never waits itself;
        // so does work on a stream created after the wait.
        let mut r = pair();
        r.launch_on(super::MAIN, Api::cuLaunchKernel, A, &[P, P + 16])
            .record(E, A);
        ctx_wait(&mut r, api, E).copy(Api::cuMemsetD8Async, B, P, 0, 1);
        r.stream(0x5c, 1).launch(0x5c, P + 16).sync(0x5c).destroy(0x5c);
        assert_eq!(done(&mut r), Vec::<&str>::new(), "{api}");
    }
    // Twin: the host does not wait, so its own read of the kernel's output needs a sync.
    let mut r = pair();
    r.launch(A, P + 8).record(E, A);
    ctx_wait(&mut r, Api::cuCtxWaitEvent, E).destroy(A).destroy(B);
    let found = r.finish();
    assert!(
        found
            .iter()
            .any(|f| f.check == super::super::Check::UnsynchronizedAtExit && f.op.api == Api::cuLaunchKernel),
        "{found:#?}"
    );
    // Twin: the work before the wait is not ordered after the event.
    let mut r = pair();
    r.copy(Api::cuMemsetD8Async, B, P, 0, 1).launch(A, P).record(E, A);
    ctx_wait(&mut r, Api::cuCtxWaitEvent, E);
    assert_eq!(done(&mut r), vec!["cross-stream-race"]);
}

#[test]
fn a_context_s_wait_for_an_event_never_recorded_is_found_when_work_was_pending() {
    let mut r = pair();
    r.launch(A, P);
    ctx_wait(&mut r, Api::cuCtxWaitEvent, E)
        .sync(A)
        .copy(Api::cuMemsetD8Async, B, P, 0, 1);
    assert_eq!(done(&mut r), vec!["wait-on-unrecorded-event"]);
    // Twin: nothing pending (the host had waited for the kernel).
    let mut r = pair();
    r.launch(A, P).sync(A);
    ctx_wait(&mut r, Api::cuCtxWaitEvent, E).copy(Api::cuMemsetD8Async, B, P, 0, 1);
    assert_eq!(done(&mut r), Vec::<&str>::new());
    // An event recorded over the context is recorded: waiting for it is no finding.
    let mut r = pair();
    r.launch(A, P);
    ctx_record(&mut r, Api::cuCtxRecordEvent, E);
    ctx_wait(&mut r, Api::cuCtxWaitEvent, E).copy(Api::cuMemsetD8Async, B, P, 0, 1);
    assert_eq!(done(&mut r), Vec::<&str>::new());
}
