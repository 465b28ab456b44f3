//! Prefetches and discards of managed memory on a stream (`cuMemPrefetchAsync[_v2]`,
//! `cuMemPrefetchBatchAsync`, `cuMemDiscardBatchAsync`, `cuMemDiscardAndPrefetchBatchAsync`,
//! each with `_ptsz`), as `RangeOp` records: one per range, with where a prefetch moves it.
//!
//! A prefetch is work on its stream that touches nothing (accesses stay coherent while the
//! range migrates), and "uses standard default stream semantics", so a prefetch on the legacy
//! stream orders blocking streams; a discard is a write of its range. The analyzer draws both
//! from the API; the shim records the ranges.

use std::cell::Cell;

use gpuleak_format::{Api, CuResult, MemLocation, RangeOp};

use crate::cuda::*;
use crate::{guard, tracer};

/// `CU_MEM_LOCATION_TYPE_DEVICE` and `_HOST`.
const DEVICE: u32 = 1;
const HOST: u32 = 2;
/// `CU_DEVICE_CPU`: the host, as `cuMemPrefetchAsync`'s device ordinal.
const DEVICE_CPU: CUdevice = -1;

impl CUmemLocation {
    fn encoded(self) -> u64 {
        MemLocation::encode(self.kind, self.id)
    }
}

/// The location a device ordinal names (`CU_DEVICE_CPU`: the host; any other negative one
/// is no location).
fn device_location(device: CUdevice) -> u64 {
    match device {
        DEVICE_CPU => MemLocation::encode(HOST, 0),
        d if d >= 0 => MemLocation::encode(DEVICE, d),
        d => MemLocation::encode(0, d),
    }
}

/// One prefetch: recorded like a copy (a stack only as `GPULEAK_SYNC_STACKS` asks), but with
/// no graph node looked for after it, as graphs have no prefetch node (a capturing stream
/// refuses the call).
fn one(
    api: Api,
    stream: CUstream,
    ptr: CUdeviceptr,
    n: usize,
    location: u64,
    call: impl FnOnce() -> CUresult,
) -> CUresult {
    let Some(g) = guard::enter() else {
        return call();
    };
    let r = call();
    tracer::hot_event(&g, |stack| RangeOp {
        api,
        result: CuResult(r),
        stream: stream as u64,
        ptr,
        bytes: n as u64,
        location,
        stack,
    });
    r
}

/// `cuMemPrefetchAsync[_ptsz]` (8.0: to a device ordinal, or `CU_DEVICE_CPU`).
pub fn prefetch(
    api: Api,
    real: impl FnOnce() -> CUresult,
    ptr: CUdeviceptr,
    n: usize,
    device: CUdevice,
    stream: CUstream,
) -> CUresult {
    one(api, stream, ptr, n, device_location(device), real)
}

/// `cuMemPrefetchAsync_v2[_ptsz]` (12.2: to a location; the name CUDA 13 calls
/// `cuMemPrefetchAsync`).
pub fn prefetch_v2(
    api: Api,
    real: impl FnOnce() -> CUresult,
    ptr: CUdeviceptr,
    n: usize,
    location: CUmemLocation,
    _flags: u32,
    stream: CUstream,
) -> CUresult {
    one(api, stream, ptr, n, location.encoded(), real)
}

/// Runs a batch and records a `RangeOp` per range, `entry(i)` giving range `i`'s start,
/// length and location ([`super::batched`]).
fn batched(
    api: Api,
    stream: CUstream,
    count: (usize, bool),
    call: impl FnOnce() -> CUresult,
    entry: impl Fn(usize) -> (u64, u64, u64),
) -> CUresult {
    super::batched(count, call, entry, |result, (ptr, bytes, location), stack| RangeOp {
        api,
        result,
        stream: stream as u64,
        ptr,
        bytes,
        location,
        stack,
    })
}

/// A batch's locations, read once, in range order: `locations[k]` applies to the ranges
/// from `idxs[k]` on (the driver checked that the indices start at 0 and increase).
struct Locations {
    locations: *const CUmemLocation,
    idxs: *const usize,
    n: usize,
    /// The next entry to look at, and the location of the last one passed (0 before any).
    cursor: Cell<(usize, u64)>,
}

impl Locations {
    /// None: a discard's ranges have no location.
    fn none() -> Locations {
        Locations::new(std::ptr::null(), std::ptr::null(), 0)
    }

    fn new(locations: *const CUmemLocation, idxs: *const usize, n: usize) -> Locations {
        let n = if locations.is_null() || idxs.is_null() { 0 } else { n };
        Locations {
            locations,
            idxs,
            n,
            cursor: Cell::new((0, 0)),
        }
    }

