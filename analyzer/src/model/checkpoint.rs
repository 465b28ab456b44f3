//! A checkpoint's dropped records, added to the totals as their own replay would have counted
//! them (docs/format.md).

use gpuleak_format::{Alloc, Api, Checkpoint, Free, Launch, MemKind, SiteHistory, StackId};

use super::{Counts, Model, Space};
use crate::decision::{Decision, Observer};

impl Model {
    /// A record of the checkpoint's history of live bytes: no record of the run; its peak is
    /// the run's when higher than any since, and the observer (the memory pass) reads the rest.
    pub(super) fn site_history<O: Observer>(&mut self, h: &SiteHistory<'_>, observer: &mut O) {
        self.replay.counts.records = self.replay.counts.records.saturating_sub(1);
        if h.series == SiteHistory::AXIS && h.high > self.replay.peak_bytes {
            self.replay.peak_bytes = h.high;
            self.replay.peak_time_ns = h.high_time_ns;
        }
        let pool = observer.wants_memory()
            && h.series == SiteHistory::SITE
            && u32::try_from(h.key).is_ok_and(|id| {
                self.pools
                    .is_pool(StackId(id), &self.replay.stacks, &self.replay.modules)
            });
        observer.decided(Decision::History { history: h, pool });
    }

    /// The end of a checkpoint: the records before it are what it kept of a dropped history
    /// (replayed as they were), and it counts the rest, which this adds to the totals as
    /// their own replay would have.
    pub(super) fn checkpoint(&mut self, c: &Checkpoint<'_>) {
        let counts = &mut self.replay.counts;
        // The checkpoint's own record is no record of the run.
        counts.records = counts.records.saturating_sub(1).saturating_add(c.dropped);
        self.replay.error_count = self.replay.error_count.saturating_add(c.missing);
        for q in c.counts.0.chunks_exact(4) {
            let (kind, api, flags, n) = (q[0], Api(q[1] as u16), q[2], q[3]);
            let field = match kind {
                k if k == u64::from(Alloc::KIND) => dropped_alloc(counts, api, flags),
                k if k == u64::from(Free::KIND) => {
                    if flags & (Checkpoint::GRAPH_FREE | Checkpoint::FAILED | Checkpoint::CAPTURED)
                        == Checkpoint::GRAPH_FREE
                    {
                        counts.graph_frees = counts.graph_frees.saturating_add(n);
                    }
                    dropped_free(counts, flags)
                }
                k if k == u64::from(Launch::KIND) && flags & Checkpoint::UNKNOWN_GRAPH != 0 => {
                    Some(&mut counts.unknown_graph_launches)
                }
                _ => None,
            };
            if let Some(field) = field {
                *field = field.saturating_add(n);
            }
        }
    }
}

/// The count a dropped allocation record adds to, as [`Model::alloc`] would have counted it.
fn dropped_alloc(counts: &mut Counts, api: Api, flags: u64) -> Option<&mut u64> {
    if flags & Checkpoint::REPLACED != 0 {
        return Some(&mut counts.missed_frees);
    }
    let kind = api.mem_kind();
    let failed = flags & Checkpoint::FAILED != 0;
    if api == Api::cuMemRetainAllocationHandle {
        return (!failed).then_some(&mut counts.retains);
    }
    if kind == Some(MemKind::Graph) {
        return (!failed).then_some(&mut counts.graph_allocations);
    }
    if failed {
        return Some(&mut counts.failed_allocations);
    }
    let kind = kind?;
    if flags & Checkpoint::CAPTURED != 0 {
        Some(&mut counts.graph_allocations)
    } else if flags & Checkpoint::AGAIN != 0 {
        (Space::of(kind) == Space::Physical).then_some(&mut counts.retains)
    } else {
        Some(&mut counts.allocations)
    }
}

/// The count a dropped free record adds to, as [`Model::free`] would have counted it (a
/// free of a graph's memory outside it adds to `graph_frees` too, which the caller counts).
fn dropped_free(counts: &mut Counts, flags: u64) -> Option<&mut u64> {
    if flags & Checkpoint::CAPTURED != 0 {
        None
    } else if flags & Checkpoint::FAILED != 0 {
        Some(&mut counts.failed_frees)
    } else {
        Some(&mut counts.frees)
    }
}
