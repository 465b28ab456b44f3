//! `gpuleak report`: leaks grouped by allocation stack, memory held by caching allocators,
//! unreleased memory the program does not own, bad frees and stream-ordering findings, as
//! text or JSON.
//!
//! A report is built per trace ([`build`]) from the model's replay, on every core when there
//! are several traces ([`load`]), then the processes are combined ([`Report::new`], with the
//! [`merged`] view of their leak sites) and written by [`text`] or [`json`]. The JSON document
//! only ever gains fields, never loses or renames one; `docs/report.md` describes every field.
//!
//! ```no_run
//! use gpuleak_analyzer::report::{self, Options, Report};
//! use gpuleak_analyzer::TraceFile;
//!
//! // Every trace in a directory, read on two threads.
//! let files = TraceFile::open_all(&["traces/".into()]).unwrap();
//! let mut report = Report::new(report::from_files(&files, &Options::default(), 2, None));
//! report.limit(10);
//! let mut out = Vec::new();
//! report::json::write(&report, &mut out).unwrap();
//! ```

pub mod damage;
pub mod frames;
pub mod frameworks;
pub mod json;
pub mod load;
pub mod memory;
pub mod merge;
pub mod merged;
mod ordering;
pub use crate::owner;
mod pools;
pub mod progress;
pub mod ranks;
pub mod text;
pub mod user_code;

#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::path::PathBuf;

use gpuleak_format::{Api, MemKind, StackId};

use crate::file::TraceFile;
use crate::model::{self, is_owned_memory, BadFreeCause, LeakAt, LeakGroup, Process};
use crate::replay::Replay;

pub use damage::Damage;
pub use frames::{Frame, FrameSource, ModuleOffsets};
pub use load::from_files;
pub use merged::{MergedSite, SiteInProcess};
pub use owner::Pool;
pub use progress::Progress;

use frames::Stacks;

/// How a report is built.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Show at most this many groups per list and process.
    pub top: Option<usize>,
    /// Count memory held by caching allocators as leaks.
    pub pool_as_leak: bool,
    /// Directories searched for separate debug files.
    pub debug_dirs: Vec<PathBuf>,
    /// Where the traced machine's files are, when the trace was recorded elsewhere (another
    /// host, a container, an emulator): each module is looked for below it first.
    pub sysroot: Option<PathBuf>,
    /// Where resolved frames are kept across runs (`GPULEAK_SYMBOL_CACHE`); `None` keeps none.
    pub symbol_cache: Option<PathBuf>,
    /// Only the summary's counts are wanted (`gpuleak run`'s closing line): frames are named
    /// by module and offset, and no module's symbols are read. No count depends on names.
    pub counts_only: bool,
    /// Run the memory pass (timeline, peak, growth, fragmentation, failed allocations):
    /// [`ProcessReport::memory`] and the `growth` and `fragmentation` findings.
    pub memory: bool,
    /// With `memory`: the snapshots to show (`--at`).
    pub at: Option<memory::At>,
    /// Which frames are the user's (`--focus`, `--hide`): the frame that names each site.
    pub user_code: user_code::UserCode,
    /// Show every frame of Python stacks (`--native-frames`), not only Python frames and the
    /// user's native frames.
    pub native_frames: bool,
}

/// Totals of one process, or of all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Summary {
    /// Successful allocations of every family.
    pub allocations: u64,
    /// Successful frees of every family.
    pub frees: u64,
    /// References to VMM handles taken by `cuMemRetainAllocationHandle` (each needs its own
    /// `cuMemRelease`, counted in `frees`).
    pub retains: u64,
    /// Leaked allocations (at exit and at teardown).
    pub leaked_allocations: u64,
    /// Leaked bytes (owned memory only).
    pub leaked_bytes: u64,
    /// Of `leaked_bytes`, those still live at exit.
    pub leaked_bytes_at_exit: u64,
    /// Of `leaked_bytes`, those freed by a context teardown.
    pub leaked_bytes_at_teardown: u64,
    /// Highest owned bytes live at once (for several processes: the sum of their peaks).
    pub peak_bytes: u64,
    /// Allocation calls that failed.
    pub failed_allocations: u64,
    /// Allocations held by caching allocators (not counted as leaks).
    pub pool_allocations: u64,
    /// Bytes held by caching allocators (not counted as leaks).
    pub pool_bytes: u64,
    /// Unreleased registrations, IPC mappings and address reservations.
    pub unreleased_allocations: u64,
    /// Their bytes (not memory the program owns).
    pub unreleased_bytes: u64,
    /// Number of findings.
    pub findings: u64,
}

