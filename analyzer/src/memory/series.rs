//! Bounded time series: a fixed number of buckets over an axis whose bucket width doubles as
//! the run goes on, so a series never holds more than `cap` points however long the trace.
//!
//! Every series on one [`Axis`] shares its buckets; a series touched after the axis doubled
//! merges its own points pairwise then (lazily), so a doubling costs nothing for series that
//! are not touched again.

/// Positions along a run (memory events, or marks), cut into at most `cap` buckets.
#[derive(Debug, Clone, Copy)]
pub struct Axis {
    /// Positions per bucket (a power of two).
    width: u64,
    /// How many times the width doubled.
    generation: u32,
    cap: u64,
    /// Position of the latest event.
    at: u64,
    /// `at / width`, kept because every series asks for it at every event.
    bucket: u64,
    /// The generation and the bucket in one number ([`Axis::place`]).
    place: u64,
}

impl Axis {
    /// An axis of at most `cap` buckets (at least 2).
    pub fn new(cap: u64) -> Axis {
        Axis {
            width: 1,
            generation: 0,
            // A bucket number fits below the generation in `place`.
            cap: cap.clamp(2, 1 << 32),
            at: 0,
            bucket: 0,
            place: 0,
        }
    }

    /// Moves to position `at` (never backwards), doubling the width while it would need more
    /// than `cap` buckets.
    #[inline]
    pub fn advance(&mut self, at: u64) {
        if at <= self.at {
            return;
        }
        self.at = at;
        // The width is a power of two.
        self.bucket = at >> self.generation;
        while self.bucket >= self.cap {
            self.width *= 2;
            self.generation += 1;
            self.bucket = at >> self.generation;
        }
        self.place = u64::from(self.generation) << 32 | self.bucket;
    }

    /// The current bucket and the width it has, as one number: a series set at this place
    /// needs no catching up.
    #[inline]
    pub fn place(&self) -> u64 {
        self.place
    }

    /// Whether moving to position `at` leaves the current bucket (for another one, or for a
    /// wider one).
    #[inline]
    pub fn leaves_bucket(&self, at: u64) -> bool {
        at >> self.generation != self.bucket
    }

    /// The current bucket.
    #[inline]
    pub fn bucket(&self) -> u64 {
        self.bucket
    }

    /// Positions per bucket.
    #[inline]
    pub fn width(&self) -> u64 {
        self.width
    }
}

/// What one bucket of a value holds: the lowest, highest and last value (the checkpoints'
/// history keeps its points the same way).
pub use gpuleak_format::checkpoint::history::Span;

/// A value observed along an axis: one [`Span`] per bucket.
#[derive(Debug, Clone)]
pub struct Series {
    generation: u32,
    /// Bucket of `open`, at `generation`'s width.
    index: u64,
    /// The axis's [`Axis::place`] when the series was last caught up with it.
    place: u64,
    open: Span,
    closed: Vec<Span>,
}

impl Series {
    /// A series that was 0 from the start of the axis up to now.
    pub fn new(axis: &Axis) -> Series {
        let mut s = Series {
            generation: axis.generation,
            index: 0,
            place: 0,
            open: Span::default(),
            closed: Vec::new(),
        };
        s.catch_up(axis);
        s
    }

    /// A series whose buckets up to the axis's current one are `points` (the last one open;
    /// missing ones carry the last value, extra ones are dropped).
    pub fn from_points(axis: &Axis, mut points: Vec<Span>) -> Series {
        let buckets = axis.bucket() as usize + 1;
        let carried = points.last().map_or(Span::default(), |p| Span::flat(p.last));
        points.resize(buckets, carried);
        let open = points.pop().unwrap_or_default();
        Series {
            generation: axis.generation,
            index: axis.bucket(),
            place: axis.place(),
            open,
            closed: points,
        }
    }

    /// Holds `value` over every bucket so far (a past that is not known).
    pub fn fill(&mut self, axis: &Axis, value: u64) {
        self.catch_up(axis);
        for p in self.closed.iter_mut().chain(std::iter::once(&mut self.open)) {
            *p = Span::flat(value);
        }
    }

    /// The value now.
    #[inline]
    pub fn value(&self) -> u64 {
        self.open.last
    }

    /// Sets the value now.
    #[inline]
    pub fn set(&mut self, axis: &Axis, value: u64) {
        // Most events land in the open bucket of an axis that did not double since.
        if self.place != axis.place() {
            self.catch_up(axis);
        }
        self.set_caught_up(axis, value);
    }

    /// Sets the value now in a series its owner keeps at the axis's current bucket (caught up
    /// whenever the axis moves on): no look at the axis.
    #[inline]
    pub fn set_caught_up(&mut self, axis: &Axis, value: u64) {
        debug_assert!(
            self.place == axis.place() && self.generation == axis.generation && self.index == axis.bucket(),
            "a series set as caught up is not"
        );
        self.open.min = self.open.min.min(value);
        self.open.max = self.open.max.max(value);
        self.open.last = value;
    }

