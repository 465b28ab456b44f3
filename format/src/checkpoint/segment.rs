//! Writing a checkpoint's blocks, and cutting a whole trace into a segment that starts with
//! one (what a rotation writes, for tests and tools).

use super::{decode_alone, Compacted, Compactor};
use crate::block::{BlockCursor, FileHeader, Segment, TraceId, BLOCK_SIZE, CHECKPOINT_TID, HEADER_SIZE};
use crate::error::DecodeError;
use crate::reader::{Entry, Trace};
use crate::record::{Body, Record, Seq, Thread};

/// Appends blocks of `BLOCK_SIZE` bytes to `out` holding `records` in order, each block
/// started with thread id `block_tid`, and a `Thread` record before each record whose thread
/// is not the one before it in its block.
fn append_blocks<'a>(out: &mut Vec<u8>, block_tid: Option<u32>, records: impl Iterator<Item = (u32, Record<'a>)>) {
    let mut current: Option<(usize, BlockCursor, u32)> = None;
    for (tid, record) in records {
        loop {
            let fresh = current.is_none();
            let (at, cursor, writer) = match &mut current {
                Some(c) => c,
                None => {
                    let at = out.len();
                    out.resize(at + BLOCK_SIZE, 0);
                    let first = block_tid.unwrap_or(tid);
                    let cursor = BlockCursor::start(&mut out[at..], first, record.seq.0, record.time_ns);
                    current.insert((at, cursor, first))
                }
            };
            let block = &mut out[*at..*at + BLOCK_SIZE];
            let framed = if *writer != tid {
                let thread = Record {
                    seq: record.seq,
                    time_ns: record.time_ns,
                    body: Body::Thread(Thread { tid }),
                };
                let mut probe = *cursor;
                probe
                    .append(block, &thread)
                    .and_then(|()| probe.append(block, &record))
                    .map(|()| probe)
            } else {
                let mut probe = *cursor;
                probe.append(block, &record).map(|()| probe)
            };
            match framed {
                Ok(next) => {
                    *cursor = next;
                    *writer = tid;
                    break;
                }
                // No record is larger than a block (the shim's bound stacks and lists); one
                // that would be is left out rather than tried forever.
                Err(_) if fresh => {
                    // What the failed encoding left behind must not read as records.
                    block[cursor.pos..].fill(0);
                    break;
                }
                // The block is full: the record goes into a new one.
                Err(_) => current = None,
            }
        }
    }
}

/// Appends blocks holding `records` in order (each with its thread, framed by `Thread`
/// records where it changes): a whole trace's blocks, as one writer would have written them,
/// for tests and tools.
pub fn write_records<'a>(out: &mut Vec<u8>, records: impl Iterator<Item = (u32, Record<'a>)>) {
    append_blocks(out, None, records);
}

/// Appends the blocks of a checkpoint: `compacted`'s records, its history, then its
/// `Checkpoint` record (the history's and its seq `as_of`), in blocks of thread id [`CHECKPOINT_TID`].
pub fn write_blocks(compacted: &Compacted, out: &mut Vec<u8>) {
    let end = Record {
        seq: Seq(compacted.checkpoint.as_of),
        time_ns: compacted.time_ns,
        body: compacted.checkpoint.clone().into(),
    };
    let records = compacted
        .kept
        .iter()
        .filter_map(|(tid, _, bytes)| decode_alone(bytes).map(|(r, _)| (*tid, r)))
        .chain(compacted.history.iter().map(|h| {
            let record = Record {
                seq: Seq(compacted.checkpoint.as_of),
                time_ns: compacted.time_ns,
                body: h.clone().into(),
            };
            (CHECKPOINT_TID, record)
        }))
        .chain(std::iter::once((CHECKPOINT_TID, end)));
    append_blocks(out, Some(CHECKPOINT_TID), records);
}

/// Segment `number` of trace `trace_id`, made from a whole trace as a rotation after record
/// `at` would have made it: a header marked [`crate::FLAG_SEGMENTED`], a checkpoint of the
/// records up to `at` (dropping and counting what [`Compactor`] drops), and the records
/// after `at`, in order, in blocks of their own.
pub fn cut(trace: &Trace<'_>, at: Seq, number: u64, trace_id: TraceId) -> Result<Vec<u8>, DecodeError> {
    segment(trace, Some(at), Seq(u64::MAX), number, trace_id)
}

/// Segment `number` of trace `trace_id` holding the records of a whole trace after `after`
/// (with a checkpoint of those up to it; `None`: the first segment, from the start, with no
/// checkpoint) up to `until`: what rotations after `after` and after `until` would have left.
pub fn segment(
    trace: &Trace<'_>,
    after: Option<Seq>,
    until: Seq,
    number: u64,
    trace_id: TraceId,
) -> Result<Vec<u8>, DecodeError> {
    let mut compactor = Compactor::new();
    let mut rest = Vec::new();
    for entry in trace.records() {
        let Entry { tid, record, .. } = entry?;
        if after.is_some_and(|at| record.seq <= at) {
            compactor.add(tid, &record);
        } else if record.seq <= until {
            rest.push((tid, record));
        }
    }
    let mut out = vec![0u8; HEADER_SIZE];
    let h = trace.header();
    let header: &mut [u8; HEADER_SIZE] = (&mut out[..HEADER_SIZE]).try_into().expect("header size");
    FileHeader { ..*h }.write(header);
    Segment { number, trace_id }.write(header);
    if after.is_some() {
        write_blocks(&compactor.finish(number), &mut out);
    }
    append_blocks(&mut out, None, rest.into_iter());
    Ok(out)
}
