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
pub unsafe fn copy_sync(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, CUdeviceptr, usize) -> CUresult,
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: usize,
) -> CUresult {
    copy(api, NO_STREAM, dst, src, n as u64, || {
        // SAFETY: passed through.
        unsafe { real(dst, src, n) }
    })
}

/// `cuMemcpyAsync[_ptsz]`, `cuMemcpyDtoDAsync_v2[_ptsz]`.
#[inline]
pub unsafe fn copy_async(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, CUdeviceptr, usize, CUstream) -> CUresult,
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: usize,
    stream: CUstream,
) -> CUresult {
    copy(api, stream, dst, src, n as u64, || {
        // SAFETY: passed through.
        unsafe { real(dst, src, n, stream) }
    })
}

/// `cuMemcpyHtoD_v2[_ptds]`.
pub unsafe fn copy_htod(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, *const c_void, usize) -> CUresult,
    dst: CUdeviceptr,
    src: *const c_void,
    n: usize,
) -> CUresult {
    copy(api, NO_STREAM, dst, src as u64, n as u64, || {
        // SAFETY: passed through.
        unsafe { real(dst, src, n) }
    })
}

/// `cuMemcpyHtoDAsync_v2[_ptsz]`.
#[inline]
pub unsafe fn copy_htod_async(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, *const c_void, usize, CUstream) -> CUresult,
    dst: CUdeviceptr,
    src: *const c_void,
    n: usize,
    stream: CUstream,
) -> CUresult {
    copy(api, stream, dst, src as u64, n as u64, || {
        // SAFETY: passed through.
        unsafe { real(dst, src, n, stream) }
    })
}

/// `cuMemcpyDtoH_v2[_ptds]`.
pub unsafe fn copy_dtoh(
    api: Api,
    real: unsafe extern "C" fn(*mut c_void, CUdeviceptr, usize) -> CUresult,
    dst: *mut c_void,
    src: CUdeviceptr,
    n: usize,
) -> CUresult {
    copy(api, NO_STREAM, dst as u64, src, n as u64, || {
        // SAFETY: passed through.
        unsafe { real(dst, src, n) }
    })
}

/// `cuMemcpyDtoHAsync_v2[_ptsz]`.
#[inline]
pub unsafe fn copy_dtoh_async(
    api: Api,
    real: unsafe extern "C" fn(*mut c_void, CUdeviceptr, usize, CUstream) -> CUresult,
    dst: *mut c_void,
    src: CUdeviceptr,
    n: usize,
    stream: CUstream,
) -> CUresult {
    copy(api, stream, dst as u64, src, n as u64, || {
        // SAFETY: passed through.
        unsafe { real(dst, src, n, stream) }
    })
}

/// A memset's element (`u8`, `u16`, `u32`): its width in bytes is what `N` counts.
fn element_bytes<T>() -> u64 {
    std::mem::size_of::<T>() as u64
}

/// `cuMemsetD{8,16,32}_v2[_ptds]` (`bytes` = N times the element's width).
pub unsafe fn memset<T: std::marker::Copy>(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, T, usize) -> CUresult,
    dst: CUdeviceptr,
    value: T,
    n: usize,
) -> CUresult {
    copy(
        api,
        NO_STREAM,
        dst,
        0,
        (n as u64).saturating_mul(element_bytes::<T>()),
        || {
            // SAFETY: passed through.
            unsafe { real(dst, value, n) }
        },
    )
}

/// `cuMemsetD{8,16,32}Async[_ptsz]`.
#[inline]
pub unsafe fn memset_async<T: std::marker::Copy>(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, T, usize, CUstream) -> CUresult,
    dst: CUdeviceptr,
    value: T,
    n: usize,
    stream: CUstream,
) -> CUresult {
    copy(
        api,
        stream,
        dst,
        0,
        (n as u64).saturating_mul(element_bytes::<T>()),
        || {
            // SAFETY: passed through.
            unsafe { real(dst, value, n, stream) }
        },
    )
}

