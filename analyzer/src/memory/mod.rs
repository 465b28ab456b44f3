//! Where the memory went: a pass over the leak model's decisions that keeps, in bounded memory,
//! per-device timelines, per-site live bytes over time (for growth), the peak's breakdown by
//! site, each device's address space (holes, fragmentation, pinning allocations), the state at
//! each failed allocation, and the live state at chosen `Snapshot` records.
//!
//! The [`Tracker`] observes the leak model's decisions ([`crate::decision`]): each allocation
//! it accepts and each one it forgets (free, teardown, last unmap), so the two always agree on
//! what is live; the replay driver ([`crate::replay`]) passes them on. Series
//! are bucketed ([`series`]) and never hold more than a fixed number of points; the rest
//! follows the live allocations and distinct sites.

mod found;
pub mod growth;
mod history;
pub mod markers;
pub mod series;
mod sites;
pub mod space;

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use gpuleak_format::space::is_owned_memory;
use gpuleak_format::{Api, Body, CuResult, MemKind, Record, StackId};

use crate::allocation::Allocation;
use crate::decision::{Decision, Observer};
use found::SizeClasses;
pub use found::{
    pin_sites, DeviceTimeline, Histogram, MemoryReplay, Oom, PinSite, PoolSummary, SiteBytes, SiteSummary,
    SnapshotState, Worst,
};
use markers::{snapshot_marker, Marker, MarkerKind, Markers};
use series::{Axis, Series};
use sites::Sites;
use space::AddressSpace;

/// Points of each device timeline, at most.
pub const TIMELINE_POINTS: u64 = 512;
/// Points of each site's series, at most.
pub const SITE_POINTS: u64 = 128;
/// Failed allocations examined in detail (the rest are counted).
pub const OOM_DETAILS: usize = 32;
/// Sites kept per failed allocation, snapshot of the peak, and so on.
pub const SITES_KEPT: usize = 12;
/// Sites stacked in each device's timeline.
pub const DEVICE_STACKED: usize = 8;
/// Sites kept in each device's peak breakdown.
pub const DEVICE_PEAK_SITES: usize = 100;
/// Stream-ordered pools followed (per device and per process).
pub const POOLS_KEPT: usize = 64;
/// Pinning allocations kept per moment.
pub const PINS_KEPT: usize = 16;
/// Documented minimum alignment of `cuMemAlloc`'s allocations (CUDA C Best Practices Guide:
/// "aligned to at least 256 bytes"); the granted rule rounds device-heap sizes up to it.
pub const GRANT_ALIGN: u64 = 256;
/// The rule by which `granted_bytes` is derived from the sizes asked for, as the report names it.
pub const GRANTED_RULE: &str = "cuMemAlloc, cuMemAllocPitch and stream-ordered allocations rounded up to 256 bytes \
(the documented minimum alignment, so a lower bound: pitch rows and larger alignments are not seen); \
cuMemCreate, arrays, managed and host memory as asked";
pub use crate::decision::{HOST, UNKNOWN_DEVICE};

/// What to keep beyond the defaults.
#[derive(Debug, Clone, Default)]
pub struct TrackerOptions {
    /// `Snapshot` ids whose live state is kept.
    pub snapshots: Vec<u64>,
}

#[derive(Debug)]
struct Device {
    live: Series,
    granted: Series,
    granted_peak: u64,
    allocations: Series,
    frees: Series,
    vmm_reserved: Series,
    vmm_mapped: Series,
    pool: Series,
    /// Sampled stream-ordered pools (`PoolUsage` records): the sums over the device's pools.
    pool_reserved: Series,
    pool_used: Series,
    pool_samples: u64,
    /// Each pool's latest (reserved, used).
    pools: BTreeMap<u64, (u64, u64)>,
    fragmentation: Series,
    largest_hole: Series,
    free_in_span: Series,
    peak: (u64, u64, u64),
    space: AddressSpace,
    worst: Option<Worst>,
    pins: Vec<PinSite>,
    has_addresses: bool,
    /// This device's share of each site that allocated on more than one device (live bytes,
    /// value at the device's peak, series); a site that allocated on one device only is its
    /// own share of it ([`Site::spread`]).
    sites: Sites<DeviceSite>,
    /// Bumped whenever the device reaches a new peak (see [`DeviceSite::stamp`]).
    peak_version: u64,
}

/// One site's allocations on one device.
#[derive(Debug)]
struct DeviceSite {
    live: u64,
    /// Live bytes at the device's latest peak, valid when `stamp` is the device's version.
    at_peak: u64,
    stamp: u64,
    series: Series,
}

