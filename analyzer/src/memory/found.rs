//! What the memory pass finds: timelines, sites, failed allocations, snapshots.

use std::collections::HashMap;

use gpuleak_format::{Api, CuResult, MemKind, StackId};

use super::growth::Growth;
use super::series::Span;
use super::space::Pin;
use super::PINS_KEPT;

/// Pinning allocations of one site at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PinSite {
    /// The site.
    pub stack: StackId,
    /// Its pinning allocations (live with a hole on each side).
    pub allocations: u64,
    /// Their bytes.
    pub bytes: u64,
    /// The largest hole freeing one of them would make (its holes and itself).
    pub largest_joined: u64,
    /// Sequence number of the oldest.
    pub oldest_seq: u64,
}

/// Pins folded by site, largest joined hole first, at most [`PINS_KEPT`] sites.
pub fn pin_sites(pins: &[Pin]) -> Vec<PinSite> {
    let mut by: HashMap<StackId, PinSite> = HashMap::new();
    for p in pins {
        let s = by.entry(p.stack).or_insert(PinSite {
            stack: p.stack,
            allocations: 0,
            bytes: 0,
            largest_joined: 0,
            oldest_seq: p.seq,
        });
        s.allocations += 1;
        s.bytes = s.bytes.saturating_add(p.size);
        s.largest_joined = s.largest_joined.max(p.joined);
        s.oldest_seq = s.oldest_seq.min(p.seq);
    }
    let mut v: Vec<PinSite> = by.into_values().collect();
    v.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(b.largest_joined.cmp(&a.largest_joined))
            .then(a.stack.0.cmp(&b.stack.0))
    });
    v.truncate(PINS_KEPT);
    v
}

/// Live bytes of one site at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SiteBytes {
    /// Allocation stack.
    pub stack: StackId,
    /// Live bytes.
    pub bytes: u64,
    /// Live allocations.
    pub allocations: u64,
}

/// One device's memory over the run.
#[derive(Debug, Clone)]
pub struct DeviceTimeline {
    /// Device ordinal ([`HOST`] for pinned host memory, [`UNKNOWN_DEVICE`]).
    pub device: i32,
    /// Live requested bytes per bucket.
    pub live: Vec<Span>,
    /// Live granted bytes per bucket (by [`super::GRANTED_RULE`]).
    pub granted: Vec<Span>,
    /// Highest live granted bytes.
    pub granted_peak: u64,
    /// Allocations made up to each bucket's end (cumulative).
    pub allocations: Vec<u64>,
    /// Frees made up to each bucket's end (cumulative).
    pub frees: Vec<u64>,
    /// Live VMM address reservations (bytes of address space), highest in each bucket.
    pub vmm_reserved: Vec<u64>,
    /// Live VMM mappings (bytes), highest in each bucket.
    pub vmm_mapped: Vec<u64>,
    /// Live memory allocated by known caching allocators, highest in each bucket.
    pub pool: Vec<u64>,
    /// Bytes the device's stream-ordered pools reserved, as last sampled (`PoolUsage`
    /// records), highest in each bucket.
    pub pool_reserved: Vec<u64>,
    /// Bytes of them in use, as last sampled, highest in each bucket.
    pub pool_used: Vec<u64>,
    /// `PoolUsage` records of this device.
    pub pool_samples: u64,
    /// Fragmentation of the address space, in millionths, at each bucket's end.
    pub fragmentation_ppm: Vec<u64>,
    /// Largest hole at each bucket's end.
    pub largest_hole: Vec<u64>,
    /// Free bytes in the used span at each bucket's end.
    pub free_in_span: Vec<u64>,
    /// Highest live bytes, and when (seq, ns).
    pub peak: (u64, u64, u64),
    /// The moment the most free memory was unusable by one allocation, if any.
    pub worst: Option<Worst>,
    /// Sites of the allocations that split free memory at (about) the worst moment.
    pub pins: Vec<PinSite>,
    /// Whether any allocation of this device has an address (not only handles).
    pub has_addresses: bool,
    /// Sites live on this device at its peak (their bytes on this device), largest first, at
    /// most [`super::DEVICE_PEAK_SITES`].
    pub peak_sites: Vec<SiteBytes>,
    /// The [`super::DEVICE_STACKED`] sites with the most live bytes on this device over the
    /// run, each with its live bytes here at each site-axis bucket's end.
    pub stacked: Vec<(StackId, Vec<u64>)>,
}

