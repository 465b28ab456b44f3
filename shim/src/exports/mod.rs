//! The C ABI of the shim, in one place: every intercepted entry point, its handler, and the
//! generated table behind doors 1 to 3 (exported symbols, `dlsym`, the resolvers).
//!
//! Each generated export is short: find the real function, wrap the call the program made
//! (the real function with the program's arguments) in a closure, and hand it to the handler
//! with the arguments. Each handler takes the guard, makes that call once, records, and returns
//! the real result unchanged. Out-parameters are declared `Out<T>` in the list below: a handler
//! reads one only through [`Out::after`], after the driver reported success. The rows marked
//! `@real` (the host functions' and callbacks') hand their handler the real function instead,
//! which it calls once, with the program's arguments or with a wrapper of the program's function
//! in their place ([`ordering::host_fns`]).
//!
//! # The handlers' contract
//!
//! A handler that reads through a pointer argument other than an `Out` is an `unsafe fn`,
//! and its one safety condition is the same for all, named in each `# Safety` section as
//! "the handlers' contract": its arguments are those of a call the program made to the
//! function of its row, on this thread, which has not returned to the program yet (the
//! handler runs inside it), and they keep that function's documented contract. An input
//! pointer is then NULL or points at the structure or array the CUDA reference describes for
//! it (of the count another argument gives), readable as C lays it out until the handler
//! returns; an output pointer is NULL or writable. The generated exports pass the program's
//! own arguments unchanged, so their calls keep it. Most handlers read inputs only after the
//! driver succeeded: a driver that accepted the call has read them, so even a program that
//! strays from the contract passed readable memory.

#![allow(non_snake_case)]

pub mod dlsym_door;
pub mod graph_accesses;
pub mod graph_listing;
pub mod graph_nodes;
pub mod graph_updates;
pub mod graphs;
pub mod imports;
pub mod libraries;
pub mod memory;
pub mod objects;
pub mod ordering;
pub mod pools;
pub mod resolver;
pub mod runtime;

pub mod vmm;

use std::ffi::{c_char, c_void};

use gpuleak_format::{Api, Library};

use crate::cuda::*;
use crate::table::{self, Hook, Lib};

macro_rules! cstr {
    ($name:ident) => {
        match std::ffi::CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
            Ok(c) => c,
            Err(_) => panic!("hook names have no NUL"),
        }
    };
}

/// The call of a driver row's handler. A plain row's handler gets the call the program made,
/// as a closure; a row marked `@real` (`=> @real module::handler`) gets the real function
/// itself, to call at most once with arguments of its choosing (a host function's handler
/// passes the driver a wrapper of the program's function: [`ordering::host_fns`]).
macro_rules! handler_call {
    (; $dh:path, $api:expr, $real:ident, $($da:ident),*) => {{
        // SAFETY: the real function with the program's own arguments, unchanged, on the
        // program's thread inside the program's call: the call the program made. The handler
        // makes it at most once (`FnOnce`).
        let call = move || unsafe { $real($($da),*) };
        // SAFETY: the program's own arguments of its call to this very function, not yet
        // returned: the handlers' contract (see the module's documentation). Most handlers are
        // safe functions; those that read an input pointer are not.
        #[allow(unused_unsafe)]
        unsafe { $dh($api, call, $($da),*) }
    }};
    (real; $dh:path, $api:expr, $real:ident, $($da:ident),*) => {{
        // SAFETY: the handlers' contract, and `real` is the real function of this very row
        // (its declared signature), which such a handler calls at most once, on this thread
        // inside the program's call.
        unsafe { $dh($api, $real, $($da),*) }
    }};
}

macro_rules! hooks {
    (
        driver { $( $d:ident ( $($da:ident : $dt:ty),* $(,)? ) => $(@$how:ident)? $dh:path; )* }
        runtime { $( $r:ident ( $($ra:ident : $rt:ty),* $(,)? ) => $rh:path; )* }
    ) => {
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        #[repr(usize)]
        enum Id { $($d,)* $($r,)* }

        const COUNT: usize = [$(Id::$d,)* $(Id::$r,)*].len();

        // Each row is in the section of the library the API list says exports it.
        $(const _: () = assert!(
            matches!(Api::$d.library(), Some(Library::Driver)),
            concat!(stringify!($d), " is not a driver entry point in the API list")
        );)*
        $(const _: () = assert!(
            matches!(Api::$r.library(), Some(Library::Runtime)),
            concat!(stringify!($r), " is not a runtime entry point in the API list")
        );)*

        /// Every intercepted function.
        pub static HOOKS: [Hook; COUNT] = [
            $( Hook::new(cstr!($d), Lib::Driver, $d as *const ()), )*
            $( Hook::new(cstr!($r), Lib::Runtime, $r as *const ()), )*
        ];

        $(
            #[doc = concat!("Interposes `", stringify!($d), "`.")]
            ///
            /// # Safety
            /// The CUDA driver function's contract.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $d($($da: $dt),*) -> CUresult {
                type Real = unsafe extern "C" fn($($dt),*) -> CUresult;
                let addr = HOOKS[Id::$d as usize].real_or_lookup(&HOOKS);
                if addr == 0 {
                    return CUDA_ERROR_NOT_INITIALIZED;
                }
                // SAFETY: the row's real address (non-zero) is the function of exactly this
                // name that the loader found in `libcuda` or after the shim (the driver, or
                // another interposer of it), whose public signature is the one declared above.
                let real = unsafe { std::mem::transmute::<usize, Real>(addr) };
                handler_call!($($how)?; $dh, Api::$d, real, $($da),*)
            }
        )*

        $(
            #[doc = concat!("Interposes `", stringify!($r), "` (only to tag driver records).")]
            ///
            /// # Safety
            /// The CUDA runtime function's contract.
            #[unsafe(no_mangle)]
            pub unsafe extern "C" fn $r($($ra: $rt),*) -> CUresult {
                type Real = unsafe extern "C" fn($($rt),*) -> CUresult;
                let addr = HOOKS[Id::$r as usize].real_or_lookup(&HOOKS);
                if addr == 0 {
                    return runtime::ERROR_INITIALIZATION;
                }
                // SAFETY: the row's real address (non-zero) is the function of exactly this
                // name after the shim, or in a `libcudart.so` the process loaded: the
                // runtime's, whose public signature is the one declared above.
                let real = unsafe { std::mem::transmute::<usize, Real>(addr) };
                // SAFETY: as for the driver's rows: the call the program made, at most once.
                let call = move || unsafe { real($($ra),*) };
                // SAFETY: as for the driver's rows: the handlers' contract.
                #[allow(unused_unsafe)]
                unsafe { $rh(Api::$r, call, $($ra),*) }
            }
        )*
    };
}

type Pptr = *mut *mut c_void;

