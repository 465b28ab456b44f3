//! The device heap: first fit with real holes, reproducible fragmentation, memory size
//! settings, frees that must fail, and fault injection.

use gpuleak_e2e::{client, sim_command};

use super::{run, run_with, stdout_and_stderr, Facts};

const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;

#[test]
fn a_freed_block_leaves_a_hole_that_later_allocations_reuse() {
    let f = run("sim_heap", "first-fit");
    let (a, b, c) = (f.num("A"), f.num("B"), f.num("C"));
    assert_eq!(a, 0x7000_0000_0000, "device 0's heap starts at its fixed base");
    assert_eq!((b, c), (a + MIB, a + 2 * MIB), "blocks are placed first-fit, in order");
    assert_eq!(f.num("D"), b, "a smaller allocation lands in B's hole");
    assert_eq!(f.num("E"), b + MIB / 2, "and the next one fills the rest of it");
    assert_eq!(f.num("F"), b, "freed neighbours coalesce into one 2 MiB hole at B");
}

#[test]
fn fragmentation_fails_an_allocation_although_enough_memory_is_free() {
    let f = run_with("sim_heap", "fragment", &[("SIMCUDA_MEM_BYTES", "16MiB")]);
    f.expect("blocks", "16");
    f.expect("free_when_full", "0");
    assert_eq!(f.num("free_with_holes"), 8 * MIB);
    f.expect("alloc_2mib", "2"); // CUDA_ERROR_OUT_OF_MEMORY: no hole holds 2 MiB
    f.expect("alloc_2mib_out", "0xabcdef"); // a failed call leaves the out-parameter alone
    f.expect("alloc_1mib", "0");
    assert_eq!(f.num("alloc_1mib_at"), f.num("first_hole"));
}

#[test]
fn the_memory_size_setting_accepts_bytes_and_binary_suffixes() {
    for value in ["67108864", "65536K", "64M", "64MiB", "65536KiB"] {
        let f = run_with("sim_heap", "meminfo", &[("SIMCUDA_MEM_BYTES", value)]);
        assert_eq!(f.num("total"), 64 * MIB, "SIMCUDA_MEM_BYTES={value}");
        assert_eq!(f.num("device_total"), 64 * MIB, "SIMCUDA_MEM_BYTES={value}");
    }
    let f = run_with("sim_heap", "meminfo", &[("SIMCUDA_MEM_BYTES", "2GiB")]);
    assert_eq!(f.num("total"), 2 * GIB);
}

#[test]
fn bad_settings_warn_once_and_keep_the_defaults() {
    let mut cmd = sim_command(client("sim_heap"));
    cmd.arg("meminfo").envs([
        ("SIMCUDA_MEM_BYTES", "12Q"),
        ("SIMCUDA_DEVICES", "9"),
        ("SIMCUDA_DRIVER_VERSION", "twelve"),
    ]);
    let (stdout, stderr) = stdout_and_stderr(&mut cmd);
    let f = Facts::parse(stdout);
    assert_eq!(f.num("total"), GIB);
    for var in [
        "SIMCUDA_MEM_BYTES=12Q",
        "SIMCUDA_DEVICES=9",
        "SIMCUDA_DRIVER_VERSION=twelve",
    ] {
        let lines = stderr.lines().filter(|l| l.contains(var)).count();
        assert_eq!(lines, 1, "one warning for {var}:\n{stderr}");
    }
}

#[test]
fn mem_get_info_tracks_allocations_in_256_byte_blocks() {
    let f = run("sim_heap", "meminfo");
    assert_eq!(f.num("total"), GIB, "the default device has 1 GiB");
    assert_eq!(f.num("free_before"), GIB);
    assert_eq!(f.num("free_during"), GIB - 1024, "1000 bytes take a 1024-byte block");
    assert_eq!(f.num("free_after"), GIB);
}

#[test]
fn invalid_and_double_frees_fail_with_invalid_value() {
    let f = run("sim_heap", "bad-frees");
    f.expect_all(&[
        ("interior", "1"),
        ("first", "0"),
        ("second", "1"),
        ("unknown", "1"),
        ("null", "1"),
        ("zero_size", "1"),
    ]);
}

#[test]
fn pitch_allocations_align_rows_to_512_bytes() {
    let f = run("sim_heap", "pitch");
    f.expect_all(&[
        ("alloc", "0"),
        ("pitch", "512"),
        ("bad_element_size", "1"),
        ("free", "0"),
    ]);
    assert_eq!(f.num("used"), 5120);
}

