//! Copies to and from CUDA arrays: the 1D entry points, array sides of 2D and 3D copies,
//! mipmapped levels and a captured copy.

use super::run;

#[test]
fn one_d_array_copies_move_bytes_and_refuse_what_the_driver_refuses() {
    let f = run("sim_arrays", "one-d");
    f.expect_all(&[
        ("htoa", "0"),
        ("atoa", "0"),
        ("atod", "0"),
        ("round_trip", "1"),
        ("dtoa_offset", "0"),
        ("atoh", "0"),
        ("offset_copied", "1"),
        ("atoh_offset", "0"),
        ("atoh_offset_value", "1"),
        ("htoa_ptds", "0"),
        ("atoa_ptds", "0"),
        ("atod_ptds", "0"),
        ("dtoa_ptds", "0"),
        ("atoh_ptds", "0"),
        ("ptds_round_trip", "1"),
        ("htoa_async", "0"),
        ("atoh_async", "0"),
        ("async_round_trip", "1"),
        ("htoa_async_ptsz", "0"),
        ("atoh_async_ptsz", "0"),
        ("ptsz_round_trip", "1"),
        // CUDA_ERROR_INVALID_VALUE: past the end, an offset inside an element, device memory
        // not allocated, an array of more than one row.
        ("past_end", "1"),
        ("offset_off_element", "1"),
        ("atod_unallocated", "1"),
        ("zero_bytes", "0"),
        ("two_d_array", "1"),
        // CUDA_ERROR_INVALID_HANDLE: no live array.
        ("destroyed", "400"),
        ("no_array", "400"),
        ("async_destroyed", "400"),
        ("array_width", "64"),
    ]);
}

#[test]
fn array_sides_of_2d_and_3d_copies_mipmapped_levels_and_captured_copies_use_the_array_s_rows() {
    let f = run("sim_arrays", "shaped");
    f.expect_all(&[
        ("zeroed", "0"),
        ("part", "0"),
        ("back", "0"),
        ("part_placed", "1"),
        // 3D batches with array operands: extents, offsets and row lengths in elements.
        ("batch_from_array", "0"),
        ("batch_from_array_placed", "1"),
        ("batch_into_array", "0"),
        ("batch_into_array_placed", "1"),
        ("batch_past_columns", "1"),
        // Two arrays of different element sizes.
        ("batch_element_mismatch", "1"),
        ("past_rows", "1"),
        ("past_columns", "1"),
        ("off_element", "1"),
        ("level_1", "0"),
        ("level_1_past_end", "1"),
        ("levels_apart", "1"),
        ("level_of_destroyed", "400"),
        ("captured", "0"),
        // Captured, not run.
        ("ran_when_captured", "0"),
        ("node_names_array", "1"),
        ("launch", "0"),
        ("ran_by_launch", "1"),
    ]);
}
