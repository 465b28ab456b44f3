//! What the stream-ordering analysis finds, folded to one finding per root cause.

use gpuleak_format::{Api, Seq, StackId};

use super::graph_accesses::NodeSite;
use super::memory::{AllocInfo, Op};
use super::StreamName;
use crate::hash::HashMap;

/// The stream-ordering checks, named after the findings they produce.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Check {
    /// Memory freed on a stream with no happens-before edge from its last use.
    UnorderedFree,
    /// A copy, memset or launch touched memory already freed.
    UseAfterFree,
    /// Two streams touched one allocation, at least one writing, with no ordering.
    CrossStreamRace,
    /// Two nodes of one graph touched one allocation, at least one writing, with no path
    /// between them in the graph.
    GraphRace,
    /// A wait or synchronize on an event that was never recorded.
    WaitOnUnrecordedEvent,
    /// A stream created and never destroyed.
    StreamLeak,
    /// An event created and never destroyed.
    EventLeak,
    /// An external semaphore imported and never destroyed.
    SemaphoreLeak,
    /// Work queued on a stream that the host never waited for before exit or teardown.
    UnsynchronizedAtExit,
}

impl Check {
    /// Every check.
    pub const ALL: [Check; 9] = [
        Check::UnorderedFree,
        Check::UseAfterFree,
        Check::CrossStreamRace,
        Check::GraphRace,
        Check::WaitOnUnrecordedEvent,
        Check::StreamLeak,
        Check::EventLeak,
        Check::SemaphoreLeak,
        Check::UnsynchronizedAtExit,
    ];

    /// The `check` name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Check::UnorderedFree => "unordered-free",
            Check::UseAfterFree => "use-after-free",
            Check::CrossStreamRace => "cross-stream-race",
            Check::GraphRace => "graph-race",
            Check::WaitOnUnrecordedEvent => "wait-on-unrecorded-event",
            Check::StreamLeak => "stream-leak",
            Check::EventLeak => "event-leak",
            Check::SemaphoreLeak => "semaphore-leak",
            Check::UnsynchronizedAtExit => "unsynchronized-at-exit",
        }
    }

    /// Errors are bugs whatever the timing; warnings are very likely bugs.
    pub fn is_error(self) -> bool {
        matches!(
            self,
            Check::UnorderedFree | Check::UseAfterFree | Check::CrossStreamRace | Check::GraphRace
        )
    }
}

/// A stream or event, created by a call with a stack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Created {
    /// The creating call.
    pub api: Api,
    /// Its stack.
    pub stack: StackId,
    /// The handle.
    pub handle: u64,
    /// Creation flags.
    pub flags: u32,
    /// When.
    pub seq: Seq,
    /// Calling thread.
    pub tid: u32,
}

/// When unsynchronized work was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Moment {
    /// At the end of the trace.
    Exit,
    /// At a context teardown by this call.
    Teardown(Api),
}

/// One stream-ordering finding (several occurrences of one root cause folded together).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamFinding {
    /// Which check.
    pub check: Check,
    /// The call at fault: the free, the access, the wait, or (leaks) the creation; for
    /// unsynchronized work, the last operation queued.
    pub op: Op,
    /// Address involved (0 when none).
    pub ptr: u64,
    /// The other side: the last use (unordered free), the earlier access (race), the free
    /// (use after free).
    pub other: Option<Op>,
    /// The allocation involved.
    pub allocation: Option<AllocInfo>,
    /// The stream or event involved, and its creation.
    pub created: Option<Created>,
    /// For unsynchronized work: exit or teardown.
    pub moment: Option<Moment>,
    /// Occurrences folded in.
    pub count: u64,
    /// For a race: whether this call's access, and the other's, is a kernel's parameter (of a
    /// kernel launch, or of a kernel node of a launched graph), which the driver does not say
    /// it writes.
    pub kernel_sides: (bool, bool),
    /// For a graph launch's access, this call's and the other's: the node at fault, where it
    /// was captured or added (filled in when the replay ends).
    pub nodes: [Option<NodeSite>; 2],
}

