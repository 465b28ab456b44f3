//! Record sequences made from arbitrary bytes, and the whole analysis run over them: the
//! fuzz target `fuzz/fuzz_targets/analyze.rs` and the test `analyzer/tests/any_records.rs`
//! share this file (`#[path]`).
//!
//! The trace decoder is fuzzed on its own (`fuzz/fuzz_targets/trace.rs`); this goes past it,
//! to what a trace that decodes can still say: frees of pointers never allocated, overlapping
//! allocations, sizes near `u64::MAX`, destroyed streams used again, sequence numbers out of
//! order, stacks and Python frames that name what no record described, and so on. Values are
//! drawn from small sets (a few pointers, streams, events, stacks) so that records meet each
//! other, with the extremes in each set. Every part of the analysis must take any of it
//! without a panic: the leak, memory and stream-ordering models, the report (text, JSON,
//! memory view, HTML page, collapsed stacks) and `gpuleak check` with a baseline.

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use gpuleak_analyzer::check::{self, Baseline, Config, Tolerance};
use gpuleak_analyzer::memory::TrackerOptions;
use gpuleak_analyzer::model::Model;
use gpuleak_analyzer::report::frames::ModuleOffsets;
use gpuleak_analyzer::report::memory::{collapsed, html, At};
use gpuleak_analyzer::report::{self, Options, Report};
use gpuleak_analyzer::{dump, TraceFile};
use gpuleak_format::{
    Addrs, Alloc, Api, BlockCursor, Body, Capture, Ctx, CtxCreate, CtxDestroy, CuResult, Event, EventCreate,
    EventDestroy, EventRecord, Exit, FileHeader, Free, GraphAccesses, GraphEdges, GraphEvents, GraphExec, GraphMem,
    GraphMemNodes, GraphNode, GraphUpdate, HostFn, Launch, Lost, Map, Mark, MemOp, Module, PoolCreate, PoolDestroy,
    PoolUsage, ProcessInfo, Ptr, PyCode, PyFrames, Record, Region, Seq, Snapshot, Stack, StackId, Stream, StreamCreate,
    StreamDestroy, StreamWait, Sync, Unmap, BLOCK_SIZE, FORMAT_VERSION, HEADER_SIZE,
};

/// Reads choices from the input bytes; zeros once they run out.
pub struct Bytes<'a> {
    data: &'a [u8],
    pos: usize,
}

impl<'a> Bytes<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Bytes { data, pos: 0 }
    }

    pub fn done(&self) -> bool {
        self.pos >= self.data.len()
    }

    pub fn byte(&mut self) -> u8 {
        let b = self.data.get(self.pos).copied().unwrap_or(0);
        self.pos += 1;
        b
    }

    /// A number below `n` (n > 0).
    pub fn below(&mut self, n: usize) -> usize {
        let v = if n > 256 {
            usize::from(self.byte()) << 8 | usize::from(self.byte())
        } else {
            usize::from(self.byte())
        };
        v % n
    }

    pub fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len())]
    }
}

const PTRS: [u64; 10] = [
    0,
    0x7000_0000,
    0x7000_0800,
    0x7000_1000,
    0x7000_1000 + 4096,
    0x7001_0000,
    0x2_0000_0000,
    u64::MAX / 2,
    u64::MAX - 0xfff,
    u64::MAX,
];
const SIZES: [u64; 12] = [
    0,
    1,
    256,
    2048,
    4096,
    1 << 20,
    1 << 32,
    1 << 40,
    u64::MAX / 2,
    u64::MAX - 1,
    u64::MAX,
    3,
];
const CTXS: [u64; 4] = [0, 0x1000, 0x2000, u64::MAX];
const STREAMS: [u64; 7] = [0, 1, 2, 0x10, 0x20, 0x30, u64::MAX];
const EVENTS: [u64; 5] = [0, 0x100, 0x200, 0x300, u64::MAX];
const RESULTS: [u32; 8] = [0, 0, 0, 0, 2, 1, 700, 999];
const DEVICES: [i32; 6] = [-2, -1, 0, 1, 7, i32::MAX];
const CODE: [u64; 8] = [
    0,
    0x40_1000,
    0x40_1010,
    0x40_2000,
    0x7f00_0000_1000,
    0x7f00_0000_2000,
    0xffff_ffff_ffff_fff0,
    u64::MAX,
];
const NAMES: [&str; 6] = ["", "step", "epoch", "a/b", "é", "cuMemAlloc_v2"];
const PATHS: [&str; 6] = [
    "",
    "/usr/lib/libcuda.so.1",
    "/opt/app/app",
    "[vdso]",
    "/x/libtorch_cuda.so",
    "/nonexistent/lib.so",
];

