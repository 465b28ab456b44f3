//! The model: one trace replayed in sequence order, keeping only what is live.
//!
//! Memory follows the live allocations, live mappings and distinct stacks, never the length of
//! the trace: freed allocations are forgotten (apart from a bounded list of recent frees that
//! names the victim of a double free), and leaks at context teardown and bad frees are folded
//! into groups keyed by stack as they happen.
//!
//! What the replay decides (docs/report.md has the user's version):
//! - failed calls (`result != 0`) are never allocations or frees;
//! - a context torn down (`cuCtxDestroy`, the last `cuDevicePrimaryCtxRelease`, a
//!   `cuDevicePrimaryCtxReset`) takes its allocations with it: they are leaks *at teardown*;
//! - a VMM physical handle holds memory until it is released and all its mappings are gone;
//!   `cuMemRetainAllocationHandle` adds a reference that needs a release of its own (NCCL
//!   retains and releases handles to free and to inspect its buffers); an IPC handle opened
//!   again, or a pool pointer imported again, maps the same address once more and needs a
//!   close (free) of its own;
//! - a free of a pointer that is not live is a bad free (unknown pointer, double free, or a
//!   pointer of another family);
//! - whatever is live at the end of the trace (after the `Exit` record, if any) is live *at
//!   exit*;
//! - a memory pool created or imported and not destroyed by then was never destroyed;
//! - an allocation node of a CUDA graph is no memory; each launch of an instantiated graph
//!   allocates what its allocation nodes say (kind `graph`, at the nodes' fixed addresses),
//!   unless a free node of the same graph frees it within the launch, and frees what its free
//!   nodes of other graphs' memory say; with auto-free on launch, a launch first frees what
//!   the graph's previous launch left allocated ([`graphs`]).
//!
//! What it decides for memory (an allocation made, one gone, a failed allocation, a mapping, a
//! context torn down) it reports as it goes to an [`Observer`] ([`crate::decision`]): the replay
//! driver ([`crate::replay`]) passes it on to the memory pass and the stream-ordering model,
//! which the model knows nothing of.
//!
//! ```
//! use gpuleak_analyzer::model::{LeakAt, Model};
//! use gpuleak_format::*;
//!
//! let mut model = Model::new();
//! let alloc = Alloc {
//!     api: Api::cuMemAlloc_v2, via: Api::NONE, result: CuResult::SUCCESS, ctx: Ctx(1),
//!     stream: Stream(0), ptr: Ptr(0x7000), size: 512, stack: StackId(1), aux: 0,
//! };
//! model.apply(1, &Record { seq: Seq(1), time_ns: 0, body: alloc.into() });
//! let replay = model.finish();
//! assert_eq!(replay.leaks[0].bytes, 512);
//! assert_eq!(replay.leaks[0].at, LeakAt::Exit);
//! ```

mod checkpoint;
mod found;
mod graphs;
mod mempools;

mod pools;
mod recent;

#[cfg(test)]
mod tests;

use crate::aside_hash::AsideHashMap;
use crate::hash::HashMap;

use gpuleak_format::{
    Alloc, Api, Body, CtxDestroy, DecodeError, Free, Launch, Map, MemKind, MemLocation, Ptr, Record, Seq, StackId,
    Stream, Unmap,
};

pub use crate::decision::{HOST, UNKNOWN_DEVICE};
pub use crate::modules::{file_name, Module, Modules};
pub use found::{AllocSite, Allocation, BadFree, BadFreeCause, Counts, LeakAt, LeakGroup, LeakReplay, Process, Rank};
pub use gpuleak_format::space::{is_owned_memory, Space};
pub use mempools::PoolLeak;
pub use recent::Freed;

use crate::apis::{context_wide, is_graph_launch};
use crate::decision::{Decision, Observer, Unobserved};
use crate::frameworks::state::Handle;
use crate::frameworks::DriverAlloc;
use gpuleak_format::captures::Captures;
use gpuleak_format::contexts::Contexts;
use gpuleak_format::vmm::{Mapping, Mappings};
use graphs::Graphs;
use mempools::MemPools;
use pools::Pools;
use recent::RecentFrees;

