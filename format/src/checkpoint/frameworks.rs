//! Framework states in a checkpoint: the last complete state of each framework stays, with
//! the states still being written; an older one is dropped once a newer one is complete.
//!
//! A state is its `FrameworkState` record, the records that name it (`state`) and its
//! `FrameworkEnd`; readers use a state only once its end is read, and each framework's
//! latest state is the one a report judges tensors by.

use std::collections::HashMap;

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

/// What the compactor does with a framework record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Step {
    /// Not a framework record.
    Ignore,
    /// A record of a state dropped (or never begun): counted with the dropped.
    Count,
    /// Kept, then given to [`States::kept`].
    Keep,
}

impl States {
    /// What to do with `record` (kinds 70 to 76).
    pub(super) fn step(&self, record: &Record<'_>) -> Step {
        match (state_of(&record.body), &record.body) {
            (None, _) => Step::Ignore,
            (Some(_), Body::FrameworkState(_)) => Step::Keep,
            (Some(id), _) if self.states.contains_key(&id) => Step::Keep,
            (Some(_), _) => Step::Count,
        }
    }

    /// `record`, kept as `seq`, joins its state; returns the kept records to release: a
    /// state begun again under the same id (the first was never finished, or the writer
    /// restarted), and once a state is complete, the framework's older states, complete or not.
    pub(super) fn kept(&mut self, record: &Record<'_>, seq: u64) -> Vec<u64> {
        let Some(id) = state_of(&record.body) else {
            return Vec::new();
        };
        if let Body::FrameworkState(s) = &record.body {
            let state = State {
                framework: s.framework.to_string(),
                seqs: vec![seq],
            };
            return self.states.insert(id, state).map(|old| old.seqs).unwrap_or_default();
        }
        let Some(state) = self.states.get_mut(&id) else {
            return Vec::new(); // never: `step` said Keep only for a known state
        };
        state.seqs.push(seq);
        if !matches!(record.body, Body::FrameworkEnd(_)) {
            return Vec::new();
        }
        let framework = state.framework.clone();
        let older: Vec<u64> = self
            .states
            .iter()
            .filter(|(other, s)| **other < id && s.framework == framework)
            .map(|(other, _)| *other)
            .collect();
        older
            .into_iter()
            .filter_map(|other| self.states.remove(&other))
            .flat_map(|s| s.seqs)
            .collect()
    }
}