/// The moment of a device's worst fragmentation.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Worst {
    /// Free bytes no allocation larger than the largest hole could use.
    pub stranded: u64,
    /// 1 - largest hole / free.
    pub fragmentation: f64,
    /// Free bytes in the used span.
    pub free: u64,
    /// Largest hole.
    pub largest_hole: u64,
    /// Holes.
    pub holes: u64,
    /// When.
    pub seq: u64,
    /// When, ns.
    pub time_ns: u64,
    /// Live bytes on the device then.
    pub live: u64,
}

/// What one allocation site did over the run.
#[derive(Debug, Clone)]
pub struct SiteSummary {
    /// Allocation stack.
    pub stack: StackId,
    /// Family of its first allocation.
    pub kind: MemKind,
    /// Entry point of its first allocation.
    pub api: Api,
    /// Device of its first allocation.
    pub device: i32,
    /// Allocations.
    pub allocations: u64,
    /// Frees (of every kind: free, teardown).
    pub frees: u64,
    /// Bytes allocated in all.
    pub bytes: u64,
    /// Highest live bytes.
    pub high: u64,
    /// Live bytes at the process's peak.
    pub at_peak: u64,
    /// Live bytes at the end.
    pub live: u64,
    /// Mean lifetime of its freed allocations, in sequence numbers.
    pub mean_lifetime: u64,
    /// Live bytes per site-axis bucket.
    pub series: Vec<Span>,
    /// Whether its stack's owner is a known caching allocator.
    pub pool: bool,
}

/// One stream-ordered pool, as the shim sampled it (`PoolUsage` records).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolSummary {
    /// The pool's handle.
    pub pool: u64,
    /// Its device ([`super::UNKNOWN_DEVICE`] when the driver did not say).
    pub device: i32,
    /// Samples.
    pub samples: u64,
    /// Highest reserved bytes sampled.
    pub reserved_max: u64,
    /// Highest used bytes sampled.
    pub used_max: u64,
    /// Reserved bytes at the last sample.
    pub reserved: u64,
    /// Used bytes at the last sample.
    pub used: u64,
    /// When the last sample was taken.
    pub seq: u64,
    /// When, ns.
    pub time_ns: u64,
    /// When the pool was destroyed (`PoolDestroy`), if it was after its last sample.
    pub destroyed: Option<u64>,
}

/// The state at a failed allocation.
#[derive(Debug, Clone)]
pub struct Oom {
    /// The call.
    pub api: Api,
    /// Its result.
    pub result: CuResult,
    /// Bytes asked for.
    pub size: u64,
    /// Its stack.
    pub stack: StackId,
    /// Device.
    pub device: i32,
    /// When.
    pub seq: u64,
    /// When, ns.
    pub time_ns: u64,
    /// Live bytes on the device.
    pub live: u64,
    /// Free bytes in the device's used span.
    pub free_in_span: u64,
    /// Largest hole.
    pub largest_hole: u64,
    /// Fragmentation.
    pub fragmentation: f64,
    /// Largest sites on the device then.
    pub sites: Vec<SiteBytes>,
    /// Sites of the allocations splitting the free memory then.
    pub pins: Vec<PinSite>,
}

/// The live state at a `Snapshot` record.
#[derive(Debug, Clone)]
pub struct SnapshotState {
    /// Its id.
    pub id: u64,
    /// Why it was taken.
    pub reason: String,
    /// When.
    pub seq: u64,
    /// When, ns.
    pub time_ns: u64,
    /// Live bytes.
    pub live: u64,
    /// The highest live bytes from the first snapshot asked for (in trace order) to this one:
    /// the peak between the two snapshots of `--at N..M`.
    pub high_since_first: u64,
    /// Every site with live bytes then, largest first.
    pub sites: Vec<SiteBytes>,
}