/// How many recent frees are remembered to explain double frees.
pub const RECENT_FREES: usize = gpuleak_format::checkpoint::RECENT_FREES;
/// How many decoding errors are kept with their text (the rest are only counted).
const KEPT_ERRORS: usize = 16;

/// A live allocation with the state frees and mappings need.
#[derive(Debug, Clone, Copy)]
struct Live {
    alloc: Allocation,
    /// References not yet released: a VMM handle's creation (or import) and each retain of it
    /// (`cuMemRetainAllocationHandle`) need one `cuMemRelease` each; 0: released, alive while
    /// mapped. Each opening of an IPC handle and each import of a pool pointer needs its own
    /// close or free. Always 1 for a live allocation of another family.
    holds: u32,
    /// Retains of a VMM handle, or openings (imports) beyond the first.
    retains: u32,
    /// Live mappings of a VMM handle.
    mappings: u64,
    /// Device of its memory (only worked out for an observer that wants it).
    device: i32,
}

type LeakKey = (StackId, MemKind, bool, bool);
type BadFreeKey = (Api, StackId, u8, StackId, bool);

/// Replays records; see the module documentation.
#[derive(Debug)]
pub struct Model {
    /// Live allocations; the newest set aside ([`AsideHashMap`]), so that churn at one address
    /// costs no hashing.
    live: AsideHashMap<(Space, u64), Live>,
    live_bytes: u64,
    recent: RecentFrees,
    mappings: Mappings,
    contexts: Contexts,
    /// Streams under capture (their stream-ordered allocations are graph nodes, not memory),
    /// including those that joined a capture by waiting for one of its events.
    capturing: Captures<Stream>,
    /// Graphs' allocation nodes and executable graphs.
    graphs: Graphs,
    leaks: HashMap<LeakKey, LeakGroup>,
    bad_frees: Vec<BadFree>,
    bad_free_index: HashMap<BadFreeKey, usize>,
    /// Which stacks belong to caching allocators (for an observer that wants it).
    pools: Pools,
    /// Stream-ordered memory pools the program created, alive now.
    mem_pools: MemPools,
    replay: LeakReplay,
}

impl Default for Model {
    fn default() -> Self {
        Model::new()
    }
}

impl Model {
    /// An empty model.
    pub fn new() -> Model {
        Model {
            live: AsideHashMap::default(),
            live_bytes: 0,
            recent: RecentFrees::new(RECENT_FREES),
            mappings: Mappings::default(),
            contexts: Contexts::default(),
            capturing: Captures::default(),
            graphs: Graphs::default(),
            leaks: HashMap::default(),
            bad_frees: Vec::new(),
            bad_free_index: HashMap::default(),
            pools: Pools::default(),
            mem_pools: MemPools::default(),
            replay: LeakReplay::default(),
        }
    }

    /// Replays one record (records must come in sequence order), alone.
    pub fn apply(&mut self, tid: u32, record: &Record<'_>) {
        self.apply_observed(tid, record, &mut Unobserved);
    }