impl Device {
    fn new(axis: &Axis) -> Device {
        Device {
            live: Series::new(axis),
            granted: Series::new(axis),
            granted_peak: 0,
            allocations: Series::new(axis),
            frees: Series::new(axis),
            vmm_reserved: Series::new(axis),
            vmm_mapped: Series::new(axis),
            pool: Series::new(axis),
            pool_reserved: Series::new(axis),
            pool_used: Series::new(axis),
            pool_samples: 0,
            pools: BTreeMap::new(),
            fragmentation: Series::new(axis),
            largest_hole: Series::new(axis),
            free_in_span: Series::new(axis),
            peak: (0, 0, 0),
            space: AddressSpace::default(),
            worst: None,
            pins: Vec::new(),
            has_addresses: false,
            sites: Sites::default(),
            peak_version: 0,
        }
    }

    /// Sets the pool series to the sums of the device's pools' latest samples.
    fn pool_sums(&mut self, axis: &Axis) {
        let (r, u) = self
            .pools
            .values()
            .fold((0u64, 0u64), |(r, u), v| (r.saturating_add(v.0), u.saturating_add(v.1)));
        self.pool_reserved.set(axis, r);
        self.pool_used.set(axis, u);
    }

    /// `stack`'s share of this device, ready for a change of its bytes (on the site axis).
    /// Called before the device's peak is updated, as [`Tracker::site_in`] is for the
    /// process.
    #[inline(always)]
    fn site_now(&mut self, site_axis: &Axis, stack: StackId) -> &mut DeviceSite {
        let version = self.peak_version;
        let s = self.sites.entry_or_insert_with(stack, || DeviceSite {
            live: 0,
            at_peak: 0,
            stamp: version,
            series: Series::new(site_axis),
        });
        if s.stamp != version {
            s.at_peak = s.live;
            s.stamp = version;
        }
        s
    }

    /// Sites live at the device's peak (largest first, at most [`DEVICE_PEAK_SITES`]) and the
    /// [`DEVICE_STACKED`] sites with the most live bytes over the run, with their series: this
    /// device's shares of spread sites, and the sites of the process that allocated on this
    /// `device` alone.
    fn site_results(
        &mut self,
        site_axis: &Axis,
        device: i32,
        sites: &mut Sites<Site>,
    ) -> (Vec<SiteBytes>, Vec<(StackId, Vec<u64>)>) {
        let version = self.peak_version;
        let mut at_peak = Vec::new();
        let mut by_area: Vec<(u128, StackId, Vec<u64>)> = Vec::new();
        let own = sites
            .iter_mut()
            .filter(|(_, s)| !s.spread && s.device == device)
            .map(|(stack, s)| (stack, s.live, s.device_at_peak, s.device_stamp, &mut s.series));
        let spread = self
            .sites
            .iter_mut()
            .map(|(stack, s)| (stack, s.live, s.at_peak, s.stamp, &mut s.series));
        for (stack, live, share_at_peak, stamp, series) in own.chain(spread) {
            let bytes = if stamp != version { live } else { share_at_peak };
            if bytes > 0 {
                at_peak.push(SiteBytes {
                    stack: *stack,
                    bytes,
                    allocations: 0,
                });
            }
            let series: Vec<u64> = series.points(site_axis).iter().map(|p| p.last).collect();
            let area: u128 = series.iter().map(|v| u128::from(*v)).sum();
            if area > 0 {
                by_area.push((area, *stack, series));
            }
        }
        at_peak.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.stack.0.cmp(&b.stack.0)));
        at_peak.truncate(DEVICE_PEAK_SITES);
        by_area.sort_by(|a, b| b.0.cmp(&a.0).then(a.1 .0.cmp(&b.1 .0)));
        let stacked = by_area
            .into_iter()
            .take(DEVICE_STACKED)
            .map(|(_, stack, series)| (stack, series))
            .collect();
        (at_peak, stacked)
    }

    /// Brings the series that every allocation and free sets to the axis's current bucket,
    /// whenever the axis moves on ([`Tracker::bucket_ends`]), so that those events set them
    /// without looking at the axis ([`Series::set_caught_up`]).
    fn catch_up(&mut self, axis: &Axis) {
        for s in [
            &mut self.live,
            &mut self.granted,
            &mut self.allocations,
            &mut self.frees,
            &mut self.pool,
        ] {
            s.catch_up(axis);
        }
    }

    /// Looks at the address space's holes (at a bucket's end): its series, and the worst
    /// moment so far.
    fn sample(&mut self, axis: &Axis, seq: u64, time_ns: u64) {
        if !self.has_addresses {
            return;
        }
        let holes = self.space.holes();
        let frag = holes.fragmentation();
        self.fragmentation.set(axis, (frag * 1e6) as u64);
        self.largest_hole.set(axis, holes.largest);
        self.free_in_span.set(axis, holes.free);
        let stranded = holes.stranded();
        if stranded > 0 && self.worst.is_none_or(|w| stranded > w.stranded) {
            self.worst = Some(Worst {
                stranded,
                fragmentation: frag,
                free: holes.free,
                largest_hole: holes.largest,
                holes: holes.count,
                seq,
                time_ns,
                live: self.live.value(),
            });
            self.pins = pin_sites(&self.space.pins());
        }
    }
}

