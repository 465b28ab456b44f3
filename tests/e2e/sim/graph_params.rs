//! Kernel, memcpy and memset nodes: parameters read back, changed in graphs and executable
//! graphs, and nodes disabled and enabled (`tests/clients/sim_graph_params.c`).

use super::run;

/// A kernel node's parameters as the client prints them: whether `func` is the expected
/// function, grid x y z, block x y z, shared bytes, whether the pointer parameter is the
/// buffer, the value and count parameters, whether `extra` is NULL.
const FILL_5: &str = "1 2 3 1 128 2 1 64 1 5 256 1";
/// A memcpy descriptor: source and destination memory types (host 1, device 2), whether the
/// addresses are the expected ones, pitches, slice heights, summed offsets, extent, LODs.
const HTOD_1024: &str = "1 2 1 1 1024 1024 1 1 0 0 0 1024 1 1 0";

#[test]
fn captured_and_hand_built_nodes_read_back_what_they_were_given() {
    let f = run("sim_graph_params", "read-back");
    f.expect_all(&[
        ("captured_types", "0 1 2"),
        ("kernel_get_v2", "0"),
        ("captured_kernel_v2", FILL_5),
        // No CUkernel, and the capturing stream's context.
        ("captured_kernel_v2_kern_ctx", "1 1"),
        ("kernel_get_v1", "0"),
        ("captured_kernel_v1", FILL_5),
        ("memcpy_get", "0"),
        ("captured_memcpy", HTOD_1024),
        ("memset_get", "0"),
        // A captured 1D memset: pitch 0, the halfword value, 64 elements, one row.
        ("captured_memset", "1 0 0xbeef 2 64 1"),
        // Parameters packed in `extra` read back as kernelParams.
        ("captured_extra", "1 1 1 1 16 1 1 0 1 3 16 1"),
        ("kernel_get_on_memcpy", "1"),
        ("memcpy_get_on_memset", "1"),
        ("memset_get_on_kernel", "1"),
        ("kernel_get_no_out", "1"),
        ("kernel_get_no_node", "1"),
    ]);
}

#[test]
fn nodes_built_by_hand_and_through_the_generic_structure_read_back_and_change() {
    let f = run("sim_graph_params", "read-back");
    f.expect_all(&[
        ("add_kernel", "0"),
        ("add_memcpy", "0"),
        ("add_memset", "0"),
        ("built_kernel", FILL_5),
        ("built_kernel_kern_ctx", "1 1"),
        ("built_memcpy_same", "1"),
        ("built_memset_same", "1"),
        // func NULL, the CUkernel and context given, the block size given.
        ("add_kernel_v2", "0"),
        ("built_kernel_v2", "1 1 1 32"),
        ("add_kernel_bad_function", "1"),
        ("add_kernel_empty_grid", "1"),
        ("add_kernel_big_block", "1"),
        ("add_kernel_no_params", "1"),
        ("add_kernel_foreign_dependency", "1"),
        ("add_kernel_no_params_struct", "1"),
        ("add_memcpy_overlapping_rows", "1"),
        // An array side naming no array: CUDA_ERROR_INVALID_HANDLE.
        ("add_memcpy_array", "400"),
        // The union of CUgraphNodeParams starts at byte 16 of 256.
        ("params_offsets", "16 16 16 256"),
        ("add_node_kernel", "0"),
        ("add_node_kernel_params", FILL_5),
        ("add_node_memcpy", "0"),
        ("add_node_memcpy_same", "1"),
        ("add_node_memcpy_flags", "1"),
        ("add_node_memset", "0"),
        ("add_node_memset_params", "1 256 0x7f 1 200 3"),
        ("kernel_set", "0"),
        ("kernel_set_params", "1 2 3 1 128 2 1 64 1 6 256 1"),
        ("kernel_set_v2", "0"),
        ("kernel_set_v2_params", "1 64"),
        ("memcpy_set", "0"),
        ("memcpy_set_params", "1 2 1 1 0 0 0 0 0 0 0 256 1 1 0"),
        ("memset_set", "0"),
        ("memset_set_params", "1 0 0x1234 2 8 1"),
        ("node_set_params_memset", "0"),
        ("node_set_params_memset_params", "1 0 0x9 4 2 1"),
        ("node_set_params_wrong_type", "1"),
        ("kernel_set_on_memset", "1"),
        ("memcpy_set_on_kernel", "1"),
        ("memset_set_on_memcpy", "1"),
        ("memset_set_bad_element", "1"),
        // A child graph's nodes: those of the copy its node holds.
        ("child_kernel", FILL_5),
        ("child_memcpy", HTOD_1024),
    ]);
}

