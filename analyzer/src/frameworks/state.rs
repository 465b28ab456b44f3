//! Framework states as the trace writes them (records 70 to 76), gathered by the replay.

use std::collections::HashMap;

use gpuleak_format::framework::Block;
use gpuleak_format::{Body, StackId};

/// The most complete states kept per trace; past it the oldest that is neither the first nor
/// an out-of-memory state is dropped (growth needs the first and the latest ones).
pub const KEPT_STATES: usize = 256;

/// One frame of a framework's Python stack.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct PyFrame {
    /// `co_filename`.
    pub file: String,
    /// Function.
    pub function: String,
    /// Line.
    pub line: u32,
}

/// A segment of the allocator, with its blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Segment {
    /// Device ordinal.
    pub device: i32,
    /// First byte.
    pub address: u64,
    /// Bytes.
    pub size: u64,
    /// Blocks in address order.
    pub blocks: Vec<Block>,
}

/// The framework's own counters for one device.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stats {
    /// Device ordinal.
    pub device: i32,
    /// Bytes in live tensors, as the framework counts them.
    pub allocated: u64,
    /// Bytes the allocator holds.
    pub reserved: u64,
    /// The highest `reserved` so far.
    pub peak_reserved: u64,
}

/// What the framework's out-of-memory observer said.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Oom {
    /// Device ordinal.
    pub device: i32,
    /// Bytes asked for.
    pub requested: u64,
    /// Bytes the framework held on the device.
    pub device_allocated: u64,
    /// Bytes free on the device.
    pub device_free: u64,
}

/// A driver allocation live when a state was complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverAlloc {
    /// Address.
    pub ptr: u64,
    /// Bytes.
    pub size: u64,
    /// Allocation stack.
    pub stack: StackId,
}

/// One complete state of a framework's allocator.
#[derive(Debug, Clone, Default)]
pub struct State {
    /// Its number in the process.
    pub id: u64,
    /// The framework (`torch`).
    pub framework: String,
    /// Why it was written (`exit`, `snapshot`, `oom`...).
    pub reason: String,
    /// The Snapshot record written with it (0: none).
    pub snapshot: u64,
    /// Sequence number of its end.
    pub seq: u64,
    /// Segments.
    pub segments: Vec<Segment>,
    /// Python stacks by id.
    pub frames: HashMap<u32, Vec<PyFrame>>,
    /// Counters per device.
    pub stats: Vec<Stats>,
    /// The out-of-memory event it was written for.
    pub oom: Option<Oom>,
    /// Device memory live in the driver's view when the state was complete (every owned
    /// allocation, inside the framework's segments or not).
    pub driver: Vec<DriverAlloc>,
}

/// The states of one trace.
#[derive(Debug, Clone, Default)]
pub struct States {
    open: HashMap<u64, State>,
    /// Complete states, oldest first.
    pub complete: Vec<State>,
    /// States dropped past [`KEPT_STATES`].
    pub dropped: u64,
}