hooks! {
    driver {
        cuMemAlloc_v2(dptr: Out<CUdeviceptr>, size: usize) => memory::alloc;
        cuMemAllocPitch_v2(dptr: Out<CUdeviceptr>, pitch: Out<usize>, width: usize, height: usize, elem: u32) => memory::alloc_pitch;
        cuMemAllocManaged(dptr: Out<CUdeviceptr>, size: usize, flags: u32) => memory::alloc_flags;
        cuMemFree_v2(dptr: CUdeviceptr) => memory::free;
        cuMemAllocHost_v2(pp: Out<*mut c_void>, size: usize) => memory::alloc_host;
        cuMemHostAlloc(pp: Out<*mut c_void>, size: usize, flags: u32) => memory::host_alloc;
        cuMemFreeHost(p: *mut c_void) => memory::free_host;
        cuMemHostRegister_v2(p: *mut c_void, size: usize, flags: u32) => memory::host_register;
        cuMemHostUnregister(p: *mut c_void) => memory::free_host;
        cuMemAllocAsync(dptr: Out<CUdeviceptr>, size: usize, stream: CUstream) => memory::alloc_async;
        cuMemAllocAsync_ptsz(dptr: Out<CUdeviceptr>, size: usize, stream: CUstream) => memory::alloc_async;
        cuMemAllocFromPoolAsync(dptr: Out<CUdeviceptr>, size: usize, pool: CUmemoryPool, stream: CUstream) => memory::alloc_pool;
        cuMemAllocFromPoolAsync_ptsz(dptr: Out<CUdeviceptr>, size: usize, pool: CUmemoryPool, stream: CUstream) => memory::alloc_pool;
        cuMemFreeAsync(dptr: CUdeviceptr, stream: CUstream) => memory::free_async;
        cuMemFreeAsync_ptsz(dptr: CUdeviceptr, stream: CUstream) => memory::free_async;
        cuMemAddressReserve(ptr: Out<CUdeviceptr>, size: usize, align: usize, addr: CUdeviceptr, flags: u64) => vmm::address_reserve;
        cuMemAddressFree(ptr: CUdeviceptr, size: usize) => vmm::address_free;
        cuMemCreate(handle: Out<CUmemGenericAllocationHandle>, size: usize, prop: *const c_void, flags: u64) => vmm::create;
        cuMemRelease(handle: CUmemGenericAllocationHandle) => vmm::release;
        cuMemMap(ptr: CUdeviceptr, size: usize, offset: usize, handle: CUmemGenericAllocationHandle, flags: u64) => vmm::map;
        cuMemUnmap(ptr: CUdeviceptr, size: usize) => vmm::unmap;
        cuMemRetainAllocationHandle(handle: Out<CUmemGenericAllocationHandle>, addr: *mut c_void) => vmm::retain;
        cuMemImportFromShareableHandle(handle: Out<CUmemGenericAllocationHandle>, os_handle: *mut c_void, kind: u32) => vmm::import;
        cuMulticastCreate(handle: Out<CUmemGenericAllocationHandle>, prop: *const CUmulticastObjectProp) => vmm::multicast_create;
        cuArrayCreate_v2(array: Out<CUarray>, desc: *const CUDA_ARRAY_DESCRIPTOR) => memory::array_create;
        cuArray3DCreate_v2(array: Out<CUarray>, desc: *const CUDA_ARRAY3D_DESCRIPTOR) => memory::array3d_create;
        cuArrayDestroy(array: CUarray) => memory::array_destroy;
        cuMipmappedArrayCreate(array: Out<CUmipmappedArray>, desc: *const CUDA_ARRAY3D_DESCRIPTOR, levels: u32) => memory::mipmapped_create;
        cuMipmappedArrayDestroy(array: CUmipmappedArray) => memory::array_destroy;
        cuIpcOpenMemHandle_v2(dptr: Out<CUdeviceptr>, handle: CUipcMemHandle, flags: u32) => imports::ipc_open;
        cuIpcOpenMemHandle(dptr: Out<CUdeviceptr>, handle: CUipcMemHandle, flags: u32) => imports::ipc_open;
        cuIpcCloseMemHandle(dptr: CUdeviceptr) => imports::ipc_close;
        cuImportExternalMemory(ext: Out<CUexternalMemory>, desc: *const CUDA_EXTERNAL_MEMORY_HANDLE_DESC) => imports::external_import;
        cuExternalMemoryGetMappedBuffer(dptr: Out<CUdeviceptr>, ext: CUexternalMemory, desc: *const CUDA_EXTERNAL_MEMORY_BUFFER_DESC) => imports::external_buffer;
        cuExternalMemoryGetMappedMipmappedArray(array: Out<CUmipmappedArray>, ext: CUexternalMemory, desc: *const CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC) => imports::external_array;
        cuDestroyExternalMemory(ext: CUexternalMemory) => imports::external_destroy;
        cuMemPoolImportPointer(dptr: Out<CUdeviceptr>, pool: CUmemoryPool, data: *mut c_void) => imports::pool_import;
        cuMemPoolCreate(pool: Out<CUmemoryPool>, props: *const CUmemPoolPropsHead) => objects::pool_create;
        cuMemPoolImportFromShareableHandle(pool: Out<CUmemoryPool>, handle: *mut c_void, kind: u32, flags: u64) => objects::pool_import;
        cuMemPoolDestroy(pool: CUmemoryPool) => objects::pool_destroy;
        cuMemPoolTrimTo(pool: CUmemoryPool, keep: usize) => pools::pool_trim;
        cuGraphAddMemAllocNode(node: Out<CUgraphNode>, graph: CUgraph, deps: *const CUgraphNode, ndeps: usize, params: *mut CUDA_MEM_ALLOC_NODE_PARAMS) => graphs::add_mem_alloc_node;
        cuGraphAddMemFreeNode(node: Out<CUgraphNode>, graph: CUgraph, deps: *const CUgraphNode, ndeps: usize, dptr: CUdeviceptr) => graph_nodes::add_mem_free_node;
        cuGraphAddNode(node: Out<CUgraphNode>, graph: CUgraph, deps: *const CUgraphNode, ndeps: usize, params: *mut CUgraphNodeParamsHead) => graphs::add_node;
        cuGraphAddNode_v2(node: Out<CUgraphNode>, graph: CUgraph, deps: *const CUgraphNode, edges: *const c_void, ndeps: usize, params: *mut CUgraphNodeParamsHead) => graphs::add_node_v2;
        cuGraphInstantiate(exec: Out<CUgraphExec>, graph: CUgraph, error_node: *mut CUgraphNode, log: *mut c_void, log_size: usize) => graphs::instantiate_logged;
        cuGraphInstantiate_v2(exec: Out<CUgraphExec>, graph: CUgraph, error_node: *mut CUgraphNode, log: *mut c_void, log_size: usize) => graphs::instantiate_logged;
        cuGraphInstantiateWithFlags(exec: Out<CUgraphExec>, graph: CUgraph, flags: u64) => graphs::instantiate_flags;
        cuGraphInstantiateWithParams(exec: Out<CUgraphExec>, graph: CUgraph, params: *mut CUDA_GRAPH_INSTANTIATE_PARAMS_HEAD) => graphs::instantiate_params;
        cuGraphInstantiateWithParams_ptsz(exec: Out<CUgraphExec>, graph: CUgraph, params: *mut CUDA_GRAPH_INSTANTIATE_PARAMS_HEAD) => graphs::instantiate_params;
        cuGraphExecEventRecordNodeSetEvent(exec: CUgraphExec, node: CUgraphNode, event: CUevent) => graph_updates::exec_set_event;
        cuGraphExecEventWaitNodeSetEvent(exec: CUgraphExec, node: CUgraphNode, event: CUevent) => graph_updates::exec_set_event;
        cuGraphExecUpdate(exec: CUgraphExec, graph: CUgraph, error_node: *mut CUgraphNode, result: *mut u32) => graph_updates::exec_update;
        cuGraphExecUpdate_v2(exec: CUgraphExec, graph: CUgraph, info: *mut c_void) => graph_updates::exec_update_v2;
        cuGraphExecChildGraphNodeSetParams(exec: CUgraphExec, node: CUgraphNode, child: CUgraph) => graph_updates::exec_child_set;
        cuGraphExecNodeSetParams(exec: CUgraphExec, node: CUgraphNode, params: *mut CUgraphNodeParamsHandle) => graph_updates::exec_node_set_params;
        cuGraphExecKernelNodeSetParams(exec: CUgraphExec, node: CUgraphNode, params: *const CUDA_KERNEL_NODE_PARAMS) => graph_accesses::exec_kernel_set;
        cuGraphExecKernelNodeSetParams_v2(exec: CUgraphExec, node: CUgraphNode, params: *const CUDA_KERNEL_NODE_PARAMS) => graph_accesses::exec_kernel_set;
        cuGraphExecMemcpyNodeSetParams(exec: CUgraphExec, node: CUgraphNode, params: *const CUDA_MEMCPY3D, ctx: CUcontext) => graph_accesses::exec_memcpy_set;
        cuGraphExecMemsetNodeSetParams(exec: CUgraphExec, node: CUgraphNode, params: *const CUDA_MEMSET_NODE_PARAMS, ctx: CUcontext) => graph_accesses::exec_memset_set;
        cuGraphNodeSetEnabled(exec: CUgraphExec, node: CUgraphNode, enabled: u32) => graph_accesses::set_enabled;
        cuGraphAddKernelNode(node: Out<CUgraphNode>, graph: CUgraph, deps: *const CUgraphNode, ndeps: usize, params: *const c_void) => graph_nodes::add_kernel_node;
        cuGraphAddKernelNode_v2(node: Out<CUgraphNode>, graph: CUgraph, deps: *const CUgraphNode, ndeps: usize, params: *const c_void) => graph_nodes::add_kernel_node;
        cuGraphAddMemcpyNode(node: Out<CUgraphNode>, graph: CUgraph, deps: *const CUgraphNode, ndeps: usize, params: *const c_void, ctx: CUcontext) => graph_nodes::add_copy_node;
        cuGraphAddMemsetNode(node: Out<CUgraphNode>, graph: CUgraph, deps: *const CUgraphNode, ndeps: usize, params: *const c_void, ctx: CUcontext) => graph_nodes::add_copy_node;
        cuGraphDestroy(graph: CUgraph) => graph_nodes::destroy;

        cuCtxCreate_v2(ctx: Out<CUcontext>, flags: u32, dev: CUdevice) => objects::ctx_create_v2;
        cuCtxCreate_v3(ctx: Out<CUcontext>, params: *mut c_void, nparams: i32, flags: u32, dev: CUdevice) => objects::ctx_create_v3;
        cuCtxCreate_v4(ctx: Out<CUcontext>, params: *mut c_void, flags: u32, dev: CUdevice) => objects::ctx_create_v4;
        cuCtxDestroy_v2(ctx: CUcontext) => objects::ctx_destroy;
        cuDevicePrimaryCtxRetain(ctx: Out<CUcontext>, dev: CUdevice) => objects::primary_retain;
        cuDevicePrimaryCtxRelease_v2(dev: CUdevice) => objects::primary_release;
        cuDevicePrimaryCtxRelease(dev: CUdevice) => objects::primary_release;
        cuDevicePrimaryCtxReset_v2(dev: CUdevice) => objects::primary_release;
        cuDevicePrimaryCtxReset(dev: CUdevice) => objects::primary_release;

        cuStreamCreate(stream: Out<CUstream>, flags: u32) => objects::stream_create;
        cuStreamCreateWithPriority(stream: Out<CUstream>, flags: u32, priority: i32) => objects::stream_create_prio;
        cuGreenCtxStreamCreate(stream: Out<CUstream>, green: CUgreenCtx, flags: u32, priority: i32) => objects::green_stream_create;
        cuStreamDestroy_v2(stream: CUstream) => objects::stream_destroy;
        cuEventCreate(event: Out<CUevent>, flags: u32) => objects::event_create;
        cuEventDestroy_v2(event: CUevent) => objects::event_destroy;
        cuStreamDestroy(stream: CUstream) => objects::stream_destroy;
        cuEventDestroy(event: CUevent) => objects::event_destroy;

        cuStreamSynchronize(stream: CUstream) => ordering::stream_sync;
        cuStreamSynchronize_ptsz(stream: CUstream) => ordering::stream_sync;
        cuStreamQuery(stream: CUstream) => ordering::stream_query;
        cuStreamQuery_ptsz(stream: CUstream) => ordering::stream_query;
        cuStreamWaitEvent(stream: CUstream, event: CUevent, flags: u32) => ordering::stream_wait;
        cuStreamWaitEvent_ptsz(stream: CUstream, event: CUevent, flags: u32) => ordering::stream_wait;
        cuEventRecord(event: CUevent, stream: CUstream) => ordering::event_record;
        cuEventRecord_ptsz(event: CUevent, stream: CUstream) => ordering::event_record;
        cuEventRecordWithFlags(event: CUevent, stream: CUstream, flags: u32) => ordering::event_record_flags;
        cuEventRecordWithFlags_ptsz(event: CUevent, stream: CUstream, flags: u32) => ordering::event_record_flags;
        cuEventSynchronize(event: CUevent) => ordering::event_sync;
        cuEventQuery(event: CUevent) => ordering::event_query;
        cuCtxSynchronize() => ordering::ctx_sync;
        cuCtxSynchronize_v2(ctx: CUcontext) => ordering::ctx_sync_v2;
        cuCtxRecordEvent(ctx: CUcontext, event: CUevent) => ordering::ctx_record_event;
        cuCtxWaitEvent(ctx: CUcontext, event: CUevent) => ordering::ctx_wait_event;
        cuGreenCtxRecordEvent(ctx: CUgreenCtx, event: CUevent) => ordering::ctx_record_event;
        cuGreenCtxWaitEvent(ctx: CUgreenCtx, event: CUevent) => ordering::ctx_wait_event;
        cuStreamAddCallback(stream: CUstream, callback: *mut c_void, user: *mut c_void, flags: u32) => @real ordering::host_fns::add_callback;
        cuStreamAddCallback_ptsz(stream: CUstream, callback: *mut c_void, user: *mut c_void, flags: u32) => @real ordering::host_fns::add_callback;
        cuLaunchHostFunc(stream: CUstream, func: *mut c_void, user: *mut c_void) => @real ordering::host_fns::launch_host_func;
        cuLaunchHostFunc_ptsz(stream: CUstream, func: *mut c_void, user: *mut c_void) => @real ordering::host_fns::launch_host_func;
        cuLaunchHostFunc_v2(stream: CUstream, func: *mut c_void, user: *mut c_void, sync_mode: u32) => @real ordering::host_fns::launch_host_func_v2;
        cuLaunchHostFunc_v2_ptsz(stream: CUstream, func: *mut c_void, user: *mut c_void, sync_mode: u32) => @real ordering::host_fns::launch_host_func_v2;
        cuStreamBeginCapture(stream: CUstream) => ordering::begin_capture_v1;
        cuStreamBeginCapture_ptsz(stream: CUstream) => ordering::begin_capture_v1;
        cuStreamBeginCapture_v2(stream: CUstream, mode: u32) => ordering::begin_capture;
        cuStreamBeginCapture_v2_ptsz(stream: CUstream, mode: u32) => ordering::begin_capture;
        cuStreamBeginCaptureToGraph(stream: CUstream, graph: CUgraph, deps: *const CUgraphNode, edges: *const c_void, ndeps: usize, mode: u32) => ordering::begin_capture_to_graph;
        cuStreamBeginCaptureToGraph_ptsz(stream: CUstream, graph: CUgraph, deps: *const CUgraphNode, edges: *const c_void, ndeps: usize, mode: u32) => ordering::begin_capture_to_graph;
        cuStreamEndCapture(stream: CUstream, graph: Out<CUgraph>) => ordering::end_capture;
        cuStreamEndCapture_ptsz(stream: CUstream, graph: Out<CUgraph>) => ordering::end_capture;
        cuStreamWaitValue32(stream: CUstream, addr: CUdeviceptr, value: u32, flags: u32) => ordering::memops::value32;
        cuStreamWaitValue32_ptsz(stream: CUstream, addr: CUdeviceptr, value: u32, flags: u32) => ordering::memops::value32;
        cuStreamWaitValue32_v2(stream: CUstream, addr: CUdeviceptr, value: u32, flags: u32) => ordering::memops::value32;
        cuStreamWaitValue32_v2_ptsz(stream: CUstream, addr: CUdeviceptr, value: u32, flags: u32) => ordering::memops::value32;
        cuStreamWaitValue64(stream: CUstream, addr: CUdeviceptr, value: u64, flags: u32) => ordering::memops::value64;
        cuStreamWaitValue64_ptsz(stream: CUstream, addr: CUdeviceptr, value: u64, flags: u32) => ordering::memops::value64;
        cuStreamWaitValue64_v2(stream: CUstream, addr: CUdeviceptr, value: u64, flags: u32) => ordering::memops::value64;
        cuStreamWaitValue64_v2_ptsz(stream: CUstream, addr: CUdeviceptr, value: u64, flags: u32) => ordering::memops::value64;
        cuStreamWriteValue32(stream: CUstream, addr: CUdeviceptr, value: u32, flags: u32) => ordering::memops::value32;
        cuStreamWriteValue32_ptsz(stream: CUstream, addr: CUdeviceptr, value: u32, flags: u32) => ordering::memops::value32;
        cuStreamWriteValue32_v2(stream: CUstream, addr: CUdeviceptr, value: u32, flags: u32) => ordering::memops::value32;
        cuStreamWriteValue32_v2_ptsz(stream: CUstream, addr: CUdeviceptr, value: u32, flags: u32) => ordering::memops::value32;
        cuStreamWriteValue64(stream: CUstream, addr: CUdeviceptr, value: u64, flags: u32) => ordering::memops::value64;
        cuStreamWriteValue64_ptsz(stream: CUstream, addr: CUdeviceptr, value: u64, flags: u32) => ordering::memops::value64;
        cuStreamWriteValue64_v2(stream: CUstream, addr: CUdeviceptr, value: u64, flags: u32) => ordering::memops::value64;
        cuStreamWriteValue64_v2_ptsz(stream: CUstream, addr: CUdeviceptr, value: u64, flags: u32) => ordering::memops::value64;
        cuStreamBatchMemOp(stream: CUstream, count: u32, params: *mut c_void, flags: u32) => ordering::memops::batch;
        cuStreamBatchMemOp_ptsz(stream: CUstream, count: u32, params: *mut c_void, flags: u32) => ordering::memops::batch;
        cuImportExternalSemaphore(sem: Out<CUexternalSemaphore>, desc: *const u8) => ordering::semaphores::import;
        cuDestroyExternalSemaphore(sem: CUexternalSemaphore) => ordering::semaphores::destroy;
        cuSignalExternalSemaphoresAsync(sems: *const CUexternalSemaphore, params: *const u8, count: u32, stream: CUstream) => ordering::semaphores::signal_or_wait;
        cuSignalExternalSemaphoresAsync_ptsz(sems: *const CUexternalSemaphore, params: *const u8, count: u32, stream: CUstream) => ordering::semaphores::signal_or_wait;
        cuWaitExternalSemaphoresAsync(sems: *const CUexternalSemaphore, params: *const u8, count: u32, stream: CUstream) => ordering::semaphores::signal_or_wait;
        cuWaitExternalSemaphoresAsync_ptsz(sems: *const CUexternalSemaphore, params: *const u8, count: u32, stream: CUstream) => ordering::semaphores::signal_or_wait;
        cuStreamBatchMemOp_v2(stream: CUstream, count: u32, params: *mut c_void, flags: u32) => ordering::memops::batch;
        cuStreamBatchMemOp_v2_ptsz(stream: CUstream, count: u32, params: *mut c_void, flags: u32) => ordering::memops::batch;

        cuMemcpy(dst: CUdeviceptr, src: CUdeviceptr, n: usize) => ordering::copy_sync;
        cuMemcpy_ptds(dst: CUdeviceptr, src: CUdeviceptr, n: usize) => ordering::copy_sync;
        cuMemcpyAsync(dst: CUdeviceptr, src: CUdeviceptr, n: usize, stream: CUstream) => ordering::copy_async;
        cuMemcpyAsync_ptsz(dst: CUdeviceptr, src: CUdeviceptr, n: usize, stream: CUstream) => ordering::copy_async;
        cuMemcpyHtoD_v2(dst: CUdeviceptr, src: *const c_void, n: usize) => ordering::copy_htod;
        cuMemcpyHtoD_v2_ptds(dst: CUdeviceptr, src: *const c_void, n: usize) => ordering::copy_htod;
        cuMemcpyDtoH_v2(dst: *mut c_void, src: CUdeviceptr, n: usize) => ordering::copy_dtoh;
        cuMemcpyDtoH_v2_ptds(dst: *mut c_void, src: CUdeviceptr, n: usize) => ordering::copy_dtoh;
        cuMemcpyDtoD_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize) => ordering::copy_sync;
        cuMemcpyDtoD_v2_ptds(dst: CUdeviceptr, src: CUdeviceptr, n: usize) => ordering::copy_sync;
        cuMemcpyHtoDAsync_v2(dst: CUdeviceptr, src: *const c_void, n: usize, stream: CUstream) => ordering::copy_htod_async;
        cuMemcpyHtoDAsync_v2_ptsz(dst: CUdeviceptr, src: *const c_void, n: usize, stream: CUstream) => ordering::copy_htod_async;
        cuMemcpyDtoHAsync_v2(dst: *mut c_void, src: CUdeviceptr, n: usize, stream: CUstream) => ordering::copy_dtoh_async;
        cuMemcpyDtoHAsync_v2_ptsz(dst: *mut c_void, src: CUdeviceptr, n: usize, stream: CUstream) => ordering::copy_dtoh_async;
        cuMemcpyDtoDAsync_v2(dst: CUdeviceptr, src: CUdeviceptr, n: usize, stream: CUstream) => ordering::copy_async;
        cuMemcpyDtoDAsync_v2_ptsz(dst: CUdeviceptr, src: CUdeviceptr, n: usize, stream: CUstream) => ordering::copy_async;
        cuMemcpyHtoA_v2(dst: CUarray, offset: usize, src: *const c_void, n: usize) => ordering::copy_htoa;
        cuMemcpyHtoA_v2_ptds(dst: CUarray, offset: usize, src: *const c_void, n: usize) => ordering::copy_htoa;
        cuMemcpyAtoH_v2(dst: *mut c_void, src: CUarray, offset: usize, n: usize) => ordering::copy_atoh;
        cuMemcpyAtoH_v2_ptds(dst: *mut c_void, src: CUarray, offset: usize, n: usize) => ordering::copy_atoh;
        cuMemcpyAtoA_v2(dst: CUarray, dst_offset: usize, src: CUarray, src_offset: usize, n: usize) => ordering::copy_atoa;
        cuMemcpyAtoA_v2_ptds(dst: CUarray, dst_offset: usize, src: CUarray, src_offset: usize, n: usize) => ordering::copy_atoa;
        cuMemcpyDtoA_v2(dst: CUarray, offset: usize, src: CUdeviceptr, n: usize) => ordering::copy_dtoa;
        cuMemcpyDtoA_v2_ptds(dst: CUarray, offset: usize, src: CUdeviceptr, n: usize) => ordering::copy_dtoa;
        cuMemcpyAtoD_v2(dst: CUdeviceptr, src: CUarray, offset: usize, n: usize) => ordering::copy_atod;
        cuMemcpyAtoD_v2_ptds(dst: CUdeviceptr, src: CUarray, offset: usize, n: usize) => ordering::copy_atod;
        cuMemcpyHtoAAsync_v2(dst: CUarray, offset: usize, src: *const c_void, n: usize, stream: CUstream) => ordering::copy_htoa_async;
        cuMemcpyHtoAAsync_v2_ptsz(dst: CUarray, offset: usize, src: *const c_void, n: usize, stream: CUstream) => ordering::copy_htoa_async;
        cuMemcpyAtoHAsync_v2(dst: *mut c_void, src: CUarray, offset: usize, n: usize, stream: CUstream) => ordering::copy_atoh_async;
        cuMemcpyAtoHAsync_v2_ptsz(dst: *mut c_void, src: CUarray, offset: usize, n: usize, stream: CUstream) => ordering::copy_atoh_async;
        cuMemPrefetchAsync(ptr: CUdeviceptr, n: usize, device: CUdevice, stream: CUstream) => ordering::ranges::prefetch;
        cuMemPrefetchAsync_ptsz(ptr: CUdeviceptr, n: usize, device: CUdevice, stream: CUstream) => ordering::ranges::prefetch;
        cuMemPrefetchAsync_v2(ptr: CUdeviceptr, n: usize, location: CUmemLocation, flags: u32, stream: CUstream) => ordering::ranges::prefetch_v2;
        cuMemPrefetchAsync_v2_ptsz(ptr: CUdeviceptr, n: usize, location: CUmemLocation, flags: u32, stream: CUstream) => ordering::ranges::prefetch_v2;
        cuMemPrefetchBatchAsync(ptrs: *mut CUdeviceptr, sizes: *mut usize, count: usize, locations: *mut CUmemLocation, idxs: *mut usize, n_locations: usize, flags: u64, stream: CUstream) => ordering::ranges::prefetch_batch;
        cuMemPrefetchBatchAsync_ptsz(ptrs: *mut CUdeviceptr, sizes: *mut usize, count: usize, locations: *mut CUmemLocation, idxs: *mut usize, n_locations: usize, flags: u64, stream: CUstream) => ordering::ranges::prefetch_batch;
        cuMemDiscardBatchAsync(ptrs: *mut CUdeviceptr, sizes: *mut usize, count: usize, flags: u64, stream: CUstream) => ordering::ranges::discard_batch;
        cuMemDiscardBatchAsync_ptsz(ptrs: *mut CUdeviceptr, sizes: *mut usize, count: usize, flags: u64, stream: CUstream) => ordering::ranges::discard_batch;
        cuMemDiscardAndPrefetchBatchAsync(ptrs: *mut CUdeviceptr, sizes: *mut usize, count: usize, locations: *mut CUmemLocation, idxs: *mut usize, n_locations: usize, flags: u64, stream: CUstream) => ordering::ranges::prefetch_batch;
        cuMemDiscardAndPrefetchBatchAsync_ptsz(ptrs: *mut CUdeviceptr, sizes: *mut usize, count: usize, locations: *mut CUmemLocation, idxs: *mut usize, n_locations: usize, flags: u64, stream: CUstream) => ordering::ranges::prefetch_batch;
        cuMemsetD8_v2(dst: CUdeviceptr, value: u8, n: usize) => ordering::memset;
        cuMemsetD8_v2_ptds(dst: CUdeviceptr, value: u8, n: usize) => ordering::memset;
        cuMemsetD16_v2(dst: CUdeviceptr, value: u16, n: usize) => ordering::memset;
        cuMemsetD16_v2_ptds(dst: CUdeviceptr, value: u16, n: usize) => ordering::memset;
        cuMemsetD32_v2(dst: CUdeviceptr, value: u32, n: usize) => ordering::memset;
        cuMemsetD32_v2_ptds(dst: CUdeviceptr, value: u32, n: usize) => ordering::memset;
        cuMemsetD8Async(dst: CUdeviceptr, value: u8, n: usize, stream: CUstream) => ordering::memset_async;
        cuMemsetD8Async_ptsz(dst: CUdeviceptr, value: u8, n: usize, stream: CUstream) => ordering::memset_async;
        cuMemsetD16Async(dst: CUdeviceptr, value: u16, n: usize, stream: CUstream) => ordering::memset_async;
        cuMemsetD16Async_ptsz(dst: CUdeviceptr, value: u16, n: usize, stream: CUstream) => ordering::memset_async;
        cuMemsetD32Async(dst: CUdeviceptr, value: u32, n: usize, stream: CUstream) => ordering::memset_async;
        cuMemsetD32Async_ptsz(dst: CUdeviceptr, value: u32, n: usize, stream: CUstream) => ordering::memset_async;
        cuLaunchKernel(f: *mut c_void, gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32, shared: u32, stream: CUstream, params: Pptr, extra: Pptr) => ordering::launch;
        cuLaunchKernel_ptsz(f: *mut c_void, gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32, shared: u32, stream: CUstream, params: Pptr, extra: Pptr) => ordering::launch;
        cuLaunchCooperativeKernel(f: *mut c_void, gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32, shared: u32, stream: CUstream, params: Pptr) => ordering::launch_cooperative;
        cuLaunchCooperativeKernel_ptsz(f: *mut c_void, gx: u32, gy: u32, gz: u32, bx: u32, by: u32, bz: u32, shared: u32, stream: CUstream, params: Pptr) => ordering::launch_cooperative;
        cuLaunchKernelEx(config: *const CUlaunchConfig, f: *mut c_void, params: Pptr, extra: Pptr) => ordering::launch_ex;
        cuLaunchKernelEx_ptsz(config: *const CUlaunchConfig, f: *mut c_void, params: Pptr, extra: Pptr) => ordering::launch_ex;
        cuGraphLaunch(exec: *mut c_void, stream: CUstream) => ordering::graph_launch;
        cuGraphLaunch_ptsz(exec: *mut c_void, stream: CUstream) => ordering::graph_launch;
        cuMemcpy2D_v2(p: *const CUDA_MEMCPY2D) => ordering::copy_descriptor;
        cuMemcpy2D_v2_ptds(p: *const CUDA_MEMCPY2D) => ordering::copy_descriptor;
        cuMemcpy2DUnaligned_v2(p: *const CUDA_MEMCPY2D) => ordering::copy_descriptor;
        cuMemcpy2DUnaligned_v2_ptds(p: *const CUDA_MEMCPY2D) => ordering::copy_descriptor;
        cuMemcpy2DAsync_v2(p: *const CUDA_MEMCPY2D, stream: CUstream) => ordering::copy_descriptor_async;
        cuMemcpy2DAsync_v2_ptsz(p: *const CUDA_MEMCPY2D, stream: CUstream) => ordering::copy_descriptor_async;
        cuMemcpy3D_v2(p: *const CUDA_MEMCPY3D) => ordering::copy_descriptor;
        cuMemcpy3D_v2_ptds(p: *const CUDA_MEMCPY3D) => ordering::copy_descriptor;
        cuMemcpy3DAsync_v2(p: *const CUDA_MEMCPY3D, stream: CUstream) => ordering::copy_descriptor_async;
        cuMemcpy3DAsync_v2_ptsz(p: *const CUDA_MEMCPY3D, stream: CUstream) => ordering::copy_descriptor_async;
        cuMemcpyPeer(dst: CUdeviceptr, dst_ctx: CUcontext, src: CUdeviceptr, src_ctx: CUcontext, n: usize) => ordering::copy_peer;
        cuMemcpyPeer_ptds(dst: CUdeviceptr, dst_ctx: CUcontext, src: CUdeviceptr, src_ctx: CUcontext, n: usize) => ordering::copy_peer;
        cuMemcpyPeerAsync(dst: CUdeviceptr, dst_ctx: CUcontext, src: CUdeviceptr, src_ctx: CUcontext, n: usize, stream: CUstream) => ordering::copy_peer_async;
        cuMemcpyPeerAsync_ptsz(dst: CUdeviceptr, dst_ctx: CUcontext, src: CUdeviceptr, src_ctx: CUcontext, n: usize, stream: CUstream) => ordering::copy_peer_async;
        cuMemcpy3DPeer(p: *const CUDA_MEMCPY3D_PEER) => ordering::copy_descriptor;
        cuMemcpy3DPeer_ptds(p: *const CUDA_MEMCPY3D_PEER) => ordering::copy_descriptor;
        cuMemcpy3DPeerAsync(p: *const CUDA_MEMCPY3D_PEER, stream: CUstream) => ordering::copy_descriptor_async;
        cuMemcpy3DPeerAsync_ptsz(p: *const CUDA_MEMCPY3D_PEER, stream: CUstream) => ordering::copy_descriptor_async;
        cuMemsetD2D8_v2(dst: CUdeviceptr, pitch: usize, value: u8, width: usize, height: usize) => ordering::memset_2d;
        cuMemsetD2D8_v2_ptds(dst: CUdeviceptr, pitch: usize, value: u8, width: usize, height: usize) => ordering::memset_2d;
        cuMemsetD2D16_v2(dst: CUdeviceptr, pitch: usize, value: u16, width: usize, height: usize) => ordering::memset_2d;
        cuMemsetD2D16_v2_ptds(dst: CUdeviceptr, pitch: usize, value: u16, width: usize, height: usize) => ordering::memset_2d;
        cuMemsetD2D32_v2(dst: CUdeviceptr, pitch: usize, value: u32, width: usize, height: usize) => ordering::memset_2d;
        cuMemsetD2D32_v2_ptds(dst: CUdeviceptr, pitch: usize, value: u32, width: usize, height: usize) => ordering::memset_2d;
        cuMemsetD2D8Async(dst: CUdeviceptr, pitch: usize, value: u8, width: usize, height: usize, stream: CUstream) => ordering::memset_2d_async;
        cuMemsetD2D8Async_ptsz(dst: CUdeviceptr, pitch: usize, value: u8, width: usize, height: usize, stream: CUstream) => ordering::memset_2d_async;
        cuMemsetD2D16Async(dst: CUdeviceptr, pitch: usize, value: u16, width: usize, height: usize, stream: CUstream) => ordering::memset_2d_async;
        cuMemsetD2D16Async_ptsz(dst: CUdeviceptr, pitch: usize, value: u16, width: usize, height: usize, stream: CUstream) => ordering::memset_2d_async;
        cuMemsetD2D32Async(dst: CUdeviceptr, pitch: usize, value: u32, width: usize, height: usize, stream: CUstream) => ordering::memset_2d_async;
        cuMemsetD2D32Async_ptsz(dst: CUdeviceptr, pitch: usize, value: u32, width: usize, height: usize, stream: CUstream) => ordering::memset_2d_async;
        cuMemcpyBatchAsync(dsts: *const CUdeviceptr, srcs: *const CUdeviceptr, sizes: *const usize, count: usize, attrs: *const c_void, attr_idxs: *const usize, num_attrs: usize, fail_idx: *mut usize, stream: CUstream) => ordering::copy_batch;
        cuMemcpyBatchAsync_ptsz(dsts: *const CUdeviceptr, srcs: *const CUdeviceptr, sizes: *const usize, count: usize, attrs: *const c_void, attr_idxs: *const usize, num_attrs: usize, fail_idx: *mut usize, stream: CUstream) => ordering::copy_batch;
        cuMemcpyBatchAsync_v2(dsts: *const CUdeviceptr, srcs: *const CUdeviceptr, sizes: *const usize, count: usize, attrs: *const c_void, attr_idxs: *const usize, num_attrs: usize, stream: CUstream) => ordering::copy_batch_v2;
        cuMemcpyBatchAsync_v2_ptsz(dsts: *const CUdeviceptr, srcs: *const CUdeviceptr, sizes: *const usize, count: usize, attrs: *const c_void, attr_idxs: *const usize, num_attrs: usize, stream: CUstream) => ordering::copy_batch_v2;
        cuMemcpy3DBatchAsync(count: usize, ops: *const CUDA_MEMCPY3D_BATCH_OP, fail_idx: *mut usize, flags: u64, stream: CUstream) => ordering::copy_3d_batch;
        cuMemcpy3DBatchAsync_ptsz(count: usize, ops: *const CUDA_MEMCPY3D_BATCH_OP, fail_idx: *mut usize, flags: u64, stream: CUstream) => ordering::copy_3d_batch;
        cuMemcpy3DBatchAsync_v2(count: usize, ops: *const CUDA_MEMCPY3D_BATCH_OP, flags: u64, stream: CUstream) => ordering::copy_3d_batch_v2;
        cuMemcpy3DBatchAsync_v2_ptsz(count: usize, ops: *const CUDA_MEMCPY3D_BATCH_OP, flags: u64, stream: CUstream) => ordering::copy_3d_batch_v2;
        cuMemcpyWithAttributesAsync(dst: CUdeviceptr, src: CUdeviceptr, n: usize, attr: *const c_void, stream: CUstream) => ordering::copy_with_attributes;
        cuMemcpyWithAttributesAsync_ptsz(dst: CUdeviceptr, src: CUdeviceptr, n: usize, attr: *const c_void, stream: CUstream) => ordering::copy_with_attributes;
        cuMemcpy3DWithAttributesAsync(op: *const CUDA_MEMCPY3D_BATCH_OP, flags: u64, stream: CUstream) => ordering::copy_3d_with_attributes;
        cuMemcpy3DWithAttributesAsync_ptsz(op: *const CUDA_MEMCPY3D_BATCH_OP, flags: u64, stream: CUstream) => ordering::copy_3d_with_attributes;

        cuGetProcAddress(symbol: *const c_char, pfn: Pptr, version: i32, flags: u64) => resolver::get_proc_address;
        cuGetProcAddress_v2(symbol: *const c_char, pfn: Pptr, version: i32, flags: u64, status: *mut i32) => resolver::get_proc_address_v2;
        cuGetProcAddress_v2_ptsz(symbol: *const c_char, pfn: Pptr, version: i32, flags: u64, status: *mut i32) => resolver::get_proc_address_v2;
    }
    runtime {
        cudaMalloc(p: Pptr, size: usize) => runtime::tag2;
        cudaFree(p: *mut c_void) => runtime::tag1;
        cudaMallocAsync(p: Pptr, size: usize, stream: CUstream) => runtime::tag3;
        cudaFreeAsync(p: *mut c_void, stream: CUstream) => runtime::tag2;
        cudaMallocManaged(p: Pptr, size: usize, flags: u32) => runtime::tag3;
        cudaMallocHost(p: Pptr, size: usize) => runtime::tag2;
        cudaHostAlloc(p: Pptr, size: usize, flags: u32) => runtime::tag3;
        cudaFreeHost(p: *mut c_void) => runtime::tag1;
        cudaMallocPitch(p: Pptr, pitch: *mut usize, width: usize, height: usize) => runtime::tag4;
        cudaMallocFromPoolAsync(p: Pptr, size: usize, pool: CUmemoryPool, stream: CUstream) => runtime::tag4;
        cudaMemPoolImportPointer(p: Pptr, pool: CUmemoryPool, data: *mut c_void) => runtime::tag3;
        cudaMemPoolCreate(pool: *mut CUmemoryPool, props: *const CUmemPoolPropsHead) => runtime::tag2;
        cudaMemPoolImportFromShareableHandle(pool: *mut CUmemoryPool, handle: *mut c_void, kind: u32, flags: u32) => runtime::tag4;
        cudaMemPoolDestroy(pool: CUmemoryPool) => runtime::tag1;
        cudaIpcOpenMemHandle(p: Pptr, handle: CUipcMemHandle, flags: u32) => runtime::tag3;
        cudaIpcCloseMemHandle(p: *mut c_void) => runtime::tag1;
        cudaDeviceReset() => runtime::tag0;
        cudaMallocAsync_ptsz(p: Pptr, size: usize, stream: CUstream) => runtime::tag3;
        cudaFreeAsync_ptsz(p: *mut c_void, stream: CUstream) => runtime::tag2;
        cudaMallocFromPoolAsync_ptsz(p: Pptr, size: usize, pool: CUmemoryPool, stream: CUstream) => runtime::tag4;
        cudaMallocArray(array: *mut CUarray, desc: *const c_void, width: usize, height: usize, flags: u32) => runtime::tag5;
        cudaMalloc3DArray(array: *mut CUarray, desc: *const c_void, extent: cudaExtent, flags: u32) => runtime::tag4;
        cudaMallocMipmappedArray(array: *mut CUmipmappedArray, desc: *const c_void, extent: cudaExtent, levels: u32, flags: u32) => runtime::tag5;
        cudaMalloc3D(pitched: *mut c_void, extent: cudaExtent) => runtime::tag2;
        cudaFreeArray(array: CUarray) => runtime::tag1;
        cudaFreeMipmappedArray(array: CUmipmappedArray) => runtime::tag1;
        cudaHostRegister(p: *mut c_void, size: usize, flags: u32) => runtime::tag3;
        cudaHostUnregister(p: *mut c_void) => runtime::tag1;
        cudaGraphAddMemAllocNode(node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, ndeps: usize, params: *mut c_void) => runtime::tag5;
        // Five arguments in CUDA 12.2 to 12.9 (`ndeps`, `params`), six in CUDA 13 (an edge
        // data array before them): all six registers are passed on, and the runtime reads
        // those its version has (x86-64 and aarch64 pass the first six integer arguments in
        // registers, so the sixth is ignored, never read from the caller's stack).
        cudaGraphAddNode(node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, a3: usize, a4: usize, a5: usize) => runtime::tag6;
        cudaGraphAddNode_v2(node: *mut CUgraphNode, graph: CUgraph, deps: *const CUgraphNode, edges: *const c_void, ndeps: usize, params: *mut c_void) => runtime::tag6;
        // Five arguments before CUDA 12 (error node, log buffer and its size), three since
        // (flags): passed on as five registers, as above.
        cudaGraphInstantiate(exec: *mut CUgraphExec, graph: CUgraph, a2: usize, a3: usize, a4: usize) => runtime::tag5;
        cudaGraphInstantiateWithFlags(exec: *mut CUgraphExec, graph: CUgraph, flags: u64) => runtime::tag3;
        cudaGraphInstantiateWithParams(exec: *mut CUgraphExec, graph: CUgraph, params: *mut c_void) => runtime::tag3;
        cudaGraphInstantiateWithParams_ptsz(exec: *mut CUgraphExec, graph: CUgraph, params: *mut c_void) => runtime::tag3;
        cudaGetDriverEntryPoint(symbol: *const c_char, fp: Pptr, flags: u64, status: *mut i32) => runtime::entry_point;
        cudaGetDriverEntryPointByVersion(symbol: *const c_char, fp: Pptr, version: u32, flags: u64, status: *mut i32) => runtime::entry_point_by_version;
    }
}

