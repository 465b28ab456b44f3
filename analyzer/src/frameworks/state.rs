//! Framework states as the trace writes them (records 70 to 76), gathered by the replay.
//!
//! A segment at address 0 and of size 0 is unplaced: its blocks' offsets are their absolute
//! addresses (0: unknown). JAX writes its live buffers so, because XLA's allocator regions are
//! driver allocations that Python cannot see. [`States::complete_placing`] lays such blocks
//! into the driver allocations that contain them, and makes the framework's other driver
//! allocations segments of cached free memory.

use std::collections::{BTreeMap, HashMap, HashSet};

use gpuleak_format::framework::{Block, BlockState};
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

impl Segment {
    /// Whether its blocks are at absolute addresses, to be placed by the analyzer.
    pub fn is_unplaced(&self) -> bool {
        self.address == 0 && self.size == 0
    }

    /// Whether `address` lies in the segment.
    pub fn contains(&self, address: u64) -> bool {
        address >= self.address && address - self.address < self.size.max(1)
    }
}

/// The addresses a set of segments covers, asked in O(log n) each: the segments' starts in
/// order, and for each the furthest end of it and those before it (so overlapping segments of
/// a hostile trace are answered as [`Segment::contains`] answers, one by one).
#[derive(Debug, Default)]
pub struct Cover {
    starts: Vec<u64>,
    /// One past the last byte, as u128: a segment may end at the top of the address space.
    furthest: Vec<u128>,
}

impl Cover {
    /// The cover of `segments`.
    pub fn of<'a>(segments: impl IntoIterator<Item = &'a Segment>) -> Cover {
        let mut spans: Vec<(u64, u128)> = segments
            .into_iter()
            .map(|s| (s.address, u128::from(s.address) + u128::from(s.size.max(1))))
            .collect();
        spans.sort_unstable();
        let mut furthest = 0u128;
        let (starts, furthest) = spans
            .into_iter()
            .map(|(start, end)| {
                furthest = furthest.max(end);
                (start, furthest)
            })
            .unzip();
        Cover { starts, furthest }
    }

    /// Whether some segment holds `address`.
    pub fn contains(&self, address: u64) -> bool {
        let i = self.starts.partition_point(|&s| s <= address);
        i > 0 && self.furthest[i - 1] > u128::from(address)
    }
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

/// A driver allocation live when a state was complete: an allocation at an address, or one
/// mapping of a VMM physical handle (PyTorch's expandable segments map 2 MiB or 20 MiB
/// handles one after another into one reserved range), or a handle mapped nowhere.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DriverAlloc {
    /// Address (of the mapping, for a handle; nothing for a handle mapped nowhere).
    pub ptr: u64,
    /// Bytes (of the mapping, for a handle).
    pub size: u64,
    /// Allocation stack.
    pub stack: StackId,
    /// The VMM physical handle whose memory this is, if it is one.
    pub handle: Option<Handle>,
    /// The device the memory is on, when the trace says (its context's).
    pub device: Option<i32>,
}

/// A VMM physical handle behind a [`DriverAlloc`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Handle {
    /// The handle.
    pub id: u64,
    /// The memory it holds (counted once however many times it is mapped).
    pub bytes: u64,
    /// Whether the [`DriverAlloc`]'s address and size are one of its mappings.
    pub mapped: bool,
}

impl DriverAlloc {
    /// An allocation at an address (not a VMM handle).
    pub fn at(ptr: u64, size: u64, stack: StackId) -> DriverAlloc {
        DriverAlloc {
            ptr,
            size,
            stack,
            handle: None,
            device: None,
        }
    }

    /// The same, on `device`.
    pub fn on(self, device: i32) -> DriverAlloc {
        DriverAlloc {
            device: Some(device),
            ..self
        }
    }

    /// Its address, unless it is a handle mapped nowhere.
    pub fn address(&self) -> Option<u64> {
        match self.handle {
            Some(h) if !h.mapped => None,
            _ => Some(self.ptr),
        }
    }
}

/// What the framework held at its latest state: the driver allocations at its segments'
/// addresses and the VMM handles mapped inside them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Held {
    /// Sequence number of the state's end.
    pub seq: u64,
    /// Segment addresses.
    pub addresses: HashSet<u64>,
    /// Handles with a mapping inside a segment.
    pub handles: HashSet<u64>,
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
    /// The allocated blocks that are a library's workspace (by address: the library,
    /// [`gpuleak_format::LibWorkspace`]'s numbers), not tensors.
    pub workspaces: HashMap<u64, u32>,
}