    /// [`Series::up`] in a series kept caught up (see [`Series::set_caught_up`]).
    #[inline]
    pub fn up_caught_up(&mut self, axis: &Axis, by: u64) {
        self.set_caught_up(axis, self.open.last.saturating_add(by));
    }

    /// [`Series::down`] in a series kept caught up (see [`Series::set_caught_up`]).
    #[inline]
    pub fn down_caught_up(&mut self, axis: &Axis, by: u64) {
        self.set_caught_up(axis, self.open.last.saturating_sub(by));
    }

    /// Counts one more in a count kept caught up (see [`Series::set_caught_up`]). A count
    /// only rises (by one, or to a value set with [`Series::fill`]), so its value now is its
    /// bucket's highest and never under its lowest: the last and the highest are the one
    /// value, as [`Series::set`] would make them.
    #[inline]
    pub fn count_caught_up(&mut self, axis: &Axis) {
        debug_assert!(self.place == axis.place(), "a series set as caught up is not");
        debug_assert!(self.open.min <= self.open.last && self.open.last == self.open.max);
        let value = self.open.last.saturating_add(1);
        self.open.max = value;
        self.open.last = value;
    }

    /// Adds `by` to the value now (saturating at `u64::MAX`).
    #[inline]
    pub fn up(&mut self, axis: &Axis, by: u64) {
        self.set(axis, self.open.last.saturating_add(by));
    }

    /// Takes `by` from the value now (down to 0).
    #[inline]
    pub fn down(&mut self, axis: &Axis, by: u64) {
        self.set(axis, self.open.last.saturating_sub(by));
    }

    /// Brings the series to the axis's current bucket (merging after doublings, carrying the
    /// last value over the buckets it was not touched in).
    #[inline(never)]
    pub fn catch_up(&mut self, axis: &Axis) {
        if self.generation != axis.generation {
            let shift = axis.generation - self.generation;
            let factor = 1usize << shift.min(63);
            let merged: Vec<Span> = self
                .closed
                .chunks(factor)
                .map(|c| c.iter().copied().reduce(Span::merge).unwrap_or_default())
                .collect();
            self.closed = merged;
            self.index >>= shift;
            self.generation = axis.generation;
            // The last merged point and the open bucket may now be one bucket.
            if self.closed.len() as u64 > self.index {
                if let Some(p) = self.closed.pop() {
                    self.open = p.merge(self.open);
                }
            }
        }
        let now = axis.bucket();
        if now > self.index {
            self.closed.push(self.open);
            let carried = Span::flat(self.open.last);
            while (self.closed.len() as u64) < now {
                self.closed.push(carried);
            }
            self.open = carried;
            self.index = now;
        }
        self.place = axis.place();
    }

    /// Every bucket up to the axis's current one (the open one last).
    pub fn points(&mut self, axis: &Axis) -> Vec<Span> {
        self.catch_up(axis);
        let mut all = self.closed.clone();
        all.push(self.open);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_run_keeps_at_most_cap_points_with_min_max_and_last() {
        let mut axis = Axis::new(8);
        let mut s = Series::new(&axis);
        for i in 0..1000u64 {
            axis.advance(i);
            s.set(&axis, i);
        }
        let points = s.points(&axis);
        assert!(points.len() <= 8 && points.len() > 4, "{}", points.len());
        assert_eq!(points[0].min, 0);
        assert_eq!(points.last().map(|p| p.last), Some(999));
        // A bucket starts from the value the one before ended with.
        for w in points.windows(2) {
            assert_eq!(w[0].last, w[0].max);
            assert_eq!(w[1].min, w[0].last);
        }
    }

    #[test]
    fn a_series_untouched_through_doublings_carries_its_value() {
        let mut axis = Axis::new(4);
        let mut early = Series::new(&axis);
        early.set(&axis, 5);
        let mut busy = Series::new(&axis);
        for i in 0..100u64 {
            axis.advance(i);
            busy.set(&axis, i % 3);
        }
        let e = early.points(&axis);
        let b = busy.points(&axis);
        assert_eq!(e.len(), b.len());
        assert!(e.iter().all(|p| p.last == 5 && p.max == 5));
        assert_eq!(e[0].min, 0, "it was 0 before it was set");
    }

    #[test]
    fn a_series_made_late_starts_at_zero() {
        let mut axis = Axis::new(16);
        axis.advance(40);
        let mut s = Series::new(&axis);
        s.set(&axis, 7);
        let p = s.points(&axis);
        assert_eq!(p.len() as u64, axis.bucket() + 1);
        assert!(p[..p.len() - 1].iter().all(|p| p.max == 0));
        assert_eq!(p.last().map(|p| p.last), Some(7));
    }
}
