//! The history of live bytes that a checkpoint carries: what the dropped records' memory did
//! over time, so that a report's timeline, peak and growth cover the whole run.
//!
//! The compactor sees every record of the history it drops. It counts memory events as the
//! analyzer's memory pass does (an allocation made or failed, a release, a mapping made or
//! removed) and follows, over an axis of those events cut into at most [`HISTORY_POINTS`]
//! points whose width doubles as the run goes on (adjacent points merge, keeping each one's
//! lowest, highest and last value):
//!
//! - the time and sequence number at each point's end, and the process's peak live bytes;
//! - each device's live bytes, and its peak;
//! - the live bytes of at most [`HISTORY_SITES`] sites (allocation stacks, the analyzer's
//!   unit of growth before it names sites by their frames), with their allocations, frees,
//!   bytes and live bytes at the process's peak;
//! - the live bytes of every other site, together.
//!
//! A site is followed from its first allocation while there is room. When the table is full, a
//! site whose live bytes pass the smallest high-water mark among those followed takes its
//! place; the one it replaces joins the rest, and the newcomer's points before it joined are
//! unknown (`first`), unless it held nothing before (then they are zero). Growth is judged on
//! what a site holds, so the sites that grow are the ones that stay.
//!
//! Each series is one [`SiteHistory`] record of at most `3 * HISTORY_POINTS` numbers (about
//! 4 KiB), so a checkpoint's history is at most `HISTORY_SITES + devices + 2` such records:
//! under 300 KiB with 4 devices, whatever the length of the run. A compactor fed an earlier
//! checkpoint's records (its kept records, then its history) continues that history exactly
//! as if it had seen the whole run.
//!
//! Not in the history: memory that launches of CUDA graphs allocate (their records are kept
//! for good and replayed after the checkpoint), and each device's breakdown by site at its
//! own peak.

use std::borrow::Cow;
use std::collections::hash_map::Entry;
use std::collections::{BTreeMap, HashMap};

use crate::api::Api;
use crate::fields::{Addrs, MemKind, MemLocation, StackId};
use crate::record::SiteHistory;

/// Points of every series, at most (as many as the analyzer's per-site series).
pub const HISTORY_POINTS: u64 = 128;
/// Sites followed alone, at most; the others are one series.
pub const HISTORY_SITES: usize = 64;
/// Device number of pinned host memory (as the analyzer numbers it).
pub const HOST_DEVICE: i32 = -1;
/// Device number of memory whose context the trace never named.
pub const UNKNOWN_DEVICE: i32 = -2;

/// The device an allocation's memory is on, from its family, its API and `aux` field, and its
/// context's device: [`HOST_DEVICE`] for pinned host memory, the location `cuMemCreate`'s
/// properties named when the trace recorded it, else the context's ([`UNKNOWN_DEVICE`] when
/// the trace never named it).
pub fn memory_device(kind: MemKind, api: Api, aux: u64, context_device: Option<i32>) -> i32 {
    if matches!(kind, MemKind::Host | MemKind::HostRegistered) {
        return HOST_DEVICE;
    }
    if api == Api::cuMemCreate {
        match MemLocation::decode(aux) {
            MemLocation::Device(device) => return device,
            MemLocation::Host => return HOST_DEVICE,
            MemLocation::Unknown => {}
        }
    }
    context_device.unwrap_or(UNKNOWN_DEVICE)
}

/// Whether an axis record describes an axis this module makes: a width that is a power of
/// two, at most [`HISTORY_POINTS`] points, and fewer than 2^62 events, so that counting on
/// cannot overflow (a bad record is ignored, never trusted to size anything).
pub fn well_formed(h: &SiteHistory<'_>) -> bool {
    h.width.is_power_of_two() && h.events / h.width < HISTORY_POINTS && h.events < 1 << 62
}

/// Lowest, highest and last value over one point of a series (here and in the analyzer's
/// memory pass, which reads these series and keeps its own the same way).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Span {
    /// Lowest value over the point (the floor a leak raises and churn does not).
    pub min: u64,
    /// Highest value over the point.
    pub max: u64,
    /// Value at the point's end.
    pub last: u64,
}

