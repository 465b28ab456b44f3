//! Prefetches and discards of managed memory on a stream (`cuMemPrefetchAsync[_v2]`,
//! `cuMemPrefetchBatchAsync`, `cuMemDiscardBatchAsync`, `cuMemDiscardAndPrefetchBatchAsync`,
//! each with `_ptsz`), as `RangeOp` records: one per range, with where a prefetch moves it.
//!
//! A prefetch is work on its stream that touches nothing (accesses stay coherent while the
//! range migrates), and "uses standard default stream semantics", so a prefetch on the legacy
//! stream orders blocking streams; a discard is a write of its range. The analyzer draws both
//! from the API; the shim records the ranges.

use gpuleak_format::{Api, CuResult, MemLocation, RangeOp, StackId};

use super::sampled;
use crate::cuda::*;
use crate::{guard, tracer};

/// `CU_MEM_LOCATION_TYPE_DEVICE` and `_HOST`.
const DEVICE: u32 = 1;
const HOST: u32 = 2;
/// `CU_DEVICE_CPU`: the host, as `cuMemPrefetchAsync`'s device ordinal.
const DEVICE_CPU: CUdevice = -1;

/// `CUmemLocation`: a location type and an id (a device ordinal, a NUMA node).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CUmemLocation {
    /// `CUmemLocationType`.
    pub kind: u32,
    /// The id the type gives meaning to.
    pub id: i32,
}

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

fn one(
    api: Api,
    stream: CUstream,
    ptr: CUdeviceptr,
    n: usize,
    location: u64,
    call: impl FnOnce() -> CUresult,
) -> CUresult {
    sampled((api, stream), call, |r, stack| RangeOp {
        api,
        result: r,
        stream: stream as u64,
        ptr,
        bytes: n as u64,
        location,
        stack,
    })
}

/// `cuMemPrefetchAsync[_ptsz]` (8.0: to a device ordinal, or `CU_DEVICE_CPU`).
pub unsafe fn prefetch(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, usize, CUdevice, CUstream) -> CUresult,
    ptr: CUdeviceptr,
    n: usize,
    device: CUdevice,
    stream: CUstream,
) -> CUresult {
    one(api, stream, ptr, n, device_location(device), || {
        // SAFETY: passed through.
        unsafe { real(ptr, n, device, stream) }
    })
}

/// `cuMemPrefetchAsync_v2[_ptsz]` (12.2: to a location; the name CUDA 13 calls
/// `cuMemPrefetchAsync`).
pub unsafe fn prefetch_v2(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, usize, CUmemLocation, u32, CUstream) -> CUresult,
    ptr: CUdeviceptr,
    n: usize,
    location: CUmemLocation,
    flags: u32,
    stream: CUstream,
) -> CUresult {
    one(api, stream, ptr, n, location.encoded(), || {
        // SAFETY: passed through.
        unsafe { real(ptr, n, location, flags, stream) }
    })
}

/// Runs a batch and records a `RangeOp` per range, `entry(i)` giving range `i`'s start,
/// length and location, read after a successful call (the driver has read the arrays then),
/// all with the one stack the call gets; a refused batch is one `RangeOp` of nothing.
fn batched(
    api: Api,
    stream: CUstream,
    (count, readable): (usize, bool),
    call: impl FnOnce() -> CUresult,
    entry: impl Fn(usize) -> (u64, u64, u64),
) -> CUresult {
    let Some(g) = guard::enter() else {
        return call();
    };
    let r = call();
    let ok = r == CUDA_SUCCESS && readable && count > 0;
    let record = |(ptr, bytes, location): (u64, u64, u64), stack| RangeOp {
        api,
        result: CuResult(r),
        stream: stream as u64,
        ptr,
        bytes,
        location,
        stack,
    };
    let first = if ok { entry(0) } else { (0, 0, 0) };
    let mut stack = StackId::NONE;
    tracer::hot_event(&g, |s| {
        stack = s;
        record(first, s)
    });
    if ok {
        for i in 1..count {
            tracer::event_fields(&g, &record(entry(i), stack));
        }
    }
    r
}

