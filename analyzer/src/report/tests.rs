//! Reports built from synthetic records: ownership, pools, merging, `--top`, and the JSON
//! contract's shape.

use std::borrow::Cow;
use std::path::PathBuf;

use gpuleak_format::{
    Addrs, Alloc, Api, Body, Ctx, CuResult, Exit, Free, Module as ModuleRecord, Ptr, Record, Seq, Stack, StackId,
    Stream,
};

use super::*;
use crate::replay::Replayer;

const PROGRAM: u64 = 0x5555_0000_0000;
const C10: u64 = 0x7f00_0000_0000;
const CUDART: u64 = 0x7f10_0000_0000;

struct Script {
    records: Vec<Record<'static>>,
}

impl Script {
    /// A process with three modules: the program, PyTorch's allocator and the runtime.
    fn new() -> Script {
        Script::with_modules(&[
            (PROGRAM, "/usr/bin/train"),
            (C10, "/venv/torch/lib/libc10_cuda.so"),
            (CUDART, "/venv/nvidia/lib/libcudart.so.12"),
        ])
    }

    fn with_modules(modules: &[(u64, &'static str)]) -> Script {
        let mut s = Script { records: Vec::new() };
        for &(start, path) in modules {
            s.push(ModuleRecord {
                base: start,
                start,
                end: start + 0x10_0000,
                path: path.into(),
                build_id: Cow::Borrowed(&[]),
            });
        }
        s
    }

    fn push(&mut self, body: impl Into<Body<'static>>) -> &mut Self {
        let seq = self.records.len() as u64 + 1;
        self.records.push(Record {
            seq: Seq(seq),
            time_ns: seq,
            body: body.into(),
        });
        self
    }

    fn stack(&mut self, id: u32, frames: &[u64]) -> &mut Self {
        self.push(Stack {
            id: StackId(id),
            frames: Addrs(Cow::Owned(frames.to_vec())),
        })
    }

    fn free(&mut self, ptr: u64) -> &mut Self {
        self.push(Free {
            api: Api::cuMemFree_v2,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            stream: Stream(0),
            ptr: Ptr(ptr),
            size: 0,
            stack: StackId::NONE,
        })
    }

    fn alloc(&mut self, api: Api, ptr: u64, size: u64, stack: u32) -> &mut Self {
        self.push(Alloc {
            api,
            via: Api::cudaMalloc,
            result: CuResult::SUCCESS,
            ctx: Ctx(1),
            stream: Stream(0),
            ptr: Ptr(ptr),
            size,
            stack: StackId(stack),
            aux: 0,
        })
    }

    fn replay(&self) -> crate::replay::Replay {
        self.replay_with(Replayer::new(None))
    }

    fn replay_with(&self, mut replayer: Replayer) -> crate::replay::Replay {
        for r in &self.records {
            replayer.apply(1, r);
        }
        replayer.finish()
    }

    fn report(&self, options: &Options) -> ProcessReport {
        let replay = if options.memory {
            self.replay_with(Replayer::new(Some(crate::memory::TrackerOptions::default())))
        } else {
            self.replay()
        };
        let source = ModuleOffsets::new(replay.modules.clone());
        build(replay, PathBuf::from("t.trace"), &source, options)
    }
}

/// A program leak (stack 1) and memory PyTorch's caching allocator still holds (stack 2), both
/// reached through the runtime.
fn program_and_pool() -> Script {
    let mut s = Script::new();
    s.stack(1, &[CUDART + 0x10, PROGRAM + 0x100, PROGRAM + 0x200])
        .stack(2, &[CUDART + 0x10, C10 + 0x300, PROGRAM + 0x400])
        .alloc(Api::cuMemAlloc_v2, 0x7000_0000, 1000, 1)
        .alloc(Api::cuMemAlloc_v2, 0x7100_0000, 2 << 20, 2)
        .push(Exit { code: 0, how: 0 });
    s
}

#[test]
fn memory_held_by_a_caching_allocator_is_apart_from_program_leaks() {
    let r = program_and_pool().report(&Options::default());
    assert_eq!(r.leaks.len(), 1);
    assert_eq!(r.leaks[0].bytes, 1000);
    assert_eq!(r.leaks[0].owner.as_deref(), Some("/usr/bin/train"));
    assert_eq!(r.leaks[0].pool, None);
    assert_eq!(r.held_by_pool.len(), 1);
    let pool = &r.held_by_pool[0];
    assert_eq!((pool.bytes, pool.pool), (2 << 20, Some(Pool::Pytorch)));
    assert_eq!(pool.owner.as_deref(), Some("/venv/torch/lib/libc10_cuda.so"));
    assert_eq!(r.summary.leaked_bytes, 1000);
    assert_eq!(r.summary.pool_bytes, 2 << 20);
    assert_eq!(r.summary.peak_bytes, 1000 + (2 << 20));
}

/// A staircase of 1 MiB allocations, freed at the end, from a program's own stack and from a
/// stack inside PyTorch's caching allocator: both are growth, and only the allocator's says
/// that its site is where the cache grew, with the switch that shows the tensors.
#[test]
fn growth_inside_a_caching_allocator_says_how_to_see_the_tensors() {
    let growth = |frames: &[u64]| {
        let mut s = Script::new();
        s.stack(1, frames).stack(3, &[PROGRAM + 0x300]);
        // Each step keeps 1 MiB and uses a scratch buffer (the work of a loop).
        for i in 0..40u64 {
            s.alloc(Api::cuMemAlloc_v2, 0x7000_0000 + (i << 20), 1 << 20, 1);
            for _ in 0..4 {
                s.alloc(Api::cuMemAlloc_v2, 0x9000_0000, 4096, 3).free(0x9000_0000);
            }
        }
        for i in 0..40u64 {
            s.free(0x7000_0000 + (i << 20));
        }
        s.push(Exit { code: 0, how: 0 });
        let options = Options {
            memory: true,
            ..Options::default()
        };
        let r = s.report(&options);
        let found: Vec<&Finding> = r.findings.iter().filter(|f| f.check == "growth").collect();
        assert_eq!(found.len(), 1, "{:#?}", r.findings);
        found[0].message.clone()
    };
    let program = growth(&[CUDART + 0x10, PROGRAM + 0x100, PROGRAM + 0x200]);
    let cached = growth(&[CUDART + 0x10, C10 + 0x300, PROGRAM + 0x400]);
    let hint = "the site is a caching allocator's";
    assert!(!program.contains(hint), "{program}");
    assert!(
        cached.contains(hint) && cached.contains("--no-framework-cache"),
        "{cached}"
    );
}

/// [`program_and_pool`] in a Python process (one code object named), and with PyTorch's state
/// written by gpuleak's package before exit when `state`.
fn python_program_and_pool(state: bool) -> Script {
    let mut s = program_and_pool();
    let exit = s.records.pop().expect("the exit record");
    s.push(gpuleak_format::PyCode {
        id: 1,
        python: 0x030b,
        first_line: 1,
        filename: "train.py".into(),
        qualname: "<module>".into(),
        line_table: Cow::Borrowed(&[]),
    });
    if state {
        s.push(gpuleak_format::FrameworkState {
            id: 1,
            layout: 1,
            framework: "torch".into(),
            reason: "exit".into(),
            snapshot: 0,
        })
        .push(gpuleak_format::FrameworkEnd {
            state: 1,
            segments: 0,
            blocks: 0,
        });
    }
    s.records.push(exit);
    s
}

#[test]
fn a_python_process_whose_cache_was_not_read_from_inside_says_why() {
    let unread = |s: &Script| -> Vec<String> {
        let mut notes = s.report(&Options::default()).notes;
        notes.retain(|n| n.contains("were not read"));
        notes
    };
    let notes = unread(&python_program_and_pool(false));
    assert_eq!(notes.len(), 1, "{notes:?}");
    assert!(
        notes[0].starts_with("PyTorch's caching allocator holds memory, but its tensors were not read")
            && notes[0].contains("PYTHONPATH")
            && notes[0].contains("GPULEAK_FRAMEWORKS=0"),
        "{}",
        notes[0]
    );
    // The package wrote PyTorch's state: read, no note.
    assert_eq!(unread(&python_program_and_pool(true)), Vec::<String>::new());
    // Not a Python process (a C++ program linking libtorch): no package could have read it.
    assert_eq!(unread(&program_and_pool()), Vec::<String>::new());
    // --pool-as-leak counts the cache as leaks, still PyTorch's: the note stays.
    let options = Options {
        pool_as_leak: true,
        ..Options::default()
    };
    let notes = python_program_and_pool(false).report(&options).notes;
    assert_eq!(
        notes.iter().filter(|n| n.contains("were not read")).count(),
        1,
        "{notes:?}"
    );
}

#[test]
fn pool_as_leak_counts_pool_memory_as_leaks() {
    let options = Options {
        pool_as_leak: true,
        ..Options::default()
    };
    let r = program_and_pool().report(&options);
    assert!(r.held_by_pool.is_empty());
    assert_eq!(r.leaks.len(), 2);
    assert_eq!(r.leaks[0].pool, Some(Pool::Pytorch), "largest first, still named");
    assert_eq!(r.summary.leaked_bytes, 1000 + (2 << 20));
    assert_eq!(r.summary.pool_bytes, 0);
}

#[test]
fn runtime_frames_are_not_shown_and_via_is_kept() {
    let r = program_and_pool().report(&Options::default());
    let l = &r.leaks[0];
    assert_eq!(l.via, Api::cudaMalloc);
    assert_eq!(l.stack.len(), 2);
    assert_eq!(l.stack[0].module.as_deref(), Some("train"));
    assert_eq!(l.stack[0].address, 0x100);
}

#[test]
fn stacks_that_differ_only_inside_the_runtime_are_one_group() {
    let mut s = Script::new();
    s.stack(1, &[CUDART + 0x10, PROGRAM + 0x100])
        .stack(2, &[CUDART + 0x20, PROGRAM + 0x100])
        .alloc(Api::cuMemAlloc_v2, 0x7000_0000, 10, 1)
        .alloc(Api::cuMemAlloc_v2, 0x7100_0000, 20, 2);
    let r = s.report(&Options::default());
    assert_eq!(r.leaks.len(), 1);
    assert_eq!((r.leaks[0].bytes, r.leaks[0].allocations), (30, 2));
    assert_eq!(r.leaks[0].stack_id, StackId(1), "the first allocation's group names it");
}

/// Names program addresses below `PROGRAM + 0x1000` as one line of `leaky`.
struct OneLine;

impl FrameSource for OneLine {
    fn frames(&self, address: u64) -> Vec<Frame> {
        let named = (PROGRAM..PROGRAM + 0x1000).contains(&address);
        vec![Frame {
            function: named.then(|| "leaky".to_string()),
            file: named.then(|| "leaky.c".to_string()),
            line: named.then_some(7),
            module: Some("train".into()),
            address: address - PROGRAM,
            inlined: false,
            user: false,
        }]
    }

    fn warnings(&self) -> Vec<(String, String)> {
        vec![
            ("libc.so.6".into(), "libc.so.6: no debug info".into()),
            ("train".into(), "train: no debug info".into()),
        ]
    }
}

#[test]
fn stacks_with_the_same_source_lines_are_one_group_but_unnamed_frames_must_match_exactly() {
    let mut s = Script::new();
    s.stack(1, &[PROGRAM + 0x100])
        .stack(2, &[PROGRAM + 0x180])
        .stack(3, &[PROGRAM + 0x2000])
        .stack(4, &[PROGRAM + 0x2100])
        .alloc(Api::cuMemAlloc_v2, 0x7000_0000, 10, 1)
        .alloc(Api::cuMemAlloc_v2, 0x7100_0000, 20, 2)
        .alloc(Api::cuMemAlloc_v2, 0x7200_0000, 40, 3)
        .alloc(Api::cuMemAlloc_v2, 0x7300_0000, 80, 4)
        .push(Exit { code: 0, how: 0 });
    let r = build(s.replay(), PathBuf::from("t.trace"), &OneLine, &Options::default());
    let groups: Vec<(u64, u64)> = r.leaks.iter().map(|l| (l.bytes, l.allocations)).collect();
    assert_eq!(groups, [(80, 1), (40, 1), (30, 2)]);
    assert_eq!(
        r.notes,
        ["train: no debug info"],
        "the symbolizer's warnings are notes, for the modules of frames shown only"
    );
}

/// Counts the addresses a source is asked to name.
struct Counting<'a>(&'a dyn FrameSource, std::cell::RefCell<Vec<u64>>);

impl FrameSource for Counting<'_> {
    fn frames(&self, address: u64) -> Vec<Frame> {
        self.1.borrow_mut().push(address);
        self.0.frames(address)
    }