impl Bytes<'_> {
    fn api(&mut self) -> Api {
        if self.byte() == 255 {
            return Api(u16::from(self.byte()) << 8 | u16::from(self.byte()));
        }
        self.pick(Api::ALL).0
    }
    fn result(&mut self) -> CuResult {
        CuResult(self.pick(&RESULTS))
    }
    fn ptr(&mut self) -> Ptr {
        Ptr(self.pick(&PTRS).wrapping_add(self.pick(&[0u64, 0, 8, 4095])))
    }
    fn size(&mut self) -> u64 {
        self.pick(&SIZES)
    }
    fn ctx(&mut self) -> Ctx {
        Ctx(self.pick(&CTXS))
    }
    fn stream(&mut self) -> Stream {
        Stream(self.pick(&STREAMS))
    }
    fn event(&mut self) -> Event {
        Event(self.pick(&EVENTS))
    }
    fn stack(&mut self) -> StackId {
        StackId(self.pick(&[0, 1, 2, 3, 4, u32::MAX]))
    }
    fn small(&mut self) -> u32 {
        self.pick(&[0, 1, 2, 3, u32::MAX])
    }
    fn name(&mut self) -> Cow<'static, str> {
        Cow::Borrowed(self.pick(&NAMES))
    }
    fn addrs(&mut self, from: &[u64]) -> Addrs<'static> {
        let n = self.below(6);
        Addrs(Cow::Owned((0..n).map(|_| self.pick(from)).collect()))
    }

    fn body(&mut self) -> Body<'static> {
        match self.below(40) {
            0 => ProcessInfo {
                pid: self.small(),
                ppid: self.small(),
                exe: self.name(),
                args: (0..self.below(3)).map(|_| self.name()).collect(),
                hostname: self.name(),
                shim_version: self.name(),
                unwinder: self.name(),
                stack_depth: self.small(),
                start_unix_ns: self.size(),
            }
            .into(),
            1 => Module {
                base: self.pick(&CODE),
                start: self.pick(&CODE),
                end: self.pick(&CODE),
                path: Cow::Borrowed(self.pick(&PATHS)),
                build_id: Cow::Owned((0..self.below(4)).map(|_| self.byte()).collect()),
            }
            .into(),
            2 | 3 => Stack {
                id: self.stack(),
                frames: self.addrs(&CODE),
            }
            .into(),
            4 => Exit {
                code: self.pick(&DEVICES),
                how: self.small(),
            }
            .into(),
            5 => Lost {
                count: self.size(),
                reason: self.small(),
            }
            .into(),
            6..=10 => Alloc {
                api: self.api(),
                via: self.api(),
                result: self.result(),
                ctx: self.ctx(),
                stream: self.stream(),
                ptr: self.ptr(),
                size: self.size(),
                stack: self.stack(),
                aux: self.size(),
            }
            .into(),
            11..=13 => Free {
                api: self.api(),
                via: self.api(),
                result: self.result(),
                stream: self.stream(),
                ptr: self.ptr(),
                size: self.size(),
                stack: self.stack(),
            }
            .into(),
            14 => Map {
                api: self.api(),
                result: self.result(),
                ptr: self.ptr(),
                size: self.size(),
                offset: self.size(),
                handle: self.ptr().0,
            }
            .into(),
            15 => Unmap {
                api: self.api(),
                result: self.result(),
                ptr: self.ptr(),
                size: self.size(),
            }
            .into(),
            16 => CtxCreate {
                api: self.api(),
                result: self.result(),
                ctx: self.ctx(),
                device: self.pick(&DEVICES),
                flags: self.size(),
            }
            .into(),
            17 => CtxDestroy {
                api: self.api(),
                result: self.result(),
                ctx: self.ctx(),
                device: self.pick(&DEVICES),
            }
            .into(),
            18 => StreamCreate {
                api: self.api(),
                result: self.result(),
                stream: self.stream(),
                flags: self.small(),
                priority: self.pick(&DEVICES),
                stack: self.stack(),
            }
            .into(),
            19 => StreamDestroy {
                api: self.api(),
                result: self.result(),
                stream: self.stream(),
            }
            .into(),
            20 => Sync {
                api: self.api(),
                result: self.result(),
                stream: self.stream(),
                event: self.event(),
                ctx: self.ctx(),
            }
            .into(),
            21 => StreamWait {
                api: self.api(),
                result: self.result(),
                stream: self.stream(),
                event: self.event(),
                flags: self.small(),
            }
            .into(),
            22 => match self.below(3) {
                0 => EventCreate {
                    api: self.api(),
                    result: self.result(),
                    event: self.event(),
                    flags: self.small(),
                    stack: self.stack(),
                }
                .into(),
                1 => EventDestroy {
                    api: self.api(),
                    result: self.result(),
                    event: self.event(),
                }
                .into(),
                _ => EventRecord {
                    api: self.api(),
                    result: self.result(),
                    event: self.event(),
                    stream: self.stream(),
                    flags: self.small(),
                }
                .into(),
            },
            23 => gpuleak_format::Copy {
                api: self.api(),
                result: self.result(),
                stream: self.stream(),
                dst: self.ptr(),
                src: self.ptr().0,
                bytes: self.size(),
                stack: self.stack(),
            }
            .into(),
            24 => Launch {
                api: self.api(),
                result: self.result(),
                stream: self.stream(),
                function: self.pick(&CODE),
                ptrs: self.addrs(&PTRS),
                stack: self.stack(),
            }
            .into(),
            25 => match self.below(3) {
                0 => HostFn {
                    api: self.api(),
                    result: self.result(),
                    stream: self.stream(),
                }
                .into(),
                1 => MemOp {
                    api: self.api(),
                    result: self.result(),
                    stream: self.stream().0,
                    // Waits, writes, flushes, barriers, reductions and unknown operations, on
                    // a few flags, with values and conditions that often match.
                    op: self.pick(&[0, 1, 2, 3, 4, 5, 6, 8, 9, u32::MAX]),
                    addr: self.pick(&[0, 0x5000_0000, 0x5000_0004, PTRS[0]]),
                    value: self.pick(&[0, 1, 2, u64::from(u32::MAX), u64::MAX]),
                    flags: self.pick(&[0, 1, 2, 3, 4, 1 << 30, 3 | 1 << 30, u32::MAX]),
                }
                .into(),
                _ => Capture {
                    api: self.api(),
                    result: self.result(),
                    stream: self.stream(),
                    begin: self.small(),
                    aux: self.size(),
                }
                .into(),
            },
            26 => match self.below(3) {
                0 => Mark {
                    name: self.name(),
                    value: self.size(),
                }
                .into(),
                1 => Region {
                    name: self.name(),
                    begin: self.small(),
                }
                .into(),
                _ => Snapshot {
                    id: u64::from(self.small()),
                    reason: self.name(),
                }
                .into(),
            },
            27 => PyCode {
                id: self.small(),
                python: self.pick(&[0x30a, 0x30b, 0x30c, 0x30d, 0, 0xffff]),
                first_line: self.small(),
                filename: self.name(),
                qualname: self.name(),
                line_table: Cow::Owned((0..self.below(12)).map(|_| self.byte()).collect()),
            }
            .into(),
            28 => PyFrames {
                stack: self.stack(),
                frames: self.addrs(&[0, 1, 2, 3, 6, 100, u64::MAX]),
            }
            .into(),
            29 => PoolUsage {
                pool: self.pick(&[0, 1, 2, u64::MAX]),
                device: self.pick(&DEVICES),
                reserved: self.size(),
                used: self.size(),
            }
            .into(),
            30 => PoolCreate {
                api: self.pick(&[Api::cuMemPoolCreate, Api::cuMemPoolImportFromShareableHandle, Api(999)]),
                via: self.pick(&[Api::NONE, Api::cudaMemPoolCreate]),
                result: self.result(),
                pool: self.pick(&[0, 1, 2, u64::MAX]),
                location_type: self.small(),
                location: self.pick(&DEVICES),
                max_size: self.size(),
                handle_types: self.small(),
                stack: self.stack(),
            }
            .into(),
            31 => PoolDestroy {
                api: self.pick(&[Api::cuMemPoolDestroy, Api(999)]),
                via: self.pick(&[Api::NONE, Api::cudaMemPoolDestroy]),
                result: self.result(),
                pool: self.pick(&[0, 1, 2, u64::MAX]),
                stack: self.stack(),
            }
            .into(),
            // Executable graphs named by the same values as kernel launches' functions, so
            // that some launches launch them.
            32 => GraphMem {
                exec: self.pick(&CODE),
                allocs: self.addrs(&[PTRS[0], PTRS[1], 0, 1, 4096, u64::MAX]),
                frees: self.addrs(&PTRS),
            }
            .into(),
            // Event nodes named by the same values as events, with nodes and owners drawn
            // from the same few values, so that updates find them.
            33 => GraphEvents {
                exec: self.pick(&CODE),
                records: self.addrs(&[EVENTS[1], EVENTS[2], 0, 1, 2, u64::MAX]),
                waits: self.addrs(&[EVENTS[1], EVENTS[3], 0, 1, 2]),
            }
            .into(),
            34 => GraphUpdate {
                api: self.pick(&[
                    Api::cuGraphExecUpdate_v2,
                    Api::cuGraphExecNodeSetParams,
                    Api::cuGraphNodeSetEnabled,
                    Api(999),
                ]),
                via: Api::NONE,
                result: self.result(),
                what: self.pick(&[0, 1, 2, 3, 4, 5, u32::MAX]),
                exec: self.pick(&CODE),
                node: self.pick(&[0, 1, 2, u64::MAX]),
                event: self.pick(&EVENTS),
                graph: self.pick(&[0, 1, u64::MAX]),
                listed: self.pick(&[0, 1, 2]),
            }
            .into(),
            35 => GraphAccesses {
                exec: self.pick(&CODE),
                nodes: self.addrs(&[
                    0,
                    1,
                    2,
                    PTRS[1],
                    PTRS[2],
                    GraphAccesses::encode(1, GraphAccesses::KERNEL),
                    GraphAccesses::encode(64, GraphAccesses::WRITE),
                    u64::MAX,
                ]),
            }
            .into(),
            36 => GraphNode {
                api: self.pick(&[
                    Api::cuLaunchKernel,
                    Api::cuMemsetD8Async,
                    Api::cuGraphAddMemcpyNode,
                    Api::cuGraphDestroy,
                ]),
                graph: self.pick(&[0, 1, u64::MAX]),
                node: self.pick(&[0, 1, 2]),
                kind: self.pick(&[0, 1, 2, u32::MAX]),
                stack: self.stack(),
            }
            .into(),
            // Edges between the same few node values as GraphAccesses entries name.
            37 => GraphEdges {
                exec: self.pick(&CODE),
                entries: self.addrs(&[GraphEdges::EDGE, GraphEdges::CHILD, 0, 1, 2, 3, u64::MAX]),
            }
            .into(),
            // Memory nodes named by the same few node values, at the addresses allocations use.
            38 => GraphMemNodes {
                exec: self.pick(&CODE),
                allocs: self.addrs(&[0, 1, 2, PTRS[0], PTRS[1], 64, u64::MAX]),
                frees: self.addrs(&[0, 1, 2, PTRS[0], PTRS[1], u64::MAX]),
            }
            .into(),
            _ => GraphExec {
                api: self.pick(&[Api::cuGraphInstantiateWithFlags, Api::cuGraphInstantiate_v2, Api(999)]),
                via: self.pick(&[Api::NONE, Api::cudaMallocAsync]),
                result: self.result(),
                exec: self.pick(&CODE),
                graph: self.pick(&[0, 1, u64::MAX]),
                flags: self.pick(&[0, 1, 3, u64::MAX]),
                alloc_nodes: self.small(),
                free_nodes: self.small(),
                nodes_known: self.pick(&[0, 1, 2]),
                stack: self.stack(),
            }
            .into(),
        }
    }
}