// The control API of `shim/include/gpuleak.h`: functions a program calls on gpuleak itself
// (through weak references, so that it also runs without the shim). Each hands the table its
// rows first: a control call may start tracing before any CUDA call, and tracing looks every
// driver row up as it starts.

/// Hands the table its rows (see [`table::install`]).
#[inline]
fn rows_known() {
    table::install(&HOOKS);
}

/// `void gpuleak_mark(const char *name, uint64_t value)`: a Mark record (a step number, a
/// phase change) in the trace.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpuleak_mark(name: *const c_char, value: u64) {
    rows_known();
    // SAFETY: the caller's contract.
    unsafe { crate::ops::control::mark(name, value) }
}

/// `void gpuleak_region_begin(const char *name)`: a Region record that opens `name`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpuleak_region_begin(name: *const c_char) {
    rows_known();
    // SAFETY: the caller's contract.
    unsafe { crate::ops::control::region(name, true) }
}

/// `void gpuleak_region_end(const char *name)`: a Region record that closes `name`.
///
/// # Safety
/// `name` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpuleak_region_end(name: *const c_char) {
    rows_known();
    // SAFETY: the caller's contract.
    unsafe { crate::ops::control::region(name, false) }
}

/// `uint64_t gpuleak_live_bytes(int device)`: device memory live on `device` (every device
/// if negative), as counted by the shim.
#[unsafe(no_mangle)]
pub extern "C" fn gpuleak_live_bytes(device: std::ffi::c_int) -> u64 {
    rows_known();
    crate::ops::control::live_bytes(device)
}

