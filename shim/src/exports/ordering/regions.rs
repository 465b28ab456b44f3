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
    CUDA_MEMCPY2D, CUDA_MEMCPY3D, CU_MEMORYTYPE_ARRAY, CU_MEMORYTYPE_DEVICE, CU_MEMORYTYPE_HOST, CU_MEMORYTYPE_UNIFIED,
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
