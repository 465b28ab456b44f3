//! Memory that is not a plain allocation: VMM handles and reservations (released, retained,
//! imported, multicast), registered and IPC memory, pool imports and external memory, each
//! released by its own calls, some reported but not owned.

use super::*;

#[test]
fn a_released_vmm_handle_still_mapped_is_leaked() {
    let r = Script::default()
        .alloc(Api::cuMemAddressReserve, 0x6000_0000, 4 << 20, 1)
        .alloc(Api::cuMemCreate, 0x55, 2 << 20, 2)
        .map(0x6000_0000, 2 << 20, 0x55)
        .free(Api::cuMemRelease, 0x55)
        .free(Api::cuMemAddressFree, 0x6000_0000)
        .run();
    assert_eq!(r.leaks.len(), 1);
    let l = &r.leaks[0];
    assert_eq!(
        (l.kind, l.bytes, l.released_but_mapped),
        (MemKind::VmmPhysical, 2 << 20, 1)
    );
    assert_eq!(leaked_bytes(&r), 2 << 20);
    assert!(r.bad_frees.is_empty());
}

#[test]
fn a_released_and_unmapped_vmm_handle_is_freed_in_either_order() {
    for release_first in [true, false] {
        let mut s = Script::default();
        s.alloc(Api::cuMemAddressReserve, 0x6000_0000, 4 << 20, 1)
            .alloc(Api::cuMemCreate, 0x55, 2 << 20, 2)
            .map(0x6000_0000, 2 << 20, 0x55);
        if release_first {
            s.free(Api::cuMemRelease, 0x55).unmap(0x6000_0000, 2 << 20);
        } else {
            s.unmap(0x6000_0000, 2 << 20).free(Api::cuMemRelease, 0x55);
        }
        s.free(Api::cuMemAddressFree, 0x6000_0000);
        let r = s.run();
        assert!(r.leaks.is_empty(), "release first: {release_first}: {:?}", r.leaks);
        assert!(r.bad_frees.is_empty());
        assert_eq!(r.peak_bytes, 2 << 20, "the reservation is no memory");
    }
}

#[test]
fn an_unreleased_handle_and_reservation_are_reported_but_only_the_handle_is_memory() {
    let r = Script::default()
        .alloc(Api::cuMemAddressReserve, 0x6000_0000, 4 << 20, 1)
        .alloc(Api::cuMemCreate, 0x55, 2 << 20, 2)
        .run();
    assert_eq!(r.leaks.len(), 2);
    assert_eq!(leaked_bytes(&r), 2 << 20);
    assert!(r.leaks.iter().any(|l| l.kind == MemKind::VmmReserve));
}

#[test]
fn registered_and_ipc_memory_is_reported_but_not_owned() {
    let r = Script::default()
        .alloc(Api::cuMemHostRegister_v2, 0x5000, 65536, 1)
        .alloc(Api::cuIpcOpenMemHandle_v2, 0x5800, 0, 2)
        .run();
    assert_eq!(r.leaks.len(), 2);
    assert_eq!(leaked_bytes(&r), 0);
    assert_eq!(r.peak_bytes, 0);
}

#[test]
fn a_double_release_of_a_still_mapped_handle_is_a_bad_free() {
    let r = Script::default()
        .alloc(Api::cuMemCreate, 0x55, 4096, 2)
        .map(0x6000_0000, 4096, 0x55)
        .free(Api::cuMemRelease, 0x55)
        .free_with(Api::cuMemRelease, 0x55, 1, 8)
        .unmap(0x6000_0000, 4096)
        .run();
    assert_eq!(r.bad_frees.len(), 1);
    assert!(matches!(r.bad_frees[0].cause, BadFreeCause::DoubleFree(f) if f.site.stack == StackId(2)));
    assert!(r.leaks.is_empty());
}

