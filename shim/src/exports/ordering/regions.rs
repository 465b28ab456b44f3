//! What a 2D or 3D copy touches, from its `CUDA_MEMCPY2D` / `CUDA_MEMCPY3D` descriptor: one
//! address per side and one length, as a `Copy` record carries them.
//!
//! Each side's memory type says which of its fields is the address: the host pointer for
//! host memory, the device pointer for device and unified memory. An array side has no
//! address a copy or kernel could share (its contents are reached only through the array
//! handle), so it is recorded as 0, which the analyzer reads as "no memory it tracks". The
//! length is the larger of the two sides' spans, from the first byte copied to one past the
//! last, pitch gaps included: a side with the smaller span is over-covered, never
//! under-covered.

use crate::cuda::{
    CUmemcpy3DOperand, CUDA_MEMCPY2D, CUDA_MEMCPY3D, CUDA_MEMCPY3D_BATCH_OP, CU_MEMCPY_OPERAND_TYPE_ARRAY,
    CU_MEMCPY_OPERAND_TYPE_POINTER, CU_MEMORYTYPE_ARRAY, CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST,
    CU_MEMORYTYPE_UNIFIED,
};

/// The addresses and length a copy record carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Region {
    /// First destination byte (0: an array, or unknown).
    pub dst: u64,
    /// First source byte (0: an array, or unknown).
    pub src: u64,
    /// Bytes from the first to one past the last byte touched, on the larger side.
    pub bytes: u64,
}

/// One side of a copy, whichever descriptor it came from.
struct Side {
    memory_type: u32,
    host: u64,
    device: u64,
    x: usize,
    y: usize,
    z: usize,
    pitch: usize,
    rows: usize,
}

impl Side {
    fn start(&self) -> u64 {
        let base = match self.memory_type {
            CU_MEMORYTYPE_HOST => self.host,
            CU_MEMORYTYPE_DEVICE | CU_MEMORYTYPE_UNIFIED => self.device,
            // An array's contents are reached only through its handle.
            CU_MEMORYTYPE_ARRAY => return 0,
            // A memory type this shim does not know.
            _ => return 0,
        };
        let row = (self.z as u64)
            .saturating_mul(self.rows as u64)
            .saturating_add(self.y as u64);
        base.wrapping_add(self.x as u64)
            .wrapping_add(row.saturating_mul(self.pitch as u64))
    }

    fn span(&self, width: usize, height: usize, depth: usize) -> u64 {
        if width == 0 || height == 0 || depth == 0 {
            return 0;
        }
        let rows = ((depth - 1) as u64)
            .saturating_mul(self.rows as u64)
            .saturating_add((height - 1) as u64);
        rows.saturating_mul(self.pitch as u64).saturating_add(width as u64)
    }
}

fn region(src: Side, dst: Side, width: usize, height: usize, depth: usize) -> Region {
    Region {
        dst: dst.start(),
        src: src.start(),
        bytes: dst.span(width, height, depth).max(src.span(width, height, depth)),
    }
}

/// The bytes a 2D memset of `height` rows of `width` elements of `elem` bytes, rows `pitch`
/// bytes apart, spans from its first byte to one past its last.
pub fn memset_span(pitch: usize, width: usize, height: usize, elem: u64) -> u64 {
    if width == 0 || height == 0 {
        return 0;
    }
    ((height - 1) as u64)
        .saturating_mul(pitch as u64)
        .saturating_add((width as u64).saturating_mul(elem))
}

/// The region of a 2D copy.
pub fn of_2d(p: &CUDA_MEMCPY2D) -> Region {
    let side = |memory_type, host: u64, device, x, y, pitch| Side {
        memory_type,
        host,
        device,
        x,
        y,
        z: 0,
        pitch,
        rows: p.height,
    };
    region(
        side(
            p.src_memory_type,
            p.src_host as u64,
            p.src_device,
            p.src_x_in_bytes,
            p.src_y,
            p.src_pitch,
        ),
        side(
            p.dst_memory_type,
            p.dst_host as u64,
            p.dst_device,
            p.dst_x_in_bytes,
            p.dst_y,
            p.dst_pitch,
        ),
        p.width_in_bytes,
        p.height,
        1,
    )
}

