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
