//! Freed managed memory is host address space again: an array the C library places there
//! (which the trace does not show) and a copy names as host memory is no use after free, and
//! registering it (`cuMemHostRegister`) ends the freed range's claim. Device work on the
//! freed range still is a use after free.

use gpuleak_format::*;

use super::{tidy, two_streams, Run, A, B, P};

/// A managed allocation, freed before the copies below.
const MANAGED: u64 = 0x6000_0000;
/// A host array inside the freed managed range.
const ARRAY: u64 = MANAGED + 0x100;

impl Run {
    /// A managed allocation at `MANAGED`, freed (`cuMemFree`).
    fn managed_freed(&mut self) -> &mut Run {
        self.alloc_with(Api::cuMemAllocManaged, MANAGED, 4096, 0)
            .free_with(Api::cuMemFree_v2, MANAGED, 0)
    }
}

#[test]
fn a_registered_host_array_where_managed_memory_was_freed_is_no_use_after_free() {
    // numba-cuda: a NumPy array page-locked in place, copied to the device and back.
    let mut r = two_streams(1);
    r.managed_freed()
        .alloc_with(Api::cuMemHostRegister_v2, ARRAY, 64, 0)
        .copy(Api::cuMemcpyHtoD_v2, 0, P, ARRAY, 64)
        .copy(Api::cuMemcpyAsync, A, ARRAY, P, 64)
        .sync(A)
        // Registered memory is the device's to write too (a device pointer to a memset).
        .copy(Api::cuMemsetD8_v2, 0, ARRAY, 0, 64)
        .copy(Api::cuMemcpy, 0, P, ARRAY + 8, 8)
        .free_with(Api::cuMemHostUnregister, ARRAY, 0)
        // Unregistered, it is still the program's array.
        .copy(Api::cuMemcpy, 0, P, ARRAY, 8);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn a_host_pointer_in_a_freed_managed_range_is_host_memory_not_a_use_after_free() {
    let mut r = two_streams(1);
    r.managed_freed()
        .copy(Api::cuMemcpyHtoD_v2, 0, P, ARRAY, 64)
        .copy(Api::cuMemcpyDtoHAsync_v2, B, ARRAY, P, 64)
        .copy(Api::cuMemcpyHtoDAsync_v2, B, P, ARRAY, 64);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
    // The copy into it is into pageable memory, which the host waits for: the memset B
    // queues after it is ordered after the copy's read of P.
    let mut r = two_streams(1);
    r.managed_freed()
        .copy(Api::cuMemcpyDtoHAsync_v2, A, ARRAY, P, 64)
        .copy(Api::cuMemsetD8Async, B, P, 0, 64);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn device_work_on_freed_managed_memory_is_a_use_after_free() {
    // A kernel, a memset, and the device sides of copies.
    for work in [
        |r: &mut Run| {
            r.launch(A, ARRAY);
        },
        |r: &mut Run| {
            r.copy(Api::cuMemsetD8Async, A, ARRAY, 0, 64);
        },
        |r: &mut Run| {
            r.copy(Api::cuMemcpyHtoDAsync_v2, A, ARRAY, 0x1000, 64);
        },
        |r: &mut Run| {
            r.copy(Api::cuMemcpyDtoHAsync_v2, A, 0x1000, ARRAY, 64);
        },
        |r: &mut Run| {
            r.copy(Api::cuMemcpyDtoD_v2, 0, P, ARRAY, 64);
        },
    ] {
        let mut r = two_streams(1);
        r.managed_freed();
        work(&mut r);
        tidy(&mut r);
        assert_eq!(r.checks(), vec!["use-after-free"]);
    }
    // A registration elsewhere leaves the freed range's claim.
    let mut r = two_streams(1);
    r.managed_freed()
        .alloc_with(Api::cuMemHostRegister_v2, MANAGED + 4096, 64, 0)
        .launch(A, ARRAY);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["use-after-free"]);
}
