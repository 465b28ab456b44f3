//! Handlers of every allocation family: device, pitched, managed, host pinned, registered,
//! stream-ordered, virtual memory management, arrays, IPC and pool imports.
//!
//! Every handler is `unsafe` with one contract: `real` is the driver function the handler is
//! named for, and the other arguments are the program's arguments to it, passed through
//! unchanged (out-parameters are read only after the driver reported success).

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};

use gpuleak_format::record::PoolUsage;
use gpuleak_format::{Api, CuResult, Map, MemLocation, Ptr, Stream, Unmap};

use crate::config::CUDA_ERROR_OUT_OF_MEMORY;
use crate::cuda::*;
use crate::{guard, ops, tracer};

/// Reads an out-parameter the driver filled in, only when the call succeeded.
#[inline]
unsafe fn out<T: Copy + Default>(result: CUresult, p: *mut T) -> T {
    if result == CUDA_SUCCESS && !p.is_null() {
        // SAFETY: on success the driver wrote a valid value to the caller's out-parameter.
        unsafe { p.read() }
    } else {
        T::default()
    }
}

#[inline]
unsafe fn out_ptr(result: CUresult, p: *mut *mut c_void) -> u64 {
    if result == CUDA_SUCCESS && !p.is_null() {
        // SAFETY: as in `out`.
        unsafe { p.read() as u64 }
    } else {
        0
    }
}

/// Allocation recorded after the driver returned; `call` makes the real call and returns
/// (result, pointer or handle, aux, size recorded). `size` is what the program asked for
/// (0 where the call does not say). With an operations feature on (budget, fault injection,
/// live accounting: `ops::flags() != 0`) the call goes through `ops::alloc`, which may refuse
/// it without calling the driver.
#[inline]
fn record_alloc_sized(
    api: Api,
    stream: CUstream,
    size: u64,
    aux: u64,
    call: impl FnOnce() -> (CUresult, u64, u64, u64),
) -> CUresult {
    let Some(g) = guard::enter() else {
        return call().0;
    };
    let f = ops::flags();
    if f != 0 {
        return ops::alloc(&g, f, api, Stream(stream as u64), size, aux, call);
    }
    let (r, ptr, aux, size) = call();
    tracer::alloc(&g, api, r, Stream(stream as u64), ptr, size, aux);
    if r == CUDA_ERROR_OUT_OF_MEMORY {
        ops::out_of_memory_plain(&g, api, size);
    }
    r
}

/// [`record_alloc_sized`] for calls that record the size the program asked for; `call`
/// returns (result, pointer or handle, aux).
#[inline]
fn record_alloc_with(
    api: Api,
    stream: CUstream,
    size: u64,
    aux: u64,
    call: impl FnOnce() -> (CUresult, u64, u64),
) -> CUresult {
    record_alloc_sized(api, stream, size, aux, || {
        let (r, ptr, aux) = call();
        (r, ptr, aux, size)
    })
}

/// [`record_alloc_with`] for calls whose aux is known before the call.
#[inline]
fn record_alloc(api: Api, stream: CUstream, size: u64, aux: u64, call: impl FnOnce() -> (CUresult, u64)) -> CUresult {
    record_alloc_with(api, stream, size, aux, || {
        let (r, ptr) = call();
        (r, ptr, aux)
    })
}

/// Free recorded with a sequence number taken before the driver call, so that it orders
/// before any allocation that reuses the address.
#[inline]
fn record_free(api: Api, stream: CUstream, ptr: u64, size: u64, call: impl FnOnce() -> CUresult) -> CUresult {
    let Some(g) = guard::enter() else {
        return call();
    };
    let f = ops::flags();
    let pending = tracer::before(&g);
    let r = if f != 0 {
        ops::free(&g, f, api, Stream(stream as u64), ptr, call)
    } else {
        call()
    };
    tracer::free(&g, pending, api, r, Stream(stream as u64), ptr, size);
    r
}

