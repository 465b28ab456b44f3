//! Copies and memsets, 1D, 2D and 3D, as `Copy` records (`src` 0 for a memset).

use std::ffi::c_void;

use gpuleak_format::{Api, Copy, CuResult, Ptr, Stream};

use super::{regions, sampled};
use crate::cuda::*;
use crate::exports::graph_nodes;
use crate::{guard, tracer};

/// A copy or memset (`src` 0 for a memset); synchronous APIs record stream 0, which the
/// analyzer reads as the legacy default stream, or the per-thread one for `_ptds` variants.
#[inline(always)]
pub(super) fn copy(
    api: Api,
    stream: CUstream,
    dst: u64,
    src: u64,
    bytes: u64,
    call: impl FnOnce() -> CUresult,
) -> CUresult {
    sampled((api, stream), call, |r, stack| Copy {
        api,
        result: r,
        stream: Stream(stream as u64),
        dst: Ptr(dst),
        src,
        bytes,
        stack,
    })
}

pub(super) const NO_STREAM: CUstream = std::ptr::null_mut();

/// `cuMemcpy[_ptds]`, `cuMemcpyDtoD_v2[_ptds]`.
pub fn copy_sync(api: Api, real: impl FnOnce() -> CUresult, dst: CUdeviceptr, src: CUdeviceptr, n: usize) -> CUresult {
    copy(api, NO_STREAM, dst, src, n as u64, real)
}

/// `cuMemcpyAsync[_ptsz]`, `cuMemcpyDtoDAsync_v2[_ptsz]`.
#[inline]
pub fn copy_async(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: usize,
    stream: CUstream,
) -> CUresult {
    copy(api, stream, dst, src, n as u64, real)
}

/// `cuMemcpyHtoD_v2[_ptds]`.
pub fn copy_htod(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dst: CUdeviceptr,
    src: *const c_void,
    n: usize,
) -> CUresult {
    copy(api, NO_STREAM, dst, src as u64, n as u64, real)
}

/// `cuMemcpyHtoDAsync_v2[_ptsz]`.
#[inline]
pub fn copy_htod_async(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dst: CUdeviceptr,
    src: *const c_void,
    n: usize,
    stream: CUstream,
) -> CUresult {
    copy(api, stream, dst, src as u64, n as u64, real)
}

/// `cuMemcpyDtoH_v2[_ptds]`.
pub fn copy_dtoh(api: Api, real: impl FnOnce() -> CUresult, dst: *mut c_void, src: CUdeviceptr, n: usize) -> CUresult {
    copy(api, NO_STREAM, dst as u64, src, n as u64, real)
}

/// `cuMemcpyDtoHAsync_v2[_ptsz]`.
#[inline]
pub fn copy_dtoh_async(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dst: *mut c_void,
    src: CUdeviceptr,
    n: usize,
    stream: CUstream,
) -> CUresult {
    copy(api, stream, dst as u64, src, n as u64, real)
}

/// A memset's element (`u8`, `u16`, `u32`): its width in bytes is what `N` counts.
fn element_bytes<T>() -> u64 {
    std::mem::size_of::<T>() as u64
}

/// `cuMemsetD{8,16,32}_v2[_ptds]` (`bytes` = N times the element's width).
pub fn memset<T: std::marker::Copy>(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dst: CUdeviceptr,
    _value: T,
    n: usize,
) -> CUresult {
    copy(
        api,
        NO_STREAM,
        dst,
        0,
        (n as u64).saturating_mul(element_bytes::<T>()),
        real,
    )
}

/// `cuMemsetD{8,16,32}Async[_ptsz]`.
#[inline]
pub fn memset_async<T: std::marker::Copy>(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dst: CUdeviceptr,
    _value: T,
    n: usize,
    stream: CUstream,
) -> CUresult {
    copy(
        api,
        stream,
        dst,
        0,
        (n as u64).saturating_mul(element_bytes::<T>()),
        real,
    )
}

/// `cuMemcpyPeer[_ptds]`: a device-to-device copy between two contexts (which the record does
/// not keep; the analyzer takes every context to be one).
pub fn copy_peer(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dst: CUdeviceptr,
    _dst_ctx: CUcontext,
    src: CUdeviceptr,
    _src_ctx: CUcontext,
    n: usize,
) -> CUresult {
    copy(api, NO_STREAM, dst, src, n as u64, real)
}

