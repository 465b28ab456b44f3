//! The simulated runtime, shared and static: it reaches the driver only through dlopen and
//! the resolver, like NVIDIA's runtime.

use gpuleak_e2e::{client, output_of, sim_command, sim_dir, stdout_of, TempDir};

use super::Facts;

fn runtime(program: &str, env: &[(&str, &str)]) -> Facts {
    Facts::parse(stdout_of(sim_command(client(program)).envs(env.iter().copied())))
}

fn check_round_trip(f: &Facts) {
    f.expect_all(&[
        ("runtime_version", "12090"),
        ("driver_version", "13050"),
        ("device_count", "0 1"),
        ("malloc", "0"),
        ("malloc_zero", "0 1"),
        ("used", "1048576"),
        ("roundtrip", "0 0 1"),
        ("memset", "0"),
        ("bad_direction", "21"),
        ("last_error", "21 then 0"),
        ("malloc_async", "0"),
        ("free_async", "0"),
        ("stream_sync", "0"),
        ("stream_destroy", "0"),
        ("free", "0"),
        ("free_again", "1"),
        ("free_null", "0"),
        ("all_freed", "1"),
        ("entry_point", "0 0 1"),
        ("entry_point_ptsz", "0 1"),
        ("entry_point_unknown", "500 1 1"),
        ("device_reset", "0"),
        ("reset_freed", "1"),
        ("malloc_after_reset", "0"),
        ("device", "0"),
        ("set_device_out_of_range", "101"),
    ]);
}

#[test]
fn the_shared_runtime_round_trips_data() {
    check_round_trip(&runtime("sim_runtime_shared", &[]));
}

#[test]
fn the_static_runtime_behaves_like_the_shared_one() {
    let shared = stdout_of(&mut sim_command(client("sim_runtime_shared")));
    let static_ = stdout_of(&mut sim_command(client("sim_runtime_static")));
    assert_eq!(shared, static_);
    check_round_trip(&Facts::parse(static_));
}

/// The runtime's cudaMalloc reaches the exported cuMemAlloc_v2 (its fault counter counts it)
/// without the program linking libcuda.
#[test]
fn runtime_calls_reach_the_driver_through_the_resolver() {
    for program in ["sim_runtime_shared", "sim_runtime_static"] {
        let f = runtime(program, &[("SIMCUDA_FAIL", "cuMemAlloc_v2:1")]);
        f.expect("malloc", "2");
        f.expect("malloc_after_reset", "0");
    }
}

#[test]
fn the_runtime_refuses_a_driver_older_than_12_0() {
    let f = runtime("sim_runtime_shared", &[("SIMCUDA_DRIVER_VERSION", "11080")]);
    f.expect_all(&[("driver_version", "11080"), ("device_count", "35 0"), ("malloc", "35")]);
}

/// With only libcuda.so.1 on the library path, the static program runs and the shared one
/// cannot even start: the static archive carries the whole runtime.
#[test]
fn the_static_runtime_needs_only_libcuda() {
    let dir = TempDir::new();
    std::os::unix::fs::symlink(sim_dir().join("libcuda.so.1"), dir.path().join("libcuda.so.1")).unwrap();
    let run = |program: &str| {
        let mut cmd = sim_command(client(program));
        cmd.env("LD_LIBRARY_PATH", dir.path());
        output_of(&mut cmd)
    };
    let static_ = run("sim_runtime_static");
    assert!(static_.status.success(), "{}", String::from_utf8_lossy(&static_.stderr));
    check_round_trip(&Facts::parse(String::from_utf8_lossy(&static_.stdout).into_owned()));
    let shared = run("sim_runtime_shared");
    assert!(
        !shared.status.success(),
        "the shared program found a libcudart somewhere"
    );
    assert!(String::from_utf8_lossy(&shared.stderr).contains("libcudart.so.12"));
}