/// `cuMemAlloc_v2`.
pub unsafe fn alloc(
    api: Api,
    real: unsafe extern "C" fn(*mut CUdeviceptr, usize) -> CUresult,
    dptr: *mut CUdeviceptr,
    size: usize,
) -> CUresult {
    record_alloc(api, std::ptr::null_mut(), size as u64, 0, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(dptr, size);
            (r, out(r, dptr))
        }
    })
}

/// `cuMemAllocPitch_v2`: the program asked for width x height bytes; `aux` keeps the pitch.
pub unsafe fn alloc_pitch(
    api: Api,
    real: unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, usize, usize, u32) -> CUresult,
    dptr: *mut CUdeviceptr,
    pitch: *mut usize,
    width: usize,
    height: usize,
    elem: u32,
) -> CUresult {
    let size = (width as u64).saturating_mul(height as u64);
    record_alloc_with(api, std::ptr::null_mut(), size, 0, || {
        // SAFETY: passed through; out-parameters read only on success.
        unsafe {
            let r = real(dptr, pitch, width, height, elem);
            (r, out(r, dptr), out(r, pitch) as u64)
        }
    })
}

/// `cuMemAllocManaged` (`aux` = flags).
pub unsafe fn alloc_flags(
    api: Api,
    real: unsafe extern "C" fn(*mut CUdeviceptr, usize, u32) -> CUresult,
    dptr: *mut CUdeviceptr,
    size: usize,
    flags: u32,
) -> CUresult {
    record_alloc(api, std::ptr::null_mut(), size as u64, u64::from(flags), || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(dptr, size, flags);
            (r, out(r, dptr))
        }
    })
}

/// `cuMemFree_v2`.
pub unsafe fn free(api: Api, real: unsafe extern "C" fn(CUdeviceptr) -> CUresult, dptr: CUdeviceptr) -> CUresult {
    // SAFETY: passed through.
    record_free(api, std::ptr::null_mut(), dptr, 0, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe { real(dptr) }
    })
}

/// `cuMemAllocHost_v2`.
pub unsafe fn alloc_host(
    api: Api,
    real: unsafe extern "C" fn(*mut *mut c_void, usize) -> CUresult,
    pp: *mut *mut c_void,
    size: usize,
) -> CUresult {
    record_alloc(api, std::ptr::null_mut(), size as u64, 0, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(pp, size);
            (r, out_ptr(r, pp))
        }
    })
}

/// `cuMemHostAlloc` (`aux` = flags).
pub unsafe fn host_alloc(
    api: Api,
    real: unsafe extern "C" fn(*mut *mut c_void, usize, u32) -> CUresult,
    pp: *mut *mut c_void,
    size: usize,
    flags: u32,
) -> CUresult {
    record_alloc(api, std::ptr::null_mut(), size as u64, u64::from(flags), || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(pp, size, flags);
            (r, out_ptr(r, pp))
        }
    })
}

/// `cuMemFreeHost`, `cuMemHostUnregister`.
pub unsafe fn free_host(api: Api, real: unsafe extern "C" fn(*mut c_void) -> CUresult, p: *mut c_void) -> CUresult {
    record_free(api, std::ptr::null_mut(), p as u64, 0, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe { real(p) }
    })
}

/// `cuMemHostRegister_v2`: the program's own memory, page-locked in place.
pub unsafe fn host_register(
    api: Api,
    real: unsafe extern "C" fn(*mut c_void, usize, u32) -> CUresult,
    p: *mut c_void,
    size: usize,
    flags: u32,
) -> CUresult {
    record_alloc(api, std::ptr::null_mut(), size as u64, u64::from(flags), || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(p, size, flags);
            (r, if r == CUDA_SUCCESS { p as u64 } else { 0 })
        }
    })
}

/// `cuMemAllocAsync[_ptsz]`.
pub unsafe fn alloc_async(
    api: Api,
    real: unsafe extern "C" fn(*mut CUdeviceptr, usize, CUstream) -> CUresult,
    dptr: *mut CUdeviceptr,
    size: usize,
    stream: CUstream,
) -> CUresult {
    let r = record_alloc(api, stream, size as u64, 0, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(dptr, size, stream);
            (r, out(r, dptr))
        }
    });
    super::graph_nodes::after_memory(api, r, stream);
    sample_pool(r, 0);
    r
}