#[test]
fn executable_graph_setters_change_what_later_launches_write() {
    let f = run("sim_graph_params", "exec-edits");
    // d[0] d[255] d[256] e[0] e[255] e[512] e[543] e[544]: fill 5 over 256 words, the copy of
    // 0..255, 64 halfwords 0xbeef.
    let captured = "5 5 0 0 255 0xbeefbeef 0xbeefbeef 0x0";
    f.expect_all(&[
        ("launch", captured),
        ("exec_kernel_set", "0"),
        ("exec_memcpy_set", "0"),
        ("exec_memset_set", "0"),
        // fill 7 over 128 words; 100.. copied to e[256..384); 0x1234 over e[768..784).
        ("exec_set_launch", "7 7 0 100 227 0x12341234 0x12341234 0x0"),
        ("graph_unchanged", "5"),
        ("exec_kernel_set_v2", "0"),
        ("exec_set_v2_launch", "1 0"),
        ("exec_node_kernel", "0"),
        ("exec_node_memcpy", "0"),
        ("exec_node_memset", "0"),
        ("exec_node_launch", "0 11 11 0 103 0xabababab 0xabababab 0"),
        ("exec_kernel_on_memcpy", "1"),
        ("exec_memcpy_on_kernel", "1"),
        ("exec_memset_on_memcpy", "1"),
        ("exec_node_kernel_on_memset_node", "1"),
        ("exec_memcpy_memory_type", "1"),
        ("exec_memcpy_2d", "1"),
        ("exec_memset_height", "1"),
        ("exec_memset_empty", "1"),
        ("exec_kernel_other_context", "1"),
        ("exec_kernel_foreign_node", "1"),
        ("exec_kernel_no_exec", "1"),
        ("exec_kernel_no_params", "1"),
        ("refused_unchanged", "11 103 0xabababab"),
        ("child_exec_kernel_set", "0"),
        ("child_exec_launch", "42 0"),
    ]);
}

#[test]
fn whole_graph_updates_carry_kernel_copy_and_memset_parameters() {
    let f = run("sim_graph_params", "exec-edits");
    f.expect_all(&[
        ("update", "0 0"),
        ("update_launch", "5 5 0 0 255 0xbeefbeef 0xbeefbeef 0x0"),
        // 910 CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE: 7 unsupported function change (another
        // context's function), 5 parameters changed (another memory type); the new graph's node.
        ("update_other_context", "910 7 1"),
        ("update_memory_type", "910 5 1"),
        ("update_by_hand", "0 0"),
        // add 11 to 2; the memset of four words of 1; the copy of 100.. to e[256..).
        ("update_by_hand_launch", "13 1 1 100"),
    ]);
}

#[test]
fn disabled_nodes_do_not_run_until_enabled_again() {
    let f = run("sim_graph_params", "enable");
    f.expect_all(&[
        ("enabled_at_first", "1 1 1"),
        ("disable", "0 0 0"),
        ("disabled", "0 0 0"),
        ("disabled_launch", "0 0 0 0 0 0x0 0x0 0x0"),
        ("two_enabled_launch", "0 0 0 0 255 0xbeefbeef 0xbeefbeef 0x0"),
        // Parameters set while disabled take effect once enabled.
        ("set_while_disabled", "0"),
        ("enabled_launch", "13 0"),
        // An update changes no enabled state (the programming guide's rule).
        ("update_keeps_disabled", "0 0"),
        ("update_disabled_launch", "0"),
        ("update_enabled_launch", "5 0"),
        ("captured_without_disabled", "2"),
        ("disable_event_node", "1"),
        ("get_enabled_event_node", "1"),
        ("disable_foreign_node", "1"),
        ("get_enabled_no_out", "1"),
        ("disable_no_exec", "1"),
    ]);
}
