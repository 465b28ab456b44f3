//! Stream memory operations: a stream made to wait until a memory location holds a value, or
//! to write one (`cuStreamWaitValue32/64`, `cuStreamWriteValue32/64`), and batches of them
//! (`cuStreamBatchMemOp`), as `MemOp` records. They order streams the way events do when
//! one stream writes the value another waits for (NVSHMEM, UCC and PyTorch's symmetric
//! memory use them), so the analyzer needs them to see that order.

use std::ffi::c_void;

use gpuleak_format::{Api, CuResult, MemOp};

use super::plain;
use crate::cuda::*;
use crate::{guard, tracer};

/// `sizeof(CUstreamBatchMemOpParams)`: a union padded to six 64-bit words.
const PARAMS_SIZE: usize = 48;
/// The driver refuses batches of 256 operations or more.
const MAX_BATCH: u32 = 256;

/// The operation of a single-value API.
fn op_of(api: Api) -> u32 {
    match api {
        Api::cuStreamWaitValue32
        | Api::cuStreamWaitValue32_ptsz
        | Api::cuStreamWaitValue32_v2
        | Api::cuStreamWaitValue32_v2_ptsz => MemOp::WAIT_32,
        Api::cuStreamWriteValue32
        | Api::cuStreamWriteValue32_ptsz
        | Api::cuStreamWriteValue32_v2
        | Api::cuStreamWriteValue32_v2_ptsz => MemOp::WRITE_32,
        Api::cuStreamWaitValue64
        | Api::cuStreamWaitValue64_ptsz
        | Api::cuStreamWaitValue64_v2
        | Api::cuStreamWaitValue64_v2_ptsz => MemOp::WAIT_64,
        _ => MemOp::WRITE_64,
    }
}

#[inline(always)]
fn record(api: Api, result: CuResult, stream: CUstream, op: u32, addr: u64, value: u64, flags: u32) -> MemOp {
    MemOp {
        api,
        result,
        stream: stream as u64,
        op,
        addr,
        value,
        flags,
    }
}

/// `cuStreamWaitValue32` and `cuStreamWriteValue32`, every ABI (`_v2`, `_ptsz`).
pub fn value32(
    api: Api,
    real: impl FnOnce() -> CUresult,
    stream: CUstream,
    addr: CUdeviceptr,
    value: u32,
    flags: u32,
) -> CUresult {
    plain(real, |r| {
        record(api, r, stream, op_of(api), addr, u64::from(value), flags)
    })
}

/// `cuStreamWaitValue64` and `cuStreamWriteValue64`, every ABI.
pub fn value64(
    api: Api,
    real: impl FnOnce() -> CUresult,
    stream: CUstream,
    addr: CUdeviceptr,
    value: u64,
    flags: u32,
) -> CUresult {
    plain(real, |r| record(api, r, stream, op_of(api), addr, value, flags))
}

/// Reads operation `i` of a batch: (op, address, value, flags).
///
/// # Safety
/// `params` holds at least `i + 1` operations.
unsafe fn batch_entry(params: *const u8, i: usize) -> (u32, u64, u64, u32) {
    // SAFETY: within the caller's array, as promised; unaligned reads, for the array is the
    // program's.
    unsafe {
        let p = params.add(i * PARAMS_SIZE);
        let word = |off: usize| p.add(off).cast::<u64>().read_unaligned();
        let half = |off: usize| p.add(off).cast::<u32>().read_unaligned();
        let op = half(0);
        match op {
            MemOp::WAIT_32 | MemOp::WRITE_32 => (op, word(8), u64::from(half(16)), half(24)),
            MemOp::WAIT_64 | MemOp::WRITE_64 => (op, word(8), word(16), half(24)),
            // The reduction's kind and data type (at 8 and 12) are left out: the analyzer
            // orders a wait after every reduction of its address, whatever it computes.
            MemOp::REDUCTION => (op, word(16), word(24), half(4)),
            // Flushes and barriers: a flags word and nothing else.
            _ => (op, 0, 0, half(4)),
        }
    }
}

/// `cuStreamBatchMemOp[_v2][_ptsz]`: one record per operation, in array order, read after a
/// successful call (the driver has read the array then); a refused batch is one record with
/// operation 0.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `params` is NULL or the program's array of `count`
/// operations.
pub unsafe fn batch(
    api: Api,
    real: impl FnOnce() -> CUresult,
    stream: CUstream,
    count: u32,
    params: *mut c_void,
    flags: u32,
) -> CUresult {
    let Some(g) = guard::enter() else {
        return real();
    };
    let r = real();
    if r != CUDA_SUCCESS || params.is_null() {
        tracer::event_fields(&g, &record(api, CuResult(r), stream, 0, 0, 0, flags));
        return r;
    }
    for i in 0..count.min(MAX_BATCH) as usize {
        // SAFETY: the contract above: `params` (not NULL) holds `count` operations, and
        // `i < count`; the driver accepted them all.
        let (op, addr, value, op_flags) = unsafe { batch_entry(params.cast::<u8>(), i) };
        tracer::event_fields(&g, &record(api, CuResult(r), stream, op, addr, value, op_flags));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn batch_entries_are_read_at_the_offsets_of_the_public_union() {
        let mut params = [0u8; 3 * PARAMS_SIZE];
        let put32 = |b: &mut [u8], off: usize, v: u32| b[off..off + 4].copy_from_slice(&v.to_le_bytes());
        let put64 = |b: &mut [u8], off: usize, v: u64| b[off..off + 8].copy_from_slice(&v.to_le_bytes());
        // A 32-bit write whose upper value word holds garbage.
        put32(&mut params, 0, MemOp::WRITE_32);
        put64(&mut params, 8, 0x7000_1000);
        put64(&mut params, 16, 0xdead_beef_0000_0007);
        put32(&mut params, 24, 1);
        // A 64-bit wait with the flush flag.
        let b = &mut params[PARAMS_SIZE..];
        put32(b, 0, MemOp::WAIT_64);
        put64(b, 8, 0x7000_2000);
        put64(b, 16, u64::MAX);
        put32(b, 24, 1 << 30);
        // A reduction.
        let b = &mut params[2 * PARAMS_SIZE..];
        put32(b, 0, MemOp::REDUCTION);
        put32(b, 4, 0);
        put64(b, 16, 0x7000_3000);
        put64(b, 24, 1);
        // SAFETY: `params` holds three operations, and `read` is called below with 0 to 2.
        let read = |i| unsafe { batch_entry(params.as_ptr(), i) };
        assert_eq!(read(0), (MemOp::WRITE_32, 0x7000_1000, 7, 1));
        assert_eq!(read(1), (MemOp::WAIT_64, 0x7000_2000, u64::MAX, 1 << 30));
        assert_eq!(read(2), (MemOp::REDUCTION, 0x7000_3000, 1, 0));
    }
}
