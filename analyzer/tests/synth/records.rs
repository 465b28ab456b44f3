//! The value sets records draw from (a few pointers, streams, events, stacks, with the extremes
//! in each) and one record of any kind from the input bytes.

use std::borrow::Cow;

use gpuleak_format::{
    Addrs, Alloc, Api, Body, Capture, Ctx, CtxCreate, CtxDestroy, CuResult, Event, EventCreate, EventDestroy,
    EventRecord, Exit, ExtSemaphore, ExtSemaphoreOp, FrameworkBlocks, FrameworkEnd, FrameworkFrames, FrameworkOom,
    FrameworkSegment, FrameworkState, FrameworkStats, Free, GraphAccesses, GraphEdges, GraphEvents, GraphExec,
    GraphMem, GraphMemNodes, GraphNode, GraphUpdate, HostFn, HostFnQueued, HostFnRan, Launch, LibWorkspace, Lost, Map,
    Mark, MemOp, Module, PoolCreate, PoolDestroy, PoolUsage, ProcessInfo, Ptr, PyCode, PyFrames, RangeOp, Region,
    Snapshot, Stack, StackId, Stream, StreamCreate, StreamDestroy, StreamWait, Sync, Unmap,
};

use super::Bytes;

const PTRS: [u64; 10] = [
    0,
    0x7000_0000,
    0x7000_0800,
    0x7000_1000,
    0x7000_1000 + 4096,
    0x7001_0000,
    0x2_0000_0000,
    u64::MAX / 2,
    u64::MAX - 0xfff,
    u64::MAX,
];
const SIZES: [u64; 12] = [
    0,
    1,
    256,
    2048,
    4096,
    1 << 20,
    1 << 32,
    1 << 40,
    u64::MAX / 2,
    u64::MAX - 1,
    u64::MAX,
    3,
];
const CTXS: [u64; 4] = [0, 0x1000, 0x2000, u64::MAX];
const STREAMS: [u64; 7] = [0, 1, 2, 0x10, 0x20, 0x30, u64::MAX];
const EVENTS: [u64; 5] = [0, 0x100, 0x200, 0x300, u64::MAX];
const RESULTS: [u32; 8] = [0, 0, 0, 0, 2, 1, 700, 999];
const DEVICES: [i32; 6] = [-2, -1, 0, 1, 7, i32::MAX];
const CODE: [u64; 8] = [
    0,
    0x40_1000,
    0x40_1010,
    0x40_2000,
    0x7f00_0000_1000,
    0x7f00_0000_2000,
    0xffff_ffff_ffff_fff0,
    u64::MAX,
];
const NAMES: [&str; 6] = ["", "step", "epoch", "a/b", "é", "cuMemAlloc_v2"];
const PATHS: [&str; 6] = [
    "",
    "/usr/lib/libcuda.so.1",
    "/opt/app/app",
    "[vdso]",
    "/x/libtorch_cuda.so",
    "/nonexistent/lib.so",
];

