//! The memory pass from synthetic records, through the model (which decides what is live):
//! each result has a case that must show it and a twin that must not.

use gpuleak_format::record::{PoolDestroy, PoolUsage};
use gpuleak_format::{
    Alloc, Api, Body, Ctx, CtxCreate, CtxDestroy, CuResult, Free, Map, Mark, Ptr, Record, Seq, Snapshot, StackId,
    Stream, Unmap,
};

use super::*;
use crate::replay::Replayer;

const CTX: Ctx = Ctx(0x5cf0_0000_0010);
const MIB: u64 = 1 << 20;

/// Records with increasing sequence numbers, replayed through a model with the memory pass.
struct Run {
    model: Replayer,
    seq: u64,
}

impl Run {
    fn new(snapshots: Vec<u64>) -> Run {
        let mut run = Run {
            model: Replayer::new(Some(TrackerOptions { snapshots })),
            seq: 0,
        };
        run.push(CtxCreate {
            api: Api::cuDevicePrimaryCtxRetain,
            result: CuResult::SUCCESS,
            ctx: CTX,
            device: 3,
            flags: 0,
        });
        run
    }

    fn push(&mut self, body: impl Into<Body<'static>>) -> &mut Self {
        self.seq += 1;
        let r = Record {
            seq: Seq(self.seq),
            time_ns: self.seq * 1000,
            body: body.into(),
        };
        self.model.apply(1, &r);
        self
    }

    fn alloc_with(&mut self, api: Api, ptr: u64, size: u64, stack: u32, result: u32) -> &mut Self {
        self.push(Alloc {
            api,
            via: Api::NONE,
            result: CuResult(result),
            ctx: CTX,
            stream: Stream(0),
            ptr: Ptr(ptr),
            size,
            stack: StackId(stack),
            aux: 0,
        })
    }

