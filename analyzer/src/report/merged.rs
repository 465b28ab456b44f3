//! The merged view of several processes (the ranks of a distributed job, the workers of a data
//! loader): every leak site once, with how many processes leak from it and how much in all,
//! largest first. A site is the symbolized allocation stack as `gpuleak check` keys it
//! ([`SiteKey`]: function, file base name and line per frame, no addresses, pids or entry
//! frames), so the same line of code leaking in every rank is one site, wherever each rank's
//! libraries were loaded.

use std::collections::HashMap;

use gpuleak_format::{Api, MemKind};

use crate::site::SiteKey;

use super::{Frame, ProcessReport};

/// One leak site summed over the processes that leak from it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MergedSite {
    /// The site.
    pub site: SiteKey,
    /// Bytes leaked from it by every process together.
    pub bytes: u64,
    /// Allocations leaked from it by every process together.
    pub allocations: u64,
    /// Memory family of its largest group in the first process that has it.
    pub kind: MemKind,
    /// Driver entry point of that group.
    pub api: Api,
    /// Runtime call of that group, or `Api::NONE`.
    pub via: Api,
    /// That group's stack, as shown.
    pub stack: Vec<Frame>,
    /// Each process that leaks from it, in the report's process order.
    pub processes: Vec<SiteInProcess>,
}

/// What one process leaks from a merged site.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SiteInProcess {
    /// The process: an index into the report's processes.
    pub process: usize,
    /// Bytes it leaks from the site.
    pub bytes: u64,
    /// Allocations it leaks from the site.
    pub allocations: u64,
}

/// Every site of the processes' leak lists, largest first (then the site leaking in more
/// processes, then more allocations, then by key, so the order never depends on how the
/// traces were read).
pub fn sites(processes: &[ProcessReport]) -> Vec<MergedSite> {
    let mut index: HashMap<SiteKey, usize> = HashMap::new();
    let mut out: Vec<MergedSite> = Vec::new();
    for (p, report) in processes.iter().enumerate() {
        for h in &report.leaks {
            let key = SiteKey::of(&h.stack);
            let at = *index.entry(key.clone()).or_insert_with(|| {
                out.push(MergedSite {
                    site: key,
                    bytes: 0,
                    allocations: 0,
                    kind: h.kind,
                    api: h.api,
                    via: h.via,
                    stack: h.stack.clone(),
                    processes: Vec::new(),
                });
                out.len() - 1
            });
            let site = &mut out[at];
            site.bytes = site.bytes.saturating_add(h.bytes);
            site.allocations = site.allocations.saturating_add(h.allocations);
            // Groups of one process with one key (at exit and at teardown) are one entry.
            match site.processes.last_mut() {
                Some(last) if last.process == p => {
                    last.bytes = last.bytes.saturating_add(h.bytes);
                    last.allocations = last.allocations.saturating_add(h.allocations);
                }
                _ => site.processes.push(SiteInProcess {
                    process: p,
                    bytes: h.bytes,
                    allocations: h.allocations,
                }),
            }
        }
    }
    out.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(b.processes.len().cmp(&a.processes.len()))
            .then(b.allocations.cmp(&a.allocations))
            .then(a.site.cmp(&b.site))
    });
    out
}
