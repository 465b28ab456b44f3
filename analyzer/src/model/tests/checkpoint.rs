//! Checkpoints: random programs cut at several points and compacted; the replay of
//! [checkpoint + rest] must say what the whole trace says about leaks, live objects and
//! totals, and find no bad free or ordering finding that the whole trace does not.

use std::collections::BTreeMap;

use gpuleak_format::checkpoint::cut;
use gpuleak_format::{Entry, Event, EventCreate, EventRecord, StreamCreate, StreamWait, Trace, TraceId};

use super::*;
use crate::memory::TrackerOptions;
use crate::replay::{replay, Replayer};

mod program;

use program::{Program, A};

/// What must be equal, and the findings that may only go missing.
#[derive(Debug, PartialEq)]
struct Answers {
    leaks: Vec<String>,
    counts: String,
    process: String,
    live_objects: Vec<String>,
    other: (u64, bool, Option<i32>, usize, u64),
}

type Findings = BTreeMap<String, u64>;

fn analyse(file: &[u8]) -> (Answers, Findings) {
    let r = replay(&Trace::new(file).unwrap());
    assert_eq!(r.error_count, 0, "{:?}", r.errors);
    let mut leaks: Vec<String> = r
        .leaks
        .iter()
        .map(|g| {
            format!(
                "{:?} {:?} {:?} {} bytes {} allocations first {:?} mapped {} retains {} due {}",
                g.stack,
                g.kind,
                g.at,
                g.bytes,
                g.allocations,
                g.first.seq,
                g.released_but_mapped,
                g.retains,
                g.releases_due
            )
        })
        .collect();
    leaks.sort();
    let mut live_objects = Vec::new();
    let mut findings = Findings::new();
    for f in &r.ordering {
        let what = format!("{:?}", f.check);
        if what.ends_with("Leak") {
            // Folded by site: which one stands for the others depends on the order of slots.
            live_objects.push(format!("{what} {:?} {:?} x{}", f.op.api, f.op.stack, f.count));
        } else {
            // Keyed as the analyzer folds them: unsynchronized work by its stream.
            let key = if f.check == crate::streams::Check::UnsynchronizedAtExit {
                let stream = match f.op.stream {
                    crate::streams::StreamName::Legacy => "legacy",
                    crate::streams::StreamName::PerThread(_) => "per-thread",
                    _ => "created",
                };
                format!("{what} {stream} {:?} {:?}", f.created.map(|c| c.stack), f.moment)
            } else {
                // A race is the same whichever side came first.
                let mut calls = [
                    Some((f.op.api, f.op.stack, f.op.site)),
                    f.other.map(|o| (o.api, o.stack, o.site)),
                ];
                if f.is_race() {
                    calls.sort();
                }
                let site = f.allocation.map(|a| a.stack).or(f.created.map(|c| c.stack));
                format!("{what} {calls:?} {site:?} {:?}", f.moment)
            };
            *findings.entry(key).or_default() += f.count;
        }
    }
    live_objects.sort();
    for b in &r.bad_frees {
        let cause = match b.cause {
            BadFreeCause::NeverAllocated => "never".to_string(),
            BadFreeCause::DoubleFree(f) => format!("double {:?}", f.site.stack),
            BadFreeCause::WrongFamily(s) => format!("family {:?}", s.stack),
        };
        *findings
            .entry(format!("BadFree {:?} {:?} {cause} {:?}", b.api, b.stack, b.result))
            .or_default() += b.count;
    }
    let answers = Answers {
        leaks,
        counts: format!("{:?}", r.counts),
        process: format!("{:?}", r.process),
        live_objects,
        other: (r.lost_events, r.exited, r.exit_code, r.pool_leaks.len(), r.error_count),
    };
    (answers, findings)
}

#[test]
fn a_checkpoint_and_the_rest_answer_as_the_whole_trace_does() {
    for seed in 0..200u64 {
        let program = Program::new(seed, 60 + (seed as usize % 5) * 40);
        let whole = program.file();
        let (want, all_findings) = analyse(&whole);
        let last = program.records.last().unwrap().1.seq.0;
        for k in 1..8u64 {
            let at = Seq(last * k / 8);
            let segment = cut(&Trace::new(&whole).unwrap(), at, 1, TraceId(seed)).unwrap();
            let (got, findings) = analyse(&segment);
            assert_eq!(got, want, "seed {seed}, cut after {at:?}");
            for (f, n) in &findings {
                let whole_n = all_findings.get(f).copied().unwrap_or(0);
                assert!(
                    *n <= whole_n,
                    "seed {seed}, cut after {at:?}: {f} x{n} (the whole trace: x{whole_n})"
                );
            }
        }
    }
}