#[test]
fn a_retained_handle_needs_one_release_per_reference() {
    // NCCL's free: retain the mapped handle, release it, unmap, release it again.
    let free_like_nccl = |s: &mut Script| {
        s.alloc(Api::cuMemRetainAllocationHandle, 0x55, 0, 9)
            .free(Api::cuMemRelease, 0x55)
            .unmap(0x6000_0000, 2 << 20)
            .free(Api::cuMemRelease, 0x55);
    };
    let mut s = Script::default();
    s.alloc(Api::cuMemCreate, 0x55, 2 << 20, 2)
        .map(0x6000_0000, 2 << 20, 0x55);
    free_like_nccl(&mut s);
    let r = s.run();
    assert!(r.leaks.is_empty(), "{:?}", r.leaks);
    assert!(r.bad_frees.is_empty(), "{:?}", r.bad_frees);
    assert_eq!((r.counts.allocations, r.counts.retains), (1, 1));

    // A retain to inspect the buffer, never released: the memory outlives the free.
    let mut s = Script::default();
    s.alloc(Api::cuMemCreate, 0x55, 2 << 20, 2)
        .map(0x6000_0000, 2 << 20, 0x55)
        .alloc(Api::cuMemRetainAllocationHandle, 0x55, 0, 9);
    free_like_nccl(&mut s);
    let r = s.run();
    assert!(r.bad_frees.is_empty(), "{:?}", r.bad_frees);
    assert_eq!(r.leaks.len(), 1);
    let l = &r.leaks[0];
    assert_eq!((l.kind, l.bytes, l.stack), (MemKind::VmmPhysical, 2 << 20, StackId(2)));
    assert_eq!((l.retains, l.releases_due, l.released_but_mapped), (2, 1, 0));

    // One release more than references: a double free, named by the creation.
    let mut s = Script::default();
    s.alloc(Api::cuMemCreate, 0x55, 2 << 20, 2)
        .map(0x6000_0000, 2 << 20, 0x55);
    free_like_nccl(&mut s);
    s.free_with(Api::cuMemRelease, 0x55, 0, 8);
    let r = s.run();
    assert!(r.leaks.is_empty());
    assert_eq!(r.bad_frees.len(), 1);
    assert!(matches!(r.bad_frees[0].cause, BadFreeCause::DoubleFree(f) if f.site.stack == StackId(2)));
}

#[test]
fn a_failed_or_unknown_retain_changes_nothing() {
    let r = Script::default()
        .alloc(Api::cuMemCreate, 0x55, 4096, 2)
        .push(Alloc {
            api: Api::cuMemRetainAllocationHandle,
            via: Api::NONE,
            result: CuResult(1),
            ctx: CTX,
            stream: Stream(0),
            ptr: Ptr(0),
            size: 0,
            stack: StackId(9),
            aux: 0x6000_0000,
        })
        .alloc(Api::cuMemRetainAllocationHandle, 0x77, 0, 9)
        .free(Api::cuMemRelease, 0x55)
        .run();
    assert!(r.leaks.is_empty(), "{:?}", r.leaks);
    assert_eq!((r.counts.allocations, r.counts.failed_allocations), (1, 0));
}

#[test]
fn imported_handles_and_multicast_objects_are_released_but_not_owned() {
    let r = Script::default()
        .alloc(Api::cuMemImportFromShareableHandle, 0x66, 0, 3)
        .alloc(Api::cuMulticastCreate, 0x67, 2 << 20, 4)
        .map(0x6000_0000, 2 << 20, 0x66)
        .map(0x6020_0000, 2 << 20, 0x67)
        .free(Api::cuMemRelease, 0x66)
        .free(Api::cuMemRelease, 0x67)
        .unmap(0x6000_0000, 4 << 20)
        .run();
    assert!(r.leaks.is_empty(), "{:?}", r.leaks);
    assert!(r.bad_frees.is_empty(), "{:?}", r.bad_frees);
    assert_eq!(r.peak_bytes, 0, "another process's memory, and no memory of its own");

    let r = Script::default()
        .alloc(Api::cuMemImportFromShareableHandle, 0x66, 0, 3)
        .alloc(Api::cuMulticastCreate, 0x67, 2 << 20, 4)
        .run();
    let kinds: Vec<MemKind> = r.leaks.iter().map(|l| l.kind).collect();
    assert_eq!(kinds, [MemKind::Multicast, MemKind::VmmImport]);
    assert_eq!(leaked_bytes(&r), 0);

    // This process's own export imported back under the same handle: one more reference.
    let r = Script::default()
        .alloc(Api::cuMemCreate, 0x55, 4096, 2)
        .alloc(Api::cuMemImportFromShareableHandle, 0x55, 0, 3)
        .free(Api::cuMemRelease, 0x55)
        .run();
    assert_eq!(r.leaks.len(), 1);
    assert_eq!((r.leaks[0].kind, r.leaks[0].releases_due), (MemKind::VmmPhysical, 1));
    assert_eq!(r.counts.missed_frees, 0);
}

