//! The model from synthetic records: every rule has a case that must find it and a correct
//! twin that must not.

use std::borrow::Cow;

use gpuleak_format::{
    Addrs, Alloc, Api, Body, Capture, Ctx, CtxCreate, CtxDestroy, CuResult, Exit, Free, Map, Ptr, Record, Seq, Stack,
    StackId, Stream, Unmap,
};

use super::*;

mod graphs;

const CTX: Ctx = Ctx(0x5cf0_0000_0010);
const OTHER_CTX: Ctx = Ctx(0x5cf0_0000_0020);

/// Records with increasing sequence numbers.
#[derive(Default)]
struct Script {
    records: Vec<Record<'static>>,
}

impl Script {
    fn push(&mut self, body: impl Into<Body<'static>>) -> &mut Self {
        let seq = self.records.len() as u64 + 1;
        self.records.push(Record {
            seq: Seq(seq),
            time_ns: seq * 100,
            body: body.into(),
        });
        self
    }

    fn alloc_in(&mut self, api: Api, ctx: Ctx, ptr: u64, size: u64, stack: u32) -> &mut Self {
        self.push(Alloc {
            api,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            ctx,
            stream: Stream(0),
            ptr: Ptr(ptr),
            size,
            stack: StackId(stack),
            aux: 0,
        })
    }

    fn alloc(&mut self, api: Api, ptr: u64, size: u64, stack: u32) -> &mut Self {
        self.alloc_in(api, CTX, ptr, size, stack)
    }

    fn free_with(&mut self, api: Api, ptr: u64, result: u32, stack: u32) -> &mut Self {
        self.push(Free {
            api,
            via: Api::NONE,
            result: CuResult(result),
            stream: Stream(0),
            ptr: Ptr(ptr),
            size: 0,
            stack: StackId(stack),
        })
    }

    fn free(&mut self, api: Api, ptr: u64) -> &mut Self {
        self.free_with(api, ptr, 0, 0)
    }

    fn ctx(&mut self, api: Api, ctx: Ctx) -> &mut Self {
        self.push(CtxCreate {
            api,
            result: CuResult::SUCCESS,
            ctx,
            device: 0,
            flags: 0,
        })
    }

    fn destroy(&mut self, api: Api, ctx: Ctx, device: i32) -> &mut Self {
        self.push(CtxDestroy {
            api,
            result: CuResult::SUCCESS,
            ctx,
            device,
        })
    }

    fn map(&mut self, va: u64, size: u64, handle: u64) -> &mut Self {
        self.push(Map {
            api: Api::cuMemMap,
            result: CuResult::SUCCESS,
            ptr: Ptr(va),
            size,
            offset: 0,
            handle,
        })
    }

    fn unmap(&mut self, va: u64, size: u64) -> &mut Self {
        self.push(Unmap {
            api: Api::cuMemUnmap,
            result: CuResult::SUCCESS,
            ptr: Ptr(va),
            size,
        })
    }

    fn run(&self) -> Replay {
        let mut model = Model::new();
        for r in &self.records {
            model.apply(7, r);
        }
        model.finish()
    }
}

fn leaked_bytes(r: &Replay) -> u64 {
    r.leaks
        .iter()
        .filter(|l| is_owned_memory(l.kind))
        .map(|l| l.bytes)
        .sum()
}

#[test]
fn an_allocation_never_freed_is_live_at_exit() {
    let r = Script::default()
        .ctx(Api::cuDevicePrimaryCtxRetain, CTX)
        .alloc(Api::cuMemAlloc_v2, 0x7000, 777, 3)
        .push(Exit { code: 0, how: 0 })
        .run();
    assert_eq!(r.leaks.len(), 1);
    let l = &r.leaks[0];
    assert_eq!(
        (l.bytes, l.allocations, l.kind, l.at),
        (777, 1, MemKind::Device, LeakAt::Exit)
    );
    assert_eq!(l.stack, StackId(3));
    assert_eq!(l.first.api, Api::cuMemAlloc_v2);
    assert_eq!(l.first.ctx, CTX);
    assert_eq!(l.first.tid, 7);
    assert!(r.exited);
    assert_eq!(r.exit_code, None, "how 0: the shim does not know the status");
    assert_eq!((r.counts.allocations, r.counts.frees), (1, 0));
}