    /// Replays one record (records must come in sequence order), reporting to `observer`
    /// what it decided the record means for memory ([`crate::decision`]).
    pub fn apply_observed<O: Observer>(&mut self, tid: u32, record: &Record<'_>, observer: &mut O) {
        self.replay.counts.records += 1;
        match &record.body {
            Body::ProcessInfo(p) => {
                self.replay.process = Some(Process {
                    pid: p.pid,
                    ppid: p.ppid,
                    exe: p.exe.to_string(),
                    args: p.args.iter().map(|a| a.to_string()).collect(),
                    start_unix_ns: p.start_unix_ns,
                    hostname: p.hostname.to_string(),
                    rank: None,
                });
            }
            Body::Rank(r) => {
                if let Some(p) = &mut self.replay.process {
                    let known = |v: u64| (v != gpuleak_format::Rank::UNKNOWN).then_some(v);
                    p.rank = Some(Rank {
                        rank: r.rank,
                        local_rank: known(r.local_rank),
                        world_size: known(r.world_size),
                        launcher: r.launcher.to_string(),
                    });
                }
            }
            Body::Module(m) => self.replay.modules.insert(Module {
                base: m.base,
                start: m.start,
                end: m.end,
                path: m.path.to_string(),
                build_id: m.build_id.to_vec(),
            }),
            Body::Stack(s) => {
                self.replay.stacks.insert(s.id, s.frames.0.to_vec());
            }
            Body::PyCode(c) => self.replay.modules.python.insert(
                c.id,
                crate::symbolize::python::PyCode {
                    python: c.python,
                    first_line: c.first_line,
                    filename: c.filename.to_string(),
                    qualname: c.qualname.to_string(),
                    line_table: c.line_table.to_vec(),
                },
            ),
            Body::PyFrames(p) => {
                // Written right after the stack's own record; a stack never seen stays without.
                if let Some(native) = self.replay.stacks.get_mut(&p.stack) {
                    *native = crate::symbolize::python::interleave(native, &p.frames.0);
                }
            }
            Body::Exit(e) => {
                self.replay.exited = true;
                self.replay.exit_code = (e.how == 1).then_some(e.code);
            }
            Body::Lost(l) if l.reason == 2 => {
                self.replay.unknown_variants = self.replay.unknown_variants.saturating_add(l.count);
            }
            Body::Lost(l) if l.reason == 3 => {
                self.replay.nested_calls = self.replay.nested_calls.saturating_add(l.count);
            }
            Body::Lost(l) => self.replay.lost_events = self.replay.lost_events.saturating_add(l.count),
            Body::Checkpoint(c) => self.checkpoint(c),
            Body::SiteHistory(h) => self.site_history(h, observer),
            Body::Alloc(a) => self.alloc(tid, record, a, observer),
            Body::Free(f) => self.free(tid, record.seq, f, observer),
            Body::Map(m) => self.map(m, observer),
            Body::Unmap(u) => self.unmap(u, observer),
            Body::PoolCreate(c) => self.mem_pools.create(tid, record.seq, c),
            Body::PoolDestroy(d) => self.mem_pools.destroy(d),
            Body::PoolUsage(u) => self.mem_pools.usage(u.pool, u.reserved),
            Body::CtxCreate(c) if c.result.is_success() => self.contexts.create(c),
            Body::CtxDestroy(d) if d.result.is_success() => self.destroy_context(d, observer),
            Body::GraphMem(m) => self.graphs.listed(m),
            Body::GraphExec(g) => self.graphs.instantiated(g),
            Body::Launch(l) if is_graph_launch(l.api) && l.result.is_success() => {
                self.launch_graph(tid, record, l, observer)
            }
            Body::Capture(c) if c.result.is_success() => {
                if c.begin != 0 {
                    self.capturing.begin(c.stream);
                } else {
                    self.capturing.end(c.stream);
                }
            }
            Body::EventRecord(r) if r.result.is_success() => self.capturing.record(r.event.0, r.stream, r.flags),
            // A context's wait is no stream's (and never on an event of a capture: refused).
            Body::StreamWait(w) if w.result.is_success() && !context_wide(w.api) => {
                self.capturing.wait(w.stream, w.event.0, w.flags)
            }
            Body::StreamDestroy(d) if d.result.is_success() => self.capturing.forget(d.stream),
            Body::FrameworkState(_)
            | Body::FrameworkSegment(_)
            | Body::FrameworkBlocks(_)
            | Body::FrameworkFrames(_)
            | Body::FrameworkStats(_)
            | Body::FrameworkOom(_)
            | Body::FrameworkEnd(_)
            | Body::LibWorkspace(_) => {
                if let Some(id) = self.replay.frameworks.apply(&record.body) {
                    let driver = self.driver_allocations();
                    // JAX's buffers are placed in XLA's regions, which are the driver
                    // allocations whose stacks are XLA's.
                    let (modules, stacks) = (&self.replay.modules, &self.replay.stacks);
                    let owns = |framework: &str, a: &DriverAlloc| {
                        crate::owner::Pool::of_framework(framework).is_some_and(|pool| {
                            let frames = stacks.get(&a.stack).map_or(&[][..], Vec::as_slice);
                            crate::owner::stack_in_pool(frames, modules, pool)
                        })
                    };
                    self.replay.frameworks.complete_placing(id, record.seq.0, driver, owns);
                }
            }
            _ => {}
        }
    }