#[test]
fn pool_imported_pointers_are_freed_like_device_memory_but_not_owned() {
    // cuMemPoolImportPointer's pointer goes back with cuMemFree or cuMemFreeAsync.
    for free in [Api::cuMemFree_v2, Api::cuMemFreeAsync] {
        let r = Script::default()
            .alloc(Api::cuMemPoolImportPointer, 0x7700_0000, 1 << 20, 3)
            .free(free, 0x7700_0000)
            .run();
        assert!(r.leaks.is_empty(), "{free}: {:?}", r.leaks);
        assert!(r.bad_frees.is_empty(), "{free}: {:?}", r.bad_frees);
        assert_eq!(r.peak_bytes, 0, "the exporter's memory");
    }
    // Never freed: reported, not counted as leaked bytes.
    let r = Script::default()
        .alloc(Api::cuMemPoolImportPointer, 0x7700_0000, 1 << 20, 3)
        .run();
    assert_eq!(r.leaks.len(), 1);
    let l = &r.leaks[0];
    assert_eq!(
        (l.kind, l.bytes, l.retains, l.releases_due),
        (MemKind::PoolImport, 1 << 20, 0, 1)
    );
    assert_eq!(leaked_bytes(&r), 0);
    // Closing it like an IPC mapping is a free of the wrong family.
    let r = Script::default()
        .alloc(Api::cuMemPoolImportPointer, 0x7700_0000, 1 << 20, 3)
        .free_with(Api::cuIpcCloseMemHandle, 0x7700_0000, 1, 8)
        .free(Api::cuMemFree_v2, 0x7700_0000)
        .run();
    assert!(r.leaks.is_empty());
    assert_eq!(r.bad_frees.len(), 1);
    assert!(matches!(r.bad_frees[0].cause, BadFreeCause::WrongFamily(site) if site.stack == StackId(3)));
}

