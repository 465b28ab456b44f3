//! The happens-before model on synthetic records: every edge, every check, and the bounds.

use std::borrow::Cow;

use gpuleak_format::*;

use super::*;

mod api_meanings;
mod ctx_events;
mod exit;
mod frees;
mod graph_events;
mod graph_frees;
mod graph_races;
mod host_fns;
mod later_apis;
mod managed_reuse;
mod memops;
mod pageable;
mod peer;
mod ranges;
mod unrecorded;

const A: u64 = 0xa0;
const B: u64 = 0xb0;
const E: u64 = 0xe0;
const P: u64 = 0x7000_0000_0000;
const MAIN: u32 = 1;

/// Feeds records to a model, numbering them.
struct Run {
    s: Streams,
    seq: u64,
}

impl Run {
    fn new() -> Run {
        Run {
            s: Streams::new(),
            seq: 0,
        }
    }

    fn on(&mut self, tid: u32, body: impl Into<Body<'static>>) -> &mut Run {
        self.seq += 1;
        self.s.apply(
            tid,
            &Record {
                seq: Seq(self.seq),
                time_ns: self.seq,
                body: body.into(),
            },
        );
        self
    }

    fn r(&mut self, body: impl Into<Body<'static>>) -> &mut Run {
        self.on(MAIN, body)
    }

    fn stream(&mut self, h: u64, flags: u32) -> &mut Run {
        self.r(StreamCreate {
            api: Api::cuStreamCreate,
            result: CuResult::SUCCESS,
            stream: Stream(h),
            flags,
            priority: 0,
            stack: StackId(10),
        })
    }

    fn destroy(&mut self, h: u64) -> &mut Run {
        self.r(StreamDestroy {
            api: Api::cuStreamDestroy_v2,
            result: CuResult::SUCCESS,
            stream: Stream(h),
        })
    }

    fn event(&mut self, h: u64) -> &mut Run {
        self.r(EventCreate {
            api: Api::cuEventCreate,
            result: CuResult::SUCCESS,
            event: Event(h),
            flags: 0,
            stack: StackId(20),
        })
    }

    fn event_destroy(&mut self, h: u64) -> &mut Run {
        self.r(EventDestroy {
            api: Api::cuEventDestroy_v2,
            result: CuResult::SUCCESS,
            event: Event(h),
        })
    }

    fn record(&mut self, e: u64, s: u64) -> &mut Run {
        self.r(EventRecord {
            api: Api::cuEventRecord,
            result: CuResult::SUCCESS,
            event: Event(e),
            stream: Stream(s),
            flags: 0,
        })
    }

    fn wait(&mut self, s: u64, e: u64) -> &mut Run {
        self.r(StreamWait {
            api: Api::cuStreamWaitEvent,
            result: CuResult::SUCCESS,
            stream: Stream(s),
            event: Event(e),
            flags: 0,
        })
    }

    fn sync_on(&mut self, tid: u32, api: Api, stream: u64, event: u64) -> &mut Run {
        self.on(
            tid,
            Sync {
                api,
                result: CuResult::SUCCESS,
                stream: Stream(stream),
                event: Event(event),
                ctx: Ctx(0),
            },
        )
    }

    /// A capture begins (`begin` 1) or ends (0, with the graph `aux`) on `stream`.
    fn capture_on(&mut self, stream: u64, begin: u32, aux: u64) -> &mut Run {
        self.r(Capture {
            api: if begin != 0 {
                Api::cuStreamBeginCapture_v2
            } else {
                Api::cuStreamEndCapture
            },
            result: CuResult::SUCCESS,
            stream: Stream(stream),
            begin,
            aux,
        })
    }

    fn sync(&mut self, s: u64) -> &mut Run {
        self.sync_on(MAIN, Api::cuStreamSynchronize, s, 0)
    }

    fn ctx_sync(&mut self) -> &mut Run {
        self.sync_on(MAIN, Api::cuCtxSynchronize, 0, 0)
    }

    fn alloc_with(&mut self, api: Api, ptr: u64, size: u64, stream: u64) -> &mut Run {
        self.r(Alloc {
            api,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            ctx: Ctx(1),
            stream: Stream(stream),
            ptr: Ptr(ptr),
            size,
            stack: StackId(30),
            aux: 0,
        })
    }

    fn alloc(&mut self, ptr: u64) -> &mut Run {
        self.alloc_with(Api::cuMemAlloc_v2, ptr, 4096, 0)
    }

    fn free_with(&mut self, api: Api, ptr: u64, stream: u64) -> &mut Run {
        self.r(Free {
            api,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            stream: Stream(stream),
            ptr: Ptr(ptr),
            size: 0,
            stack: StackId::NONE,
        })
    }