/// `cuMemAllocFromPoolAsync[_ptsz]` (`aux` = pool).
pub unsafe fn alloc_pool(
    api: Api,
    real: unsafe extern "C" fn(*mut CUdeviceptr, usize, CUmemoryPool, CUstream) -> CUresult,
    dptr: *mut CUdeviceptr,
    size: usize,
    pool: CUmemoryPool,
    stream: CUstream,
) -> CUresult {
    let r = record_alloc(api, stream, size as u64, pool as u64, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(dptr, size, pool, stream);
            (r, out(r, dptr))
        }
    });
    super::graph_nodes::after_memory(api, r, stream);
    sample_pool(r, pool as u64);
    r
}

/// `cuMemFreeAsync[_ptsz]`.
pub unsafe fn free_async(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, CUstream) -> CUresult,
    dptr: CUdeviceptr,
    stream: CUstream,
) -> CUresult {
    // A sample after this free should read the pool the memory came from, which only the
    // pointer still names before the free.
    let pool = if pool_sample_next() { pool_of_pointer(dptr) } else { 0 };
    // Only a pool the shim saw created and not destroyed: a pool destroyed while allocations
    // were outstanding goes away with the last one's free, so its handle must not be asked
    // about after this call. Any other pool (the default one) is found again by the device.
    let pool = if is_tracked_pool(pool) { pool } else { 0 };
    let r = record_free(api, stream, dptr, 0, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe { real(dptr, stream) }
    });
    super::graph_nodes::after_memory(api, r, stream);
    sample_pool(r, pool);
    r
}

// ---- Stream-ordered pools: reserved versus used ---------------------------------------------

/// One successful stream-ordered call in this many, on each thread, samples its pool
/// (`GPULEAK_POOL_SAMPLE`, parsed with the other settings when tracing starts; 0 never).
static POOL_EVERY: AtomicU32 = AtomicU32::new(crate::config::POOL_SAMPLE_DEFAULT);

/// Sets the sampling period from the settings (when tracing starts).
pub fn set_pool_every(every: u32) {
    POOL_EVERY.store(every, Ordering::Relaxed);
}