/// Sizes of the allocations, by power of two: `counts[i]` allocations of `2^(i-1) < size <= 2^i`.
#[derive(Debug, Clone, Default)]
pub struct Histogram {
    /// Allocations per size class.
    pub counts: Vec<u64>,
    /// Bytes per size class.
    pub bytes: Vec<u64>,
}

/// The size classes counted while the pass runs: every class a `u64` size can fall in (0 to
/// 64), so that counting one needs no check of room; [`SizeClasses::histogram`] keeps those up
/// to the largest met.
#[derive(Debug, Clone)]
pub(super) struct SizeClasses {
    counts: [u64; 65],
    bytes: [u64; 65],
    /// One past the largest class met.
    used: usize,
}

impl Default for SizeClasses {
    fn default() -> Self {
        SizeClasses {
            counts: [0; 65],
            bytes: [0; 65],
            used: 0,
        }
    }
}

impl SizeClasses {
    #[inline]
    pub(super) fn add(&mut self, size: u64) {
        // 0 to 64: always in the arrays.
        let class = (64 - size.saturating_sub(1).leading_zeros()) as usize;
        self.used = self.used.max(class + 1);
        self.counts[class] += 1;
        self.bytes[class] = self.bytes[class].saturating_add(size);
    }

    /// The histogram of the sizes met.
    pub(super) fn histogram(&self) -> Histogram {
        Histogram {
            counts: self.counts[..self.used].to_vec(),
            bytes: self.bytes[..self.used].to_vec(),
        }
    }
}

/// What the pass found.
#[derive(Debug, Clone, Default)]
pub struct MemoryReplay {
    /// Memory events (allocations, frees, failed allocations, VMM maps and unmaps) in the run.
    pub events: u64,
    /// Memory events per timeline bucket.
    pub bucket_events: u64,
    /// Time at each timeline bucket's end (ns).
    pub times: Vec<u64>,
    /// Sequence number at each timeline bucket's end.
    pub seqs: Vec<u64>,
    /// Per device, in device order (host and unknown first).
    pub devices: Vec<DeviceTimeline>,
    /// Highest live bytes of the process, when (seq, ns), and each site's live bytes then.
    pub peak: (u64, u64, u64),
    /// Sites live at the peak, largest first.
    pub peak_sites: Vec<SiteBytes>,
    /// Every site, largest high first.
    pub sites: Vec<SiteSummary>,
    /// Time at each site-axis bucket's end.
    pub site_times: Vec<u64>,
    /// Memory events per site-axis bucket.
    pub site_bucket_events: u64,
    /// Sites whose live bytes kept rising.
    pub growth: Vec<Growth>,
    /// Mark records and the most frequent names.
    pub marks: u64,
    /// Names of the marks, with counts (first 16 names).
    pub mark_names: Vec<(String, u64)>,
    /// Failed allocations, first [`OOM_DETAILS`].
    pub ooms: Vec<Oom>,
    /// Failed allocations in all.
    pub failed: u64,
    /// Allocation sizes.
    pub histogram: Histogram,
    /// Sampled stream-ordered pools, in the order first sampled (at most
    /// [`super::POOLS_KEPT`]).
    pub pools: Vec<PoolSummary>,
    /// States at the requested snapshots.
    pub snapshots: Vec<SnapshotState>,
    /// Ids of every `Snapshot` record met (the first 1000).
    pub snapshot_ids: Vec<u64>,
    /// First and last sequence numbers of the run.
    pub seq_range: (u64, u64),
    /// Times of the first and the last record of the run (ns).
    pub time_range: (u64, u64),
    /// Marks, snapshots and pytest test boundaries where they fell (at most
    /// [`super::markers::MARKERS_KEPT`], spread over the run).
    pub markers: Vec<super::markers::Marker>,
}
