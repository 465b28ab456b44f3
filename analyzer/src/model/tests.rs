//! The model from synthetic records: every rule has a case that must find it and a correct
//! twin that must not.

use std::borrow::Cow;

use gpuleak_format::{
    Addrs, Alloc, Api, Body, Capture, Ctx, CtxCreate, CtxDestroy, CuResult, Exit, Free, Map, Ptr, Record, Seq, Stack,
    StackId, Stream, Unmap,
};

use super::*;

mod checkpoint;
mod decisions;
mod graphs;
mod handles;

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

    fn run(&self) -> LeakReplay {
        let mut model = Model::new();
        for r in &self.records {
            model.apply(7, r);
        }
        model.finish()
    }
}

fn leaked_bytes(r: &LeakReplay) -> u64 {
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
