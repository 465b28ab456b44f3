//! Checkpoints: what a report still needs of a history that is about to be dropped.
//!
//! A bounded trace keeps its last segments only. Each segment after the first starts with a
//! checkpoint ([`crate::block`]): the records of the history before it that still matter,
//! with their own sequence numbers and threads, and a [`Checkpoint`] record that counts the
//! rest. [`Compactor`] decides which are which: fed the history's records in order, it keeps
//!
//! - the process record and its rank, the modules still mapped (the last record of each range), and the
//!   stacks and Python code objects that kept records refer to;
//! - every record of each allocation still live, grouped by address in its [`Space`] (the
//!   allocation, each retain or re-opening, the frees that released a reference, the
//!   mappings of a VMM handle): a group goes as a whole once its memory is gone, so that a
//!   reader that replays the kept records sees each allocation live, released or retained
//!   exactly as the whole history left it;
//! - the last [`RECENT_FREES`] groups released, so that a double free after the checkpoint
//!   still names the allocation it frees again;
//! - allocations torn down with their context, and every context record (the teardown that
//!   leaked them);
//! - live streams, events (with their last record), memory pools (with their last usage),
//!   external semaphores;
//! - the last library workspace record (kind 79) of each address;
//! - capture episodes (their begin and end, the events recorded in them and the waits that
//!   joined them), the stream-ordered allocations captured into graphs, every graph record,
//!   and the launches of graphs with memory nodes (or with nodes the trace does not know),
//!   with the frees of the memory those launches allocated;
//! - the last complete state of each framework's allocator (its `FrameworkState`, the records
//!   of that state and its `FrameworkEnd`, kinds 70 to 76), and the states still being
//!   written; an older state goes once a newer one of the same framework is complete;
//! - `Lost` and `Exit` records.
//!
//! Everything else is dropped and counted by kind, API and how the analyzer counts it
//! ([`Checkpoint`]'s flags), so that a report's totals stay those of the whole run. What a
//! dropped window loses (docs/format.md): findings about the dropped calls themselves (a bad
//! free, a race, work never waited for) and the order between streams across the cut, which
//! readers take as a full synchronization. A loss hides a finding; it never makes one up.
//!
//! ```
//! use gpuleak_format::checkpoint::Compactor;
//! use gpuleak_format::*;
//!
//! let alloc = |seq, ptr| Record { seq: Seq(seq), time_ns: seq, body: Alloc {
//!     api: Api::cuMemAlloc_v2, via: Api::NONE, result: CuResult::SUCCESS, ctx: Ctx(1),
//!     stream: Stream(0), ptr: Ptr(ptr), size: 64, stack: StackId::NONE, aux: 0 }.into() };
//! let free = Record { seq: Seq(3), time_ns: 3, body: Free {
//!     api: Api::cuMemFree_v2, via: Api::NONE, result: CuResult::SUCCESS, stream: Stream(0),
//!     ptr: Ptr(0x100), size: 0, stack: StackId::NONE }.into() };
//! let mut c = Compactor::with_recent_frees(0);
//! for r in [alloc(1, 0x100), alloc(2, 0x200), free] {
//!     c.add(7, &r);
//! }
//! let done = c.finish(1);
//! assert_eq!(done.records().len(), 1, "only the live allocation");
//! assert_eq!((done.checkpoint.kept, done.checkpoint.dropped), (1, 2));
//! ```

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};

use crate::api::Api;
use crate::captures::{Captures, EXTERNAL};
use crate::contexts::Contexts;
use crate::fields::{Addrs, BlockState, Ctx, MemKind, StackId, Value};
use crate::meaning::Op;
use crate::record::{Body, Checkpoint, GraphExec, GraphMem, Record, Seq};
use crate::space::Space;
use crate::vmm::{Mapping, Mappings};
use history::History;

#[path = "checkpoint/finish.rs"]
mod finish;
#[path = "checkpoint/frameworks.rs"]
mod frameworks;
#[path = "checkpoint/groups.rs"]
mod groups;
#[path = "checkpoint/history.rs"]
pub mod history;
#[path = "checkpoint/segment.rs"]
mod segment;

pub use finish::Compacted;
use finish::{decode_alone, stacks_of};
pub use segment::{cut, segment, write_blocks, write_records};

/// How many released allocations a checkpoint keeps to name the victims of later double
/// frees: as many as the analyzer remembers.
pub const RECENT_FREES: usize = 65_536;

