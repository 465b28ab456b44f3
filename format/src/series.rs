//! A segmented trace read as one: the segments of one process's trace put in order, and
//! checked for gaps.
//!
//! The first segment present is read whole (with its checkpoint, when it is not segment 0);
//! each later one without its checkpoint, which only repeats what the segments before it
//! hold. A missing segment between two present ones is an error naming the file after the gap.
//!
//! ```
//! use gpuleak_format::series::order;
//! use gpuleak_format::{Segment, TraceId};
//!
//! let seg = |number| Some(Segment { number, trace_id: TraceId(9) });
//! assert_eq!(order(&[seg(3), seg(2)]).unwrap(), [1, 0]);
//! assert_eq!(order(&[seg(2), seg(4)]).unwrap_err().at, 1);
//! ```

use std::fmt;

use crate::block::{Segment, TraceId};
use crate::error::DecodeError;
use crate::reader::Entry;

/// Why files cannot be read as one segmented trace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesError {
    /// Index of the file at fault in the list given.
    pub at: usize,
    /// What is wrong.
    pub kind: SeriesErrorKind,
}

/// What is wrong with a series of segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SeriesErrorKind {
    /// Segment `expected` is missing before this one (it was deleted, or never written).
    Missing {
        /// The number of the missing segment.
        expected: u64,
        /// This file's number.
        found: u64,
    },
    /// Two files claim the same segment number.
    Duplicate(u64),
    /// The file is a whole trace, or a segment of another trace.
    NotInSeries,
    /// The first segment left (this number, not 0) has no finished checkpoint: the history
    /// before it is lost (its writer was stopped while writing it, and the segment before it,
    /// which a bounded trace keeps until then, is gone).
    Unfinished(u64),
}

impl fmt::Display for SeriesError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.kind {
            SeriesErrorKind::Missing { expected, found } => write!(
                f,
                "segment {expected} is missing before segment {found}: the trace has a gap (a segment deleted or unreadable); report the segments from {found} on, or the ones before the gap"
            ),
            SeriesErrorKind::Duplicate(n) => write!(f, "segment {n} appears twice"),
            SeriesErrorKind::NotInSeries => write!(f, "not a segment of the same trace as the others"),
            SeriesErrorKind::Unfinished(n) => write!(
                f,
                "segment {n} is the first left and its checkpoint is unfinished: the history before it is missing (the segment before it was deleted or not copied)"
            ),
        }
    }
}

impl std::error::Error for SeriesError {}

/// The order in which to read `segments` (the header fields of each file, `None` for a
/// whole trace): indices into the list, lowest segment first. All must be segments of one
/// trace, with no number missing between the lowest and the highest.
pub fn order(segments: &[Option<Segment>]) -> Result<Vec<usize>, SeriesError> {
    let mut trace: Option<TraceId> = None;
    let mut numbered = Vec::with_capacity(segments.len());
    for (i, s) in segments.iter().enumerate() {
        let Some(s) = s else {
            return Err(SeriesError {
                at: i,
                kind: SeriesErrorKind::NotInSeries,
            });
        };
        if *trace.get_or_insert(s.trace_id) != s.trace_id {
            return Err(SeriesError {
                at: i,
                kind: SeriesErrorKind::NotInSeries,
            });
        }
        numbered.push((s.number, i));
    }
    numbered.sort_unstable();
    for pair in numbered.windows(2) {
        let ((a, _), (b, at)) = (pair[0], pair[1]);
        if a == b {
            return Err(SeriesError {
                at,
                kind: SeriesErrorKind::Duplicate(b),
            });
        }
        if b != a + 1 {
            return Err(SeriesError {
                at,
                kind: SeriesErrorKind::Missing {
                    expected: a + 1,
                    found: b,
                },
            });
        }
    }
    Ok(numbered.into_iter().map(|(_, i)| i).collect())
}

/// The records of several segments as one stream ordered by `seq`: each stream in order
/// (the first present segment read whole, the later ones past their checkpoints), merged.
/// Segments mostly follow one another, but a record numbered before a rotation and written
/// after it lands in the next segment, among records numbered after it; the merge puts it
/// back in its place. A stream's error is passed on as soon as it is met. Equal numbers (a
/// checkpoint's last record and the record it covers last) keep the order of the streams.
///
/// ```
/// use gpuleak_format::series::MergeBySeq;
/// use gpuleak_format::*;
///
/// let rec = |seq| Ok::<_, DecodeError>(Entry { tid: 1, offset: 0, record: Record {
///     seq: Seq(seq), time_ns: 0, body: Mark { name: "m".into(), value: 0 }.into() } });
/// let first = vec![rec(1), rec(2), rec(4)];
/// let next = vec![rec(3), rec(5)];
/// let merged: Vec<u64> = MergeBySeq::new(vec![first.into_iter(), next.into_iter()])
///     .map(|e| e.unwrap().record.seq.0)
///     .collect();
/// assert_eq!(merged, [1, 2, 3, 4, 5]);
/// ```
pub struct MergeBySeq<'a, I> {
    streams: Vec<I>,
    /// Each stream's next record, once looked at.
    peeked: Vec<Option<Entry<'a>>>,
    /// Streams that have ended.
    done: Vec<bool>,
}

impl<'a, I: Iterator<Item = Result<Entry<'a>, DecodeError>>> MergeBySeq<'a, I> {
    /// Merges `streams`, each already ordered by `seq`, given in segment order.
    pub fn new(streams: Vec<I>) -> Self {
        let n = streams.len();
        MergeBySeq {
            streams,
            peeked: (0..n).map(|_| None).collect(),
            done: vec![false; n],
        }
    }

    /// The next record or error, with the index of the stream it came from.
    pub fn next_from(&mut self) -> Option<(usize, Result<Entry<'a>, DecodeError>)> {
        if let ([stream], [done]) = (&mut self.streams[..], &mut self.done[..]) {
            // One stream (a whole trace, not a series): nothing to compare, and a record
            // passed straight through is not moved in and out of `peeked`.
            if *done {
                return None;
            }
            let next = stream.next();
            *done = next.is_none();
            return next.map(|r| (0, r));
        }
        let mut best: Option<(u64, usize)> = None;
        for i in 0..self.streams.len() {
            if self.peeked[i].is_none() && !self.done[i] {
                match self.streams[i].next() {
                    Some(Ok(e)) => self.peeked[i] = Some(e),
                    Some(Err(e)) => return Some((i, Err(e))),
                    None => self.done[i] = true,
                }
            }
            if let Some(e) = &self.peeked[i] {
                let seq = e.record.seq.0;
                if best.is_none_or(|(b, _)| seq < b) {
                    best = Some((seq, i));
                }
            }
        }
        let (_, i) = best?;
        self.peeked[i].take().map(|e| (i, Ok(e)))
    }
}

impl<'a, I: Iterator<Item = Result<Entry<'a>, DecodeError>>> Iterator for MergeBySeq<'a, I> {
    type Item = Result<Entry<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_from().map(|(_, r)| r)
    }
}
