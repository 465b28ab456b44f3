//! What a checkpoint keeps ([`Compacted`]), and the reading of a kept record on its own.

use crate::fields::{BlockState, StackId, Value};
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
pub(super) fn stacks_of(body: &Body<'_>, out: &mut Vec<StackId>) {
    body.visit(&mut |name, v| {
        if let ("stack", Value::U(id)) = (name, v) {
            if id != 0 {
                out.push(StackId(id as u32));
            }
        }
    });
}
