//! What a graph's launches touch: the kernel, memcpy and memset nodes of a graph, read with
//! the driver's getters when the shim lists the graph (`graph_listing::list_nodes`, at each
//! instantiation and each update that takes another graph's parameters), and the changes the
//! executable-graph setters make to one node (`cuGraphExecKernelNodeSetParams[_v2]`,
//! `cuGraphExecMemcpyNodeSetParams`, `cuGraphExecMemsetNodeSetParams`,
//! `cuGraphExecNodeSetParams`, `cuGraphNodeSetEnabled`). `GraphAccesses` records carry the
//! nodes' entries; `GraphUpdate` records the changes.
//!
//! A kernel node's entries are its 8-byte parameters (possible addresses), found as at a
//! launch (`params`); a copy's are its destination and source, a memset's its destination,
//! each with the bytes its 2D or 3D shape spans (`ordering::regions`). Reading the graph as
//! instantiated, rather than what its capture recorded, covers nodes added by hand, graphs
//! changed before instantiation, cloned graphs and child graphs alike.
//!
//! A node whose parameters cannot be read, and a kernel node the device may update
//! (`CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE`), is listed with no entry: the
//! analyzer then knows no memory it touches, which can only hide a race, never make one up.

use std::borrow::Cow;
use std::ffi::c_void;
use std::mem::MaybeUninit;

use gpuleak_format::{Addrs, Api, GraphAccesses};

use super::ordering::regions;
use crate::cuda::*;
use crate::dlsym::{driver_fn, Getter};
use crate::guard::{self, HookGuard};
use crate::{params, tracer};

/// Appends one entry of `node` (owned by `owner`) to `out`.
fn push(out: &mut Vec<u64>, node: u64, owner: u64, addr: u64, len: u64, mode: u64) {
    out.extend([node, owner, addr, GraphAccesses::encode(len, mode)]);
}

/// What one node touches, (address, length, mode) each, kept on the stack.
struct Entries {
    items: [(u64, u64, u64); params::MAX_PTRS],
    len: usize,
}

impl Entries {
    fn none() -> Entries {
        Entries {
            items: [(0, 0, 0); params::MAX_PTRS],
            len: 0,
        }
    }

    fn of(list: &[(u64, u64, u64)]) -> Entries {
        let mut e = Entries::none();
        e.len = list.len().min(e.items.len());
        e.items[..e.len].copy_from_slice(&list[..e.len]);
        e
    }

    fn as_slice(&self) -> &[(u64, u64, u64)] {
        &self.items[..self.len]
    }
}

/// Appends the entries of a node whose parameters were read (`entries`, as
/// (address, length, mode)), or the one empty entry of a node that touches nothing known.
fn push_node(out: &mut Vec<u64>, node: u64, owner: u64, entries: &[(u64, u64, u64)]) {
    let mut any = false;
    for &(addr, len, mode) in entries.iter().filter(|e| e.0 != 0) {
        push(out, node, owner, addr, len, mode);
        any = true;
    }
    if !any {
        push(out, node, owner, 0, 0, 0);
    }
}

/// The entries of a kernel with these parameters: its 8-byte parameter values.
///
/// # Safety
/// `kernel_params` and `extra` were read by the driver (a successful setter) or written by
/// it (a getter), so they describe readable parameter values of `function`'s layout.
unsafe fn kernel_entries(kernel_params: *mut *mut c_void, extra: *mut *mut c_void, function: *mut c_void) -> Entries {
    let mut ptrs = [0u64; params::MAX_PTRS];
    let layout = params::layout(function);
    // SAFETY: the contract above.
    let n = unsafe { params::pointers(&layout, kernel_params, extra, &mut ptrs) };
    let mut e = Entries::none();
    for (slot, &a) in e.items.iter_mut().zip(&ptrs[..n]) {
        *slot = (a, 1, GraphAccesses::KERNEL);
    }
    e.len = n;
    e
}

/// The entries of a copy: destination written, source read.
fn copy_entries(p: &CUDA_MEMCPY3D) -> Entries {
    let r = regions::of_3d(p);
    Entries::of(&[
        (r.dst, r.bytes, GraphAccesses::WRITE),
        (r.src, r.bytes, GraphAccesses::READ),
    ])
}

