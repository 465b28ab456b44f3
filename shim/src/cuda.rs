//! The few CUDA declarations the shim needs, written from the public Driver API reference.

#![allow(non_camel_case_types)]

use std::ffi::c_void;

/// `CUresult` (and `cudaError_t`, also a 32-bit enum).
pub type CUresult = u32;
/// `CUDA_SUCCESS`.
pub const CUDA_SUCCESS: CUresult = 0;
/// `CUDA_ERROR_NOT_INITIALIZED`, returned when the real function cannot be found.
pub const CUDA_ERROR_NOT_INITIALIZED: CUresult = 3;
/// `CUDA_ERROR_STREAM_CAPTURE_INVALIDATED`: `cuStreamEndCapture` ended a capture that an
/// earlier error invalidated.
pub const CUDA_ERROR_STREAM_CAPTURE_INVALIDATED: CUresult = 901;
/// An out-parameter of a driver function: the program's pointer, passed on unchanged (the
/// same ABI as `*mut T`), that the driver fills in when it succeeds.
///
/// Only the signatures of the hook table name this type, so an `Out` is always an argument
/// the program passed to the driver function of that row; nothing in the shim makes one.
#[repr(transparent)]
pub struct Out<T>(*mut T);

impl<T> Clone for Out<T> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<T> Copy for Out<T> {}

impl<T: Copy> Out<T> {
    /// What the driver wrote, when `result` (the driver's answer to the call this parameter
    /// was passed to) is success and the program passed a place; otherwise `None`.
    #[inline(always)]
    pub fn after(self, result: CUresult) -> Option<T> {
        if result == CUDA_SUCCESS && !self.0.is_null() {
            // SAFETY: the pointer is the program's out-parameter (only the table's signatures
            // make an `Out`), not NULL, of a driver call that succeeded: every handler passes
            // the answer of the real call this parameter went to (`after(r)`, `r = real()`).
            // The driver's contract is that it then wrote a `T` there (any bits are a valid
            // `T` here: integers, handles, pointers), and the program's that the place is
            // valid and aligned; nothing writes it again before the handler returns.
            Some(unsafe { self.0.read() })
        } else {
            None
        }
    }
}

/// A device address.
pub type CUdeviceptr = u64;
/// Opaque handles.
pub type CUstream = *mut c_void;
/// `CU_STREAM_PER_THREAD`: the per-thread default stream, named by its own handle.
pub const CU_STREAM_PER_THREAD: CUstream = 2 as CUstream;
/// A context handle.
pub type CUcontext = *mut c_void;
/// `CUgreenCtx`.
pub type CUgreenCtx = *mut c_void;
/// An event handle.
pub type CUevent = *mut c_void;
/// A memory pool handle.
pub type CUmemoryPool = *mut c_void;
/// An array handle.
pub type CUarray = *mut c_void;
/// `CUmipmappedArray`.
pub type CUmipmappedArray = *mut c_void;
/// A physical allocation handle.
pub type CUmemGenericAllocationHandle = u64;
/// A device ordinal.
pub type CUdevice = i32;
/// A graph handle.
pub type CUgraph = *mut c_void;
/// An executable graph handle.
pub type CUgraphExec = *mut c_void;
/// A graph node handle.
pub type CUgraphNode = *mut c_void;
/// `CU_GRAPH_NODE_TYPE_KERNEL` (`CUgraphNodeType`): a kernel node.
pub const CU_GRAPH_NODE_TYPE_KERNEL: u32 = 0;
/// `CU_GRAPH_NODE_TYPE_MEMCPY` (`CUgraphNodeType`): a memcpy node.
pub const CU_GRAPH_NODE_TYPE_MEMCPY: u32 = 1;
/// `CU_GRAPH_NODE_TYPE_MEMSET` (`CUgraphNodeType`): a memset node.
pub const CU_GRAPH_NODE_TYPE_MEMSET: u32 = 2;
/// `CU_GRAPH_NODE_TYPE_GRAPH` (`CUgraphNodeType`): a child graph node.
pub const CU_GRAPH_NODE_TYPE_GRAPH: u32 = 4;
/// `CU_GRAPH_NODE_TYPE_WAIT_EVENT` (`CUgraphNodeType`): an event wait node.
pub const CU_GRAPH_NODE_TYPE_WAIT_EVENT: u32 = 6;
/// `CU_GRAPH_NODE_TYPE_EVENT_RECORD` (`CUgraphNodeType`): an event record node.
pub const CU_GRAPH_NODE_TYPE_EVENT_RECORD: u32 = 7;
/// `CU_GRAPH_NODE_TYPE_MEM_ALLOC` and `CU_GRAPH_NODE_TYPE_MEM_FREE` (`CUgraphNodeType`).
pub const CU_GRAPH_NODE_TYPE_MEM_ALLOC: u32 = 10;
/// See [`CU_GRAPH_NODE_TYPE_MEM_ALLOC`].
pub const CU_GRAPH_NODE_TYPE_MEM_FREE: u32 = 11;

