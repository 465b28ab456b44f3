//! A checkpoint's history of live bytes (`SiteHistory` records, kind 69) read into the pass,
//! so that the timelines, the peak and growth of a bounded trace cover the whole run.
//!
//! A checkpoint's kept records are replayed before its history: they made what is live now,
//! but their own events are no events of the run. The history's axis record puts the pass
//! back where the dropped history ended (its memory events, its points' times), and every
//! series restarts there: the ones the history has (each device's live bytes, the sites it
//! followed) from its points, resampled to the pass's axes; the others flat at what they hold
//! now, their past unknown. An unknown past hides growth, never makes it up.

use gpuleak_format::{Api, SiteHistory, StackId};

use super::series::{Axis, Series, Span};
use super::{device_in, spread, DeviceSite, Site, Tracker, SITE_POINTS, TIMELINE_POINTS};

/// The history's points (`None` before `first`, unknown) as spans over `axis`: each of the
/// axis's buckets (`axis_width` events each) takes the history's points (`width` events each)
/// it covers; an unknown point reads as the first known one's floor, flat.
fn resample(points: &[Option<Span>], width: u64, axis: &Axis) -> Vec<Span> {
    let known = points.iter().flatten().next().map(|p| Span {
        min: p.min,
        max: p.min,
        last: p.min,
    });
    let filled: Vec<Span> = points.iter().map(|p| p.or(known).unwrap_or_default()).collect();
    let buckets = axis.bucket() as usize + 1;
    let (aw, hw) = (u128::from(axis.width()), u128::from(width.max(1)));
    let at = |b: usize| usize::try_from(b as u128 * aw / hw).unwrap_or(usize::MAX);
    (0..buckets)
        .filter_map(|b| {
            let from = at(b);
            let to = at(b + 1).max(from.saturating_add(1));
            filled
                .get(from..to.min(filled.len()))?
                .iter()
                .copied()
                .reduce(|a, b| Span {
                    min: a.min.min(b.min),
                    max: a.max.max(b.max),
                    last: b.last,
                })
        })
        .collect()
}

/// A series of triples from point `first` on.
fn triples(h: &SiteHistory<'_>, points: usize) -> Vec<Option<Span>> {
    let mut out = vec![None; points];
    let first = h.first as usize;
    for (slot, t) in out.iter_mut().skip(first).zip(h.points.0.chunks_exact(3)) {
        *slot = Some(Span {
            min: t[0],
            max: t[1],
            last: t[2],
        });
    }
    out
}

/// A series over `axis` made of the history's points, holding `now` at the end.
fn from_history(points: &[Option<Span>], width: u64, axis: &Axis, now: u64) -> Series {
    let mut s = Series::from_points(axis, resample(points, width, axis));
    s.set(axis, now);
    s
}

impl Tracker {
    /// A `SiteHistory` record of the checkpoint that starts the trace; `pool` when a site's
    /// stack belongs to a caching allocator.
    pub fn history(&mut self, h: &SiteHistory<'_>, pool: bool) {
        match h.series {
            SiteHistory::AXIS => self.history_axis(h),
            _ if self
                .history
                .is_none_or(|(events, width)| (events, width) != (h.events, h.width)) => {}
            SiteHistory::DEVICE => {
                let device = h.key as i64 as i32;
                let points = triples(h, self.history_points());
                let axis = self.axis;
                let d = self.device(device);
                d.live = from_history(&points, h.width, &axis, d.live.value());
                // The history counted the allocations replayed from the checkpoint with the
                // others.
                if let [allocations, frees, ..] = h.totals.0[..] {
                    d.allocations.fill(&axis, allocations);
                    d.frees.fill(&axis, frees);
                }
                if h.high > d.peak.0 {
                    // The device's peak is in the dropped history: its sites' shares are the
                    // history's where it has them (below), else unknown, none.
                    d.peak = (h.high, h.high_seq, h.high_time_ns);
                    d.peak_version += 1;
                    let version = d.peak_version;
                    for ds in d.sites.values_mut() {
                        ds.at_peak = 0;
                        ds.stamp = version;
                    }
                    for s in self.sites.values_mut().filter(|s| s.is_share_of(device)) {
                        s.device_at_peak = 0;
                        s.device_stamp = version;
                    }
                }
            }
            SiteHistory::SITE => self.history_site(h, pool),
            _ => {}
        }
    }

    fn history_points(&self) -> usize {
        self.history
            .map_or(0, |(events, width)| (events / width.max(1)) as usize + 1)
    }