    /// The device memory live now, for a framework's state: every owned allocation but pinned
    /// host memory, a VMM physical handle once per mapping (at the mapping's address) or once
    /// alone when it is mapped nowhere.
    fn driver_allocations(&self) -> Vec<DriverAlloc> {
        let mut mapped: HashMap<u64, Vec<(u64, u64)>> = HashMap::default();
        for (address, m) in self.mappings.iter() {
            mapped.entry(m.handle).or_default().push((address, m.size));
        }
        let mut driver = Vec::new();
        for l in self.live.values() {
            let a = &l.alloc;
            if !is_owned_memory(a.kind) || a.kind == MemKind::Host {
                continue;
            }
            // The context's device (a VMM handle's location, when it differs, is not kept).
            let device = self.contexts.device(a.ctx);
            if Space::of(a.kind) != Space::Physical {
                driver.push(DriverAlloc {
                    device,
                    ..DriverAlloc::at(a.ptr.0, a.size, a.stack)
                });
                continue;
            }
            let handle = |mapped| Handle {
                id: a.ptr.0,
                bytes: a.size,
                mapped,
            };
            match mapped.get(&a.ptr.0) {
                Some(at) => driver.extend(at.iter().map(|&(ptr, size)| DriverAlloc {
                    ptr,
                    size,
                    stack: a.stack,
                    handle: Some(handle(true)),
                    device,
                })),
                None => driver.push(DriverAlloc {
                    ptr: 0,
                    size: a.size,
                    stack: a.stack,
                    handle: Some(handle(false)),
                    device,
                }),
            }
        }
        driver
    }

    /// Notes a decoding error met while reading the trace.
    pub fn decode_error(&mut self, error: DecodeError) {
        self.replay.error_count += 1;
        if self.replay.errors.len() < KEPT_ERRORS {
            self.replay.errors.push(error);
        }
    }

    /// Owned bytes live now.
    pub fn live_bytes(&self) -> u64 {
        self.live_bytes
    }

    /// Allocations live now, of every family.
    pub fn live_allocations(&self) -> usize {
        self.live.len()
    }

    /// Ends the replay: everything still live is live at exit.
    pub fn finish(mut self) -> LeakReplay {
        // By address where allocations share a sequence number, so that no hash order shows.
        let mut live: Vec<((Space, u64), Live)> = self.live.drain().collect();
        live.sort_by_key(|(k, l)| (l.alloc.seq, *k));
        // What the framework's allocator held at its last state is its cache or its tensors,
        // which the framework's own findings judge, not a leak of the driver's view.
        // An allocation made after that state at a segment's old address (the framework gave
        // the segment back, something else got the address) is not the framework's.
        let held = self.replay.frameworks.held_by_framework().unwrap_or_default();
        for (_, l) in live {
            let by_address = match Space::of(l.alloc.kind) {
                Space::Physical => &held.handles,
                _ => &held.addresses,
            };
            let (ptr, size) = (l.alloc.ptr.0, l.alloc.size);
            let held_now = l.alloc.seq.0 < held.seq;
            // A reserved range that holds a segment (PyTorch's expandable segments) is the
            // framework's too, though not memory.
            let reserve =
                l.alloc.kind == MemKind::VmmReserve && held.addresses.iter().any(|&s| s.wrapping_sub(ptr) < size);
            let framework = held_now && ((by_address.contains(&ptr) && is_owned_memory(l.alloc.kind)) || reserve);
            self.leak(&l, LeakAt::Exit, framework);
        }
        let mut leaks: Vec<LeakGroup> = self.leaks.into_values().collect();
        // Largest first, then the earliest; groups alike in both by their key (stack, family,
        // teardown, framework's), so that no hash order shows.
        leaks.sort_by(|a, b| {
            let key = |g: &LeakGroup| (g.first.seq, g.stack.0, g.kind, g.at != LeakAt::Exit, g.framework);
            b.bytes.cmp(&a.bytes).then_with(|| key(a).cmp(&key(b)))
        });
        self.replay.leaks = leaks;
        self.replay.bad_frees = self.bad_frees;
        self.replay.pool_leaks = self.mem_pools.finish();
        self.replay
    }

