//! Contexts and devices: teardown frees everything a context made, the context stack, several
//! devices, and the state before cuInit.

use super::{run, run_with};

const MIB: u64 = 1 << 20;

#[test]
fn destroying_a_context_frees_every_allocation_made_in_it() {
    let f = run("sim_context", "destroy");
    f.expect("created_is_current", "1");
    // 1 MiB device + 100 KB pitched + 1 MiB managed + 1 MiB async + a 256 KiB array.
    assert_eq!(f.num("used_in_context"), 3 * MIB + 1024 * 100 + 256 * 256 * 4);
    f.expect("popped_to_primary", "1");
    assert_eq!(f.num("used_after_destroy"), 0);
    f.expect_all(&[
        ("free_device", "1"),
        ("free_managed", "1"),
        ("free_async", "1"),
        ("free_host", "1"),
        ("stream", "400"),
        ("event", "400"),
        ("module", "400"),
        ("array", "400"),
        ("destroy_again", "201"),
        ("set_destroyed", "201"),
        ("destroy_primary", "201"),
    ]);
}

#[test]
fn the_primary_context_frees_its_memory_on_last_release_and_on_reset() {
    let f = run("sim_context", "primary");
    f.expect_all(&[
        ("active_before", "0"),
        ("release_unretained", "201"),
        ("same_handle", "1"),
        ("free_after_reset", "1"),
        ("set_flags_v1_while_active", "708"),
        ("set_flags_v2_while_active", "0"),
        ("state", "8 1"),
        ("active_after_last_release", "0"),
        ("alloc_in_released", "201"),
        ("free_from_released", "1"),
    ]);
    assert_eq!(f.num("used_after_first_release"), MIB, "still retained once");
    assert_eq!(f.num("used_after_reset"), 0);
    assert_eq!(f.num("used_after_retain_again"), 0);
}

#[test]
fn the_context_stack_follows_push_pop_and_set() {
    let f = run("sim_context", "stack");
    f.expect_all(&[
        ("initially_none", "1"),
        ("alloc_without_context", "201"),
        ("pop_empty", "201"),
        ("top_is_b", "1"),
        ("popped_b", "1"),
        ("then_a", "1"),
        ("set_replaced_top", "1"),
        ("below_is_a", "1"),
        ("set_null_pops", "1"),
        ("device_of_b", "0"),
        ("distinct_ids", "1"),
        ("sync_v2", "0"),
        ("get_device_without_context", "201"),
    ]);
}

#[test]
fn each_device_has_its_own_heap_and_memory_size() {
    let f = run_with(
        "sim_context",
        "devices",
        &[("SIMCUDA_DEVICES", "2"), ("SIMCUDA_MEM_BYTES", "64MiB")],
    );
    f.expect("count", "2");
    let total = 64 * MIB;
    f.expect(
        "device",
        &format!("1 name simcuda GPU 1 total {total} cc 9 pools 1 vmm 1 uuid_last 1 first_alloc 0x710000000000"),
    );
    assert!(f.text.contains(&format!(
        "device 0 name simcuda GPU 0 total {total} cc 9 pools 1 vmm 1 uuid_last 0 first_alloc 0x700000000000"
    )));
    f.expect_all(&[
        ("get_out_of_range", "101"),
        ("attribute_bad_device", "101"),
        ("unknown_attribute", "0"),
    ]);
}

#[test]
fn only_version_and_error_queries_work_before_cu_init() {
    let f = run("sim_context", "before-init");
    f.expect_all(&[
        ("alloc", "3"),
        ("device_count", "3"),
        ("driver_version", "0"),
        ("version", "13050"),
        ("error_name", "0"),
        ("name", "CUDA_ERROR_OUT_OF_MEMORY"),
        ("string", "invalid argument"),
        ("error_name_unknown", "1"),
        ("export_table", "801"),
        ("export_table_null", "1"),
        ("init_bad_flags", "1"),
        ("init", "0"),
        ("device_count_after", "0"),
        ("count", "1"),
    ]);
}

#[test]
fn with_no_devices_cu_init_fails_and_the_driver_stays_uninitialised() {
    let f = run_with(
        "sim_context",
        "before-init",
        &[("SIMCUDA_DEVICES", "0"), ("SIMCUDA_DRIVER_VERSION", "12090")],
    );
    f.expect_all(&[("version", "12090"), ("init", "100"), ("device_count_after", "3")]);
}
