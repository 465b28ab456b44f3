//! Framework states in a checkpoint: the last complete state of each framework stays, with
//! the states still being written; an older one is dropped once a newer one is complete.
//!
//! A state is its `FrameworkState` record, the records that name it (`state`) and its
//! `FrameworkEnd`; readers use a state only once its end is read, and each framework's
//! latest state is the one a report judges tensors by.

use std::collections::HashMap;

use super::Compactor;
use crate::record::{Body, Record};

/// The framework states kept so far.
#[derive(Debug, Default)]
pub(super) struct States {
    /// Each state kept: its framework and its kept records.
    states: HashMap<u64, State>,
}

#[derive(Debug)]
struct State {
    framework: String,
    seqs: Vec<u64>,
}

/// The state a framework record belongs to.
fn state_of(body: &Body<'_>) -> Option<u64> {
    Some(match body {
        Body::FrameworkState(s) => s.id,
        Body::FrameworkSegment(s) => s.state,
        Body::FrameworkBlocks(b) => b.state,
        Body::FrameworkFrames(f) => f.state,
        Body::FrameworkStats(s) => s.state,
        Body::FrameworkOom(o) => o.state,
        Body::FrameworkEnd(e) => e.state,
        _ => return None,
    })
}

impl Compactor {
    /// A framework record (kinds 70 to 76).
    pub(super) fn framework(&mut self, tid: u32, record: &Record<'_>) {
        let Some(id) = state_of(&record.body) else { return };
        if let Body::FrameworkState(s) = &record.body {
            let seq = self.keep(tid, record, 0);
            let state = State {
                framework: s.framework.to_string(),
                seqs: vec![seq],
            };
            // The same id again: the first was never finished, or the writer restarted.
            if let Some(old) = self.frameworks.states.insert(id, state) {
                old.seqs.into_iter().for_each(|s| self.release(s));
            }
            return;
        }
        if !self.frameworks.states.contains_key(&id) {
            // A record of a state dropped (or never begun): counted with the dropped.
            return self.count((record.body.kind(), 0, 0));
        }
        let seq = self.keep(tid, record, 0);
        let Some(state) = self.frameworks.states.get_mut(&id) else {
            return;
        };
        state.seqs.push(seq);
        if !matches!(record.body, Body::FrameworkEnd(_)) {
            return;
        }
        // Complete: the framework's older states, complete or not, go.
        let framework = state.framework.clone();
        let older: Vec<u64> = self
            .frameworks
            .states
            .iter()
            .filter(|(other, s)| **other < id && s.framework == framework)
            .map(|(other, _)| *other)
            .collect();
        for other in older {
            if let Some(s) = self.frameworks.states.remove(&other) {
                s.seqs.into_iter().for_each(|s| self.release(s));
            }
        }
    }
}