/// Range `i` of a batch: its start and length, and (with locations) the location of the
/// last entry of `idxs` at or before `i` (`locations[k]` applies from `idxs[k]` on).
///
/// # Safety
/// `ptrs` and `sizes` hold more than `i` entries; `locations` and `idxs`, when not NULL,
/// hold `n_locations` entries each.
unsafe fn range_entry(
    ptrs: *const CUdeviceptr,
    sizes: *const usize,
    (locations, idxs, n_locations): (*const CUmemLocation, *const usize, usize),
    i: usize,
) -> (u64, u64, u64) {
    // SAFETY: the caller's contract.
    let (ptr, bytes) = unsafe { (ptrs.add(i).read(), sizes.add(i).read() as u64) };
    if locations.is_null() || idxs.is_null() {
        return (ptr, bytes, 0);
    }
    let mut location = 0;
    for k in 0..n_locations {
        // SAFETY: k < n_locations, the caller's contract; read unaligned, as a program's
        // array may be packed.
        let (from, at) = unsafe { (idxs.add(k).read(), locations.add(k).read_unaligned()) };
        if from > i {
            break;
        }
        location = at.encoded();
    }
    (ptr, bytes, location)
}

/// `cuMemPrefetchBatchAsync[_ptsz]` (13.0).
#[allow(clippy::too_many_arguments)]
pub unsafe fn prefetch_batch(
    api: Api,
    real: unsafe extern "C" fn(
        *mut CUdeviceptr,
        *mut usize,
        usize,
        *mut CUmemLocation,
        *mut usize,
        usize,
        u64,
        CUstream,
    ) -> CUresult,
    ptrs: *mut CUdeviceptr,
    sizes: *mut usize,
    count: usize,
    locations: *mut CUmemLocation,
    idxs: *mut usize,
    n_locations: usize,
    flags: u64,
    stream: CUstream,
) -> CUresult {
    batched(
        api,
        stream,
        (count, !ptrs.is_null() && !sizes.is_null()),
        // SAFETY: passed through.
        || unsafe { real(ptrs, sizes, count, locations, idxs, n_locations, flags, stream) },
        // SAFETY: on success the driver read `count` entries of ptrs and sizes and
        // `n_locations` of locations and idxs.
        |i| unsafe { range_entry(ptrs, sizes, (locations, idxs, n_locations), i) },
    )
}

/// `cuMemDiscardBatchAsync[_ptsz]` (13.0).
pub unsafe fn discard_batch(
    api: Api,
    real: unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, usize, u64, CUstream) -> CUresult,
    ptrs: *mut CUdeviceptr,
    sizes: *mut usize,
    count: usize,
    flags: u64,
    stream: CUstream,
) -> CUresult {
    let no_locations = (std::ptr::null(), std::ptr::null(), 0);
    batched(
        api,
        stream,
        (count, !ptrs.is_null() && !sizes.is_null()),
        // SAFETY: passed through.
        || unsafe { real(ptrs, sizes, count, flags, stream) },
        // SAFETY: on success the driver read `count` entries of ptrs and sizes.
        |i| unsafe { range_entry(ptrs, sizes, no_locations, i) },
    )
}

/// `cuMemDiscardAndPrefetchBatchAsync[_ptsz]` (13.0): the arguments of a prefetch batch.
#[allow(clippy::too_many_arguments)]
pub unsafe fn discard_and_prefetch_batch(
    api: Api,
    real: unsafe extern "C" fn(
        *mut CUdeviceptr,
        *mut usize,
        usize,
        *mut CUmemLocation,
        *mut usize,
        usize,
        u64,
        CUstream,
    ) -> CUresult,
    ptrs: *mut CUdeviceptr,
    sizes: *mut usize,
    count: usize,
    locations: *mut CUmemLocation,
    idxs: *mut usize,
    n_locations: usize,
    flags: u64,
    stream: CUstream,
) -> CUresult {
    // SAFETY: the same contract as a prefetch batch's.
    unsafe {
        prefetch_batch(
            api,
            real,
            ptrs,
            sizes,
            count,
            locations,
            idxs,
            n_locations,
            flags,
            stream,
        )
    }
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
        let got: Vec<(u64, u64, u64)> = (0..4)
            // SAFETY: four ranges, two locations.
            .map(|i| unsafe { range_entry(ptrs.as_ptr(), sizes.as_ptr(), (locations.as_ptr(), idxs.as_ptr(), 2), i) })
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
        let bare = unsafe {
            range_entry(
                ptrs.as_ptr(),
                sizes.as_ptr(),
                (std::ptr::null(), std::ptr::null(), 0),
                1,
            )
        };
        assert_eq!(bare, (0x2000, 32, 0));
    }
}
