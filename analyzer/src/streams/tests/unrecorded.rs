//! Waits on events never recorded: a finding only when there was outstanding work the wait
//! could have been meant for, which stream-ordered frees (and allocations, prefetches and
//! discards) queued after the last wait are not.

use gpuleak_format::*;

use super::{tidy, two_streams, Run, A, B, E, MAIN, P};

/// Page-locked host memory (`cuMemHostAlloc`).
const PINNED: u64 = 0x2000_0000;
/// A stream-ordered allocation.
const BUF: u64 = 0x5000_0000;
/// A host address no record names: pageable memory.
const PAGEABLE: u64 = 0x1000;

impl Run {
    /// cudarc's `test_htod_copy_pinned` on the legacy default stream: a pinned buffer with an
    /// event that is never recorded (cudarc records it only when it manages several streams),
    /// copied to a new stream-ordered buffer and back into a `Vec` (pageable), then `between`,
    /// then the device buffer freed on the stream and the pinned buffer dropped, which
    /// synchronizes its event before `cuMemFreeHost`.
    fn copy_pinned_round_trip(&mut self, between: impl FnOnce(&mut Run)) -> &mut Run {
        self.event(E)
            .alloc_with(Api::cuMemHostAlloc, PINNED, 64, 0)
            .sync_on(MAIN, Api::cuEventSynchronize, 0, E)
            .alloc_with(Api::cuMemAllocAsync, BUF, 64, 0)
            .wait(0, E)
            .copy(Api::cuMemcpyHtoDAsync_v2, 0, BUF, PINNED, 64)
            .copy(Api::cuMemcpyDtoHAsync_v2, 0, PAGEABLE, BUF, 64);
        between(self);
        self.free_async(BUF, 0)
            .sync_on(MAIN, Api::cuEventSynchronize, 0, E)
            .free_with(Api::cuMemFreeHost, PINNED, 0)
            .event_destroy(E)
    }
}

#[test]
fn a_host_wait_on_an_unrecorded_event_after_a_copy_into_pageable_memory_waited_is_no_finding() {
    let mut r = two_streams(1);
    r.copy_pinned_round_trip(|_| {});
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
    // A prefetch queued after the copy back is nothing to wait for either.
    let mut r = two_streams(1);
    r.copy_pinned_round_trip(|r| {
        r.alloc_with(Api::cuMemAllocManaged, P + 0x10_0000, 64, 0).r(RangeOp {
            api: Api::cuMemPrefetchAsync,
            result: CuResult::SUCCESS,
            stream: 0,
            ptr: P + 0x10_0000,
            bytes: 64,
            location: MemLocation::encode(1, 0),
            stack: StackId::NONE,
        });
    });
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn a_host_wait_on_an_unrecorded_event_with_work_pending_after_the_copy_back_is_found() {
    // A kernel queued after the copy back: the wait was evidently meant for it.
    let mut r = two_streams(1);
    r.copy_pinned_round_trip(|r| {
        r.launch(0, BUF);
    });
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["wait-on-unrecorded-event"]);
    // Work pending on another stream counts too.
    let mut r = two_streams(1);
    r.copy_pinned_round_trip(|r| {
        r.launch(B, P);
    });
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["wait-on-unrecorded-event"]);
}

#[test]
fn a_stream_s_wait_on_an_unrecorded_event_while_only_a_free_is_pending_is_no_finding() {
    let mut r = two_streams(1);
    r.alloc_with(Api::cuMemAllocAsync, BUF, 64, A);
    r.launch(A, BUF).sync(A).free_async(BUF, A);
    r.event(E).wait(B, E).launch(B, P).event_destroy(E);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
    // Twin: the kernel before the free is still pending at the wait.
    let mut r = two_streams(1);
    r.alloc_with(Api::cuMemAllocAsync, BUF, 64, A);
    r.launch(A, BUF).free_async(BUF, A);
    r.event(E).wait(B, E).launch(B, P).event_destroy(E);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["wait-on-unrecorded-event"]);
}