/// `CUgraphEdgeData` (CUDA 12.3): what an edge says beyond its ends: the ports it leaves and
/// enters, and its type (default, or programmatic). Read by nobody here: `cuGraphGetEdges_v2`
/// is only given room for it.
#[repr(C)]
#[derive(Clone, Copy, Default)]
pub struct CUgraphEdgeData {
    pub from_port: u8,
    pub to_port: u8,
    pub kind: u8,
    pub reserved: [u8; 5],
}

const _: () = assert!(std::mem::size_of::<CUgraphEdgeData>() == 8);

/// `CUDA_MEM_ALLOC_NODE_PARAMS` (CUDA 11.4; `_v1` and `_v2` share the layout): the pool
/// properties of 88 bytes (see [`CUmemPoolPropsHead`]), then the access descriptors, the size
/// and the address the driver returns.
#[repr(C)]
pub struct CUDA_MEM_ALLOC_NODE_PARAMS {
    /// `CUmemPoolProps`: the allocation's location, as for a pool.
    pub pool_props: CUmemPoolPropsHead,
    /// The rest of `CUmemPoolProps` (`usage` and reserved bytes).
    pub pool_props_tail: [u8; 56],
    /// `const CUmemAccessDesc *accessDescs`.
    pub access_descs: *const c_void,
    /// Their count.
    pub access_desc_count: usize,
    /// Bytes asked for.
    pub bytesize: usize,
    /// The allocation's fixed address (out).
    pub dptr: CUdeviceptr,
}

// The public header's layout on the 64-bit targets the shim is built for.
const _: () = assert!(std::mem::size_of::<CUmemPoolPropsHead>() + 56 == 88);
const _: () = assert!(std::mem::offset_of!(CUDA_MEM_ALLOC_NODE_PARAMS, bytesize) == 104);
const _: () = assert!(std::mem::offset_of!(CUDA_MEM_ALLOC_NODE_PARAMS, dptr) == 112);

/// `CUgraphNodeParams` (CUDA 12.2; 256 bytes), as far as the shim reads it: the node type,
/// then (at offset 16) a union whose allocation member is a
/// [`CUDA_MEM_ALLOC_NODE_PARAMS`] (`CUDA_MEM_ALLOC_NODE_PARAMS_v2`, the same layout).
#[repr(C)]
pub struct CUgraphNodeParamsHead {
    /// `CUgraphNodeType`.
    pub kind: u32,
    /// `int reserved0[3]`.
    pub reserved0: [i32; 3],
    /// The union's allocation member (read only when `kind` is an allocation node).
    pub alloc: CUDA_MEM_ALLOC_NODE_PARAMS,
}

const _: () = assert!(std::mem::offset_of!(CUgraphNodeParamsHead, alloc) == 16);
// The allocation member lies within the union's 232 bytes.
const _: () = assert!(std::mem::size_of::<CUDA_MEM_ALLOC_NODE_PARAMS>() <= 232);

/// `CUgraphNodeParams` (CUDA 12.2) read as its type and the first member of its union when
/// that member is a handle: the event of `CUDA_EVENT_RECORD_NODE_PARAMS` and
/// `CUDA_EVENT_WAIT_NODE_PARAMS`, the graph of `CUDA_CHILD_GRAPH_NODE_PARAMS`.
#[repr(C)]
pub struct CUgraphNodeParamsHandle {
    /// `CUgraphNodeType`.
    pub kind: u32,
    /// `int reserved0[3]`.
    pub reserved0: [i32; 3],
    /// The union's first member, a `CUevent` or `CUgraph`.
    pub handle: *mut c_void,
}