    fn alloc<O: Observer>(&mut self, tid: u32, record: &Record<'_>, a: &Alloc, observer: &mut O) {
        if a.api == Api::cuMemRetainAllocationHandle {
            if a.result.is_success() {
                self.replay.counts.retains += 1;
                self.retain((Space::Physical, a.ptr.0));
            }
            return;
        }
        // Looked up once: at every allocation.
        let family = a.api.mem_kind();
        if family == Some(MemKind::Graph) {
            // A node added to a graph by hand: no memory, and a refused one no failed
            // allocation.
            if a.result.is_success() {
                self.replay.counts.graph_allocations += 1;
                self.graphs.node(a);
            }
            return;
        }
        if !a.result.is_success() {
            self.replay.counts.failed_allocations += 1;
            if let Some(kind) = family {
                let device = if observer.wants_memory() {
                    device_of(&self.contexts, kind, a)
                } else {
                    0
                };
                observer.decided(Decision::Failed {
                    api: a.api,
                    result: a.result,
                    kind,
                    size: a.size,
                    stack: a.stack,
                    device,
                });
            }
            return;
        }
        let Some(kind) = family else { return };
        if kind == MemKind::Async && self.capturing.is_capturing(&a.stream) {
            self.replay.counts.graph_allocations += 1;
            self.graphs.node(a);
            return;
        }
        let key = (Space::of(kind), a.ptr.0);
        let again = match kind {
            // An import that names a handle already held (this process's own export) is one
            // more reference to it.
            MemKind::VmmImport | MemKind::Multicast => self.live.contains_key(&key),
            // The driver hands out the address it already mapped, counting one more reference
            // (an IPC handle opened again in the same context; a pool pointer imported again).
            MemKind::Ipc | MemKind::PoolImport => self.live.get(&key).is_some_and(|l| l.alloc.kind == kind),
            _ => false,
        };
        if again {
            if key.0 == Space::Physical {
                self.replay.counts.retains += 1;
            }
            self.retain(key);
            return;
        }
        self.make_room(key, observer);
        let (device, pool) = if observer.wants_memory() {
            let device = device_of(&self.contexts, kind, a);
            let pool = is_owned_memory(kind) && self.pools.is_pool(a.stack, &self.replay.stacks, &self.replay.modules);
            (device, pool)
        } else {
            (0, false)
        };
        // Written from the record where it is kept, field by field: an `Allocation` built on
        // the stack and copied there is read back in loads wider than the stores that just
        // made it, which the processor does not forward (the costliest instructions of the
        // leak model at every allocation).
        let l = new_live(&mut self.live, key, device);
        let alloc = &mut l.alloc;
        alloc.kind = kind;
        alloc.api = a.api;
        alloc.via = a.via;
        alloc.ptr = a.ptr;
        alloc.size = a.size;
        alloc.stack = a.stack;
        alloc.seq = record.seq;
        alloc.time_ns = record.time_ns;
        alloc.ctx = a.ctx;
        alloc.stream = a.stream;
        alloc.tid = tid;
        observer.decided(Decision::Allocated {
            allocation: &l.alloc,
            device,
            pool,
        });
        self.count_live(kind, a.size, record.time_ns);
    }

    /// A new allocation at `key`: counted; an allocation still live there lost a free the
    /// trace missed (without auto-free, the driver also refuses to launch a graph over memory
    /// its last launch left allocated).
    #[inline(always)]
    fn make_room<O: Observer>(&mut self, key: (Space, u64), observer: &mut O) {
        self.replay.counts.allocations += 1;
        if let Some(old) = self.live.remove(&key) {
            self.replay.counts.missed_frees += 1;
            self.forget(&old, observer);
        }
        self.recent.remove(key);
    }

    /// Makes `alloc` live at `key`, counting its bytes (and the peak) when it is owned memory.
    fn hold(&mut self, key: (Space, u64), alloc: &Allocation, device: i32) {
        new_live(&mut self.live, key, device).alloc = *alloc;
        self.count_live(alloc.kind, alloc.size, alloc.time_ns);
    }