impl Summary {
    fn add(&mut self, o: &Summary) {
        self.allocations = self.allocations.saturating_add(o.allocations);
        self.frees += o.frees;
        self.retains = self.retains.saturating_add(o.retains);
        self.leaked_allocations = self.leaked_allocations.saturating_add(o.leaked_allocations);
        self.leaked_bytes = self.leaked_bytes.saturating_add(o.leaked_bytes);
        self.leaked_bytes_at_exit = self.leaked_bytes_at_exit.saturating_add(o.leaked_bytes_at_exit);
        self.leaked_bytes_at_teardown = self.leaked_bytes_at_teardown.saturating_add(o.leaked_bytes_at_teardown);
        self.peak_bytes = self.peak_bytes.saturating_add(o.peak_bytes);
        self.failed_allocations = self.failed_allocations.saturating_add(o.failed_allocations);
        self.pool_allocations = self.pool_allocations.saturating_add(o.pool_allocations);
        self.pool_bytes = self.pool_bytes.saturating_add(o.pool_bytes);
        self.unreleased_allocations = self.unreleased_allocations.saturating_add(o.unreleased_allocations);
        self.unreleased_bytes = self.unreleased_bytes.saturating_add(o.unreleased_bytes);
        self.findings += o.findings;
    }
}

/// Allocations from one stack still held at exit or at a context teardown.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Held {
    /// Bytes asked for.
    pub bytes: u64,
    /// Number of allocations.
    pub allocations: u64,
    /// Memory family.
    pub kind: MemKind,
    /// Exit or teardown (the first teardown met, when several).
    pub at: LeakAt,
    /// Driver entry point of the first allocation.
    pub api: Api,
    /// Runtime call of the first allocation, or `Api::NONE`.
    pub via: Api,
    /// Path of the owning module (the first outside the CUDA libraries).
    pub owner: Option<String>,
    /// The caching allocator that owner belongs to.
    pub pool: Option<Pool>,
    /// VMM handles released but still mapped.
    pub released_but_mapped: u64,
    /// References taken by `cuMemRetainAllocationHandle` on these handles, or openings
    /// (imports) of IPC or pool memory beyond the first.
    pub retains: u64,
    /// Release calls (`cuMemRelease`, `cuIpcCloseMemHandle`, `cuMemFree`) still needed at the end.
    pub releases_due: u64,
    /// The allocation stack, as shown.
    pub stack: Vec<Frame>,
    /// The allocation stack's id in the trace.
    pub stack_id: StackId,
    /// Thread of the first allocation.
    pub tid: u32,
    first_seq: u64,
}

/// How bad a finding is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Severity {
    /// A bug.
    Error,
    /// Probably a bug, or a gap in the trace.
    Warning,
    /// For information.
    Note,
}

impl Severity {
    /// `error`, `warning` or `note`.
    pub fn name(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
            Severity::Note => "note",
        }
    }
}