    fn free_async(&mut self, ptr: u64, stream: u64) -> &mut Run {
        self.free_with(Api::cuMemFreeAsync, ptr, stream)
    }

    fn launch_on(&mut self, tid: u32, api: Api, stream: u64, ptrs: &[u64]) -> &mut Run {
        self.on(
            tid,
            Launch {
                api,
                result: CuResult::SUCCESS,
                stream: Stream(stream),
                function: 0xf,
                ptrs: Addrs(Cow::Owned(ptrs.to_vec())),
                stack: StackId::NONE,
            },
        )
    }

    fn launch(&mut self, stream: u64, ptr: u64) -> &mut Run {
        self.launch_on(MAIN, Api::cuLaunchKernel, stream, &[ptr])
    }

    fn copy(&mut self, api: Api, stream: u64, dst: u64, src: u64, bytes: u64) -> &mut Run {
        self.r(Copy {
            api,
            result: CuResult::SUCCESS,
            stream: Stream(stream),
            dst: Ptr(dst),
            src,
            bytes,
            stack: StackId::NONE,
        })
    }

    /// Reads `P` back to the host on `stream` (asynchronously).
    fn read_back(&mut self, stream: u64) -> &mut Run {
        self.copy(Api::cuMemcpyDtoHAsync_v2, stream, 0x1000, P, 64)
    }

    fn finish(&mut self) -> Vec<StreamFinding> {
        std::mem::take(&mut self.s).finish()
    }

    fn checks(&mut self) -> Vec<&'static str> {
        self.finish().iter().map(|f| f.check.name()).collect()
    }
}

/// Two blocking streams, a device buffer at `P`, and a tidy end (both streams synchronized
/// and destroyed, the buffer freed) added by `tidy`.
fn two_streams(flags: u32) -> Run {
    let mut r = Run::new();
    r.stream(A, flags).stream(B, flags).alloc(P);
    r
}

fn tidy(r: &mut Run) -> &mut Run {
    r.sync(A)
        .sync(B)
        .free_with(Api::cuMemFree_v2, P, 0)
        .destroy(A)
        .destroy(B)
}

#[test]
fn a_kernel_and_a_copy_on_two_streams_race_without_an_edge() {
    let mut r = two_streams(0);
    r.launch(A, P).read_back(B);
    tidy(&mut r);
    let found = r.finish();
    assert_eq!(found.len(), 1, "{found:#?}");
    let f = &found[0];
    assert_eq!(f.check, Check::CrossStreamRace);
    assert_eq!(f.op.api, Api::cuMemcpyDtoHAsync_v2);
    assert_eq!(f.op.stream, StreamName::Handle(B));
    assert_eq!(f.other.unwrap().api, Api::cuLaunchKernel);
    assert_eq!(f.other.unwrap().stream, StreamName::Handle(A));
    assert_eq!(f.allocation.unwrap().stack, StackId(30));
    assert_eq!(f.ptr, P);
}

