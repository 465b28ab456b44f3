//! The run's named points (marks, snapshots, pytest test boundaries) where they fell on the
//! timeline, for the HTML page's time axis. At most [`MARKERS_KEPT`] are kept however long
//! the run: when the list is full every other one is dropped and only every other one of
//! those to come is kept, so the kept ones stay spread evenly over the run.

/// Markers kept, at most.
pub const MARKERS_KEPT: usize = 256;

/// What a marker is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MarkerKind {
    /// A `Mark` record (`gpuleak_mark`, a step).
    Mark,
    /// A `Snapshot` record other than a pytest test's.
    Snapshot,
    /// A pytest test began (the plugin's `pytest begin NODEID` snapshot).
    TestBegin,
    /// A pytest test ended (`pytest end NODEID`).
    TestEnd,
}

impl MarkerKind {
    /// Its name in the page's data.
    pub fn name(self) -> &'static str {
        match self {
            MarkerKind::Mark => "mark",
            MarkerKind::Snapshot => "snapshot",
            MarkerKind::TestBegin => "test-begin",
            MarkerKind::TestEnd => "test-end",
        }
    }
}

/// One named point of the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Marker {
    /// What it is.
    pub kind: MarkerKind,
    /// The mark's name and value (`step 12`), the snapshot's id and reason, or the test's id.
    pub name: String,
    /// Its time (ns, the trace's clock).
    pub time_ns: u64,
    /// Memory events before it.
    pub events: u64,
}

/// The markers met so far, thinned as described in the module documentation.
#[derive(Debug, Clone, Default)]
pub struct Markers {
    kept: Vec<Marker>,
    /// Markers met.
    seen: u64,
    /// One in `stride` is kept (a power of two).
    stride: u64,
}

impl Markers {
    /// Counts a marker, keeping it when its turn comes.
    pub fn push(&mut self, marker: Marker) {
        if self.stride == 0 {
            self.stride = 1;
        }
        let turn = self.seen % self.stride == 0;
        self.seen += 1;
        if !turn {
            return;
        }
        if self.kept.len() >= MARKERS_KEPT {
            let mut i = 0;
            self.kept.retain(|_| {
                i += 1;
                i % 2 == 1
            });
            self.stride *= 2;
            // The one met now is kept only if it is on the new stride.
            if (self.seen - 1) % self.stride != 0 {
                return;
            }
        }
        self.kept.push(marker);
    }

    /// Markers met in all (kept or not).
    pub fn seen(&self) -> u64 {
        self.seen
    }

    /// The markers kept, in the run's order.
    pub fn into_kept(self) -> Vec<Marker> {
        self.kept
    }
}

/// The marker of a `Snapshot` record: a pytest test's boundary, or a snapshot.
pub fn snapshot_marker(id: u64, reason: &str) -> (MarkerKind, String) {
    if let Some(test) = reason.strip_prefix("pytest begin ") {
        (MarkerKind::TestBegin, test.to_string())
    } else if let Some(test) = reason.strip_prefix("pytest end ") {
        (MarkerKind::TestEnd, test.to_string())
    } else if reason.is_empty() {
        (MarkerKind::Snapshot, format!("snapshot {id}"))
    } else {
        (MarkerKind::Snapshot, format!("snapshot {id} ({reason})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mark(i: u64) -> Marker {
        Marker {
            kind: MarkerKind::Mark,
            name: format!("step {i}"),
            time_ns: i,
            events: i,
        }
    }

    #[test]
    fn a_long_run_keeps_at_most_the_cap_spread_evenly() {
        let mut m = Markers::default();
        for i in 0..100_000 {
            m.push(mark(i));
        }
        assert_eq!(m.seen(), 100_000);
        let kept = m.into_kept();
        assert!(
            kept.len() <= MARKERS_KEPT && kept.len() > MARKERS_KEPT / 2,
            "{}",
            kept.len()
        );
        assert_eq!(kept[0].events, 0);
        // Evenly spaced: one stride apart, the last one near the end.
        let stride = kept[1].events - kept[0].events;
        assert!(kept.windows(2).all(|w| w[1].events - w[0].events == stride));
        assert!(kept.last().unwrap().events + 2 * stride >= 100_000);
    }

    #[test]
    fn a_short_run_keeps_every_marker() {
        let mut m = Markers::default();
        for i in 0..40 {
            m.push(mark(i));
        }
        assert_eq!(m.into_kept().len(), 40);
    }

    #[test]
    fn the_pytest_plugins_snapshots_are_test_boundaries() {
        assert_eq!(
            snapshot_marker(3, "pytest begin t.py::test_a"),
            (MarkerKind::TestBegin, "t.py::test_a".to_string())
        );
        assert_eq!(
            snapshot_marker(4, "pytest end t.py::test_a"),
            (MarkerKind::TestEnd, "t.py::test_a".to_string())
        );
        assert_eq!(
            snapshot_marker(5, "late"),
            (MarkerKind::Snapshot, "snapshot 5 (late)".to_string())
        );
    }
}
