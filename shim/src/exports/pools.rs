//! Stream-ordered pools, reserved versus used: the pools the program created (tracked until
//! destroyed) and the sampling of a pool's usage after stream-ordered calls (`PoolUsage`
//! records), and `cuMemPoolTrimTo`.
//!
//! Handlers get the call the program made (`real`) and its arguments, as `memory`'s do; those
//! that read an input pointer are `unsafe`: the arguments must be the program's.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU64, Ordering};

use gpuleak_format::record::PoolUsage;
use gpuleak_format::Api;

use crate::cuda::*;
use crate::{guard, tracer};

fn pool_every() -> u32 {
    crate::tracer::pool_every()
}

/// What one thread remembers between samples (const-initialised, no destructor).
#[derive(Clone, Copy)]
struct PoolSampler {
    /// Calls left before the next sample.
    left: u32,
    /// The pool last sampled, and what it said.
    pool: u64,
    reserved: u64,
    used: u64,
}

thread_local! {
    static POOL_SAMPLER: Cell<PoolSampler> = const {
        Cell::new(PoolSampler { left: 0, pool: 0, reserved: u64::MAX, used: u64::MAX })
    };
}

/// Whether this thread's next successful stream-ordered call samples its pool.
#[inline]
pub(super) fn pool_sample_next() -> bool {
    pool_every() != 0 && POOL_SAMPLER.try_with(|c| c.get().left == 0).unwrap_or(false)
}

/// Pools created (or imported) and not yet destroyed, as far as this fixed table holds them
/// (0: a free slot). Only used to decide whether a freed pointer's pool may be sampled.
static CREATED_POOLS: [AtomicU64; 64] = [const { AtomicU64::new(0) }; 64];

/// A pool came into being (`cuMemPoolCreate`, `cuMemPoolImportFromShareableHandle`).
pub fn track_pool(pool: u64) {
    if pool == 0 {
        return;
    }
    for slot in &CREATED_POOLS {
        if slot
            .compare_exchange(0, pool, Ordering::AcqRel, Ordering::Relaxed)
            .is_ok()
        {
            return;
        }
    }
}

/// A pool is about to be destroyed: no sample may name it from now on.
pub fn untrack_pool(pool: u64) {
    if pool == 0 {
        return;
    }
    for slot in &CREATED_POOLS {
        let _ = slot.compare_exchange(pool, 0, Ordering::AcqRel, Ordering::Relaxed);
    }
}

/// Whether `pool` was created (or imported) and not destroyed since, as far as the table knows.
pub fn is_tracked_pool(pool: u64) -> bool {
    pool != 0 && CREATED_POOLS.iter().any(|s| s.load(Ordering::Acquire) == pool)
}

/// `CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE`.
const POINTER_MEMPOOL_HANDLE: u32 = 17;

/// The pool `ptr` was allocated from, asked of the driver's pure getter
/// `cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE)` (CUDA 11.3); 0 when it was no
/// pool's, or the driver cannot say.
#[cold]
pub(super) fn pool_of_pointer(ptr: CUdeviceptr) -> u64 {
    if tracer::get().is_none() {
        return 0;
    }
    type GetAttribute = unsafe extern "C" fn(*mut c_void, u32, CUdeviceptr) -> CUresult;
    let Some(f) = crate::dlsym::driver_fn(crate::dlsym::Getter::cuPointerGetAttribute) else {
        return 0;
    };
    // SAFETY: the driver's cuPointerGetAttribute, found by name, with its C signature.
    let get: GetAttribute = unsafe { std::mem::transmute::<usize, GetAttribute>(f) };
    let mut pool: CUmemoryPool = std::ptr::null_mut();
    // SAFETY: the attribute is one pool handle; `pool` is a valid out-pointer for it.
    let r = unsafe { get((&mut pool as *mut CUmemoryPool).cast(), POINTER_MEMPOOL_HANDLE, ptr) };
    if r == CUDA_SUCCESS {
        pool as u64
    } else {
        0
    }
}

/// `CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT` and `CU_MEMPOOL_ATTR_USED_MEM_CURRENT`.
const RESERVED_MEM_CURRENT: u32 = 5;
const USED_MEM_CURRENT: u32 = 7;