impl States {
    /// Takes one record of kind 70 to 76; the state it completes, if any, which the caller
    /// completes with [`States::complete`] and the driver's live allocations.
    pub fn apply(&mut self, body: &Body<'_>) -> Option<u64> {
        match body {
            Body::FrameworkState(s) => {
                self.open.insert(
                    s.id,
                    State {
                        id: s.id,
                        framework: s.framework.to_string(),
                        reason: s.reason.to_string(),
                        snapshot: s.snapshot,
                        ..State::default()
                    },
                );
            }
            Body::FrameworkSegment(s) => {
                if let Some(st) = self.open.get_mut(&s.state) {
                    st.segments.push(Segment {
                        device: s.device,
                        address: s.address,
                        size: s.size,
                        blocks: Vec::new(),
                    });
                }
            }
            Body::FrameworkBlocks(b) => {
                if let Some(seg) = self
                    .open
                    .get_mut(&b.state)
                    .and_then(|st| st.segments.iter_mut().rev().find(|s| s.address == b.segment))
                {
                    seg.blocks.extend(b.iter());
                }
            }
            Body::FrameworkFrames(f) => {
                if let Some(st) = self.open.get_mut(&f.state) {
                    let frames = f
                        .iter()
                        .map(|p| PyFrame {
                            file: p.file.to_string(),
                            function: p.function.to_string(),
                            line: u32::try_from(p.line).unwrap_or(u32::MAX),
                        })
                        .collect();
                    st.frames.insert(f.id, frames);
                }
            }
            Body::FrameworkStats(s) => {
                if let Some(st) = self.open.get_mut(&s.state) {
                    st.stats.push(Stats {
                        device: s.device,
                        allocated: s.allocated,
                        reserved: s.reserved,
                        peak_reserved: s.peak_reserved,
                    });
                }
            }
            Body::FrameworkOom(o) => {
                if let Some(st) = self.open.get_mut(&o.state) {
                    st.oom = Some(Oom {
                        device: o.device,
                        requested: o.requested,
                        device_allocated: o.device_allocated,
                        device_free: o.device_free,
                    });
                }
            }
            Body::FrameworkEnd(e) if self.open.contains_key(&e.state) => return Some(e.state),
            _ => {}
        }
        None
    }

    /// Completes state `id` at `seq` with the driver's live device allocations.
    pub fn complete(&mut self, id: u64, seq: u64, driver: Vec<DriverAlloc>) {
        let Some(mut st) = self.open.remove(&id) else { return };
        st.seq = seq;
        st.driver = driver;
        if self.complete.len() >= KEPT_STATES {
            if let Some(i) = (1..self.complete.len()).find(|&i| self.complete[i].oom.is_none()) {
                self.complete.remove(i);
                self.dropped += 1;
            }
        }
        self.complete.push(st);
    }

    /// Whether there is any complete state.
    pub fn is_empty(&self) -> bool {
        self.complete.is_empty()
    }

    /// The latest complete state that is not an out-of-memory one.
    fn latest(&self) -> Option<&State> {
        self.complete.iter().rev().find(|s| s.oom.is_none())
    }

    /// The framework of [`States::held_by_framework`]'s state.
    pub fn latest_framework(&self) -> Option<&str> {
        self.latest().map(|s| s.framework.as_str())
    }

