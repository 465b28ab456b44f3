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

/// The bits of a handle the driver wrote (0: none, the call failed).
#[inline]
fn bits<T: Into<HandleBits>>(handle: Option<T>) -> u64 {
    handle.map_or(0, |h| h.into().0)
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
pub fn ctx_create_v2(
    api: Api,
    real: impl FnOnce() -> CUresult,
    ctx: Out<CUcontext>,
    flags: u32,
    dev: CUdevice,
) -> CUresult {
    let g = guard::enter();
    let (r, c) = {
        let r = real();
        (r, bits(ctx.after(r)))
    };
    created(&g, api, r, c, dev, u64::from(flags));
    r
}

/// `cuCtxCreate_v3`.
pub fn ctx_create_v3(
    api: Api,
    real: impl FnOnce() -> CUresult,
    ctx: Out<CUcontext>,
    _params: *mut c_void,
    _nparams: i32,
    flags: u32,
    dev: CUdevice,
) -> CUresult {
    let g = guard::enter();
    let (r, c) = {
        let r = real();
        (r, bits(ctx.after(r)))
    };
    created(&g, api, r, c, dev, u64::from(flags));
    r
}

/// `cuCtxCreate_v4`.
pub fn ctx_create_v4(
    api: Api,
    real: impl FnOnce() -> CUresult,
    ctx: Out<CUcontext>,
    _params: *mut c_void,
    flags: u32,
    dev: CUdevice,
) -> CUresult {
    let g = guard::enter();
    let (r, c) = {
        let r = real();
        (r, bits(ctx.after(r)))
    };
    created(&g, api, r, c, dev, u64::from(flags));
    r
}

/// `cuDevicePrimaryCtxRetain`.
pub fn primary_retain(api: Api, real: impl FnOnce() -> CUresult, ctx: Out<CUcontext>, dev: CUdevice) -> CUresult {
    let g = guard::enter();
    let (r, c) = {
        let r = real();
        (r, bits(ctx.after(r)))
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
pub fn ctx_destroy(api: Api, real: impl FnOnce() -> CUresult, ctx: CUcontext) -> CUresult {
    destroy(api, ctx as u64, -1, real)
}

/// `cuDevicePrimaryCtxRelease[_v2]`, `cuDevicePrimaryCtxReset[_v2]`.
pub fn primary_release(api: Api, real: impl FnOnce() -> CUresult, dev: CUdevice) -> CUresult {
    destroy(api, 0, dev, real)
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
pub fn stream_create(api: Api, real: impl FnOnce() -> CUresult, stream: Out<CUstream>, flags: u32) -> CUresult {
    let g = guard::enter();
    let (r, s) = {
        let r = real();
        (r, bits(stream.after(r)))
    };
    stream_created(&g, api, r, s, flags, 0);
    r
}

/// `cuStreamCreateWithPriority`.
pub fn stream_create_prio(
    api: Api,
    real: impl FnOnce() -> CUresult,
    stream: Out<CUstream>,
    flags: u32,
    priority: i32,
) -> CUresult {
    let g = guard::enter();
    let (r, s) = {
        let r = real();
        (r, bits(stream.after(r)))
    };
    stream_created(&g, api, r, s, flags, priority);
    r
}

/// `cuGreenCtxStreamCreate`: a stream of a green context (`CU_STREAM_NON_BLOCKING` is
/// required), recorded like a created stream of its flags and priority.
pub fn green_stream_create(
    api: Api,
    real: impl FnOnce() -> CUresult,
    stream: Out<CUstream>,
    _green: CUgreenCtx,
    flags: u32,
    priority: i32,
) -> CUresult {
    let g = guard::enter();
    let (r, s) = {
        let r = real();
        (r, bits(stream.after(r)))
    };
    stream_created(&g, api, r, s, flags, priority);
    r
}

/// `cuStreamDestroy_v2`.
pub fn stream_destroy(api: Api, real: impl FnOnce() -> CUresult, stream: CUstream) -> CUresult {
    let Some(g) = guard::enter() else {
        return real();
    };
    let pending = tracer::before(&g);
    let r = real();
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
pub fn event_create(api: Api, real: impl FnOnce() -> CUresult, event: Out<CUevent>, flags: u32) -> CUresult {
    let g = guard::enter();
    let (r, e) = {
        let r = real();
        (r, bits(event.after(r)))
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
pub fn event_destroy(api: Api, real: impl FnOnce() -> CUresult, event: CUevent) -> CUresult {
    let Some(g) = guard::enter() else {
        return real();
    };
    let pending = tracer::before(&g);
    let r = real();
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
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `props` is NULL or the program's pool properties.
pub unsafe fn pool_create(
    api: Api,
    real: impl FnOnce() -> CUresult,
    pool: Out<CUmemoryPool>,
    props: *const CUmemPoolPropsHead,
) -> CUresult {
    let g = guard::enter();
    let r = real();
    let p = bits(pool.after(r));
    let props = if p != 0 && !props.is_null() {
        // SAFETY: the contract above: not NULL, so the program's properties, readable while
        // its call runs; read only after the driver succeeded, having read them whole itself.
        let h = unsafe { &*props };
        Some((h.location_type, h.location_id, h.max_size as u64, h.handle_types))
    } else {
        None
    };
    let (location_type, location, max_size, handle_types) = props.unwrap_or((0, -1, 0, 0));
    pool_created(&g, api, r, p, (location_type, location), max_size, handle_types);
    r
}

/// `cuMemPoolImportFromShareableHandle`: a pool of another process, which needs a
/// `cuMemPoolDestroy` of its own.
pub fn pool_import(
    api: Api,
    real: impl FnOnce() -> CUresult,
    pool: Out<CUmemoryPool>,
    _handle: *mut c_void,
    handle_type: u32,
    _flags: u64,
) -> CUresult {
    let g = guard::enter();
    let (r, p) = {
        let r = real();
        (r, bits(pool.after(r)))
    };
    pool_created(&g, api, r, p, (0, -1), 0, handle_type);
    r
}

/// `cuMemPoolDestroy`: numbered before the call, which releases the pool's reserved memory.
pub fn pool_destroy(api: Api, real: impl FnOnce() -> CUresult, pool: CUmemoryPool) -> CUresult {
    // Out of the samplers' reach before the driver can release it; back if it refused.
    let known = super::pools::is_tracked_pool(pool as u64);
    super::pools::untrack_pool(pool as u64);
    let call = || {
        let r = real();
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