#[test]
fn an_injected_fault_fails_exactly_the_nth_call_and_does_nothing() {
    let f = run_with("sim_heap", "faults", &[("SIMCUDA_FAIL", "cuMemAlloc_v2:2")]);
    f.expect_all(&[
        ("alloc1", "0"),
        ("alloc2", "2"),
        ("alloc2_out", "0xabc"),
        ("alloc3", "0"),
    ]);
    // The failed call took no memory: the third allocation directly follows the first.
    assert_eq!(f.num("alloc3_out"), f.num("alloc1_out") + 1024);
    f.expect_all(&[("stream1", "0"), ("stream2", "0"), ("sync1", "0"), ("sync2", "0")]);
}

#[test]
fn injected_faults_take_explicit_codes_and_default_to_unknown_for_other_calls() {
    let fail = "cuMemAlloc_v2:1:999,cuStreamCreate:2,cuCtxSynchronize:1:201";
    let f = run_with("sim_heap", "faults", &[("SIMCUDA_FAIL", fail)]);
    f.expect_all(&[
        ("alloc1", "999"),
        ("alloc2", "0"),
        ("stream1", "0"),
        ("stream2", "999"),
        ("sync1", "201"),
        ("sync2", "0"),
    ]);
}

#[test]
fn bad_fault_entries_are_reported_and_ignored() {
    let mut cmd = sim_command(client("sim_heap"));
    cmd.arg("faults").env(
        "SIMCUDA_FAIL",
        "cuNoSuchCall:1,cuMemAlloc_v2:0,cuMemAlloc_v2,cuMemAlloc_v2:3",
    );
    let (stdout, stderr) = stdout_and_stderr(&mut cmd);
    let f = Facts::parse(stdout);
    f.expect_all(&[("alloc1", "0"), ("alloc2", "0"), ("alloc3", "2")]);
    assert_eq!(
        stderr.lines().filter(|l| l.starts_with("simcuda: ignoring")).count(),
        3,
        "{stderr}"
    );
    assert!(stderr.contains("cuNoSuchCall:1"), "{stderr}");
}

#[test]
fn arrays_take_their_extent_of_device_memory() {
    let f = run("sim_heap", "arrays");
    assert_eq!(f.num("used_2d"), (1000 * 10 * 2 * 2u64).next_multiple_of(256));
    assert_eq!(f.num("used_both"), f.num("used_2d") + 64 * 32 * 8 * 4 * 4);
    f.expect_all(&[
        ("descriptor_2d", "1000 10 16 2"),
        ("descriptor_3d", "64 32 8 32 4"),
        ("depth_of_2d", "0"),
        ("bad_format", "1"),
        ("bad_channels", "1"),
        ("destroy", "0"),
        ("destroy_again", "400"),
        ("descriptor_destroyed", "400"),
        ("destroy_3d", "0"),
        ("used_after", "0"),
    ]);
}

/// The simulator's mipmapped array size (simcuda/README.md): the sum over the levels of
/// max(1, w >> l) * H_l * D_l * element bytes, where a zero height or depth counts 1, and the
/// depth of a layered or cubemap array (a layer count) is never halved; the levels clamped to
/// [1, 1 + floor(log2(largest extent))].
fn mipmap_bytes(w: u64, h: u64, d: u64, elem: u64, layers: bool, levels: u32) -> u64 {
    let half = |x: u64, l: u32| x.checked_shr(l).unwrap_or(0).max(1);
    let largest = w.max(h).max(if layers { 0 } else { d });
    let levels = levels.clamp(1, 1 + largest.ilog2());
    (0..levels)
        .map(|l| {
            let hl = if h == 0 { 1 } else { half(h, l) };
            let dl = match (d, layers) {
                (0, _) => 1,
                (d, true) => d,
                (d, false) => half(d, l),
            };
            half(w, l) * hl * dl * elem
        })
        .sum()
}

/// "<result> <bytes taken>" as sim_heap prints them, the bytes being whole 256-byte blocks.
fn created(bytes: u64) -> String {
    format!("0 {}", bytes.next_multiple_of(256))
}

