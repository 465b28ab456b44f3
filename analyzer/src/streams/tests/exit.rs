//! The end of a run: streams and events never destroyed, and work no host thread waited for
//! before exit or a context teardown (stream-ordered allocations and frees left pending are not
//! counted).

use gpuleak_format::*;

use super::{two_streams, Run, A, B, P};
use crate::streams::{Check, Moment};

#[test]
fn streams_and_events_never_destroyed_leak_folded_by_creation_site() {
    let mut r = Run::new();
    for h in 0..3 {
        r.stream(0x100 + h, 0).event(0x200 + h);
    }
    r.stream(0x300, 0).destroy(0x300).event(0x400).event_destroy(0x400);
    let found = r.finish();
    let summary: Vec<(&str, u64)> = found.iter().map(|f| (f.check.name(), f.count)).collect();
    assert_eq!(summary, vec![("stream-leak", 3), ("event-leak", 3)]);
    assert_eq!(found[0].op.stack, StackId(10));
    assert_eq!(found[1].op.stack, StackId(20));
}

#[test]
fn a_handle_created_again_without_a_destroy_leaked_the_first() {
    let mut r = Run::new();
    r.stream(A, 0).stream(A, 0).destroy(A);
    assert_eq!(r.checks(), vec!["stream-leak"]);
}

#[test]
fn an_external_semaphore_imported_again_without_a_destroy_leaked_the_first() {
    let import = || ExtSemaphore {
        api: Api::cuImportExternalSemaphore,
        result: CuResult(0),
        semaphore: 0x5e,
        handle_type: 1,
        flags: 0,
        stack: StackId(30),
    };
    let destroy = ExtSemaphore {
        api: Api::cuDestroyExternalSemaphore,
        result: CuResult(0),
        semaphore: 0x5e,
        handle_type: 0,
        flags: 0,
        stack: StackId::NONE,
    };
    let mut r = Run::new();
    r.r(import()).r(import()).r(destroy.clone());
    assert_eq!(r.checks(), vec!["semaphore-leak"]);
    // Destroyed between the imports: nothing.
    let mut r = Run::new();
    r.r(import()).r(destroy.clone()).r(import()).r(destroy);
    assert!(r.checks().is_empty());
}

#[test]
fn work_never_waited_for_is_unsynchronized_at_exit_once_per_stream_site() {
    let mut r = two_streams(1);
    r.launch(A, P).launch(B, P + 8).destroy(A).destroy(B);
    let found = r.finish();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].check, Check::UnsynchronizedAtExit);
    assert_eq!(found[0].count, 2);
    assert_eq!(found[0].moment, Some(Moment::Exit));
    // A synchronous cuMemFree waits for the device first.
    let mut r = two_streams(1);
    r.launch(A, P).launch(B, P + 8).destroy(A).destroy(B);
    r.free_with(Api::cuMemFree_v2, P, 0);
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn stream_ordered_allocations_and_frees_alone_are_not_unsynchronized_at_exit() {
    const Q: u64 = P + 0x10000;
    // The kernel was waited for; the free queued after it was not, and needs no wait: the
    // memory goes back to the driver at exit whether or not the free ran.
    let mut r = two_streams(1);
    r.alloc_with(Api::cuMemAllocAsync, Q, 256, A).launch(A, Q).sync(A);
    r.free_async(Q, A).destroy(A).destroy(B);
    assert_eq!(r.checks(), Vec::<&str>::new());
    // Nor does an allocation that nothing used.
    let mut r = two_streams(1);
    r.alloc_with(Api::cuMemAllocAsync, Q, 256, A).destroy(A).destroy(B);
    assert_eq!(r.checks(), Vec::<&str>::new());
    // The twin: the kernel was not waited for. The finding names it, not the later free.
    let mut r = two_streams(1);
    r.alloc_with(Api::cuMemAllocAsync, Q, 256, A).launch(A, Q);
    r.free_async(Q, A).destroy(A).destroy(B);
    let found = r.finish();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].check, Check::UnsynchronizedAtExit);
    assert_eq!(found[0].op.api, Api::cuLaunchKernel);
    assert_eq!(found[0].ptr, Q);
}

#[test]
fn a_teardown_reports_unwaited_work_once_and_settles_it() {
    let mut r = two_streams(1);
    r.launch(A, P).destroy(A).destroy(B);
    r.s.teardown(Api::cuCtxDestroy_v2);
    let found = r.finish();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].moment, Some(Moment::Teardown(Api::cuCtxDestroy_v2)));
}

#[test]
fn with_several_contexts_a_teardown_is_not_judged() {
    let mut r = two_streams(1);
    r.r(CtxCreate {
        api: Api::cuCtxCreate_v2,
        result: CuResult::SUCCESS,
        ctx: Ctx(2),
        device: 1,
        flags: 0,
    });
    r.launch(A, P).destroy(A).destroy(B);
    r.s.teardown(Api::cuCtxDestroy_v2);
    let found = r.finish();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].moment, Some(Moment::Exit));
}

/// Addresses 0x1000 to 0x1000 + 39 * 0x10, in an order no map keeps.
fn shuffled_handles() -> Vec<u64> {
    (0..40u64).map(|i| 0x1000 + ((i * 17) % 40) * 0x10).collect()
}

#[test]
fn events_and_semaphores_created_at_one_sequence_number_leak_in_handle_order() {
    let mut r = Run::new();
    for h in shuffled_handles() {
        // One sequence number for all (a damaged or merged trace), a site for each.
        r.seq = 9;
        r.r(EventCreate {
            api: Api::cuEventCreate,
            result: CuResult::SUCCESS,
            event: Event(h),
            flags: 0,
            stack: StackId(h as u32),
        });
        r.seq = 9;
        r.r(ExtSemaphore {
            api: Api::cuImportExternalSemaphore,
            result: CuResult(0),
            semaphore: h,
            handle_type: 1,
            flags: 0,
            stack: StackId(h as u32 + 1),
        });
    }
    let found = r.finish();
    let stacks = |check: Check| -> Vec<u32> {
        found
            .iter()
            .filter(|f| f.check == check)
            .map(|f| f.op.stack.0)
            .collect()
    };
    let mut sorted = shuffled_handles();
    sorted.sort_unstable();
    let by_handle: Vec<u32> = sorted.iter().map(|&h| h as u32).collect();
    assert_eq!(stacks(Check::EventLeak), by_handle);
    assert_eq!(
        stacks(Check::SemaphoreLeak),
        by_handle.iter().map(|s| s + 1).collect::<Vec<_>>()
    );
}