fn pool_every() -> u32 {
    POOL_EVERY.load(Ordering::Relaxed)
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
fn pool_sample_next() -> bool {
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

static POINTER_GET_ATTRIBUTE: AtomicUsize = AtomicUsize::new(0);
/// `CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE`.
const POINTER_MEMPOOL_HANDLE: u32 = 17;

/// The pool `ptr` was allocated from, asked of the driver's pure getter
/// `cuPointerGetAttribute(CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE)` (CUDA 11.3); 0 when it was no
/// pool's, or the driver cannot say.
#[cold]
fn pool_of_pointer(ptr: CUdeviceptr) -> u64 {
    if tracer::get().is_none() {
        return 0;
    }
    type GetAttribute = unsafe extern "C" fn(*mut c_void, u32, CUdeviceptr) -> CUresult;
    let Some(f) = crate::dl::driver_fn(&POINTER_GET_ATTRIBUTE, c"cuPointerGetAttribute") else {
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

static CTX_GET_DEVICE: AtomicUsize = AtomicUsize::new(0);
static DEVICE_GET_MEM_POOL: AtomicUsize = AtomicUsize::new(0);
static MEM_POOL_GET_ATTRIBUTE: AtomicUsize = AtomicUsize::new(0);
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
fn sample_pool(result: CUresult, pool: u64) {
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
pub unsafe fn pool_trim(
    _api: Api,
    real: unsafe extern "C" fn(CUmemoryPool, usize) -> CUresult,
    pool: CUmemoryPool,
    keep: usize,
) -> CUresult {
    // SAFETY: passed through.
    let r = unsafe { real(pool, keep) };
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
    if let Some(f) = crate::dl::driver_fn(&CTX_GET_DEVICE, c"cuCtxGetDevice") {
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
        if let Some(f) = crate::dl::driver_fn(&DEVICE_GET_MEM_POOL, c"cuDeviceGetMemPool") {
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
    let Some(f) = crate::dl::driver_fn(&MEM_POOL_GET_ATTRIBUTE, c"cuMemPoolGetAttribute") else {
        return;
    };
    // SAFETY: the driver's cuMemPoolGetAttribute, found by name, with its C signature.
    let get: GetAttribute = unsafe { std::mem::transmute::<usize, GetAttribute>(f) };
    let (mut reserved, mut used) = (0u64, 0u64);
    // SAFETY: both attributes are cuuint64_t values; the out-pointers are valid u64s, and the
    // pool is valid now: the program's call just used it, or the driver just named it.
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

/// `cuMemAddressReserve` (`aux` = alignment): address space only, no memory.
pub unsafe fn address_reserve(
    api: Api,
    real: unsafe extern "C" fn(*mut CUdeviceptr, usize, usize, CUdeviceptr, u64) -> CUresult,
    ptr: *mut CUdeviceptr,
    size: usize,
    align: usize,
    addr: CUdeviceptr,
    flags: u64,
) -> CUresult {
    record_alloc(api, std::ptr::null_mut(), size as u64, align as u64, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(ptr, size, align, addr, flags);
            (r, out(r, ptr))
        }
    })
}

/// `cuMemAddressFree`.
pub unsafe fn address_free(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, usize) -> CUresult,
    ptr: CUdeviceptr,
    size: usize,
) -> CUresult {
    record_free(api, std::ptr::null_mut(), ptr, size as u64, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe { real(ptr, size) }
    })
}

/// `cuMemCreate`: physical memory, identified by its handle; `aux` is where the properties put
/// it ([`MemLocation`]: a device, not always the current one, or host memory).
pub unsafe fn create(
    api: Api,
    real: unsafe extern "C" fn(*mut CUmemGenericAllocationHandle, usize, *const c_void, u64) -> CUresult,
    handle: *mut CUmemGenericAllocationHandle,
    size: usize,
    prop: *const c_void,
    flags: u64,
) -> CUresult {
    // SAFETY: the properties are the program's, valid for the call (the driver reads them too);
    // only their first 16 bytes, which every version of the structure has, are read.
    let location = unsafe { prop.cast::<CUmemAllocationPropHead>().as_ref() }
        .map_or(0, |p| MemLocation::encode(p.location_type, p.location_id));
    record_alloc(api, std::ptr::null_mut(), size as u64, location, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(handle, size, prop, flags);
            (r, out(r, handle))
        }
    })
}

/// `cuMemRetainAllocationHandle`: one more reference to the handle mapped at `addr` (the same
/// handle value), which needs a `cuMemRelease` of its own; recorded as an `Alloc` record of
/// that API (`ptr`: the handle, `aux`: the address), with no size.
pub unsafe fn retain(
    api: Api,
    real: unsafe extern "C" fn(*mut CUmemGenericAllocationHandle, *mut c_void) -> CUresult,
    handle: *mut CUmemGenericAllocationHandle,
    addr: *mut c_void,
) -> CUresult {
    let Some(g) = guard::enter() else {
        // SAFETY: passed through.
        return unsafe { real(handle, addr) };
    };
    // SAFETY: passed through; the out-parameter is read only after the driver reported success.
    let (r, h) = unsafe {
        let r = real(handle, addr);
        (r, out(r, handle))
    };
    tracer::alloc(&g, api, r, Stream(0), h, 0, addr as u64);
    if r == CUDA_SUCCESS {
        ops::retained(&g, api, h);
    }
    r
}

/// `cuMemImportFromShareableHandle`: a handle to memory another process (or this one)
/// created; `aux` is the handle type. No size: the memory is its exporter's.
pub unsafe fn import(
    api: Api,
    real: unsafe extern "C" fn(*mut CUmemGenericAllocationHandle, *mut c_void, u32) -> CUresult,
    handle: *mut CUmemGenericAllocationHandle,
    os_handle: *mut c_void,
    kind: u32,
) -> CUresult {
    record_alloc(api, std::ptr::null_mut(), 0, u64::from(kind), || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(handle, os_handle, kind);
            (r, out(r, handle))
        }
    })
}

