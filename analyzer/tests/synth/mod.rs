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

use std::path::{Path, PathBuf};

use gpuleak_analyzer::check::{self, Baseline, Config, Tolerance};
use gpuleak_analyzer::memory::TrackerOptions;
use gpuleak_analyzer::replay::Replayer;
use gpuleak_analyzer::report::frames::ModuleOffsets;
use gpuleak_analyzer::report::memory::{collapsed, html, At};
use gpuleak_analyzer::report::{self, Options, Report};
use gpuleak_analyzer::{dump, TraceFile};
use gpuleak_format::{
    Alloc, Api, BlockCursor, Body, Ctx, CuResult, FileHeader, Free, Mark, Ptr, Record, Seq, StackId, Stream,
    BLOCK_SIZE, FORMAT_VERSION, HEADER_SIZE,
};

mod records;

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
    /// command line does (`gpuleak dump`, the two-reader replay).
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
/// the two-reader replay of `gpuleak report`.
fn read_back(records: &[(u32, Record<'static>)], options: &Options) -> (usize, usize) {
    static FILES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = FILES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let path = std::env::temp_dir().join(format!("gpuleak-synth.{}.{n}.trace", std::process::id()));
    std::fs::write(&path, trace_bytes(records)).expect("temporary trace");
    let file = TraceFile::open(&path).expect("a trace written by the format crate opens");
    let _ = std::fs::remove_file(&path);
    let mut out = Vec::new();
    let errors = dump::write(&file, &mut out).expect("dump to memory");
    // Blocks decoded ahead by none, one or two more threads, in turn.
    let replay = report::load::replay(&file, true, (n % 3) as usize, None, options);
    let source = ModuleOffsets::new(replay.modules.clone());
    let _ = report::build(replay, path, &source, options);
    (out.iter().filter(|&&b| b == b'\n').count(), errors.len())
}

/// The report options a case asks for.
fn options(c: &Case) -> Options {
    Options {
        top: c.top,
        pool_as_leak: c.pool_as_leak,
        debug_dirs: Vec::new(),
        sysroot: None,
        memory: c.memory,
        at: c.at,
        ..Options::default()
    }
}

/// Each process of a case replayed and reported.
fn processes(c: &Case, options: &Options) -> Vec<report::ProcessReport> {
    let mut processes = Vec::new();
    for (i, records) in c.processes.iter().enumerate() {
        let mut replayer = Replayer::new(c.memory.then(|| TrackerOptions {
            snapshots: c.at.map(|a| a.ids()).unwrap_or_default(),
        }));
        for (tid, r) in records {
            replayer.apply(*tid, r);
        }
        let replay = replayer.finish();
        let source = ModuleOffsets::new(replay.modules.clone());
        let trace = PathBuf::from(format!("synth.{i}.trace"));
        processes.push(report::build(replay, trace, &source, options));
    }
    processes
}

/// The case's report as JSON, and its HTML page when the case asks for the memory pass.
#[allow(dead_code)] // Not used by the fuzz target.
pub fn rendered(c: &Case) -> Vec<u8> {
    let report = Report::new(processes(c, &options(c)));
    let mut out = Vec::new();
    report::json::write(&report, &mut out).expect("json to memory");
    if c.memory {
        out.extend_from_slice(html::write(&report).as_bytes());
    }
    out
}

/// Runs the whole analysis over a case. Panics only where the analyzer does.
pub fn analyze(c: &Case) -> Reached {
    let options = options(c);
    let processes = processes(c, &options);
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