impl Span {
    /// The same value throughout.
    pub fn flat(v: u64) -> Span {
        Span {
            min: v,
            max: v,
            last: v,
        }
    }

    /// This point followed by `later`.
    pub fn merge(self, later: Span) -> Span {
        Span {
            min: self.min.min(later.min),
            max: self.max.max(later.max),
            last: later.last,
        }
    }

    fn set(&mut self, v: u64) {
        self.min = self.min.min(v);
        self.max = self.max.max(v);
        self.last = v;
    }
}

/// One value over the axis: a span per point up to the current one (the last is open).
#[derive(Debug, Clone)]
struct Track {
    /// Index of the first known point.
    first: u64,
    points: Vec<Span>,
}

impl Track {
    /// A series known from point `first` (`None`: from the start, at zero) holding `value`.
    fn new(points: u64, first: Option<u64>, value: u64) -> Track {
        let first = first.unwrap_or(0).min(points.saturating_sub(1));
        let mut p = vec![Span::default(); points as usize];
        for s in &mut p[first as usize..] {
            *s = Span::flat(value);
        }
        Track { first, points: p }
    }

    fn value(&self) -> u64 {
        self.points.last().map_or(0, |p| p.last)
    }

    fn set(&mut self, v: u64) {
        if let Some(p) = self.points.last_mut() {
            p.set(v);
        }
    }

    /// Adjacent points merge: a point partly unknown is unknown.
    fn halve(&mut self) {
        self.points = self
            .points
            .chunks(2)
            .map(|c| c.iter().copied().reduce(Span::merge).unwrap_or_default())
            .collect();
        self.first = self.first.div_ceil(2);
    }

    /// New points up to `len`, each starting from the last value.
    fn extend(&mut self, len: usize) {
        let carried = Span::flat(self.value());
        self.points.resize(len.max(self.points.len()), carried);
    }

    fn triples(&self) -> Vec<u64> {
        self.points[(self.first as usize).min(self.points.len())..]
            .iter()
            .flat_map(|p| [p.min, p.max, p.last])
            .collect()
    }

    /// From a record's triples (`first` and the point count from the axis).
    fn read(first: u64, points: usize, triples: &[u64]) -> Track {
        let mut p = vec![Span::default(); points];
        for (slot, t) in p.iter_mut().skip(first as usize).zip(triples.chunks_exact(3)) {
            *slot = Span {
                min: t[0],
                max: t[1],
                last: t[2],
            };
        }
        Track {
            first: first.min(points.saturating_sub(1) as u64),
            points: p,
        }
    }
}

/// A device's live bytes.
#[derive(Debug, Clone)]
struct DeviceTrack {
    live: u64,
    /// Allocations and frees of owned memory on it.
    allocations: u64,
    frees: u64,
    high: (u64, u64, u64),
    track: Track,
}

/// A site followed alone.
#[derive(Debug, Clone)]
struct SiteTrack {
    api: Api,
    device: i32,
    /// Sum of the lifetimes (in sequence numbers) of its frees.
    lifetimes: u64,
    high: u64,
    allocations: u64,
    frees: u64,
    bytes: u64,
    at_peak: u64,
    /// The peak version `at_peak` was taken at (see [`History::peak_version`]).
    stamp: u64,
    track: Track,
}

impl SiteTrack {
    /// Its live bytes went from `before` to `after` (`up`: an allocation; else a free of an
    /// allocation that lived `lifetime`), at peak version `version`.
    fn changed(&mut self, version: u64, before: u64, after: u64, up: bool, lifetime: u64) {
        if self.stamp != version {
            self.at_peak = before;
            self.stamp = version;
        }
        if up {
            self.allocations = self.allocations.saturating_add(1);
            self.bytes = self.bytes.saturating_add(after - before);
            self.high = self.high.max(after);
        } else {
            self.frees = self.frees.saturating_add(1);
            self.lifetimes = self.lifetimes.saturating_add(lifetime);
        }
        self.track.set(after);
    }
}