#[test]
fn a_freed_allocation_is_no_leak() {
    let r = Script::default()
        .alloc(Api::cuMemAlloc_v2, 0x7000, 777, 3)
        .free(Api::cuMemFree_v2, 0x7000)
        .run();
    assert!(r.leaks.is_empty());
    assert!(r.bad_frees.is_empty());
    assert_eq!((r.counts.allocations, r.counts.frees), (1, 1));
}

#[test]
fn records_after_exit_are_still_replayed() {
    let r = Script::default()
        .alloc(Api::cuMemAlloc_v2, 0x7000, 10, 1)
        .push(Exit { code: 3, how: 1 })
        .free(Api::cuMemFree_v2, 0x7000)
        .alloc(Api::cuMemAllocHost_v2, 0x9000, 20, 2)
        .run();
    assert_eq!(r.exit_code, Some(3));
    assert_eq!(r.leaks.len(), 1);
    assert_eq!((r.leaks[0].bytes, r.leaks[0].kind), (20, MemKind::Host));
}

#[test]
fn same_stack_leaks_fold_into_one_group_largest_first() {
    let r = Script::default()
        .alloc(Api::cuMemAlloc_v2, 0x1000, 100, 1)
        .alloc(Api::cuMemAlloc_v2, 0x2000, 100, 1)
        .alloc(Api::cuMemAllocManaged, 0x3000, 150, 2)
        .run();
    assert_eq!(r.leaks.len(), 2);
    assert_eq!((r.leaks[0].bytes, r.leaks[0].allocations), (200, 2));
    assert_eq!(r.leaks[0].first.ptr, Ptr(0x1000));
    assert_eq!((r.leaks[1].bytes, r.leaks[1].kind), (150, MemKind::Managed));
}

#[test]
fn memory_left_in_a_destroyed_context_leaks_at_teardown() {
    let r = Script::default()
        .ctx(Api::cuDevicePrimaryCtxRetain, CTX)
        .ctx(Api::cuCtxCreate_v2, OTHER_CTX)
        .alloc_in(Api::cuMemAlloc_v2, OTHER_CTX, 0x7000, 300, 1)
        .alloc_in(Api::cuMemAlloc_v2, CTX, 0x8000, 50, 2)
        .destroy(Api::cuCtxDestroy_v2, OTHER_CTX, -1)
        // The driver freed it: the address may come back, and freeing it now is a bad free.
        .alloc_in(Api::cuMemAlloc_v2, CTX, 0x7000, 40, 3)
        .free(Api::cuMemFree_v2, 0x7000)
        .run();
    let teardown: Vec<_> = r.leaks.iter().filter(|l| l.at != LeakAt::Exit).collect();
    assert_eq!(teardown.len(), 1);
    assert_eq!(teardown[0].bytes, 300);
    assert_eq!(
        teardown[0].at,
        LeakAt::Teardown {
            api: Api::cuCtxDestroy_v2,
            ctx: OTHER_CTX
        }
    );
    let exit: Vec<_> = r.leaks.iter().filter(|l| l.at == LeakAt::Exit).collect();
    assert_eq!(exit.len(), 1);
    assert_eq!(exit[0].bytes, 50);
    assert!(r.bad_frees.is_empty());
}

#[test]
fn memory_freed_before_its_context_is_destroyed_is_no_leak() {
    let r = Script::default()
        .ctx(Api::cuCtxCreate_v2, OTHER_CTX)
        .alloc_in(Api::cuMemAlloc_v2, OTHER_CTX, 0x7000, 300, 1)
        .free(Api::cuMemFree_v2, 0x7000)
        .destroy(Api::cuCtxDestroy_v2, OTHER_CTX, -1)
        .run();
    assert!(r.leaks.is_empty());
}