/// The region of a 3D copy.
pub fn of_3d(p: &CUDA_MEMCPY3D) -> Region {
    let src = Side {
        memory_type: p.src_memory_type,
        host: p.src_host as u64,
        device: p.src_device,
        x: p.src_x_in_bytes,
        y: p.src_y,
        z: p.src_z,
        pitch: p.src_pitch,
        rows: p.src_height,
    };
    let dst = Side {
        memory_type: p.dst_memory_type,
        host: p.dst_host as u64,
        device: p.dst_device,
        x: p.dst_x_in_bytes,
        y: p.dst_y,
        z: p.dst_z,
        pitch: p.dst_pitch,
        rows: p.dst_height,
    };
    region(src, dst, p.width_in_bytes, p.height, p.depth)
}

/// The region of an operation of a 3D batch (`CUDA_MEMCPY3D_BATCH_OP`), whose extent and
/// pointer pitches count elements: bytes between two pointers, the array's elements when one
/// side is an array (`element_of` tells an array's element size in bytes; when it cannot, a
/// byte each is assumed, which under-covers the pointer side rather than claiming bytes the
/// copy never touched). Row length and layer height 0 mean packed rows and layers.
pub fn of_batch_op(op: &CUDA_MEMCPY3D_BATCH_OP, element_of: impl FnOnce(u64) -> Option<u64>) -> Region {
    let array = [&op.src, &op.dst]
        .into_iter()
        .find(|o| o.kind == CU_MEMCPY_OPERAND_TYPE_ARRAY);
    let element = array.and_then(|a| element_of(a.ptr)).unwrap_or(1);
    let (width, height, depth) = (op.width as u64, op.height as u64, op.depth as u64);
    let side = |o: &CUmemcpy3DOperand| -> (u64, u64) {
        if o.kind != CU_MEMCPY_OPERAND_TYPE_POINTER {
            return (0, 0);
        }
        if width == 0 || height == 0 || depth == 0 {
            return (o.ptr, 0);
        }
        let row = if o.row_length == 0 { width } else { o.row_length as u64 };
        let layer = if o.layer_height == 0 {
            height
        } else {
            o.layer_height as u64
        };
        let rows = (depth - 1).saturating_mul(layer).saturating_add(height - 1);
        let span = rows
            .saturating_mul(row.saturating_mul(element))
            .saturating_add(width.saturating_mul(element));
        (o.ptr, span)
    };
    let (src, src_span) = side(&op.src);
    let (dst, dst_span) = side(&op.dst);
    Region {
        dst,
        src,
        bytes: src_span.max(dst_span),
    }
}

#[cfg(test)]
mod tests {
    use std::ptr::{null, null_mut};

    use super::*;

    fn copy_2d() -> CUDA_MEMCPY2D {
        CUDA_MEMCPY2D {
            src_x_in_bytes: 0,
            src_y: 0,
            src_memory_type: CU_MEMORYTYPE_HOST,
            src_host: 0x1000 as *const _,
            src_device: 0,
            src_array: null_mut(),
            src_pitch: 64,
            dst_x_in_bytes: 0,
            dst_y: 0,
            dst_memory_type: CU_MEMORYTYPE_DEVICE,
            dst_host: null_mut(),
            dst_device: 0x7000_0000_0000,
            dst_array: null_mut(),
            dst_pitch: 512,
            width_in_bytes: 64,
            height: 4,
        }
    }

    #[test]
    fn a_2d_copy_names_each_side_by_its_memory_type_and_covers_the_larger_span() {
        let mut p = copy_2d();
        // Host rows packed (4 x 64), device rows 512 apart: 3 * 512 + 64.
        assert_eq!(
            of_2d(&p),
            Region {
                dst: 0x7000_0000_0000,
                src: 0x1000,
                bytes: 3 * 512 + 64
            }
        );
        // Offsets: column 16, row 2 of the device side.
        p.dst_x_in_bytes = 16;
        p.dst_y = 2;
        assert_eq!(of_2d(&p).dst, 0x7000_0000_0000 + 2 * 512 + 16);
        // Unified memory is named by its device pointer; an array by nothing.
        p.src_memory_type = CU_MEMORYTYPE_UNIFIED;
        p.src_device = 0x5000;
        assert_eq!(of_2d(&p).src, 0x5000);
        p.src_memory_type = CU_MEMORYTYPE_ARRAY;
        p.src_array = 0x5ce0_0000_0010 as *mut _;
        assert_eq!(of_2d(&p).src, 0);
        p.src_memory_type = 77;
        assert_eq!(of_2d(&p).src, 0);
        // Nothing copied: no bytes.
        p.height = 0;
        assert_eq!(of_2d(&p).bytes, 0);
    }