/// A problem found in the trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The check that found it (`bad-free`).
    pub check: &'static str,
    /// How bad.
    pub severity: Severity,
    /// One sentence.
    pub message: String,
    /// Where it happened (empty when no stack was captured).
    pub stack: Vec<Frame>,
    /// What `stack` shows when it is not the stack of the call at fault (a stream-ordering
    /// finding whose call had no stack captured shows the allocation's, or the stream's or
    /// event's creation): `allocated at`, `stream created at`, `event created at`.
    pub stack_role: Option<&'static str>,
    /// Occurrences folded into this finding.
    pub count: u64,
    /// The call.
    pub api: Api,
    /// Address or handle of the first occurrence.
    pub ptr: u64,
    /// Driver result of the first occurrence.
    pub result: u32,
    /// Stack of the allocation involved, when known.
    pub allocation_stack: Option<Vec<Frame>>,
    /// Stack of the earlier free of a double free (of the free, for a use after free), when
    /// captured.
    pub first_free_stack: Option<Vec<Frame>>,
    /// Other stacks that explain the finding (stream-ordering findings: the other access,
    /// the last use, the stream's or event's creation).
    pub related: Vec<RelatedStack>,
    /// Fields of this check only (a growth's slope, a fragmentation failure's holes), added to
    /// the JSON finding after the common ones.
    pub extra: Vec<(&'static str, Extra)>,
    seq: u64,
}

/// A value of a finding's own field.
#[derive(Debug, Clone, PartialEq)]
pub enum Extra {
    /// No value.
    Null,
    /// A count of bytes or steps.
    U(u64),
    /// A ratio or rate.
    F(f64),
    /// Text.
    S(String),
}

impl Eq for Extra {}

/// A stack that helps explain a finding, with what it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelatedStack {
    /// What the stack shows (`other access at`, `last used at`, `stream created at`...).
    pub role: &'static str,
    /// The frames.
    pub stack: Vec<Frame>,
}

/// The report on one trace.
#[derive(Debug, Clone)]
pub struct ProcessReport {
    /// The trace file.
    pub trace: PathBuf,
    /// Who the process was (from its `ProcessInfo` record).
    pub process: Option<Process>,
    /// Whether the trace has an `Exit` record.
    pub exited: bool,
    /// Exit status, when the `Exit` record knows it.
    pub exit_code: Option<i32>,
    /// Totals.
    pub summary: Summary,
    /// Leaks, largest first.
    pub leaks: Vec<Held>,
    /// Memory held by caching allocators (empty with `--pool-as-leak`).
    pub held_by_pool: Vec<Held>,
    /// Unreleased registrations, IPC mappings and reservations.
    pub unreleased: Vec<Held>,
    /// Groups left out of each list by `--top`: (groups, bytes) for leaks, pool, unreleased.
    pub omitted: [(u64, u64); 3],
    /// Findings, errors first.
    pub findings: Vec<Finding>,
    /// What the reader should know about the trace itself (truncation, lost events...).
    pub notes: Vec<String>,
    /// The notes of `notes` about missing symbols, which [`Report::new`] keeps in the first
    /// process that has each only.
    pub symbol_notes: Vec<String>,
    /// Where the memory went, when the memory pass ran.
    pub memory: Option<Box<memory::MemoryView>>,
    /// What could not be read of the trace.
    pub damage: Damage,
    /// The latest allocator state of each framework that wrote one (PyTorch), joined with
    /// the driver's view.
    pub frameworks: Vec<crate::frameworks::FrameworkView>,
}

impl ProcessReport {
    /// Adds what the file itself says went wrong while it was read (it shrank), and the note
    /// that says so; for a segmented trace, which segment files the unreadable offsets are in.
    pub fn read_from(&mut self, file: &TraceFile) {
        if let Some(at) = file.missing_from() {
            self.damage.missing_from = Some(at);
            self.notes.insert(0, damage::shrunk(at));
        }
        if file.later_segments().is_empty() {
            return;
        }
        if let Some(e) = &self.damage.first_error {
            let (path, at) = file.locate(e.offset);
            if path != file.path() {
                self.damage.in_segment = Some((path.to_owned(), at));
            }
        }
        if self.damage.errors > 0 {
            // The offsets of the notes count the segments end to end.
            let mut start = 0;
            let parts: Vec<String> = std::iter::once(file)
                .chain(file.later_segments())
                .map(|f| {
                    let (from, to) = (start, start + f.bytes().len() as u64);
                    start = to;
                    format!("{} from offset {from} to {to}", f.path().display())
                })
                .collect();
            self.notes.push(format!(
                "the offsets above count the trace's segments end to end: {}",
                parts.join(", ")
            ));
        }
    }