const _: () = assert!(std::mem::offset_of!(CUgraphNodeParamsHandle, handle) == 16);

/// `CUDA_KERNEL_NODE_PARAMS_v2` (CUDA 12.0; `_v3`, the generic node structure's kernel
/// member, has the same layout). The first nine members are `CUDA_KERNEL_NODE_PARAMS_v1`,
/// all that the 10.0 ABI reads and writes.
#[repr(C)]
pub struct CUDA_KERNEL_NODE_PARAMS {
    /// `CUfunction`.
    pub func: *mut c_void,
    /// Grid and block dimensions.
    pub dims: [u32; 6],
    /// Dynamic shared memory bytes.
    pub shared_mem_bytes: u32,
    /// One pointer per parameter, to its value.
    pub kernel_params: *mut *mut c_void,
    /// The packed alternative (`CU_LAUNCH_PARAM_*` pairs).
    pub extra: *mut *mut c_void,
    /// `CUkernel`, used when `func` is NULL (`_v2` only).
    pub kern: *mut c_void,
    /// `CUcontext` (`_v2` only).
    pub ctx: CUcontext,
}

const _: () = assert!(std::mem::offset_of!(CUDA_KERNEL_NODE_PARAMS, kernel_params) == 40);
const _: () = assert!(std::mem::size_of::<CUDA_KERNEL_NODE_PARAMS>() == 72);

/// `CUDA_MEMSET_NODE_PARAMS` (`_v1`; `_v2`, the generic node structure's memset member,
/// adds a context after these).
#[repr(C)]
pub struct CUDA_MEMSET_NODE_PARAMS {
    /// Destination.
    pub dst: CUdeviceptr,
    /// Bytes between rows.
    pub pitch: usize,
    /// Value.
    pub value: u32,
    /// Bytes per element: 1, 2 or 4.
    pub element_size: u32,
    /// Elements per row.
    pub width: usize,
    /// Rows.
    pub height: usize,
}

const _: () = assert!(std::mem::size_of::<CUDA_MEMSET_NODE_PARAMS>() == 40);

/// `CUDA_MEMCPY_NODE_PARAMS` (CUDA 12.2), the generic node structure's memcpy member.
#[repr(C)]
pub struct CUDA_MEMCPY_NODE_PARAMS {
    /// Must be 0.
    pub flags: i32,
    /// Must be 0.
    pub reserved: i32,
    /// `CUcontext` the copy runs in.
    pub copy_ctx: CUcontext,
    /// The copy.
    pub copy_params: CUDA_MEMCPY3D,
}

const _: () = assert!(std::mem::offset_of!(CUDA_MEMCPY_NODE_PARAMS, copy_params) == 16);

/// The offset of `CUgraphNodeParams`'s union, whose member the node type names.
pub const NODE_PARAMS_UNION: usize = 16;

/// `CUlaunchAttributeID` `CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE` (12.4): a kernel
/// node whose parameters the device may change.
pub const CU_LAUNCH_ATTRIBUTE_DEVICE_UPDATABLE_KERNEL_NODE: u32 = 13;

/// `CUDA_GRAPH_INSTANTIATE_PARAMS` (CUDA 12.0), its first member (all the shim reads).
#[repr(C)]
pub struct CUDA_GRAPH_INSTANTIATE_PARAMS_HEAD {
    /// `CUDA_GRAPH_INSTANTIATE_FLAG_*`.
    pub flags: u64,
}

/// `CUmemLocation`: a location type and an id (a device ordinal, a NUMA node), passed by
/// value to `cuMemPrefetchAsync_v2`.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct CUmemLocation {
    /// `CUmemLocationType`.
    pub kind: u32,
    /// The id the type gives meaning to.
    pub id: i32,
}