/// The most workspace addresses a trace's replay remembers (PyTorch has one per cuBLAS
/// handle and stream); records of further addresses are ignored.
pub const KEPT_WORKSPACES: usize = 4096;

/// A library's workspace as the latest record at its address gave it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Workspace {
    /// [`gpuleak_format::LibWorkspace::CUBLAS`] or [`gpuleak_format::LibWorkspace::CUBLAS_LT`].
    pub library: u32,
    /// Bytes.
    pub size: u64,
}

/// The states of one trace.
#[derive(Debug, Clone, Default)]
pub struct States {
    open: HashMap<u64, State>,
    /// Complete states, oldest first.
    pub complete: Vec<State>,
    /// States dropped past [`KEPT_STATES`].
    pub dropped: u64,
    /// Library workspaces recorded so far, the latest record per address.
    pub workspaces: HashMap<u64, Workspace>,
}

impl States {
    /// Takes one record of kind 70 to 76 or 79; the state it completes, if any, which the
    /// caller completes with [`States::complete`] and the driver's live allocations.
    pub fn apply(&mut self, body: &Body<'_>) -> Option<u64> {
        match body {
            Body::LibWorkspace(w) => {
                let ws = Workspace {
                    library: w.library,
                    size: w.size,
                };
                if let Some(known) = self.workspaces.get_mut(&w.ptr) {
                    *known = ws;
                } else if self.workspaces.len() < KEPT_WORKSPACES {
                    self.workspaces.insert(w.ptr, ws);
                }
            }
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
        self.complete_placing(id, seq, driver, |_, _| false);
    }

    /// Completes state `id` as [`States::complete`] does, and places its unplaced blocks (see
    /// the module's overview): `framework_owns(framework, allocation)` says whether a driver
    /// allocation without a block is the framework's (by the modules in its stack).
    pub fn complete_placing(
        &mut self,
        id: u64,
        seq: u64,
        driver: Vec<DriverAlloc>,
        framework_owns: impl Fn(&str, &DriverAlloc) -> bool,
    ) {
        let Some(mut st) = self.open.remove(&id) else { return };
        st.seq = seq;
        st.driver = driver;
        if st.segments.iter().any(Segment::is_unplaced) {
            let framework = st.framework.clone();
            place(&mut st, |a| framework_owns(&framework, a));
        }
        st.workspaces = workspaces_in(&st.segments, &self.workspaces);
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

    /// What the framework held at the latest complete state: its segment addresses (the
    /// driver allocations it held then) and the VMM handles mapped inside its segments.
    pub fn held_by_framework(&self) -> Option<Held> {
        let last = self.latest()?;
        let placed: Vec<&Segment> = last.segments.iter().filter(|s| !s.is_unplaced()).collect();
        let cover = Cover::of(placed.iter().copied());
        let handles = last
            .driver
            .iter()
            .filter_map(|d| Some((d.handle?, d.address()?)))
            .filter(|(_, at)| cover.contains(*at))
            .map(|(h, _)| h.id)
            .collect();
        Some(Held {
            seq: last.seq,
            addresses: placed.iter().map(|s| s.address).collect(),
            handles,
        })
    }
}

/// The allocated blocks of `segments` that are workspaces: a block that starts at a
/// workspace's address and holds its size (a smaller block there is a tensor made after the
/// workspace was given back), by address, with the workspace's library.
fn workspaces_in(segments: &[Segment], known: &HashMap<u64, Workspace>) -> HashMap<u64, u32> {
    let mut out = HashMap::new();
    if known.is_empty() {
        return out;
    }
    for seg in segments.iter().filter(|s| !s.is_unplaced()) {
        for b in seg.blocks.iter().filter(|b| b.state == BlockState::Allocated) {
            let at = seg.address.wrapping_add(b.offset);
            if let Some(w) = known.get(&at).filter(|w| b.size >= w.size) {
                out.insert(at, w.library);
            }
        }
    }
    out
}

/// Lays the blocks of `st`'s unplaced segments into the driver allocations that contain
/// them; the gaps between them are cached free. The driver allocations that `owned` names are
/// segments too, wholly cached free when no block lies in them, as far as the framework's
/// counters say ([`fit_pool`]); each on the device its context is on (the first unplaced
/// segment's, when the trace does not say).
/// Blocks in no driver allocation stay in an unplaced segment per device.
fn place(st: &mut State, owned: impl Fn(&DriverAlloc) -> bool) {
    let (unplaced, kept): (Vec<Segment>, Vec<Segment>) = st.segments.drain(..).partition(Segment::is_unplaced);
    st.segments = kept;
    let device = unplaced.first().map_or(0, |s| s.device);
    let mut regions: Vec<&DriverAlloc> = st.driver.iter().filter(|d| d.address().is_some()).collect();
    regions.sort_unstable_by_key(|a| a.ptr);
    let mut placed: BTreeMap<u64, Segment> = BTreeMap::new();
    let mut left: BTreeMap<i32, Vec<Block>> = BTreeMap::new();
    for seg in unplaced {
        for b in seg.blocks {
            let i = regions.partition_point(|r| r.ptr <= b.offset);
            let region = i
                .checked_sub(1)
                .map(|i| regions[i])
                .filter(|r| b.offset != 0 && b.offset - r.ptr < r.size);
            match region {
                Some(r) => placed
                    .entry(r.ptr)
                    .or_insert_with(|| Segment {
                        device: seg.device,
                        address: r.ptr,
                        size: r.size,
                        blocks: Vec::new(),
                    })
                    .blocks
                    .push(Block {
                        offset: b.offset - r.ptr,
                        ..b
                    }),
                None => left.entry(seg.device).or_default().push(b),
            }
        }
    }
    // The framework's driver allocations without a block, on the device the trace says they
    // are on (else the first unplaced segment's), the pool's as far as its counters say.
    let mut empty: BTreeMap<i32, Vec<&DriverAlloc>> = BTreeMap::new();
    for r in regions.into_iter().filter(|r| !placed.contains_key(&r.ptr) && owned(r)) {
        empty.entry(r.device.unwrap_or(device)).or_default().push(r);
    }
    for (on, regions) in empty {
        let holds: u64 = placed.values().filter(|s| s.device == on).map(|s| s.size).sum();
        let pool = st
            .stats
            .iter()
            .find(|s| s.device == on && s.reserved > 0)
            .and_then(|s| s.reserved.checked_sub(holds));
        for r in fit_pool(regions, pool) {
            placed.insert(
                r.ptr,
                Segment {
                    device: on,
                    address: r.ptr,
                    size: r.size,
                    blocks: Vec::new(),
                },
            );
        }
    }
    for mut seg in placed.into_values() {
        seg.blocks.sort_unstable_by_key(|b| b.offset);
        let mut blocks = Vec::with_capacity(2 * seg.blocks.len() + 1);
        let mut at = 0u64;
        for b in seg.blocks {
            if b.offset > at {
                blocks.push(free_block(at, b.offset - at));
            }
            at = at.max(b.offset.saturating_add(b.size));
            blocks.push(b);
        }
        if at < seg.size {
            blocks.push(free_block(at, seg.size - at));
        }
        seg.blocks = blocks;
        st.segments.push(seg);
    }
    for (device, blocks) in left {
        st.segments.push(Segment {
            device,
            address: 0,
            size: 0,
            blocks,
        });
    }
}

/// Of the framework's driver allocations without a block, those that are its pool's free
/// regions, when `free_pool` says how many bytes those are (what its counters say the pool
/// holds, less the regions with blocks): XLA also makes a few small driver allocations of its
/// own while it compiles (four of 4 bytes to 25 KiB for a program on an H100), which are not
/// its allocator's. The largest first, each kept while the total stays within `free_pool`;
/// when they then add up to exactly that, the others are not the pool's. When no such choice
/// adds up (or nothing says how much the pool holds, or the pool is empty and counts
/// nothing), every one of them is taken for the pool's, as the stacks say.
fn fit_pool(mut empty: Vec<&DriverAlloc>, free_pool: Option<u64>) -> Vec<&DriverAlloc> {
    let Some(target) = free_pool else { return empty };
    empty.sort_by(|a, b| b.size.cmp(&a.size).then(a.ptr.cmp(&b.ptr)));
    let mut total = 0u64;
    let chosen: Vec<&DriverAlloc> = empty
        .iter()
        .copied()
        .filter(|r| {
            let fits = total.checked_add(r.size).is_some_and(|t| t <= target);
            if fits {
                total += r.size;
            }
            fits
        })
        .collect();
    if total == target {
        chosen
    } else {
        empty
    }
}

/// A cached free block (no frames).
fn free_block(offset: u64, size: u64) -> Block {
    Block {
        offset,
        size,
        requested: size,
        state: BlockState::Inactive,
        frames: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gpuleak_format::{
        Addrs, FrameworkBlocks, FrameworkEnd, FrameworkFrames, FrameworkSegment, FrameworkState, FrameworkStats,
    };

    fn begin(states: &mut States, id: u64, reason: &str) {
        begin_as(states, id, "torch", reason);
    }

    fn begin_as(states: &mut States, id: u64, framework: &str, reason: &str) {
        let s = FrameworkState {
            id,
            layout: 1,
            framework: framework.into(),
            reason: reason.into(),
            snapshot: 0,
        };
        assert_eq!(states.apply(&s.into()), None);
    }

    /// JAX's state 1 at exit, ended: for each device, an unplaced segment with `blocks`
    /// (address, size, requested size, state, frames, one after the other) and XLA's counters
    /// when `reserved` is given.
    fn jax_state(devices: &[(i32, Vec<u64>, Option<u64>)]) -> States {
        let mut states = States::default();
        begin_as(&mut states, 1, "jax", "exit");
        for (device, blocks, reserved) in devices {
            let seg = FrameworkSegment {
                state: 1,
                device: *device,
                address: 0,
                size: 0,
                stream: 0,
                pool: 0,
            };
            states.apply(&seg.into());
            let b = FrameworkBlocks {
                state: 1,
                segment: 0,
                blocks: Addrs(blocks.clone().into()),
            };
            states.apply(&b.into());
            if let Some(reserved) = *reserved {
                let stats = FrameworkStats {
                    state: 1,
                    device: *device,
                    allocated: 0,
                    reserved,
                    peak_reserved: reserved,
                };
                states.apply(&stats.into());
            }
        }
        let end = FrameworkEnd {
            state: 1,
            segments: devices.len() as u32,
            blocks: devices.iter().map(|d| d.1.len() as u32 / 5).sum(),
        };
        assert_eq!(states.apply(&end.into()), Some(1));
        states
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
                DriverAlloc::at(0x1000, 2048, StackId(1)),
                DriverAlloc::at(0x9000, 64, StackId(2)),
            ],
        );
        let held = states.held_by_framework().unwrap();
        assert_eq!((held.seq, held.addresses.len(), held.handles.len()), (9, 1, 0));
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

    /// JAX's blocks at absolute addresses land in the driver allocations that hold them;
    /// another region of the framework is all cached free, the program's own allocation is
    /// outside, and a buffer at no known address stays unplaced (counted, never a segment).
    #[test]
    fn unplaced_blocks_are_laid_into_the_driver_allocations_that_hold_them() {
        // Two buffers in the region at 0x10000 (the second at 0x10800), one at no address.
        let blocks = vec![0, 256, 256, 1, 0, 0x10800, 512, 512, 1, 0, 0x10000, 1024, 1000, 1, 0];
        let mut states = jax_state(&[(0, blocks, None)]);
        let driver = |ptr, size, stack| DriverAlloc::at(ptr, size, StackId(stack));
        states.complete_placing(
            1,
            9,
            vec![
                driver(0x10000, 0x1000, 1),
                driver(0x20000, 0x800, 1),
                driver(0x30000, 64, 2),
            ],
            |framework, a| framework == "jax" && a.stack == StackId(1),
        );
        let st = &states.complete[0];
        let shape: Vec<(u64, u64, usize)> = st
            .segments
            .iter()
            .map(|s| (s.address, s.size, s.blocks.len()))
            .collect();
        assert_eq!(shape, vec![(0x10000, 0x1000, 4), (0x20000, 0x800, 1), (0, 0, 1)]);
        let first: Vec<(u64, u64, BlockState)> = st.segments[0]
            .blocks
            .iter()
            .map(|b| (b.offset, b.size, b.state))
            .collect();
        assert_eq!(
            first,
            vec![
                (0, 0x400, BlockState::Allocated),
                (0x400, 0x400, BlockState::Inactive),
                (0x800, 0x200, BlockState::Allocated),
                (0xa00, 0x600, BlockState::Inactive),
            ]
        );
        let held = states.held_by_framework().unwrap();
        assert_eq!(held.addresses, [0x10000, 0x20000].into_iter().collect());
        let v = crate::frameworks::join::view(st, &Default::default(), &Default::default());
        let d = &v.devices[0];
        assert_eq!((d.tensors, d.live_bytes), (3, 1024 + 512 + 256));
        assert_eq!(d.reserved, 0x1800);
        assert_eq!(
            (d.cached_free_bytes, d.largest_free_block),
            (0x400 + 0x600 + 0x800, 0x800)
        );
        assert_eq!(d.unmatched_segments, 1);
        assert_eq!(v.outside[0].bytes, 64);
    }

    /// XLA's pool is the framework's driver allocations that add up to what its counters say
    /// it holds: XLA's small allocations made while it compiles are outside its pool. With
    /// counters that count them, or that no choice adds up to, every one is the pool's.
    #[test]
    fn the_pool_s_counters_tell_its_free_regions_from_xla_s_other_allocations() {
        let shape = |reserved: u64| {
            let blocks = vec![0x10000, 1024, 1024, 1, 0];
            let mut states = jax_state(&[(0, blocks, Some(reserved))]);
            let driver = |ptr, size| DriverAlloc::at(ptr, size, StackId(1));
            states.complete_placing(
                1,
                9,
                // The region in use, a free region of the pool, and three small allocations
                // of XLA's own (all with XLA's stack).
                vec![
                    driver(0x10000, 0x1000),
                    driver(0x20000, 0x800),
                    driver(0x30000, 0x6300),
                    driver(0x40000, 0x6300),
                    driver(0x50000, 4),
                ],
                |_, _| true,
            );
            let st = &states.complete[0];
            let v = crate::frameworks::join::view(st, &Default::default(), &Default::default());
            let segments: Vec<u64> = st.segments.iter().map(|s| s.address).collect();
            let outside: Vec<(u64, u64)> = v.outside.iter().map(|o| (o.bytes, o.allocations)).collect();
            (segments, v.devices[0].reserved, outside)
        };
        assert_eq!(
            shape(0x1800),
            (vec![0x10000, 0x20000], 0x1800, vec![(2 * 0x6300 + 4, 3)]),
            "counters that count the regions alone"
        );
        let all = (
            vec![0x10000, 0x20000, 0x30000, 0x40000, 0x50000],
            0x1800 + 2 * 0x6300 + 4,
            vec![],
        );
        assert_eq!(
            shape(0x1800 + 2 * 0x6300 + 4),
            all,
            "counters that count every allocation"
        );
        assert_eq!(shape(0x1800 + 0x100), all, "counters no choice adds up to");
        assert_eq!(shape(0x800), all, "counters below the regions in use");
        assert_eq!(shape(0), all, "counters that say nothing is held");
        // The largest that fit, then the next: 0x1000 + 0x6300 + 4 leaves one small one out.
        assert_eq!(
            shape(0x1800 + 0x6300 + 4),
            (
                vec![0x10000, 0x20000, 0x30000, 0x50000],
                0x1800 + 0x6300 + 4,
                vec![(0x6300, 1)]
            ),
        );
    }

    /// With several devices, each driver allocation without a block goes to the device its
    /// context is on, and each device's counters choose among its own.
    #[test]
    fn each_device_s_counters_choose_among_the_allocations_on_it() {
        // A buffer on device 0, none on device 1.
        let mut states = jax_state(&[
            (0, vec![0x10000, 1024, 1024, 1, 0], Some(0x1000)),
            (1, Vec::new(), Some(0x8000)),
        ]);
        let driver = |ptr, size, device| DriverAlloc::at(ptr, size, StackId(1)).on(device);
        states.complete_placing(
            1,
            9,
            vec![
                driver(0x10000, 0x1000, 0),
                driver(0x20000, 0x6300, 0),
                driver(0x100000, 0x8000, 1),
                driver(0x200000, 0x6300, 1),
            ],
            |_, _| true,
        );
        let st = &states.complete[0];
        let segments: Vec<(i32, u64)> = st.segments.iter().map(|s| (s.device, s.address)).collect();
        assert_eq!(segments, [(0, 0x10000), (1, 0x100000)]);
        let v = crate::frameworks::join::view(st, &Default::default(), &Default::default());
        let reserved: Vec<(i32, u64)> = v.devices.iter().map(|d| (d.device, d.reserved)).collect();
        assert_eq!(reserved, [(0, 0x1000), (1, 0x8000)]);
        assert_eq!(v.outside[0].bytes, 2 * 0x6300);
    }

    /// An expandable segment is matched through the handles mapped in it, which are the
    /// framework's; a handle of the program's counts once outside, mapped twice or nowhere.
    #[test]
    fn handles_mapped_in_a_segment_are_the_framework_s_and_others_count_once_outside() {
        let mut states = States::default();
        begin(&mut states, 1, "exit");
        let seg = FrameworkSegment {
            state: 1,
            device: 0,
            address: 0x10_0000,
            size: 0x40_0000,
            stream: 0,
            pool: 1,
        };
        states.apply(&seg.into());
        let end = FrameworkEnd {
            state: 1,
            segments: 1,
            blocks: 0,
        };
        assert_eq!(states.apply(&end.into()), Some(1));
        let piece = |ptr, size, id, bytes| DriverAlloc {
            ptr,
            size,
            stack: StackId(1),
            handle: Some(Handle {
                id,
                bytes,
                mapped: true,
            }),
            device: None,
        };
        let nowhere = DriverAlloc {
            ptr: 0,
            size: 0x8_0000,
            stack: StackId(1),
            handle: Some(Handle {
                id: 4,
                bytes: 0x8_0000,
                mapped: false,
            }),
            device: None,
        };
        let driver = vec![
            piece(0x10_0000, 0x20_0000, 1, 0x20_0000),
            piece(0x30_0000, 0x20_0000, 2, 0x20_0000),
            piece(0x90_0000, 0x10_0000, 3, 0x10_0000),
            piece(0xa0_0000, 0x10_0000, 3, 0x10_0000),
            nowhere,
        ];
        states.complete(1, 9, driver);
        let held = states.held_by_framework().unwrap();
        assert_eq!(held.handles, [1, 2].into_iter().collect());
        let v = crate::frameworks::join::view(&states.complete[0], &Default::default(), &Default::default());
        assert_eq!((v.devices[0].reserved, v.devices[0].unmatched_segments), (0x40_0000, 0));
        assert_eq!(
            (v.outside[0].bytes, v.outside[0].allocations),
            (0x10_0000 + 0x8_0000, 2)
        );
    }

    /// A block at the address of a workspace recorded before the state is the library's, not
    /// a tensor; a block smaller than the workspace there (a tensor made after it was given
    /// back) and a workspace recorded only after the state are tensors. `live_bytes` counts
    /// every allocated block.
    #[test]
    fn a_block_at_a_workspace_recorded_before_the_state_is_no_tensor() {
        use gpuleak_format::LibWorkspace;

        let ws = |ptr, size, library| -> Body<'static> { LibWorkspace { library, ptr, size }.into() };
        let mut states = States::default();
        states.apply(&ws(0x10_0000, 0x4000, LibWorkspace::CUBLAS));
        states.apply(&ws(0x10_8000, 0x1000, LibWorkspace::CUBLAS_LT));
        // A later record at the same address replaces the size: this block is too small now.
        states.apply(&ws(0x10_c000, 0x400, LibWorkspace::CUBLAS));
        states.apply(&ws(0x10_c000, 0x8000, LibWorkspace::CUBLAS));
        begin(&mut states, 1, "exit");
        let seg = FrameworkSegment {
            state: 1,
            device: 0,
            address: 0x10_0000,
            size: 0x10000,
            stream: 0,
            pool: 0,
        };
        states.apply(&seg.into());
        // Offset, size, requested, state, frames: two workspaces, a small block at a
        // workspace's address, a tensor, a free block at the end.
        let blocks = FrameworkBlocks {
            state: 1,
            segment: 0x10_0000,
            blocks: Addrs(
                vec![
                    0, 0x4000, 0x4000, 1, 0, 0x8000, 0x1000, 0x1000, 1, 0, 0xc000, 0x1000, 0x1000, 1, 0, 0xd000,
                    0x1000, 0x1000, 1, 0, 0xe000, 0x2000, 0x2000, 3, 0,
                ]
                .into(),
            ),
        };
        states.apply(&blocks.into());
        let end = FrameworkEnd {
            state: 1,
            segments: 1,
            blocks: 5,
        };
        assert_eq!(states.apply(&end.into()), Some(1));
        states.complete(1, 9, vec![DriverAlloc::at(0x10_0000, 0x10000, StackId(1))]);
        // Recorded after the state: not the state's.
        states.apply(&ws(0x10_d000, 0x1000, LibWorkspace::CUBLAS));
        let st = &states.complete[0];
        assert_eq!(
            st.workspaces,
            [(0x10_0000, LibWorkspace::CUBLAS), (0x10_8000, LibWorkspace::CUBLAS_LT)]
                .into_iter()
                .collect()
        );
        let v = crate::frameworks::join::view(st, &Default::default(), &Default::default());
        let d = &v.devices[0];
        assert_eq!((d.workspaces, d.workspace_bytes), (2, 0x5000));
        assert_eq!((d.tensors, d.tensor_bytes(), d.live_bytes), (2, 0x2000, 0x7000));
        assert_eq!(d.sites.iter().map(|s| s.tensors).sum::<u64>(), 2);
        let line = crate::frameworks::join::summary_line(&v);
        assert!(
            line.contains("on device 0: 28.0 KiB allocated: 8.0 KiB in 2 live tensors (top lines: an unknown line 8.0 KiB), 20.0 KiB in 2 cuBLAS workspaces; 8.0 KiB cached free"),
            "{line}"
        );
    }

    /// The replay remembers at most [`KEPT_WORKSPACES`] addresses, and the latest record of
    /// one it knows.
    #[test]
    fn workspaces_remembered_are_bounded() {
        use gpuleak_format::LibWorkspace;

        let mut states = States::default();
        for i in 0..(KEPT_WORKSPACES as u64 + 10) {
            states.apply(
                &LibWorkspace {
                    library: 1,
                    ptr: i,
                    size: 1,
                }
                .into(),
            );
        }
        states.apply(
            &LibWorkspace {
                library: 2,
                ptr: 0,
                size: 7,
            }
            .into(),
        );
        assert_eq!(states.workspaces.len(), KEPT_WORKSPACES);
        assert_eq!(states.workspaces[&0], Workspace { library: 2, size: 7 });
    }

    /// The cover answers as the segments one by one do: gaps, ends, overlaps, the top of the
    /// address space and a segment of size 0 (one byte).
    #[test]
    fn the_cover_answers_as_each_segment_does() {
        let seg = |address, size| Segment {
            device: 0,
            address,
            size,
            blocks: Vec::new(),
        };
        let segments = [
            seg(0x1000, 0x100),
            seg(0x1080, 0x1000),
            seg(0x1010, 0x10),
            seg(0x5000, 0),
            seg(u64::MAX - 4, 5),
        ];
        let cover = Cover::of(&segments);
        for at in [
            0,
            0xfff,
            0x1000,
            0x100f,
            0x1010,
            0x107f,
            0x1080,
            0x207f,
            0x2080,
            0x4fff,
            0x5000,
            0x5001,
            u64::MAX - 5,
            u64::MAX - 4,
            u64::MAX,
        ] {
            assert_eq!(cover.contains(at), segments.iter().any(|s| s.contains(at)), "{at:#x}");
        }
        assert!(!Cover::of(&[]).contains(0));
    }

    /// Blocks and driver allocations at the ends of the address space, overlapping or past
    /// their region, are placed without overflow (a hostile trace is a report, never a panic).
    #[test]
    fn placing_hostile_blocks_never_overflows() {
        let mut st = State {
            framework: "jax".into(),
            segments: vec![Segment {
                device: 0,
                address: 0,
                size: 0,
                blocks: [
                    (u64::MAX, u64::MAX),
                    (u64::MAX - 8, 64),
                    (u64::MAX - 16, 4),
                    (1, u64::MAX),
                ]
                .into_iter()
                .map(|(offset, size)| Block {
                    offset,
                    size,
                    requested: size,
                    state: BlockState::Allocated,
                    frames: 0,
                })
                .collect(),
            }],
            driver: vec![
                DriverAlloc::at(u64::MAX - 32, u64::MAX, StackId(1)),
                DriverAlloc::at(0, 16, StackId(1)),
            ],
            ..State::default()
        };
        place(&mut st, |_| true);
        let placed: usize = st.segments.iter().map(|s| s.blocks.len()).sum();
        assert!(placed >= 4, "{:?}", st.segments);
        let v = crate::frameworks::join::view(&st, &Default::default(), &Default::default());
        assert_eq!(v.devices[0].tensors, 4);
    }
}