    /// The axis: the pass moves to where the dropped history ended.
    fn history_axis(&mut self, h: &SiteHistory<'_>) {
        if !gpuleak_format::checkpoint::history::well_formed(h) {
            return;
        }
        self.history = Some((h.events, h.width));
        // The times and sequence numbers are the history's from here on (below).
        self.times_due = false;
        self.events = h.events;
        self.axis = Axis::new(TIMELINE_POINTS);
        self.axis.advance(h.events);
        self.site_axis = Axis::new(SITE_POINTS);
        self.site_axis.advance(h.events);
        let (axis, site_axis) = (self.axis, self.site_axis);
        let pairs: Vec<(u64, u64)> = h.points.0.chunks_exact(2).map(|p| (p[0], p[1])).collect();
        let at = |f: fn(&(u64, u64)) -> u64| -> Vec<Option<Span>> {
            pairs
                .iter()
                .map(|p| {
                    let v = f(p);
                    Some(Span {
                        min: v,
                        max: v,
                        last: v,
                    })
                })
                .collect()
        };
        let (times, seqs) = (at(|p| p.0), at(|p| p.1));
        self.times = from_history(&times, h.width, &axis, self.now.1);
        self.seqs = from_history(&seqs, h.width, &axis, self.now.0);
        self.site_times = from_history(&times, h.width, &site_axis, self.now.1);
        if let Some(&(t, s)) = pairs.first() {
            self.time_range.0 = self.time_range.0.min(t);
            self.seq_range.0 = self.seq_range.0.min(s);
        }
        // The series the history does not have: flat at what they hold now.
        let flat = |s: &Series, axis: &Axis| {
            let mut n = Series::new(axis);
            n.fill(axis, s.value());
            n
        };
        for d in self.devices.values_mut() {
            for s in [
                &mut d.live,
                &mut d.granted,
                &mut d.allocations,
                &mut d.frees,
                &mut d.vmm_reserved,
                &mut d.vmm_mapped,
                &mut d.pool,
                &mut d.pool_reserved,
                &mut d.pool_used,
                &mut d.fragmentation,
                &mut d.largest_hole,
                &mut d.free_in_span,
            ] {
                *s = flat(s, &axis);
            }
            for ds in d.sites.values_mut() {
                ds.series = flat(&ds.series, &site_axis);
            }
        }
        for s in self.sites.values_mut() {
            s.series = flat(&s.series, &site_axis);
        }
        if h.high >= self.peak.0 {
            // The peak is in the dropped history: the sites' shares of it are the history's
            // (a site it did not follow: unknown, none).
            self.peak = (h.high, h.high_seq, h.high_time_ns);
            self.peak_version += 1;
            self.peak_from_history = true;
            let version = self.peak_version;
            for s in self.sites.values_mut() {
                s.at_peak = 0;
                s.stamp = version;
            }
        }
    }