/// A kept record, encoded on its own (from an empty block state).
#[derive(Debug, Clone)]
struct Kept {
    tid: u32,
    bytes: Vec<u8>,
    /// How the record is counted once dropped: (kind, api, flags).
    class: (u8, u16, u64),
    /// Holders: groups, lists and maps that need it.
    refs: u32,
}

/// The records of one allocation, released as a whole.
#[derive(Debug, Default)]
struct Group {
    seqs: Vec<u64>,
    kind: Option<MemKind>,
    ctx: Ctx,
    /// References not released (see the analyzer's model): 0 released, alive while mapped.
    holds: u32,
    mappings: u64,
    /// Owned bytes (0 for address space and views of memory owned elsewhere), its stack, API
    /// and device, for the history.
    bytes: u64,
    stack: StackId,
    api: Api,
    device: i32,
}

/// Fed a history's records in order, keeps what a report still needs; see the module
/// documentation.
#[derive(Debug)]
pub struct Compactor {
    kept: BTreeMap<u64, Kept>,
    dropped: BTreeMap<(u8, u16, u64), u64>,
    dropped_total: u64,
    missing: u64,
    last: (Seq, u64),
    live: HashMap<(Space, u64), Group>,
    recent: VecDeque<((Space, u64), u64)>,
    recent_groups: HashMap<(Space, u64), (u64, Group)>,
    recent_capacity: usize,
    recent_generation: u64,
    contexts: Contexts,
    mappings: Mappings,
    captures: Captures<u64>,
    /// Records kept for good (teardown leaks, graphs, captures, contexts, `Lost`...).
    permanent: Vec<u64>,
    /// Keyed records, the last of each key kept: streams, events, pools, semaphores,
    /// modules, the last event record and pool usage.
    keyed: HashMap<(u8, u64), u64>,
    stacks: HashMap<StackId, Vec<u64>>,
    py_codes: HashMap<u64, u64>,
    /// Graph allocation nodes' addresses; executable graphs whose launches are kept, with the
    /// addresses they allocate; the memory their launches left.
    graph_nodes: HashSet<u64>,
    graph_pending: HashMap<u64, (Vec<u64>, Vec<u64>)>,
    graph_execs: HashMap<u64, bool>,
    graph_memory: HashSet<u64>,
    history: History,
    frameworks: frameworks::States,
}

/// The `api` field of a body, if it has one.
fn api_of(body: &Body<'_>) -> Api {
    let mut api = Api::NONE;
    body.visit(&mut |name, v| {
        if let ("api", Value::Api(a)) = (name, v) {
            api = a;
        }
    });
    api
}

impl Default for Compactor {
    fn default() -> Self {
        Compactor::new()
    }
}

impl Compactor {
    /// A compactor that keeps the last [`RECENT_FREES`] released allocations.
    pub fn new() -> Compactor {
        Compactor::with_recent_frees(RECENT_FREES)
    }

    /// A compactor that keeps the last `n` released allocations (0: none).
    pub fn with_recent_frees(n: usize) -> Compactor {
        Compactor {
            kept: BTreeMap::new(),
            dropped: BTreeMap::new(),
            dropped_total: 0,
            missing: 0,
            last: (Seq(0), 0),
            live: HashMap::new(),
            recent: VecDeque::new(),
            recent_groups: HashMap::new(),
            recent_capacity: n,
            recent_generation: 0,
            contexts: Contexts::default(),
            mappings: Mappings::default(),
            captures: Captures::default(),
            permanent: Vec::new(),
            keyed: HashMap::new(),
            stacks: HashMap::new(),
            py_codes: HashMap::new(),
            graph_nodes: HashSet::new(),
            graph_pending: HashMap::new(),
            graph_execs: HashMap::new(),
            graph_memory: HashSet::new(),
            history: History::default(),
            frameworks: frameworks::States::default(),
        }
    }

    /// A record of the history could not be read.
    pub fn decode_error(&mut self) {
        self.missing += 1;
    }

    /// Counts a record dropped without being kept.
    fn count(&mut self, class: (u8, u16, u64)) {
        *self.dropped.entry(class).or_default() += 1;
        self.dropped_total += 1;
    }

    /// Stores a record; the caller takes one reference to it (by its seq).
    fn keep(&mut self, tid: u32, record: &Record<'_>, flags: u64) -> u64 {
        let seq = record.seq.0;
        if let Some(k) = self.kept.get_mut(&seq) {
            k.refs += 1;
            return seq;
        }
        let mut bytes = vec![0u8; 256];
        let n = loop {
            match record.encode(&mut BlockState::default(), &mut bytes) {
                Ok(n) => break n,
                Err(_) => bytes.resize(bytes.len() * 4, 0),
            }
        };
        bytes.truncate(n);
        bytes[0] = record.body.kind();
        bytes.push(0);
        let class = (record.body.kind(), api_of(&record.body).0, flags);
        self.kept.insert(
            seq,
            Kept {
                tid,
                bytes,
                class,
                refs: 1,
            },
        );
        seq
    }