    /// Keeps at most `top` groups in each list, counting what is left out in `omitted`.
    pub fn limit(&mut self, top: usize) {
        for (i, list) in [&mut self.leaks, &mut self.held_by_pool, &mut self.unreleased]
            .into_iter()
            .enumerate()
        {
            if list.len() > top {
                let cut = list.split_off(top);
                self.omitted[i].0 += cut.len() as u64;
                self.omitted[i].1 = self.omitted[i]
                    .1
                    .saturating_add(cut.iter().fold(0u64, |s, h| s.saturating_add(h.bytes)));
            }
        }
    }
}

/// The reports on every trace, with combined totals.
#[derive(Debug, Clone)]
pub struct Report {
    /// One per trace, in command-line order (a directory's traces sorted by name).
    pub processes: Vec<ProcessReport>,
    /// Sum over the processes (peak: the sum of their peaks).
    pub summary: Summary,
    /// With more than one process: every leak site once, summed over the processes, largest
    /// first; empty for one process.
    pub merged: Vec<MergedSite>,
    /// Sites left out of `merged` by [`Report::limit`]: (sites, bytes).
    pub merged_omitted: (u64, u64),
    /// Show every native frame of Python stacks (`--native-frames`) in text and flame graphs.
    pub native_frames: bool,
}

impl Report {
    /// Combines per-trace reports.
    pub fn new(mut processes: Vec<ProcessReport>) -> Report {
        // A library without debug info is noted once per run, not once per process.
        let mut seen: Vec<String> = Vec::new();
        for p in &mut processes {
            let again: Vec<String> = p.symbol_notes.iter().filter(|n| seen.contains(n)).cloned().collect();
            p.notes.retain(|n| !again.contains(n));
            p.symbol_notes.retain(|n| !again.contains(n));
            seen.extend(p.symbol_notes.iter().cloned());
        }
        let mut summary = Summary::default();
        for p in &processes {
            summary.add(&p.summary);
        }
        let merged = if processes.len() > 1 {
            merged::sites(&processes)
        } else {
            Vec::new()
        };
        Report {
            processes,
            summary,
            merged,
            merged_omitted: (0, 0),
            native_frames: false,
        }
    }

    /// Keeps at most `top` groups in each list of each process, and `top` merged sites (the
    /// merged view still sums every group of every process).
    pub fn limit(&mut self, top: usize) {
        for p in &mut self.processes {
            p.limit(top);
        }
        if self.merged.len() > top {
            let cut = self.merged.split_off(top);
            self.merged_omitted.0 += cut.len() as u64;
            self.merged_omitted.1 = self
                .merged_omitted
                .1
                .saturating_add(cut.iter().fold(0u64, |s, m| s.saturating_add(m.bytes)));
        }
    }
}

/// Replays and reports on one opened trace, on the calling thread.
pub fn from_file(file: &TraceFile, options: &Options) -> ProcessReport {
    let replay = load::replay(file, false, 0, None, options);
    let source = frames::source_for(&replay.modules, options);
    let mut report = build(replay, file.path().to_path_buf(), source.as_ref(), options);
    report.read_from(file);
    report
}