    fn warnings(&self) -> Vec<(String, String)> {
        self.0.warnings()
    }
}

/// Why `--top` cannot leave the groups it cuts unnamed: groups merge by the lines their frames
/// name, so the count of groups left out (in the text and the JSON) is only known once every
/// group is named; two return addresses of one line here are one group left out, not two.
#[test]
fn top_counts_the_groups_it_leaves_out_after_naming_them() {
    let mut s = Script::new();
    s.stack(1, &[PROGRAM + 0x100])
        .stack(2, &[PROGRAM + 0x180])
        .stack(3, &[PROGRAM + 0x2000])
        .alloc(Api::cuMemAlloc_v2, 0x7000_0000, 10, 1)
        .alloc(Api::cuMemAlloc_v2, 0x7100_0000, 20, 2)
        .alloc(Api::cuMemAlloc_v2, 0x7200_0000, 80, 3)
        .push(Exit { code: 0, how: 0 });
    let counting = Counting(&OneLine, std::cell::RefCell::new(Vec::new()));
    let options = Options {
        top: Some(1),
        ..Options::default()
    };
    let r = build(s.replay(), PathBuf::from("t.trace"), &counting, &options);
    assert_eq!(r.leaks.iter().map(|l| l.bytes).collect::<Vec<_>>(), [80]);
    assert_eq!(
        r.omitted[0],
        (1, 30),
        "0x100 and 0x180 name one line: one group left out"
    );
    let mut asked = counting.1.into_inner();
    asked.sort_unstable();
    assert_eq!(
        asked,
        [PROGRAM + 0x100, PROGRAM + 0x180, PROGRAM + 0x2000],
        "each address once"
    );
}