/// sim_runtime_ext: per-thread stream variants, arrays, host registration and graphs.
fn check_runtime_ext(f: &Facts) {
    f.expect("device_count", "0");
    // The _ptsz variants: stream 0 is the per-thread default stream.
    f.expect_all(&[
        ("ptsz_malloc_async", "0"),
        ("ptsz_used", "4096"),
        ("ptsz_free_async", "0"),
        ("ptsz_sync", "0"),
        ("ptsz_released", "1"),
        ("ptsz_malloc_from_pool", "0"),
        ("ptsz_pool_used", "8192"),
        ("ptsz_free_pool", "0"),
        ("ptsz_pool_destroy", "0"),
        ("ptsz_malloc_on_stream", "0"),
        ("ptsz_free_on_stream", "0"),
        ("ptsz_null_out", "1"),
        ("ptsz_all_freed", "1"),
    ]);
    // Arrays: the channel descriptor gives the driver's format and channel count.
    f.expect_all(&[
        ("malloc_array", "0"),
        ("malloc_array_used", "32768"),
        ("free_array", "0"),
        ("free_array_again", "400"),
        ("free_array_null", "0"),
        ("array_gap", "20"),
        ("array_odd_bits", "20"),
        ("array_three_channels", "20"),
        ("array_mixed_sizes", "20"),
        ("array_byte_float", "20"),
        ("array_kind_none", "20"),
        ("array_null_desc", "1"),
        ("array_layered_flag", "1"),
        ("array_zero_width", "1"),
        ("bad_arrays_took_nothing", "1"),
        ("malloc_3d_array", "0"),
        ("malloc_3d_array_used", "16384"),
        ("free_3d_array", "0"),
        ("malloc_3d_layered", "0"),
        ("malloc_3d_layered_used", "12288"),
        ("free_3d_layered", "0"),
        // 16 * (64*32 + 32*16 + 16*8 + 8*4), the driver's mipmapped array size.
        ("malloc_mipmapped", "0"),
        ("malloc_mipmapped_used", "43520"),
        ("free_mipmapped", "0"),
        ("free_mipmapped_again", "400"),
        ("free_mipmapped_null", "0"),
        ("mipmapped_zero_levels", "0"),
        ("mipmapped_zero_levels_used", "32768"),
        ("free_mipmapped_zero_levels", "0"),
        ("mipmapped_bad_desc", "20"),
        // 100 bytes by 10 rows by 3 slices: rows of 512 bytes.
        ("malloc_3d", "0"),
        ("malloc_3d_pitch", "512 100 10"),
        ("malloc_3d_used", "15360"),
        ("malloc_3d_roundtrip", "0 0 1"),
        ("free_3d", "0"),
        ("malloc_3d_null", "1"),
        ("arrays_all_freed", "1"),
    ]);
    f.expect_all(&[
        ("host_register", "0"),
        ("host_register_again", "712"),
        ("host_register_roundtrip", "0 0 1"),
        ("host_unregister", "0"),
        ("host_unregister_again", "713"),
    ]);
    // Captured graphs: the allocation node takes memory only when a launch runs it.
    f.expect_all(&[
        ("capture_begin", "0"),
        ("capture_malloc_async", "0"),
        ("capture_address_in_graph_range", "1"),
        ("capture_copy", "0"),
        ("capture_copy_back", "0"),
        ("capture_free_async", "0"),
        ("capture_end", "0"),
        ("capture_took_nothing", "1"),
        ("instantiate", "0"),
        ("launch", "0"),
        ("launch_roundtrip", "1"),
        ("launch_freed", "1"),
        ("exec_destroy", "0"),
        ("exec_destroy_again", "1"),
        ("instantiate_with_flags", "0"),
        ("launch_ptsz_null_stream", "0"),
        ("launch_ptsz_roundtrip", "1"),
        ("launch_again", "0"),
        ("exec_destroy_flags", "0"),
        ("graph_destroy", "0"),
        ("keep_malloc_async", "0"),
        ("keep_capture_end", "0"),
        ("keep_instantiate", "0"),
        ("keep_launch", "0"),
        ("keep_launch_used", "1048576"),
        ("keep_launch_while_live", "1"),
        ("keep_free", "0"),
        ("keep_freed", "1"),
        ("keep_launch_after_free", "0"),
        ("keep_free_async_ptsz", "0"),
        ("keep_freed_again", "1"),
        ("capture_null_stream", "900"),
    ]);
    // Graphs built node by node, with all four node constructors.
    f.expect_all(&[
        ("graph_create", "0"),
        ("graph_create_flags", "1"),
        ("add_mem_alloc_node", "0"),
        ("alloc_node_address_in_graph_range", "1"),
        ("add_node_alloc", "0"),
        ("add_node_address_in_graph_range", "1"),
        ("add_node_v2_free", "0"),
        ("add_mem_free_node", "0"),
        ("add_mem_free_node_twice", "1"),
        ("add_node_reserved", "1"),
        ("instantiate_with_params", "0"),
        ("instantiate_with_params_result", "0"),
        ("built_launch", "0"),
        ("built_launch_freed", "1"),
        ("built_exec_destroy", "0"),
        ("instantiate_with_params_ptsz", "0"),
        ("built_launch_ptsz", "0"),
        ("built_launch_ptsz_freed", "1"),
        ("built_exec_destroy_ptsz", "0"),
        ("built_graph_destroy", "0"),
        ("add_node_v2_alloc", "0"),
        ("live_instantiate", "0"),
        ("live_launch", "0"),
        ("live_launch_used", "262144"),
        ("live_free_async_ptsz", "0"),
        ("live_freed", "1"),
        ("all_freed", "1"),
        ("last_error_after_reset", "0"),
    ]);
}