/// Builds the report on one replayed trace, with frames from `source`.
pub fn build(replay: Replay, trace: PathBuf, source: &dyn FrameSource, options: &Options) -> ProcessReport {
    let mut stacks = Stacks::new(&replay.modules, source)
        .with_user_code(options.user_code.clone())
        .with_native_frames(options.native_frames);
    let mut leaks = Vec::new();
    let mut held_by_pool = Vec::new();
    let mut unreleased = Vec::new();
    for g in &replay.leaks {
        let held = held(g, &replay, &mut stacks);
        if !is_owned_memory(g.kind) {
            unreleased.push(held);
        } else if held.pool.is_some() && !options.pool_as_leak {
            held_by_pool.push(held);
        } else {
            leaks.push(held);
        }
    }
    let (leaks, held_by_pool, unreleased) = (merge(leaks), merge(held_by_pool), merge(unreleased));

    let mut summary = Summary {
        allocations: replay.counts.allocations,
        frees: replay.counts.frees,
        retains: replay.counts.retains,
        peak_bytes: replay.peak_bytes,
        failed_allocations: replay.counts.failed_allocations,
        ..Summary::default()
    };
    for l in &leaks {
        summary.leaked_allocations = summary.leaked_allocations.saturating_add(l.allocations);
        summary.leaked_bytes = summary.leaked_bytes.saturating_add(l.bytes);
        match l.at {
            LeakAt::Exit => summary.leaked_bytes_at_exit = summary.leaked_bytes_at_exit.saturating_add(l.bytes),
            LeakAt::Teardown { .. } => {
                summary.leaked_bytes_at_teardown = summary.leaked_bytes_at_teardown.saturating_add(l.bytes)
            }
        }
    }
    for p in &held_by_pool {
        summary.pool_allocations = summary.pool_allocations.saturating_add(p.allocations);
        summary.pool_bytes = summary.pool_bytes.saturating_add(p.bytes);
    }
    for u in &unreleased {
        summary.unreleased_allocations = summary.unreleased_allocations.saturating_add(u.allocations);
        summary.unreleased_bytes = summary.unreleased_bytes.saturating_add(u.bytes);
    }

    let mut findings: Vec<Finding> = replay
        .bad_frees
        .iter()
        .map(|b| bad_free(b, &replay, &mut stacks))
        .collect();
    findings.extend(ordering::findings(&replay, &mut stacks));
    findings.extend(pools::findings(&replay, &mut stacks));
    findings.extend(frameworks::findings(&replay));
    let memory = memory::view(&replay, &mut stacks, options.at).map(|(view, found)| {
        findings.extend(found);
        Box::new(view)
    });
    findings.sort_by_key(|f| (f.severity, f.seq));
    summary.findings = findings.len() as u64;

    let mut notes = notes(&replay);
    // Missing symbols matter only where the report shows the module's frames.
    let symbol_notes: Vec<String> = source
        .warnings()
        .into_iter()
        .filter(|(module, _)| stacks.shown_modules().contains(module))
        .map(|(_, line)| line)
        .collect();
    notes.extend(symbol_notes.iter().cloned());
    if let (Some(at), Some(m)) = (options.at, &memory) {
        if m.snapshot.is_none() {
            let ids: Vec<String> = at.ids().iter().map(u64::to_string).collect();
            notes.push(format!("no Snapshot record {} in this trace", ids.join(" or ")));
        }
    }

    if replay.frameworks.dropped > 0 {
        notes.push(format!(
            "{} framework allocator states were left out of the analysis (more than {} in the trace): growth is judged on the rest",
            replay.frameworks.dropped,
            crate::frameworks::state::KEPT_STATES
        ));
    }
    notes.extend(unread_frameworks(&replay, leaks.iter().chain(&held_by_pool)));
    let damage = Damage::of(&replay);
    let mut report = ProcessReport {
        trace,
        process: replay.process.clone(),
        exited: replay.exited,
        exit_code: replay.exit_code,
        summary,
        leaks,
        held_by_pool,
        unreleased,
        omitted: [(0, 0); 3],
        findings,
        notes,
        symbol_notes,
        memory,
        damage,
        frameworks: frameworks::views(&replay),
    };
    if let Some(top) = options.top {
        report.limit(top);
    }
    report
}

fn held(g: &LeakGroup, replay: &Replay, stacks: &mut Stacks<'_>) -> Held {
    let addresses: &[u64] = replay.stacks.get(&g.stack).map_or(&[], Vec::as_slice);
    let owner = owner::owner(addresses, &replay.modules).map(str::to_string);
    let framework = replay.frameworks.latest_framework();
    let pool = match framework.filter(|_| g.framework) {
        Some(name) => frameworks::pool_of(name).or(Some(Pool::Pytorch)),
        None => owner.as_deref().and_then(owner::pool_of),
    };
    Held {
        bytes: g.bytes,
        allocations: g.allocations,
        kind: g.kind,
        at: g.at,
        api: g.first.api,
        via: g.first.via,
        owner,
        pool,
        released_but_mapped: g.released_but_mapped,
        retains: g.retains,
        releases_due: g.releases_due,
        stack: stacks.frames(addresses),
        stack_id: g.stack,
        tid: g.first.tid,
        first_seq: g.first.seq.0,
    }
}

