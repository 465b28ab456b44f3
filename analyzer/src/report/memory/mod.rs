//! Where the memory went, as the report shows it: the memory pass's results
//! ([`crate::memory`]) with stacks symbolized, the `growth` and `fragmentation` findings, and
//! the writers: [`text`] (with a terminal chart), [`json`] (the `memory` object of a process),
//! [`html`] (one self-contained page) and [`collapsed`] (stacks for flame graph tools).

pub mod collapsed;
pub mod html;
pub mod json;
pub mod text;

use std::collections::{BTreeMap, HashMap};

use gpuleak_format::{Api, CuResult, MemKind, StackId};

use super::frames::Stacks;
use super::user_code::{site_frame, site_name};
use super::{Extra, Finding, Frame, RelatedStack, Severity};
use crate::memory::growth::Growth;
pub use crate::memory::PinSite;
use crate::memory::{MemoryReplay, Oom, SiteSummary, SnapshotState};
use crate::replay::Replay;
use crate::run::human_bytes;

/// Sites stacked in the timeline; the others are summed as "other".
pub const STACKED_SITES: usize = 8;
/// Sites drawn in the flame graph of the peak.
pub const PEAK_FLAME_SITES: usize = 500;
/// A churn site: at least this many allocations...
pub const CHURN_MIN_ALLOCATIONS: u64 = 100;
/// ...of which at least nine in ten freed, living on average less than this share of the run.
pub const CHURN_LIFETIME_SHARE: u64 = 100;

/// One allocation site, symbolized.
#[derive(Debug, Clone)]
pub struct SiteView {
    /// What the pass knows.
    pub summary: SiteSummary,
    /// The stack as shown.
    pub stack: Vec<Frame>,
    /// A short name: the first named frame.
    pub label: String,
}

/// A failed allocation with its state.
#[derive(Debug, Clone)]
pub struct OomView {
    /// The state.
    pub oom: Oom,
    /// The failed call's stack.
    pub stack: Vec<Frame>,
    /// Pinning sites then.
    pub pins: Vec<PinSite>,
    /// Whether the request would have fit in the free memory between live allocations.
    pub fragmented: bool,
}

/// The state at `--at N`, and the difference to `--at N..M`'s second snapshot.
#[derive(Debug, Clone)]
pub struct SnapshotView {
    /// The first snapshot.
    pub from: SnapshotState,
    /// The second, for a difference.
    pub to: Option<SnapshotState>,
    /// Per site: (stack, bytes at the first, bytes at the second or the first), largest
    /// change (or size) first.
    pub rows: Vec<(StackId, u64, u64)>,
}

/// Everything the memory pass found about one process, ready to print.
#[derive(Debug, Clone)]
pub struct MemoryView {
    /// The pass's results (per-site series dropped but for the stacked sites).
    pub replay: MemoryReplay,
    /// Every site named below, by stack id.
    pub sites: BTreeMap<StackId, SiteView>,
    /// The stacked sites of the timeline, each with its live bytes per site-axis bucket.
    pub stacked: Vec<(StackId, Vec<u64>)>,
    /// Sites at the peak (stack, bytes), largest first.
    pub peak_sites: Vec<(StackId, u64)>,
    /// Sites that grew.
    pub growth: Vec<Growth>,
    /// Sites of many short-lived allocations.
    pub churn: Vec<StackId>,
    /// Pinning sites per device, at the worst moment (same order as `replay.devices`).
    pub pins: Vec<Vec<PinSite>>,
    /// Failed allocations.
    pub ooms: Vec<OomView>,
    /// `--at`.
    pub snapshot: Option<SnapshotView>,
}

/// Which snapshots `--at` asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct At {
    /// The snapshot shown.
    pub from: u64,
    /// The second one, for a difference.
    pub to: Option<u64>,
}

impl At {
    /// Parses `N` or `N..M`.
    pub fn parse(s: &str) -> Result<At, String> {
        let num = |t: &str| {
            t.trim()
                .parse::<u64>()
                .map_err(|_| format!("expected a snapshot id or two as N..M, got {s:?}"))
        };
        match s.split_once("..") {
            Some((a, b)) => Ok(At {
                from: num(a)?,
                to: Some(num(b)?),
            }),
            None => Ok(At {
                from: num(s)?,
                to: None,
            }),
        }
    }

    /// The ids the pass must keep.
    pub fn ids(&self) -> Vec<u64> {
        std::iter::once(self.from).chain(self.to).collect()
    }
}

