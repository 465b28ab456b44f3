//! The end of a history: which stacks and code objects stay, and the checkpoint record.

use std::borrow::Cow;
use std::collections::HashSet;

use super::Compactor;
use crate::fields::{Addrs, BlockState, StackId, Value};
use crate::record::{Body, Checkpoint, Record, SiteHistory};

/// What a compactor kept, and the record that ends the checkpoint.
#[derive(Debug, Clone)]
pub struct Compacted {
    pub(super) kept: Vec<(u32, u64, Vec<u8>)>,
    /// The history of live bytes ([`super::history`]), written after the kept records.
    pub history: Vec<SiteHistory<'static>>,
    /// The checkpoint's last record (its sequence number is `as_of`).
    pub checkpoint: Checkpoint<'static>,
    /// The time of the last record covered.
    pub time_ns: u64,
}

impl Compacted {
    /// The kept records in order, with their threads.
    pub fn records(&self) -> Vec<(u32, Record<'_>)> {
        self.kept
            .iter()
            .filter_map(|(tid, _, bytes)| {
                let (record, _) = decode_alone(bytes)?;
                Some((*tid, record))
            })
            .collect()
    }
}

pub(super) fn decode_alone(bytes: &[u8]) -> Option<(Record<'_>, usize)> {
    Record::decode(bytes, 0, &mut BlockState::default()).ok().flatten()
}

/// The stacks a body names.
fn stacks_of(body: &Body<'_>, out: &mut Vec<StackId>) {
    body.visit(&mut |name, v| {
        if let ("stack", Value::U(id)) = (name, v) {
            if id != 0 {
                out.push(StackId(id as u32));
            }
        }
    });
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
