//! Kernel launches (`cuLaunchKernel`, `cuLaunchKernelEx`) and graph launches, as `Launch`
//! records.

use std::ffi::c_void;

use gpuleak_format::{Addrs, Api, CuResult, Launch, Stream};

use crate::cuda::*;
use crate::{guard, params, tracer};

const NO_STREAM: CUstream = std::ptr::null_mut();

/// Records a kernel launch of `f` on `stream`: the 8-byte parameters (possible device
/// pointers) are read after a successful launch, when the driver has validated the
/// parameter arrays.
#[inline(always)]
fn record_launch(
    g: &guard::HookGuard,
    api: Api,
    r: CUresult,
    stream: CUstream,
    f: *mut c_void,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) {
    let mut ptrs = [0u64; params::MAX_PTRS];
    let n = if r == CUDA_SUCCESS {
        let layout = params::layout(f);
        // SAFETY: the launch succeeded, so the driver read every parameter through `params`
        // or `extra`, as the layout it gave describes them.
        unsafe { params::pointers(&layout, params, extra, &mut ptrs) }
    } else {
        0
    };
    tracer::hot_event(g, |stack| Launch {
        api,
        result: CuResult(r),
        stream: Stream(stream as u64),
        function: f as u64,
        ptrs: Addrs(std::borrow::Cow::Borrowed(&ptrs[..n])),
        stack,
    });
    crate::exports::graph_nodes::after_work(g, api, r, stream);
}

/// `cuLaunchCooperativeKernel[_ptsz]`: `cuLaunchKernel` without the `extra` buffer, whose
/// blocks may synchronize across the grid.
#[allow(clippy::too_many_arguments)]
pub fn launch_cooperative(
    api: Api,
    real: impl FnOnce() -> CUresult,
    f: *mut c_void,
    _gx: u32,
    _gy: u32,
    _gz: u32,
    _bx: u32,
    _by: u32,
    _bz: u32,
    _shared: u32,
    stream: CUstream,
    params: *mut *mut c_void,
) -> CUresult {
    let Some(g) = guard::enter() else {
        return real();
    };
    let r = real();
    record_launch(&g, api, r, stream, f, params, std::ptr::null_mut());
    r
}

/// `cuLaunchKernel[_ptsz]`.
#[allow(clippy::too_many_arguments)]
pub fn launch(
    api: Api,
    real: impl FnOnce() -> CUresult,
    f: *mut c_void,
    _gx: u32,
    _gy: u32,
    _gz: u32,
    _bx: u32,
    _by: u32,
    _bz: u32,
    _shared: u32,
    stream: CUstream,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    let Some(g) = guard::enter() else {
        return real();
    };
    let r = real();
    record_launch(&g, api, r, stream, f, params, extra);
    r
}

/// `cuLaunchKernelEx[_ptsz]`: the stream is the configuration's. It is read only after a
/// successful launch (the driver has then read the configuration too); a refused launch is
/// recorded with stream 0 and no pointers.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `config` is NULL or the program's launch
/// configuration; `params` and `extra` are the kernel's parameters as `cuLaunchKernel` takes them.
pub unsafe fn launch_ex(
    api: Api,
    real: impl FnOnce() -> CUresult,
    config: *const CUlaunchConfig,
    f: *mut c_void,
    params: *mut *mut c_void,
    extra: *mut *mut c_void,
) -> CUresult {
    let Some(g) = guard::enter() else {
        return real();
    };
    let r = real();
    let stream = if r == CUDA_SUCCESS && !config.is_null() {
        // SAFETY: the contract above: not NULL, so the program's configuration, which the
        // driver read (the launch succeeded); only the stream field is read, in place.
        unsafe { std::ptr::addr_of!((*config).stream).read_unaligned() }
    } else {
        NO_STREAM
    };
    record_launch(&g, api, r, stream, f, params, extra);
    r
}

/// `cuGraphLaunch[_ptsz]`: work on `stream` (a `Launch` of the executable graph handle with
/// no pointers; what its nodes touch was listed at instantiation, `graph_accesses`). A graph
/// launched into a capture becomes a child graph node, whose nodes are not named by
/// `GraphNode` records.
pub fn graph_launch(api: Api, real: impl FnOnce() -> CUresult, exec: *mut c_void, stream: CUstream) -> CUresult {
    let Some(g) = guard::enter() else {
        return real();
    };
    let r = real();
    if r == CUDA_SUCCESS {
        crate::ops::graph_live::launched(crate::ops::flags(), exec as u64);
    }
    tracer::hot_event(&g, |stack| Launch {
        api,
        result: CuResult(r),
        stream: Stream(stream as u64),
        function: exec as u64,
        ptrs: Addrs(std::borrow::Cow::Borrowed(&[])),
        stack,
    });
    r
}