/// Builds the view and its findings from a replay that ran the memory pass.
pub fn view(replay: &Replay, stacks: &mut Stacks<'_>, at: Option<At>) -> Option<(MemoryView, Vec<Finding>)> {
    let mut m: MemoryReplay = (**replay.memory.as_ref()?).clone();
    let mut names = Namer {
        replay,
        stacks,
        sites: BTreeMap::new(),
        summaries: m.sites.iter().map(|s| (s.stack, s.clone())).collect(),
    };

    // Stacked: the sites with the most live bytes over the run.
    let mut by_area: Vec<(u128, StackId)> = m
        .sites
        .iter()
        .map(|s| (s.series.iter().map(|p| u128::from(p.last)).sum(), s.stack))
        .filter(|(area, _)| *area > 0)
        .collect();
    by_area.sort_by(|a, b| b.0.cmp(&a.0).then(a.1 .0.cmp(&b.1 .0)));
    let mut stacked = Vec::new();
    for (_, id) in by_area.into_iter().take(STACKED_SITES) {
        names.name(id);
        let series = m
            .sites
            .iter()
            .find(|s| s.stack == id)
            .map(|s| s.series.iter().map(|p| p.last).collect())
            .unwrap_or_default();
        stacked.push((id, series));
    }

    let peak_sites: Vec<(StackId, u64)> = m
        .peak_sites
        .iter()
        .take(PEAK_FLAME_SITES)
        .map(|s| (s.stack, s.bytes))
        .collect();
    for (id, _) in &peak_sites {
        names.name(*id);
    }

    let growth = m.growth.clone();
    for g in &growth {
        names.name(g.stack);
    }

    let run = m.seq_range.1.saturating_sub(m.seq_range.0).max(1);
    let mut churn: Vec<&SiteSummary> = m
        .sites
        .iter()
        .filter(|s| {
            s.allocations >= CHURN_MIN_ALLOCATIONS
                && s.frees * 10 >= s.allocations * 9
                && s.mean_lifetime * CHURN_LIFETIME_SHARE < run
        })
        .collect();
    churn.sort_by(|a, b| b.allocations.cmp(&a.allocations).then(a.stack.0.cmp(&b.stack.0)));
    let churn: Vec<StackId> = churn.into_iter().take(10).map(|s| s.stack).collect();
    for id in &churn {
        names.name(*id);
    }

    // Per device: its peak's sites and its stacked sites.
    for d in &m.devices {
        for s in &d.peak_sites {
            names.name(s.stack);
        }
        for (id, _) in &d.stacked {
            names.name(*id);
        }
    }

    let pins: Vec<Vec<PinSite>> = m.devices.iter().map(|d| d.pins.clone()).collect();
    for p in pins.iter().flatten() {
        names.name(p.stack);
    }

    let mut ooms = Vec::new();
    for oom in &m.ooms {
        for s in &oom.sites {
            names.name(s.stack);
        }
        let pins = oom.pins.clone();
        for p in &pins {
            names.name(p.stack);
        }
        ooms.push(OomView {
            stack: names.frames(oom.stack),
            fragmented: oom.result == CuResult::OUT_OF_MEMORY
                && oom.free_in_span >= oom.size
                && oom.largest_hole < oom.size,
            pins,
            oom: oom.clone(),
        });
    }

    let snapshot = at.and_then(|at| snapshot_view(&m, at));
    if let Some(s) = &snapshot {
        // Every row: `gpuleak diff TRACE@N` keys each live site by its stack.
        for (id, _, _) in &s.rows {
            names.name(*id);
        }
    }

    let mut findings: Vec<Finding> = growth.iter().map(|g| growth_finding(g, &mut names)).collect();
    findings.extend(fragmentation_findings(&ooms, &mut names));

    // The per-site series are only needed for the stacked sites, which `stacked` holds.
    for s in &mut m.sites {
        s.series = Vec::new();
    }
    let mut sites = names.sites;
    disambiguate(&mut sites);
    Some((
        MemoryView {
            replay: m,
            sites,
            stacked,
            peak_sites,
            growth,
            churn,
            pins,
            ooms,
            snapshot,
        },
        findings,
    ))
}

/// Names sites once each.
struct Namer<'r, 's, 'a> {
    replay: &'r Replay,
    stacks: &'s mut Stacks<'a>,
    sites: BTreeMap<StackId, SiteView>,
    summaries: HashMap<StackId, SiteSummary>,
}