/// The first members of `CUmemAllocationProp` (all the shim reads).
#[repr(C)]
pub struct CUmemAllocationPropHead {
    /// `CUmemAllocationType`.
    pub alloc_type: u32,
    /// `CUmemAllocationHandleType` requested.
    pub handle_types: u32,
    /// `CUmemLocationType` of `location`.
    pub location_type: u32,
    /// `location.id`: a device ordinal or a NUMA node.
    pub location_id: i32,
}

/// The members of `CUmemPoolProps` up to `maxSize` (all the shim reads). The structure has
/// been 88 bytes since CUDA 11.2; `maxSize` (12.2) took reserved bytes that older programs
/// must zero, so reading it is sound whichever headers the program was built with.
#[repr(C)]
pub struct CUmemPoolPropsHead {
    /// `CUmemAllocationType`.
    pub alloc_type: u32,
    /// `CUmemAllocationHandleType`s the pool may be exported as (a bit mask).
    pub handle_types: u32,
    /// `CUmemLocationType` of `location`.
    pub location_type: u32,
    /// `location.id`: a device ordinal or a NUMA node.
    pub location_id: i32,
    /// Windows only.
    pub win32_security_attributes: *mut c_void,
    /// The most the pool may reserve (0: no limit).
    pub max_size: usize,
}

/// `CUmulticastObjectProp` (CUDA 12.1).
#[repr(C)]
pub struct CUmulticastObjectProp {
    /// Devices in the multicast team.
    pub num_devices: u32,
    /// The most memory each device may bind to the object.
    pub size: usize,
    /// Exportable handle types (a bit mask).
    pub handle_types: u64,
    /// Reserved, zero.
    pub flags: u64,
}

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
#[derive(Clone, Copy, Default)]
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

/// `CUDA_ARRAY3D_LAYERED`: `depth` counts layers.
pub const CUDA_ARRAY3D_LAYERED: u32 = 0x01;
/// `CUDA_ARRAY3D_CUBEMAP`: `depth` counts faces (six, or six per layer).
pub const CUDA_ARRAY3D_CUBEMAP: u32 = 0x04;

/// Bytes a mipmapped array of `levels` levels needs: the sum of its levels' arrays, each level
/// half the one before in every dimension the array has (never below 1); layers and cubemap
/// faces are not halved. `levels` is clamped as the driver clamps it, to
/// [1, 1 + floor(log2(largest extent))] (the last level is the first whose extents are all 1).
/// The bytes the program asked for, as for [`array_bytes`] (the driver may round each level up).
pub fn mipmapped_bytes(d: &CUDA_ARRAY3D_DESCRIPTOR, levels: u32) -> u64 {
    let halve = |n: usize, l: u32| {
        if n == 0 {
            0
        } else {
            n.checked_shr(l).unwrap_or(0).max(1)
        }
    };
    let keep_depth = d.flags & (CUDA_ARRAY3D_LAYERED | CUDA_ARRAY3D_CUBEMAP) != 0;
    let largest = d.width.max(d.height).max(if keep_depth { 0 } else { d.depth });
    let levels = levels.clamp(1, 1 + largest.checked_ilog2().unwrap_or(0));
    (0..levels).fold(0u64, |sum, l| {
        let depth = if keep_depth { d.depth } else { halve(d.depth, l) };
        sum.saturating_add(array_bytes(
            halve(d.width, l),
            halve(d.height, l),
            depth,
            d.format,
            d.num_channels,
        ))
    })
}

/// `cudaExtent`, passed by value to the runtime's 3D allocations.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct cudaExtent {
    /// Width (in elements for arrays, in bytes for linear memory).
    pub width: usize,
    /// Height in elements.
    pub height: usize,
    /// Depth in elements.
    pub depth: usize,
}

/// `CUlaunchConfig`, the first argument of `cuLaunchKernelEx`.
#[repr(C)]
pub struct CUlaunchConfig {
    /// Grid width in blocks.
    pub grid_dim_x: u32,
    /// Grid height in blocks.
    pub grid_dim_y: u32,
    /// Grid depth in blocks.
    pub grid_dim_z: u32,
    /// Block width in threads.
    pub block_dim_x: u32,
    /// Block height in threads.
    pub block_dim_y: u32,
    /// Block depth in threads.
    pub block_dim_z: u32,
    /// Dynamic shared memory per block.
    pub shared_mem_bytes: u32,
    /// The stream the kernel is launched on.
    pub stream: CUstream,
    /// `CUlaunchAttribute` array (never read by the shim).
    pub attrs: *mut c_void,
    /// Number of attributes.
    pub num_attrs: u32,
}