/// `void gpuleak_window_begin(uint64_t watch_bytes)`: opens a window; allocations made from
/// now on are counted in it (`gpuleak_window_stats`). With `watch_bytes` non-zero, the first
/// allocation that takes the window's live bytes past it writes a Snapshot record.
#[unsafe(no_mangle)]
pub extern "C" fn gpuleak_window_begin(watch_bytes: u64) {
    rows_known();
    crate::ops::control::window_begin(watch_bytes);
}

/// `int gpuleak_window_stats(uint64_t *out, int n)`: the open window's counters (allocations,
/// bytes allocated, bytes allocated and still live, the highest of those, the watch
/// snapshot's id), up to `n` of them; how many were written.
///
/// # Safety
/// `out` is NULL or valid for `n` writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpuleak_window_stats(out: *mut u64, n: std::ffi::c_int) -> std::ffi::c_int {
    rows_known();
    // SAFETY: the caller's contract.
    unsafe { crate::ops::control::window_stats(out, n) }
}

/// `int gpuleak_workspaces(uint64_t *out, int n)`: up to `n` (address, size) pairs of the
/// device memory handed to cuBLAS and cuBLASLt as workspaces so far (records of kind 79),
/// written to `out` (`2 * n` words); how many pairs were written.
///
/// # Safety
/// `out` is NULL or valid for `2 * n` writes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpuleak_workspaces(out: *mut u64, n: std::ffi::c_int) -> std::ffi::c_int {
    // SAFETY: the caller's contract.
    unsafe { libraries::workspaces(out, n) }
}