impl Namer<'_, '_, '_> {
    fn frames(&mut self, id: StackId) -> Vec<Frame> {
        match self.replay.stacks.get(&id) {
            Some(a) if id != StackId::NONE => self.stacks.frames(a),
            _ => Vec::new(),
        }
    }

    fn name(&mut self, id: StackId) -> &SiteView {
        if !self.sites.contains_key(&id) {
            let stack = self.frames(id);
            let label = label(&stack, id);
            let mut summary = self.summaries.get(&id).cloned().unwrap_or(SiteSummary {
                stack: id,
                kind: MemKind::Device,
                api: Api::NONE,
                device: 0,
                allocations: 0,
                frees: 0,
                bytes: 0,
                high: 0,
                at_peak: 0,
                live: 0,
                mean_lifetime: 0,
                series: Vec::new(),
                pool: false,
            });
            summary.series = Vec::new();
            self.sites.insert(id, SiteView { summary, stack, label });
        }
        &self.sites[&id]
    }
}

/// Sites whose labels are the same (one function called from several places) get their
/// caller added, then their stack id if that is not enough.
fn disambiguate(sites: &mut BTreeMap<StackId, SiteView>) {
    let counts = |sites: &BTreeMap<StackId, SiteView>| {
        let mut count: HashMap<String, usize> = HashMap::new();
        for v in sites.values() {
            *count.entry(v.label.clone()).or_insert(0) += 1;
        }
        count
    };
    let count = counts(sites);
    for v in sites.values_mut() {
        if count[&v.label] < 2 {
            continue;
        }
        // The caller: the next of the user's frames out from the site's, else the next named.
        let at = site_frame(&v.stack).map_or(0, |f| v.stack.iter().position(|g| std::ptr::eq(f, g)).unwrap_or(0));
        let outer = &v.stack[(at + 1).min(v.stack.len())..];
        let caller = outer
            .iter()
            .find(|f| f.user && f.function.is_some())
            .or_else(|| outer.iter().find(|f| f.function.is_some()))
            .cloned();
        if let Some(caller) = caller {
            v.label = format!("{} < {}", v.label, label(&[caller], v.summary.stack));
        }
    }
    let count = counts(sites);
    for (id, v) in sites.iter_mut() {
        if count[&v.label] > 1 {
            v.label = format!("{} (stack {})", v.label, id.0);
        }
    }
}

/// A site's short name: its site frame's ([`site_name`]), else the stack's id.
pub fn label(stack: &[Frame], id: StackId) -> String {
    site_name(stack).unwrap_or_else(|| format!("stack {}", id.0))
}

fn snapshot_view(m: &MemoryReplay, at: At) -> Option<SnapshotView> {
    let from = m.snapshots.iter().find(|s| s.id == at.from)?.clone();
    let to = match at.to {
        Some(id) => Some(m.snapshots.iter().find(|s| s.id == id)?.clone()),
        None => None,
    };
    let mut bytes: BTreeMap<StackId, (u64, u64)> = BTreeMap::new();
    for s in &from.sites {
        bytes.entry(s.stack).or_default().0 = s.bytes;
    }
    match &to {
        Some(to) => {
            for s in &to.sites {
                bytes.entry(s.stack).or_default().1 = s.bytes;
            }
        }
        None => {
            for v in bytes.values_mut() {
                v.1 = v.0;
            }
        }
    }
    let mut rows: Vec<(StackId, u64, u64)> = bytes.into_iter().map(|(k, (a, b))| (k, a, b)).collect();
    if to.is_some() {
        rows.retain(|r| r.1 != r.2);
        rows.sort_by(|a, b| b.2.abs_diff(b.1).cmp(&a.2.abs_diff(a.1)).then(a.0 .0.cmp(&b.0 .0)));
    } else {
        rows.sort_by(|a, b| b.1.cmp(&a.1).then(a.0 .0.cmp(&b.0 .0)));
    }
    Some(SnapshotView { from, to, rows })
}

