//! The replay driver: each record of a trace, in sequence order, fed to every analysis that
//! observes it: the leak model ([`crate::model`]), the stream-ordering model
//! ([`crate::streams`]) and, when asked for, the memory pass ([`crate::memory`]).
//!
//! The three know nothing of each other. Two need something only the leak model decides, and
//! the driver passes it on: the memory pass follows the leak model's live set through its
//! decisions ([`crate::decision`]: which allocation a free ends, on which device, whether a
//! caching allocator made it), and the stream-ordering model learns the context teardowns
//! (work left on a destroyed context's streams), each right after it has seen the record that
//! made it.
//!
//! [`Replayer`] runs them all on one thread. The stream-ordering model is the costliest, so a
//! caller with a spare thread runs it apart (`report::load` does): [`Leaks`] runs the leak
//! model and the memory pass and hands over each teardown with the index of its record, and
//! [`Leaks::finish`] joins the stream-ordering model's findings into the same [`Replay`].
//!
//! ```
//! use gpuleak_analyzer::replay::Replayer;
//! use gpuleak_analyzer::memory::TrackerOptions;
//! use gpuleak_format::*;
//!
//! let mut replayer = Replayer::new(Some(TrackerOptions::default()));
//! let alloc = Alloc {
//!     api: Api::cuMemAlloc_v2, via: Api::NONE, result: CuResult::SUCCESS, ctx: Ctx(1),
//!     stream: Stream(0), ptr: Ptr(0x7000), size: 512, stack: StackId(1), aux: 0,
//! };
//! replayer.apply(1, &Record { seq: Seq(1), time_ns: 0, body: alloc.into() });
//! let replay = replayer.finish();
//! assert_eq!(replay.leaks[0].bytes, 512);
//! assert_eq!(replay.memory.map(|m| m.peak.0), Some(512));
//! ```

use std::ops::{Deref, DerefMut};

use gpuleak_format::{Api, DecodeError, Entry, Record, Trace};

use crate::decision::{Decision, Observer};
use crate::memory::{MemoryReplay, Tracker, TrackerOptions};
use crate::model::{LeakReplay, Model};
use crate::streams::{StreamFinding, Streams};

/// The result of a replay: the leak model's, which most readers want (and reach through
/// `Deref`: `replay.leaks`), the stream-ordering model's and the memory pass's.
#[derive(Debug, Clone, Default)]
pub struct Replay {
    /// What the leak model found.
    pub model: LeakReplay,
    /// Stream-ordering findings ([`crate::streams`]), in order of first occurrence.
    pub ordering: Vec<StreamFinding>,
    /// The memory pass's findings, when it ran.
    pub memory: Option<Box<MemoryReplay>>,
}

impl Deref for Replay {
    type Target = LeakReplay;

    fn deref(&self) -> &LeakReplay {
        &self.model
    }
}

impl DerefMut for Replay {
    fn deref_mut(&mut self) -> &mut LeakReplay {
        &mut self.model
    }
}

/// Every analysis of a replay on one thread.
#[derive(Debug)]
pub struct Replayer {
    leaks: Leaks,
    ordering: Streams,
}

impl Replayer {
    /// The leak model and the stream-ordering model, and the memory pass with `memory`'s
    /// options when given.
    pub fn new(memory: Option<TrackerOptions>) -> Replayer {
        Replayer {
            leaks: Leaks::new(memory),
            ordering: Streams::new(),
        }
    }

    /// Replays one record (records must come in sequence order).
    #[inline]
    pub fn apply(&mut self, tid: u32, record: &Record<'_>) {
        self.ordering.apply(tid, record);
        let ordering = &mut self.ordering;
        self.leaks.apply(tid, record, |api| ordering.teardown(api));
    }

    /// Notes a decoding error met while reading the trace.
    pub fn decode_error(&mut self, error: DecodeError) {
        self.leaks.decode_error(error);
    }

    /// Ends the replay.
    pub fn finish(self) -> Replay {
        self.leaks.finish(self.ordering.finish())
    }
}

/// The leak model and the memory pass that observes it: the replay without the
/// stream-ordering model, which the caller runs on the same records (on another thread).
#[derive(Debug)]
pub struct Leaks {
    model: Model,
    memory: Option<Box<Tracker>>,
}

impl Leaks {
    /// The leak model, and the memory pass with `memory`'s options when given.
    pub fn new(memory: Option<TrackerOptions>) -> Leaks {
        Leaks {
            model: Model::new(),
            memory: memory.map(|options| Box::new(Tracker::new(options))),
        }
    }

    /// Replays one record (records must come in sequence order), calling `teardown` with the
    /// API of a context teardown it makes: the stream-ordering model's
    /// [`Streams::teardown`], after its `apply` of the same record.
    #[inline]
    pub fn apply(&mut self, tid: u32, record: &Record<'_>, teardown: impl FnMut(Api)) {
        if let Some(m) = &mut self.memory {
            m.record(record);
        }
        let mut observers = Observers {
            memory: self.memory.as_deref_mut(),
            teardown,
        };
        self.model.apply_observed(tid, record, &mut observers);
    }

    /// Notes a decoding error met while reading the trace.
    pub fn decode_error(&mut self, error: DecodeError) {
        self.model.decode_error(error);
    }

    /// Ends the replay, with the stream-ordering model's findings on the same records.
    pub fn finish(self, ordering: Vec<StreamFinding>) -> Replay {
        Replay {
            model: self.model.finish(),
            ordering,
            memory: self.memory.map(|m| Box::new(m.finish())),
        }
    }
}