#[derive(Debug)]
struct Site {
    kind: MemKind,
    api: Api,
    device: i32,
    pool: bool,
    live: u64,
    live_count: u64,
    allocations: u64,
    frees: u64,
    bytes: u64,
    lifetimes: u128,
    high: u64,
    at_peak: u64,
    stamp: u64,
    series: Series,
    marks: Option<Series>,
    /// Whether the site allocated on another device than `device`: then each device's share
    /// of it is a [`DeviceSite`] of that device. Until then, its share of `device` is the site
    /// itself (its live bytes and series), with its own value at that device's peak below,
    /// so that an event changes one site, not two.
    spread: bool,
    /// Live bytes at `device`'s latest peak, valid when `device_stamp` is that device's peak
    /// version (while the site is not spread).
    device_at_peak: u64,
    device_stamp: u64,
}

impl Site {
    /// A site seen for the first time, at peak version `stamp` (`device_stamp` of its
    /// device's peak): nothing live, a series on `axis`, and one on `mark_axis` while marks
    /// are followed.
    fn new(
        kind: MemKind,
        api: Api,
        device: i32,
        pool: bool,
        (stamp, device_stamp): (u64, u64),
        axis: &Axis,
        mark_axis: Option<&Axis>,
    ) -> Site {
        Site {
            kind,
            api,
            device,
            pool,
            live: 0,
            live_count: 0,
            allocations: 0,
            frees: 0,
            bytes: 0,
            lifetimes: 0,
            high: 0,
            at_peak: 0,
            stamp,
            series: Series::new(axis),
            marks: mark_axis.map(Series::new),
            spread: false,
            device_at_peak: 0,
            device_stamp,
        }
    }

    /// Whether the site is its own share of `device` (it never allocated on another one).
    #[inline(always)]
    fn is_share_of(&self, device: i32) -> bool {
        !self.spread && self.device == device
    }

    /// Readies the site's own share of its device for a change: its value at that device's
    /// peak taken if the device reached a new one (`version`) since the site last changed.
    #[inline(always)]
    fn share_now(&mut self, version: u64) {
        if self.device_stamp != version {
            self.device_at_peak = self.live;
            self.device_stamp = version;
        }
    }
}

/// The site at `stack` allocates on another device than its own: its share of its own device
/// becomes a [`DeviceSite`] of that device (made from the site as it is, before the change).
#[cold]
#[inline(never)]
fn spread(devices: &mut Sites<Device, i32>, axis: &Axis, stack: StackId, s: &mut Site) {
    s.spread = true;
    let d = device_in(devices, axis, s.device);
    d.sites.entry_or_insert_with(stack, || DeviceSite {
        live: s.live,
        at_peak: s.device_at_peak,
        stamp: s.device_stamp,
        series: s.series.clone(),
    });
}

/// The pass; see the module documentation.
#[derive(Debug)]
pub struct Tracker {
    options: TrackerOptions,
    events: u64,
    axis: Axis,
    /// The time and the sequence number of the last event of each bucket (only their `last`
    /// is read): written once a bucket is done, from `last` ([`Tracker::event`]).
    times: Series,
    seqs: Series,
    site_axis: Axis,
    site_times: Series,
    /// Whether `last` is an event not yet written into `times`, `seqs` and `site_times`.
    times_due: bool,
    mark_axis: Axis,
    mark_times: Series,
    marks: u64,
    mark_names: Vec<(String, u64)>,
    markers: Markers,
    /// By device, in the order met (sorted at the end).
    devices: Sites<Device, i32>,
    sites: Sites<Site>,
    live: u64,
    peak: (u64, u64, u64),
    peak_version: u64,
    histogram: SizeClasses,
    pools: Vec<PoolSummary>,
    ooms: Vec<Oom>,
    failed: u64,
    snapshots: Vec<SnapshotState>,
    snapshot_ids: Vec<u64>,
    /// The highest live bytes since the first snapshot asked for (none met yet: `None`).
    high_since_snapshot: Option<u64>,
    seq_range: (u64, u64),
    now: (u64, u64),
    /// Sequence number and time of the last memory event.
    last: (u64, u64),
    /// Times of the first and the last record (ns).
    time_range: (u64, u64),
    /// The memory events and points' width of a checkpoint's history read ([`history`]).
    history: Option<(u64, u64)>,
    /// Whether the peak is the history's (its sites' shares are the history's).
    peak_from_history: bool,
}