fn growth_finding(g: &Growth, names: &mut Namer<'_, '_, '_>) -> Finding {
    let site = names.name(g.stack).clone();
    let steps = if g.from_marks {
        format!("{} marked steps", g.steps)
    } else {
        format!("{} rises", g.steps)
    };
    let mut message = format!(
        "live bytes from this site kept rising through the run: from {} to {} ({steps}, {} each",
        human_bytes(g.from_bytes),
        human_bytes(g.to_bytes),
        human_bytes(g.bytes_per_step),
    );
    if let Some(rate) = g.bytes_per_second {
        message.push_str(&format!(", {}/s", human_bytes(rate as u64)));
    }
    message.push(')');
    if site.summary.live == 0 {
        message.push_str("; all of it was freed by the end, so it is no leak at exit");
    }
    if site.summary.pool {
        // Seen with PyTorch on an H100: with the cache on, a leak of 1 MiB tensors rose as the
        // allocator's 2 MiB segments, at the forward pass's stack, not the line keeping them.
        message.push_str(
            "; the site is a caching allocator's: with its cache on, each rise is the cache \
             growing for a request that did not fit, at that request's stack, which need not be \
             the code that keeps the memory (`gpuleak run --no-framework-cache` makes each \
             tensor its own allocation)",
        );
    }
    Finding {
        check: "growth",
        severity: Severity::Warning,
        message,
        stack: site.stack.clone(),
        stack_role: None,
        count: 1,
        api: site.summary.api,
        ptr: 0,
        result: 0,
        allocation_stack: None,
        first_free_stack: None,
        related: Vec::new(),
        extra: vec![
            ("from_bytes", Extra::U(g.from_bytes)),
            ("to_bytes", Extra::U(g.to_bytes)),
            ("steps", Extra::U(g.steps)),
            (
                "steps_from",
                Extra::S(if g.from_marks { "marks" } else { "inferred" }.into()),
            ),
            ("slope_bytes_per_step", Extra::U(g.bytes_per_step)),
            (
                "slope_bytes_per_second",
                g.bytes_per_second.map_or(Extra::Null, Extra::F),
            ),
            ("stack_id", Extra::U(u64::from(g.stack.0))),
        ],
        seq: u64::MAX - 1,
    }
}

/// One finding per failing stack whose request would have fit in the free memory between live
/// allocations: the failure came from fragmentation, not from a full device.
fn fragmentation_findings(ooms: &[OomView], names: &mut Namer<'_, '_, '_>) -> Vec<Finding> {
    let mut out: Vec<Finding> = Vec::new();
    let mut index: HashMap<(StackId, Api), usize> = HashMap::new();
    for o in ooms.iter().filter(|o| o.fragmented) {
        let key = (o.oom.stack, o.oom.api);
        if let Some(&i) = index.get(&key) {
            out[i].count += 1;
            continue;
        }
        let related = o
            .pins
            .iter()
            .take(3)
            .map(|p| RelatedStack {
                role: "pinned by",
                stack: names.name(p.stack).stack.clone(),
            })
            .collect();
        let pinned = match o.pins.first() {
            Some(p) => format!(
                "; {} live allocation{} from {} split the free memory (freeing one would make a {} hole)",
                p.allocations,
                if p.allocations == 1 { "" } else { "s" },
                names.name(p.stack).label,
                human_bytes(p.largest_joined)
            ),
            None => String::new(),
        };
        let message = format!(
            "{} of {} failed (result {}) while {} were free between live allocations on {}: the largest hole was {} (fragmentation {:.2}){pinned}",
            o.oom.api,
            human_bytes(o.oom.size),
            o.oom.result.0,
            human_bytes(o.oom.free_in_span),
            device_name(o.oom.device),
            human_bytes(o.oom.largest_hole),
            o.oom.fragmentation,
        );
        index.insert(key, out.len());
        out.push(Finding {
            check: "fragmentation",
            severity: Severity::Warning,
            message,
            stack: o.stack.clone(),
            stack_role: None,
            count: 1,
            api: o.oom.api,
            ptr: 0,
            result: o.oom.result.0,
            allocation_stack: None,
            first_free_stack: None,
            related,
            extra: vec![
                ("requested_bytes", Extra::U(o.oom.size)),
                ("free_in_span", Extra::U(o.oom.free_in_span)),
                ("largest_hole", Extra::U(o.oom.largest_hole)),
                ("fragmentation", Extra::F(o.oom.fragmentation)),
                ("device", Extra::S(device_name(o.oom.device))),
            ],
            seq: o.oom.seq,
        });
    }
    out
}

/// `device 0`, `host`, `unknown device`.
pub fn device_name(device: i32) -> String {
    match device {
        crate::memory::HOST => "host".into(),
        crate::memory::UNKNOWN_DEVICE => "unknown device".into(),
        d => format!("device {d}"),
    }
}