#[test]
fn registered_and_reserved_memory_is_unreleased_not_leaked() {
    let mut s = Script::new();
    s.stack(1, &[PROGRAM + 0x100])
        .alloc(Api::cuMemHostRegister_v2, 0x5000, 65536, 1)
        .alloc(Api::cuMemAddressReserve, 0x6000_0000, 1 << 22, 1);
    let r = s.report(&Options::default());
    assert!(r.leaks.is_empty());
    assert_eq!(r.unreleased.len(), 2);
    assert_eq!(r.summary.leaked_bytes, 0);
    assert_eq!(r.summary.unreleased_allocations, 2);
}

#[test]
fn top_keeps_the_largest_groups_and_counts_the_rest() {
    let mut s = Script::new();
    for i in 1..=5u32 {
        s.stack(i, &[PROGRAM + u64::from(i) * 0x10]).alloc(
            Api::cuMemAlloc_v2,
            0x7000_0000 + u64::from(i) * 0x1000,
            u64::from(i) * 100,
            i,
        );
    }
    let r = s.report(&Options {
        top: Some(2),
        ..Options::default()
    });
    assert_eq!(r.leaks.iter().map(|l| l.bytes).collect::<Vec<_>>(), [500, 400]);
    assert_eq!(r.omitted[0], (3, 600));
    assert_eq!(r.summary.leaked_bytes, 1500, "the summary counts every leak");
}