impl Tracker {
    /// An empty pass.
    pub fn new(options: TrackerOptions) -> Tracker {
        let axis = Axis::new(TIMELINE_POINTS);
        let site_axis = Axis::new(SITE_POINTS);
        let mark_axis = Axis::new(SITE_POINTS);
        Tracker {
            options,
            events: 0,
            times: Series::new(&axis),
            seqs: Series::new(&axis),
            axis,
            site_times: Series::new(&site_axis),
            site_axis,
            times_due: false,
            mark_times: Series::new(&mark_axis),
            mark_axis,
            marks: 0,
            mark_names: Vec::new(),
            markers: Markers::default(),
            devices: Sites::default(),
            sites: Sites::default(),
            live: 0,
            peak: (0, 0, 0),
            peak_version: 0,
            histogram: SizeClasses::default(),
            pools: Vec::new(),
            ooms: Vec::new(),
            failed: 0,
            snapshots: Vec::new(),
            snapshot_ids: Vec::new(),
            high_since_snapshot: None,
            seq_range: (0, 0),
            now: (0, 0),
            last: (0, 0),
            time_range: (0, 0),
            history: None,
            peak_from_history: false,
        }
    }

    /// Every record passes here first, before the leak model's decisions on it: its sequence
    /// number and time, and the records the memory pass reads itself (marks, snapshots, pools'
    /// usage).
    #[inline]
    pub fn record(&mut self, record: &Record<'_>) {
        self.at(record.seq.0, record.time_ns);
        match &record.body {
            Body::Mark(k) => self.mark(&k.name, k.value),
            Body::Snapshot(k) => self.snapshot(k.id, &k.reason),
            Body::PoolUsage(k) => self.pool_usage(k.pool, k.device, k.reserved, k.used),
            Body::PoolDestroy(k) if k.result.is_success() => self.pool_destroyed(k.pool),
            _ => {}
        }
    }

    /// Sets the sequence number and time of the record being replayed.
    pub fn at(&mut self, seq: u64, time_ns: u64) {
        if self.seq_range == (0, 0) {
            self.seq_range.0 = seq;
            self.time_range.0 = time_ns;
        }
        self.seq_range.1 = seq;
        self.time_range.1 = self.time_range.1.max(time_ns);
        self.now = (seq, time_ns);
    }

    /// One more memory event. Most events stay in their bucket of both axes: they only count
    /// and remember their time; the rest is [`Tracker::bucket_ends`], out of line.
    #[inline(always)]
    fn event(&mut self) {
        let next = self.events + 1;
        // The widths are powers of two, and the site axis's is a multiple of the timeline's
        // (it has fewer buckets over the same events): an event that does not start a bucket
        // of the timeline starts none of the site axis either, and the axes stay where they
        // are (their bucket is the same).
        if next & (self.axis.width() - 1) != 0 {
            self.events = next;
            self.last = self.now;
            self.times_due = true;
            return;
        }
        self.bucket_ends(next);
    }

    /// An event that starts a bucket of the timeline (and perhaps of the site axis).
    #[cold]
    #[inline(never)]
    fn bucket_ends(&mut self, next: u64) {
        // The last event of a bucket is done: the address spaces are looked at once per
        // bucket, at its end, before the axis moves on.
        if self.events > 0 {
            self.sample_spaces();
        }
        // Only the last event of a bucket counts in the times and sequence numbers: the one
        // before this is written when this one moves an axis on to another bucket, not every
        // event at every event.
        if self.times_due {
            let (seq, time) = self.last;
            if self.axis.leaves_bucket(next) {
                self.times.set(&self.axis, time);
                self.seqs.set(&self.axis, seq);
            }
            if self.site_axis.leaves_bucket(next) {
                self.site_times.set(&self.site_axis, time);
            }
        }
        self.events = next;
        self.axis.advance(self.events);
        self.site_axis.advance(self.events);
        self.last = self.now;
        self.times_due = true;
        for d in self.devices.values_mut() {
            d.catch_up(&self.axis);
        }
    }

    /// Writes the last event into the times and sequence numbers of its buckets.
    fn times_done(&mut self) {
        if std::mem::take(&mut self.times_due) {
            let (seq, time) = self.last;
            self.times.set(&self.axis, time);
            self.seqs.set(&self.axis, seq);
            self.site_times.set(&self.site_axis, time);
        }
    }

    fn sample_spaces(&mut self) {
        let (seq, time) = self.last;
        for d in self.devices.values_mut() {
            d.sample(&self.axis, seq, time);
        }
    }

    fn device(&mut self, device: i32) -> &mut Device {
        device_in(&mut self.devices, &self.axis, device)
    }

