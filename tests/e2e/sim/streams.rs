//! Streams, events, capture info, graphs' user objects, modules and kernels.

use super::run;

#[test]
fn streams_keep_their_attributes_and_die_with_destroy() {
    let f = run("sim_streams", "streams");
    f.expect_all(&[
        ("flags", "1"),
        ("priority_range", "0 -5"),
        ("clamped_priority", "-5"),
        ("stream_ctx", "1"),
        ("special_stream_ctx", "1 1"),
        ("query", "0"),
        ("sync_null", "0"),
        ("sync_legacy", "0"),
        ("sync_per_thread", "0"),
        ("bad_flags", "1"),
        ("sync_destroyed", "400"),
        ("destroy_destroyed", "400"),
        ("memset_on_destroyed", "400"),
        ("sync_bogus", "400"),
    ]);
}

#[test]
fn stream_callbacks_run_and_may_call_the_driver() {
    let f = run("sim_streams", "streams");
    f.expect_all(&[
        ("callback", "0"),
        ("callback_ptsz", "0"),
        ("callback_calls", "2 inner 0"),
    ]);
}

#[test]
fn events_record_time_and_die_with_destroy() {
    let f = run("sim_streams", "events");
    f.expect_all(&[
        ("query_unrecorded", "0"),
        ("elapsed_unrecorded", "400"),
        ("wait", "0"),
        ("wait_ptsz", "0"),
        ("query", "0"),
        ("synchronize", "0"),
        ("elapsed", "0"),
        ("elapsed_non_negative", "1"),
        ("elapsed_v2", "0"),
        ("elapsed_untimed", "400"),
        ("interprocess_needs_disable_timing", "1"),
        ("record_destroyed", "400"),
        ("wait_destroyed", "400"),
        ("destroy_destroyed", "400"),
    ]);
}

#[test]
fn context_events_record_the_context_s_work_and_refuse_while_it_captures() {
    let f = run("sim_streams", "ctx-events");
    f.expect_all(&[
        ("record", "0"),
        ("record_current", "0"),
        ("elapsed", "0"),
        ("wait", "0"),
        ("record_foreign_event", "400"),
        ("wait_foreign_event", "0"),
        ("record_capturing", "900"),
        ("end_after_record", "901"),
        ("wait_capture_event", "900"),
        ("end_after_wait", "901"),
        ("record_destroyed_ctx", "201"),
        ("wait_destroyed_event", "400"),
    ]);
}

#[test]
fn capture_info_names_the_capture_its_graph_and_its_last_node() {
    let f = run("sim_streams", "capture-info");
    f.expect_all(&[
        // Not capturing: status none, everything else empty.
        ("idle", "0 0 1 1 1 0"),
        // Active (1), with an id and a graph, and nothing to depend on yet.
        ("begun", "1 1 1 0"),
        // The allocation node (type 10) is what the next node depends on.
        ("after_alloc", "1 1 1 10"),
        ("edge_data", "1 0 0"),
        ("edges_without_deps", "1"),
        ("no_status", "1"),
        ("same_graph", "1"),
        ("ended", "0"),
        ("second_id_differs", "1"),
        ("legacy", "0 0"),
        ("bogus", "400"),
    ]);
}

#[test]
fn a_stream_joins_a_capture_by_waiting_for_its_event_and_leaves_it_at_the_end() {
    let f = run("sim_streams", "capture-join");
    f.expect_all(&[
        ("plain_wait_joins", "0"),
        // Active (1), in the origin's capture.
        ("joined", "1 1"),
        ("side_work_deferred", "1"),
        ("wait_from_legacy", "906"),
        ("wait_from_another_capture", "905"),
        ("end_on_joined", "903"),
        ("side_after_end", "0"),
        // The memset, the allocation and the free of the side stream.
        ("graph_nodes", "3"),
        ("stale_event_joins", "0"),
        ("after_launch", "7"),
        ("sync_joined", "900"),
        ("end_invalidated", "901"),
        ("side_after_invalidated_end", "0"),
    ]);
}