/// `cuMulticastCreate`: `size` is the most memory each device may bind to the object.
pub unsafe fn multicast_create(
    api: Api,
    real: unsafe extern "C" fn(*mut CUmemGenericAllocationHandle, *const CUmulticastObjectProp) -> CUresult,
    handle: *mut CUmemGenericAllocationHandle,
    prop: *const CUmulticastObjectProp,
) -> CUresult {
    // SAFETY: the properties are the program's, valid for the call (the driver reads them too).
    let (size, devices) = unsafe { prop.as_ref() }.map_or((0, 0), |p| (p.size as u64, u64::from(p.num_devices)));
    record_alloc(api, std::ptr::null_mut(), size, devices, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(handle, prop);
            (r, out(r, handle))
        }
    })
}

/// `cuMemRelease`: the memory lives on while a mapping of it remains.
pub unsafe fn release(
    api: Api,
    real: unsafe extern "C" fn(CUmemGenericAllocationHandle) -> CUresult,
    handle: CUmemGenericAllocationHandle,
) -> CUresult {
    record_free(api, std::ptr::null_mut(), handle, 0, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe { real(handle) }
    })
}

/// `cuMemMap`.
pub unsafe fn map(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, usize, usize, CUmemGenericAllocationHandle, u64) -> CUresult,
    ptr: CUdeviceptr,
    size: usize,
    offset: usize,
    handle: CUmemGenericAllocationHandle,
    flags: u64,
) -> CUresult {
    let Some(g) = guard::enter() else {
        // SAFETY: passed through.
        return unsafe { real(ptr, size, offset, handle, flags) };
    };
    // SAFETY: passed through.
    let r = unsafe { real(ptr, size, offset, handle, flags) };
    let body = Map {
        api,
        result: CuResult(r),
        ptr: Ptr(ptr),
        size: size as u64,
        offset: offset as u64,
        handle,
    };
    tracer::event(&g, body);
    r
}

/// `cuMemUnmap`.
pub unsafe fn unmap(
    api: Api,
    real: unsafe extern "C" fn(CUdeviceptr, usize) -> CUresult,
    ptr: CUdeviceptr,
    size: usize,
) -> CUresult {
    let Some(g) = guard::enter() else {
        // SAFETY: passed through.
        return unsafe { real(ptr, size) };
    };
    let pending = tracer::before(&g);
    // SAFETY: passed through.
    let r = unsafe { real(ptr, size) };
    tracer::event_at(
        &g,
        pending,
        Unmap {
            api,
            result: CuResult(r),
            ptr: Ptr(ptr),
            size: size as u64,
        },
    );
    r
}

/// `cuArrayCreate_v2`: `size` is the bytes the array's dimensions need.
pub unsafe fn array_create(
    api: Api,
    real: unsafe extern "C" fn(*mut CUarray, *const CUDA_ARRAY_DESCRIPTOR) -> CUresult,
    array: *mut CUarray,
    desc: *const CUDA_ARRAY_DESCRIPTOR,
) -> CUresult {
    // SAFETY: the descriptor is the program's, valid for the call (the driver reads it too).
    let size = unsafe { desc.as_ref() }.map_or(0, |d| array_bytes(d.width, d.height, 1, d.format, d.num_channels));
    record_alloc(api, std::ptr::null_mut(), size, 0, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(array, desc);
            (r, out(r, array) as u64)
        }
    })
}