    fn pointer(ptr: u64, row_length: usize, layer_height: usize) -> CUmemcpy3DOperand {
        CUmemcpy3DOperand {
            kind: CU_MEMCPY_OPERAND_TYPE_POINTER,
            ptr,
            row_length,
            layer_height,
            last: 0,
        }
    }

    #[test]
    fn a_3d_batch_operation_counts_bytes_between_pointers_and_array_elements_otherwise() {
        let mut op = CUDA_MEMCPY3D_BATCH_OP {
            src: pointer(0x7000_0000_0000, 0, 0),
            dst: pointer(0x7000_0010_0000, 256, 8),
            width: 100,
            height: 4,
            depth: 3,
            ..Default::default()
        };
        let never = |_| -> Option<u64> { panic!("no array here") };
        // The source is packed (100-byte rows, 4-row layers): 3 * 4 * 100 bytes; the
        // destination has 256-byte rows and 8-row layers: (2 * 8 + 3) * 256 + 100, the larger.
        assert_eq!(
            of_batch_op(&op, never),
            Region {
                dst: 0x7000_0010_0000,
                src: 0x7000_0000_0000,
                bytes: (2 * 8 + 3) * 256 + 100
            }
        );
        // Nothing copied: no bytes, the addresses kept.
        op.depth = 0;
        assert_eq!(of_batch_op(&op, never).bytes, 0);
        op.depth = 3;
        // An array source: no address, and the destination counts its 16-byte elements.
        op.src = CUmemcpy3DOperand {
            kind: CU_MEMCPY_OPERAND_TYPE_ARRAY,
            ptr: 0x5ce0,
            ..Default::default()
        };
        let r = of_batch_op(&op, |a| {
            assert_eq!(a, 0x5ce0);
            Some(16)
        });
        assert_eq!((r.src, r.dst), (0, 0x7000_0010_0000));
        assert_eq!(r.bytes, (2 * 8 + 3) * 256 * 16 + 100 * 16);
        // An element size unknown: a byte each.
        assert_eq!(of_batch_op(&op, |_| None).bytes, (2 * 8 + 3) * 256 + 100);
        // An operand type this shim does not know: no address.
        op.dst.kind = 9;
        assert_eq!(of_batch_op(&op, |_| Some(4)), Region::default());
        // Absurd extents saturate.
        let huge = CUDA_MEMCPY3D_BATCH_OP {
            src: pointer(1, usize::MAX, usize::MAX),
            dst: pointer(2, 0, 0),
            width: usize::MAX,
            height: usize::MAX,
            depth: usize::MAX,
            ..Default::default()
        };
        assert_eq!(of_batch_op(&huge, never).bytes, u64::MAX);
    }

    #[test]
    fn a_3d_copy_counts_slices_of_its_own_height() {
        let p = CUDA_MEMCPY3D {
            src_x_in_bytes: 8,
            src_y: 1,
            src_z: 1,
            src_lod: 0,
            src_memory_type: CU_MEMORYTYPE_DEVICE,
            src_host: null(),
            src_device: 0x7000_0000_0000,
            src_array: null_mut(),
            reserved0: null_mut(),
            src_pitch: 256,
            src_height: 8,
            dst_x_in_bytes: 0,
            dst_y: 0,
            dst_z: 0,
            dst_lod: 0,
            dst_memory_type: CU_MEMORYTYPE_DEVICE,
            dst_host: null_mut(),
            dst_device: 0x7000_0010_0000,
            dst_array: null_mut(),
            reserved1: null_mut(),
            dst_pitch: 128,
            dst_height: 4,
            width_in_bytes: 100,
            height: 4,
            depth: 3,
        };
        let r = of_3d(&p);
        // Source: slice 1, row 1, column 8 of 8-row slices of 256-byte rows.
        assert_eq!(r.src, 0x7000_0000_0000 + (8 + 1) * 256 + 8);
        assert_eq!(r.dst, 0x7000_0010_0000);
        // The source spans 2 slices of 8 rows and 3 rows more, then one row's width.
        assert_eq!(r.bytes, (2 * 8 + 3) * 256 + 100);
        // Absurd extents saturate instead of overflowing.
        let huge = CUDA_MEMCPY3D {
            depth: usize::MAX,
            src_height: usize::MAX,
            ..p
        };
        assert_eq!(of_3d(&huge).bytes, u64::MAX);
    }
}