#[test]
fn bad_frees_become_findings_with_both_stacks() {
    let mut s = Script::new();
    s.stack(1, &[PROGRAM + 0x100])
        .stack(2, &[PROGRAM + 0x200])
        .alloc(Api::cuMemAlloc_v2, 0x7000, 64, 1)
        .push(Free {
            api: Api::cuMemFree_v2,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            stream: Stream(0),
            ptr: Ptr(0x7000),
            size: 0,
            stack: StackId::NONE,
        })
        .push(Free {
            api: Api::cuMemFree_v2,
            via: Api::NONE,
            result: CuResult(1),
            stream: Stream(0),
            ptr: Ptr(0x7000),
            size: 0,
            stack: StackId(2),
        });
    let r = s.report(&Options::default());
    assert_eq!(r.findings.len(), 1);
    let f = &r.findings[0];
    assert_eq!((f.check, f.severity), ("bad-free", Severity::Error));
    assert!(
        f.message.starts_with("double free: cuMemFree_v2 of 0x7000"),
        "{}",
        f.message
    );
    assert_eq!(f.stack[0].address, 0x200);
    assert_eq!(f.allocation_stack.as_ref().unwrap()[0].address, 0x100);
    assert!(r.leaks.is_empty());
}

#[test]
fn a_trace_without_exit_says_so() {
    let mut s = Script::new();
    s.alloc(Api::cuMemAlloc_v2, 0x7000, 64, 0);
    let r = s.report(&Options::default());
    assert!(r.notes.iter().any(|n| n.contains("no exit record")), "{:?}", r.notes);
}