    /// Lets go of one reference to a kept record: dropped and counted with the last.
    fn release(&mut self, seq: u64) {
        let Some(k) = self.kept.get_mut(&seq) else { return };
        k.refs -= 1;
        if k.refs == 0 {
            let class = k.class;
            self.kept.remove(&seq);
            self.count(class);
        }
    }

    fn release_group(&mut self, g: Group) {
        for seq in g.seqs {
            self.release(seq);
        }
    }

    /// Keeps the last record of `key`, dropping the one before.
    fn keep_last(&mut self, tid: u32, key: (u8, u64), record: &Record<'_>) {
        let seq = self.keep(tid, record, 0);
        if let Some(old) = self.keyed.insert(key, seq) {
            self.release(old);
        }
    }

    /// Drops the record of `key` (and `record`, which ends it).
    fn end_keyed(&mut self, key: (u8, u64), record: &Record<'_>, flags: u64) {
        if let Some(old) = self.keyed.remove(&key) {
            self.release(old);
        }
        self.count((record.body.kind(), api_of(&record.body).0, flags));
    }

    fn keep_for_good(&mut self, tid: u32, record: &Record<'_>) {
        let seq = self.keep(tid, record, 0);
        self.permanent.push(seq);
    }

    /// Feeds the next record of the history (in sequence order).
    pub fn add(&mut self, tid: u32, record: &Record<'_>) {
        self.last = (record.seq, record.time_ns);
        self.history.at(record.seq.0, record.time_ns);
        let failed = |ok: bool| if ok { 0 } else { Checkpoint::FAILED };
        match &record.body {
            Body::Checkpoint(c) => {
                // An earlier checkpoint: what it dropped stays dropped.
                for q in c.counts.0.chunks_exact(4) {
                    *self.dropped.entry((q[0] as u8, q[1] as u16, q[2])).or_default() += q[3];
                }
                self.dropped_total += c.dropped;
                self.missing += c.missing;
            }
            Body::SiteHistory(h) => self.history.load(h),
            Body::FrameworkState(_)
            | Body::FrameworkSegment(_)
            | Body::FrameworkBlocks(_)
            | Body::FrameworkFrames(_)
            | Body::FrameworkStats(_)
            | Body::FrameworkOom(_)
            | Body::FrameworkEnd(_) => self.framework(tid, record),
            Body::ProcessInfo(_) | Body::Rank(_) | Body::Lost(_) | Body::Exit(_) => self.keep_for_good(tid, record),
            Body::Module(m) => self.keep_last(tid, (record.body.kind(), m.start), record),
            Body::Stack(s) => {
                let seq = self.keep(tid, record, 0);
                if let Some(old) = self.stacks.insert(s.id, vec![seq]) {
                    old.into_iter().for_each(|s| self.release(s));
                }
            }
            Body::PyFrames(p) => {
                let seq = self.keep(tid, record, 0);
                match self.stacks.get_mut(&p.stack) {
                    Some(list) => list.push(seq),
                    None => self.release(seq),
                }
            }
            Body::PyCode(c) => {
                let seq = self.keep(tid, record, 0);
                if let Some(old) = self.py_codes.insert(u64::from(c.id), seq) {
                    self.release(old);
                }
            }
            Body::CtxCreate(c) if c.result.is_success() => {
                self.contexts.create(c);
                self.keep_for_good(tid, record);
            }
            Body::CtxDestroy(d) if d.result.is_success() => {
                self.keep_for_good(tid, record);
                if let Some(ctx) = self.contexts.destroy(d) {
                    self.teardown(ctx);
                }
            }
            Body::StreamCreate(c) if c.result.is_success() => {
                self.keep_last_or_leak(tid, (record.body.kind(), c.stream.0), record)
            }
            Body::StreamDestroy(d) if d.result.is_success() => {
                if self.captures.is_capturing(&d.stream.0) {
                    // Its capture's begin is kept: so is the end of the stream's part in it.
                    self.keep_for_good(tid, record);
                    self.captures.forget(d.stream.0);
                    return;
                }
                self.end_keyed((32, d.stream.0), record, 0);
            }
            Body::EventCreate(e) if e.result.is_success() => {
                self.keep_last_or_leak(tid, (record.body.kind(), e.event.0), record)
            }
            Body::EventDestroy(e) if e.result.is_success() => {
                if let Some(old) = self.keyed.remove(&(38, e.event.0)) {
                    self.release(old);
                }
                self.end_keyed((36, e.event.0), record, 0);
            }
            Body::EventRecord(r) if r.result.is_success() => {
                if r.flags & EXTERNAL == 0 && self.captures.is_capturing(&r.stream.0) {
                    self.keep_for_good(tid, record);
                }
                self.captures.record(r.event.0, r.stream.0, r.flags);
                self.keep_last(tid, (record.body.kind(), r.event.0), record);
            }
            Body::StreamWait(w) if w.result.is_success() && !w.api.is_context_wide() => {
                let before = self.captures.is_capturing(&w.stream.0);
                self.captures.wait(w.stream.0, w.event.0, w.flags);
                if !before && self.captures.is_capturing(&w.stream.0) {
                    self.keep_for_good(tid, record);
                } else {
                    self.count((record.body.kind(), w.api.0, 0));
                }
            }
            Body::Capture(c) if c.result.is_success() => {
                if c.begin != 0 {
                    self.captures.begin(c.stream.0);
                } else {
                    self.captures.end(c.stream.0);
                }
                self.keep_for_good(tid, record);
            }
            Body::PoolCreate(c) if c.result.is_success() && c.pool != 0 => {
                self.keep_last_or_leak(tid, (record.body.kind(), c.pool), record)
            }
            Body::PoolDestroy(d) if d.result.is_success() => {
                if let Some(old) = self.keyed.remove(&(53, d.pool)) {
                    self.release(old);
                }
                self.end_keyed((54, d.pool), record, 0);
            }
            Body::PoolUsage(u) => self.keep_last(tid, (record.body.kind(), u.pool), record),
            // A framework's block at a workspace's address is the library's, however long ago
            // the library was handed it.
            Body::LibWorkspace(w) => self.keep_last(tid, (record.body.kind(), w.ptr), record),
            Body::ExtSemaphore(e) if e.result.is_success() && e.api == Api::cuImportExternalSemaphore => {
                self.keep_last_or_leak(tid, (record.body.kind(), e.semaphore), record)
            }
            Body::ExtSemaphore(e) if e.result.is_success() && e.api == Api::cuDestroyExternalSemaphore => {
                self.end_keyed((64, e.semaphore), record, 0)
            }
            Body::GraphMem(m) => {
                let (allocs, frees) = self.graph_pending.entry(m.exec).or_default();
                allocs.extend_from_slice(&m.allocs.0);
                frees.extend_from_slice(&m.frees.0);
                self.keep_for_good(tid, record);
            }
            Body::GraphExec(g) => {
                self.graph_instantiated(g);
                self.keep_for_good(tid, record);
            }
            Body::GraphEvents(_)
            | Body::GraphUpdate(_)
            | Body::GraphAccesses(_)
            | Body::GraphNode(_)
            | Body::GraphEdges(_)
            | Body::GraphMemNodes(_) => self.keep_for_good(tid, record),
            Body::Launch(l) if l.api.op() == Some(Op::GraphLaunch) && l.result.is_success() => {
                let keep = match self.graph_execs.get(&l.function) {
                    Some(&keep) => keep,
                    None => !self.graph_nodes.is_empty(),
                };
                if keep {
                    self.keep_for_good(tid, record);
                } else {
                    self.count((record.body.kind(), l.api.0, 0));
                }
            }
            Body::Alloc(a) => self.alloc(tid, record, a),
            Body::Free(f) => self.free(tid, record, f),
            Body::Map(m) if m.result.is_success() => {
                self.history.event();
                let seq = self.keep(tid, record, 0);
                if let Some(old) = self.mappings.map(
                    m.ptr.0,
                    Mapping {
                        handle: m.handle,
                        size: m.size,
                    },
                ) {
                    self.history.event();
                    self.unmapped(old);
                }
                match self.live.get_mut(&(Space::Physical, m.handle)) {
                    Some(g) => {
                        g.mappings += 1;
                        g.seqs.push(seq);
                    }
                    None => self.release(seq),
                }
            }
            Body::Unmap(u) if u.result.is_success() => {
                let seq = self.keep(tid, record, 0);
                for gone in self.mappings.unmap(u.ptr.0, u.size) {
                    self.history.event();
                    if let Some(g) = self.live.get_mut(&(Space::Physical, gone.handle)) {
                        if let Some(k) = self.kept.get_mut(&seq) {
                            k.refs += 1;
                        }
                        g.seqs.push(seq);
                    }
                    self.unmapped(gone);
                }
                self.release(seq);
            }
            other => {
                let ok = result_of(other);
                self.count((other.kind(), api_of(other).0, failed(ok)));
            }
        }
    }

