//! The C ABI of the shim, in one place: every intercepted entry point, its handler, and the
//! generated table behind doors 1 to 3 (exported symbols, `dlsym`, the resolvers).
//!
//! Each generated export is short: find the real function, call the handler with it. Each
//! handler takes the guard, calls the real function with the program's arguments, records,
//! and returns the real result unchanged.

#![allow(non_snake_case)]

pub mod memory;
pub mod objects;
pub mod resolver;
pub mod runtime;

use std::ffi::c_void;

use gpuleak_format::Api;

use crate::cuda::*;
use crate::hooks::{Hook, Lib};

macro_rules! cstr {
    ($name:ident) => {
        match std::ffi::CStr::from_bytes_with_nul(concat!(stringify!($name), "\0").as_bytes()) {
            Ok(c) => c,
            Err(_) => panic!("hook names have no NUL"),
        }
    };
}

macro_rules! hooks {
    (
        driver { $( $d:ident ( $($da:ident : $dt:ty),* $(,)? ) => $dh:path; )* }
        runtime { $( $r:ident ( $($ra:ident : $rt:ty),* $(,)? ) => $rh:path; )* }
    ) => {
        #[allow(non_camel_case_types, clippy::upper_case_acronyms)]
        #[repr(usize)]
        enum Id { $($d,)* $($r,)* }

        const COUNT: usize = [$(Id::$d,)* $(Id::$r,)*].len();

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
                let addr = HOOKS[Id::$d as usize].real_or_lookup();
                if addr == 0 {
                    return CUDA_ERROR_NOT_INITIALIZED;
                }
                // SAFETY: the row's real address is the driver's own function of exactly
                // this name, whose public signature is the one declared above.
                let real = unsafe { std::mem::transmute::<usize, Real>(addr) };
                // SAFETY: the program's own arguments, passed through unchanged.
                unsafe { $dh(Api::$d, real, $($da),*) }
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
                let addr = HOOKS[Id::$r as usize].real_or_lookup();
                if addr == 0 {
                    return runtime::ERROR_INITIALIZATION;
                }
                // SAFETY: the row's real address is the runtime's own function of exactly
                // this name, whose public signature is the one declared above.
                let real = unsafe { std::mem::transmute::<usize, Real>(addr) };
                // SAFETY: the program's own arguments, passed through unchanged.
                unsafe { $rh(Api::$r, real, $($ra),*) }
            }
        )*
    };
}

type Dptr = *mut CUdeviceptr;
type Pptr = *mut *mut c_void;

