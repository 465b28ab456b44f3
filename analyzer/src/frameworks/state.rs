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

    /// The segment addresses of the latest complete state (the driver allocations that the
    /// framework held then).
    pub fn held_by_framework(&self) -> Option<(&str, std::collections::HashSet<u64>)> {
        let last = self.complete.iter().rev().find(|s| s.oom.is_none())?;
        Some((
            last.framework.as_str(),
            last.segments.iter().map(|s| s.address).collect(),
        ))
    }
}