    /// An allocation of `size` bytes of `kind` made live at `time_ns`: counted, with the peak,
    /// when it is owned memory.
    #[inline(always)]
    fn count_live(&mut self, kind: MemKind, size: u64, time_ns: u64) {
        if is_owned_memory(kind) {
            self.live_bytes = self.live_bytes.saturating_add(size);
            if self.live_bytes > self.replay.peak_bytes {
                self.replay.peak_bytes = self.live_bytes;
                self.replay.peak_time_ns = time_ns;
            }
        }
    }

    fn free<O: Observer>(&mut self, tid: u32, seq: Seq, f: &Free, observer: &mut O) {
        let ok = f.result.is_success();
        let kind = f.api.mem_kind();
        if kind == Some(MemKind::Async) && self.capturing.is_capturing(&f.stream) {
            // A free node of the graph being captured, not a free.
            return;
        }
        if ok {
            self.replay.counts.frees += 1;
        } else {
            self.replay.counts.failed_frees += 1;
        }
        let Some(kind) = kind else { return };
        // Freeing NULL is a documented no-op.
        if f.ptr.0 == 0 {
            return;
        }
        let space = Space::of(kind);
        let key = (space, f.ptr.0);
        let cause = match self.live.get_mut(&key) {
            Some(l) if l.holds == 0 => BadFreeCause::DoubleFree(Freed {
                site: l.alloc.site(),
                free_stack: StackId::NONE,
            }),
            Some(l) if ok => {
                l.holds -= 1;
                if l.holds > 0 || (space == Space::Physical && l.mappings > 0) {
                    // Still retained (or opened again), or released but alive until the last
                    // unmap.
                } else {
                    self.release(key, f.stack, observer);
                }
                return;
            }
            // A failed free of a live pointer (a wrong context, say) frees nothing.
            Some(_) => return,
            None => match self.recent.get(key) {
                Some(freed) => BadFreeCause::DoubleFree(*freed),
                // Memory a graph's allocation node names, freed outside the graph (allowed: a
                // graph's allocation may outlive it), where the trace does not say which
                // launch allocated it (a graph whose memory nodes are unknown).
                None if ok && space == Space::Device && self.graphs.site(f.ptr.0).is_some() => {
                    self.replay.counts.graph_frees += 1;
                    return;
                }
                None => self.other_family(space, f.ptr.0),
            },
        };
        self.bad_free(tid, seq, f, cause);
    }

    /// A successful launch of an executable graph (`l.function`): with auto-free on launch,
    /// frees what its last launch left allocated; then allocates what its allocation nodes
    /// say and frees what its free nodes of other graphs' memory say.
    fn launch_graph<O: Observer>(&mut self, tid: u32, record: &Record<'_>, l: &Launch<'_>, observer: &mut O) {
        let Some(exec) = self.graphs.exec(l.function) else {
            if self.graphs.any_nodes() {
                self.replay.counts.unknown_graph_launches += 1;
            }
            return;
        };
        if exec.unknown {
            self.replay.counts.unknown_graph_launches += 1;
            return;
        }
        if exec.memory_nodes == 0 {
            return;
        }
        self.replay.counts.graph_launches += 1;
        let graph_memory = |live: &AsideHashMap<(Space, u64), Live>, addr: u64| {
            live.get(&(Space::Device, addr))
                .is_some_and(|l| l.alloc.kind == MemKind::Graph)
        };
        if exec.auto_free {
            for node in &exec.allocs {
                if graph_memory(&self.live, node.addr) {
                    self.graph_free(node.addr, observer);
                }
            }
        }
        for node in &exec.allocs {
            let key = (Space::Device, node.addr);
            self.make_room(key, observer);
            let site = self.graphs.site(node.addr).unwrap_or(exec.site);
            let alloc = Allocation {
                kind: MemKind::Graph,
                api: site.api,
                via: site.via,
                ptr: Ptr(node.addr),
                size: node.size,
                stack: site.stack,
                seq: record.seq,
                time_ns: record.time_ns,
                ctx: site.ctx,
                stream: l.stream,
                tid,
            };
            observer.decided(Decision::Allocated {
                allocation: &alloc,
                device: node.device,
                pool: false,
            });
            self.hold(key, &alloc, node.device);
        }
        for &addr in &exec.frees {
            if graph_memory(&self.live, addr) {
                self.graph_free(addr, observer);
            }
        }
    }