impl StreamFinding {
    /// Whether it is a race (between streams, or between the nodes of one graph).
    pub fn is_race(&self) -> bool {
        matches!(self.check, Check::CrossStreamRace | Check::GraphRace)
    }

    /// Whether both calls are one graph launch's nodes (a race inside a graph, or a free node
    /// of a graph and a node of the same graph that uses the memory it frees).
    pub fn inside_graph(&self) -> bool {
        match self.check {
            Check::GraphRace => true,
            Check::UnorderedFree | Check::UseAfterFree => self.other.is_some_and(|o| o.seq == self.op.seq),
            _ => false,
        }
    }

    /// A race between two kernels: neither side is known to write (a copy's destination, a
    /// memset and a stream-ordered allocation are, also as nodes of a graph), so both may only
    /// read, as two streams that share a model's weights do.
    pub fn kernels_only(&self) -> bool {
        self.is_race() && self.kernel_sides == (true, true)
    }

    /// A race where either side is a kernel's parameter.
    pub fn kernel_involved(&self) -> bool {
        self.is_race() && (self.kernel_sides.0 || self.kernel_sides.1)
    }

    /// Whether the finding is an error: a bug whatever the timing. A race between two kernels
    /// is a warning (it is one only if either kernel writes the bytes both touch).
    pub fn is_error(&self) -> bool {
        self.check.is_error() && !self.kernels_only()
    }
}

/// A call as a root cause names it: its API, its stack, and the graph node it came from.
type Call = (Api, StackId, u32);

type Key = (Check, Call, Call, StackId, u64);

/// Findings as they are met, folded by root cause.
#[derive(Debug, Default)]
pub struct Found {
    list: Vec<StreamFinding>,
    index: HashMap<Key, usize>,
}

impl Found {
    /// Adds an occurrence; folds it into an earlier one with the same root cause: the same
    /// check, calls and stacks (the stacks of the calls when captured, of the allocation,
    /// stream or event otherwise).
    pub fn add(&mut self, f: StreamFinding) {
        let call = |o: &Op| (o.api, o.stack, o.site);
        let none = (Api::NONE, StackId::NONE, 0);
        let (a, b) = match f.other {
            // A race is the same whichever side came first.
            Some(o) if f.is_race() && call(&o) > call(&f.op) => (call(&f.op), call(&o)),
            Some(o) if f.is_race() => (call(&o), call(&f.op)),
            Some(o) => (call(&f.op), call(&o)),
            None => (call(&f.op), none),
        };
        let site = f
            .allocation
            .map(|a| a.stack)
            .or(f.created.map(|c| c.stack))
            .unwrap_or(StackId::NONE);
        let moment = match f.moment {
            None => 0,
            Some(Moment::Exit) => 1,
            Some(Moment::Teardown(api)) => 2 + u64::from(api.0),
        };
        // Unsynchronized work: the root cause is the stream (its creation site, or which
        // default stream), whatever was queued last.
        let (a, b, site) = if f.check == Check::UnsynchronizedAtExit {
            let kind = match f.op.stream {
                StreamName::Legacy => Api(1),
                StreamName::PerThread(_) => Api(2),
                StreamName::Handle(_) | StreamName::Host => Api(3),
            };
            let created = f.created.map_or(StackId::NONE, |c| c.stack);
            ((kind, StackId::NONE, 0), none, created)
        } else {
            (a, b, site)
        };
        let key = (f.check, a, b, site, moment);
        match self.index.get(&key) {
            Some(&i) => self.list[i].count = self.list[i].count.saturating_add(f.count),
            None => {
                self.index.insert(key, self.list.len());
                self.list.push(f);
            }
        }
    }

    /// Everything found, in order of first occurrence, with the graph nodes their calls came
    /// from named by `site`.
    pub fn into_list(self, site: impl Fn(u32) -> Option<NodeSite>) -> Vec<StreamFinding> {
        let mut list = self.list;
        for f in &mut list {
            f.nodes = [site(f.op.site), f.other.and_then(|o| site(o.site))];
        }
        list
    }
}