/// `uint64_t gpuleak_snapshot(const char *reason)`: a Snapshot record; its id (from 1), or
/// 0 when nothing is traced.
///
/// # Safety
/// `reason` is NULL or a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpuleak_snapshot(reason: *const c_char) -> u64 {
    rows_known();
    // SAFETY: the caller's contract.
    unsafe { crate::ops::control::snapshot(reason) }
}

/// `uint64_t gpuleak_snapshot_generation(void)`: the id of the latest Snapshot record
/// written (0: none yet), whoever asked for it (the signal, the period, an out-of-memory
/// failure, the control API). One atomic load: the Python package polls it to write the
/// frameworks' state for the snapshots the shim takes on its own.
#[unsafe(no_mangle)]
pub extern "C" fn gpuleak_snapshot_generation() -> u64 {
    rows_known();
    crate::ops::control::snapshot_generation()
}

/// `const char *gpuleak_trace_path(void)`: the path of this process's trace file (valid until
/// the process exits), or NULL when nothing is traced.
#[unsafe(no_mangle)]
pub extern "C" fn gpuleak_trace_path() -> *const c_char {
    rows_known();
    crate::ops::control::trace_path()
}

/// `int gpuleak_framework_record(unsigned kind, const void *data, size_t len)`: a record of
/// kind 70 to 76 (a framework's allocator state) whose fields the caller encoded; 0 when
/// written, -1 when nothing is traced, -2 when refused.
///
/// # Safety
/// `data` is NULL or valid for `len` reads.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn gpuleak_framework_record(kind: u32, data: *const u8, len: usize) -> std::ffi::c_int {
    rows_known();
    // SAFETY: the caller's contract.
    unsafe { crate::ops::control::framework_record(kind, data, len) }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The API named by a hook row.
    fn api_of(hook: &Hook) -> Api {
        let name = hook.name.to_str().unwrap();
        Api::from_name(name).unwrap_or_else(|| panic!("{name} is not in the API list"))
    }

    #[test]
    fn every_hook_is_an_api_of_its_library_and_every_api_is_hooked_once() {
        let mut hooked = Vec::new();
        for hook in &HOOKS {
            let api = api_of(hook);
            let library = match hook.lib {
                Lib::Driver => Library::Driver,
                Lib::Runtime => Library::Runtime,
            };
            assert_eq!(api.library(), Some(library), "{api}");
            hooked.push(api);
        }
        hooked.sort();
        let before = hooked.len();
        hooked.dedup();
        assert_eq!(hooked.len(), before, "an API hooked twice");
        for (api, name) in Api::ALL {
            assert!(
                hooked.binary_search(api).is_ok(),
                "{name} is in the API list but not hooked"
            );
        }
    }

    #[test]
    fn every_per_thread_twin_is_hooked_with_its_base() {
        let hooked: Vec<Api> = HOOKS.iter().map(api_of).collect();
        for (api, name) in Api::ALL.iter().filter(|(a, _)| a.per_thread()) {
            assert_eq!(
                hooked.contains(api),
                hooked.contains(&api.base()),
                "{name} and {} are hooked together or not at all",
                api.base()
            );
        }
    }
}
