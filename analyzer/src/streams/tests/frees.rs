//! Stream-ordered allocations and frees: an allocation is a use of its stream, a free needs an
//! edge from the memory's last use, and work after the free is a use after free.

use gpuleak_format::*;

use super::{tidy, two_streams, A, B, E, P};
use crate::streams::Check;

#[test]
fn a_stream_ordered_free_needs_an_edge_from_the_last_use() {
    let mut r = two_streams(0);
    r.launch(A, P).free_async(P, B).sync(A).sync(B).destroy(A).destroy(B);
    let found = r.finish();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].check, Check::UnorderedFree);
    assert_eq!(found[0].other.unwrap().api, Api::cuLaunchKernel);
    // Twin: the free's stream waits for an event after the use.
    let mut r = two_streams(0);
    r.event(E)
        .launch(A, P)
        .record(E, A)
        .wait(B, E)
        .free_async(P, B)
        .sync(A)
        .sync(B)
        .destroy(A)
        .destroy(B)
        .event_destroy(E);
    assert_eq!(r.checks(), Vec::<&str>::new());
    // Twin: the free on the legacy stream waits for the blocking stream.
    let mut r = two_streams(0);
    r.launch(A, P).free_async(P, 0).sync(0).sync(A).destroy(A).destroy(B);
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn an_async_allocation_is_a_use_of_its_stream() {
    let mut r = two_streams(1);
    r.alloc_with(Api::cuMemAllocAsync, P + 0x100000, 256, A)
        .free_async(P + 0x100000, B)
        .sync(A)
        .sync(B);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["unordered-free"]);
}

#[test]
fn work_queued_after_a_stream_ordered_free_is_a_use_after_free() {
    let mut r = two_streams(0);
    r.launch(A, P)
        .free_async(P, A)
        .launch(A, P)
        .sync(A)
        .destroy(A)
        .destroy(B);
    let found = r.finish();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].check, Check::UseAfterFree);
    assert_eq!(found[0].other.unwrap().api, Api::cuMemFreeAsync);
    // An address handed out again is live again.
    let mut r = two_streams(0);
    r.launch(A, P)
        .free_async(P, A)
        .alloc_with(Api::cuMemAllocAsync, P, 64, A)
        .launch(A, P);
    r.free_async(P, A).sync(A).destroy(A).destroy(B);
    assert_eq!(r.checks(), Vec::<&str>::new());
}
