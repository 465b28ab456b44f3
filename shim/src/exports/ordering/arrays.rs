//! Copies to and from CUDA arrays (`cuMemcpy{HtoA,AtoH,AtoA,DtoA,AtoD}_v2[_ptds]`,
//! `cuMemcpy{HtoA,AtoH}Async_v2[_ptsz]`), as `Copy` records whose array side is 0.
//!
//! An array's contents are reached only through its handle, never at an address a kernel or
//! another copy could share, so the record keeps the other side and the byte count, as a 2D
//! or 3D copy with an array side does ([`super::regions`]). What the copy means to the order
//! of work (the default stream for the synchronous ones, the host waiting for a copy into host
//! memory) follows from its API in the analyzer.

use std::ffi::c_void;

use gpuleak_format::Api;

use super::copies::{copy, NO_STREAM};
use crate::cuda::*;

/// An array side: no address the analyzer tracks.
const ARRAY: u64 = 0;

/// `cuMemcpyHtoA_v2[_ptds]`.
pub fn copy_htoa(
    api: Api,
    real: impl FnOnce() -> CUresult,
    _dst: CUarray,
    _offset: usize,
    src: *const c_void,
    n: usize,
) -> CUresult {
    copy(api, NO_STREAM, ARRAY, src as u64, n as u64, real)
}

/// `cuMemcpyAtoH_v2[_ptds]`.
pub fn copy_atoh(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dst: *mut c_void,
    _src: CUarray,
    _offset: usize,
    n: usize,
) -> CUresult {
    copy(api, NO_STREAM, dst as u64, ARRAY, n as u64, real)
}

/// `cuMemcpyAtoA_v2[_ptds]`.
pub fn copy_atoa(
    api: Api,
    real: impl FnOnce() -> CUresult,
    _dst: CUarray,
    _dst_offset: usize,
    _src: CUarray,
    _src_offset: usize,
    n: usize,
) -> CUresult {
    copy(api, NO_STREAM, ARRAY, ARRAY, n as u64, real)
}

/// `cuMemcpyDtoA_v2[_ptds]`.
pub fn copy_dtoa(
    api: Api,
    real: impl FnOnce() -> CUresult,
    _dst: CUarray,
    _offset: usize,
    src: CUdeviceptr,
    n: usize,
) -> CUresult {
    copy(api, NO_STREAM, ARRAY, src, n as u64, real)
}

/// `cuMemcpyAtoD_v2[_ptds]`.
pub fn copy_atod(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dst: CUdeviceptr,
    _src: CUarray,
    _offset: usize,
    n: usize,
) -> CUresult {
    copy(api, NO_STREAM, dst, ARRAY, n as u64, real)
}

/// `cuMemcpyHtoAAsync_v2[_ptsz]`.
#[inline]
pub fn copy_htoa_async(
    api: Api,
    real: impl FnOnce() -> CUresult,
    _dst: CUarray,
    _offset: usize,
    src: *const c_void,
    n: usize,
    stream: CUstream,
) -> CUresult {
    copy(api, stream, ARRAY, src as u64, n as u64, real)
}

/// `cuMemcpyAtoHAsync_v2[_ptsz]`.
#[inline]
pub fn copy_atoh_async(
    api: Api,
    real: impl FnOnce() -> CUresult,
    dst: *mut c_void,
    _src: CUarray,
    _offset: usize,
    n: usize,
    stream: CUstream,
) -> CUresult {
    copy(api, stream, dst as u64, ARRAY, n as u64, real)
}