/// `cuArray3DCreate_v2`.
pub unsafe fn array3d_create(
    api: Api,
    real: unsafe extern "C" fn(*mut CUarray, *const CUDA_ARRAY3D_DESCRIPTOR) -> CUresult,
    array: *mut CUarray,
    desc: *const CUDA_ARRAY3D_DESCRIPTOR,
) -> CUresult {
    // SAFETY: as above.
    let size =
        unsafe { desc.as_ref() }.map_or(0, |d| array_bytes(d.width, d.height, d.depth, d.format, d.num_channels));
    record_alloc(api, std::ptr::null_mut(), size, 0, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(array, desc);
            (r, out(r, array) as u64)
        }
    })
}

/// `cuMipmappedArrayCreate`: one allocation of every level's bytes, at the handle.
pub unsafe fn mipmapped_create(
    api: Api,
    real: unsafe extern "C" fn(*mut CUmipmappedArray, *const CUDA_ARRAY3D_DESCRIPTOR, u32) -> CUresult,
    array: *mut CUmipmappedArray,
    desc: *const CUDA_ARRAY3D_DESCRIPTOR,
    levels: u32,
) -> CUresult {
    // SAFETY: the descriptor is the program's, valid for the call (the driver reads it too).
    let size = unsafe { desc.as_ref() }.map_or(0, |d| mipmapped_bytes(d, levels));
    record_alloc(api, std::ptr::null_mut(), size, 0, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(array, desc, levels);
            (r, out(r, array) as u64)
        }
    })
}

/// `cuArrayDestroy`, `cuMipmappedArrayDestroy`.
pub unsafe fn array_destroy(api: Api, real: unsafe extern "C" fn(CUarray) -> CUresult, array: CUarray) -> CUresult {
    record_free(api, std::ptr::null_mut(), array as u64, 0, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe { real(array) }
    })
}

/// The size of the allocation mapped at `ptr`, as `cuMemGetAddressRange_v2` tells (0 if it
/// cannot): the calls that map another process's memory here do not say how much.
fn mapped_size(ptr: u64) -> u64 {
    // Not tracing (GPULEAK_DISABLE=1, or the tracer could not start): ask the driver nothing.
    if tracer::get().is_none() {
        return 0;
    }
    static GET_ADDRESS_RANGE: AtomicUsize = AtomicUsize::new(0);
    type GetAddressRange = unsafe extern "C" fn(*mut CUdeviceptr, *mut usize, CUdeviceptr) -> CUresult;
    let Some(f) = crate::dl::driver_fn(&GET_ADDRESS_RANGE, c"cuMemGetAddressRange_v2") else {
        return 0;
    };
    // SAFETY: the driver's cuMemGetAddressRange_v2, found by name, with its C signature.
    let f: GetAddressRange = unsafe { std::mem::transmute::<usize, GetAddressRange>(f) };
    let (mut base, mut size): (CUdeviceptr, usize) = (0, 0);
    // SAFETY: both out-pointers are valid; `ptr` is the address the driver just returned, in
    // the context that is still current.
    if unsafe { f(&mut base, &mut size, ptr) } == CUDA_SUCCESS && base == ptr {
        size as u64
    } else {
        0
    }
}

/// Another process's memory mapped here by `call` (which returns the result and the address):
/// recorded with `aux` and the size the driver tells afterwards (the calls do not say it).
fn record_import(api: Api, aux: u64, call: impl FnOnce() -> (CUresult, u64)) -> CUresult {
    record_alloc_sized(api, std::ptr::null_mut(), 0, aux, || {
        let (r, ptr) = call();
        let size = if r == CUDA_SUCCESS { mapped_size(ptr) } else { 0 };
        (r, ptr, aux, size)
    })
}

/// `cuIpcOpenMemHandle[_v2]`: another process's memory mapped here (`aux` = flags).
pub unsafe fn ipc_open(
    api: Api,
    real: unsafe extern "C" fn(*mut CUdeviceptr, CUipcMemHandle, u32) -> CUresult,
    dptr: *mut CUdeviceptr,
    handle: CUipcMemHandle,
    flags: u32,
) -> CUresult {
    record_import(api, u64::from(flags), || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(dptr, handle, flags);
            (r, out(r, dptr))
        }
    })
}

