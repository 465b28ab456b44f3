//! Prefetches and discards of managed memory (`RangeOp` records): stream work that touches
//! nothing (a prefetch) or writes its range (a discard), and that no program waits for.

use gpuleak_format::*;

use super::super::*;
use super::{tidy, two_streams, Run, A, B, P};

impl Run {
    fn range_op(&mut self, api: Api, result: u32, stream: u64, ptr: u64) -> &mut Run {
        self.r(RangeOp {
            api,
            result: CuResult(result),
            stream,
            ptr,
            bytes: 4096,
            location: MemLocation::encode(1, 0),
            stack: StackId::NONE,
        })
    }
}

#[test]
fn a_prefetch_on_the_legacy_stream_orders_blocking_streams_and_on_its_own_races_with_nothing() {
    // Blocking streams (flags 0): the legacy stream's prefetch comes after A's kernel and
    // before B's read.
    let mut r = two_streams(0);
    r.launch(A, P)
        .range_op(Api::cuMemPrefetchAsync, 0, 0, P + 0x100_0000)
        .read_back(B);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
    // Twin: on the per-thread default stream it orders nothing.
    let mut r = two_streams(0);
    r.launch(A, P)
        .range_op(Api::cuMemPrefetchAsync_ptsz, 0, 0, P + 0x100_0000)
        .read_back(B);
    tidy(&mut r);
    assert_eq!(r.checks(), ["cross-stream-race"]);
    // A prefetch of the buffer a kernel on another stream writes is no race.
    let mut r = two_streams(1);
    r.launch(A, P).range_op(Api::cuMemPrefetchAsync_v2, 0, B, P);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn a_discard_writes_its_range() {
    let mut r = two_streams(1);
    r.launch(A, P).range_op(Api::cuMemDiscardBatchAsync, 0, B, P);
    tidy(&mut r);
    let found = r.finish();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].check, Check::CrossStreamRace);
    assert_eq!(found[0].op.api, Api::cuMemDiscardBatchAsync);
    // Twin: after waiting for the kernel.
    let mut r = two_streams(1);
    r.event(0xe1)
        .launch(A, P)
        .record(0xe1, A)
        .wait(B, 0xe1)
        .range_op(Api::cuMemDiscardAndPrefetchBatchAsync, 0, B, P);
    tidy(&mut r).event_destroy(0xe1);
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn prefetches_and_discards_left_pending_are_not_unsynchronized_at_exit() {
    for api in [
        Api::cuMemPrefetchAsync,
        Api::cuMemPrefetchBatchAsync,
        Api::cuMemDiscardBatchAsync,
    ] {
        let mut r = two_streams(1);
        r.range_op(api, 0, A, P).destroy(A).destroy(B);
        assert_eq!(r.checks(), Vec::<&str>::new(), "{api:?}");
    }
    // A kernel before the prefetch still is, and is the work named.
    let mut r = two_streams(1);
    r.launch(A, P)
        .range_op(Api::cuMemPrefetchAsync, 0, A, P)
        .destroy(A)
        .destroy(B);
    let found = r.finish();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].check, Check::UnsynchronizedAtExit);
    assert_eq!(found[0].op.api, Api::cuLaunchKernel);
}

#[test]
fn a_refused_prefetch_of_freed_memory_is_a_use_after_free_and_of_live_memory_nothing() {
    let mut r = two_streams(1);
    r.range_op(Api::cuMemPrefetchAsync, 1, A, P);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
    let mut r = two_streams(1);
    tidy(&mut r);
    r.range_op(Api::cuMemPrefetchAsync, 1, 0, P);
    let found = r.finish();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].check, Check::UseAfterFree);
    // A refused batch names no range: nothing.
    let mut r = two_streams(1);
    tidy(&mut r);
    r.range_op(Api::cuMemPrefetchBatchAsync, 1, 0, 0);
    assert_eq!(r.checks(), Vec::<&str>::new());
}
