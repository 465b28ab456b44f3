//! Handlers for contexts, streams, events and memory pools: their lifetimes bound every
//! allocation made in them (a destroyed context frees its memory), feed the stream-ordering
//! checks, and a stream, event or pool never destroyed is a finding.

use std::ffi::c_void;

use gpuleak_format::{
    Api, Ctx, CtxCreate, CtxDestroy, CuResult, Event, EventCreate, EventDestroy, PoolCreate, PoolDestroy, Stream,
    StreamCreate, StreamDestroy,
};

use crate::cuda::*;
use crate::guard::{self, HookGuard};
use crate::ops::live::ObjectChange;
use crate::{ops, tracer};

#[inline]
unsafe fn out<T>(result: CUresult, p: *mut T) -> u64
where
    T: Copy + Into<HandleBits>,
{
    if result == CUDA_SUCCESS && !p.is_null() {
        // SAFETY: on success the driver wrote the caller's out-parameter.
        unsafe { p.read() }.into().0
    } else {
        0
    }
}

/// The bits of an opaque handle.
pub struct HandleBits(u64);

impl From<*mut c_void> for HandleBits {
    fn from(p: *mut c_void) -> Self {
        HandleBits(p as u64)
    }
}

fn created(g: &Option<HookGuard>, api: Api, r: CUresult, ctx: u64, device: i32, flags: u64) {
    if let Some(g) = g {
        tracer::event(
            g,
            CtxCreate {
                api,
                result: CuResult(r),
                ctx: Ctx(ctx),
                device,
                flags,
            },
        );
    }
}

/// `cuCtxCreate_v2`.
pub unsafe fn ctx_create_v2(
    api: Api,
    real: unsafe extern "C" fn(*mut CUcontext, u32, CUdevice) -> CUresult,
    ctx: *mut CUcontext,
    flags: u32,
    dev: CUdevice,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: passed through; the out-parameter is read only on success.
    let (r, c) = unsafe {
        let r = real(ctx, flags, dev);
        (r, out(r, ctx))
    };
    created(&g, api, r, c, dev, u64::from(flags));
    r
}

/// `cuCtxCreate_v3`.
pub unsafe fn ctx_create_v3(
    api: Api,
    real: unsafe extern "C" fn(*mut CUcontext, *mut c_void, i32, u32, CUdevice) -> CUresult,
    ctx: *mut CUcontext,
    params: *mut c_void,
    nparams: i32,
    flags: u32,
    dev: CUdevice,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: as above.
    let (r, c) = unsafe {
        let r = real(ctx, params, nparams, flags, dev);
        (r, out(r, ctx))
    };
    created(&g, api, r, c, dev, u64::from(flags));
    r
}

/// `cuCtxCreate_v4`.
pub unsafe fn ctx_create_v4(
    api: Api,
    real: unsafe extern "C" fn(*mut CUcontext, *mut c_void, u32, CUdevice) -> CUresult,
    ctx: *mut CUcontext,
    params: *mut c_void,
    flags: u32,
    dev: CUdevice,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: as above.
    let (r, c) = unsafe {
        let r = real(ctx, params, flags, dev);
        (r, out(r, ctx))
    };
    created(&g, api, r, c, dev, u64::from(flags));
    r
}

/// `cuDevicePrimaryCtxRetain`.
pub unsafe fn primary_retain(
    api: Api,
    real: unsafe extern "C" fn(*mut CUcontext, CUdevice) -> CUresult,
    ctx: *mut CUcontext,
    dev: CUdevice,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: as above.
    let (r, c) = unsafe {
        let r = real(ctx, dev);
        (r, out(r, ctx))
    };
    created(&g, api, r, c, dev, 0);
    r
}

/// Teardown: numbered before the call, since the driver frees the context's memory in it.
fn destroy(api: Api, ctx: u64, device: i32, call: impl FnOnce() -> CUresult) -> CUresult {
    let Some(g) = guard::enter() else {
        return call();
    };
    let pending = tracer::before(&g);
    let r = call();
    let f = ops::flags();
    if f != 0 && r == CUDA_SUCCESS {
        let change = match api {
            Api::cuCtxDestroy_v2 => Some(ObjectChange::ContextDestroyed(ctx)),
            Api::cuDevicePrimaryCtxReset | Api::cuDevicePrimaryCtxReset_v2 => Some(ObjectChange::DeviceReset(device)),
            // A release frees the memory only with the last reference, which the shim
            // cannot see.
            _ => None,
        };
        if let Some(change) = change {
            ops::object(&g, f, change);
        }
    }
    tracer::event_at(
        &g,
        pending,
        CtxDestroy {
            api,
            result: CuResult(r),
            ctx: Ctx(ctx),
            device,
        },
    );
    r
}