#[test]
fn a_primary_context_is_torn_down_by_its_last_release_or_a_reset() {
    // Two retains: the first release keeps the context, the second tears it down.
    let r = Script::default()
        .ctx(Api::cuDevicePrimaryCtxRetain, CTX)
        .ctx(Api::cuDevicePrimaryCtxRetain, CTX)
        .alloc(Api::cuMemAlloc_v2, 0x7000, 64, 1)
        .destroy(Api::cuDevicePrimaryCtxRelease_v2, Ctx(0), 0)
        .alloc(Api::cuMemAllocHost_v2, 0x9000, 32, 2)
        .destroy(Api::cuDevicePrimaryCtxRelease_v2, Ctx(0), 0)
        .run();
    assert_eq!(r.leaks.len(), 2);
    assert!(r
        .leaks
        .iter()
        .all(|l| matches!(l.at, LeakAt::Teardown { api: Api::cuDevicePrimaryCtxRelease_v2, ctx } if ctx == CTX)));

    let reset = Script::default()
        .ctx(Api::cuDevicePrimaryCtxRetain, CTX)
        .alloc(Api::cuMemAlloc_v2, 0x7000, 64, 1)
        .destroy(Api::cuDevicePrimaryCtxReset_v2, Ctx(0), 0)
        .alloc(Api::cuMemAlloc_v2, 0x8000, 16, 2)
        .run();
    assert_eq!(reset.leaks.len(), 2);
    assert_eq!(reset.leaks[0].bytes, 64);
    assert!(matches!(
        reset.leaks[0].at,
        LeakAt::Teardown {
            api: Api::cuDevicePrimaryCtxReset_v2,
            ..
        }
    ));
    // The context lives on after a reset: later memory in it is live at exit.
    assert_eq!((reset.leaks[1].bytes, reset.leaks[1].at), (16, LeakAt::Exit));
}

#[test]
fn memory_freed_before_a_primary_reset_is_no_leak() {
    let r = Script::default()
        .ctx(Api::cuDevicePrimaryCtxRetain, CTX)
        .alloc(Api::cuMemAlloc_v2, 0x7000, 64, 1)
        .free(Api::cuMemFree_v2, 0x7000)
        .destroy(Api::cuDevicePrimaryCtxReset_v2, Ctx(0), 0)
        .destroy(Api::cuDevicePrimaryCtxRelease_v2, Ctx(0), 0)
        .run();
    assert!(r.leaks.is_empty());
}

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
fn a_double_free_names_the_allocation_that_lived_there() {
    let r = Script::default()
        .alloc(Api::cuMemAlloc_v2, 0x7000, 256, 4)
        .free_with(Api::cuMemFree_v2, 0x7000, 0, 0)
        .free_with(Api::cuMemFree_v2, 0x7000, 1, 9)
        .run();
    assert_eq!(r.bad_frees.len(), 1);
    let b = &r.bad_frees[0];
    assert_eq!(
        (b.api, b.ptr, b.stack, b.result),
        (Api::cuMemFree_v2, Ptr(0x7000), StackId(9), CuResult(1))
    );
    match b.cause {
        BadFreeCause::DoubleFree(f) => {
            assert_eq!(f.site.stack, StackId(4));
            assert_eq!(f.site.api, Api::cuMemAlloc_v2);
            assert_eq!(f.site.size, 256);
        }
        other => panic!("not a double free: {other:?}"),
    }
    assert_eq!((r.counts.frees, r.counts.failed_frees), (1, 1));
    assert!(r.leaks.is_empty());
}

#[test]
fn a_free_of_an_unknown_pointer_is_a_bad_free() {
    let r = Script::default().free_with(Api::cuMemFree_v2, 0xdead00, 1, 5).run();
    assert_eq!(r.bad_frees.len(), 1);
    assert_eq!(r.bad_frees[0].cause, BadFreeCause::NeverAllocated);
    assert_eq!(r.bad_frees[0].stack, StackId(5));
}

#[test]
fn a_free_with_the_wrong_family_names_the_real_one() {
    let r = Script::default()
        .alloc(Api::cuMemAlloc_v2, 0x7000, 64, 4)
        .free_with(Api::cuMemFreeHost, 0x7000, 1, 5)
        .free(Api::cuMemFree_v2, 0x7000)
        .run();
    assert_eq!(r.bad_frees.len(), 1);
    assert!(matches!(r.bad_frees[0].cause, BadFreeCause::WrongFamily(site) if site.stack == StackId(4)));
    assert!(r.leaks.is_empty());
}