/// `CU_MEMORYTYPE_HOST`.
pub const CU_MEMORYTYPE_HOST: u32 = 1;
/// `CU_MEMORYTYPE_DEVICE`.
pub const CU_MEMORYTYPE_DEVICE: u32 = 2;
/// `CU_MEMORYTYPE_ARRAY`.
pub const CU_MEMORYTYPE_ARRAY: u32 = 3;
/// `CU_MEMORYTYPE_UNIFIED`.
pub const CU_MEMORYTYPE_UNIFIED: u32 = 4;

/// `CUDA_MEMCPY2D` (the `_v2` ABI, with `size_t` extents).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUDA_MEMCPY2D {
    /// Source column in bytes.
    pub src_x_in_bytes: usize,
    /// Source row.
    pub src_y: usize,
    /// `CUmemorytype` of the source.
    pub src_memory_type: u32,
    /// Source, for host memory.
    pub src_host: *const c_void,
    /// Source, for device and unified memory.
    pub src_device: CUdeviceptr,
    /// Source, for arrays.
    pub src_array: CUarray,
    /// Bytes per source row.
    pub src_pitch: usize,
    /// Destination column in bytes.
    pub dst_x_in_bytes: usize,
    /// Destination row.
    pub dst_y: usize,
    /// `CUmemorytype` of the destination.
    pub dst_memory_type: u32,
    /// Destination, for host memory.
    pub dst_host: *mut c_void,
    /// Destination, for device and unified memory.
    pub dst_device: CUdeviceptr,
    /// Destination, for arrays.
    pub dst_array: CUarray,
    /// Bytes per destination row.
    pub dst_pitch: usize,
    /// Bytes copied per row.
    pub width_in_bytes: usize,
    /// Rows.
    pub height: usize,
}

/// `CUDA_MEMCPY3D` (the `_v2` ABI).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUDA_MEMCPY3D {
    /// Source column in bytes.
    pub src_x_in_bytes: usize,
    /// Source row.
    pub src_y: usize,
    /// Source slice.
    pub src_z: usize,
    /// Source mipmap level (arrays).
    pub src_lod: usize,
    /// `CUmemorytype` of the source.
    pub src_memory_type: u32,
    /// Source, for host memory.
    pub src_host: *const c_void,
    /// Source, for device and unified memory.
    pub src_device: CUdeviceptr,
    /// Source, for arrays.
    pub src_array: CUarray,
    /// Reserved.
    pub reserved0: *mut c_void,
    /// Bytes per source row.
    pub src_pitch: usize,
    /// Rows per source slice.
    pub src_height: usize,
    /// Destination column in bytes.
    pub dst_x_in_bytes: usize,
    /// Destination row.
    pub dst_y: usize,
    /// Destination slice.
    pub dst_z: usize,
    /// Destination mipmap level (arrays).
    pub dst_lod: usize,
    /// `CUmemorytype` of the destination.
    pub dst_memory_type: u32,
    /// Destination, for host memory.
    pub dst_host: *mut c_void,
    /// Destination, for device and unified memory.
    pub dst_device: CUdeviceptr,
    /// Destination, for arrays.
    pub dst_array: CUarray,
    /// Reserved.
    pub reserved1: *mut c_void,
    /// Bytes per destination row.
    pub dst_pitch: usize,
    /// Rows per destination slice.
    pub dst_height: usize,
    /// Bytes copied per row.
    pub width_in_bytes: usize,
    /// Rows per slice.
    pub height: usize,
    /// Slices.
    pub depth: usize,
}

/// `CUDA_MEMCPY3D_PEER`: the layout of [`CUDA_MEMCPY3D`], with the source and destination
/// contexts (`CUcontext`, which the shim does not read) where it has `reserved0` and
/// `reserved1`.
pub type CUDA_MEMCPY3D_PEER = CUDA_MEMCPY3D;