    /// A framework record (kinds 70 to 76): the last complete state of each framework stays,
    /// with the states still being written ([`frameworks`]).
    fn framework(&mut self, tid: u32, record: &Record<'_>) {
        match self.frameworks.step(record) {
            frameworks::Step::Ignore => {}
            frameworks::Step::Count => self.count((record.body.kind(), 0, 0)),
            frameworks::Step::Keep => {
                let seq = self.keep(tid, record, 0);
                for gone in self.frameworks.kept(record, seq) {
                    self.release(gone);
                }
            }
        }
    }

    /// Keeps a creation record until its destruction; a second creation at the same handle
    /// without one keeps the first for good (the analyzer reports it as never destroyed).
    fn keep_last_or_leak(&mut self, tid: u32, key: (u8, u64), record: &Record<'_>) {
        let seq = self.keep(tid, record, 0);
        if let Some(old) = self.keyed.insert(key, seq) {
            self.permanent.push(old);
        }
    }

    fn graph_instantiated(&mut self, g: &GraphExec) {
        let (allocs, frees) = self.graph_pending.remove(&g.exec).unwrap_or_default();
        if !g.result.is_success() || g.exec == 0 {
            return;
        }
        let memory_nodes = allocs.len() / 3 + frees.len();
        let (lasting, _) = GraphMem::lasting(&allocs, &frees);
        self.graph_memory.extend(lasting.iter().map(|t| t[0]));
        self.graph_execs.insert(g.exec, memory_nodes > 0 || g.nodes_known == 0);
    }
}