/// `cuCtxDestroy_v2`.
pub unsafe fn ctx_destroy(api: Api, real: unsafe extern "C" fn(CUcontext) -> CUresult, ctx: CUcontext) -> CUresult {
    destroy(api, ctx as u64, -1, || {
        // SAFETY: passed through.
        unsafe { real(ctx) }
    })
}

/// `cuDevicePrimaryCtxRelease[_v2]`, `cuDevicePrimaryCtxReset[_v2]`.
pub unsafe fn primary_release(api: Api, real: unsafe extern "C" fn(CUdevice) -> CUresult, dev: CUdevice) -> CUresult {
    destroy(api, 0, dev, || {
        // SAFETY: passed through.
        unsafe { real(dev) }
    })
}

/// Tells the operations features about a successful stream or event change.
#[inline]
fn counted(g: &HookGuard, r: CUresult, change: ObjectChange) {
    let f = ops::flags();
    if f != 0 && r == CUDA_SUCCESS {
        ops::object(g, f, change);
    }
}

fn stream_created(g: &Option<HookGuard>, api: Api, r: CUresult, stream: u64, flags: u32, priority: i32) {
    if let Some(g) = g {
        counted(g, r, ObjectChange::StreamCreated);
        let stack = tracer::object_stack(g);
        tracer::event(
            g,
            StreamCreate {
                api,
                result: CuResult(r),
                stream: Stream(stream),
                flags,
                priority,
                stack,
            },
        );
    }
}

/// `cuStreamCreate`.
pub unsafe fn stream_create(
    api: Api,
    real: unsafe extern "C" fn(*mut CUstream, u32) -> CUresult,
    stream: *mut CUstream,
    flags: u32,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: passed through; out-parameter read only on success.
    let (r, s) = unsafe {
        let r = real(stream, flags);
        (r, out(r, stream))
    };
    stream_created(&g, api, r, s, flags, 0);
    r
}

/// `cuStreamCreateWithPriority`.
pub unsafe fn stream_create_prio(
    api: Api,
    real: unsafe extern "C" fn(*mut CUstream, u32, i32) -> CUresult,
    stream: *mut CUstream,
    flags: u32,
    priority: i32,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: as above.
    let (r, s) = unsafe {
        let r = real(stream, flags, priority);
        (r, out(r, stream))
    };
    stream_created(&g, api, r, s, flags, priority);
    r
}

/// `cuGreenCtxStreamCreate`: a stream of a green context (`CU_STREAM_NON_BLOCKING` is
/// required), recorded like a created stream of its flags and priority.
pub unsafe fn green_stream_create(
    api: Api,
    real: unsafe extern "C" fn(*mut CUstream, CUgreenCtx, u32, i32) -> CUresult,
    stream: *mut CUstream,
    green: CUgreenCtx,
    flags: u32,
    priority: i32,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: as above.
    let (r, s) = unsafe {
        let r = real(stream, green, flags, priority);
        (r, out(r, stream))
    };
    stream_created(&g, api, r, s, flags, priority);
    r
}

/// `cuStreamDestroy_v2`.
pub unsafe fn stream_destroy(api: Api, real: unsafe extern "C" fn(CUstream) -> CUresult, stream: CUstream) -> CUresult {
    let Some(g) = guard::enter() else {
        // SAFETY: passed through.
        return unsafe { real(stream) };
    };
    let pending = tracer::before(&g);
    // SAFETY: passed through.
    let r = unsafe { real(stream) };
    counted(&g, r, ObjectChange::StreamDestroyed);
    tracer::event_at(
        &g,
        pending,
        StreamDestroy {
            api,
            result: CuResult(r),
            stream: Stream(stream as u64),
        },
    );
    r
}

/// `cuEventCreate`.
pub unsafe fn event_create(
    api: Api,
    real: unsafe extern "C" fn(*mut CUevent, u32) -> CUresult,
    event: *mut CUevent,
    flags: u32,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: passed through; out-parameter read only on success.
    let (r, e) = unsafe {
        let r = real(event, flags);
        (r, out(r, event))
    };
    if let Some(g) = &g {
        counted(g, r, ObjectChange::EventCreated);
        let stack = tracer::object_stack(g);
        tracer::event(
            g,
            EventCreate {
                api,
                result: CuResult(r),
                event: Event(e),
                flags,
                stack,
            },
        );
    }
    r
}