/// The entry of a memset: its destination, written.
fn memset_entries(p: &CUDA_MEMSET_NODE_PARAMS) -> Entries {
    let bytes = regions::memset_span(p.pitch, p.width, p.height, u64::from(p.element_size));
    Entries::of(&[(p.dst, bytes, GraphAccesses::WRITE)])
}

/// Lists a kernel (`CU_GRAPH_NODE_TYPE_KERNEL`), memcpy or memset node of a graph into `out`
/// (nothing for other kinds).
pub fn list_node(node: CUgraphNode, kind: u32, owner: u64, out: &mut Vec<u64>) {
    let handle = node as u64;
    let entries = match kind {
        CU_GRAPH_NODE_TYPE_KERNEL => kernel_node(node),
        CU_GRAPH_NODE_TYPE_MEMCPY => memcpy_node(node).map(|p| copy_entries(&p)),
        CU_GRAPH_NODE_TYPE_MEMSET => memset_node(node).map(|p| memset_entries(&p)),
        _ => return,
    };
    push_node(out, handle, owner, entries.as_ref().map_or(&[], Entries::as_slice));
}

/// A kernel node's entries; `None` when its parameters cannot be read or the device may
/// change them.
fn kernel_node(node: CUgraphNode) -> Option<Entries> {
    type Get = unsafe extern "C" fn(CUgraphNode, *mut CUDA_KERNEL_NODE_PARAMS) -> CUresult;
    // The 12.0 ABI, else the 10.0 one (a prefix of the same structure).
    let get =
        driver_fn(Getter::cuGraphKernelNodeGetParams_v2).or_else(|| driver_fn(Getter::cuGraphKernelNodeGetParams))?;
    // SAFETY: the driver's own function, found by name, with its C signature.
    let get = unsafe { std::mem::transmute::<usize, Get>(get) };
    if device_updatable(node) {
        return None;
    }
    let mut p = MaybeUninit::<CUDA_KERNEL_NODE_PARAMS>::zeroed();
    // SAFETY: a kernel node; `p` has room for the larger ABI's structure.
    if unsafe { get(node, p.as_mut_ptr()) } != CUDA_SUCCESS {
        return None;
    }
    // SAFETY: zeroed, then written by the driver: every member is initialized.
    let p = unsafe { p.assume_init() };
    let function = if p.func.is_null() { p.kern } else { p.func };
    if function.is_null() {
        return None;
    }
    // SAFETY: the driver returned the node's parameters, whose arrays and values it owns
    // ("valid until the node is destroyed or its parameters are modified").
    Some(unsafe { kernel_entries(p.kernel_params, p.extra, function) })
}

/// Whether a kernel node is device-updatable: its parameters may change on the device
/// without a host call. A driver without the attribute (before 12.4) has none.
fn device_updatable(node: CUgraphNode) -> bool {
    type GetAttribute = unsafe extern "C" fn(CUgraphNode, u32, *mut [u64; 8]) -> CUresult;
    let Some(get) = driver_fn(Getter::cuGraphKernelNodeGetAttribute) else {
        return false;
    };
    // SAFETY: the driver's own function, found by name, with its C signature (the value is
    // the 64-byte `CUlaunchAttributeValue` union).
    let get = unsafe { std::mem::transmute::<usize, GetAttribute>(get) };
    let mut value = [0u64; 8];
    // SAFETY: a kernel node; `value` has the union's size. Its first member for this
    // attribute is `int deviceUpdatable`.
    let r = unsafe { get(node, CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE, &mut value) };
    r == CUDA_SUCCESS && value[0] as u32 != 0
}

fn memcpy_node(node: CUgraphNode) -> Option<CUDA_MEMCPY3D> {
    type Get = unsafe extern "C" fn(CUgraphNode, *mut CUDA_MEMCPY3D) -> CUresult;
    let get = driver_fn(Getter::cuGraphMemcpyNodeGetParams)?;
    // SAFETY: the driver's own function, found by name, with its C signature.
    let get = unsafe { std::mem::transmute::<usize, Get>(get) };
    let mut p = MaybeUninit::<CUDA_MEMCPY3D>::zeroed();
    // SAFETY: a memcpy node; `p` has the structure's size.
    if unsafe { get(node, p.as_mut_ptr()) } != CUDA_SUCCESS {
        return None;
    }
    // SAFETY: zeroed, then written by the driver.
    Some(unsafe { p.assume_init() })
}