/// `cuMemcpyPeerAsync[_ptsz]`.
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn copy_peer_async(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dst: CUdeviceptr,
    _dst_ctx: CUcontext,
    src: CUdeviceptr,
    _src_ctx: CUcontext,
    n: usize,
    stream: CUstream,
) -> CUresult {
    copy(api, stream, dst, src, n as u64, real)
}

/// `cuMemsetD2D{8,16,32}_v2[_ptds]`.
pub fn memset_2d<T: std::marker::Copy>(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dst: CUdeviceptr,
    pitch: usize,
    _value: T,
    width: usize,
    height: usize,
) -> CUresult {
    let bytes = regions::memset_span(pitch, width, height, element_bytes::<T>());
    copy(api, NO_STREAM, dst, 0, bytes, real)
}

/// `cuMemsetD2D{8,16,32}Async[_ptsz]`.
#[allow(clippy::too_many_arguments)]
#[inline]
pub fn memset_2d_async<T: std::marker::Copy>(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dst: CUdeviceptr,
    pitch: usize,
    _value: T,
    width: usize,
    height: usize,
    stream: CUstream,
) -> CUresult {
    let bytes = regions::memset_span(pitch, width, height, element_bytes::<T>());
    copy(api, stream, dst, 0, bytes, real)
}

/// A 2D or 3D copy: like [`copy`], with the addresses and length read from the descriptor
/// after the call, and only when it succeeded (the driver has then read and validated it; a
/// refused copy is recorded with no addresses).
#[inline(always)]
fn copy_described(
    api: Api,
    stream: CUstream,
    call: impl FnOnce() -> CUresult,
    region: impl FnOnce() -> regions::Region,
) -> CUresult {
    let Some(g) = guard::enter() else {
        return call();
    };
    let r = call();
    let at = if r == CUDA_SUCCESS {
        region()
    } else {
        regions::Region::default()
    };
    tracer::hot_event(&g, |stack| Copy {
        api,
        result: CuResult(r),
        stream: Stream(stream as u64),
        dst: Ptr(at.dst),
        src: at.src,
        bytes: at.bytes,
        stack,
    });
    graph_nodes::after_work(&g, api, r, stream);
    r
}

/// A copy descriptor (`CUDA_MEMCPY2D`, `CUDA_MEMCPY3D`) and the region it describes.
pub trait Descriptor: std::marker::Copy {
    /// The bytes the copy reads and writes.
    fn region(&self) -> regions::Region;
}

impl Descriptor for CUDA_MEMCPY2D {
    fn region(&self) -> regions::Region {
        regions::of_2d(self)
    }
}

impl Descriptor for CUDA_MEMCPY3D {
    fn region(&self) -> regions::Region {
        regions::of_3d(self)
    }
}

impl Descriptor for CUDA_MEMCPY3D_BATCH_OP {
    fn region(&self) -> regions::Region {
        regions::of_batch_op(self, array_element)
    }
}

/// Bytes per element of `array`, as `cuArray3DGetDescriptor_v2` describes it (`None` if it
/// cannot, or for a format or channel count this shim does not know).
fn array_element(array: u64) -> Option<u64> {
    type GetDescriptor = unsafe extern "C" fn(*mut CUDA_ARRAY3D_DESCRIPTOR, CUarray) -> CUresult;
    let f = crate::dlsym::driver_fn(crate::dlsym::Getter::cuArray3DGetDescriptor_v2)?;
    // SAFETY: the driver's cuArray3DGetDescriptor_v2, found by name, with its C signature.
    let f: GetDescriptor = unsafe { std::mem::transmute::<usize, GetDescriptor>(f) };
    let mut d = CUDA_ARRAY3D_DESCRIPTOR::default();
    // SAFETY: `d` is a valid out-parameter; the array was just copied with, so it is live.
    if unsafe { f(&mut d, array as CUarray) } != CUDA_SUCCESS {
        return None;
    }
    let channels = u64::from(d.num_channels);
    matches!(channels, 1 | 2 | 4)
        .then(|| array_format_bytes(d.format).map(|b| b * channels))
        .flatten()
}