/// `cuEventDestroy_v2`.
pub unsafe fn event_destroy(api: Api, real: unsafe extern "C" fn(CUevent) -> CUresult, event: CUevent) -> CUresult {
    let Some(g) = guard::enter() else {
        // SAFETY: passed through.
        return unsafe { real(event) };
    };
    let pending = tracer::before(&g);
    // SAFETY: passed through.
    let r = unsafe { real(event) };
    counted(&g, r, ObjectChange::EventDestroyed);
    tracer::event_at(
        &g,
        pending,
        EventDestroy {
            api,
            result: CuResult(r),
            event: Event(event as u64),
        },
    );
    r
}

/// Records a pool's coming into being (a creation or an import), with its stack.
fn pool_created(
    g: &Option<HookGuard>,
    api: Api,
    r: CUresult,
    pool: u64,
    place: (u32, i32),
    max_size: u64,
    handle_types: u32,
) {
    if r == CUDA_SUCCESS {
        super::pools::track_pool(pool);
    }
    if let Some(g) = g {
        counted(g, r, ObjectChange::PoolCreated);
        let stack = tracer::call_stack(g);
        tracer::event(
            g,
            PoolCreate {
                api,
                via: guard::via(),
                result: CuResult(r),
                pool,
                location_type: place.0,
                location: place.1,
                max_size,
                handle_types,
                stack,
            },
        );
    }
}

/// `cuMemPoolCreate`.
pub unsafe fn pool_create(
    api: Api,
    real: unsafe extern "C" fn(*mut CUmemoryPool, *const CUmemPoolPropsHead) -> CUresult,
    pool: *mut CUmemoryPool,
    props: *const CUmemPoolPropsHead,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: passed through; the out-parameter and the properties are read only on success,
    // when the driver has read the whole structure itself.
    let (r, p, props) = unsafe {
        let r = real(pool, props);
        let p = out(r, pool);
        let props = if p != 0 && !props.is_null() {
            let h = &*props;
            Some((h.location_type, h.location_id, h.max_size as u64, h.handle_types))
        } else {
            None
        };
        (r, p, props)
    };
    let (location_type, location, max_size, handle_types) = props.unwrap_or((0, -1, 0, 0));
    pool_created(&g, api, r, p, (location_type, location), max_size, handle_types);
    r
}

/// `cuMemPoolImportFromShareableHandle`: a pool of another process, which needs a
/// `cuMemPoolDestroy` of its own.
pub unsafe fn pool_import(
    api: Api,
    real: unsafe extern "C" fn(*mut CUmemoryPool, *mut c_void, u32, u64) -> CUresult,
    pool: *mut CUmemoryPool,
    handle: *mut c_void,
    handle_type: u32,
    flags: u64,
) -> CUresult {
    let g = guard::enter();
    // SAFETY: passed through; the out-parameter is read only on success.
    let (r, p) = unsafe {
        let r = real(pool, handle, handle_type, flags);
        (r, out(r, pool))
    };
    pool_created(&g, api, r, p, (0, -1), 0, handle_type);
    r
}

/// `cuMemPoolDestroy`: numbered before the call, which releases the pool's reserved memory.
pub unsafe fn pool_destroy(
    api: Api,
    real: unsafe extern "C" fn(CUmemoryPool) -> CUresult,
    pool: CUmemoryPool,
) -> CUresult {
    // Out of the samplers' reach before the driver can release it; back if it refused.
    let known = super::pools::is_tracked_pool(pool as u64);
    super::pools::untrack_pool(pool as u64);
    let call = || {
        // SAFETY: passed through.
        let r = unsafe { real(pool) };
        if r != CUDA_SUCCESS && known {
            super::pools::track_pool(pool as u64);
        }
        r
    };
    let Some(g) = guard::enter() else {
        return call();
    };
    let pending = tracer::before(&g);
    let r = call();
    counted(&g, r, ObjectChange::PoolDestroyed);
    let stack = tracer::call_stack(&g);
    tracer::event_at(
        &g,
        pending,
        PoolDestroy {
            api,
            via: guard::via(),
            result: CuResult(r),
            pool: pool as u64,
            stack,
        },
    );
    r
}