#[test]
fn json_has_the_contract_fields_in_order() {
    let report = Report::new(vec![program_and_pool().report(&Options::default())]);
    let mut out = Vec::new();
    json::write(&report, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let position = |key: &str| text.find(&format!("\"{key}\"")).unwrap_or_else(|| panic!("no {key}"));
    assert!(position("schema_version") < position("summary"));
    let list = |key: &str| {
        text.find(&format!("\n  \"{key}\": ["))
            .unwrap_or_else(|| panic!("no {key} list"))
    };
    assert!(position("summary") < list("leaks"));
    assert!(list("leaks") < list("findings"));
    for key in [
        "allocations",
        "frees",
        "leaked_allocations",
        "leaked_bytes",
        "peak_bytes",
        "bytes",
        "kind",
        "stack",
        "function",
        "file",
        "line",
        "module",
        "held_by_pool",
        "processes",
    ] {
        position(key);
    }
    assert!(text.contains("\"schema_version\": 1,"));
    assert!(text.contains("\"kind\": \"device\""));
    assert!(text.contains("\"pool\": \"pytorch\""));
}

#[test]
fn several_processes_add_up() {
    let one = program_and_pool().report(&Options::default());
    let report = Report::new(vec![one.clone(), one]);
    assert_eq!(report.summary.leaked_bytes, 2000);
    assert_eq!(report.summary.peak_bytes, 2 * (1000 + (2 << 20)));
    let mut out = Vec::new();
    text::write(&report, text::Style::PLAIN, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.matches("gpuleak report:").count(), 2);
    assert!(text.contains("Total over 2 processes:"));
    assert!(
        text.lines().all(|l| l.chars().count() <= 80 || !l.contains(' ')),
        "{text}"
    );
}

#[test]
fn streams_a_framework_keeps_are_a_note_and_the_program_s_a_warning() {
    let mut s = Script::new();
    s.stack(1, &[CUDART + 0x10, PROGRAM + 0x100, PROGRAM + 0x200])
        .stack(2, &[CUDART + 0x10, C10 + 0x300, PROGRAM + 0x400]);
    for (handle, stack) in [(0x50, 1), (0x60, 2), (0x70, 2)] {
        s.push(gpuleak_format::StreamCreate {
            api: Api::cuStreamCreate,
            result: CuResult::SUCCESS,
            stream: Stream(handle),
            flags: 1,
            priority: 0,
            stack: StackId(stack),
        });
    }
    s.push(Exit { code: 0, how: 0 });
    let r = s.report(&Options::default());
    let found: Vec<(&str, Severity, u64)> = r.findings.iter().map(|f| (f.check, f.severity, f.count)).collect();
    assert_eq!(
        found,
        vec![
            ("stream-leak", Severity::Warning, 1),
            ("stream-leak", Severity::Note, 2)
        ]
    );
    assert!(
        r.findings[1].message.contains("created by the pytorch runtime"),
        "{}",
        r.findings[1].message
    );
    assert_eq!(r.findings[0].stack_role, None);
    assert!(!r.findings[0].stack.is_empty());
}

/// Without creation stacks (the default), streams and events never destroyed in a process that
/// loaded PyTorch or XLA, which keep theirs for the life of the process, are a note that says
/// so; in a process that loaded neither, a warning.
#[test]
fn leaks_without_creation_stacks_are_a_note_only_where_a_framework_that_keeps_them_was_loaded() {
    let leaks = |s: &mut Script| {
        s.push(gpuleak_format::StreamCreate {
            api: Api::cuStreamCreate,
            result: CuResult::SUCCESS,
            stream: Stream(0x50),
            flags: 1,
            priority: 0,
            stack: StackId::NONE,
        });
        s.push(gpuleak_format::EventCreate {
            api: Api::cuEventCreate,
            result: CuResult::SUCCESS,
            event: gpuleak_format::Event(0x60),
            flags: 0,
            stack: StackId::NONE,
        });
        s.push(Exit { code: 0, how: 0 });
    };
    let mut torch = Script::new();
    leaks(&mut torch);
    let mut jax = Script::with_modules(&[
        (PROGRAM, "/usr/bin/python3"),
        (
            C10,
            "/venv/lib/python3.12/site-packages/jax_plugins/xla_cuda13/xla_cuda_plugin.so",
        ),
    ]);
    leaks(&mut jax);
    let mut plain = Script::with_modules(&[(PROGRAM, "/usr/bin/train"), (CUDART, "/usr/lib/libcudart.so.13")]);
    leaks(&mut plain);
    let mut cupy = Script::with_modules(&[(C10, "/venv/cupy_backends/cuda/api/runtime.so")]);
    leaks(&mut cupy);
    for (script, severity, says) in [
        (
            torch,
            Severity::Note,
            Some("the process loaded the pytorch runtime (libc10_cuda.so)"),
        ),
        (
            jax,
            Severity::Note,
            Some("the process loaded the xla runtime (xla_cuda_plugin.so)"),
        ),
        (plain, Severity::Warning, None),
        // CuPy keeps no streams or events of its own: its pool is memory only.
        (cupy, Severity::Warning, None),
    ] {
        let r = script.report(&Options::default());
        let found: Vec<(&str, Severity)> = r.findings.iter().map(|f| (f.check, f.severity)).collect();
        assert_eq!(found, vec![("stream-leak", severity), ("event-leak", severity)]);
        for f in &r.findings {
            assert!(f.message.contains("creation stack was not recorded"), "{}", f.message);
            match says {
                Some(says) => assert!(f.message.contains(says), "{}", f.message),
                None => assert!(!f.message.contains("the process loaded"), "{}", f.message),
            }
        }
    }
}

fn pool_create(s: &mut Script, api: Api, result: u32, pool: u64, stack: u32) {
    s.push(gpuleak_format::PoolCreate {
        api,
        via: Api::NONE,
        result: CuResult(result),
        pool,
        location_type: 1,
        location: 0,
        max_size: 0,
        handle_types: 0,
        stack: StackId(stack),
    });
}

fn pool_destroy(s: &mut Script, result: u32, pool: u64) {
    s.push(gpuleak_format::PoolDestroy {
        api: Api::cuMemPoolDestroy,
        via: Api::NONE,
        result: CuResult(result),
        pool,
        stack: StackId::NONE,
    });
}

fn pool_usage(s: &mut Script, pool: u64, reserved: u64, used: u64) {
    s.push(gpuleak_format::PoolUsage {
        pool,
        device: 0,
        reserved,
        used,
    });
}

fn pool_findings(r: &ProcessReport) -> Vec<(Severity, u64, u64)> {
    r.findings
        .iter()
        .filter(|f| f.check == "pool-leak")
        .map(|f| (f.severity, f.count, f.ptr))
        .collect()
}

#[test]
fn a_pool_never_destroyed_is_a_pool_leak_with_what_it_reserved() {
    let mut s = Script::new();
    s.stack(1, &[CUDART + 0x10, PROGRAM + 0x100, PROGRAM + 0x200]);
    pool_create(&mut s, Api::cuMemPoolCreate, 0, 0x900, 1);
    pool_usage(&mut s, 0x900, 32 << 20, 32 << 20);
    pool_usage(&mut s, 0x900, 0, 0);
    s.push(Exit { code: 0, how: 0 });
    let r = s.report(&Options::default());
    assert_eq!(pool_findings(&r), [(Severity::Warning, 1, 0x900)]);
    let f = &r.findings[0];
    assert!(
        f.message.starts_with(
            "memory pool 0x900 created by cuMemPoolCreate on device 0 was never destroyed; it reserved up to 32.0 MiB"
        ),
        "{}",
        f.message
    );
    assert!(!f.stack.is_empty());
    assert!(f.extra.contains(&("reserved_bytes_max", Extra::U(32 << 20))));
    assert_eq!(r.summary.findings, 1);

    // Its twin destroys the pool: nothing, though its last sample said 32 MiB.
    let mut s = Script::new();
    s.stack(1, &[CUDART + 0x10, PROGRAM + 0x100, PROGRAM + 0x200]);
    pool_create(&mut s, Api::cuMemPoolCreate, 0, 0x900, 1);
    pool_usage(&mut s, 0x900, 32 << 20, 0);
    pool_destroy(&mut s, 0, 0x900);
    s.push(Exit { code: 0, how: 0 });
    assert!(s.report(&Options::default()).findings.is_empty());
}

#[test]
fn failed_pool_calls_make_and_destroy_nothing() {
    // A failed creation is no pool; a failed destroy leaves the pool alive.
    let mut s = Script::new();
    s.stack(1, &[CUDART + 0x10, PROGRAM + 0x100, PROGRAM + 0x200]);
    pool_create(&mut s, Api::cuMemPoolCreate, 2, 0, 1);
    pool_create(&mut s, Api::cuMemPoolCreate, 0, 0x900, 1);
    pool_destroy(&mut s, 1, 0x900);
    s.push(Exit { code: 0, how: 0 });
    let r = s.report(&Options::default());
    assert_eq!(pool_findings(&r), [(Severity::Warning, 1, 0x900)]);
    assert!(
        r.findings[0].message.contains("was never sampled"),
        "{}",
        r.findings[0].message
    );
    assert_eq!(r.findings[0].extra[2], ("reserved_bytes_max", Extra::Null));

    // A destroy of a pool created before (handle reused afterwards) ends only that one.
    let mut s = Script::new();
    s.stack(1, &[CUDART + 0x10, PROGRAM + 0x100, PROGRAM + 0x200]);
    pool_create(&mut s, Api::cuMemPoolCreate, 0, 0x900, 1);
    pool_destroy(&mut s, 0, 0x900);
    pool_create(&mut s, Api::cuMemPoolCreate, 0, 0x900, 1);
    pool_destroy(&mut s, 0, 0x900);
    s.push(Exit { code: 0, how: 0 });
    assert!(s.report(&Options::default()).findings.is_empty());
}

#[test]
fn pools_a_framework_keeps_are_a_note_and_imports_say_whose_memory() {
    let mut s = Script::new();
    s.stack(1, &[CUDART + 0x10, PROGRAM + 0x100, PROGRAM + 0x200])
        .stack(2, &[CUDART + 0x10, C10 + 0x300, PROGRAM + 0x400]);
    pool_create(&mut s, Api::cuMemPoolCreate, 0, 0x900, 2);
    pool_create(&mut s, Api::cuMemPoolCreate, 0, 0xa00, 2);
    pool_create(&mut s, Api::cuMemPoolImportFromShareableHandle, 0, 0xb00, 1);
    // The same handle created again with no destroy between: the first went unseen.
    pool_create(&mut s, Api::cuMemPoolCreate, 0, 0xc00, 1);
    pool_create(&mut s, Api::cuMemPoolCreate, 0, 0xc00, 1);
    s.push(Exit { code: 0, how: 0 });
    let r = s.report(&Options::default());
    assert_eq!(
        pool_findings(&r),
        [
            (Severity::Warning, 1, 0xb00),
            (Severity::Warning, 2, 0xc00),
            (Severity::Note, 2, 0x900)
        ]
    );
    assert!(r.findings[0]
        .message
        .contains("imported by cuMemPoolImportFromShareableHandle"));
    assert!(r.findings[0].message.contains("exporting process's"));
    assert!(r.findings[1].message.contains("(2 pools from this stack)"));
    assert!(r.findings[2].message.contains("created by the pytorch runtime"));
}

/// `s`'s report as the process `pid`, from the trace `trace`.
fn as_process(s: &Script, pid: u32, trace: &str) -> ProcessReport {
    let mut r = build(s.replay(), PathBuf::from(trace), &OneLine, &Options::default());
    r.process = Some(Process {
        pid,
        ppid: 1,
        exe: "/usr/bin/train".into(),
        args: Vec::new(),
        start_unix_ns: 0,
        ..Process::default()
    });
    r
}

/// Three ranks: each leaks from `leaky` (one source line, reached through different
/// addresses in each), rank 2 twice as much; rank 3 also leaks from an unnamed frame.
fn ranks() -> Vec<ProcessReport> {
    (1..=3u32)
        .map(|rank| {
            let mut s = Script::new();
            s.stack(1, &[CUDART + 0x10, PROGRAM + 0x100 + u64::from(rank)]).alloc(
                Api::cuMemAlloc_v2,
                0x7000_0000,
                1000,
                1,
            );
            if rank == 2 {
                s.alloc(Api::cuMemAlloc_v2, 0x7100_0000, 1000, 1);
            }
            if rank == 3 {
                s.stack(2, &[PROGRAM + 0x2000])
                    .alloc(Api::cuMemAllocHost_v2, 0x9000, 5000, 2);
            }
            s.push(Exit { code: 0, how: 0 });
            as_process(&s, 100 + rank, &format!("rank{rank}.trace"))
        })
        .collect()
}

#[test]
fn the_merged_view_shows_a_site_leaking_in_several_processes_once() {
    let report = Report::new(ranks());
    let sites: Vec<(&str, u64, u64, usize)> = report
        .merged
        .iter()
        .map(|m| (m.site.as_str(), m.bytes, m.allocations, m.processes.len()))
        .collect();
    assert_eq!(
        sites,
        [("train+0x2000", 5000, 1, 1), ("leaky@leaky.c:7", 4000, 4, 3)],
        "largest first"
    );
    let leaky = &report.merged[1];
    assert_eq!(leaky.kind, MemKind::Device);
    assert_eq!(leaky.api, Api::cuMemAlloc_v2);
    let per: Vec<(usize, u64, u64)> = leaky
        .processes
        .iter()
        .map(|p| (p.process, p.bytes, p.allocations))
        .collect();
    assert_eq!(per, [(0, 1000, 1), (1, 2000, 2), (2, 1000, 1)]);
    assert_eq!(report.merged_omitted, (0, 0));

    // One process has no merged view.
    assert!(Report::new(ranks().split_off(2)).merged.is_empty());
}

#[test]
fn top_cuts_the_merged_view_after_it_summed_every_group() {
    let mut report = Report::new(ranks());
    report.limit(1);
    assert_eq!(report.merged.len(), 1);
    assert_eq!(report.merged_omitted, (1, 4000));
    let mut out = Vec::new();
    text::write(&report, text::Style::PLAIN, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains("\n... and 1 more leak site (4000 bytes), left out by --top\n"),
        "{text}"
    );
    assert_eq!(report.processes[2].leaks.len(), 1);
    assert_eq!(report.processes[2].omitted[0], (1, 1000));
    assert_eq!(report.summary.leaked_bytes, 9000, "totals count everything");
}

#[test]
fn the_merged_view_is_in_the_text_and_the_json_only_for_several_processes() {
    let report = Report::new(ranks());
    let mut out = Vec::new();
    text::write(&report, text::Style::PLAIN, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    let merged = text
        .split("\nMerged over 3 processes: each leak site once, largest first:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("no merged view:\n{text}"));
    assert!(
        merged.contains(
            "\n4000 bytes in 4 allocations (device) in 3 of 3 processes,\n  allocated by cuMemAlloc_v2 via cudaMalloc:\n  in pid 102 (2000 bytes), pid 101 (1000 bytes), pid 103 (1000 bytes)\n    #0 leaky leaky.c:7 (train)\n"
        ),
        "{merged}"
    );
    assert!(merged.find("Total over 3 processes").unwrap() > merged.find("leaky.c").unwrap());
    assert!(text.lines().all(|l| l.chars().count() <= 80), "{text}");

    let mut out = Vec::new();
    json::write(&report, &mut out).unwrap();
    let doc = String::from_utf8(out).unwrap();
    assert!(doc.contains("\n  \"merged_leaks\": [\n"), "{doc}");
    assert!(
        doc.contains("\"site\": \"leaky@leaky.c:7\",\n      \"process_count\": 3,"),
        "{doc}"
    );
    assert!(
        doc.contains("{\"pid\": 102, \"trace\": \"rank2.trace\", \"bytes\": 2000, \"allocations\": 2, \"rank\": null}")
    );
    assert!(doc.contains("\"merged_omitted\": {\"sites\": 0, \"bytes\": 0}"));

    let one = Report::new(ranks().split_off(2));
    let mut out = Vec::new();
    json::write(&one, &mut out).unwrap();
    assert!(!String::from_utf8(out).unwrap().contains("merged"));
    let mut out = Vec::new();
    text::write(&one, text::Style::PLAIN, &mut out).unwrap();
    assert!(!String::from_utf8(out).unwrap().contains("Merged"));
}

#[test]
fn a_site_in_many_processes_names_the_largest_few_and_counts_the_rest() {
    let processes: Vec<ProcessReport> = (1..=9u32)
        .map(|rank| {
            let mut s = Script::new();
            s.stack(1, &[PROGRAM + 0x100])
                .alloc(Api::cuMemAlloc_v2, 0x7000_0000, u64::from(rank) * 100, 1);
            as_process(&s, 100 + rank, &format!("rank{rank}.trace"))
        })
        .collect();
    let mut out = Vec::new();
    text::write(&Report::new(processes), text::Style::PLAIN, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert!(
        text.contains(
            "\n  in pid 109 (900 bytes), pid 108 (800 bytes), pid 107 (700 bytes),\n    pid 106 (600 bytes), pid 105 (500 bytes), pid 104 (400 bytes)\n    and 3 more processes (600 bytes)\n    #0 leaky leaky.c:7 (train)\n"
        ),
        "{text}"
    );
}