/// Where the leak model's decisions go: teardowns to the stream-ordering model (through the
/// caller), the rest to the memory pass when it runs.
struct Observers<'a, F> {
    memory: Option<&'a mut Tracker>,
    teardown: F,
}

impl<F: FnMut(Api)> Observer for Observers<'_, F> {
    #[inline]
    fn wants_memory(&self) -> bool {
        self.memory.is_some()
    }

    #[inline(always)]
    fn decided(&mut self, decision: Decision<'_>) {
        match decision {
            Decision::Teardown { api } => (self.teardown)(api),
            _ => {
                if let Some(m) = self.memory.as_deref_mut() {
                    m.decided(decision);
                }
            }
        }
    }
}

/// Replays every readable record of `trace` on one thread, without the memory pass; decoding
/// errors are kept in the result and the records around them are still replayed.
pub fn replay(trace: &Trace<'_>) -> Replay {
    let mut replayer = Replayer::new(None);
    for r in trace.records() {
        match r {
            Ok(Entry { tid, record, .. }) => replayer.apply(tid, &record),
            Err(e) => replayer.decode_error(e),
        }
    }
    replayer.finish()
}

#[cfg(test)]
mod tests {
    use gpuleak_format::{
        Addrs, Alloc, Body, Ctx, CtxCreate, CtxDestroy, CuResult, Launch, Ptr, Seq, StackId, Stream, StreamCreate,
    };

    use super::*;
    use crate::streams::Moment;

    /// A kernel queued on a stream and never waited for, its context destroyed (`destroy`) or
    /// left to the exit.
    fn records(destroy: bool) -> Vec<Record<'static>> {
        let mut bodies: Vec<Body<'static>> = vec![
            CtxCreate {
                api: Api::cuCtxCreate_v2,
                result: CuResult::SUCCESS,
                ctx: Ctx(1),
                device: 0,
                flags: 0,
            }
            .into(),
            StreamCreate {
                api: Api::cuStreamCreate,
                result: CuResult::SUCCESS,
                stream: Stream(0x50),
                flags: 1,
                priority: 0,
                stack: StackId(1),
            }
            .into(),
            Alloc {
                api: Api::cuMemAlloc_v2,
                via: Api::NONE,
                result: CuResult::SUCCESS,
                ctx: Ctx(1),
                stream: Stream(0),
                ptr: Ptr(0x7000),
                size: 512,
                stack: StackId(2),
                aux: 0,
            }
            .into(),
            Launch {
                api: Api::cuLaunchKernel,
                result: CuResult::SUCCESS,
                stream: Stream(0x50),
                function: 0x99,
                ptrs: Addrs(vec![0x7000].into()),
                stack: StackId(3),
            }
            .into(),
        ];
        if destroy {
            bodies.push(
                CtxDestroy {
                    api: Api::cuCtxDestroy_v2,
                    result: CuResult::SUCCESS,
                    ctx: Ctx(1),
                    device: 0,
                }
                .into(),
            );
        }
        bodies
            .into_iter()
            .enumerate()
            .map(|(i, body)| Record {
                seq: Seq(i as u64 + 1),
                time_ns: i as u64,
                body,
            })
            .collect()
    }

    fn replayed(records: &[Record<'_>]) -> Replay {
        let mut replayer = Replayer::new(Some(TrackerOptions::default()));
        for r in records {
            replayer.apply(1, r);
        }
        replayer.finish()
    }

    /// When unsynchronized work was reported.
    fn moments(replay: &Replay) -> Vec<Moment> {
        replay.ordering.iter().filter_map(|f| f.moment).collect()
    }

    /// The leak model decides the teardown; the stream-ordering model reports the work left on
    /// the context's streams at it, and the memory pass frees what it took.
    #[test]
    fn a_teardown_the_leak_model_decides_reaches_the_other_two() {
        let r = replayed(&records(true));
        assert_eq!(moments(&r), [Moment::Teardown(Api::cuCtxDestroy_v2)]);
        assert!(matches!(r.leaks[0].at, crate::model::LeakAt::Teardown { .. }));
        let memory = r.memory.expect("the memory pass ran");
        // The allocation and the teardown's free of it.
        assert_eq!((memory.peak.0, memory.events), (512, 2));
    }

    /// Its twin: without the teardown, the work is reported at exit and the memory is live.
    #[test]
    fn without_a_teardown_the_work_is_left_to_the_exit() {
        let r = replayed(&records(false));
        assert_eq!(moments(&r), [Moment::Exit]);
        assert_eq!(r.memory.expect("the memory pass ran").events, 1);
    }

    /// The split of the two-reader replay (the stream-ordering model apart, told of each
    /// teardown after its record) gives what one thread gives.
    #[test]
    fn the_leak_model_and_the_stream_model_apart_give_the_same_replay() {
        for destroy in [false, true] {
            let records = records(destroy);
            let mut leaks = Leaks::new(Some(TrackerOptions::default()));
            let mut streams = Streams::new();
            for r in &records {
                streams.apply(1, r);
                let mut teardowns = Vec::new();
                leaks.apply(1, r, |api| teardowns.push(api));
                for api in teardowns {
                    streams.teardown(api);
                }
            }
            let apart = leaks.finish(streams.finish());
            assert_eq!(
                format!("{apart:?}"),
                format!("{:?}", replayed(&records)),
                "destroy {destroy}"
            );
        }
    }
}