impl Compactor {
    /// Ends the history: the kept records (with the stacks and Python code they name) and the
    /// checkpoint record for segment `segment`.
    pub fn finish(mut self, segment: u64) -> Compacted {
        // Stacks and code objects are kept only where a kept record names them.
        let mut named = Vec::new();
        for k in self.kept.values() {
            if let Some((r, _)) = decode_alone(&k.bytes) {
                if !matches!(r.body, Body::Stack(_) | Body::PyFrames(_) | Body::PyCode(_)) {
                    stacks_of(&r.body, &mut named);
                }
            }
        }
        named.extend(self.history.stacks());
        let named: HashSet<StackId> = named.into_iter().collect();
        let mut codes = HashSet::new();
        let stacks: Vec<(StackId, Vec<u64>)> = self.stacks.drain().collect();
        for (id, seqs) in stacks {
            if named.contains(&id) {
                for seq in &seqs[1..] {
                    if let Some((
                        Record {
                            body: Body::PyFrames(p),
                            ..
                        },
                        _,
                    )) = self.kept.get(seq).and_then(|k| decode_alone(&k.bytes))
                    {
                        codes.extend(p.frames.0.chunks_exact(3).map(|t| t[1]));
                    }
                }
            } else {
                seqs.into_iter().for_each(|s| self.release(s));
            }
        }
        let py: Vec<(u64, u64)> = self.py_codes.drain().collect();
        for (id, seq) in py {
            if !codes.contains(&id) {
                self.release(seq);
            }
        }
        let kept: Vec<(u32, u64, Vec<u8>)> = self.kept.into_iter().map(|(seq, k)| (k.tid, seq, k.bytes)).collect();
        let mut counts = Vec::with_capacity(self.dropped.len() * 4);
        for ((kind, api, flags), n) in self.dropped {
            counts.extend_from_slice(&[u64::from(kind), u64::from(api), flags, n]);
        }
        let history = self.history.records();
        Compacted {
            history,
            checkpoint: Checkpoint {
                as_of: self.last.0 .0,
                segment,
                kept: kept.len() as u64,
                dropped: self.dropped_total,
                missing: self.missing,
                counts: Addrs(Cow::Owned(counts)),
            },
            time_ns: self.last.1,
            kept,
        }
    }
}

/// Whether a record's call succeeded (records without a result count as successes).
fn result_of(body: &Body<'_>) -> bool {
    let mut ok = true;
    body.visit(&mut |name, v| {
        if let ("result", Value::U(r)) = (name, v) {
            ok = r == 0;
        }
    });
    ok
}