    /// Graph memory at `addr` freed by a launch (a free node, or auto-free on launch).
    fn graph_free<O: Observer>(&mut self, addr: u64, observer: &mut O) {
        if self.release((Space::Device, addr), StackId::NONE, observer) {
            self.replay.counts.frees += 1;
        }
    }

    /// The allocation live at `key` is gone: out of the live set and the byte counts, and
    /// remembered (with the stack of the free that released it) to name a later double free.
    /// False if nothing was live there.
    #[inline(always)]
    fn release<O: Observer>(&mut self, key: (Space, u64), free_stack: StackId, observer: &mut O) -> bool {
        // Read where it lies and dropped there: moved out first, the whole `Live` would go
        // through the stack at every free, in copies that the processor cannot forward from
        // the narrower stores that made them.
        let Some(l) = self.live.get(&key) else { return false };
        Self::forget_in(&mut self.live_bytes, l, observer);
        self.recent.insert(key, &l.alloc, free_stack);
        self.live.delete(&key);
        true
    }

    /// A pointer live in another space than `space`.
    fn other_family(&self, space: Space, ptr: u64) -> BadFreeCause {
        Space::ALL
            .iter()
            .filter(|s| **s != space)
            .find_map(|s| self.live.get(&(*s, ptr)))
            .map_or(BadFreeCause::NeverAllocated, |l| {
                BadFreeCause::WrongFamily(l.alloc.site())
            })
    }

    fn bad_free(&mut self, tid: u32, seq: Seq, f: &Free, cause: BadFreeCause) {
        let (cause_tag, alloc_stack) = match cause {
            BadFreeCause::NeverAllocated => (0, StackId::NONE),
            BadFreeCause::DoubleFree(freed) => (1, freed.site.stack),
            BadFreeCause::WrongFamily(site) => (2, site.stack),
        };
        let key = (f.api, f.stack, cause_tag, alloc_stack, f.result.is_success());
        if let Some(&i) = self.bad_free_index.get(&key) {
            self.bad_frees[i].count += 1;
            return;
        }
        self.bad_free_index.insert(key, self.bad_frees.len());
        self.bad_frees.push(BadFree {
            api: f.api,
            via: f.via,
            ptr: f.ptr,
            result: f.result,
            stack: f.stack,
            cause,
            count: 1,
            seq,
            tid,
        });
    }

    fn map<O: Observer>(&mut self, m: &Map, observer: &mut O) {
        if !m.result.is_success() {
            return;
        }
        let mapping = Mapping {
            handle: m.handle,
            size: m.size,
        };
        if let Some(old) = self.mappings.map(m.ptr.0, mapping) {
            self.unmapped(old, observer);
        }
        let mut device = 0;
        if let Some(l) = self.live.get_mut(&(Space::Physical, m.handle)) {
            l.mappings += 1;
            device = l.device;
        }
        observer.decided(Decision::Mapped {
            device,
            bytes: i128::from(m.size),
        });
    }

    fn unmap<O: Observer>(&mut self, u: &Unmap, observer: &mut O) {
        if !u.result.is_success() {
            return;
        }
        for gone in self.mappings.unmap(u.ptr.0, u.size) {
            self.unmapped(gone, observer);
        }
    }

    /// A mapping is gone: a released handle with no mappings left is freed.
    fn unmapped<O: Observer>(&mut self, gone: Mapping, observer: &mut O) {
        let key = (Space::Physical, gone.handle);
        observer.decided(Decision::Mapped {
            device: self.live.get(&key).map_or(0, |l| l.device),
            bytes: -i128::from(gone.size),
        });
        let Some(l) = self.live.get_mut(&key) else { return };
        l.mappings = l.mappings.saturating_sub(1);
        if l.holds == 0 && l.mappings == 0 {
            self.release(key, StackId::NONE, observer);
        }
    }

