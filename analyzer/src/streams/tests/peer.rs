//! Copies between contexts and 2D memsets: a synchronous peer copy is serialized with all
//! work of every stream (non-blocking ones included), an asynchronous one is an ordinary
//! operation of its stream; 2D memsets are memsets.

use gpuleak_format::*;

use super::{tidy, two_streams, Run, A, B, P};

/// A second buffer, on "another device".
const Q: u64 = P + 0x10000;

fn non_blocking_pair() -> Run {
    let mut r = two_streams(1);
    r.alloc(Q);
    r
}

fn done(r: &mut Run) -> Vec<&'static str> {
    tidy(r).free_with(Api::cuMemFree_v2, Q, 0);
    r.checks()
}

#[test]
fn a_synchronous_peer_copy_comes_after_earlier_work_of_every_stream() {
    for api in [Api::cuMemcpyPeer, Api::cuMemcpyPeer_ptds, Api::cuMemcpy3DPeer] {
        // A kernel on a non-blocking stream writes P; the copy reads it.
        let mut r = non_blocking_pair();
        r.launch(A, P).copy(api, 0, Q, P, 64);
        assert_eq!(done(&mut r), Vec::<&str>::new(), "{api}");
    }
    // Twins: the asynchronous copy, and a synchronous device-to-device copy on the legacy
    // stream (which non-blocking streams are exempt from), race with the kernel.
    for (api, stream) in [
        (Api::cuMemcpyPeerAsync, B),
        (Api::cuMemcpyPeerAsync_ptsz, 0),
        (Api::cuMemcpy3DPeerAsync, B),
        (Api::cuMemcpyDtoD_v2, 0),
    ] {
        let mut r = non_blocking_pair();
        r.launch(A, P).copy(api, stream, Q, P, 64);
        assert_eq!(done(&mut r), vec!["cross-stream-race"], "{api}");
    }
}

#[test]
fn later_work_of_every_stream_comes_after_a_synchronous_peer_copy() {
    let mut r = non_blocking_pair();
    r.copy(Api::cuMemcpyPeer, 0, Q, P, 64).launch(B, Q).launch(A, P);
    assert_eq!(done(&mut r), Vec::<&str>::new());
    // What came before the copy is ordered before what comes after it, through it.
    let mut r = non_blocking_pair();
    r.launch(A, P + 128)
        .copy(Api::cuMemcpyPeer, 0, Q, P, 64)
        .copy(Api::cuMemsetD8Async, B, P + 128, 0, 1);
    assert_eq!(done(&mut r), Vec::<&str>::new());
    // Twin: an asynchronous peer copy orders only its own stream.
    let mut r = non_blocking_pair();
    r.copy(Api::cuMemcpyPeerAsync, A, Q, P, 64).launch(B, Q);
    assert_eq!(done(&mut r), vec!["cross-stream-race"]);
}

#[test]
fn a_synchronous_peer_copy_does_not_make_the_host_wait() {
    // Nothing waits for the copy before exit: it is left unsynchronized.
    let mut r = non_blocking_pair();
    r.copy(Api::cuMemcpyPeer, 0, Q, P, 64).destroy(A).destroy(B);
    let found = r.finish();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].check, super::super::Check::UnsynchronizedAtExit);
    assert_eq!(found[0].op.api, Api::cuMemcpyPeer);
    // A 3D peer copy into host memory does (the copy is then complete when it returns).
    let mut r = non_blocking_pair();
    r.copy(Api::cuMemcpy3DPeer, 0, 0x1000, P, 64).destroy(A).destroy(B);
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn a_2d_memset_writes_its_span_and_only_the_asynchronous_one_is_unordered() {
    for api in [
        Api::cuMemsetD2D8Async,
        Api::cuMemsetD2D16Async_ptsz,
        Api::cuMemsetD2D32Async,
    ] {
        let stream = if api == Api::cuMemsetD2D16Async_ptsz { 0 } else { B };
        // The kernel touches byte 1000, inside the memset's span.
        let mut r = non_blocking_pair();
        r.launch(A, P + 1000).copy(api, stream, P, 0, 1100);
        assert_eq!(done(&mut r), vec!["cross-stream-race"], "{api}");
        // Twin: outside it.
        let mut r = non_blocking_pair();
        r.launch(A, P + 1000).copy(api, stream, P, 0, 900);
        assert_eq!(done(&mut r), Vec::<&str>::new(), "{api}");
    }
    // Synchronous ones are legacy-stream operations: ordered with blocking streams.
    for api in [Api::cuMemsetD2D8_v2, Api::cuMemsetD2D16_v2, Api::cuMemsetD2D32_v2] {
        let mut r = two_streams(0);
        r.launch(A, P + 1000).copy(api, 0, P, 0, 1100).launch(B, P);
        assert_eq!(tidy(&mut r).checks(), Vec::<&str>::new(), "{api}");
    }
}