/// What one input asks for: the records of one or two processes (with the thread of each)
/// and the report's and check's settings.
pub struct Case {
    pub processes: Vec<Vec<(u32, Record<'static>)>>,
    pub memory: bool,
    pub at: Option<At>,
    pub top: Option<usize>,
    pub pool_as_leak: bool,
    pub max_leaked_bytes: Option<u64>,
    /// Also write the first process's records as a trace file and read it back the way the
    /// command line does (`gpuleak dump`, the pipelined replay).
    pub file: bool,
}

/// A training loop that keeps one allocation per step (`kind` even), or a device cut into
/// holes by freeing every other allocation, then an allocation larger than any hole failing
/// with out-of-memory (`kind` odd).
fn shape(kind: u8, steps: usize, size: u64) -> Vec<Body<'static>> {
    let alloc = |i: usize, result: u32, size: u64| -> Body<'static> {
        Alloc {
            api: Api::cuMemAlloc_v2,
            via: Api::NONE,
            result: CuResult(result),
            ctx: Ctx(0x1000),
            stream: Stream(0),
            ptr: Ptr(if result == 0 {
                0x9000_0000u64.wrapping_add((i as u64).wrapping_mul(size.max(1)))
            } else {
                0
            }),
            size,
            stack: StackId(1 + (kind as u32 >> 1) % 3),
            aux: 0,
        }
        .into()
    };
    let mut out = Vec::new();
    if kind & 1 == 0 {
        for i in 0..steps {
            out.push(
                Mark {
                    name: "step".into(),
                    value: i as u64,
                }
                .into(),
            );
            out.push(alloc(i, 0, size));
        }
    } else {
        for i in 0..steps {
            out.push(alloc(i, 0, size));
        }
        for i in (0..steps).step_by(2) {
            out.push(
                Free {
                    api: Api::cuMemFree_v2,
                    via: Api::NONE,
                    result: CuResult(0),
                    stream: Stream(0),
                    ptr: Ptr(0x9000_0000u64.wrapping_add((i as u64).wrapping_mul(size.max(1)))),
                    size: 0,
                    stack: StackId(0),
                }
                .into(),
            );
        }
        out.push(alloc(0, 2, size.saturating_mul(2)));
    }
    out
}