#[test]
fn correct_frees_and_address_reuse_are_no_bad_frees() {
    let r = Script::default()
        .alloc(Api::cuMemAlloc_v2, 0x7000, 64, 1)
        .free(Api::cuMemFree_v2, 0x7000)
        .alloc(Api::cuMemAllocAsync, 0x7000, 64, 2)
        .free(Api::cuMemFree_v2, 0x7000)
        .alloc(Api::cuMemAlloc_v2, 0x7000, 64, 3)
        .free(Api::cuMemFreeAsync, 0x7000)
        .free(Api::cuMemFree_v2, 0)
        .run();
    assert!(r.bad_frees.is_empty(), "{:?}", r.bad_frees);
    assert!(r.leaks.is_empty());
}

#[test]
fn repeated_bad_frees_from_one_stack_fold() {
    let mut s = Script::default();
    for _ in 0..5 {
        s.free_with(Api::cuMemFree_v2, 0xdead00, 1, 5);
    }
    let r = s.run();
    assert_eq!(r.bad_frees.len(), 1);
    assert_eq!(r.bad_frees[0].count, 5);
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

#[test]
fn failed_calls_are_neither_allocations_nor_frees() {
    let r = Script::default()
        .push(Alloc {
            api: Api::cuMemAlloc_v2,
            via: Api::cudaMalloc,
            result: CuResult::OUT_OF_MEMORY,
            ctx: CTX,
            stream: Stream(0),
            ptr: Ptr(0),
            size: 1 << 40,
            stack: StackId(1),
            aux: 0,
        })
        .alloc(Api::cuMemAlloc_v2, 0x7000, 64, 2)
        // A failed free of a live pointer frees nothing.
        .free_with(Api::cuMemFree_v2, 0x7000, 201, 3)
        .run();
    assert_eq!(r.counts.allocations, 1);
    assert_eq!(r.counts.failed_allocations, 1);
    assert_eq!(r.counts.frees, 0);
    assert_eq!(r.peak_bytes, 64);
    assert_eq!(r.leaks.len(), 1);
    assert_eq!(r.leaks[0].bytes, 64);
    assert!(r.bad_frees.is_empty());
}

#[test]
fn peak_is_the_highest_owned_total() {
    let r = Script::default()
        .alloc(Api::cuMemAlloc_v2, 0x1000, 100, 1)
        .alloc(Api::cuMemAllocHost_v2, 0x2000, 200, 1)
        .alloc(Api::cuMemHostRegister_v2, 0x3000, 10_000, 1)
        .free(Api::cuMemFree_v2, 0x1000)
        .alloc(Api::cuMemAllocAsync, 0x4000, 50, 1)
        .free(Api::cuMemFreeHost, 0x2000)
        .free(Api::cuMemFreeAsync, 0x4000)
        .free(Api::cuMemHostUnregister, 0x3000)
        .run();
    assert_eq!(r.peak_bytes, 300);
    assert_eq!(r.peak_time_ns, 200);
    assert!(r.leaks.is_empty());
}

#[test]
fn stream_ordered_allocations_under_capture_are_graph_nodes() {
    let s = Stream(0x5d00);
    let r = Script::default()
        .push(Capture {
            api: Api::cuStreamBeginCapture_v2,
            result: CuResult::SUCCESS,
            stream: s,
            begin: 1,
            aux: 0,
        })
        .push(Alloc {
            api: Api::cuMemAllocAsync,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            ctx: CTX,
            stream: s,
            ptr: Ptr(0x7000),
            size: 64,
            stack: StackId(1),
            aux: 0,
        })
        .push(Capture {
            api: Api::cuStreamEndCapture,
            result: CuResult::SUCCESS,
            stream: s,
            begin: 0,
            aux: 0,
        })
        .run();
    assert!(r.leaks.is_empty());
    assert_eq!(r.counts.graph_allocations, 1);
}

#[test]
fn graph_memory_freed_outside_the_capture_is_no_bad_free() {
    let s = Stream(0x5d00);
    let captured = |script: &mut Script, ptr: u64| {
        let capture = |begin| Capture {
            api: Api::cuStreamBeginCapture_v2,
            result: CuResult::SUCCESS,
            stream: s,
            begin,
            aux: 0,
        };
        script.push(capture(1));
        script.push(Alloc {
            api: Api::cuMemAllocAsync,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            ctx: CTX,
            stream: s,
            ptr: Ptr(ptr),
            size: 64,
            stack: StackId(1),
            aux: 0,
        });
        script.push(capture(0));
    };
    // The graph (launched twice, not in the trace) allocates at its address each time; the
    // program frees that memory after each launch, outside the capture.
    let mut script = Script::default();
    captured(&mut script, 0x9000);
    script.free(Api::cuMemFreeAsync, 0x9000).free(Api::cuMemFree_v2, 0x9000);
    let r = script.run();
    assert!(r.bad_frees.is_empty(), "{:?}", r.bad_frees);
    assert_eq!((r.counts.graph_allocations, r.counts.graph_frees), (1, 2));

    // A free the driver refused is still reported (the graph never ran, say), and so is a free
    // of an address no graph and no allocation ever had.
    let mut script = Script::default();
    captured(&mut script, 0x9000);
    script
        .free_with(Api::cuMemFreeAsync, 0x9000, 1, 5)
        .free(Api::cuMemFreeAsync, 0x9100);
    let r = script.run();
    assert_eq!(r.bad_frees.len(), 2, "{:?}", r.bad_frees);

    // Ordinary memory later handed out at that address is freed, and then its double free
    // found, as any other.
    let mut script = Script::default();
    captured(&mut script, 0x9000);
    script
        .alloc(Api::cuMemAlloc_v2, 0x9000, 128, 2)
        .free(Api::cuMemFree_v2, 0x9000)
        .free(Api::cuMemFree_v2, 0x9000);
    let r = script.run();
    assert_eq!(r.bad_frees.len(), 1, "{:?}", r.bad_frees);
    assert!(matches!(r.bad_frees[0].cause, BadFreeCause::DoubleFree(_)));
}

#[test]
fn stacks_arriving_after_their_users_are_kept() {
    let r = Script::default()
        .alloc(Api::cuMemAlloc_v2, 0x7000, 1, 12)
        .push(Stack {
            id: StackId(12),
            frames: Addrs(Cow::Owned(vec![0x10, 0x20])),
        })
        .run();
    assert_eq!(r.stacks[&r.leaks[0].stack], [0x10, 0x20]);
}

#[test]
fn memory_follows_the_live_set() {
    let mut model = Model::new();
    for i in 0..100_000u64 {
        let ptr = 0x7000_0000 + (i % 8) * 0x1000;
        for body in [
            Body::Alloc(Alloc {
                api: Api::cuMemAlloc_v2,
                via: Api::NONE,
                result: CuResult::SUCCESS,
                ctx: CTX,
                stream: Stream(0),
                ptr: Ptr(ptr),
                size: 4096,
                stack: StackId(1 + (i % 3) as u32),
                aux: 0,
            }),
            Body::Free(Free {
                api: Api::cuMemFree_v2,
                via: Api::NONE,
                result: CuResult::SUCCESS,
                stream: Stream(0),
                ptr: Ptr(ptr),
                size: 0,
                stack: StackId::NONE,
            }),
        ] {
            model.apply(
                1,
                &Record {
                    seq: Seq(i * 2),
                    time_ns: i,
                    body,
                },
            );
        }
        assert!(model.live_allocations() <= 1);
    }
    assert_eq!(model.live_bytes(), 0);
    assert!(model.recent.len() <= 8);
    let r = model.finish();
    assert!(r.leaks.is_empty());
    assert_eq!(r.counts.allocations, 100_000);
}

#[test]
fn unknown_driver_variants_are_not_lost_events() {
    let mut script = Script::default();
    script.alloc(Api::cuMemAlloc_v2, 0x7000, 64, 1);
    script.push(gpuleak_format::Lost { count: 3, reason: 2 });
    let r = script.run();
    assert_eq!((r.unknown_variants, r.lost_events), (3, 0));
    script.push(gpuleak_format::Lost { count: 5, reason: 1 });
    let r = script.run();
    assert_eq!((r.unknown_variants, r.lost_events), (3, 5));
}