/// The region of the descriptor at `p` (nothing for NULL).
///
/// # Safety
/// Called only after the driver succeeded with `p`: a non-null `p` points at a descriptor
/// it has just read.
unsafe fn described<T: Descriptor>(p: *const T) -> regions::Region {
    if p.is_null() {
        return regions::Region::default();
    }
    // SAFETY: the caller's contract; read unaligned, as a program's struct may be packed.
    unsafe { p.read_unaligned() }.region()
}

/// `cuMemcpy2D_v2[_ptds]`, `cuMemcpy2DUnaligned_v2[_ptds]`, `cuMemcpy3D_v2[_ptds]`,
/// `cuMemcpy3DPeer[_ptds]` (the default stream, as for `cuMemcpy`).
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `p` is NULL or the program's copy descriptor.
pub unsafe fn copy_descriptor<T: Descriptor>(api: Api, real: impl FnOnce() -> CUresult, p: *const T) -> CUresult {
    copy_described(
        api,
        NO_STREAM,
        real,
        // SAFETY: the contract above: `p` is NULL or the program's descriptor, and
        // `copy_described` asks for the region only after a successful copy, inside the call.
        || unsafe { described(p) },
    )
}

/// `cuMemcpy3DWithAttributesAsync[_ptsz]` (CUDA 13.2: one operation of a 3D batch).
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `op` is NULL or the program's copy operation.
pub unsafe fn copy_3d_with_attributes(
    api: Api,
    real: impl FnOnce() -> CUresult,
    op: *const CUDA_MEMCPY3D_BATCH_OP,
    _flags: u64,
    stream: CUstream,
) -> CUresult {
    copy_described(
        api,
        stream,
        real,
        // SAFETY: as in `copy_descriptor`.
        || unsafe { described(op) },
    )
}

/// `cuMemcpy2DAsync_v2[_ptsz]`, `cuMemcpy3DAsync_v2[_ptsz]`, `cuMemcpy3DPeerAsync[_ptsz]`.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `p` is NULL or the program's copy descriptor.
pub unsafe fn copy_descriptor_async<T: Descriptor>(
    api: Api,
    real: impl FnOnce() -> CUresult,
    p: *const T,
    stream: CUstream,
) -> CUresult {
    copy_described(
        api,
        stream,
        real,
        // SAFETY: as in `copy_descriptor`.
        || unsafe { described(p) },
    )
}

/// Runs a batch of copies and records a `Copy` per copy, `entry(i)` giving copy `i`'s
/// destination, source and length ([`super::batched`]).
///
/// # Safety
/// `entry(i)` may be called for every `i < count` when the call succeeded and `readable`.
unsafe fn batched(
    api: Api,
    stream: CUstream,
    count: (usize, bool),
    call: impl FnOnce() -> CUresult,
    entry: impl Fn(usize) -> (u64, u64, u64),
) -> CUresult {
    super::batched(count, call, entry, |result, (dst, src, bytes), stack| Copy {
        api,
        result,
        stream: Stream(stream as u64),
        dst: Ptr(dst),
        src,
        bytes,
        stack,
    })
}

/// Copy `i` of a batch of 1D copies.
///
/// # Safety
/// `dsts`, `srcs` and `sizes` hold more than `i` entries each.
unsafe fn linear_entry(
    dsts: *const CUdeviceptr,
    srcs: *const CUdeviceptr,
    sizes: *const usize,
    i: usize,
) -> (u64, u64, u64) {
    // SAFETY: the caller's contract.
    unsafe { (dsts.add(i).read(), srcs.add(i).read(), sizes.add(i).read() as u64) }
}

/// Operation `i` of a batch of 3D copies.
///
/// # Safety
/// `ops` holds more than `i` operations.
unsafe fn op_entry(ops: *const CUDA_MEMCPY3D_BATCH_OP, i: usize) -> (u64, u64, u64) {
    // SAFETY: the caller's contract; read unaligned, as a program's array may be packed.
    let r = unsafe { ops.add(i).read_unaligned() }.region();
    (r.dst, r.src, r.bytes)
}