#[test]
fn external_memory_and_what_is_mapped_onto_it_are_released_by_their_own_calls_and_not_owned() {
    // The object, a buffer freed with cuMemFree and a mipmapped array freed with
    // cuMipmappedArrayDestroy: no bad free, no leak, no bytes of this process.
    let tidy = Script::default()
        .alloc(Api::cuImportExternalMemory, 0xe100, 1 << 20, 2)
        .alloc(Api::cuExternalMemoryGetMappedBuffer, 0x7800_0000, 4096, 3)
        .alloc(Api::cuExternalMemoryGetMappedMipmappedArray, 0xa200, 8192, 4)
        .free(Api::cuMemFree_v2, 0x7800_0000)
        .free(Api::cuMipmappedArrayDestroy, 0xa200)
        .free(Api::cuDestroyExternalMemory, 0xe100)
        .run();
    assert!(tidy.bad_frees.is_empty(), "{:?}", tidy.bad_frees);
    assert!(tidy.leaks.is_empty(), "{:?}", tidy.leaks);
    assert_eq!(tidy.peak_bytes, 0, "the exporter's memory");
    // Twin: none of the three released: each reported, none counted as leaked bytes.
    let r = Script::default()
        .alloc(Api::cuImportExternalMemory, 0xe100, 1 << 20, 2)
        .alloc(Api::cuExternalMemoryGetMappedBuffer, 0x7800_0000, 4096, 3)
        .alloc(Api::cuExternalMemoryGetMappedMipmappedArray, 0xa200, 8192, 4)
        .run();
    let mut kinds: Vec<MemKind> = r.leaks.iter().map(|l| l.kind).collect();
    kinds.sort_by_key(|k| *k as u8);
    assert_eq!(
        kinds,
        [MemKind::External, MemKind::ExternalBuffer, MemKind::ExternalArray]
    );
    assert_eq!(leaked_bytes(&r), 0);
    // Destroying the object frees nothing mapped onto it (the program must free those).
    let r = Script::default()
        .alloc(Api::cuImportExternalMemory, 0xe100, 1 << 20, 2)
        .alloc(Api::cuExternalMemoryGetMappedBuffer, 0x7800_0000, 4096, 3)
        .free(Api::cuDestroyExternalMemory, 0xe100)
        .run();
    assert_eq!(r.leaks.len(), 1);
    assert_eq!(r.leaks[0].kind, MemKind::ExternalBuffer);
    // The object is not a pointer cuMemFree takes, nor the buffer one the object's destroy
    // takes: wrong family.
    let r = Script::default()
        .alloc(Api::cuImportExternalMemory, 0xe100, 1 << 20, 2)
        .alloc(Api::cuExternalMemoryGetMappedBuffer, 0x7800_0000, 4096, 3)
        .free_with(Api::cuMemFree_v2, 0xe100, 1, 8)
        .free_with(Api::cuDestroyExternalMemory, 0x7800_0000, 1, 9)
        .run();
    assert_eq!(r.bad_frees.len(), 2);
    assert!(r
        .bad_frees
        .iter()
        .all(|b| matches!(b.cause, BadFreeCause::WrongFamily(_))));
}

#[test]
fn memory_mapped_again_at_the_same_address_needs_one_release_per_opening() {
    // The driver returns the address an IPC handle (pool pointer) is already mapped at and
    // counts one more reference: two opens, two closes, no double free.
    for (open, close) in [
        (Api::cuIpcOpenMemHandle_v2, Api::cuIpcCloseMemHandle),
        (Api::cuMemPoolImportPointer, Api::cuMemFree_v2),
    ] {
        let r = Script::default()
            .alloc(open, 0x5800, 4096, 2)
            .alloc(open, 0x5800, 4096, 3)
            .free(close, 0x5800)
            .free(close, 0x5800)
            .run();
        assert!(r.bad_frees.is_empty(), "{open}: {:?}", r.bad_frees);
        assert!(r.leaks.is_empty(), "{open}: {:?}", r.leaks);
        assert_eq!((r.counts.allocations, r.counts.missed_frees), (1, 0), "{open}");

        // One close too few: still mapped at exit, one more close due.
        let r = Script::default()
            .alloc(open, 0x5800, 4096, 2)
            .alloc(open, 0x5800, 4096, 3)
            .free(close, 0x5800)
            .run();
        assert_eq!(r.leaks.len(), 1, "{open}");
        assert_eq!((r.leaks[0].retains, r.leaks[0].releases_due), (1, 1), "{open}");

        // One close too many: a double free.
        let r = Script::default()
            .alloc(open, 0x5800, 4096, 2)
            .free(close, 0x5800)
            .free_with(close, 0x5800, 1, 9)
            .run();
        assert_eq!(r.bad_frees.len(), 1, "{open}");
        assert!(matches!(r.bad_frees[0].cause, BadFreeCause::DoubleFree(_)), "{open}");
    }
    // Device memory handed out again at a live address is still a missed free, never a
    // reference: only the same family of mapping counts.
    let r = Script::default()
        .alloc(Api::cuMemAlloc_v2, 0x5800, 4096, 2)
        .alloc(Api::cuMemPoolImportPointer, 0x5800, 4096, 3)
        .free(Api::cuMemFree_v2, 0x5800)
        .run();
    assert_eq!(r.counts.missed_frees, 1);
    assert!(r.leaks.is_empty());
}