/// `cuMemcpyPeer[_ptds]`: a device-to-device copy between two contexts (which the record does
/// not keep; the analyzer takes every context to be one).
pub unsafe fn copy_peer(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, usize) -> CUresult,
    dst: CUdeviceptr,
    dst_ctx: CUcontext,
    src: CUdeviceptr,
    src_ctx: CUcontext,
    n: usize,
) -> CUresult {
    copy(api, NO_STREAM, dst, src, n as u64, || {
        // SAFETY: passed through.
        unsafe { real(dst, dst_ctx, src, src_ctx, n) }
    })
}

/// `cuMemcpyPeerAsync[_ptsz]`.
#[allow(clippy::too_many_arguments)]
#[inline]
pub unsafe fn copy_peer_async(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, usize, CUstream) -> CUresult,
    dst: CUdeviceptr,
    dst_ctx: CUcontext,
    src: CUdeviceptr,
    src_ctx: CUcontext,
    n: usize,
    stream: CUstream,
) -> CUresult {
    copy(api, stream, dst, src, n as u64, || {
        // SAFETY: passed through.
        unsafe { real(dst, dst_ctx, src, src_ctx, n, stream) }
    })
}

/// `cuMemsetD2D{8,16,32}_v2[_ptds]`.
pub unsafe fn memset_2d<T: std::marker::Copy>(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, usize, T, usize, usize) -> CUresult,
    dst: CUdeviceptr,
    pitch: usize,
    value: T,
    width: usize,
    height: usize,
) -> CUresult {
    let bytes = regions::memset_span(pitch, width, height, element_bytes::<T>());
    copy(api, NO_STREAM, dst, 0, bytes, || {
        // SAFETY: passed through.
        unsafe { real(dst, pitch, value, width, height) }
    })
}