impl Bytes<'_> {
    fn api(&mut self) -> Api {
        if self.byte() == 255 {
            return Api(u16::from(self.byte()) << 8 | u16::from(self.byte()));
        }
        self.pick(Api::ALL).0
    }
    fn result(&mut self) -> CuResult {
        CuResult(self.pick(&RESULTS))
    }
    fn ptr(&mut self) -> Ptr {
        Ptr(self.pick(&PTRS).wrapping_add(self.pick(&[0u64, 0, 8, 4095])))
    }
    pub(super) fn size(&mut self) -> u64 {
        self.pick(&SIZES)
    }
    fn ctx(&mut self) -> Ctx {
        Ctx(self.pick(&CTXS))
    }
    fn stream(&mut self) -> Stream {
        Stream(self.pick(&STREAMS))
    }
    fn event(&mut self) -> Event {
        Event(self.pick(&EVENTS))
    }
    fn stack(&mut self) -> StackId {
        StackId(self.pick(&[0, 1, 2, 3, 4, u32::MAX]))
    }
    fn small(&mut self) -> u32 {
        self.pick(&[0, 1, 2, 3, u32::MAX])
    }
    fn name(&mut self) -> Cow<'static, str> {
        Cow::Borrowed(self.pick(&NAMES))
    }
    fn addrs(&mut self, from: &[u64]) -> Addrs<'static> {
        let n = self.below(6);
        Addrs(Cow::Owned((0..n).map(|_| self.pick(from)).collect()))
    }

    /// A framework allocator record (kinds 70 to 76) of one of a few states, or a library's
    /// workspace (kind 79), over the same pointers as the allocations, so that states
    /// complete and join with live memory and workspaces land on their blocks.
    fn framework(&mut self) -> Body<'static> {
        let state = self.pick(&[1, 2, u64::MAX]);
        match self.below(8) {
            7 => LibWorkspace {
                library: self.pick(&[1, 2, 0, u32::MAX]),
                ptr: self.ptr().0,
                size: self.size(),
            }
            .into(),
            0 => FrameworkState {
                id: state,
                layout: self.small(),
                framework: Cow::Borrowed(self.pick(&["torch", "cupy", ""])),
                reason: Cow::Borrowed(self.pick(&["exit", "snapshot", "oom", ""])),
                snapshot: self.pick(&[0, 1, u64::MAX]),
            }
            .into(),
            1 => FrameworkSegment {
                state,
                device: self.pick(&[0, 1, -1, i32::MAX]),
                address: self.ptr().0,
                size: self.size(),
                stream: self.stream().0,
                pool: self.small(),
            }
            .into(),
            2 => FrameworkBlocks {
                state,
                segment: self.ptr().0,
                // Sizes, states and frame ids, sometimes in whole blocks of five.
                blocks: self.addrs(&[0, 1, 2, 3, 512, 4096, u64::MAX]),
            }
            .into(),
            3 => FrameworkFrames {
                id: self.small(),
                state,
                names: (0..2 * self.below(3)).map(|_| self.name()).collect(),
                lines: self.addrs(&[0, 7, u64::MAX]),
            }
            .into(),
            4 => FrameworkStats {
                state,
                device: self.pick(&[0, -1]),
                allocated: self.size(),
                reserved: self.size(),
                peak_reserved: self.size(),
            }
            .into(),
            5 => FrameworkOom {
                state,
                device: self.pick(&[0, 1, -1]),
                requested: self.size(),
                device_allocated: self.size(),
                device_free: self.size(),
            }
            .into(),
            _ => FrameworkEnd {
                state,
                segments: self.small(),
                blocks: self.small(),
            }
            .into(),
        }
    }

    pub(super) fn body(&mut self) -> Body<'static> {
        match self.below(41) {
            0 => ProcessInfo {
                pid: self.small(),
                ppid: self.small(),
                exe: self.name(),
                args: (0..self.below(3)).map(|_| self.name()).collect(),
                hostname: self.name(),
                shim_version: self.name(),
                unwinder: self.name(),
                stack_depth: self.small(),
                start_unix_ns: self.size(),
            }
            .into(),
            1 => Module {
                base: self.pick(&CODE),
                start: self.pick(&CODE),
                end: self.pick(&CODE),
                path: Cow::Borrowed(self.pick(&PATHS)),
                build_id: Cow::Owned((0..self.below(4)).map(|_| self.byte()).collect()),
            }
            .into(),
            2 | 3 => Stack {
                id: self.stack(),
                frames: self.addrs(&CODE),
            }
            .into(),
            4 => Exit {
                code: self.pick(&DEVICES),
                how: self.small(),
            }
            .into(),
            5 => Lost {
                count: self.size(),
                reason: self.small(),
            }
            .into(),
            6..=10 => Alloc {
                api: self.api(),
                via: self.api(),
                result: self.result(),
                ctx: self.ctx(),
                stream: self.stream(),
                ptr: self.ptr(),
                size: self.size(),
                stack: self.stack(),
                aux: self.size(),
            }
            .into(),
            11..=13 => Free {
                api: self.api(),
                via: self.api(),
                result: self.result(),
                stream: self.stream(),
                ptr: self.ptr(),
                size: self.size(),
                stack: self.stack(),
            }
            .into(),
            14 => Map {
                api: self.api(),
                result: self.result(),
                ptr: self.ptr(),
                size: self.size(),
                offset: self.size(),
                handle: self.ptr().0,
            }
            .into(),
            15 => Unmap {
                api: self.api(),
                result: self.result(),
                ptr: self.ptr(),
                size: self.size(),
            }
            .into(),
            16 => CtxCreate {
                api: self.api(),
                result: self.result(),
                ctx: self.ctx(),
                device: self.pick(&DEVICES),
                flags: self.size(),
            }
            .into(),
            17 => CtxDestroy {
                api: self.api(),
                result: self.result(),
                ctx: self.ctx(),
                device: self.pick(&DEVICES),
            }
            .into(),
            18 => StreamCreate {
                api: self.api(),
                result: self.result(),
                stream: self.stream(),
                flags: self.small(),
                priority: self.pick(&DEVICES),
                stack: self.stack(),
            }
            .into(),
            19 => StreamDestroy {
                api: self.api(),
                result: self.result(),
                stream: self.stream(),
            }
            .into(),
            20 => Sync {
                api: self.api(),
                result: self.result(),
                stream: self.stream(),
                event: self.event(),
                ctx: self.ctx(),
            }
            .into(),
            21 => StreamWait {
                api: self.api(),
                result: self.result(),
                stream: self.stream(),
                event: self.event(),
                flags: self.small(),
            }
            .into(),
            22 => match self.below(3) {
                0 => EventCreate {
                    api: self.api(),
                    result: self.result(),
                    event: self.event(),
                    flags: self.small(),
                    stack: self.stack(),
                }
                .into(),
                1 => EventDestroy {
                    api: self.api(),
                    result: self.result(),
                    event: self.event(),
                }
                .into(),
                _ => EventRecord {
                    api: self.api(),
                    result: self.result(),
                    event: self.event(),
                    stream: self.stream(),
                    flags: self.small(),
                }
                .into(),
            },
            23 => gpuleak_format::Copy {
                api: self.api(),
                result: self.result(),
                stream: self.stream(),
                dst: self.ptr(),
                src: self.ptr().0,
                bytes: self.size(),
                stack: self.stack(),
            }
            .into(),
            24 => Launch {
                api: self.api(),
                result: self.result(),
                stream: self.stream(),
                function: self.pick(&CODE),
                ptrs: self.addrs(&PTRS),
                stack: self.stack(),
            }
            .into(),
            25 => match self.below(8) {
                0 => HostFn {
                    api: self.api(),
                    result: self.result(),
                    stream: self.stream(),
                }
                .into(),
                // Host functions the shim wrapped, and their runs, with ids that often match
                // (runs before their queue records, unknown ids and repeats included).
                6 => HostFnQueued {
                    api: self.api(),
                    result: self.result(),
                    stream: self.stream().0,
                    id: self.pick(&[0, 1, 2, 3, u64::MAX]),
                }
                .into(),
                7 => HostFnRan {
                    id: self.pick(&[0, 1, 2, 3, u64::MAX]),
                }
                .into(),
                1 => MemOp {
                    api: self.api(),
                    result: self.result(),
                    stream: self.stream().0,
                    // Waits, writes, flushes, barriers, reductions and unknown operations, on
                    // a few flags, with values and conditions that often match.
                    op: self.pick(&[0, 1, 2, 3, 4, 5, 6, 8, 9, u32::MAX]),
                    addr: self.pick(&[0, 0x5000_0000, 0x5000_0004, PTRS[0]]),
                    value: self.pick(&[0, 1, 2, u64::from(u32::MAX), u64::MAX]),
                    flags: self.pick(&[0, 1, 2, 3, 4, 1 << 30, 3 | 1 << 30, u32::MAX]),
                }
                .into(),
                // External semaphores: a few handles of every type, imported, destroyed, and
                // signaled and waited for with values and keys that often match.
                2 => ExtSemaphore {
                    api: self.pick(&[
                        Api::cuImportExternalSemaphore,
                        Api::cuDestroyExternalSemaphore,
                        Api(999),
                    ]),
                    result: self.result(),
                    semaphore: self.pick(&[0, 0x5e00, 0x5e10, u64::MAX]),
                    handle_type: self.pick(&[0, 1, 2, 4, 6, 7, 9, 11, u32::MAX]),
                    flags: self.small(),
                    stack: self.stack(),
                }
                .into(),
                3 => ExtSemaphoreOp {
                    api: self.pick(&[
                        Api::cuSignalExternalSemaphoresAsync,
                        Api::cuSignalExternalSemaphoresAsync_ptsz,
                        Api::cuWaitExternalSemaphoresAsync,
                        Api::cuWaitExternalSemaphoresAsync_ptsz,
                        Api::cuStreamWaitValue32,
                    ]),
                    result: self.result(),
                    stream: self.stream().0,
                    semaphore: self.pick(&[0, 0x5e00, 0x5e10, u64::MAX]),
                    value: self.pick(&[0, 1, 2, u64::MAX]),
                    key: self.pick(&[0, 1, u64::MAX]),
                    flags: self.small(),
                }
                .into(),
                // Prefetches and discards of ranges that often are allocations.
                4 => RangeOp {
                    api: self.pick(&[
                        Api::cuMemPrefetchAsync,
                        Api::cuMemPrefetchAsync_v2_ptsz,
                        Api::cuMemPrefetchBatchAsync,
                        Api::cuMemDiscardBatchAsync,
                        Api::cuMemDiscardAndPrefetchBatchAsync_ptsz,
                        Api(999),
                    ]),
                    result: self.result(),
                    stream: self.stream().0,
                    ptr: self.ptr().0,
                    bytes: self.size(),
                    location: self.pick(&[0, 1 << 32, 2 << 32, u64::MAX]),
                    stack: self.stack(),
                }
                .into(),
                _ => Capture {
                    api: self.api(),
                    result: self.result(),
                    stream: self.stream(),
                    begin: self.small(),
                    aux: self.size(),
                }
                .into(),
            },
            26 => match self.below(3) {
                0 => Mark {
                    name: self.name(),
                    value: self.size(),
                }
                .into(),
                1 => Region {
                    name: self.name(),
                    begin: self.small(),
                }
                .into(),
                _ => Snapshot {
                    id: u64::from(self.small()),
                    reason: self.name(),
                }
                .into(),
            },
            27 => PyCode {
                id: self.small(),
                python: self.pick(&[0x30a, 0x30b, 0x30c, 0x30d, 0, 0xffff]),
                first_line: self.small(),
                filename: self.name(),
                qualname: self.name(),
                line_table: Cow::Owned((0..self.below(12)).map(|_| self.byte()).collect()),
            }
            .into(),
            28 => PyFrames {
                stack: self.stack(),
                frames: self.addrs(&[0, 1, 2, 3, 6, 100, u64::MAX]),
            }
            .into(),
            29 => PoolUsage {
                pool: self.pick(&[0, 1, 2, u64::MAX]),
                device: self.pick(&DEVICES),
                reserved: self.size(),
                used: self.size(),
            }
            .into(),
            30 => PoolCreate {
                api: self.pick(&[Api::cuMemPoolCreate, Api::cuMemPoolImportFromShareableHandle, Api(999)]),
                via: self.pick(&[Api::NONE, Api::cudaMemPoolCreate]),
                result: self.result(),
                pool: self.pick(&[0, 1, 2, u64::MAX]),
                location_type: self.small(),
                location: self.pick(&DEVICES),
                max_size: self.size(),
                handle_types: self.small(),
                stack: self.stack(),
            }
            .into(),
            31 => PoolDestroy {
                api: self.pick(&[Api::cuMemPoolDestroy, Api(999)]),
                via: self.pick(&[Api::NONE, Api::cudaMemPoolDestroy]),
                result: self.result(),
                pool: self.pick(&[0, 1, 2, u64::MAX]),
                stack: self.stack(),
            }
            .into(),
            // Executable graphs named by the same values as kernel launches' functions, so
            // that some launches launch them.
            32 => GraphMem {
                exec: self.pick(&CODE),
                allocs: self.addrs(&[PTRS[0], PTRS[1], 0, 1, 4096, u64::MAX]),
                frees: self.addrs(&PTRS),
            }
            .into(),
            // Event nodes named by the same values as events, with nodes and owners drawn
            // from the same few values, so that updates find them.
            33 => GraphEvents {
                exec: self.pick(&CODE),
                records: self.addrs(&[EVENTS[1], EVENTS[2], 0, 1, 2, u64::MAX]),
                waits: self.addrs(&[EVENTS[1], EVENTS[3], 0, 1, 2]),
            }
            .into(),
            34 => GraphUpdate {
                api: self.pick(&[
                    Api::cuGraphExecUpdate_v2,
                    Api::cuGraphExecNodeSetParams,
                    Api::cuGraphNodeSetEnabled,
                    Api(999),
                ]),
                via: Api::NONE,
                result: self.result(),
                what: self.pick(&[0, 1, 2, 3, 4, 5, u32::MAX]),
                exec: self.pick(&CODE),
                node: self.pick(&[0, 1, 2, u64::MAX]),
                event: self.pick(&EVENTS),
                graph: self.pick(&[0, 1, u64::MAX]),
                listed: self.pick(&[0, 1, 2]),
            }
            .into(),
            35 => GraphAccesses {
                exec: self.pick(&CODE),
                nodes: self.addrs(&[
                    0,
                    1,
                    2,
                    PTRS[1],
                    PTRS[2],
                    GraphAccesses::encode(1, GraphAccesses::KERNEL),
                    GraphAccesses::encode(64, GraphAccesses::WRITE),
                    u64::MAX,
                ]),
            }
            .into(),
            36 => GraphNode {
                api: self.pick(&[
                    Api::cuLaunchKernel,
                    Api::cuMemsetD8Async,
                    Api::cuGraphAddMemcpyNode,
                    Api::cuGraphDestroy,
                ]),
                graph: self.pick(&[0, 1, u64::MAX]),
                node: self.pick(&[0, 1, 2]),
                kind: self.pick(&[0, 1, 2, u32::MAX]),
                stack: self.stack(),
            }
            .into(),
            // Edges between the same few node values as GraphAccesses entries name.
            37 => GraphEdges {
                exec: self.pick(&CODE),
                entries: self.addrs(&[GraphEdges::EDGE, GraphEdges::CHILD, 0, 1, 2, 3, u64::MAX]),
            }
            .into(),
            // Memory nodes named by the same few node values, at the addresses allocations use.
            38 => GraphMemNodes {
                exec: self.pick(&CODE),
                allocs: self.addrs(&[0, 1, 2, PTRS[0], PTRS[1], 64, u64::MAX]),
                frees: self.addrs(&[0, 1, 2, PTRS[0], PTRS[1], u64::MAX]),
            }
            .into(),
            39 => self.framework(),
            _ => GraphExec {
                api: self.pick(&[Api::cuGraphInstantiateWithFlags, Api::cuGraphInstantiate_v2, Api(999)]),
                via: self.pick(&[Api::NONE, Api::cudaMallocAsync]),
                result: self.result(),
                exec: self.pick(&CODE),
                graph: self.pick(&[0, 1, u64::MAX]),
                flags: self.pick(&[0, 1, 3, u64::MAX]),
                alloc_nodes: self.small(),
                free_nodes: self.small(),
                nodes_known: self.pick(&[0, 1, 2]),
                stack: self.stack(),
            }
            .into(),
        }
    }
}