/// The history being built; see the module documentation.
#[derive(Debug, Clone)]
pub(super) struct History {
    /// Memory events so far.
    events: u64,
    /// Events per point.
    width: u64,
    /// Each point's last (time, seq).
    axis: Vec<(u64, u64)>,
    live: u64,
    /// The process's peak: bytes, seq, time.
    peak: (u64, u64, u64),
    /// Bumped at each new peak: a site's `at_peak` is its live bytes when its stamp is older.
    peak_version: u64,
    devices: BTreeMap<i32, DeviceTrack>,
    sites: HashMap<StackId, SiteTrack>,
    /// Live bytes of every site with some, followed or not.
    site_live: HashMap<StackId, u64>,
    /// Live bytes of the sites followed, together.
    followed: u64,
    /// At most the smallest high-water mark among the sites followed (high-water marks only
    /// rise), so that a site that cannot take a place is turned away without a search.
    smallest_high: u64,
    rest: Track,
    /// Where the last record was.
    now: (u64, u64),
}

impl Default for History {
    fn default() -> Self {
        History {
            events: 0,
            width: 1,
            axis: vec![(0, 0)],
            live: 0,
            peak: (0, 0, 0),
            peak_version: 0,
            devices: BTreeMap::new(),
            sites: HashMap::new(),
            site_live: HashMap::new(),
            followed: 0,
            smallest_high: 0,
            rest: Track::new(1, None, 0),
            now: (0, 0),
        }
    }
}

impl History {
    /// Every record passes here: its sequence number and time.
    pub(super) fn at(&mut self, seq: u64, time_ns: u64) {
        self.now = (seq, time_ns);
    }

    fn points(&self) -> u64 {
        self.axis.len() as u64
    }

    fn tracks(&mut self) -> impl Iterator<Item = &mut Track> {
        self.devices
            .values_mut()
            .map(|d| &mut d.track)
            .chain(self.sites.values_mut().map(|s| &mut s.track))
            .chain(std::iter::once(&mut self.rest))
    }

    /// One memory event: the axis moves on (halving its points when they would pass the cap).
    pub(super) fn event(&mut self) {
        self.events += 1;
        while self.events / self.width >= HISTORY_POINTS {
            self.width *= 2;
            self.axis = self
                .axis
                .chunks(2)
                .map(|c| c.last().copied().unwrap_or_default())
                .collect();
            self.tracks().for_each(Track::halve);
        }
        let len = (self.events / self.width + 1) as usize;
        if len > self.axis.len() {
            let last = self.axis.last().copied().unwrap_or_default();
            self.axis.resize(len, last);
            self.tracks().for_each(|t| t.extend(len));
        }
        if let Some(p) = self.axis.last_mut() {
            *p = (self.now.1, self.now.0);
        }
    }