    /// The sequence number of the latest complete state's end, and its segment addresses
    /// (the driver allocations that the framework held then).
    pub fn held_by_framework(&self) -> Option<(u64, std::collections::HashSet<u64>)> {
        let last = self.latest()?;
        Some((last.seq, last.segments.iter().map(|s| s.address).collect()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuleak_format::{Addrs, FrameworkBlocks, FrameworkEnd, FrameworkFrames, FrameworkSegment, FrameworkState};

    fn begin(states: &mut States, id: u64, reason: &str) {
        let s = FrameworkState {
            id,
            layout: 1,
            framework: "torch".into(),
            reason: reason.into(),
            snapshot: 0,
        };
        assert_eq!(states.apply(&s.into()), None);
    }

    #[test]
    fn a_state_counts_only_once_its_end_is_read() {
        let mut states = States::default();
        begin(&mut states, 1, "exit");
        let seg = FrameworkSegment {
            state: 1,
            device: 0,
            address: 0x1000,
            size: 2048,
            stream: 0,
            pool: 1,
        };
        states.apply(&seg.into());
        let blocks = FrameworkBlocks {
            state: 1,
            segment: 0x1000,
            blocks: Addrs(vec![0, 512, 500, 1, 1, 512, 1536, 1536, 3, 0].into()),
        };
        states.apply(&blocks.into());
        let frames = FrameworkFrames {
            id: 1,
            state: 1,
            names: vec![
                "/lib/torch/nn.py".into(),
                "forward".into(),
                "train.py".into(),
                "step".into(),
            ],
            lines: Addrs(vec![10, 18].into()),
        };
        states.apply(&frames.into());
        assert!(states.is_empty(), "no end yet");
        assert!(states.held_by_framework().is_none());
        let end = FrameworkEnd {
            state: 1,
            segments: 1,
            blocks: 2,
        };
        assert_eq!(states.apply(&end.into()), Some(1));
        states.complete(
            1,
            9,
            vec![
                DriverAlloc {
                    ptr: 0x1000,
                    size: 2048,
                    stack: StackId(1),
                },
                DriverAlloc {
                    ptr: 0x9000,
                    size: 64,
                    stack: StackId(2),
                },
            ],
        );
        let (seq, held) = states.held_by_framework().unwrap();
        assert_eq!((seq, held.len()), (9, 1));
        assert_eq!(states.latest_framework(), Some("torch"));
        let v = crate::frameworks::join::view(&states.complete[0], &Default::default(), &Default::default());
        let d = &v.devices[0];
        assert_eq!((d.reserved, d.live_bytes, d.requested_bytes), (2048, 512, 500));
        assert_eq!((d.cached_free_bytes, d.largest_free_block), (1536, 1536));
        // The user's line, past the framework's own frame.
        assert_eq!(d.sites[0].line(), "train.py:18");
        assert_eq!(v.outside[0].owner, "the program");
        assert_eq!(v.outside[0].bytes, 64);
    }

    #[test]
    fn a_state_cut_short_is_ignored_and_the_next_one_counts() {
        let mut states = States::default();
        begin(&mut states, 1, "snapshot");
        begin(&mut states, 2, "exit");
        let end = FrameworkEnd {
            state: 2,
            segments: 0,
            blocks: 0,
        };
        assert_eq!(states.apply(&end.into()), Some(2));
        states.complete(2, 5, Vec::new());
        assert_eq!(states.complete.len(), 1);
        assert_eq!(states.complete[0].reason, "exit");
    }

    /// A driver allocation that is a segment of the framework's last state is the
    /// framework's; one made later at a given-back segment's address is not.
    #[test]
    fn the_replay_gives_the_framework_its_segments_and_nothing_allocated_after_its_state() {
        use crate::model::Model;
        use gpuleak_format::{Alloc, Api, Ctx, CuResult, Free, Ptr, Record, Seq, Stream};

        let alloc = |seq: u64, ptr: u64| Record {
            seq: Seq(seq),
            time_ns: 0,
            body: Alloc {
                api: Api::cuMemAlloc_v2,
                via: Api::NONE,
                result: CuResult::SUCCESS,
                ctx: Ctx(1),
                stream: Stream(0),
                ptr: Ptr(ptr),
                size: 2 << 20,
                stack: StackId(1),
                aux: 0,
            }
            .into(),
        };
        let at = |seq: u64, body: Body<'static>| Record {
            seq: Seq(seq),
            time_ns: 0,
            body,
        };
        let mut model = Model::new();
        model.apply(1, &alloc(1, 0xa00000));
        model.apply(1, &alloc(2, 0xc00000));
        let state = FrameworkState {
            id: 1,
            layout: 1,
            framework: "torch".into(),
            reason: "exit".into(),
            snapshot: 0,
        };
        model.apply(1, &at(3, state.into()));
        for address in [0xa00000, 0xc00000] {
            let seg = FrameworkSegment {
                state: 1,
                device: 0,
                address,
                size: 2 << 20,
                stream: 0,
                pool: 1,
            };
            model.apply(1, &at(4, seg.into()));
        }
        let end = FrameworkEnd {
            state: 1,
            segments: 2,
            blocks: 0,
        };
        model.apply(1, &at(5, end.into()));
        // The framework gives 0xc00000 back; the program allocates there for itself.
        let free = Free {
            api: Api::cuMemFree_v2,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            stream: Stream(0),
            ptr: Ptr(0xc00000),
            size: 0,
            stack: StackId::NONE,
        };
        model.apply(1, &at(6, free.into()));
        model.apply(1, &alloc(7, 0xc00000));
        let replay = model.finish();
        let mut held: Vec<(u64, bool)> = replay.leaks.iter().map(|g| (g.first.ptr.0, g.framework)).collect();
        held.sort_unstable();
        assert_eq!(held, vec![(0xa00000, true), (0xc00000, false)]);
        assert_eq!(replay.frameworks.complete[0].driver.len(), 2);
    }
}