/// Reads a case from any bytes.
pub fn case(data: &[u8]) -> Case {
    let mut b = Bytes::new(data);
    let flags = b.byte();
    let at = match b.below(4) {
        0 => None,
        1 => Some(At { from: 1, to: None }),
        2 => Some(At { from: 1, to: Some(2) }),
        _ => Some(At { from: 3, to: Some(0) }),
    };
    let top = b.pick(&[None, Some(0), Some(1), Some(5)]);
    let max_leaked_bytes = b.pick(&[None, Some(0), Some(4096), Some(u64::MAX)]);
    let mut processes = vec![Vec::new()];
    let (mut seq, mut time) = (0u64, 0u64);
    while !b.done() {
        match b.below(64) {
            // A second process (at most two).
            0 if processes.len() < 2 => processes.push(Vec::new()),
            // Sequence numbers and times that go back, or jump.
            1 => seq = seq.wrapping_sub(u64::from(b.byte())),
            2 => time = b.pick(&[0, time / 2, u64::MAX - 1]),
            // Shapes that random records seldom make, so that the memory pass's findings are
            // reached too.
            3 | 4 => {
                let p = processes.last_mut().expect("one process at least");
                let (kind, steps) = (b.byte(), 4 + b.below(12));
                for body in shape(kind, steps, b.size()) {
                    seq = seq.wrapping_add(1);
                    time = time.wrapping_add(1_000_000);
                    p.push((
                        1,
                        Record {
                            seq: Seq(seq),
                            time_ns: time,
                            body,
                        },
                    ));
                }
            }
            _ => {}
        }
        seq = seq.wrapping_add(u64::from(b.byte() % 3));
        time = time.wrapping_add(u64::from(b.byte()) * 1000);
        let tid = u32::from(b.byte() % 3) + 1;
        let body = b.body();
        let p = processes.last_mut().expect("one process at least");
        p.push((
            tid,
            Record {
                seq: Seq(seq),
                time_ns: time,
                body,
            },
        ));
    }
    Case {
        processes,
        memory: flags & 1 == 1,
        at: if flags & 1 == 1 { at } else { None },
        top,
        pool_as_leak: flags & 2 == 2,
        max_leaked_bytes,
        file: flags & 4 == 4,
    }
}