/// `CUmemcpy3DOperand` (CUDA 12.8): a pointer (`ptr`, then the row length and layer height
/// in elements, then a location hint) or an array (`ptr` is the `CUarray`, then the offset in
/// elements: x, y, and z where the pointer has its hint), as the union's two members overlay.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CUmemcpy3DOperand {
    /// `CU_MEMCPY_OPERAND_TYPE_POINTER` or `CU_MEMCPY_OPERAND_TYPE_ARRAY`.
    pub kind: u32,
    /// The pointer, or the array.
    pub ptr: u64,
    /// Elements per row (0: the copy's width), or the array offset's x.
    pub row_length: usize,
    /// Rows per layer (0: the copy's height), or the array offset's y.
    pub layer_height: usize,
    /// The location hint (`CUmemLocation`), or the array offset's z.
    pub last: u64,
}

/// `CUmemcpy3DOperandType` of a pointer.
pub const CU_MEMCPY_OPERAND_TYPE_POINTER: u32 = 1;
/// `CUmemcpy3DOperandType` of an array.
pub const CU_MEMCPY_OPERAND_TYPE_ARRAY: u32 = 2;

/// `CUDA_MEMCPY3D_BATCH_OP` (CUDA 12.8): one copy of a 3D batch, or of
/// `cuMemcpy3DWithAttributesAsync`; its extent counts elements (bytes between two pointers).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct CUDA_MEMCPY3D_BATCH_OP {
    /// Source operand.
    pub src: CUmemcpy3DOperand,
    /// Destination operand.
    pub dst: CUmemcpy3DOperand,
    /// Elements per row.
    pub width: usize,
    /// Rows per layer.
    pub height: usize,
    /// Layers.
    pub depth: usize,
    /// `CUmemcpySrcAccessOrder`.
    pub src_access_order: u32,
    /// `CUmemcpyFlags`.
    pub flags: u32,
}

// The public layouts: a 40-byte operand (the union at 8), a 112-byte operation, a 40-byte
// array descriptor.
const _: () = assert!(std::mem::size_of::<CUmemcpy3DOperand>() == 40);
const _: () = assert!(std::mem::offset_of!(CUmemcpy3DOperand, ptr) == 8);
const _: () = assert!(std::mem::size_of::<CUDA_MEMCPY3D_BATCH_OP>() == 112);
const _: () = assert!(std::mem::offset_of!(CUDA_MEMCPY3D_BATCH_OP, width) == 80);
const _: () = assert!(std::mem::offset_of!(CUDA_MEMCPY3D_BATCH_OP, src_access_order) == 104);
const _: () = assert!(std::mem::size_of::<CUDA_ARRAY3D_DESCRIPTOR>() == 40);
const _: () = assert!(std::mem::offset_of!(CUDA_ARRAY3D_DESCRIPTOR, format) == 24);

/// `CUexternalMemory`.
pub type CUexternalMemory = *mut c_void;

/// `CUDA_EXTERNAL_MEMORY_HANDLE_DESC`, as far as the shim reads it (the flags and reserved
/// words after `size` are left out: it is only ever read through the program's pointer).
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUDA_EXTERNAL_MEMORY_HANDLE_DESC {
    /// `CUexternalMemoryHandleType`.
    pub handle_type: u32,
    /// The handle union (a file descriptor, two Win32 pointers, or an NvSciBuf object).
    pub handle: [u64; 2],
    /// The object's size in bytes.
    pub size: u64,
}

/// `CUDA_EXTERNAL_MEMORY_BUFFER_DESC`, as far as the shim reads it.
#[repr(C)]
#[derive(Clone, Copy)]
pub struct CUDA_EXTERNAL_MEMORY_BUFFER_DESC {
    /// Offset of the buffer in the object.
    pub offset: u64,
    /// The buffer's size in bytes.
    pub size: u64,
}

/// `CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC`, as far as the shim reads it.
#[repr(C)]
pub struct CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC {
    /// Offset of the array in the object.
    pub offset: u64,
    /// The array's shape and format.
    pub array_desc: CUDA_ARRAY3D_DESCRIPTOR,
    /// Mipmap levels.
    pub num_levels: u32,
}