    fn destroy_context<O: Observer>(&mut self, d: &CtxDestroy, observer: &mut O) {
        let Some(ctx) = self.contexts.destroy(d) else { return };
        observer.decided(Decision::Teardown { api: d.api });
        let mut gone: Vec<(Space, u64)> = self
            .live
            .iter()
            .filter(|(_, l)| l.alloc.ctx == ctx)
            .map(|(k, _)| *k)
            .collect();
        // By address where allocations share a sequence number, so that no hash order shows.
        gone.sort_by_key(|k| (self.live.get(k).map(|l| l.alloc.seq), *k));
        let at = LeakAt::Teardown { api: d.api, ctx };
        for key in gone {
            if let Some(l) = self.live.remove(&key) {
                self.forget(&l, observer);
                if key.0 == Space::Physical {
                    self.mappings.forget_handle(key.1);
                }
                self.leak(&l, at, false);
            }
        }
    }

    /// One more reference to a live VMM handle (`cuMemRetainAllocationHandle`, or an import of
    /// a handle already held), IPC mapping or imported pool pointer. A handle the trace never
    /// saw is left alone: its releases are reported as they were before.
    fn retain(&mut self, key: (Space, u64)) {
        if let Some(l) = self.live.get_mut(&key) {
            l.holds = l.holds.saturating_add(1);
            l.retains = l.retains.saturating_add(1);
        }
    }

    /// Takes a no longer live allocation out of the live byte count.
    fn forget<O: Observer>(&mut self, l: &Live, observer: &mut O) {
        Self::forget_in(&mut self.live_bytes, l, observer);
    }

    /// [`forget`](Self::forget) with only the field it changes borrowed.
    #[inline(always)]
    fn forget_in<O: Observer>(live_bytes: &mut u64, l: &Live, observer: &mut O) {
        if is_owned_memory(l.alloc.kind) {
            *live_bytes -= l.alloc.size.min(*live_bytes);
        }
        observer.decided(Decision::Freed {
            allocation: &l.alloc,
            device: l.device,
        });
    }

    fn leak(&mut self, l: &Live, at: LeakAt, framework: bool) {
        let a = &l.alloc;
        let key = (a.stack, a.kind, at != LeakAt::Exit, framework);
        let g = self.leaks.entry(key).or_insert(LeakGroup {
            stack: a.stack,
            kind: a.kind,
            at,
            framework,
            bytes: 0,
            allocations: 0,
            first: *a,
            released_but_mapped: 0,
            retains: 0,
            releases_due: 0,
        });
        g.bytes = g.bytes.saturating_add(a.size);
        g.allocations += 1;
        if l.holds == 0 {
            g.released_but_mapped += 1;
        }
        if counts_references(a.kind) {
            g.retains += u64::from(l.retains);
            g.releases_due += u64::from(l.holds);
        }
        if a.seq < g.first.seq {
            g.first = *a;
        }
    }
}

/// Whether a family's pointers or handles count references, each released on its own: VMM
/// handles (creation, import, retains), IPC mappings and imported pool pointers (each opening
/// or import of the same memory).
fn counts_references(kind: MemKind) -> bool {
    matches!(Space::of(kind), Space::Physical | Space::Ipc) || kind == MemKind::PoolImport
}

/// The device an allocation's memory is on: its context's ([`HOST`] for pinned host memory,
/// [`UNKNOWN_DEVICE`] for a context the trace never named), or for `cuMemCreate` the location
/// its properties named, when the trace recorded it.
/// The live entry of a new allocation at `key` on `device` (replacing what was there), held
/// once, with no retains or mappings: written where it is kept, its allocation left for the
/// caller to write whole.
#[inline(always)]
fn new_live(live: &mut AsideHashMap<(Space, u64), Live>, key: (Space, u64), device: i32) -> &mut Live {
    let l = live.insert_in_place(key, || Live {
        alloc: Allocation::BLANK,
        holds: 0,
        retains: 0,
        mappings: 0,
        device: 0,
    });
    l.holds = 1;
    l.retains = 0;
    l.mappings = 0;
    l.device = device;
    l
}

#[inline]
fn device_of(contexts: &Contexts, kind: MemKind, a: &Alloc) -> i32 {
    if matches!(kind, MemKind::Host | MemKind::HostRegistered) {
        return HOST;
    }
    if a.api == Api::cuMemCreate {
        match MemLocation::decode(a.aux) {
            MemLocation::Device(device) => return device,
            MemLocation::Host => return HOST,
            MemLocation::Unknown => {}
        }
    }
    contexts.device(a.ctx).unwrap_or(UNKNOWN_DEVICE)
}