/// What makes two groups one: family, exit or teardown, pool, and the frames shown.
type MergeKey = (MemKind, &'static str, Option<Pool>, Vec<FrameKey>);

/// A frame as the reader sees it: a named frame is its function, file, line and module (the
/// same line reached through different return addresses is one frame); an unnamed frame is
/// only the same at the same address.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FrameKey {
    function: Option<String>,
    file: Option<String>,
    line: Option<u32>,
    module: Option<String>,
    address: Option<u64>,
}

impl FrameKey {
    fn of(f: &Frame) -> FrameKey {
        FrameKey {
            function: f.function.clone(),
            file: f.file.clone(),
            line: f.line,
            module: f.module.clone(),
            address: f.function.is_none().then_some(f.address),
        }
    }
}

/// Folds groups whose shown frames are identical (the same source line reached through
/// different return addresses, or stacks that differ only inside the runtime), largest first.
fn merge(list: Vec<Held>) -> Vec<Held> {
    let mut index: HashMap<MergeKey, usize> = HashMap::new();
    let mut out: Vec<Held> = Vec::with_capacity(list.len());
    for h in list {
        let key = (h.kind, h.at.name(), h.pool, h.stack.iter().map(FrameKey::of).collect());
        match index.get(&key) {
            Some(&i) => {
                let into = &mut out[i];
                into.bytes = into.bytes.saturating_add(h.bytes);
                into.allocations = into.allocations.saturating_add(h.allocations);
                into.released_but_mapped += h.released_but_mapped;
                into.retains += h.retains;
                into.releases_due += h.releases_due;
                if h.first_seq < into.first_seq {
                    *into = Held {
                        bytes: into.bytes,
                        allocations: into.allocations,
                        released_but_mapped: into.released_but_mapped,
                        retains: into.retains,
                        releases_due: into.releases_due,
                        ..h
                    };
                }
            }
            None => {
                index.insert(key, out.len());
                out.push(h);
            }
        }
    }
    out.sort_by(|a, b| {
        b.bytes
            .cmp(&a.bytes)
            .then(b.allocations.cmp(&a.allocations))
            .then(a.first_seq.cmp(&b.first_seq))
    });
    out
}

fn bad_free(b: &model::BadFree, replay: &Replay, stacks: &mut Stacks<'_>) -> Finding {
    let mut stack_of = |id: StackId| -> Option<Vec<Frame>> {
        replay
            .stacks
            .get(&id)
            .filter(|_| id != StackId::NONE)
            .map(|a| stacks.frames(a))
    };
    let ptr = b.ptr.0;
    let mut message = match b.cause {
        BadFreeCause::NeverAllocated => {
            format!("{} of {ptr:#x}, which is not a live allocation", b.api)
        }
        BadFreeCause::DoubleFree(f) => format!(
            "double free: {} of {ptr:#x}, already freed ({} bytes of {} memory from {})",
            b.api,
            f.site.size,
            f.site.kind.name(),
            f.site.api
        ),
        BadFreeCause::WrongFamily(site) => format!(
            "{} of {ptr:#x}, which is {} memory from {} (wrong free function)",
            b.api,
            site.kind.name(),
            site.api
        ),
    };
    if b.result.is_success() {
        message.push_str("; the driver accepted it, so the trace may have missed an allocation");
    } else {
        message.push_str(&format!("; the driver returned {}", b.result.0));
    }
    if b.count > 1 {
        message.push_str(&format!(" ({} times)", b.count));
    }
    let (allocation_stack, first_free_stack) = match b.cause {
        BadFreeCause::NeverAllocated => (None, None),
        BadFreeCause::DoubleFree(f) => (stack_of(f.site.stack), stack_of(f.free_stack)),
        BadFreeCause::WrongFamily(site) => (stack_of(site.stack), None),
    };
    Finding {
        check: "bad-free",
        severity: if b.result.is_success() {
            Severity::Warning
        } else {
            Severity::Error
        },
        message,
        stack: stack_of(b.stack).unwrap_or_default(),
        count: b.count,
        api: b.api,
        ptr,
        result: b.result.0,
        allocation_stack,
        first_free_stack,
        related: Vec::new(),
        stack_role: None,
        extra: Vec::new(),
        seq: b.seq.0,
    }
}

