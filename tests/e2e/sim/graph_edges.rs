//! Graph edges: the dependencies graphs built by hand and captured graphs keep
//! (`cuGraphGetEdges`), a capture's current dependencies stream by stream
//! (`cuStreamGetCaptureInfo`, `cuStreamUpdateCaptureDependencies`), child graphs' copies, and
//! edges added between existing nodes (`tests/clients/sim_graph_edges.c`). Nodes are printed
//! as their positions in `cuGraphGetNodes` order, an edge as `from>to` (to depends on from).

use super::run;

/// The hand-built fork and join: A (0); B (1) and C (2) after A; D (3) after B and C.
const DIAMOND: &str = "4 0>1 0>2 1>3 2>3";

#[test]
fn a_hand_built_fork_and_join_reads_back_its_edges() {
    let f = run("sim_graph_edges", "hand-built");
    f.expect_all(&[
        ("count", "0"),
        ("count_value", "4"),
        ("count_v2", "0"),
        ("count_v2_value", "4"),
        ("edges", DIAMOND),
        ("full_v2", "0"),
        ("full_v2_edges", DIAMOND),
        // Zeroed edge data, CUgraphEdgeData being 8 bytes.
        ("full_v2_data_zero", "1 8"),
        // Room for 6: the last two pairs NULL, the count written back as 4.
        ("oversized", "0"),
        ("oversized_count", "4"),
        ("oversized_edges", "6 0>1 0>2 1>3 2>3 - -"),
        ("oversized_data_zero", "1"),
        // Room for 2: the first two edges, in the order they were made.
        ("undersized", "0"),
        ("undersized_edges", "2 0>1 0>2"),
        ("v2_no_data", "0"),
        ("v2_no_data_edges", DIAMOND),
    ]);
}

#[test]
fn edge_queries_and_dependency_arrays_refuse_what_they_must() {
    let f = run("sim_graph_edges", "hand-built");
    f.expect_all(&[
        ("no_count", "1"),
        ("no_count_v2", "1"),
        ("no_graph", "1"),
        ("data_without_from", "1"),
        ("data_without_both", "1"),
        ("from_without_to", "1"),
        // A dependency named twice or a node of another graph: refused, nothing added.
        ("duplicate_dependency", "1"),
        ("after_duplicate", "4 4"),
        ("foreign_dependency", "1"),
        ("after_foreign", "4"),
        ("destroyed_graph", "1"),
    ]);
}

#[test]
fn every_node_adding_entry_point_records_its_dependencies() {
    let f = run("sim_graph_edges", "entry-points");
    for key in [
        "kernel",
        "kernel_v2",
        "memcpy",
        "memset",
        "alloc",
        "free",
        "child",
        "record",
        "wait",
        "add_node",
        "add_node_v2",
    ] {
        f.expect(key, "0");
    }
    f.expect("kernel_refused", "1");
    // Each node after the root (0); the free node (6) after the allocation (5) and the root,
    // in its array's order; the refused kernel node left no edge.
    f.expect("edges", "12 0>1 0>2 0>3 0>4 0>5 5>6 0>6 0>7 0>8 0>9 0>10 0>11");
}

#[test]
fn a_capture_forked_through_an_event_keeps_each_streams_dependencies() {
    let f = run("sim_graph_edges", "capture");
    f.expect_all(&[
        ("begun", "0"),
        ("after_a", "1 0"),
        // The joining stream starts from what the event remembered.
        ("joined", "1 0"),
        // After the fork each stream has its own node.
        ("fork_s1", "1 1"),
        ("fork_s2", "1 2"),
        ("fork_s1_v3", "1 1 zero=1"),
        ("fork_s2_v3", "1 2 zero=1"),
        // The join: the origin depends on both branches, the side stream keeps its own.
        ("join_s1", "2 1 2"),
        ("join_s1_v3", "2 1 2 zero=1"),
        ("join_s2", "1 2"),
        ("join_again", "2 1 2"),
        ("after_d", "1 3"),
        ("after_d_v3", "1 3 zero=1"),
        // Two branches with no edge between them, and the join.
        ("edges", DIAMOND),
        // An event recorded before any node: the side stream's node is a root of its own.
        ("empty_fork", "0"),
        ("roots_edges", "2 1>2 0>2"),
    ]);
}