/// The records of one process as the bytes of a trace file: a block per thread, a new one
/// when it fills.
pub fn trace_bytes(records: &[(u32, Record<'static>)]) -> Vec<u8> {
    let mut file = vec![0u8; HEADER_SIZE];
    let header = FileHeader {
        version: FORMAT_VERSION,
        block_size: BLOCK_SIZE as u32,
        pid: 1,
        start_unix_ns: 0,
    };
    header.write((&mut file[..HEADER_SIZE]).try_into().expect("header size"));
    // Per thread: (its id, the offset of its block, the block's cursor).
    let mut open: Vec<(u32, usize, BlockCursor)> = Vec::new();
    for (tid, r) in records {
        let mut slot = open.iter().position(|o| o.0 == *tid);
        for _ in 0..2 {
            let i = match slot {
                Some(i) => i,
                None => {
                    let at = file.len();
                    file.resize(at + BLOCK_SIZE, 0);
                    let cursor = BlockCursor::start(&mut file[at..], *tid, r.seq.0, r.time_ns);
                    open.push((*tid, at, cursor));
                    open.len() - 1
                }
            };
            let (_, at, cursor) = &mut open[i];
            if cursor.append(&mut file[*at..*at + BLOCK_SIZE], r).is_ok() {
                break;
            }
            open.remove(i);
            slot = None;
        }
    }
    file
}

/// What one analysis produced, for a test to see how far the inputs reach.
#[derive(Default)]
pub struct Reached {
    /// Bytes of everything written (reports, page, stacks, check outputs).
    pub written: usize,
    /// Leak groups reported.
    pub leaks: usize,
    /// The checks of the findings reported.
    pub checks: std::collections::BTreeSet<&'static str>,
    /// With [`Case::file`]: the records written, and the lines `gpuleak dump` printed of them
    /// and the decoding errors it met.
    pub read: Option<(usize, (usize, usize))>,
}

/// Writes `records` as a trace file and reads it as the command line does: `gpuleak dump` and
/// the pipelined replay of `gpuleak report`.
fn read_back(records: &[(u32, Record<'static>)], options: &Options) -> (usize, usize) {
    static FILES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = FILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("gpuleak-synth.{}.{n}.trace", std::process::id()));
    std::fs::write(&path, trace_bytes(records)).expect("temporary trace");
    let file = TraceFile::open(&path).expect("a trace written by the format crate opens");
    let _ = std::fs::remove_file(&path);
    let mut out = Vec::new();
    let errors = dump::write(&file, &mut out).expect("dump to memory");
    let replay = report::load::replay(&file, true, None, options);
    let source = ModuleOffsets::new(replay.modules.clone());
    let _ = report::build(replay, path, &source, options);
    (out.iter().filter(|&&b| b == b'\n').count(), errors.len())
}

/// Runs the whole analysis over a case. Panics only where the analyzer does.
pub fn analyze(c: &Case) -> Reached {
    let options = Options {
        top: c.top,
        pool_as_leak: c.pool_as_leak,
        debug_dirs: Vec::new(),
        sysroot: None,
        memory: c.memory,
        at: c.at,
    };
    let mut processes = Vec::new();
    for (i, records) in c.processes.iter().enumerate() {
        let mut model = Model::new();
        if c.memory {
            model = model.with_memory(TrackerOptions {
                snapshots: c.at.map(|a| a.ids()).unwrap_or_default(),
            });
        }
        for (tid, r) in records {
            model.apply(*tid, r);
        }
        let replay = model.finish();
        let source = ModuleOffsets::new(replay.modules.clone());
        let trace = PathBuf::from(format!("synth.{i}.trace"));
        processes.push(report::build(replay, trace, &source, &options));
    }
    let mut read = None;
    if c.file {
        if let Some(records) = c.processes.first() {
            read = Some((records.len(), read_back(records, &options)));
        }
    }
    let mut reached = Reached {
        read,
        leaks: processes.iter().map(|p| p.leaks.len()).sum(),
        checks: processes
            .iter()
            .flat_map(|p| p.findings.iter().map(|f| f.check))
            .collect(),
        ..Reached::default()
    };
    let mut report = Report::new(processes);
    if let Some(top) = c.top {
        report.limit(top);
    }
    let mut text = Vec::new();
    report::text::write(&report, report::text::Style::PLAIN, &mut text).expect("text to memory");
    let mut json = Vec::new();
    report::json::write(&report, &mut json).expect("json to memory");
    let mut written = text.len() + json.len();
    if c.memory {
        written += html::write(&report).len();
        written += collapsed::write(&report, collapsed::Weight::Leaked).len();
        written += collapsed::write(&report, collapsed::Weight::Peak).len();
    }
    // The report's own JSON as the baseline of a check of the same report.
    let doc: serde_json::Value = serde_json::from_slice(&json).expect("the report's JSON parses");
    let baseline = Baseline::from_json(&doc, Path::new("synth.json")).expect("the report's JSON is a baseline");
    let config = Config {
        max_leaked_bytes: c.max_leaked_bytes,
        baseline: Some(baseline),
        tolerance: Tolerance::None,
        ..Config::default()
    };
    let outcome = check::evaluate(report, &config);
    let mut out = Vec::new();
    check::text::write(&outcome, &mut out).expect("check text");
    check::json::write(&outcome, &mut out).expect("check json");
    check::junit::write(&outcome, &mut out).expect("check junit");
    check::sarif::write(&outcome, &mut out).expect("check sarif");
    reached.written = written + out.len();
    reached
}
