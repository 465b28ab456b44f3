//! Virtual memory management with physical-memory semantics.

use super::run;

const GIB: u64 = 1 << 30;
const GRANULARITY: u64 = 2 << 20;

#[test]
fn two_mappings_of_one_handle_alias() {
    let f = run("sim_vmm", "alias");
    assert_eq!(f.num("granularity"), GRANULARITY);
    f.expect_all(&[
        ("copy_before_access", "1"),
        ("access_flags", "3"),
        ("alias", "1"),
        ("copy_to_unmapped", "1"),
        ("copy_past_mapping", "1"),
        ("properties", "1"),
    ]);
}

#[test]
fn physical_memory_outlives_its_released_handle_until_unmapped() {
    let f = run("sim_vmm", "release-before-unmap");
    assert_eq!(f.num("free_start"), GIB);
    assert_eq!(f.num("free_reserved"), GIB, "reserving addresses takes no memory");
    assert_eq!(
        f.num("free_created"),
        GIB - GRANULARITY,
        "cuMemCreate takes device memory"
    );
    f.expect_all(&[("release", "0"), ("release_again", "1"), ("map_released_handle", "1")]);
    assert_eq!(
        f.num("free_released"),
        GIB - GRANULARITY,
        "still mapped, so still there"
    );
    f.expect("usable_after_release", "1");
    f.expect("unmap", "0");
    assert_eq!(f.num("free_unmapped"), GIB, "freed with its last mapping");
    f.expect_all(&[("copy_after_unmap", "1"), ("address_free", "0")]);
}

#[test]
fn a_retained_handle_needs_its_own_release() {
    let f = run("sim_vmm", "retain");
    f.expect_all(&[("same_handle", "1"), ("kept_by_retain", "1"), ("freed_after_both", "1")]);
}

#[test]
fn a_range_mapped_from_several_handles_is_contiguous() {
    let f = run("sim_vmm", "expandable");
    f.expect_all(&[
        ("across_handles", "1"),
        ("memset_across_handles", "1"),
        ("set_access_with_gap", "1"),
        ("address_free_while_mapped", "1"),
        ("unmap_partial", "1"),
        ("unmap_all", "0"),
        ("address_free", "0"),
    ]);
}

#[test]
fn misuse_of_the_vmm_calls_fails() {
    let f = run("sim_vmm", "errors");
    f.expect_all(&[
        ("reserve_unaligned_size", "1"),
        ("reserve_at_hint", "0"),
        ("hint_honoured", "1"),
        ("create_unaligned_size", "1"),
        ("create_bad_device", "1"),
        ("map_outside_reservation", "1"),
        ("map_beyond_handle", "1"),
        ("map_misaligned", "1"),
        ("map_over_mapping", "1"),
        ("unmap_unmapped", "1"),
        ("address_free_wrong_size", "1"),
        ("release_bogus_handle", "1"),
    ]);
}