/// `cuMemPoolImportPointer` (`aux` = the imported pool): another process's stream-ordered
/// allocation mapped here, freed by `cuMemFree` or `cuMemFreeAsync`.
pub unsafe fn pool_import(
    api: Api,
    real: unsafe extern "C" fn(*mut CUdeviceptr, CUmemoryPool, *mut c_void) -> CUresult,
    dptr: *mut CUdeviceptr,
    pool: CUmemoryPool,
    data: *mut c_void,
) -> CUresult {
    record_import(api, pool as u64, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(dptr, pool, data);
            (r, out(r, dptr))
        }
    })
}

/// `cuImportExternalMemory`: an external memory object (its handle, the size the descriptor
/// gives), not this process's memory.
pub unsafe fn external_import(
    api: Api,
    real: unsafe extern "C" fn(*mut CUexternalMemory, *const CUDA_EXTERNAL_MEMORY_HANDLE_DESC) -> CUresult,
    ext: *mut CUexternalMemory,
    desc: *const CUDA_EXTERNAL_MEMORY_HANDLE_DESC,
) -> CUresult {
    // SAFETY: the descriptor is the program's, valid for the call (the driver reads it too).
    let size = unsafe { desc.as_ref() }.map_or(0, |d| d.size);
    record_alloc(api, std::ptr::null_mut(), size, 0, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(ext, desc);
            (r, out(r, ext) as u64)
        }
    })
}

/// `cuExternalMemoryGetMappedBuffer` (`aux` = the object): a buffer of the object mapped at a
/// device address, which the program frees with `cuMemFree`.
pub unsafe fn external_buffer(
    api: Api,
    real: unsafe extern "C" fn(*mut CUdeviceptr, CUexternalMemory, *const CUDA_EXTERNAL_MEMORY_BUFFER_DESC) -> CUresult,
    dptr: *mut CUdeviceptr,
    ext: CUexternalMemory,
    desc: *const CUDA_EXTERNAL_MEMORY_BUFFER_DESC,
) -> CUresult {
    // SAFETY: as in `external_import`.
    let size = unsafe { desc.as_ref() }.map_or(0, |d| d.size);
    record_alloc(api, std::ptr::null_mut(), size, ext as u64, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(dptr, ext, desc);
            (r, out(r, dptr))
        }
    })
}

/// `cuExternalMemoryGetMappedMipmappedArray` (`aux` = the object): a mipmapped array of the
/// object, which the program frees with `cuMipmappedArrayDestroy`.
pub unsafe fn external_array(
    api: Api,
    real: unsafe extern "C" fn(
        *mut CUmipmappedArray,
        CUexternalMemory,
        *const CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC,
    ) -> CUresult,
    array: *mut CUmipmappedArray,
    ext: CUexternalMemory,
    desc: *const CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC,
) -> CUresult {
    // SAFETY: as in `external_import`.
    let size = unsafe { desc.as_ref() }.map_or(0, |d| mipmapped_bytes(&d.array_desc, d.num_levels));
    record_alloc(api, std::ptr::null_mut(), size, ext as u64, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe {
            let r = real(array, ext, desc);
            (r, out(r, array) as u64)
        }
    })
}

/// `cuDestroyExternalMemory`.
pub unsafe fn external_destroy(
    api: Api,
    real: unsafe extern "C" fn(CUexternalMemory) -> CUresult,
    ext: CUexternalMemory,
) -> CUresult {
    record_free(api, std::ptr::null_mut(), ext as u64, 0, || {
        // SAFETY: the program's own arguments, passed through.
        unsafe { real(ext) }
    })
}

/// `cuIpcCloseMemHandle`.
pub unsafe fn ipc_close(api: Api, real: unsafe extern "C" fn(CUdeviceptr) -> CUresult, dptr: CUdeviceptr) -> CUresult {
    record_free(api, std::ptr::null_mut(), dptr, 0, || {
        // SAFETY: the program's own arguments, passed through; out-parameters are read only
        // after the driver reported success.
        unsafe { real(dptr) }
    })
}
