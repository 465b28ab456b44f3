//! External semaphores (Vulkan, D3D or another process's, imported through a shareable
//! handle): their import and destruction (`ExtSemaphore` records: the handle type says what
//! a signal and a wait mean, and the driver has no getter for it later) and their signals and
//! waits on a stream (`ExtSemaphoreOp` records, one per semaphore), which order streams the
//! way events do when one stream signals what another waits for.

use gpuleak_format::{Api, CuResult, ExtSemaphore, ExtSemaphoreOp, StackId};

use crate::cuda::*;
use crate::{guard, tracer};

/// `sizeof(CUDA_EXTERNAL_SEMAPHORE_SIGNAL_PARAMS)` and `_WAIT_PARAMS`: a 72-byte parameter
/// struct, the flags word, 16 reserved words, padded to 8 bytes.
const PARAMS_SIZE: usize = 144;
/// Offset of `params.keyedMutex.key` (after the fence value and the NvSciSync union).
const KEY_OFFSET: usize = 16;
/// Offset of `flags`.
const FLAGS_OFFSET: usize = 72;

/// `cuImportExternalSemaphore`: the semaphore, its handle type and flags from the descriptor
/// (`type` at offset 0, `flags` at 24 after the 16-byte handle union), and with
/// `GPULEAK_OBJECT_STACKS=1` the stack.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `desc` is NULL or the program's semaphore handle
/// descriptor.
pub unsafe fn import(
    api: Api,
    real: impl FnOnce() -> CUresult,
    sem: Out<CUexternalSemaphore>,
    desc: *const u8,
) -> CUresult {
    let Some(g) = guard::enter() else {
        return real();
    };
    let r = real();
    let handle = sem.after(r).map_or(0, |h| h as u64);
    let (handle_type, flags) = if desc.is_null() {
        (0, 0)
    } else {
        // SAFETY: the contract above: not NULL, so the program's descriptor (28 bytes at
        // least: `flags` ends there), readable while its call runs; unaligned reads, for the
        // memory is the program's.
        unsafe {
            (
                desc.cast::<u32>().read_unaligned(),
                desc.add(24).cast::<u32>().read_unaligned(),
            )
        }
    };
    let stack = tracer::object_stack(&g);
    tracer::event(
        &g,
        ExtSemaphore {
            api,
            result: CuResult(r),
            semaphore: handle,
            handle_type,
            flags,
            stack,
        },
    );
    r
}

/// `cuDestroyExternalSemaphore`, numbered before the call (a handle the driver hands out
/// again then sorts after it).
pub fn destroy(api: Api, real: impl FnOnce() -> CUresult, sem: CUexternalSemaphore) -> CUresult {
    let Some(g) = guard::enter() else {
        return real();
    };
    let pending = tracer::before(&g);
    let r = real();
    tracer::event_at(
        &g,
        pending,
        ExtSemaphore {
            api,
            result: CuResult(r),
            semaphore: sem as u64,
            handle_type: 0,
            flags: 0,
            stack: StackId::NONE,
        },
    );
    r
}

/// Reads semaphore `i` of a call: (semaphore, fence value, key, flags).
///
/// # Safety
/// `sems` and `params` hold at least `i + 1` entries.
unsafe fn entry(sems: *const CUexternalSemaphore, params: *const u8, i: usize) -> (u64, u64, u64, u32) {
    // SAFETY: within the caller's arrays, as promised; unaligned reads, for the arrays are
    // the program's.
    unsafe {
        let p = params.add(i * PARAMS_SIZE);
        (
            sems.add(i).read_unaligned() as u64,
            p.cast::<u64>().read_unaligned(),
            p.add(KEY_OFFSET).cast::<u64>().read_unaligned(),
            p.add(FLAGS_OFFSET).cast::<u32>().read_unaligned(),
        )
    }
}

/// `cuSignalExternalSemaphoresAsync` and `cuWaitExternalSemaphoresAsync`, each with
/// `_ptsz`: one record per semaphore, in array order, read after a successful call (the
/// driver has read the arrays then); a refused call is one record with semaphore 0.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `sems` and `params` are each NULL or the program's
/// array of `count` entries.
pub unsafe fn signal_or_wait(
    api: Api,
    real: impl FnOnce() -> CUresult,
    sems: *const CUexternalSemaphore,
    params: *const u8,
    count: u32,
    stream: CUstream,
) -> CUresult {
    let Some(g) = guard::enter() else {
        return real();
    };
    let r = real();
    let record = |semaphore, value, key, flags| ExtSemaphoreOp {
        api,
        result: CuResult(r),
        stream: stream as u64,
        semaphore,
        value,
        key,
        flags,
    };
    if r != CUDA_SUCCESS {
        tracer::event_fields(&g, &record(0, 0, 0, 0));
        return r;
    }
    if sems.is_null() || params.is_null() {
        // Accepted without arrays: no semaphore to read (a count of 0).
        return r;
    }
    for i in 0..count as usize {
        // SAFETY: the contract above: `sems` and `params` (neither NULL) hold `count`
        // entries each, and `i < count`; the driver accepted them all.
        let (semaphore, value, key, flags) = unsafe { entry(sems, params, i) };
        tracer::event_fields(&g, &record(semaphore, value, key, flags));
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_are_read_at_the_offsets_of_the_public_structs() {
        let mut params = [0u8; 2 * PARAMS_SIZE];
        let put32 = |b: &mut [u8], off: usize, v: u32| b[off..off + 4].copy_from_slice(&v.to_le_bytes());
        let put64 = |b: &mut [u8], off: usize, v: u64| b[off..off + 8].copy_from_slice(&v.to_le_bytes());
        put64(&mut params, 0, 41);
        put64(&mut params, 8, 0xdead_beef);
        put64(&mut params, KEY_OFFSET, 3);
        put32(&mut params, FLAGS_OFFSET, 1);
        let b = &mut params[PARAMS_SIZE..];
        put64(b, 0, u64::MAX);
        put64(b, KEY_OFFSET, 9);
        // The wait's timeout after the key is not read.
        put32(b, KEY_OFFSET + 8, 500);
        let sems = [0x5e00 as CUexternalSemaphore, 0x5e10 as CUexternalSemaphore];
        // SAFETY: two entries in each array, and `read` is called below with 0 and 1.
        let read = |i| unsafe { entry(sems.as_ptr(), params.as_ptr(), i) };
        assert_eq!(read(0), (0x5e00, 41, 3, 1));
        assert_eq!(read(1), (0x5e10, u64::MAX, 9, 0));
    }
}