fn memset_node(node: CUgraphNode) -> Option<CUDA_MEMSET_NODE_PARAMS> {
    type Get = unsafe extern "C" fn(CUgraphNode, *mut CUDA_MEMSET_NODE_PARAMS) -> CUresult;
    let get = driver_fn(Getter::cuGraphMemsetNodeGetParams)?;
    // SAFETY: the driver's own function, found by name, with its C signature.
    let get = unsafe { std::mem::transmute::<usize, Get>(get) };
    let mut p = MaybeUninit::<CUDA_MEMSET_NODE_PARAMS>::zeroed();
    // SAFETY: a memset node; `p` has the structure's size.
    if unsafe { get(node, p.as_mut_ptr()) } != CUDA_SUCCESS {
        return None;
    }
    // SAFETY: zeroed, then written by the driver.
    Some(unsafe { p.assume_init() })
}

/// Writes `entries` for `exec` as [`GraphAccesses`] records: at least one, each holding at
/// most [`GraphAccesses::MAX_ENTRIES`] entries.
pub fn write(g: &HookGuard, exec: u64, entries: &[u64]) {
    super::graph_listing::in_chunks(entries, GraphAccesses::MAX_ENTRIES * 4, |nodes| {
        tracer::event(
            g,
            GraphAccesses {
                exec,
                nodes: Addrs(Cow::Borrowed(nodes)),
            },
        )
    });
}

// ---- Changes to one node of an executable graph ----

/// After a setter of one node's parameters returned `r`: on success, the node's new entries
/// (`entries`, asked only then, a `GraphAccesses` record), then the `GraphUpdate`.
fn node_set(
    g: &HookGuard,
    api: Api,
    r: CUresult,
    exec: CUgraphExec,
    node: CUgraphNode,
    entries: impl FnOnce() -> Entries,
) {
    if tracer::get().is_none() {
        return;
    }
    let ok = r == CUDA_SUCCESS;
    if ok {
        let mut out = Vec::new();
        push_node(&mut out, node as u64, 0, entries().as_slice());
        write(g, exec as u64, &out);
    }
    super::graph_updates::updated(
        g,
        api,
        r,
        gpuleak_format::GraphUpdate::NODE_PARAMS,
        exec,
        node as u64,
        0,
        0,
        ok,
    );
}

/// The entries of a kernel node's new parameters, read after the driver accepted them;
/// `kern_too` for the 12.0 structure, whose `kern` names the kernel when `func` is NULL.
///
/// # Safety
/// The setter succeeded with `p`, so the driver read it and the parameter values it points
/// at.
unsafe fn set_kernel_entries(p: *const CUDA_KERNEL_NODE_PARAMS, kern_too: bool) -> Entries {
    if p.is_null() {
        return Entries::none();
    }
    // SAFETY: the contract above. Members are read one by one through the raw pointer: the
    // 10.0 ABI's structure ends before `kern`, which is read only when the structure has it.
    let (func, kernel_params, extra) = unsafe { ((*p).func, (*p).kernel_params, (*p).extra) };
    let function = if func.is_null() && kern_too {
        // SAFETY: as above, the 12.0 structure.
        unsafe { (*p).kern }
    } else {
        func
    };
    if function.is_null() {
        return Entries::none();
    }
    // SAFETY: the contract above.
    unsafe { kernel_entries(kernel_params, extra, function) }
}

/// `cuGraphExecKernelNodeSetParams` (10.1) and `_v2` (12.0).
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `params` is NULL or the program's kernel node
/// parameters (the 10.0 structure for `cuGraphExecKernelNodeSetParams`, the 12.0 one for `_v2`),
/// whose arrays hold the kernel's parameter values.
pub unsafe fn exec_kernel_set(
    api: Api,
    real: impl FnOnce() -> CUresult,
    exec: CUgraphExec,
    node: CUgraphNode,
    params: *const CUDA_KERNEL_NODE_PARAMS,
) -> CUresult {
    let g = guard::enter();
    let r = real();
    if let Some(g) = &g {
        // SAFETY: the contract above; `node_set` asks for the entries only after success,
        // when the driver has read these parameters and the values they point at. The 10.0
        // ABI's structure ends before `kern`, which is read only for `_v2`.
        node_set(g, api, r, exec, node, || unsafe {
            set_kernel_entries(params, api != Api::cuGraphExecKernelNodeSetParams)
        });
    }
    r
}

