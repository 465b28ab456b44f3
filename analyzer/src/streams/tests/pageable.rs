//! Asynchronous copies into pageable host memory make the host wait (CUDA's "API
//! synchronization behavior"); into memory the trace shows pinned, registered, reserved or
//! mapped, they do not.

use gpuleak_format::*;

use super::{tidy, two_streams, Run, A, B, P};

/// A host address no record names: pageable memory.
const PAGEABLE: u64 = 0x1000;
/// Page-locked host memory (`cuMemAllocHost`).
const PINNED: u64 = 0x2000_0000;
/// A registered host range (`cuMemHostRegister`).
const REGISTERED: u64 = 0x3000_0000;
/// A VMM reservation (`cuMemAddressReserve`), mapped device memory the model does not track.
const RESERVED: u64 = 0x4000_0000;

impl Run {
    /// `P` copied to `dst` on `stream` by `api`, then a memset of `P` on B.
    fn copy_out_then_overwrite(&mut self, api: Api, dst: u64) -> &mut Run {
        self.launch(A, P)
            .copy(api, A, dst, P, 64)
            .copy(Api::cuMemsetD8Async, B, P, 0, 64)
    }
}

fn with_ranges() -> Run {
    let mut r = two_streams(1);
    r.alloc_with(Api::cuMemAllocHost_v2, PINNED, 4096, 0)
        .alloc_with(Api::cuMemHostRegister_v2, REGISTERED, 4096, 0)
        .alloc_with(Api::cuMemAddressReserve, RESERVED, 1 << 21, 0);
    r
}

#[test]
fn a_device_to_host_copy_into_pageable_memory_orders_what_the_host_queues_next() {
    for api in [
        Api::cuMemcpyDtoHAsync_v2,
        Api::cuMemcpyAsync,
        Api::cuMemcpy2DAsync_v2_ptsz,
    ] {
        let mut r = with_ranges();
        r.copy_out_then_overwrite(api, PAGEABLE);
        tidy(&mut r);
        assert_eq!(r.checks(), Vec::<&str>::new(), "{api}");
        // Twins: a destination the trace shows as memory; the host goes on at once.
        for dst in [PINNED, REGISTERED, RESERVED + 64] {
            let mut r = with_ranges();
            r.copy_out_then_overwrite(api, dst);
            tidy(&mut r);
            assert_eq!(r.checks(), vec!["cross-stream-race"], "{api} to {dst:#x}");
        }
    }
}

#[test]
fn a_copy_from_pageable_memory_or_a_device_to_device_copy_does_not_make_the_host_wait() {
    // Host to device from pageable memory may be staged without waiting (the driver "may"
    // synchronize): no edge.
    let mut r = two_streams(1);
    r.launch(A, P)
        .copy(Api::cuMemcpyHtoDAsync_v2, A, P + 64, PAGEABLE, 64)
        .copy(Api::cuMemsetD8Async, B, P, 0, 64);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
    // Device to device within tracked memory: no edge.
    let mut r = two_streams(1);
    r.launch(A, P)
        .copy(Api::cuMemcpyDtoDAsync_v2, A, P + 64, P, 64)
        .copy(Api::cuMemsetD8Async, B, P, 0, 64);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
}

#[test]
fn a_range_freed_or_unregistered_is_pageable_again() {
    let mut r = with_ranges();
    r.free_with(Api::cuMemHostUnregister, REGISTERED, 0)
        .copy_out_then_overwrite(Api::cuMemcpyDtoHAsync_v2, REGISTERED);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
    // A stream-ordered allocation made in a capture is graph memory, not pageable.
    let mut r = two_streams(1);
    let node = 0x5a00_0000_0000;
    r.capture_on(A, 1, 0)
        .alloc_with(Api::cuMemAllocAsync, node, 4096, A)
        .capture_on(A, 0, 0x6000)
        .copy_out_then_overwrite(Api::cuMemcpyAsync, node);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
}

/// Managed memory (`cuMemAllocManaged`).
const MANAGED: u64 = 0x7100_0000_0000;

#[test]
fn a_synchronous_memset_of_pinned_or_managed_memory_makes_the_host_wait() {
    for (api, target) in [(Api::cuMemAllocManaged, MANAGED), (Api::cuMemAllocHost_v2, PINNED)] {
        let mut r = two_streams(1);
        r.alloc_with(api, target, 4096, 0)
            .copy(Api::cuMemsetD32_v2, 0, target, 0, 64)
            .launch(A, target);
        tidy(&mut r);
        assert_eq!(r.checks(), Vec::<&str>::new(), "{api}");
        // Twin: the asynchronous memset is not waited for.
        let mut r = two_streams(1);
        r.alloc_with(api, target, 4096, 0)
            .copy(Api::cuMemsetD32Async, B, target, 0, 64)
            .launch(A, target);
        tidy(&mut r);
        assert_eq!(r.checks(), vec!["cross-stream-race"], "{api}");
    }
    // Registered memory is no memory the model tracks (no race to see), but the host's wait
    // shows: the legacy stream's memset is not left unwaited at the end.
    let end = |r: &mut Run| {
        r.sync(A).sync(B).destroy(A).destroy(B);
        r.checks()
    };
    let mut r = two_streams(1);
    r.alloc_with(Api::cuMemHostRegister_v2, REGISTERED, 4096, 0)
        .copy(Api::cuMemsetD32_v2, 0, REGISTERED, 0, 64);
    assert_eq!(end(&mut r), Vec::<&str>::new());
    let mut r = two_streams(1);
    r.copy(Api::cuMemsetD32_v2, 0, P, 0, 64);
    assert_eq!(end(&mut r), vec!["unsynchronized-at-exit"]);
    // And a memset of device memory on the legacy stream does not make the host wait: a
    // non-blocking stream's kernel races it.
    let mut r = two_streams(1);
    r.copy(Api::cuMemsetD32_v2, 0, P, 0, 64).launch(A, P);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
}

#[test]
fn a_unified_copy_between_device_buffers_does_not_make_the_host_wait() {
    let q = P + 0x10000;
    let mut r = two_streams(1);
    r.alloc(q).copy(Api::cuMemcpy, 0, q, P, 64).launch(A, q);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
    // Twin: from (pageable) host memory, it does.
    let mut r = two_streams(1);
    r.alloc(q).copy(Api::cuMemcpy, 0, q, PAGEABLE, 64).launch(A, q);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
}