    /// A successful allocation the model accepted, of a family that is memory (`owned`) or
    /// address space (a VMM reservation); `pool` when its owner is a caching allocator.
    pub fn alloc(&mut self, a: &Allocation, device: i32, owned: bool, pool: bool) {
        self.event();
        let (seq, time) = self.now;
        // The axes are borrowed, never copied: `event` has just written them field by field,
        // and a copy reads them back in 16-byte loads that wait for those stores to retire.
        let axis = &self.axis;
        if !owned {
            if a.kind == MemKind::VmmReserve {
                let d = device_in(&mut self.devices, axis, device);
                d.vmm_reserved.up(axis, a.size);
            }
            return;
        }
        self.histogram.add(a.size);
        let axes = (axis, &self.site_axis, (self.marks > 0).then_some(&self.mark_axis));
        let (d, s, own) = device_and_site(
            &mut self.devices,
            &mut self.sites,
            self.peak_version,
            axes,
            a,
            device,
            pool,
        );
        s.live = s.live.saturating_add(a.size);
        s.live_count += 1;
        s.allocations = s.allocations.saturating_add(1);
        s.bytes = s.bytes.saturating_add(a.size);
        s.high = s.high.max(s.live);
        let live = s.live;
        s.series.set(&self.site_axis, live);
        if let Some(m) = &mut s.marks {
            m.set(&self.mark_axis, live);
        }
        self.live = self.live.saturating_add(a.size);
        if let Some(high) = &mut self.high_since_snapshot {
            *high = (*high).max(self.live);
        }
        if self.live > self.peak.0 {
            self.peak = (self.live, seq, time);
            self.peak_version += 1;
        }
        if !own {
            let ds = d.site_now(&self.site_axis, a.stack);
            ds.live = ds.live.saturating_add(a.size);
            ds.series.set(&self.site_axis, ds.live);
        }
        d.live.up_caught_up(axis, a.size);
        d.granted.up_caught_up(axis, granted(a.kind, a.size));
        d.granted_peak = d.granted_peak.max(d.granted.value());
        d.allocations.count_caught_up(axis);
        if pool {
            d.pool.up_caught_up(axis, a.size);
        }
        if d.live.value() > d.peak.0 {
            d.peak = (d.live.value(), seq, time);
            d.peak_version += 1;
        }
        if has_address(a.kind) {
            d.has_addresses = true;
            d.space.insert(a.ptr.0, a.size, a.stack, a.seq.0);
        }
    }

    /// An allocation the model no longer holds live (freed, torn down, last mapping gone).
    pub fn free(&mut self, a: &Allocation, device: i32, owned: bool) {
        self.event();
        let seq = self.now.0;
        // Borrowed, not copied, as in `alloc`.
        let axis = &self.axis;
        if !owned {
            if a.kind == MemKind::VmmReserve {
                let d = device_in(&mut self.devices, axis, device);
                d.vmm_reserved.down(axis, a.size);
            }
            return;
        }
        let axes = (axis, &self.site_axis, (self.marks > 0).then_some(&self.mark_axis));
        let (d, s, own) = device_and_site(
            &mut self.devices,
            &mut self.sites,
            self.peak_version,
            axes,
            a,
            device,
            false,
        );
        s.live -= a.size.min(s.live);
        s.live_count = s.live_count.saturating_sub(1);
        s.frees = s.frees.saturating_add(1);
        s.lifetimes = s.lifetimes.saturating_add(u128::from(seq.saturating_sub(a.seq.0)));
        let live = s.live;
        let pool = s.pool;
        s.series.set(&self.site_axis, live);
        if let Some(m) = &mut s.marks {
            m.set(&self.mark_axis, live);
        }
        self.live -= a.size.min(self.live);
        if !own {
            let ds = d.site_now(&self.site_axis, a.stack);
            ds.live = ds.live.saturating_sub(a.size);
            ds.series.set(&self.site_axis, ds.live);
        }
        d.live.down_caught_up(axis, a.size);
        d.granted.down_caught_up(axis, granted(a.kind, a.size));
        d.frees.count_caught_up(axis);
        if pool {
            d.pool.down_caught_up(axis, a.size);
        }
        if has_address(a.kind) {
            d.space.remove(a.ptr.0);
        }
    }

    /// A VMM mapping made (`size` > 0) or removed, on the device of its handle.
    pub fn mapping(&mut self, device: i32, size: i128) {
        self.event();
        let axis = &self.axis;
        let d = device_in(&mut self.devices, axis, device);
        let by = u64::try_from(size.unsigned_abs()).unwrap_or(u64::MAX);
        if size >= 0 {
            d.vmm_mapped.up(axis, by);
        } else {
            d.vmm_mapped.down(axis, by);
        }
    }