#[test]
fn the_runtime_s_later_entry_points_reach_the_driver() {
    let shared = stdout_of(&mut sim_command(client("sim_runtime_ext_shared")));
    let static_ = stdout_of(&mut sim_command(client("sim_runtime_ext_static")));
    assert_eq!(shared, static_);
    check_runtime_ext(&Facts::parse(shared));
}

/// Each cuda* function resolves its driver entry point by base name, ABI version and flags:
/// the fault counter of the exact variant counts the runtime's call.
#[test]
fn runtime_calls_reach_the_exact_driver_variants() {
    let cases = [
        ("cuMemAllocAsync_ptsz:1", "ptsz_malloc_async", "2"),
        ("cuMemAllocFromPoolAsync_ptsz:1", "ptsz_malloc_from_pool", "2"),
        ("cuMemFreeAsync_ptsz:1:999", "ptsz_free_async", "999"),
        ("cuArrayCreate_v2:1", "malloc_array", "2"),
        ("cuArray3DCreate_v2:1", "malloc_3d_array", "2"),
        ("cuMipmappedArrayCreate:1", "malloc_mipmapped", "2"),
        ("cuArrayDestroy:1:999", "free_array", "999"),
        ("cuMipmappedArrayDestroy:1:999", "free_mipmapped", "999"),
        ("cuMemAllocPitch_v2:1", "malloc_3d", "2"),
        ("cuMemHostRegister_v2:1", "host_register", "2"),
        ("cuMemHostUnregister:1:999", "host_unregister", "999"),
        ("cuStreamBeginCapture_v2:1:999", "capture_begin", "999"),
        ("cuStreamEndCapture:1:999", "capture_end", "999"),
        ("cuGraphInstantiateWithFlags:1:999", "instantiate", "999"),
        ("cuGraphInstantiateWithFlags:2:999", "instantiate_with_flags", "999"),
        ("cuGraphLaunch:1:999", "launch", "999"),
        ("cuGraphLaunch_ptsz:1:999", "launch_ptsz_null_stream", "999"),
        ("cuGraphExecDestroy:1:999", "exec_destroy", "999"),
        ("cuGraphDestroy:1:999", "graph_destroy", "999"),
        ("cuGraphCreate:1:999", "graph_create", "999"),
        ("cuGraphAddMemAllocNode:1:999", "add_mem_alloc_node", "999"),
        ("cuGraphAddNode:1:999", "add_node_alloc", "999"),
        ("cuGraphAddNode_v2:1:999", "add_node_v2_free", "999"),
        ("cuGraphAddMemFreeNode:1:999", "add_mem_free_node", "999"),
        ("cuGraphInstantiateWithParams:1:999", "instantiate_with_params", "999"),
        (
            "cuGraphInstantiateWithParams_ptsz:1:999",
            "instantiate_with_params_ptsz",
            "999",
        ),
    ];
    for program in ["sim_runtime_ext_shared", "sim_runtime_ext_static"] {
        for (fail, key, expected) in cases {
            let f = runtime(program, &[("SIMCUDA_FAIL", fail)]);
            assert_eq!(f.get(key), expected, "{program} with SIMCUDA_FAIL={fail}");
        }
    }
}

/// A driver older than an entry point's ABI: only the calls that need it fail, with
/// cudaErrorCallRequiresNewerDriver (36); the runtime still starts.
#[test]
fn calls_that_need_a_newer_driver_fail_alone() {
    let f = runtime("sim_runtime_ext_shared", &[("SIMCUDA_DRIVER_VERSION", "12010")]);
    f.expect_all(&[
        ("add_node_alloc", "36"),
        ("add_node_v2_free", "36"),
        ("add_node_v2_alloc", "36"),
        ("malloc_array", "0"),
        ("malloc_mipmapped", "0"),
        ("instantiate", "0"),
        ("launch", "0"),
        ("add_mem_alloc_node", "0"),
        ("instantiate_with_params", "0"),
    ]);
    // Below 12.0 the runtime refuses the driver before looking at any entry point.
    let f = runtime("sim_runtime_ext_shared", &[("SIMCUDA_DRIVER_VERSION", "11080")]);
    f.expect_all(&[("device_count", "35"), ("malloc_array", "35"), ("add_node_alloc", "35")]);
}