/// After a stream-ordered allocation or free that returned `result`: on one successful call in
/// [`pool_every`] on this thread, asks the driver's pure getters for the pool's reserved and
/// used memory (`pool`, the one the call just used or the freed memory came from, or when 0
/// the current pool of the calling thread's device) and writes a [`PoolUsage`] record if
/// either changed since this thread's last sample. Any getter's failure ends the sample
/// silently; the program's result is untouched.
#[inline]
pub(super) fn sample_pool(result: CUresult, pool: u64) {
    if result != CUDA_SUCCESS {
        return;
    }
    let every = pool_every();
    if every == 0 {
        return;
    }
    let due = POOL_SAMPLER
        .try_with(|c| {
            let mut s = c.get();
            let due = s.left == 0;
            s.left = if due { every - 1 } else { s.left - 1 };
            c.set(s);
            due
        })
        .unwrap_or(false);
    if due {
        sample_pool_now(pool);
    }
}

/// `cuMemPoolTrimTo`: the pool gives back what it reserved beyond `keep` now, so a successful
/// trim samples the pool at once, whatever this thread's count to its next sample (trims are
/// rare; the report's reserved bytes then fall where the program trimmed, not at some later
/// stream-ordered call, which a program that trims before it ends may never make).
pub fn pool_trim(_api: Api, real: impl FnOnce() -> CUresult, pool: CUmemoryPool, _keep: usize) -> CUresult {
    let r = real();
    if r == CUDA_SUCCESS && pool_every() != 0 {
        sample_pool_now(pool as u64);
    }
    r
}

#[cold]
fn sample_pool_now(pool: u64) {
    // Not tracing (GPULEAK_DISABLE=1, or the tracer could not start): ask the driver nothing.
    if tracer::get().is_none() {
        return;
    }
    let Some(g) = guard::enter() else { return };
    type GetDevice = unsafe extern "C" fn(*mut i32) -> CUresult;
    type GetMemPool = unsafe extern "C" fn(*mut CUmemoryPool, i32) -> CUresult;
    type GetAttribute = unsafe extern "C" fn(CUmemoryPool, u32, *mut c_void) -> CUresult;
    let mut device = -1i32;
    if let Some(f) = crate::dlsym::driver_fn(crate::dlsym::Getter::cuCtxGetDevice) {
        // SAFETY: the driver's cuCtxGetDevice, found by name, with its C signature.
        let f: GetDevice = unsafe { std::mem::transmute::<usize, GetDevice>(f) };
        let mut d = -1;
        // SAFETY: `d` is a valid out-pointer for one int.
        if unsafe { f(&mut d) } == CUDA_SUCCESS {
            device = d;
        }
    }
    let last = POOL_SAMPLER.try_with(Cell::get).ok();
    let mut pool = pool;
    if pool == 0 && device >= 0 {
        if let Some(f) = crate::dlsym::driver_fn(crate::dlsym::Getter::cuDeviceGetMemPool) {
            // SAFETY: the driver's cuDeviceGetMemPool, found by name, with its C signature.
            let f: GetMemPool = unsafe { std::mem::transmute::<usize, GetMemPool>(f) };
            let mut p: CUmemoryPool = std::ptr::null_mut();
            // SAFETY: `p` is a valid out-pointer for one pool handle.
            if unsafe { f(&mut p, device) } == CUDA_SUCCESS {
                pool = p as u64;
            }
        }
    }
    // Never a pool remembered from an earlier call: the program may have destroyed it since.
    if pool == 0 {
        return;
    }
    let Some(f) = crate::dlsym::driver_fn(crate::dlsym::Getter::cuMemPoolGetAttribute) else {
        return;
    };
    // SAFETY: the driver's cuMemPoolGetAttribute, found by name, with its C signature.
    let get: GetAttribute = unsafe { std::mem::transmute::<usize, GetAttribute>(f) };
    let (mut reserved, mut used) = (0u64, 0u64);
    // SAFETY: both attributes are cuuint64_t values and the out-pointers valid u64s. The pool
    // is one the driver can answer for now: the pool argument of the program's successful
    // call, the pool of freed memory that the program created and has not destroyed
    // (`memory::free_async` keeps no other), or the device's current pool the driver just named.
    let ok = unsafe {
        get(
            pool as CUmemoryPool,
            RESERVED_MEM_CURRENT,
            (&mut reserved as *mut u64).cast(),
        ) == CUDA_SUCCESS
            && get(pool as CUmemoryPool, USED_MEM_CURRENT, (&mut used as *mut u64).cast()) == CUDA_SUCCESS
    };
    if !ok {
        return;
    }
    let changed = last.is_none_or(|s| s.pool != pool || s.reserved != reserved || s.used != used);
    let _ = POOL_SAMPLER.try_with(|c| {
        let mut s = c.get();
        s.pool = pool;
        s.reserved = reserved;
        s.used = used;
        c.set(s);
    });
    if changed {
        tracer::event(
            &g,
            PoolUsage {
                pool,
                device,
                reserved,
                used,
            },
        );
    }
}