/// `cuMemsetD2D{8,16,32}Async[_ptsz]`.
#[allow(clippy::too_many_arguments)]
#[inline]
pub unsafe fn memset_2d_async<T: std::marker::Copy>(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, usize, T, usize, usize, CUstream) -> CUresult,
    dst: CUdeviceptr,
    pitch: usize,
    value: T,
    width: usize,
    height: usize,
    stream: CUstream,
) -> CUresult {
    let bytes = regions::memset_span(pitch, width, height, element_bytes::<T>());
    copy(api, stream, dst, 0, bytes, || {
        // SAFETY: passed through.
        unsafe { real(dst, pitch, value, width, height, stream) }
    })
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
    let f = crate::exports::dlsym::driver_fn(crate::exports::dlsym::Getter::cuArray3DGetDescriptor_v2)?;
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
pub unsafe fn copy_descriptor<T: Descriptor>(
    api: Api,
    real: unsafe extern "C" fn(*const T) -> CUresult,
    p: *const T,
) -> CUresult {
    copy_described(
        api,
        NO_STREAM,
        // SAFETY: passed through.
        || unsafe { real(p) },
        // SAFETY: `copy_described` asks for the region only after a successful copy.
        || unsafe { described(p) },
    )
}

/// `cuMemcpy3DWithAttributesAsync[_ptsz]` (CUDA 13.2: one operation of a 3D batch).
pub unsafe fn copy_3d_with_attributes(
    api: Api,
    real: unsafe extern "C" fn(*const CUDA_MEMCPY3D_BATCH_OP, u64, CUstream) -> CUresult,
    op: *const CUDA_MEMCPY3D_BATCH_OP,
    flags: u64,
    stream: CUstream,
) -> CUresult {
    copy_described(
        api,
        stream,
        // SAFETY: passed through.
        || unsafe { real(op, flags, stream) },
        // SAFETY: as in `copy_descriptor`.
        || unsafe { described(op) },
    )
}

/// `cuMemcpy2DAsync_v2[_ptsz]`, `cuMemcpy3DAsync_v2[_ptsz]`, `cuMemcpy3DPeerAsync[_ptsz]`.
pub unsafe fn copy_descriptor_async<T: Descriptor>(
    api: Api,
    real: unsafe extern "C" fn(*const T, CUstream) -> CUresult,
    p: *const T,
    stream: CUstream,
) -> CUresult {
    copy_described(
        api,
        stream,
        // SAFETY: passed through.
        || unsafe { real(p, stream) },
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
#[allow(clippy::too_many_arguments)]
pub unsafe fn copy_batch(
    api: Api,
    real: unsafe extern "C" fn(
        *const CUdeviceptr,
        *const CUdeviceptr,
        *const usize,
        usize,
        *const c_void,
        *const usize,
        usize,
        *mut usize,
        CUstream,
    ) -> CUresult,
    dsts: *const CUdeviceptr,
    srcs: *const CUdeviceptr,
    sizes: *const usize,
    count: usize,
    attrs: *const c_void,
    attr_idxs: *const usize,
    num_attrs: usize,
    fail_idx: *mut usize,
    stream: CUstream,
) -> CUresult {
    // SAFETY: passed through; on success the driver read `count` entries of each array.
    unsafe {
        batched(
            api,
            stream,
            (count, !dsts.is_null() && !srcs.is_null() && !sizes.is_null()),
            || real(dsts, srcs, sizes, count, attrs, attr_idxs, num_attrs, fail_idx, stream),
            |i| linear_entry(dsts, srcs, sizes, i),
        )
    }
}

/// `cuMemcpyBatchAsync_v2[_ptsz]` (CUDA 13.0: no failure index).
#[allow(clippy::too_many_arguments)]
pub unsafe fn copy_batch_v2(
    api: Api,
    real: unsafe extern "C" fn(
        *const CUdeviceptr,
        *const CUdeviceptr,
        *const usize,
        usize,
        *const c_void,
        *const usize,
        usize,
        CUstream,
    ) -> CUresult,
    dsts: *const CUdeviceptr,
    srcs: *const CUdeviceptr,
    sizes: *const usize,
    count: usize,
    attrs: *const c_void,
    attr_idxs: *const usize,
    num_attrs: usize,
    stream: CUstream,
) -> CUresult {
    // SAFETY: passed through; on success the driver read `count` entries of each array.
    unsafe {
        batched(
            api,
            stream,
            (count, !dsts.is_null() && !srcs.is_null() && !sizes.is_null()),
            || real(dsts, srcs, sizes, count, attrs, attr_idxs, num_attrs, stream),
            |i| linear_entry(dsts, srcs, sizes, i),
        )
    }
}

/// `cuMemcpy3DBatchAsync[_ptsz]` (CUDA 12.8: with the index of a failed copy).
pub unsafe fn copy_3d_batch(
    api: Api,
    real: unsafe extern "C" fn(usize, *const CUDA_MEMCPY3D_BATCH_OP, *mut usize, u64, CUstream) -> CUresult,
    count: usize,
    ops: *const CUDA_MEMCPY3D_BATCH_OP,
    fail_idx: *mut usize,
    flags: u64,
    stream: CUstream,
) -> CUresult {
    // SAFETY: passed through; on success the driver read `count` operations.
    unsafe {
        batched(
            api,
            stream,
            (count, !ops.is_null()),
            || real(count, ops, fail_idx, flags, stream),
            |i| op_entry(ops, i),
        )
    }
}

/// `cuMemcpy3DBatchAsync_v2[_ptsz]` (CUDA 13.0: no failure index).
pub unsafe fn copy_3d_batch_v2(
    api: Api,
    real: unsafe extern "C" fn(usize, *const CUDA_MEMCPY3D_BATCH_OP, u64, CUstream) -> CUresult,
    count: usize,
    ops: *const CUDA_MEMCPY3D_BATCH_OP,
    flags: u64,
    stream: CUstream,
) -> CUresult {
    // SAFETY: as above.
    unsafe {
        batched(
            api,
            stream,
            (count, !ops.is_null()),
            || real(count, ops, flags, stream),
            |i| op_entry(ops, i),
        )
    }
}

/// `cuMemcpyWithAttributesAsync[_ptsz]` (CUDA 13.2: one copy with the attributes of a batch's).
pub unsafe fn copy_with_attributes(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, CUdeviceptr, usize, *const c_void, CUstream) -> CUresult,
    dst: CUdeviceptr,
    src: CUdeviceptr,
    n: usize,
    attr: *const c_void,
    stream: CUstream,
) -> CUresult {
    copy(api, stream, dst, src, n as u64, || {
        // SAFETY: passed through.
        unsafe { real(dst, src, n, attr, stream) }
    })
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