#[test]
fn a_capture_into_the_program_s_graph_adds_to_it_after_the_given_nodes() {
    let f = run("sim_streams", "capture-to-graph");
    f.expect_all(&[
        ("foreign_dependency", "1"),
        ("edge_data", "1"),
        ("begin_again", "401"),
        ("deferred", "1"),
        // The allocation node made by hand, then the captured memset.
        ("same_graph", "1 2"),
        ("sync_in_capture", "900"),
        ("end_invalidated", "901"),
        ("graph_kept", "0"),
        ("legacy", "900"),
    ]);
}

#[test]
fn external_event_nodes_are_captured_and_recorded_at_each_launch() {
    let f = run("sim_streams", "capture-external");
    f.expect_all(&[
        ("record_outside", "1"),
        ("wait_outside", "1"),
        ("wait_bad_flags", "1"),
        // A wait node (6), then a record node (7).
        ("nodes", "2 6 7"),
        ("before_launch", "400"),
        ("after_launch", "0"),
        ("joined", "0"),
    ]);
}

#[test]
fn event_nodes_built_by_hand_and_executable_graph_edits_change_later_launches() {
    let f = run("sim_streams", "graph-events");
    f.expect_all(&[
        // A memset (2), a record (7) and a wait (6) node.
        ("types", "3 2 7 6"),
        ("memset_bad_element", "1"),
        ("memset_pitch_too_small", "1"),
        ("record_no_graph", "1"),
        ("record_destroyed_event", "1"),
        ("record_no_out", "1"),
        ("wait_foreign_dependency", "1"),
        ("wait_null_event", "1"),
        ("get", "0 1 0 1"),
        ("record_get_on_wait", "1"),
        ("wait_get_on_record", "1"),
        ("record_set_on_memset", "1"),
        ("wait_set_on_record", "1"),
        ("record_set_destroyed_event", "1"),
        ("wait_set", "0"),
        ("wait_set_got", "1"),
        // An event never recorded has no elapsed time (400); the launch records it.
        ("before_launch", "400"),
        ("launch", "0 7"),
        ("record_set", "0"),
        ("record_set_got", "1"),
        ("graph_set_not_in_exec", "400"),
        ("exec_record_set", "0"),
        ("exec_record_set_launch", "0"),
        ("exec_wait_set", "0"),
        ("exec_record_set_on_wait", "1"),
        ("exec_wait_set_on_record", "1"),
        ("exec_record_set_on_memset", "1"),
        ("exec_record_set_foreign_node", "1"),
        ("exec_record_set_destroyed_event", "1"),
        ("exec_record_set_no_exec", "1"),
        ("update", "0 0 1 1"),
        ("update_launch", "0"),
        ("update_other", "0 0"),
        ("update_other_launch", "0"),
        // The executable graph's nodes keep the identities they were instantiated with.
        ("other_graph_node", "1"),
        ("original_node", "0"),
        // CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE: topology changed (2), node type changed (3,
        // the other graph's node named), and nothing changed.
        ("update_topology", "910 2 1"),
        ("update_type", "910 3 1"),
        ("update_v1_type", "910 3 1"),
        ("refused_unchanged", "400"),
        ("update_no_info", "1"),
        ("update_v1_no_result", "1"),
        ("update_no_exec", "1"),
        ("update_no_graph", "1"),
        ("update_v1", "0 0 1"),
        // An allocation node elsewhere: parameters changed (5).
        ("update_memory", "910 5 1"),
        ("update_memory_same", "0 0"),
        ("memory_launch", "0"),
        ("child_set", "0"),
        ("child_set_launch", "0"),
        ("child_set_type_changed", "1"),
        ("child_set_count_changed", "1"),
        ("child_set_on_memset", "1"),
        ("child_set_foreign_node", "1"),
        ("child_set_no_graph", "1"),
        ("find_in_clone", "0 1"),
        ("find_in_clone_foreign", "1"),
        ("child_node_exec_set", "0"),
        ("child_node_launch", "0"),
        ("params_offset", "16 16"),
        ("add_node_record", "0"),
        ("add_node_wait", "0"),
        ("add_node_types", "7 6"),
        ("add_node_destroyed_event", "1"),
        ("add_node_reserved", "1"),
        ("node_set_params", "0"),
        ("node_set_params_got", "1"),
        ("node_set_params_wrong_type", "1"),
        // A memset node through the generic structure, whose union still holds the event:
        // element size 0, refused (sim::graph_params covers memset parameters).
        ("node_set_params_memset", "1"),
        ("exec_node_set_params", "0"),
        // The executable graph records its new event; the graph's (changed after
        // instantiation) is not recorded.
        ("exec_node_set_params_launch", "0 400"),
        ("exec_node_set_params_wait", "0"),
        ("exec_node_set_params_wrong_type", "1"),
        ("exec_node_set_params_foreign_node", "1"),
        ("exec_node_set_params_memset", "1"),
        ("exec_node_set_params_child", "0"),
        ("captured_launch", "3 2 7 6 1"),
    ]);
}

