//! The few CUDA declarations the shim needs, written from the public Driver API reference.

#![allow(non_camel_case_types)]

use std::ffi::c_void;

/// `CUresult` (and `cudaError_t`, also a 32-bit enum).
pub type CUresult = u32;
/// `CUDA_SUCCESS`.
pub const CUDA_SUCCESS: CUresult = 0;
/// `CUDA_ERROR_NOT_INITIALIZED`, returned when the real function cannot be found.
pub const CUDA_ERROR_NOT_INITIALIZED: CUresult = 3;
/// A device address.
pub type CUdeviceptr = u64;
/// Opaque handles.
pub type CUstream = *mut c_void;
/// A context handle.
pub type CUcontext = *mut c_void;
/// An event handle.
pub type CUevent = *mut c_void;
/// A memory pool handle.
pub type CUmemoryPool = *mut c_void;
/// An array handle.
pub type CUarray = *mut c_void;
/// A physical allocation handle.
pub type CUmemGenericAllocationHandle = u64;
/// A device ordinal.
pub type CUdevice = i32;

/// `CUDA_ARRAY_DESCRIPTOR`.
#[repr(C)]
pub struct CUDA_ARRAY_DESCRIPTOR {
    /// Width in elements.
    pub width: usize,
    /// Height in elements.
    pub height: usize,
    /// `CUarray_format`.
    pub format: u32,
    /// Channels per element.
    pub num_channels: u32,
}

/// `CUDA_ARRAY3D_DESCRIPTOR`.
#[repr(C)]
pub struct CUDA_ARRAY3D_DESCRIPTOR {
    /// Width in elements.
    pub width: usize,
    /// Height in elements.
    pub height: usize,
    /// Depth in elements.
    pub depth: usize,
    /// `CUarray_format`.
    pub format: u32,
    /// Channels per element.
    pub num_channels: u32,
    /// Flags.
    pub flags: u32,
}

/// `CUipcMemHandle`: 64 opaque bytes, passed by value.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUipcMemHandle {
    /// Opaque.
    pub reserved: [u8; 64],
}

/// Bytes per channel of a `CUarray_format`, or `None` for formats this shim does not know.
pub fn array_format_bytes(format: u32) -> Option<u64> {
    Some(match format {
        0x01 | 0x08 => 1,        // UNSIGNED_INT8, SIGNED_INT8
        0x02 | 0x09 | 0x10 => 2, // UNSIGNED_INT16, SIGNED_INT16, HALF
        0x03 | 0x0a | 0x20 => 4, // UNSIGNED_INT32, SIGNED_INT32, FLOAT
        _ => return None,
    })
}

/// Bytes an array of these dimensions needs (at least one row and one layer).
pub fn array_bytes(width: usize, height: usize, depth: usize, format: u32, channels: u32) -> u64 {
    let elem = array_format_bytes(format).unwrap_or(1) * u64::from(channels.max(1));
    (width as u64)
        .saturating_mul(height.max(1) as u64)
        .saturating_mul(depth.max(1) as u64)
        .saturating_mul(elem)
}