    /// A `cuMemAlloc_v2` in context `ctx`.
    fn alloc_in(&mut self, ctx: Ctx, ptr: u64, size: u64, stack: u32) -> &mut Self {
        self.push(Alloc {
            api: Api::cuMemAlloc_v2,
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

    fn alloc(&mut self, ptr: u64, size: u64, stack: u32) -> &mut Self {
        self.alloc_with(Api::cuMemAlloc_v2, ptr, size, stack, 0)
    }

    fn free(&mut self, ptr: u64) -> &mut Self {
        self.push(Free {
            api: Api::cuMemFree_v2,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            stream: Stream(0),
            ptr: Ptr(ptr),
            size: 0,
            stack: StackId::NONE,
        })
    }

    fn mark(&mut self, value: u64) -> &mut Self {
        self.push(Mark {
            name: "step".into(),
            value,
        })
    }

    fn finish(self) -> MemoryReplay {
        *self.model.finish().memory.expect("the memory pass ran")
    }
}

#[test]
fn the_peak_breakdown_is_each_site_at_the_moment_of_the_peak() {
    let mut r = Run::new(Vec::new());
    r.alloc(0x1000_0000, 100, 1).alloc(0x2000_0000, 300, 2);
    // Peak 400 here; afterwards site 1 grows but site 2 shrinks more.
    r.free(0x2000_0000).alloc(0x3000_0000, 50, 1);
    let m = r.finish();
    assert_eq!(m.peak.0, 400);
    let at: Vec<(u32, u64)> = m.peak_sites.iter().map(|s| (s.stack.0, s.bytes)).collect();
    assert_eq!(at, [(2, 300), (1, 100)]);
    assert_eq!(m.devices.len(), 1);
    assert_eq!(m.devices[0].device, 3, "the context's device");
    assert_eq!(m.devices[0].peak.0, 400);
}

/// The pass keeps devices in the order it meets them; the report lists them by number.
#[test]
fn devices_met_out_of_order_are_listed_by_number() {
    const CTX1: Ctx = Ctx(0x5cf0_0000_0070);
    let mut r = Run::new(Vec::new());
    r.push(CtxCreate {
        api: Api::cuDevicePrimaryCtxRetain,
        result: CuResult::SUCCESS,
        ctx: CTX1,
        device: 1,
        flags: 0,
    });
    // Device 3 first, then 1, then 3 again.
    r.alloc_in(CTX, 0x1000, 10, 7)
        .alloc_in(CTX1, 0x9000, 20, 7)
        .alloc_in(CTX, 0x2000, 30, 8);
    let m = r.finish();
    let devices: Vec<(i32, u64)> = m.devices.iter().map(|d| (d.device, d.peak.0)).collect();
    assert_eq!(devices, [(1, 20), (3, 40)]);
}

#[test]
fn each_device_has_its_own_peak_breakdown_and_stacked_sites() {
    const CTX5: Ctx = Ctx(0x5cf0_0000_0050);
    let mut r = Run::new(Vec::new());
    r.push(CtxCreate {
        api: Api::cuDevicePrimaryCtxRetain,
        result: CuResult::SUCCESS,
        ctx: CTX5,
        device: 5,
        flags: 0,
    });
    // Site 7 allocates on both devices; site 1 only on device 3, site 2 only on device 5.
    r.alloc_in(CTX, 0x1000, 10, 7).alloc_in(CTX5, 0x9000, 20, 7);
    // Device 3 peaks here (10 + 500), earlier than the process.
    r.alloc_in(CTX, 0x2000, 500, 1).free(0x2000);
    // Device 5 and the process peak here (10 + 20 + 900).
    r.alloc_in(CTX5, 0xa000, 900, 2).free(0xa000);
    let m = r.finish();
    assert_eq!(m.peak.0, 930);
    let process: Vec<(u32, u64)> = m.peak_sites.iter().map(|s| (s.stack.0, s.bytes)).collect();
    assert_eq!(process, [(2, 900), (7, 30)]);
    let d3 = m.devices.iter().find(|d| d.device == 3).unwrap();
    let d5 = m.devices.iter().find(|d| d.device == 5).unwrap();
    assert_eq!(d3.peak.0, 510);
    assert_eq!(d5.peak.0, 920);
    assert!(d3.peak.1 < d5.peak.1, "device 3 peaked first");
    let at = |d: &DeviceTimeline| d.peak_sites.iter().map(|s| (s.stack.0, s.bytes)).collect::<Vec<_>>();
    // Each device's breakdown has only its own bytes, at its own peak.
    assert_eq!(at(d3), [(1, 500), (7, 10)]);
    assert_eq!(at(d5), [(2, 900), (7, 20)]);
    let stacked = |d: &DeviceTimeline| d.stacked.iter().map(|(id, _)| id.0).collect::<Vec<_>>();
    // By area (bytes times buckets): 500 for one bucket beats 10 for six.
    assert_eq!(stacked(d3), [1, 7]);
    assert_eq!(stacked(d5), [2, 7]);
    // A stacked series is the site's bytes on that device: site 7 holds 10 on device 3.
    let seven = &d3.stacked[1].1;
    assert_eq!(seven.iter().max(), Some(&10));
    assert_eq!(d5.stacked[1].1.iter().max(), Some(&20));
}

#[test]
fn one_device_breakdown_matches_the_process_one() {
    let mut r = Run::new(Vec::new());
    r.alloc(0x1000_0000, 100, 1).alloc(0x2000_0000, 300, 2);
    r.free(0x2000_0000).alloc(0x3000_0000, 50, 1);
    let m = r.finish();
    let d: Vec<(u32, u64)> = m.devices[0].peak_sites.iter().map(|s| (s.stack.0, s.bytes)).collect();
    let p: Vec<(u32, u64)> = m.peak_sites.iter().map(|s| (s.stack.0, s.bytes)).collect();
    assert_eq!(d, p);
    assert_eq!(d, [(2, 300), (1, 100)]);
}

#[test]
fn granted_bytes_round_device_heap_sizes_up_to_256_and_keep_whole_sizes() {
    let mut r = Run::new(Vec::new());
    r.alloc(0x1000, 1000, 1).alloc(0x2000, 1000, 1).alloc(0x3000, 4096, 2);
    r.free(0x1000);
    let m = r.finish();
    let d = &m.devices[0];
    assert_eq!(d.peak.0, 6096);
    assert_eq!(d.granted_peak, 1024 + 1024 + 4096);
    assert_eq!(d.granted.last().map(|p| p.last), Some(1024 + 4096));
    assert_eq!(d.live.last().map(|p| p.last), Some(1000 + 4096));
    // Its twin: sizes that are whole 256-byte blocks are granted as asked.
    let mut r = Run::new(Vec::new());
    r.alloc(0x1000, 1024, 1).alloc(0x3000, 4096, 2);
    let m = r.finish();
    let d = &m.devices[0];
    assert_eq!(d.granted_peak, d.peak.0);
    assert_eq!(d.granted, d.live);
    // Per family: the device heap rounds, the others are as asked.
    assert_eq!(granted(MemKind::Async, 1), 256);
    assert_eq!(granted(MemKind::Device, 0), 0);
    assert_eq!(granted(MemKind::Device, u64::MAX), u64::MAX, "no overflow");
    // The largest size that rounds to a whole 256 is itself; one more has no room to round.
    assert_eq!(granted(MemKind::Device, u64::MAX - 255), u64::MAX - 255);
    assert_eq!(granted(MemKind::Device, u64::MAX - 256), u64::MAX - 255);
    assert_eq!(granted(MemKind::Device, u64::MAX - 254), u64::MAX);
    assert_eq!(granted(MemKind::Device, 257), 512);
    assert_eq!(granted(MemKind::VmmPhysical, 2 * MIB), 2 * MIB);
    assert_eq!(granted(MemKind::Host, 1000), 1000);
}

#[test]
fn sampled_pools_sum_per_device_and_keep_their_last_and_highest() {
    let mut r = Run::new(Vec::new());
    r.alloc(0x1000, 4096, 1);
    let usage = |pool: u64, device: i32, reserved: u64, used: u64| PoolUsage {
        pool,
        device,
        reserved,
        used,
    };
    r.push(usage(0xa, 3, 8 * MIB, 8 * MIB));
    r.push(usage(0xb, 3, 2 * MIB, MIB));
    r.alloc(0x2000, 4096, 1);
    r.push(usage(0xa, 3, 8 * MIB, 0));
    r.push(usage(0xc, -1, MIB, MIB));
    let m = r.finish();
    let d = m.devices.iter().find(|d| d.device == 3).unwrap();
    assert_eq!(d.pool_samples, 3);
    assert_eq!(d.pool_reserved.iter().max(), Some(&(10 * MIB)), "two pools summed");
    assert_eq!(d.pool_used.iter().max(), Some(&(9 * MIB)));
    assert_eq!(d.pool_reserved.len(), d.live.len());
    let a = m.pools.iter().find(|p| p.pool == 0xa).unwrap();
    assert_eq!(
        (a.samples, a.reserved_max, a.used_max, a.reserved, a.used),
        (2, 8 * MIB, 8 * MIB, 8 * MIB, 0)
    );
    // A device the driver did not name is the unknown lane, not the host's.
    let c = m.pools.iter().find(|p| p.pool == 0xc).unwrap();
    assert_eq!(c.device, UNKNOWN_DEVICE);
    assert!(m
        .devices
        .iter()
        .any(|d| d.device == UNKNOWN_DEVICE && d.pool_samples == 1));
    // Its twin: no PoolUsage record, nothing sampled.
    let mut r = Run::new(Vec::new());
    r.alloc(0x1000, 4096, 1);
    let m = r.finish();
    assert!(m.pools.is_empty());
    assert_eq!(m.devices[0].pool_samples, 0);
    assert!(m.devices[0].pool_reserved.iter().all(|v| *v == 0));
}

#[test]
fn a_destroyed_pool_leaves_the_device_sums() {
    let run = |destroy: bool| {
        let mut r = Run::new(Vec::new());
        r.alloc(0x1000, 4096, 1);
        r.push(PoolUsage {
            pool: 0xa,
            device: 3,
            reserved: 8 * MIB,
            used: 0,
        });
        r.push(PoolUsage {
            pool: 0xb,
            device: 3,
            reserved: 2 * MIB,
            used: MIB,
        });
        r.alloc(0x2000, 4096, 1);
        r.push(PoolDestroy {
            api: Api::cuMemPoolDestroy,
            via: Api::NONE,
            // The twin's destroy fails: the pool lives on.
            result: CuResult(if destroy { 0 } else { 1 }),
            pool: 0xa,
            stack: StackId::NONE,
        });
        r.alloc(0x3000, 4096, 1);
        r.finish()
    };
    let m = run(true);
    let d = m.devices.iter().find(|d| d.device == 3).unwrap();
    assert_eq!(d.pool_reserved.last(), Some(&(2 * MIB)));
    assert_eq!(d.pool_reserved.iter().max(), Some(&(10 * MIB)));
    let a = m.pools.iter().find(|p| p.pool == 0xa).unwrap();
    assert!(a.destroyed.is_some());
    assert!(m.pools.iter().find(|p| p.pool == 0xb).unwrap().destroyed.is_none());
    let m = run(false);
    let d = m.devices.iter().find(|d| d.device == 3).unwrap();
    assert_eq!(d.pool_reserved.last(), Some(&(10 * MIB)));
    assert!(m.pools.iter().all(|p| p.destroyed.is_none()));
}

#[test]
fn a_context_teardown_frees_the_memory_in_the_timeline() {
    let mut r = Run::new(Vec::new());
    r.alloc(0x1000_0000, 100, 1).push(CtxDestroy {
        api: Api::cuDevicePrimaryCtxReset_v2,
        result: CuResult::SUCCESS,
        ctx: CTX,
        device: 3,
    });
    let m = r.finish();
    let d = &m.devices[0];
    assert_eq!(d.live.last().map(|p| p.last), Some(0));
    assert_eq!(d.frees.last(), Some(&1));
    assert_eq!(m.sites[0].live, 0);
}

#[test]
fn growth_steps_come_from_marks_when_the_program_sets_them() {
    // A leak of 1 MiB every marked step, among many unmarked events of churn.
    let mut r = Run::new(Vec::new());
    for step in 0..20u64 {
        r.mark(step);
        for i in 0..30u64 {
            r.alloc(0x9000_0000, 4096, 9).free(0x9000_0000);
            let _ = i;
        }
        r.alloc(0x1000_0000 + step * MIB, MIB, 1);
    }
    for step in 0..20u64 {
        r.free(0x1000_0000 + step * MIB);
    }
    let m = r.finish();
    assert_eq!(m.marks, 20);
    assert_eq!(m.growth.len(), 1, "{:?}", m.growth);
    let g = &m.growth[0];
    assert!(g.from_marks);
    assert_eq!(g.stack, StackId(1));
    assert_eq!(g.bytes_per_step, MIB);
}

#[test]
fn marks_around_a_warm_up_and_plateau_find_no_growth() {
    let mut r = Run::new(Vec::new());
    for step in 0..20u64 {
        r.mark(step);
        if step < 4 {
            r.alloc(0x1000_0000 + step * MIB, MIB, 1);
        }
        r.alloc(0x9000_0000, 4096, 9).free(0x9000_0000);
    }
    for step in 0..4u64 {
        r.free(0x1000_0000 + step * MIB);
    }
    assert_eq!(r.finish().growth, Vec::new());
}

#[test]
fn a_failed_allocation_keeps_the_state_it_failed_in() {
    let mut r = Run::new(Vec::new());
    for i in 0..8u64 {
        r.alloc(i * MIB, MIB, if i % 2 == 0 { 1 } else { 2 });
    }
    for i in (1..8u64).step_by(2) {
        r.free(i * MIB);
    }
    r.alloc_with(Api::cuMemAlloc_v2, 0, 2 * MIB, 7, CuResult::OUT_OF_MEMORY.0);
    let m = r.finish();
    assert_eq!(m.failed, 1);
    let o = &m.ooms[0];
    assert_eq!(
        (o.size, o.live, o.free_in_span, o.largest_hole),
        (2 * MIB, 4 * MIB, 3 * MIB, MIB)
    );
    assert_eq!((o.stack, o.device), (StackId(7), 3));
    assert_eq!(o.sites[0].stack, StackId(1));
    assert_eq!(o.pins[0].stack, StackId(1));
    assert_eq!(o.pins[0].allocations, 2);
    // The worst moment of the device: after the frees.
    let w = m.devices[0].worst.expect("fragmented");
    assert_eq!((w.free, w.largest_hole, w.holes), (3 * MIB, MIB, 3));
}

#[test]
fn vmm_reservations_and_mappings_are_reserved_not_live() {
    let mut r = Run::new(Vec::new());
    r.alloc_with(Api::cuMemAddressReserve, 0x7000_0000, 8 * MIB, 1, 0)
        .alloc_with(Api::cuMemCreate, 0x42, 2 * MIB, 2, 0)
        .push(Map {
            api: Api::cuMemMap,
            result: CuResult::SUCCESS,
            ptr: Ptr(0x7000_0000),
            size: 2 * MIB,
            offset: 0,
            handle: 0x42,
        });
    let m = {
        let mut r = r;
        r.push(Unmap {
            api: Api::cuMemUnmap,
            result: CuResult::SUCCESS,
            ptr: Ptr(0x7000_0000),
            size: 2 * MIB,
        });
        r.finish()
    };
    let d = &m.devices[0];
    assert_eq!(d.vmm_reserved.iter().max(), Some(&(8 * MIB)));
    assert_eq!(d.vmm_mapped.iter().max(), Some(&(2 * MIB)));
    assert_eq!(d.peak.0, 2 * MIB, "only the physical handle is memory");
}

#[test]
fn snapshots_keep_the_live_sites_of_the_ids_asked_for() {
    let mut r = Run::new(vec![2]);
    r.alloc(0x1000, 10, 1)
        .push(Snapshot {
            id: 1,
            reason: "api".into(),
        })
        .alloc(0x2000, 20, 2)
        .push(Snapshot {
            id: 2,
            reason: "signal".into(),
        })
        .free(0x1000);
    let m = r.finish();
    assert_eq!(m.snapshot_ids, [1, 2]);
    assert_eq!(m.snapshots.len(), 1);
    let s = &m.snapshots[0];
    assert_eq!((s.id, s.reason.as_str(), s.live), (2, "signal", 30));
    let sites: Vec<(u32, u64)> = s.sites.iter().map(|x| (x.stack.0, x.bytes)).collect();
    assert_eq!(sites, [(2, 20), (1, 10)]);
}

#[test]
fn the_peak_between_two_snapshots_counts_only_what_happened_between_them() {
    let snap = |id| Snapshot {
        id,
        reason: "api".into(),
    };
    let mut r = Run::new(vec![2, 3]);
    // 100 bytes live and gone before snapshot 2: not part of the window.
    r.alloc(0x1000, 100, 1)
        .free(0x1000)
        .push(snap(1))
        .alloc(0x2000, 10, 2)
        .push(snap(2));
    // Inside: a 50-byte spike on top of 10, then back down.
    r.alloc(0x3000, 50, 3)
        .free(0x3000)
        .alloc(0x4000, 5, 3)
        .push(snap(3))
        .alloc(0x5000, 1000, 4);
    let m = r.finish();
    let highs: Vec<(u64, u64, u64)> = m.snapshots.iter().map(|s| (s.id, s.live, s.high_since_first)).collect();
    assert_eq!(highs, [(2, 10, 10), (3, 15, 60)]);
    // Its twin: nothing above the live bytes at the first snapshot.
    let mut twin = Run::new(vec![1, 2]);
    twin.alloc(0x1000, 100, 1)
        .push(snap(1))
        .free(0x1000)
        .alloc(0x2000, 10, 2)
        .push(snap(2));
    let m = twin.finish();
    let highs: Vec<u64> = m.snapshots.iter().map(|s| s.high_since_first).collect();
    assert_eq!(highs, [100, 100]);
}

#[test]
fn the_timeline_stays_bounded_over_a_long_run() {
    let mut r = Run::new(Vec::new());
    for i in 0..50_000u64 {
        r.alloc(0x1000_0000 + (i % 64) * MIB, 4096, 1 + (i % 3) as u32);
        r.free(0x1000_0000 + (i % 64) * MIB);
    }
    let m = r.finish();
    assert_eq!(m.events, 100_000);
    let d = &m.devices[0];
    assert!(d.live.len() <= TIMELINE_POINTS as usize && d.live.len() > TIMELINE_POINTS as usize / 2);
    assert_eq!(d.allocations.len(), d.live.len());
    assert_eq!(m.times.len(), d.live.len());
    assert_eq!(d.allocations.last(), Some(&50_000));
    assert!(m.sites.iter().all(|s| s.series.len() <= SITE_POINTS as usize));
    assert_eq!(m.histogram.counts[12], 50_000, "4096-byte class");
}

/// A site's counts for an allocation of `size` bytes freed again.
fn counts_after_alloc_and_free(size: u64) -> (u64, u64, u64) {
    let mut r = Run::new(Vec::new());
    r.alloc(0x1000_0000, size, 1).free(0x1000_0000);
    let m = r.finish();
    let s = m.sites.iter().find(|s| s.stack == StackId(1)).expect("site 1");
    (s.allocations, s.frees, s.live)
}

#[test]
fn the_free_of_an_empty_allocation_counts_as_a_free() {
    // A trace may record a zero-byte allocation as a success; freeing it is still a free.
    assert_eq!(counts_after_alloc_and_free(0), (1, 1, 0));
    assert_eq!(counts_after_alloc_and_free(256), (1, 1, 0));
}