/// A note for each caching allocator that holds memory at the end of a Python process
/// whose state gpuleak's Python package never wrote: what it holds was seen from the driver
/// only, and the note says why the tensors inside may not have been read.
fn unread_frameworks<'a>(replay: &Replay, groups: impl Iterator<Item = &'a Held> + Clone) -> Vec<String> {
    if replay.modules.python.is_empty() {
        return Vec::new();
    }
    let mut notes = Vec::new();
    for (pool, framework, what) in [
        (
            Pool::Pytorch,
            "torch",
            "PyTorch's caching allocator holds memory, but its tensors were",
        ),
        (
            Pool::Cupy,
            "cupy",
            "CuPy's memory pool holds memory, but its arrays were",
        ),
    ] {
        let holds = groups.clone().any(|g| g.pool == Some(pool));
        let read = replay.frameworks.complete.iter().any(|s| s.framework == framework);
        if holds && !read {
            notes.push(format!(
                "{what} not read: gpuleak's Python package was not active in this process (not installed \
                 for this interpreter, GPULEAK_FRAMEWORKS=0, or a command under gpuleak run that set \
                 PYTHONPATH itself); docs/frameworks.md says how to read them"
            ));
        }
    }
    notes
}

fn notes(replay: &Replay) -> Vec<String> {
    let mut notes = Vec::new();
    for e in &replay.errors {
        notes.push(format!("unreadable records: {e}; the report covers what could be read"));
    }
    let more = replay.error_count.saturating_sub(replay.errors.len() as u64);
    if more > 0 {
        notes.push(format!("{more} more decoding errors"));
    }
    if replay.lost_events > 0 {
        notes.push(format!(
            "the shim lost {} events (trace full or unwritable): leaks and bad frees may be missing or wrong",
            replay.lost_events
        ));
    }
    if replay.nested_calls > 0 {
        notes.push(format!(
            "{} CUDA calls were made while their thread was inside another CUDA call (a signal handler that interrupted one) and were not recorded: leaks and bad frees may be missing or wrong",
            replay.nested_calls
        ));
    }
    if replay.unknown_variants > 0 {
        notes.push(format!(
            "the driver handed out {} functions the shim does not know a variant of (a driver newer than the shim): calls through them were not recorded",
            replay.unknown_variants
        ));
    }
    if replay.counts.records == 0 && replay.error_count == 0 {
        notes.push(damage::NO_RECORDS.into());
    }
    if !replay.exited && replay.counts.records > 0 {
        notes.push("the trace has no exit record (the process was killed or is still running): \"at exit\" means at the end of the trace".into());
    }
    if replay.counts.missed_frees > 0 {
        notes.push(format!(
            "{} allocations reused an address that was still live: the trace missed their frees",
            replay.counts.missed_frees
        ));
    }
    if replay.counts.graph_allocations > 0 {
        notes.push(format!(
            "graph allocation nodes made under stream capture, by cuGraphAddMemAllocNode or by cuGraphAddNode: {}; \
             their memory is counted while a launch of their graph holds it (kind graph)",
            replay.counts.graph_allocations
        ));
    }
    if replay.counts.unknown_graph_launches > 0 {
        notes.push(format!(
            "{} graph launches ran graphs whose memory nodes the trace does not list: what they allocated is not counted",
            replay.counts.unknown_graph_launches
        ));
    }
    if replay.counts.graph_frees > 0 {
        notes.push(format!(
            "{} frees outside stream capture released memory that a graph's allocation node names, \
             allocated by no launch the trace lists (not counted)",
            replay.counts.graph_frees
        ));
    }
    notes
}