    /// The allocation's site in `sites` (made with `pool` and the peak versions of the process
    /// and of `device` if new), ready for a change of its bytes: its share of the peak taken
    /// if the process reached a new one (`version`) since it last changed. A function of the
    /// fields, as [`device_in`], so that the caller keeps borrowing the axes beside it.
    #[inline(always)]
    fn site_in<'a>(
        sites: &'a mut Sites<Site>,
        (version, device_version): (u64, u64),
        (axis, mark_axis): (&Axis, Option<&Axis>),
        a: &Allocation,
        device: i32,
        pool: bool,
    ) -> &'a mut Site {
        let s = if sites.is_last(a.stack) {
            sites.last_mut()
        } else {
            Self::site_found(sites, (version, device_version), (axis, mark_axis), a, device, pool)
        };
        if s.stamp != version {
            s.at_peak = s.live;
            s.stamp = version;
        }
        s
    }

    /// [`Tracker::site_in`] for another site than the one asked last, out of line.
    #[cold]
    #[inline(never)]
    fn site_found<'a>(
        sites: &'a mut Sites<Site>,
        versions: (u64, u64),
        (axis, mark_axis): (&Axis, Option<&Axis>),
        a: &Allocation,
        device: i32,
        pool: bool,
    ) -> &'a mut Site {
        sites.entry_or_insert_with(a.stack, || {
            Site::new(a.kind, a.api, device, pool, versions, axis, mark_axis)
        })
    }

    /// A failed allocation of a memory family.
    pub fn failed(&mut self, api: Api, result: CuResult, size: u64, stack: StackId, device: i32) {
        self.event();
        self.failed += 1;
        if self.ooms.len() >= OOM_DETAILS {
            return;
        }
        let (seq, time_ns) = self.now;
        let sites = self.sites_now(|s| s.device == device);
        let d = self.device(device);
        let holes = d.space.holes();
        let oom = Oom {
            api,
            result,
            size,
            stack,
            device,
            seq,
            time_ns,
            live: d.live.value(),
            free_in_span: holes.free,
            largest_hole: holes.largest,
            fragmentation: holes.fragmentation(),
            sites: sites.into_iter().take(SITES_KEPT).collect(),
            pins: pin_sites(&d.space.pins()),
        };
        self.ooms.push(oom);
    }

    fn sites_now(&self, keep: impl Fn(&Site) -> bool) -> Vec<SiteBytes> {
        let mut v: Vec<SiteBytes> = self
            .sites
            .iter()
            .filter(|(_, s)| s.live > 0 && keep(s))
            .map(|(k, s)| SiteBytes {
                stack: *k,
                bytes: s.live,
                allocations: s.live_count,
            })
            .collect();
        v.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.stack.0.cmp(&b.stack.0)));
        v
    }

    /// A `PoolUsage` record: a stream-ordered pool's reserved and used bytes, sampled by the
    /// shim (device < 0: the driver did not say).
    pub fn pool_usage(&mut self, pool: u64, device: i32, reserved: u64, used: u64) {
        let device = if device < 0 { UNKNOWN_DEVICE } else { device };
        let (seq, time_ns) = self.now;
        let axis = self.axis;
        let d = self.device(device);
        d.pool_samples += 1;
        if !d.pools.contains_key(&pool) && d.pools.len() >= POOLS_KEPT {
            return;
        }
        d.pools.insert(pool, (reserved, used));
        d.pool_sums(&axis);
        let i = match self.pools.iter().position(|p| p.pool == pool) {
            Some(i) => i,
            None if self.pools.len() < POOLS_KEPT => {
                self.pools.push(PoolSummary {
                    pool,
                    device,
                    samples: 0,
                    reserved_max: 0,
                    used_max: 0,
                    reserved: 0,
                    used: 0,
                    seq,
                    time_ns,
                    destroyed: None,
                });
                self.pools.len() - 1
            }
            None => return,
        };
        let p = &mut self.pools[i];
        p.samples += 1;
        p.reserved_max = p.reserved_max.max(reserved);
        p.used_max = p.used_max.max(used);
        p.reserved = reserved;
        p.used = used;
        p.seq = seq;
        p.time_ns = time_ns;
        p.destroyed = None;
    }

    /// A successful `PoolDestroy` record: the driver released what the pool reserved, so its
    /// last sample leaves the device's sums (allocations still outstanding from it are in the
    /// allocation records, as every stream-ordered allocation is).
    pub fn pool_destroyed(&mut self, pool: u64) {
        let (seq, _) = self.now;
        let axis = self.axis;
        for d in self.devices.values_mut() {
            if d.pools.remove(&pool).is_some() {
                d.pool_sums(&axis);
            }
        }
        if let Some(p) = self.pools.iter_mut().find(|p| p.pool == pool) {
            p.destroyed = Some(seq);
        }
    }

    /// A `Mark` record: a step of the program.
    pub fn mark(&mut self, name: &str, value: u64) {
        self.markers.push(Marker {
            kind: MarkerKind::Mark,
            name: format!("{name} {value}"),
            time_ns: self.now.1,
            events: self.events,
        });
        if self.marks == 0 {
            // Sites made before the first mark start their mark series with what they hold.
            let axis = &self.mark_axis;
            for s in self.sites.values_mut() {
                let mut m = Series::new(axis);
                m.set(axis, s.live);
                s.marks = Some(m);
            }
        }
        self.marks += 1;
        self.mark_axis.advance(self.marks);
        self.mark_times.set(&self.mark_axis, self.now.1);
        if let Some((_, n)) = self.mark_names.iter_mut().find(|(n, _)| n == name) {
            *n += 1;
        } else if self.mark_names.len() < 16 {
            self.mark_names.push((name.to_string(), 1));
        }
    }

    /// A `Snapshot` record.
    pub fn snapshot(&mut self, id: u64, reason: &str) {
        let (kind, name) = snapshot_marker(id, reason);
        self.markers.push(Marker {
            kind,
            name,
            time_ns: self.now.1,
            events: self.events,
        });
        if self.snapshot_ids.len() < 1000 {
            self.snapshot_ids.push(id);
        }
        if !self.options.snapshots.contains(&id) || self.snapshots.iter().any(|s| s.id == id) {
            return;
        }
        let sites = self.sites_now(|_| true);
        let high = *self.high_since_snapshot.get_or_insert(self.live);
        self.snapshots.push(SnapshotState {
            id,
            reason: reason.to_string(),
            seq: self.now.0,
            time_ns: self.now.1,
            live: self.live,
            high_since_first: high,
            sites,
        });
    }

    /// Ends the pass.
    pub fn finish(mut self) -> MemoryReplay {
        self.sample_spaces();
        self.times_done();
        let axis = self.axis;
        let mut devices = Vec::new();
        let mut by_device: Vec<(i32, Device)> = std::mem::take(&mut self.devices).into_iter().collect();
        by_device.sort_unstable_by_key(|(device, _)| *device);
        for (device, mut d) in by_device {
            let last = |s: &mut Series| s.points(&axis).iter().map(|p| p.last).collect::<Vec<u64>>();
            let max = |s: &mut Series| s.points(&axis).iter().map(|p| p.max).collect::<Vec<u64>>();
            let (peak_sites, stacked) = d.site_results(&self.site_axis, device, &mut self.sites);
            devices.push(DeviceTimeline {
                peak_sites,
                stacked,
                device,
                live: d.live.points(&axis),
                granted: d.granted.points(&axis),
                granted_peak: d.granted_peak,
                allocations: last(&mut d.allocations),
                frees: last(&mut d.frees),
                vmm_reserved: max(&mut d.vmm_reserved),
                vmm_mapped: max(&mut d.vmm_mapped),
                pool: max(&mut d.pool),
                pool_reserved: max(&mut d.pool_reserved),
                pool_used: max(&mut d.pool_used),
                pool_samples: d.pool_samples,
                fragmentation_ppm: d.fragmentation.points(&axis).iter().map(|p| p.max).collect(),
                largest_hole: last(&mut d.largest_hole),
                free_in_span: last(&mut d.free_in_span),
                peak: d.peak,
                worst: d.worst,
                pins: d.pins,
                has_addresses: d.has_addresses,
            });
        }
        let version = self.peak_version;
        // Marks in a dropped history are gone: with one, growth is judged over the whole run's
        // memory events instead.
        let use_marks = self.marks >= growth::MIN_POINTS as u64 && self.history.is_none();
        let site_times: Vec<u64> = self.site_times.points(&self.site_axis).iter().map(|p| p.last).collect();
        let mark_times: Vec<u64> = self.mark_times.points(&self.mark_axis).iter().map(|p| p.last).collect();
        let mut peak_sites = Vec::new();
        let mut sites = Vec::new();
        let mut grown = Vec::new();
        for (stack, mut s) in self.sites {
            if s.stamp != version {
                s.at_peak = s.live;
            }
            if s.at_peak > 0 {
                peak_sites.push(SiteBytes {
                    stack,
                    bytes: s.at_peak,
                    allocations: 0,
                });
            }
            let series = s.series.points(&self.site_axis);
            let found = match (&mut s.marks, use_marks) {
                (Some(m), true) => {
                    let points = m.points(&self.mark_axis);
                    growth::detect(stack, &points, &mark_times, self.mark_axis.width(), true)
                }
                _ => growth::detect(stack, &series, &site_times, self.site_axis.width(), false),
            };
            grown.extend(found);
            let mean_lifetime = if s.frees > 0 {
                (s.lifetimes / u128::from(s.frees)) as u64
            } else {
                0
            };
            sites.push(SiteSummary {
                stack,
                kind: s.kind,
                api: s.api,
                device: s.device,
                allocations: s.allocations,
                frees: s.frees,
                bytes: s.bytes,
                high: s.high,
                at_peak: s.at_peak,
                live: s.live,
                mean_lifetime,
                series,
                pool: s.pool,
            });
        }
        peak_sites.sort_by(|a, b| b.bytes.cmp(&a.bytes).then(a.stack.0.cmp(&b.stack.0)));
        sites.sort_by(|a, b| b.high.cmp(&a.high).then(a.stack.0.cmp(&b.stack.0)));
        grown.sort_by(|a, b| b.growth_bytes.cmp(&a.growth_bytes).then(a.stack.0.cmp(&b.stack.0)));
        MemoryReplay {
            events: self.events,
            bucket_events: axis.width(),
            times: self.times.points(&axis).iter().map(|p| p.last).collect(),
            seqs: self.seqs.points(&axis).iter().map(|p| p.last).collect(),
            devices,
            peak: self.peak,
            peak_sites,
            sites,
            site_times,
            site_bucket_events: self.site_axis.width(),
            growth: grown,
            marks: self.marks,
            mark_names: self.mark_names,
            ooms: self.ooms,
            failed: self.failed,
            histogram: self.histogram.histogram(),
            pools: self.pools,
            snapshots: self.snapshots,
            snapshot_ids: self.snapshot_ids,
            seq_range: self.seq_range,
            time_range: self.time_range,
            markers: self.markers.into_kept(),
        }
    }
}