    /// Owned memory made live (`delta` > 0) or released at `stack` on `device` (allocated at
    /// sequence number `born`).
    pub(super) fn change(&mut self, stack: StackId, api: Api, device: i32, delta: i128, born: u64) {
        let up = delta >= 0;
        let bytes = delta.unsigned_abs().min(u128::from(u64::MAX)) as u64;
        let version = self.peak_version;
        // The site: its live bytes, and its series if it is followed (or now may be).
        let (before, after) = match self.site_live.entry(stack) {
            Entry::Occupied(mut o) => {
                let before = *o.get();
                let after = if up {
                    before.saturating_add(bytes)
                } else {
                    before - bytes.min(before)
                };
                if after == 0 {
                    o.remove();
                } else {
                    *o.get_mut() = after;
                }
                (before, after)
            }
            Entry::Vacant(v) => {
                let after = if up { bytes } else { 0 };
                if after > 0 {
                    v.insert(after);
                }
                (0, after)
            }
        };
        let lifetime = self.now.0.saturating_sub(born);
        let followed = if let Some(s) = self.sites.get_mut(&stack) {
            s.changed(version, before, after, up, lifetime);
            true
        } else if up && self.follow(stack, api, device, before, after) {
            if let Some(s) = self.sites.get_mut(&stack) {
                s.changed(version, before, after, up, lifetime);
            }
            true
        } else {
            false
        };
        if followed {
            self.followed = self.followed.saturating_add(after).saturating_sub(before);
        }
        self.live = if up {
            self.live.saturating_add(bytes)
        } else {
            self.live - bytes.min(self.live)
        };
        if self.live > self.peak.0 {
            self.peak = (self.live, self.now.0, self.now.1);
            self.peak_version += 1;
        }
        self.rest.set(self.live.saturating_sub(self.followed));
        let points = self.points();
        let d = self.devices.entry(device).or_insert_with(|| DeviceTrack {
            live: 0,
            allocations: 0,
            frees: 0,
            high: (0, 0, 0),
            track: Track::new(points, None, 0),
        });
        if up {
            d.live = d.live.saturating_add(bytes);
            d.allocations = d.allocations.saturating_add(1);
        } else {
            d.live -= bytes.min(d.live);
            d.frees = d.frees.saturating_add(1);
        }
        if d.live > d.high.0 {
            d.high = (d.live, self.now.0, self.now.1);
        }
        d.track.set(d.live);
    }

    /// Starts following `stack` (which held `before` and now holds `after`) if there is room,
    /// or if it passed the smallest high-water mark among the sites followed.
    fn follow(&mut self, stack: StackId, api: Api, device: i32, before: u64, after: u64) -> bool {
        if self.sites.len() >= HISTORY_SITES {
            if after <= self.smallest_high {
                return false;
            }
            let Some((&smallest, s)) = self
                .sites
                .iter()
                .min_by(|a, b| a.1.high.cmp(&b.1.high).then(b.0 .0.cmp(&a.0 .0)))
            else {
                return false;
            };
            self.smallest_high = s.high;
            if after <= s.high {
                return false;
            }
            let gone_live = s.track.value();
            self.followed = self.followed.saturating_sub(gone_live);
            self.sites.remove(&smallest);
        }
        let points = self.points();
        let first = (before > 0).then_some(points - 1);
        self.followed = self.followed.saturating_add(before);
        self.sites.insert(
            stack,
            SiteTrack {
                api,
                device,
                lifetimes: 0,
                high: before,
                allocations: 0,
                frees: 0,
                bytes: 0,
                at_peak: before,
                stamp: self.peak_version,
                track: Track::new(points, first, before),
            },
        );
        true
    }