/// A setter of one copy or memset node (`P`: its descriptor) that takes a context too.
///
/// # Safety
/// `params` is NULL or the program's descriptor of the call `real` makes, readable while that
/// call runs (the handlers' contract of the setter).
#[allow(clippy::too_many_arguments)]
unsafe fn exec_set_in_context<P>(
    api: Api,
    real: impl FnOnce() -> CUresult,
    exec: CUgraphExec,
    node: CUgraphNode,
    params: *const P,
    entries_of: fn(&P) -> Entries,
) -> CUresult {
    let g = guard::enter();
    let r = real();
    if let Some(g) = &g {
        node_set(g, api, r, exec, node, || {
            // SAFETY: the contract above; asked after success only, when the driver has read
            // the descriptor.
            unsafe { params.as_ref() }.map_or_else(Entries::none, entries_of)
        });
    }
    r
}

/// `cuGraphExecMemcpyNodeSetParams`.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `params` is NULL or the program's copy descriptor.
pub unsafe fn exec_memcpy_set(
    api: Api,
    real: impl FnOnce() -> CUresult,
    exec: CUgraphExec,
    node: CUgraphNode,
    params: *const CUDA_MEMCPY3D,
    _ctx: CUcontext,
) -> CUresult {
    // SAFETY: the contract above is `exec_set_in_context`'s.
    unsafe { exec_set_in_context(api, real, exec, node, params, copy_entries) }
}

/// `cuGraphExecMemsetNodeSetParams`.
///
/// # Safety
/// The handlers' contract ([`crate::exports`]): `params` is NULL or the program's memset
/// parameters.
pub unsafe fn exec_memset_set(
    api: Api,
    real: impl FnOnce() -> CUresult,
    exec: CUgraphExec,
    node: CUgraphNode,
    params: *const CUDA_MEMSET_NODE_PARAMS,
    _ctx: CUcontext,
) -> CUresult {
    // SAFETY: the contract above is `exec_set_in_context`'s.
    unsafe { exec_set_in_context(api, real, exec, node, params, memset_entries) }
}

/// `cuGraphExecNodeSetParams` given a kernel, memcpy or memset node's parameters (read
/// after success only, by the caller): records the node's new entries; nothing for other
/// node types.
///
/// # Safety
/// The call succeeded with `params`, a `CUgraphNodeParams` whose type is `kind`: the driver
/// read the union member of that type.
pub unsafe fn exec_generic_set(
    g: &HookGuard,
    api: Api,
    r: CUresult,
    exec: CUgraphExec,
    node: CUgraphNode,
    kind: u32,
    params: *const c_void,
) {
    // SAFETY: the union lies at its fixed offset in the caller's structure.
    let body = unsafe { params.cast::<u8>().add(NODE_PARAMS_UNION) };
    let entries = match kind {
        // SAFETY: the kernel member (`CUDA_KERNEL_NODE_PARAMS_v3`, the 12.0 layout), read by
        // the driver with the values it points at.
        CU_GRAPH_NODE_TYPE_KERNEL => unsafe { set_kernel_entries(body.cast(), true) },
        CU_GRAPH_NODE_TYPE_MEMCPY => {
            // SAFETY: the memcpy member, read by the driver.
            let p = unsafe { &*body.cast::<CUDA_MEMCPY_NODE_PARAMS>() };
            copy_entries(&p.copy_params)
        }
        CU_GRAPH_NODE_TYPE_MEMSET => {
            // SAFETY: the memset member (`_v2`: these members, then a context).
            memset_entries(unsafe { &*body.cast::<CUDA_MEMSET_NODE_PARAMS>() })
        }
        _ => return,
    };
    node_set(g, api, r, exec, node, || entries);
}

/// `cuGraphNodeSetEnabled` (11.6): a kernel, memcpy or memset node of an executable graph
/// enabled or disabled for later launches.
pub fn set_enabled(
    api: Api,
    real: impl FnOnce() -> CUresult,
    exec: CUgraphExec,
    node: CUgraphNode,
    enabled: u32,
) -> CUresult {
    let g = guard::enter();
    let r = real();
    if let Some(g) = &g {
        super::graph_updates::updated(
            g,
            api,
            r,
            gpuleak_format::GraphUpdate::NODE_ENABLED,
            exec,
            node as u64,
            u64::from(enabled != 0),
            0,
            false,
        );
    }
    r
}