#[test]
fn mipmapped_arrays_take_every_level_from_the_heap() {
    let f = run("sim_heap", "mipmaps");
    // 64 x 32 float4, 4 levels: exactly 16 * (64*32 + 32*16 + 16*8 + 8*4) bytes.
    assert_eq!(
        mipmap_bytes(64, 32, 0, 16, false, 4),
        16 * (64 * 32 + 32 * 16 + 16 * 8 + 8 * 4)
    );
    f.expect("mip_2d", "0 43520");
    // Layered: 6 layers at every level, 4 * 6 * (32*16 + 16*8 + 8*4) = 16128 bytes.
    f.expect("mip_layered", "0 16128");
    assert_eq!(mipmap_bytes(32, 16, 6, 4, true, 3), 16128);
    f.expect("mip_cubemap", &created(mipmap_bytes(16, 16, 6, 4, true, 5)));
    f.expect("mip_3d", &created(mipmap_bytes(16, 16, 16, 1, false, 5)));
    f.expect("mip_1d", &created(mipmap_bytes(64, 0, 0, 4, false, 7)));
    // Levels are clamped: 64 halves six times, so seven levels of 100; one of none.
    assert_eq!(
        mipmap_bytes(64, 0, 0, 16, false, 100),
        16 * (64 + 32 + 16 + 8 + 4 + 2 + 1)
    );
    f.expect("mip_deep", &created(mipmap_bytes(64, 0, 0, 16, false, 100)));
    f.expect("mip_zero_levels", &created(64 * 32 * 16));
    f.expect_all(&[
        ("mip_huge_levels", "0 256"),
        ("mip_zero_width", "1 0"),
        ("mip_bad_format", "1 0"),
        ("mip_bad_channels", "1 0"),
        ("mip_overflow", "2 0"),
        ("mip_null_handle", "1"),
        ("mip_null_desc", "1"),
    ]);
    // Levels: arrays with the level's extents (format 0x20 float, flags kept), one handle each.
    f.expect_all(&[
        ("level0", "0"),
        ("level3", "0"),
        ("level3_same_handle", "1"),
        ("level_not_mipmap", "1"),
        ("level4", "1"),
        ("level_null_out", "1"),
        ("level_bad_handle", "400"),
        ("level0_desc", "64 32 0 32 4 0"),
        ("level3_desc", "8 4 0 32 4 0"),
        ("layered_level2_desc", "8 4 6 32 1 1"),
        ("level2_3d_desc", "4 4 4 1 1 0"),
        ("deep_level6", "0"),
        ("deep_level6_desc", "1 0 0 32 4 0"),
        ("deep_level7", "1"),
    ]);
    // Only the mipmapped array itself can be destroyed, once; its levels die with it.
    f.expect_all(&[
        ("destroy_level", "400"),
        ("destroy_as_array", "400"),
        ("destroy_array_as_mipmap", "400"),
        ("destroy", "0"),
        ("destroy_freed", "43520"),
        ("destroy_again", "400"),
        ("level_after_destroy", "400"),
        ("level0_desc_after_destroy", "400"),
        ("destroy_level_after_destroy", "400"),
        ("destroy_null", "400"),
        ("used_after", "0"),
    ]);
}

#[test]
fn mipmapped_arrays_die_with_their_context() {
    let f = run("sim_heap", "mipmap-teardown");
    f.expect_all(&[
        ("used", "43520"),
        ("reset", "0"),
        ("reset_freed", "1"),
        ("destroy_after_reset", "400"),
        ("level_after_reset", "400"),
        ("used_in_created", "43520"),
        ("ctx_destroy", "0"),
        ("ctx_destroy_freed", "1"),
        ("destroy_after_ctx_destroy", "400"),
        ("level_after_ctx_destroy", "400"),
    ]);
}

#[test]
fn an_injected_fault_fails_a_mipmapped_array_with_out_of_memory() {
    let f = run_with(
        "sim_heap",
        "mipmap-faults",
        &[("SIMCUDA_FAIL", "cuMipmappedArrayCreate:1")],
    );
    f.expect_all(&[
        ("create1", "2"),
        ("create1_used", "0"),
        ("create2", "0"),
        ("create2_used", "43520"),
    ]);
}

#[test]
fn the_32_bit_entry_points_exist_but_are_not_supported() {
    let f = run("sim_heap", "legacy");
    f.expect_all(&[
        ("alloc_v1", "801"),
        ("alloc_v1_out", "4660"),
        ("mem_get_info_v1", "801"),
        ("memcpy_v1", "801"),
        ("device_memory_untouched", "1"),
    ]);
}