    /// The history's records, as of sequence number `as_of`.
    pub(super) fn records(&self) -> Vec<SiteHistory<'static>> {
        if self.events == 0 {
            return Vec::new();
        }
        let base = |series, key, api, first, high: (u64, u64, u64), totals: Vec<u64>, points: Vec<u64>| SiteHistory {
            series,
            key,
            api,
            events: self.events,
            width: self.width,
            first,
            high: high.0,
            high_seq: high.1,
            high_time_ns: high.2,
            totals: Addrs(Cow::Owned(totals)),
            points: Addrs(Cow::Owned(points)),
        };
        let mut out = Vec::with_capacity(self.sites.len() + self.devices.len() + 2);
        let axis: Vec<u64> = self.axis.iter().flat_map(|&(t, s)| [t, s]).collect();
        out.push(base(SiteHistory::AXIS, 0, Api::NONE, 0, self.peak, Vec::new(), axis));
        for (device, d) in &self.devices {
            out.push(base(
                SiteHistory::DEVICE,
                i64::from(*device) as u64,
                Api::NONE,
                d.track.first,
                d.high,
                vec![d.allocations, d.frees],
                d.track.triples(),
            ));
        }
        let mut sites: Vec<(&StackId, &SiteTrack)> = self.sites.iter().collect();
        sites.sort_by_key(|(k, _)| k.0);
        let mut followed_at_peak = 0u64;
        for (stack, s) in sites {
            let at_peak = if s.stamp != self.peak_version {
                s.track.value()
            } else {
                s.at_peak
            };
            followed_at_peak = followed_at_peak.saturating_add(at_peak);
            out.push(base(
                SiteHistory::SITE,
                u64::from(stack.0),
                s.api,
                s.track.first,
                (s.high, 0, 0),
                vec![
                    s.allocations,
                    s.frees,
                    s.bytes,
                    at_peak,
                    i64::from(s.device) as u64,
                    s.lifetimes,
                ],
                s.track.triples(),
            ));
        }
        let rest_high = self.rest.points.iter().map(|p| p.max).max().unwrap_or(0);
        out.push(base(
            SiteHistory::REST,
            0,
            Api::NONE,
            self.rest.first,
            (rest_high, 0, 0),
            vec![self.peak.0.saturating_sub(followed_at_peak)],
            self.rest.triples(),
        ));
        out
    }

    /// An earlier checkpoint's history record: the history goes on from it. Its kept records,
    /// replayed before it, made the live bytes now; the series before them are its.
    pub(super) fn load(&mut self, h: &SiteHistory<'_>) {
        match h.series {
            SiteHistory::AXIS => {
                if !well_formed(h) {
                    return;
                }
                self.events = h.events;
                self.width = h.width;
                self.axis = h.points.0.chunks_exact(2).map(|p| (p[0], p[1])).collect();
                let len = (self.events / self.width + 1) as usize;
                let last = self.axis.last().copied().unwrap_or_default();
                self.axis.resize(len, last);
                self.peak = (h.high.max(self.live), h.high_seq, h.high_time_ns);
                self.peak_version += 1;
                let points = self.points();
                // Every series restarts from the record's; one without a record is unknown
                // before now (the sites followed again start from the current point).
                for d in self.devices.values_mut() {
                    d.track = Track::new(points, Some(points - 1), d.live);
                }
                self.sites.clear();
                self.smallest_high = 0;
                self.followed = 0;
                self.rest = Track::new(points, Some(points - 1), self.live);
            }
            _ if h.events != self.events || h.width != self.width => {}
            SiteHistory::DEVICE => {
                let device = h.key as i64 as i32;
                let points = self.points() as usize;
                let live = self.devices.get(&device).map_or(0, |d| d.live);
                let mut track = Track::read(h.first, points, &h.points.0);
                track.set(live);
                let total = |i: usize| h.totals.0.get(i).copied().unwrap_or(0);
                self.devices.insert(
                    device,
                    DeviceTrack {
                        live,
                        allocations: total(0),
                        frees: total(1),
                        high: (h.high.max(live), h.high_seq, h.high_time_ns),
                        track,
                    },
                );
            }
            SiteHistory::SITE => {
                let Ok(id) = u32::try_from(h.key) else { return };
                let stack = StackId(id);
                if self.sites.len() >= HISTORY_SITES {
                    return;
                }
                let live = self.site_live.get(&stack).copied().unwrap_or(0);
                let t = &h.totals.0;
                let total = |i: usize| t.get(i).copied().unwrap_or(0);
                let mut track = Track::read(h.first, self.points() as usize, &h.points.0);
                track.set(live);
                self.followed = self.followed.saturating_add(live);
                self.sites.insert(
                    stack,
                    SiteTrack {
                        api: h.api,
                        device: total(4) as i64 as i32,
                        lifetimes: total(5),
                        high: h.high.max(live),
                        allocations: total(0),
                        frees: total(1),
                        bytes: total(2),
                        at_peak: total(3),
                        stamp: self.peak_version,
                        track,
                    },
                );
                self.rest.set(self.live.saturating_sub(self.followed));
            }
            SiteHistory::REST => {
                let mut track = Track::read(h.first, self.points() as usize, &h.points.0);
                track.set(self.live.saturating_sub(self.followed));
                self.rest = track;
            }
            _ => {}
        }
    }

    /// The stacks the history names (kept with it).
    pub(super) fn stacks(&self) -> impl Iterator<Item = StackId> + '_ {
        self.sites.keys().copied()
    }
}