#[test]
fn update_capture_dependencies_adds_to_and_replaces_a_streams_set() {
    let f = run("sim_graph_edges", "update");
    f.expect_all(&[
        ("not_capturing", "401"),
        ("not_capturing_ptsz", "401"),
        ("add", "0"),
        ("added", "2 1 0"),
        // A node already there is not added twice.
        ("add_again", "0"),
        ("added_again", "2 1 0"),
        ("set", "0"),
        ("set_deps", "1 0 zero=1"),
        ("duplicate", "1"),
        ("foreign", "1"),
        ("null_nodes", "1"),
        ("bad_flags", "1"),
        ("v2_edge_data", "1"),
        ("refused_unchanged", "1 0"),
        ("after_c", "1 2"),
        ("set_none", "0"),
        ("none", "0"),
        ("v2_add", "0"),
        ("v2_added", "3 3 0 1"),
        ("v2_set_null_data", "0"),
        ("v2_set", "1 1"),
        // B (1) and C (2) after A (0), D (3) a root, E (4) after B.
        ("edges", "3 0>1 0>2 1>4"),
        ("sync", "900"),
        ("invalidated", "901"),
        ("end_invalidated", "901"),
    ]);
}

#[test]
fn a_capture_into_a_graph_starts_from_the_given_nodes_and_a_launch_appends_a_chain() {
    let f = run("sim_graph_edges", "into-graph");
    f.expect_all(&[
        ("begun", "2 1 2 zero=1"),
        ("to_graph_edges", "6 0>1 0>2 1>3 2>3 1>4 2>4"),
        ("to_graph_duplicate", "1"),
        // The launched fork and join comes in as a chain after the stream's node.
        ("after_launch", "1 4"),
        ("launch_edges", "4 0>1 1>2 2>3 3>4"),
    ]);
}

#[test]
fn child_graphs_keep_their_edges() {
    let f = run("sim_graph_edges", "child");
    f.expect_all(&[
        ("parent_edges", "2 0>1 0>2"),
        ("copy_is_other", "1"),
        ("copy_edges", DIAMOND),
        ("copy_join_is_clone", "1"),
        ("original_edges", "5 0>1 0>2 1>3 2>3 3>4"),
        ("copy_edges_after", DIAMOND),
        ("moved_is_same", "1"),
        ("moved_edges", DIAMOND),
        ("nested_parent_edges", "2 0>1 0>2"),
        ("nested_inner_edges", DIAMOND),
    ]);
}

#[test]
fn added_dependencies_order_launches_and_refuse_duplicates_and_cycles() {
    let f = run("sim_graph_edges", "add-deps");
    f.expect_all(&[
        // Two memsets of one word, 2 then 1 in node order.
        ("node_order_run", "1"),
        ("add", "0"),
        ("edges", "1 1>0"),
        // With node 0 after node 1, a launch writes 1 then 2.
        ("dependency_order_run", "2"),
        ("existing", "1"),
        ("cycle", "1"),
        ("self", "1"),
        ("twice_in_one_call", "1"),
        ("after_refused", "1 1>0"),
        ("v2_edge_data", "1"),
        ("v2_null_data", "0"),
        ("none", "0"),
        ("null_nodes", "1"),
        ("foreign", "1"),
        ("no_graph", "1"),
        ("final_edges", "2 1>0 0>2"),
        ("final_run", "3"),
    ]);
}

#[test]
fn the_resolver_answers_the_edge_and_dependency_entry_points_by_version() {
    let f = run("sim_graph_edges", "resolver");
    f.expect_all(&[
        ("edges_10000", "0 1"),
        ("edges_12030", "0 1"),
        ("add_deps_10000", "0 1"),
        ("add_deps_12030", "0 1"),
        ("update_11030", "0 1"),
        ("update_11030_ptsz", "0 1"),
        ("update_12030", "0 1"),
        ("update_12030_ptsz", "0 1"),
        // Before 11.3: not found (version not sufficient), a NULL pointer.
        ("update_11020", "500 1"),
    ]);
}
