//! Copies and memsets: data round-trips, ranges are checked against allocations, and
//! page-locked and managed memory behave as unified addresses.

use super::run;

#[test]
fn data_round_trips_through_device_memory() {
    let f = run("sim_copy", "round-trip");
    f.expect_all(&[
        ("htod_dtoh", "1"),
        ("dtod_interior", "1"),
        ("async", "1"),
        ("unified", "1"),
        ("memset", "1"),
        ("zero_bytes", "0"),
    ]);
}

#[test]
fn a_batch_of_copies_runs_in_order_and_is_checked_whole() {
    let f = run("sim_copy", "batch");
    f.expect_all(&[
        ("in_order", "1 18446744073709551615"),
        ("v2", "1"),
        ("past_end", "1"),
        ("fail_idx", "1"),
        ("nothing_copied", "1"),
        ("no_attrs", "1"),
        ("first_index", "1"),
        ("bad_order", "1"),
        ("batch_fail_idx", "1"),
        ("empty", "1"),
    ]);
}

#[test]
fn batches_of_3d_copies_and_copies_with_attributes_move_their_rows() {
    let f = run("sim_copy", "batch-3d");
    f.expect_all(&[
        ("packed", "1 1 18446744073709551615"),
        ("second", "1"),
        ("v2_and_single", "1 1"),
        ("past_end", "1"),
        ("fail_idx", "1 1"),
        ("short_rows", "1"),
        ("short_rows_idx", "0"),
        ("flags", "1"),
        ("empty", "1"),
        ("bad_order", "1"),
        // An array operand naming no array: CUDA_ERROR_INVALID_HANDLE.
        ("array", "400"),
        ("attributes", "1 1"),
        ("no_attribute", "1"),
    ]);
}

#[test]
fn peer_copies_move_bytes_between_contexts_and_2d_memsets_set_only_their_rows() {
    let f = super::run_with("sim_copy", "peer", &[("SIMCUDA_DEVICES", "2")]);
    f.expect_all(&[
        ("peer", "1"),
        ("peer_async", "1"),
        // CUDA_ERROR_INVALID_CONTEXT, CUDA_ERROR_INVALID_VALUE.
        ("peer_no_context", "201"),
        ("peer_past_end", "1"),
        ("peer_3d", "1"),
        ("peer_3d_no_context", "201"),
        ("memset_2d", "1"),
        ("memset_2d_overlapping", "1"),
        ("memset_2d_misaligned_pitch", "1"),
        ("memset_2d_past_end", "1"),
        ("memset_2d_nothing_written", "1"),
        ("memset_2d_one_row_any_pitch", "0"),
    ]);
}

#[test]
fn copies_outside_a_live_allocation_fail_with_invalid_value() {
    let f = run("sim_copy", "round-trip");
    f.expect_all(&[
        ("memset_misaligned", "1"),
        ("htod_past_end", "1"),
        ("dtoh_past_end", "1"),
        ("dtod_across_blocks", "1"),
        ("memset_past_end", "1"),
        ("dtoh_unknown_device_pointer", "1"),
        ("dtoh_null_host", "1"),
        ("htod_null_device", "1"),
        ("dtoh_freed", "1"),
    ]);
}

#[test]
fn page_locked_and_managed_memory_are_unified_addresses() {
    let f = run("sim_copy", "host-memory");
    f.expect_all(&[
        ("device_pointer_is_host_pointer", "1"),
        ("host_flags", "2"),
        ("pinned_as_device", "1"),
        ("pinned_past_end", "1"),
        ("registered_as_device", "1"),
        ("managed_host_writes", "1"),
        ("managed_range", "1"),
        ("device_range", "1"),
        ("free_managed", "0"),
    ]);
}

#[test]
fn host_registration_and_host_frees_report_their_errors() {
    let f = run("sim_copy", "host-memory");
    f.expect_all(&[
        ("register_overlap", "712"),    // CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED
        ("unregister_interior", "713"), // CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED
        ("unregister", "0"),
        ("unregister_again", "713"),
        ("device_pointer_unregistered", "1"),
        ("free_host_twice_first", "0"),
        ("free_host_twice_second", "1"),
        ("free_host_device_pointer", "1"),
    ]);
}

#[test]
fn the_host_cannot_dereference_a_device_pointer() {
    run("sim_copy", "no-host-access").expect("host_read_of_device_pointer", "faulted");
}

#[test]
fn an_ipc_handle_opens_an_alias_of_the_same_memory() {
    let f = run("sim_copy", "ipc");
    f.expect_all(&[
        ("open", "0"),
        ("new_address", "1"),
        ("no_memory_taken", "1"),
        ("alias", "1"),
        ("alias_past_end", "1"),
        ("open_again_v1", "0"),
        ("same_address", "1"),
        ("close", "0"),
        ("still_open", "0"),
        ("close_last", "0"),
        ("close_closed", "1"),
        ("copy_after_close", "1"),
        ("handle_of_async", "1"),
        ("handle_of_interior", "1"),
    ]);
}

#[test]
fn an_ipc_alias_dies_with_its_allocation() {
    let f = run("sim_copy", "ipc");
    f.expect_all(&[
        ("copy_after_target_freed", "1"),
        ("reallocated_at_same_address", "1"),
        ("open_stale_handle", "1"),
        ("open_garbage", "1"),
    ]);
}