#[test]
fn stream_memory_operations_write_their_values_and_are_validated() {
    let f = run("sim_streams", "memops");
    f.expect_all(&[
        ("written", "7 1122334455667788 9 5"),
        ("unmet_wait", "0"),
        ("bad_condition", "1"),
        ("bad_write_flags", "1"),
        ("misaligned", "1"),
        ("outside", "1"),
        ("null_address", "1"),
        ("host_written", "3"),
        ("v1_barrier", "1"),
        ("count_zero", "1"),
        ("batch_flags", "1"),
        // The refused batches wrote nothing.
        ("batch_written", "11"),
    ]);
}

#[test]
fn user_objects_are_destroyed_with_their_last_reference() {
    let f = run("sim_streams", "user-objects");
    f.expect_all(&[
        ("create_no_flag", "1"),
        ("create_no_refs", "1"),
        ("after_one_of_two", "0"),
        ("after_the_last", "1"),
        ("release_destroyed", "1"),
        ("graph_retain_bad_flags", "1"),
        // The executable graph holds its own reference.
        ("graph_destroyed", "1"),
        ("exec_destroyed", "2"),
        ("graph_release_too_many", "1"),
        ("graph_released", "2"),
        ("program_released", "3"),
        ("graph_release_unheld", "1"),
        ("parent_destroyed", "3"),
        ("parent_exec_destroyed", "4"),
        ("before_update", "4"),
        ("update_released_old", "5"),
        ("update_holds_new", "5"),
        ("updated_exec_destroyed", "6"),
    ]);
}

#[test]
fn built_in_kernels_run_on_device_memory() {
    let f = run("sim_modules", "modules");
    f.expect_all(&[
        ("load_bad_image", "200"),
        ("missing_function", "500"),
        ("name", "add_u32"),
        ("param", "2 12 4"),
        ("param_out_of_range", "1"),
        ("loading_mode", "2"),
        ("launch_fill", "0"),
        ("fill", "7 7 0"), // 4 x 128 threads cover elements 0..512 only
        ("launch_add", "0"),
        ("add", "12 12 5"),
        ("launch_check_holds", "0"),
        ("launch_check_fails", "710"),
        ("check_wrote_nothing", "12 12 5"),
        ("launch_out_of_bounds", "700"),
        ("out_of_bounds_wrote_nothing", "1"),
        ("launch_too_many_threads", "1"),
        ("launch_no_params", "1"),
        ("launch_unloaded", "400"),
        ("unload_twice", "400"),
    ]);
}

#[test]
fn library_kernels_launch_as_functions_and_as_kernels() {
    let f = run("sim_modules", "libraries");
    f.expect_all(&[
        ("load_bad_image", "200"),
        ("same_kernel", "1"),
        ("same_function", "1"),
        ("kernel_param2_offset", "12"),
        ("func_param_of_kernel", "400"),
        ("kernel_param_of_function", "400"),
        ("launch_function", "0"),
        ("launch_kernel_handle", "0"),
        ("values", "11 9 9"),
        ("launch_after_unload", "400"),
        ("get_kernel_after_unload", "400"),
    ]);
}