/// The memory pass follows the leak model's view of what is live.
impl Observer for Tracker {
    fn wants_memory(&self) -> bool {
        true
    }

    // Inlined into the leak model's replay (another codegen unit), where each decision's kind
    // is known: each is then a direct call of the method below, as before the split.
    #[inline(always)]
    fn decided(&mut self, decision: Decision<'_>) {
        match decision {
            Decision::Allocated {
                allocation,
                device,
                pool,
            } => self.alloc(allocation, device, is_owned_memory(allocation.kind), pool),
            Decision::Freed { allocation, device } => self.free(allocation, device, is_owned_memory(allocation.kind)),
            Decision::Failed {
                api,
                result,
                kind,
                size,
                stack,
                device,
            } if is_owned_memory(kind) => self.failed(api, result, size, stack, device),
            Decision::Failed { .. } => {}
            Decision::Mapped { device, bytes } => self.mapping(device, bytes),
            Decision::History { history, pool } => self.history(history, pool),
            Decision::Teardown { .. } => {}
        }
    }
}

/// The device of an allocation and its site (made with `pool` if new), each ready for a
/// change of its bytes, and whether the site is its own share of the device (else the
/// device's share of it is a [`DeviceSite`], made here when the site first allocates on a
/// second device). Process peak version `version`; a function of the fields, as
/// [`device_in`].
#[inline(always)]
fn device_and_site<'a>(
    devices: &'a mut Sites<Device, i32>,
    sites: &'a mut Sites<Site>,
    version: u64,
    (axis, site_axis, mark_axis): (&Axis, &Axis, Option<&Axis>),
    a: &Allocation,
    device: i32,
    pool: bool,
) -> (&'a mut Device, &'a mut Site, bool) {
    // By its place: a device made by `spread` does not move it.
    let at = devices.index_or_insert_with(device, || Device::new(axis));
    let device_version = devices.at(at).peak_version;
    let s = Tracker::site_in(
        sites,
        (version, device_version),
        (site_axis, mark_axis),
        a,
        device,
        pool,
    );
    let own = s.is_share_of(device);
    if own {
        s.share_now(device_version);
    } else if !s.spread {
        spread(devices, axis, a.stack, s);
    }
    (devices.at(at), s, own)
}

/// The device's state in `devices`, made on `axis` if it has none. A function of the fields,
/// not a method, so that the caller keeps borrowing the tracker's axes beside it.
#[inline]
fn device_in<'a>(devices: &'a mut Sites<Device, i32>, axis: &Axis, device: i32) -> &'a mut Device {
    devices.entry_or_insert_with(device, || Device::new(axis))
}

/// The bytes the driver grants for `size` asked for in family `kind`, by [`GRANTED_RULE`]:
/// allocations from the device heap are rounded up to [`GRANT_ALIGN`]; a physical VMM handle's
/// size is already whole granules (`cuMemCreate` rejects any other); the rest as asked.
pub fn granted(kind: MemKind, size: u64) -> u64 {
    match kind {
        // Rounded up, or u64::MAX where that does not fit.
        MemKind::Device | MemKind::Async => size
            .checked_add(GRANT_ALIGN - 1)
            .map_or(u64::MAX, |s| s & !(GRANT_ALIGN - 1)),
        _ => size,
    }
}

/// Whether a family's pointers are addresses in the device's heap (not handles, not host).
fn has_address(kind: MemKind) -> bool {
    matches!(kind, MemKind::Device | MemKind::Async)
}