    /// The location of range `i`: that of the last entry whose index is at most `i`. Calls
    /// must come with `i` never decreasing, so that a batch costs one pass over each array.
    ///
    /// # Safety
    /// `locations` and `idxs` hold `n` entries each (when not NULL).
    unsafe fn of(&self, i: usize) -> u64 {
        let (mut k, mut location) = self.cursor.get();
        while k < self.n {
            // SAFETY: k < n, the caller's contract; read unaligned, as a program's arrays may
            // be packed.
            let (from, at) = unsafe {
                (
                    self.idxs.add(k).read_unaligned(),
                    self.locations.add(k).read_unaligned(),
                )
            };
            if from > i {
                break;
            }
            location = at.encoded();
            k += 1;
        }
        self.cursor.set((k, location));
        location
    }
}

/// Range `i` of a batch: its start, length and location.
///
/// # Safety
/// `ptrs` and `sizes` hold more than `i` entries; `locations` has the contract of
/// [`Locations::of`].
unsafe fn range_entry(
    ptrs: *const CUdeviceptr,
    sizes: *const usize,
    locations: &Locations,
    i: usize,
) -> (u64, u64, u64) {
    // SAFETY: the caller's contract; read unaligned, as a program's arrays may be packed.
    unsafe {
        (
            ptrs.add(i).read_unaligned(),
            sizes.add(i).read_unaligned() as u64,
            locations.of(i),
        )
    }
}

/// `cuMemPrefetchBatchAsync[_ptsz]` and `cuMemDiscardAndPrefetchBatchAsync[_ptsz]` (13.0), which
/// take the same arguments.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `ptrs` and `sizes` are each NULL or the program's
/// array of `count` entries, `locations` and `idxs` each NULL or its array of `n_locations`.
#[allow(clippy::too_many_arguments)]
pub unsafe fn prefetch_batch(
    api: Api,
    real: impl FnOnce() -> CUresult,
    ptrs: *mut CUdeviceptr,
    sizes: *mut usize,
    count: usize,
    locations: *mut CUmemLocation,
    idxs: *mut usize,
    n_locations: usize,
    _flags: u64,
    stream: CUstream,
) -> CUresult {
    let places = Locations::new(locations, idxs, n_locations);
    batched(
        api,
        stream,
        (count, !ptrs.is_null() && !sizes.is_null()),
        real,
        // SAFETY: the contract above: `ptrs` and `sizes` hold `count` entries and
        // `locations` and `idxs` `n_locations`; `batched` asks for `i < count` only, after
        // success, and only when `ptrs` and `sizes` are not NULL (`Locations` drops NULL
        // arrays itself).
        |i| unsafe { range_entry(ptrs, sizes, &places, i) },
    )
}

/// `cuMemDiscardBatchAsync[_ptsz]` (13.0).
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `ptrs` and `sizes` are each NULL or the program's
/// array of `count` entries.
pub unsafe fn discard_batch(
    api: Api,
    real: impl FnOnce() -> CUresult,
    ptrs: *mut CUdeviceptr,
    sizes: *mut usize,
    count: usize,
    _flags: u64,
    stream: CUstream,
) -> CUresult {
    let no_locations = Locations::none();
    batched(
        api,
        stream,
        (count, !ptrs.is_null() && !sizes.is_null()),
        real,
        // SAFETY: the contract above: `ptrs` and `sizes` hold `count` entries; `batched`
        // asks for `i < count` only, after success, and only when neither is NULL.
        |i| unsafe { range_entry(ptrs, sizes, &no_locations, i) },
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_device_ordinal_is_a_device_location_and_cu_device_cpu_the_host() {
        assert_eq!(MemLocation::decode(device_location(3)), MemLocation::Device(3));
        assert_eq!(MemLocation::decode(device_location(DEVICE_CPU)), MemLocation::Host);
        assert_eq!(MemLocation::decode(device_location(-2)), MemLocation::Unknown);
    }

    #[test]
    fn each_range_of_a_batch_takes_the_location_of_the_last_index_at_or_before_it() {
        let ptrs = [0x1000u64, 0x2000, 0x3000, 0x4000];
        let sizes = [16usize, 32, 48, 64];
        let locations = [
            CUmemLocation { kind: DEVICE, id: 1 },
            CUmemLocation { kind: HOST, id: 0 },
        ];
        let idxs = [0usize, 2];
        let places = Locations::new(locations.as_ptr(), idxs.as_ptr(), 2);
        let got: Vec<(u64, u64, u64)> = (0..4)
            // SAFETY: four ranges and two locations, asked for in order with `i` from 0 to 3.
            .map(|i| unsafe { range_entry(ptrs.as_ptr(), sizes.as_ptr(), &places, i) })
            .collect();
        let dev = MemLocation::encode(DEVICE, 1);
        let host = MemLocation::encode(HOST, 0);
        assert_eq!(
            got,
            [
                (0x1000, 16, dev),
                (0x2000, 32, dev),
                (0x3000, 48, host),
                (0x4000, 64, host)
            ]
        );
        // SAFETY: as above, with no locations (a discard).
        let bare = unsafe { range_entry(ptrs.as_ptr(), sizes.as_ptr(), &Locations::none(), 1) };
        assert_eq!(bare, (0x2000, 32, 0));
    }
}