    /// One site the history followed.
    fn history_site(&mut self, h: &SiteHistory<'_>, pool: bool) {
        let Ok(id) = u32::try_from(h.key) else { return };
        let stack = StackId(id);
        let points = triples(h, self.history_points());
        let total = |i: usize| h.totals.0.get(i).copied().unwrap_or(0);
        let device = total(4) as i64 as i32;
        let (axis, site_axis, mark_axis, version) = (self.axis, self.site_axis, self.mark_axis, self.peak_version);
        let marking = self.marks > 0;
        let device_version = device_in(&mut self.devices, &axis, device).peak_version;
        let s = self.sites.entry_or_insert_with(stack, || {
            let kind = h.api.mem_kind().unwrap_or(gpuleak_format::MemKind::Device);
            let api = if h.api == Api::NONE { Api::cuMemAlloc_v2 } else { h.api };
            Site::new(
                kind,
                api,
                device,
                pool,
                (version, device_version),
                &site_axis,
                marking.then_some(&mark_axis),
            )
        });
        // The history counted the allocations replayed from the checkpoint with the others.
        s.allocations = total(0);
        s.frees = total(1);
        s.bytes = total(2);
        s.lifetimes = u128::from(total(5));
        s.high = s.high.max(h.high);
        if s.stamp == version && self.peak_from_history {
            s.at_peak = total(3);
        }
        s.series = from_history(&points, h.width, &site_axis, s.live);
        // The device's share of the site, for its stacked chart and its peak (the site's
        // share of the process's peak when the two peaks are one moment of the history).
        let live = s.live;
        let (peak_seq, from_history_peak) = (self.peak.1, self.peak_from_history);
        if s.is_share_of(device) {
            // The site is its own share of the device: its series is the history's (above).
            let d = device_in(&mut self.devices, &axis, device);
            if s.device_stamp == d.peak_version && from_history_peak && d.peak.1 == peak_seq {
                s.device_at_peak = total(3);
            }
            return;
        }
        if !s.spread {
            spread(&mut self.devices, &axis, stack, s);
        }
        let d = device_in(&mut self.devices, &axis, device);
        let version = d.peak_version;
        let same_peak = from_history_peak && d.peak.1 == peak_seq;
        let ds = d.sites.entry_or_insert_with(stack, || DeviceSite {
            live,
            at_peak: 0,
            stamp: version,
            series: Series::new(&site_axis),
        });
        if ds.stamp == version && same_peak {
            ds.at_peak = total(3);
        }
        ds.series = from_history(&points, h.width, &site_axis, live);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flat(v: u64) -> Option<Span> {
        Some(Span {
            min: v,
            max: v,
            last: v,
        })
    }

    #[test]
    fn points_wider_than_the_axis_buckets_are_repeated_and_narrower_ones_merged() {
        // Eight points of 4 events each (32 events) onto an axis of buckets of 2 events.
        let points: Vec<Option<Span>> = (0..8).map(|i| flat(i * 10)).collect();
        let mut axis = Axis::new(64);
        axis.advance(31);
        assert_eq!(axis.width(), 1);
        let mut wide = Axis::new(4);
        wide.advance(31);
        assert_eq!(wide.width(), 8);
        let fine = resample(&points, 4, &axis);
        assert_eq!(fine.len(), 32);
        assert_eq!(
            (fine[0].last, fine[3].last, fine[4].last, fine[31].last),
            (0, 0, 10, 70)
        );
        let coarse = resample(&points, 4, &wide);
        let got: Vec<(u64, u64, u64)> = coarse.iter().map(|s| (s.min, s.max, s.last)).collect();
        assert_eq!(got, [(0, 10, 10), (20, 30, 30), (40, 50, 50), (60, 70, 70)]);
    }

    #[test]
    fn a_history_of_impossible_size_is_ignored() {
        let mut t = Tracker::new(super::super::TrackerOptions::default());
        let axis = SiteHistory {
            series: SiteHistory::AXIS,
            key: 0,
            api: Api::NONE,
            events: u64::MAX,
            width: 1,
            first: 0,
            high: 1 << 40,
            high_seq: 1,
            high_time_ns: 1,
            totals: gpuleak_format::Addrs(Vec::new().into()),
            points: gpuleak_format::Addrs(vec![1, 1].into()),
        };
        t.history(&axis, false);
        t.history(
            &SiteHistory {
                series: SiteHistory::SITE,
                key: 1,
                ..axis.clone()
            },
            false,
        );
        let m = t.finish();
        assert_eq!((m.events, m.peak.0), (0, 0));
        assert!(m.sites.is_empty());
    }

    /// Histories of any shape, between allocations and frees, never panic the pass.
    #[test]
    fn any_history_records_read_without_a_panic() {
        use crate::replay::Replayer;
        use gpuleak_format::{Addrs, Alloc, Body, Ctx, CuResult, Free, Ptr, Record, Seq, Stream};
        let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
        let mut next = move |n: u64| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D) % n.max(1)
        };
        for _case in 0..300 {
            let mut model = Replayer::new(Some(super::super::TrackerOptions::default()));
            let events = [0, 1, 127, 128, 1000, (1 << 62) - 1, u64::MAX][next(7) as usize];
            let width = [0, 1, 2, 8, 3, 1 << 20, 1 << 58][next(7) as usize];
            for seq in 1..60u64 {
                let ptr = 0x1000 * (1 + next(8));
                let body: Body<'static> = match next(4) {
                    0 => {
                        let n = next(400) as usize;
                        SiteHistory {
                            series: next(5),
                            key: [0, 1, 2, u64::MAX, (-2i64) as u64][next(5) as usize],
                            api: Api(next(300) as u16),
                            events: if next(4) == 0 { next(u64::MAX) } else { events },
                            width,
                            first: [0, 1, 200, u64::MAX][next(4) as usize],
                            high: next(u64::MAX),
                            high_seq: next(100),
                            high_time_ns: next(u64::MAX),
                            totals: Addrs((0..next(8)).map(|_| next(u64::MAX)).collect::<Vec<_>>().into()),
                            points: Addrs((0..n).map(|_| next(1 << 40)).collect::<Vec<_>>().into()),
                        }
                        .into()
                    }
                    1 | 2 => Alloc {
                        api: Api::cuMemAlloc_v2,
                        via: Api::NONE,
                        result: CuResult::SUCCESS,
                        ctx: Ctx(1),
                        stream: Stream(0),
                        ptr: Ptr(ptr),
                        size: next(1 << 30),
                        stack: StackId(next(4) as u32),
                        aux: 0,
                    }
                    .into(),
                    _ => Free {
                        api: Api::cuMemFree_v2,
                        via: Api::NONE,
                        result: CuResult::SUCCESS,
                        stream: Stream(0),
                        ptr: Ptr(ptr),
                        size: 0,
                        stack: StackId::NONE,
                    }
                    .into(),
                };
                model.apply(
                    1,
                    &Record {
                        seq: Seq(seq),
                        time_ns: seq * 1000,
                        body,
                    },
                );
            }
            let r = model.finish();
            assert!(r.memory.is_some());
        }
    }

    #[test]
    fn an_unknown_past_reads_flat_at_the_first_known_floor() {
        let points = vec![None, None, flat(500), flat(700)];
        let mut axis = Axis::new(16);
        axis.advance(3);
        let got: Vec<u64> = resample(&points, 1, &axis).iter().map(|s| s.min).collect();
        assert_eq!(got, [500, 500, 500, 700]);
    }
}