hooks! {
    driver {
        cuMemAlloc_v2(dptr: Dptr, size: usize) => memory::alloc;
        cuMemAllocPitch_v2(dptr: Dptr, pitch: *mut usize, width: usize, height: usize, elem: u32) => memory::alloc_pitch;
        cuMemAllocManaged(dptr: Dptr, size: usize, flags: u32) => memory::alloc_flags;
        cuMemFree_v2(dptr: CUdeviceptr) => memory::free;
        cuMemAllocHost_v2(pp: Pptr, size: usize) => memory::alloc_host;
        cuMemHostAlloc(pp: Pptr, size: usize, flags: u32) => memory::host_alloc;
        cuMemFreeHost(p: *mut c_void) => memory::free_host;
        cuMemHostRegister_v2(p: *mut c_void, size: usize, flags: u32) => memory::host_register;
        cuMemHostUnregister(p: *mut c_void) => memory::free_host;
        cuMemAllocAsync(dptr: Dptr, size: usize, stream: CUstream) => memory::alloc_async;
        cuMemAllocAsync_ptsz(dptr: Dptr, size: usize, stream: CUstream) => memory::alloc_async;
        cuMemAllocFromPoolAsync(dptr: Dptr, size: usize, pool: CUmemoryPool, stream: CUstream) => memory::alloc_pool;
        cuMemAllocFromPoolAsync_ptsz(dptr: Dptr, size: usize, pool: CUmemoryPool, stream: CUstream) => memory::alloc_pool;
        cuMemFreeAsync(dptr: CUdeviceptr, stream: CUstream) => memory::free_async;
        cuMemFreeAsync_ptsz(dptr: CUdeviceptr, stream: CUstream) => memory::free_async;
        cuMemAddressReserve(ptr: Dptr, size: usize, align: usize, addr: CUdeviceptr, flags: u64) => memory::address_reserve;
        cuMemAddressFree(ptr: CUdeviceptr, size: usize) => memory::address_free;
        cuMemCreate(handle: *mut CUmemGenericAllocationHandle, size: usize, prop: *const c_void, flags: u64) => memory::create;
        cuMemRelease(handle: CUmemGenericAllocationHandle) => memory::release;
        cuMemMap(ptr: CUdeviceptr, size: usize, offset: usize, handle: CUmemGenericAllocationHandle, flags: u64) => memory::map;
        cuMemUnmap(ptr: CUdeviceptr, size: usize) => memory::unmap;
        cuArrayCreate_v2(array: *mut CUarray, desc: *const CUDA_ARRAY_DESCRIPTOR) => memory::array_create;
        cuArray3DCreate_v2(array: *mut CUarray, desc: *const CUDA_ARRAY3D_DESCRIPTOR) => memory::array3d_create;
        cuArrayDestroy(array: CUarray) => memory::array_destroy;
        cuIpcOpenMemHandle_v2(dptr: Dptr, handle: CUipcMemHandle, flags: u32) => memory::ipc_open;
        cuIpcOpenMemHandle(dptr: Dptr, handle: CUipcMemHandle, flags: u32) => memory::ipc_open;
        cuIpcCloseMemHandle(dptr: CUdeviceptr) => memory::ipc_close;

        cuCtxCreate_v2(ctx: *mut CUcontext, flags: u32, dev: CUdevice) => objects::ctx_create_v2;
        cuCtxCreate_v3(ctx: *mut CUcontext, params: *mut c_void, nparams: i32, flags: u32, dev: CUdevice) => objects::ctx_create_v3;
        cuCtxCreate_v4(ctx: *mut CUcontext, params: *mut c_void, flags: u32, dev: CUdevice) => objects::ctx_create_v4;
        cuCtxDestroy_v2(ctx: CUcontext) => objects::ctx_destroy;
        cuDevicePrimaryCtxRetain(ctx: *mut CUcontext, dev: CUdevice) => objects::primary_retain;
        cuDevicePrimaryCtxRelease_v2(dev: CUdevice) => objects::primary_release;
        cuDevicePrimaryCtxRelease(dev: CUdevice) => objects::primary_release;
        cuDevicePrimaryCtxReset_v2(dev: CUdevice) => objects::primary_release;
        cuDevicePrimaryCtxReset(dev: CUdevice) => objects::primary_release;

        cuStreamCreate(stream: *mut CUstream, flags: u32) => objects::stream_create;
        cuStreamCreateWithPriority(stream: *mut CUstream, flags: u32, priority: i32) => objects::stream_create_prio;
        cuStreamDestroy_v2(stream: CUstream) => objects::stream_destroy;
        cuEventCreate(event: *mut CUevent, flags: u32) => objects::event_create;
        cuEventDestroy_v2(event: CUevent) => objects::event_destroy;

        cuGetProcAddress(symbol: *const i8, pfn: Pptr, version: i32, flags: u64) => resolver::get_proc_address;
        cuGetProcAddress_v2(symbol: *const i8, pfn: Pptr, version: i32, flags: u64, status: *mut i32) => resolver::get_proc_address_v2;
        cuGetProcAddress_v2_ptsz(symbol: *const i8, pfn: Pptr, version: i32, flags: u64, status: *mut i32) => resolver::get_proc_address_v2;
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
        cudaDeviceReset() => runtime::tag0;
        cudaGetDriverEntryPoint(symbol: *const i8, fp: Pptr, flags: u64, status: *mut i32) => runtime::entry_point;
        cudaGetDriverEntryPointByVersion(symbol: *const i8, fp: Pptr, version: u32, flags: u64, status: *mut i32) => runtime::entry_point_by_version;
    }
}
