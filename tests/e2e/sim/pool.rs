//! Stream-ordered allocation and memory pools.

use super::run;

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

#[test]
fn freed_blocks_stay_reserved_and_reused_until_a_synchronisation() {
    let f = run("sim_pool", "reuse");
    f.expect("current_is_default", "1");
    f.expect("start", &format!("used 0 reserved 0 free {GIB}"));
    f.expect("allocated", &format!("used {MIB} reserved {MIB} free {}", GIB - MIB));
    f.expect("freed", &format!("used 0 reserved {MIB} free {}", GIB - MIB));
    f.expect_all(&[("reused", "1"), ("free_sync", "0"), ("free_twice", "1")]);
    f.expect("synchronized", &format!("used 0 reserved 0 free {GIB}"));
    f.expect("high", &format!("used {MIB} reserved {MIB}"));
    f.expect_all(&[("high_used_after_reset", "0"), ("set_used_current", "1")]);
}

#[test]
fn the_release_threshold_keeps_memory_across_synchronisation_until_trimmed() {
    let f = run("sim_pool", "threshold");
    assert_eq!(f.num("threshold"), 4 * MIB);
    f.expect(
        "synchronized",
        &format!("used 0 reserved {} free {}", 2 * MIB, GIB - 2 * MIB),
    );
    f.expect("trimmed", &format!("used 0 reserved 0 free {GIB}"));
}

#[test]
fn created_pools_serve_allocations_and_outlive_destruction_while_used() {
    let f = run("sim_pool", "created-pool");
    f.expect_all(&[("distinct", "1"), ("set_current", "1")]);
    f.expect(
        "two_allocations",
        &format!("used {} reserved {} free {}", 2 * MIB, 2 * MIB, GIB - 2 * MIB),
    );
    f.expect_all(&[
        ("destroy_default", "1"),
        ("destroy", "0"),
        ("current_back_to_default", "1"),
        ("usable_after_destroy", "1"),
        ("freed_to_device", "1"),
        ("alloc_from_destroyed", "1"),
        ("create_bad_device", "1"),
    ]);
}

#[test]
fn per_thread_variants_and_default_streams_work() {
    let f = run("sim_pool", "per-thread");
    f.expect_all(&[
        ("alloc_ptsz_per_thread", "0"),
        ("alloc_ptsz_null", "0"),
        ("free_ptsz", "0"),
        ("free", "0"),
        ("sync_ptsz", "0"),
        ("released", "1"),
        ("alloc_zero", "1"),
        ("bad_stream", "400"),
    ]);
}

#[test]
fn an_allocation_under_stream_capture_creates_no_memory() {
    let f = run("sim_pool", "capture");
    f.expect_all(&[
        ("begin_legacy", "900"),
        ("begin_twice", "401"),
        ("capturing", "1"),
        ("null_capturing", "0"),
        ("alloc_in_capture", "0"),
        ("no_memory_taken", "1"),
        ("copy_to_graph_address", "1"),
        ("free_in_capture", "0"),
        ("free_outside_pointer_in_capture", "1"),
        ("end", "0"),
        ("graph", "1"),
        ("graph_destroy", "0"),
        ("graph_destroy_again", "1"),
        ("end_not_capturing", "401"),
    ]);
    let address = f.num("graph_address");
    assert!((0x5a00_0000_0000..0x5b00_0000_0000).contains(&address), "{address:#x}");
}

#[test]
fn synchronising_a_capturing_stream_invalidates_the_capture() {
    let f = run("sim_pool", "capture");
    f.expect_all(&[
        ("alloc_in_second_capture", "0"),
        ("sync_in_capture", "900"),
        ("invalidated", "2"),
        ("end_invalidated", "901"),
        ("graph_after_invalidation", "1"),
        ("capturing_after_end", "0"),
        ("free_outside_after_capture", "0"),
    ]);
}

#[test]
fn pointers_of_a_shared_pool_import_as_one_reference_counted_alias_freed_by_cumemfree() {
    let f = run("sim_pool", "share");
    // Only a pool made with POSIX descriptor handles exports; an imported pool allocates
    // nothing; pointers import through the imported pool only.
    f.expect_all(&[
        ("export_unshareable", "1"),
        ("alloc_from_imported", "1"),
        ("import_into_exporter", "1"),
    ]);
    f.expect_all(&[("one_alias", "1"), ("same_memory", "1"), ("range", &format!("1 {MIB}"))]);
    // Freed by cuMemFree or cuMemFreeAsync, once per import; never closed like IPC.
    f.expect_all(&[
        ("ipc_close", "1"),
        ("free_async", "0"),
        ("free", "0"),
        ("free_again", "1"),
    ]);
    // A freed allocation neither exports nor imports.
    f.expect_all(&[("export_freed", "1"), ("import_freed", "1")]);
}