/// `cuMemcpyBatchAsync[_ptsz]` (CUDA 12.8: with the index of a failed copy).
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `dsts`, `srcs` and `sizes` are each NULL or the
/// program's array of `count` entries.
#[allow(clippy::too_many_arguments)]
pub unsafe fn copy_batch(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dsts: *const CUdeviceptr,
    srcs: *const CUdeviceptr,
    sizes: *const usize,
    count: usize,
    _attrs: *const c_void,
    _attr_idxs: *const usize,
    _num_attrs: usize,
    _fail_idx: *mut usize,
    stream: CUstream,
) -> CUresult {
    // SAFETY: the contract above: each array, when none is NULL, holds `count` entries, and
    // `batched` reads entry `i < count` only then, after success.
    unsafe {
        batched(
            api,
            stream,
            (count, !dsts.is_null() && !srcs.is_null() && !sizes.is_null()),
            real,
            |i| linear_entry(dsts, srcs, sizes, i),
        )
    }
}

/// `cuMemcpyBatchAsync_v2[_ptsz]` (CUDA 13.0: no failure index).
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `dsts`, `srcs` and `sizes` are each NULL or the
/// program's array of `count` entries.
#[allow(clippy::too_many_arguments)]
pub unsafe fn copy_batch_v2(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dsts: *const CUdeviceptr,
    srcs: *const CUdeviceptr,
    sizes: *const usize,
    count: usize,
    _attrs: *const c_void,
    _attr_idxs: *const usize,
    _num_attrs: usize,
    stream: CUstream,
) -> CUresult {
    // SAFETY: the contract above: each array, when none is NULL, holds `count` entries, and
    // `batched` reads entry `i < count` only then, after success.
    unsafe {
        batched(
            api,
            stream,
            (count, !dsts.is_null() && !srcs.is_null() && !sizes.is_null()),
            real,
            |i| linear_entry(dsts, srcs, sizes, i),
        )
    }
}

/// `cuMemcpy3DBatchAsync[_ptsz]` (CUDA 12.8: with the index of a failed copy).
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `ops` is NULL or the program's array of `count`
/// operations.
pub unsafe fn copy_3d_batch(
    api: Api,
    real: impl FnOnce() -> CUresult,
    count: usize,
    ops: *const CUDA_MEMCPY3D_BATCH_OP,
    _fail_idx: *mut usize,
    _flags: u64,
    stream: CUstream,
) -> CUresult {
    // SAFETY: the contract above: `ops`, when not NULL, holds `count` operations, and
    // `batched` reads operation `i < count` only then, after success.
    unsafe { batched(api, stream, (count, !ops.is_null()), real, |i| op_entry(ops, i)) }
}

/// `cuMemcpy3DBatchAsync_v2[_ptsz]` (CUDA 13.0: no failure index).
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `ops` is NULL or the program's array of `count`
/// operations.
pub unsafe fn copy_3d_batch_v2(
    api: Api,
    real: impl FnOnce() -> CUresult,
    count: usize,
    ops: *const CUDA_MEMCPY3D_BATCH_OP,
    _flags: u64,
    stream: CUstream,
) -> CUresult {
    // SAFETY: as in `copy_3d_batch`.
    unsafe { batched(api, stream, (count, !ops.is_null()), real, |i| op_entry(ops, i)) }
}

/// `cuMemcpyWithAttributesAsync[_ptsz]` (CUDA 13.2: one copy with the attributes of a batch's).
pub fn copy_with_attributes(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: usize,
    _attr: *const c_void,
    stream: CUstream,
) -> CUresult {
    copy(api, stream, dst, src, n as u64, real)
}

#[cfg(test)]
mod tests {
    use super::regions;

    #[test]
    fn a_2d_memset_spans_its_rows_pitches_apart_and_its_last_row_s_elements() {
        // 3 rows of 10 two-byte elements, 64 bytes apart: 2 * 64 + 20.
        assert_eq!(regions::memset_span(64, 10, 3, 2), 148);
        // One row: the pitch does not matter.
        assert_eq!(regions::memset_span(0, 10, 1, 4), 40);
        assert_eq!(regions::memset_span(64, 0, 3, 1), 0);
        assert_eq!(regions::memset_span(64, 10, 0, 1), 0);
        assert_eq!(regions::memset_span(usize::MAX, usize::MAX, usize::MAX, 4), u64::MAX);
    }
}