/// Records of the run that the checkpoint at `at` would keep, and the rest: a stream-ordered
/// allocation on stream 0x51 freed on stream 0x52 after an event orders the two.
fn ordered_then(free_stream_after: u64) -> (Vec<u8>, Seq) {
    let mut p = Program::new(0, 0);
    p.records.retain(|(_, r)| !matches!(r.body, Body::Exit(_)));
    let tid = 100;
    p.push(
        tid,
        StreamCreate {
            api: Api::cuStreamCreate,
            result: CuResult(0),
            stream: Stream(0x51),
            flags: 1,
            priority: 0,
            stack: StackId(7),
        },
    );
    p.push(
        tid,
        StreamCreate {
            api: Api::cuStreamCreate,
            result: CuResult(0),
            stream: Stream(0x52),
            flags: 1,
            priority: 0,
            stack: StackId(7),
        },
    );
    p.push(
        tid,
        EventCreate {
            api: Api::cuEventCreate,
            result: CuResult(0),
            event: Event(0xe),
            flags: 0,
            stack: StackId(8),
        },
    );
    p.alloc(tid, Api::cuMemAllocAsync, A, 0x51, 0x7100_0000, 0);
    p.push(
        tid,
        EventRecord {
            api: Api::cuEventRecord,
            result: CuResult(0),
            event: Event(0xe),
            stream: Stream(0x51),
            flags: 0,
        },
    );
    p.push(
        tid,
        StreamWait {
            api: Api::cuStreamWaitEvent,
            result: CuResult(0),
            stream: Stream(0x52),
            event: Event(0xe),
            flags: 0,
        },
    );
    p.free(tid, Api::cuMemFreeAsync, 0x7100_0000, 0x52, 0);
    let at = p.records.last().unwrap().1.seq;
    // After the cut: an allocation on 0x51 freed on `free_stream_after` with no edge.
    p.alloc(tid, Api::cuMemAllocAsync, A, 0x51, 0x7200_0000, 0);
    p.free(tid, Api::cuMemFreeAsync, 0x7200_0000, free_stream_after, 0);
    (p.file(), at)
}

/// The cause of a race that a checkpointed trace found and the whole trace did not: the
/// checkpoint keeps a freed allocation and its free (to name the victim of a later double
/// free) but not the event that ordered them, so their replay alone looked unordered. What
/// the replay of kept records finds is forgotten at the checkpoint.
#[test]
fn kept_records_replayed_without_the_waits_that_ordered_them_find_nothing() {
    let (whole, at) = ordered_then(0x51);
    let (want, whole_findings) = analyse(&whole);
    assert!(
        !whole_findings.keys().any(|k| k.starts_with("UnorderedFree")),
        "{whole_findings:?}"
    );
    // Cut after the first free: its allocation and free are kept, the event's record and
    // wait are dropped.
    let segment = cut(&Trace::new(&whole).unwrap(), at, 1, TraceId(1)).unwrap();
    let kept: Vec<&str> = Trace::new(&segment)
        .unwrap()
        .records()
        .map(|e| e.unwrap().record)
        .filter(|r| r.seq <= at)
        .map(|r| r.body.name())
        .filter(|n| matches!(*n, "Alloc" | "Free" | "StreamWait"))
        .collect();
    assert_eq!(kept, ["Alloc", "Free"], "the wait is dropped");
    let (got, findings) = analyse(&segment);
    assert_eq!(got, want);
    assert!(!findings.keys().any(|k| k.starts_with("UnorderedFree")), "{findings:?}");
}

/// Its twin: a free after the checkpoint that nothing orders is still found.
#[test]
fn an_unordered_free_after_a_checkpoint_is_still_found() {
    let (whole, at) = ordered_then(0x52);
    let segment = cut(&Trace::new(&whole).unwrap(), at, 1, TraceId(1)).unwrap();
    let (_, findings) = analyse(&segment);
    assert!(findings.keys().any(|k| k.starts_with("UnorderedFree")), "{findings:?}");
}

/// The process's peak live bytes (the summary's, the memory pass's) of a trace.
fn peaks(file: &[u8]) -> (u64, u64) {
    let mut replayer = Replayer::new(Some(TrackerOptions::default()));
    for e in Trace::new(file).unwrap().records() {
        let Entry { tid, record, .. } = e.unwrap();
        replayer.apply(tid, &record);
    }
    let r = replayer.finish();
    (r.peak_bytes, r.memory.map_or(0, |m| m.peak.0))
}

#[test]
fn the_peak_of_a_checkpoint_and_the_rest_is_the_whole_run_s() {
    let mut exact = 0;
    for seed in 0..100u64 {
        let program = Program::new(seed, 60 + (seed as usize % 5) * 40);
        let whole = program.file();
        let want = peaks(&whole);
        // Memory that graph launches allocate is not in the history: never more, maybe less.
        let graphs = program
            .records
            .iter()
            .any(|(_, r)| matches!(&r.body, Body::Launch(l) if is_graph_launch(l.api)));
        exact += u64::from(!graphs);
        let last = program.records.last().unwrap().1.seq.0;
        for k in 1..8u64 {
            let at = Seq(last * k / 8);
            let segment = cut(&Trace::new(&whole).unwrap(), at, 1, TraceId(seed)).unwrap();
            let got = peaks(&segment);
            if graphs {
                assert!(got.0 <= want.0 && got.1 <= want.1, "seed {seed}, cut after {at:?}");
            } else {
                assert_eq!(got, want, "seed {seed}, cut after {at:?}");
            }
        }
    }
    assert!(exact > 30, "{exact} programs without graph launches");
}