/// `CUexternalSemaphore`.
pub type CUexternalSemaphore = *mut c_void;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn external_memory_descriptors_have_the_public_offsets() {
        // cuda.h: the union after a 4-byte enum starts at 8; size at 24; the buffer's at 8.
        assert_eq!(std::mem::offset_of!(CUDA_EXTERNAL_MEMORY_HANDLE_DESC, handle), 8);
        assert_eq!(std::mem::offset_of!(CUDA_EXTERNAL_MEMORY_HANDLE_DESC, size), 24);
        assert_eq!(std::mem::offset_of!(CUDA_EXTERNAL_MEMORY_BUFFER_DESC, size), 8);
        // The array descriptor (three size_t, an enum and two unsigned: 36 bytes, 40 with its
        // padding) at 8, the level count after it.
        assert_eq!(std::mem::size_of::<CUDA_ARRAY3D_DESCRIPTOR>(), 40);
        assert_eq!(
            std::mem::offset_of!(CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC, array_desc),
            8
        );
        assert_eq!(
            std::mem::offset_of!(CUDA_EXTERNAL_MEMORY_MIPMAPPED_ARRAY_DESC, num_levels),
            48
        );
        assert_eq!(std::mem::size_of::<CUDA_MEMCPY3D_PEER>(), 200);
    }

    fn desc(width: usize, height: usize, depth: usize, flags: u32) -> CUDA_ARRAY3D_DESCRIPTOR {
        // FLOAT, four channels: 16 bytes per element.
        CUDA_ARRAY3D_DESCRIPTOR {
            width,
            height,
            depth,
            format: 0x20,
            num_channels: 4,
            flags,
        }
    }

    #[test]
    fn a_mipmapped_array_is_the_sum_of_its_halved_levels() {
        assert_eq!(
            mipmapped_bytes(&desc(64, 32, 0, 0), 4),
            16 * (64 * 32 + 32 * 16 + 16 * 8 + 8 * 4)
        );
        // One level is the array itself.
        let d = desc(100, 3, 0, 0);
        assert_eq!(mipmapped_bytes(&d, 1), array_bytes(100, 3, 0, 0x20, 4));
        // A dimension never falls below 1; a 1D array stays one row.
        assert_eq!(mipmapped_bytes(&desc(4, 0, 0, 0), 3), 16 * (4 + 2 + 1));
        assert_eq!(mipmapped_bytes(&desc(8, 2, 0, 0), 3), 16 * (8 * 2 + 4 + 2));
        // 3D: depth halves too.
        assert_eq!(mipmapped_bytes(&desc(8, 8, 8, 0), 2), 16 * (512 + 64));
        // Layers and cubemap faces are not halved.
        assert_eq!(
            mipmapped_bytes(&desc(8, 8, 5, CUDA_ARRAY3D_LAYERED), 2),
            16 * 5 * (64 + 16)
        );
        assert_eq!(
            mipmapped_bytes(&desc(8, 8, 6, CUDA_ARRAY3D_CUBEMAP), 2),
            16 * 6 * (64 + 16)
        );
        // Levels are clamped to [1, 1 + log2 of the largest extent]: no level counts as one,
        // and the last level is the first that is one element.
        assert_eq!(mipmapped_bytes(&d, 0), mipmapped_bytes(&d, 1));
        assert_eq!(
            mipmapped_bytes(&desc(64, 0, 0, 0), 100),
            16 * (64 + 32 + 16 + 8 + 4 + 2 + 1)
        );
        assert_eq!(mipmapped_bytes(&desc(1, 0, 0, 0), u32::MAX), 16);
        // Layers do not count as an extent.
        assert_eq!(
            mipmapped_bytes(&desc(2, 2, 64, CUDA_ARRAY3D_LAYERED), 9),
            16 * 64 * (4 + 1)
        );
        // Absurd extents neither overflow nor loop long.
        assert_eq!(mipmapped_bytes(&desc(usize::MAX, usize::MAX, 0, 0), u32::MAX), u64::MAX);
    }
}