#[test]
fn an_event_recorded_after_the_write_and_waited_for_orders_the_read() {
    let mut r = two_streams(0);
    r.event(E)
        .launch(A, P)
        .record(E, A)
        .wait(B, E)
        .read_back(B)
        .event_destroy(E);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn an_event_recorded_before_the_write_orders_nothing() {
    let mut r = two_streams(0);
    r.event(E)
        .record(E, A)
        .launch(A, P)
        .wait(B, E)
        .read_back(B)
        .event_destroy(E);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
}

#[test]
fn host_synchronization_orders_later_work() {
    for sync in [Api::cuStreamSynchronize, Api::cuStreamQuery, Api::cuCtxSynchronize] {
        let mut r = two_streams(1);
        r.launch(A, P).sync_on(MAIN, sync, A, 0).read_back(B);
        tidy(&mut r);
        assert_eq!(r.checks(), Vec::<&str>::new(), "{sync}");
    }
    // Synchronizing on an event (and a successful query of it).
    for sync in [Api::cuEventSynchronize, Api::cuEventQuery] {
        let mut r = two_streams(1);
        r.event(E)
            .launch(A, P)
            .record(E, A)
            .sync_on(MAIN, sync, 0, E)
            .read_back(B)
            .event_destroy(E);
        tidy(&mut r);
        assert_eq!(r.checks(), Vec::<&str>::new(), "{sync}");
    }
}

/// A buffer handed over between host threads (a mutex, a queue: invisible in the trace) after
/// the producer's thread waited for its kernel is no race for the consumer's thread, which was
/// already at work before; handed over before that wait, it is.
#[test]
fn another_thread_s_synchronization_orders_this_thread_s_later_calls() {
    // The main thread has a clock of its own before the buffer is handed over.
    let main_at_work_first = |r: &mut Run| {
        r.sync(B);
    };
    let mut r = two_streams(1);
    main_at_work_first(&mut r);
    r.launch_on(2, Api::cuLaunchKernel, A, &[P])
        .sync_on(2, Api::cuStreamSynchronize, A, 0)
        .read_back(B);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
    let mut r = two_streams(1);
    main_at_work_first(&mut r);
    r.launch_on(2, Api::cuLaunchKernel, A, &[P])
        .read_back(B)
        .sync_on(2, Api::cuStreamSynchronize, A, 0);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
}

#[test]
fn a_thread_starts_with_what_any_thread_had_waited_for() {
    let memset_on_b = Copy {
        api: Api::cuMemsetD8Async,
        result: CuResult::SUCCESS,
        stream: Stream(B),
        dst: Ptr(P),
        src: 0,
        bytes: 64,
        stack: StackId::NONE,
    };
    // Thread 3's first call comes after the main thread waited for A.
    let mut r = two_streams(1);
    r.launch(A, P).sync(A).on(3, memset_on_b.clone());
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
    // ...and before.
    let mut r = two_streams(1);
    r.launch(A, P).on(3, memset_on_b).sync(A);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
}

#[test]
fn the_legacy_default_stream_orders_blocking_streams_both_ways() {
    // Blocking stream, then the legacy stream: the legacy operation waits.
    let mut r = two_streams(0);
    r.launch(A, P).launch(0, P).read_back(B);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
    // CU_STREAM_LEGACY is the same stream.
    let mut r = two_streams(0);
    r.launch(A, P).launch(1, P);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn non_blocking_streams_are_exempt_from_the_legacy_stream_s_ordering() {
    let mut r = two_streams(1);
    r.launch(A, P).launch(0, P);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
    let mut r = two_streams(1);
    r.launch(0, P).launch(A, P);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
}

#[test]
fn per_thread_default_streams_are_one_per_thread_and_blocking() {
    // Two threads' per-thread streams (handle 0 in a _ptsz API, and CU_STREAM_PER_THREAD).
    let mut r = Run::new();
    r.alloc(P);
    r.launch_on(1, Api::cuLaunchKernel_ptsz, 0, &[P]);
    r.launch_on(2, Api::cuLaunchKernel, 2, &[P]);
    r.ctx_sync().free_with(Api::cuMemFree_v2, P, 0);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
    // One thread: one stream, in order.
    let mut r = Run::new();
    r.alloc(P);
    r.launch_on(1, Api::cuLaunchKernel_ptsz, 0, &[P]);
    r.launch_on(1, Api::cuLaunchKernel, 2, &[P]);
    r.ctx_sync().free_with(Api::cuMemFree_v2, P, 0);
    assert_eq!(r.checks(), Vec::<&str>::new());
    // A per-thread stream is blocking: the legacy stream orders it.
    let mut r = Run::new();
    r.alloc(P);
    r.launch_on(1, Api::cuLaunchKernel_ptsz, 0, &[P]);
    r.launch_on(1, Api::cuLaunchKernel, 0, &[P]);
    r.ctx_sync().free_with(Api::cuMemFree_v2, P, 0);
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn blocking_copies_make_the_host_wait_and_device_copies_and_memsets_do_not() {
    // A synchronous DtoH copy on the legacy stream: the host knows A's work done.
    let mut r = two_streams(0);
    r.launch(A, P).copy(Api::cuMemcpyDtoH_v2, 0, 0x1000, P, 64);
    r.alloc(P + 0x10000);
    r.free_async(P, B);
    r.sync(B).destroy(A).destroy(B);
    r.free_with(Api::cuMemFree_v2, P + 0x10000, 0);
    assert_eq!(r.checks(), Vec::<&str>::new());
    // A synchronous memset: queued on the legacy stream, the host does not wait.
    let mut r = two_streams(1);
    r.copy(Api::cuMemsetD32_v2, 0, P, 0, 64).free_async(P, A);
    r.sync(A).sync(0).destroy(A).destroy(B);
    assert_eq!(r.checks(), vec!["unordered-free"]);
}

#[test]
fn waiting_for_an_event_never_recorded_is_found_once_per_site_when_it_mattered() {
    let mut r = two_streams(1);
    r.event(E).launch(A, P);
    // B waits three times, each before work that therefore does not follow A's kernel.
    for i in 0..3 {
        r.wait(B, E).launch(B, P + 64 + i);
    }
    // The host waits while A's kernel is pending.
    r.sync_on(MAIN, Api::cuEventSynchronize, 0, E);
    // A query is a poll, not a wait.
    r.sync_on(MAIN, Api::cuEventQuery, 0, E);
    r.event_destroy(E);
    tidy(&mut r);
    let found = r.finish();
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found.iter().all(|f| f.check == Check::WaitOnUnrecordedEvent));
    assert_eq!((found[0].op.api, found[0].count), (Api::cuStreamWaitEvent, 3));
    assert_eq!((found[1].op.api, found[1].count), (Api::cuEventSynchronize, 1));
    assert_eq!(found[0].created.unwrap().stack, StackId(20));
}

#[test]
fn a_wait_on_an_unrecorded_event_that_changed_nothing_is_no_finding() {
    // cudarc's way: an event per buffer, waited on before the buffer's first use.
    let mut r = two_streams(1);
    r.event(E).wait(A, E).launch(A, P).record(E, A).sync(A);
    // A wait with nothing pending elsewhere, then work.
    r.event(E + 1)
        .launch(B, P + 8)
        .wait(B, E + 1)
        .launch(B, P + 8)
        .event_destroy(E + 1);
    // A wait on an unrecorded event followed by one that covers the pending work.
    r.event(E + 2).launch(A, P + 16).record(E, A);
    r.wait(B, E + 2).wait(B, E).launch(B, P + 16).event_destroy(E + 2);
    // A wait with no work after it.
    r.event(E + 3).launch(A, P + 24).wait(B, E + 3).event_destroy(E + 3);
    r.event_destroy(E);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn work_on_a_capturing_stream_builds_a_graph_and_is_left_out() {
    let mut r = two_streams(1);
    r.capture_on(A, 1, 0).launch(A, P).capture_on(A, 0, 0).read_back(B);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn one_race_in_a_loop_is_one_finding_with_a_count() {
    let mut r = two_streams(0);
    for _ in 0..100 {
        r.launch(A, P).read_back(B).ctx_sync();
    }
    tidy(&mut r);
    let found = r.finish();
    assert_eq!(found.len(), 1);
    assert_eq!(found[0].count, 100);
}

#[test]
fn one_missing_edge_is_one_race_however_many_operations_follow_it() {
    let mut r = two_streams(1);
    r.copy(Api::cuMemsetD8Async, A, P, 0, 4096);
    r.copy(Api::cuMemcpyHtoDAsync_v2, B, P, 0x1000, 4096)
        .read_back(B)
        .launch(B, P);
    tidy(&mut r);
    let found = r.finish();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!((found[0].op.api, found[0].count), (Api::cuMemcpyHtoDAsync_v2, 1));
}

#[test]
fn ranges_decide_conflicts_reads_never_conflict() {
    let mut r = two_streams(1);
    // Disjoint halves of one allocation written by two streams.
    r.copy(Api::cuMemsetD8Async, A, P, 0, 2048);
    r.copy(Api::cuMemsetD8Async, B, P + 2048, 0, 2048);
    r.ctx_sync();
    // Two reads.
    r.read_back(A).read_back(B);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn memory_follows_live_streams_events_and_allocations() {
    let mut r = Run::new();
    for i in 0..20_000u64 {
        let s = 0x1000 + i;
        r.stream(s, 0).event(s + 0x100_0000);
        let p = P + (i % 4) * 0x1000;
        r.alloc_with(Api::cuMemAllocAsync, p, 256, s);
        r.launch(s, p).record(s + 0x100_0000, s).free_async(p, s).sync(s);
        r.destroy(s).event_destroy(s + 0x100_0000);
    }
    assert!(r.s.slots_in_use() <= 2, "{}", r.s.slots_in_use());
    assert_eq!(r.s.live_allocations(), 0);
    assert!(r.s.events.is_empty());
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn a_reused_slot_does_not_inherit_ordering_from_its_previous_stream() {
    let mut r = Run::new();
    r.alloc(P).stream(A, 1).launch(A, P).sync(A).destroy(A);
    // B takes A's slot; its work must still be ordered with C's on its own terms.
    r.stream(B, 1).stream(0xc0, 1).launch(B, P).read_back(0xc0);
    r.ctx_sync().destroy(B).destroy(0xc0).free_with(Api::cuMemFree_v2, P, 0);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
}

/// Two kernels are a race only if one writes, which the driver does not say: a warning. A
/// copy's destination or a memset is known to write: an error with a kernel on the other side.
#[test]
fn a_race_between_two_kernels_is_no_error_and_one_with_a_memset_is() {
    let mut r = two_streams(1);
    r.launch(A, P).launch(B, P);
    tidy(&mut r);
    let found = r.finish();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(found[0].kernels_only() && !found[0].is_error(), "{found:#?}");
    let mut r = two_streams(1);
    r.launch(A, P).copy(Api::cuMemsetD8Async, B, P, 0, 64);
    tidy(&mut r);
    let found = r.finish();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(!found[0].kernels_only() && found[0].is_error(), "{found:#?}");
}
