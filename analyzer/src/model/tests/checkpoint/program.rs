//! Random programs: every common allocation family, bad frees, contexts torn down with memory
//! in them, VMM, IPC, streams and events, captures, launches, copies and syncs.

use gpuleak_format::checkpoint::write_records;
use gpuleak_format::{
    Event, EventCreate, EventDestroy, EventRecord, FileHeader, Launch, Mark, ProcessInfo, StreamCreate, StreamDestroy,
    StreamWait, Sync, BLOCK_SIZE, FORMAT_VERSION, HEADER_SIZE,
};

use super::super::*;

/// xorshift64*: reproducible without a dependency.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn pick<T: Copy>(&mut self, v: &[T]) -> Option<T> {
        (!v.is_empty()).then(|| v[self.below(v.len() as u64) as usize])
    }
}

pub(super) const A: Ctx = Ctx(0x5cf0_0000_0a00);
const B: Ctx = Ctx(0x5cf0_0000_0b00);

/// A random program's records.
pub(super) struct Program {
    rng: Rng,
    pub(super) records: Vec<(u32, Record<'static>)>,
    /// Live allocations: (free API, pointer, stream for an async one).
    live: Vec<(Api, u64, u64)>,
    freed: Vec<(Api, u64)>,
    next_ptr: u64,
    streams: Vec<u64>,
    events: Vec<u64>,
    next_handle: u64,
    /// VMM: (handle, reserved address) with the handle mapped there.
    vmm: Vec<(u64, u64)>,
    ipc: Vec<u64>,
    b_alive: bool,
}

impl Program {
    pub(super) fn push(&mut self, tid: u32, body: impl Into<Body<'static>>) {
        let seq = self.records.len() as u64 * 2 + 1;
        self.records.push((
            tid,
            Record {
                seq: Seq(seq),
                time_ns: seq * 10,
                body: body.into(),
            },
        ));
    }

    pub(super) fn alloc(&mut self, tid: u32, api: Api, ctx: Ctx, stream: u64, ptr: u64, result: u32) {
        let stack = StackId(1 + self.rng.below(6) as u32);
        let size = 256 << self.rng.below(8);
        self.push(
            tid,
            Alloc {
                api,
                via: Api::NONE,
                result: CuResult(result),
                ctx,
                stream: Stream(stream),
                ptr: Ptr(ptr),
                size,
                stack,
                aux: 0,
            },
        );
    }

    pub(super) fn free(&mut self, tid: u32, api: Api, ptr: u64, stream: u64, result: u32) {
        let stack = StackId(self.rng.below(3) as u32);
        self.push(
            tid,
            Free {
                api,
                via: Api::NONE,
                result: CuResult(result),
                stream: Stream(stream),
                ptr: Ptr(ptr),
                size: 0,
                stack,
            },
        );
    }

    fn fresh(&mut self) -> u64 {
        // Now and then an address freed before comes back.
        if self.rng.below(4) == 0 {
            if let Some((_, p)) = self.rng.pick(&self.freed) {
                if !self.live.iter().any(|l| l.1 == p) {
                    return p;
                }
            }
        }
        self.next_ptr += 0x10_0000;
        self.next_ptr
    }

    fn handle(&mut self) -> u64 {
        self.next_handle += 0x10;
        self.next_handle
    }

    fn stream(&mut self) -> u64 {
        let s = self.rng.pick(&self.streams);
        s.filter(|_| self.rng.below(3) != 0).unwrap_or(0)
    }

    fn step(&mut self) {
        let tid = if self.rng.below(3) == 0 { 200 } else { 100 };
        let ctx = if self.b_alive && self.rng.below(4) == 0 { B } else { A };
        match self.rng.below(22) {
            0..=2 => {
                let (alloc, free) = match self.rng.below(4) {
                    0 => (Api::cuMemAllocManaged, Api::cuMemFree_v2),
                    1 => (Api::cuMemAllocHost_v2, Api::cuMemFreeHost),
                    _ => (Api::cuMemAlloc_v2, Api::cuMemFree_v2),
                };
                let p = self.fresh();
                let failed = self.rng.below(10) == 0;
                self.alloc(tid, alloc, ctx, 0, p, if failed { 2 } else { 0 });
                if !failed {
                    self.live.push((free, p, 0));
                }
            }
            3 | 4 => {
                let s = self.stream();
                let p = self.fresh();
                let api = if s == 0 && self.rng.below(2) == 0 {
                    Api::cuMemAllocAsync_ptsz
                } else {
                    Api::cuMemAllocAsync
                };
                self.alloc(tid, api, ctx, s, p, 0);
                self.live.push((Api::cuMemFreeAsync, p, s));
            }
            5..=7 => {
                if self.live.is_empty() {
                    return;
                }
                let i = self.rng.below(self.live.len() as u64) as usize;
                let (api, p, s) = self.live.swap_remove(i);
                let (api, s) = match (api, self.rng.below(3)) {
                    (Api::cuMemFreeAsync, 0) => (Api::cuMemFree_v2, 0),
                    (Api::cuMemFreeAsync, _) => (api, if self.rng.below(2) == 0 { s } else { self.stream() }),
                    (other, _) => (other, 0),
                };
                self.free(tid, api, p, s, 0);
                self.freed.push((api, p));
            }
            8 => match self.rng.below(4) {
                // A double free, a pointer never allocated, a free of the wrong family.
                0 | 1 => {
                    if let Some((api, p)) = self.rng.pick(&self.freed) {
                        if !self.live.iter().any(|l| l.1 == p) {
                            self.free(tid, api, p, 0, 1);
                        }
                    }
                }
                2 => {
                    let p = 0x9900_0000 + self.rng.below(9) * 0x100;
                    self.free(tid, Api::cuMemFree_v2, p, 0, 1);
                }
                _ => {
                    if let Some((_, p, _)) = self.rng.pick(&self.live) {
                        self.free(tid, Api::cuMemFreeHost, p, 0, 1);
                    }
                }
            },
            9 => {
                // VMM: a handle mapped into a reservation; retained now and then.
                let h = self.handle();
                let r = self.fresh();
                self.alloc(tid, Api::cuMemCreate, ctx, 0, h, 0);
                self.alloc(tid, Api::cuMemAddressReserve, ctx, 0, r, 0);
                self.push(
                    tid,
                    Map {
                        api: Api::cuMemMap,
                        result: CuResult(0),
                        ptr: Ptr(r),
                        size: 1 << 20,
                        offset: 0,
                        handle: h,
                    },
                );
                if self.rng.below(2) == 0 {
                    self.alloc(tid, Api::cuMemRetainAllocationHandle, ctx, 0, h, 0);
                    self.free(tid, Api::cuMemRelease, h, 0, 0);
                }
                if self.rng.below(2) == 0 {
                    // Released while mapped: alive until the unmap.
                    self.free(tid, Api::cuMemRelease, h, 0, 0);
                    self.live.push((Api::cuMemUnmap, r, h));
                } else {
                    self.vmm.push((h, r));
                }
            }
            10 => {
                if let Some((h, r)) = self.rng.pick(&self.vmm) {
                    self.vmm.retain(|v| v.0 != h);
                    self.push(
                        tid,
                        Unmap {
                            api: Api::cuMemUnmap,
                            result: CuResult(0),
                            ptr: Ptr(r),
                            size: 1 << 20,
                        },
                    );
                    self.free(tid, Api::cuMemRelease, h, 0, 0);
                    self.free(tid, Api::cuMemAddressFree, r, 0, 0);
                }
            }
            11 => {
                // IPC: the same handle opened twice needs two closes.
                let p = match self.rng.pick(&self.ipc) {
                    Some(p) if self.rng.below(2) == 0 => p,
                    _ => self.fresh(),
                };
                self.alloc(tid, Api::cuIpcOpenMemHandle_v2, ctx, 0, p, 0);
                self.ipc.push(p);
            }
            12 => {
                if let Some(p) = self.rng.pick(&self.ipc) {
                    let i = self.ipc.iter().position(|x| *x == p).unwrap();
                    self.ipc.remove(i);
                    self.free(tid, Api::cuIpcCloseMemHandle, p, 0, 0);
                }
            }
            13 => {
                if self.b_alive && self.rng.below(3) == 0 {
                    self.push(
                        tid,
                        CtxDestroy {
                            api: Api::cuCtxDestroy_v2,
                            result: CuResult(0),
                            ctx: B,
                            device: -1,
                        },
                    );
                    self.b_alive = false;
                } else if !self.b_alive {
                    self.push(
                        tid,
                        CtxCreate {
                            api: Api::cuCtxCreate_v2,
                            result: CuResult(0),
                            ctx: B,
                            device: 1,
                            flags: 0,
                        },
                    );
                    self.b_alive = true;
                }
            }
            14 => {
                if self.streams.len() < 4 || self.rng.below(3) == 0 {
                    let s = 0x5100_0000 + self.handle();
                    let flags = self.rng.below(2) as u32;
                    self.push(
                        tid,
                        StreamCreate {
                            api: Api::cuStreamCreate,
                            result: CuResult(0),
                            stream: Stream(s),
                            flags,
                            priority: 0,
                            stack: StackId(7),
                        },
                    );
                    self.streams.push(s);
                } else if let Some(s) = self.rng.pick(&self.streams) {
                    self.streams.retain(|x| *x != s);
                    self.push(
                        tid,
                        StreamDestroy {
                            api: Api::cuStreamDestroy_v2,
                            result: CuResult(0),
                            stream: Stream(s),
                        },
                    );
                }
            }
            15 => match self.rng.below(4) {
                0 => {
                    let e = 0x5e00_0000 + self.handle();
                    self.push(
                        tid,
                        EventCreate {
                            api: Api::cuEventCreate,
                            result: CuResult(0),
                            event: Event(e),
                            flags: 0,
                            stack: StackId(8),
                        },
                    );
                    self.events.push(e);
                }
                1 => {
                    if let Some(e) = self.rng.pick(&self.events) {
                        let s = self.stream();
                        self.push(
                            tid,
                            EventRecord {
                                api: Api::cuEventRecord,
                                result: CuResult(0),
                                event: Event(e),
                                stream: Stream(s),
                                flags: 0,
                            },
                        );
                    }
                }
                2 => {
                    if let Some(e) = self.rng.pick(&self.events) {
                        let s = self.stream();
                        self.push(
                            tid,
                            StreamWait {
                                api: Api::cuStreamWaitEvent,
                                result: CuResult(0),
                                stream: Stream(s),
                                event: Event(e),
                                flags: 0,
                            },
                        );
                    }
                }
                _ => {
                    if let Some(e) = self.rng.pick(&self.events) {
                        self.events.retain(|x| *x != e);
                        self.push(
                            tid,
                            EventDestroy {
                                api: Api::cuEventDestroy_v2,
                                result: CuResult(0),
                                event: Event(e),
                            },
                        );
                    }
                }
            },
            16 | 17 => {
                let ptrs: Vec<u64> = (0..self.rng.below(3))
                    .filter_map(|_| self.rng.pick(&self.live).map(|l| l.1))
                    .collect();
                let s = self.stream();
                let api = if s == 0 && self.rng.below(3) == 0 {
                    Api::cuLaunchKernel_ptsz
                } else {
                    Api::cuLaunchKernel
                };
                let stack = StackId(self.rng.below(3) as u32);
                self.push(
                    tid,
                    Launch {
                        api,
                        result: CuResult(0),
                        stream: Stream(s),
                        function: 9,
                        ptrs: Addrs(Cow::Owned(ptrs)),
                        stack,
                    },
                );
            }
            18 => {
                if let Some((_, p, _)) = self.rng.pick(&self.live) {
                    let s = self.stream();
                    let (api, src) = if self.rng.below(2) == 0 {
                        (Api::cuMemcpyDtoDAsync_v2, self.rng.pick(&self.live).map_or(0, |l| l.1))
                    } else {
                        (Api::cuMemcpyHtoD_v2, 0x7fff_0000_0000)
                    };
                    self.push(
                        tid,
                        gpuleak_format::Copy {
                            api,
                            result: CuResult(0),
                            stream: Stream(s),
                            dst: Ptr(p),
                            src,
                            bytes: 64,
                            stack: StackId::NONE,
                        },
                    );
                }
            }
            19 => {
                let (api, stream, event, c) = match self.rng.below(3) {
                    0 => (Api::cuStreamSynchronize, self.stream(), 0, 0),
                    1 => (Api::cuEventSynchronize, 0, self.rng.pick(&self.events).unwrap_or(0), 0),
                    _ => (Api::cuCtxSynchronize, 0, 0, 0),
                };
                self.push(
                    tid,
                    Sync {
                        api,
                        result: CuResult(0),
                        stream: Stream(stream),
                        event: Event(event),
                        ctx: Ctx(c),
                    },
                );
            }
            20 => {
                // A capture: a stream-ordered allocation, a launch and a free made into graph
                // nodes.
                let Some(s) = self.rng.pick(&self.streams) else { return };
                self.push(
                    tid,
                    Capture {
                        api: Api::cuStreamBeginCapture_v2,
                        result: CuResult(0),
                        stream: Stream(s),
                        begin: 1,
                        aux: 0,
                    },
                );
                let p = self.fresh();
                self.alloc(tid, Api::cuMemAllocAsync, A, s, p, 0);
                self.push(
                    tid,
                    Launch {
                        api: Api::cuLaunchKernel,
                        result: CuResult(0),
                        stream: Stream(s),
                        function: 9,
                        ptrs: Addrs(Cow::Owned(vec![p])),
                        stack: StackId(2),
                    },
                );
                if self.rng.below(2) == 0 {
                    self.free(tid, Api::cuMemFreeAsync, p, s, 0);
                }
                if self.rng.below(4) != 0 {
                    self.push(
                        tid,
                        Capture {
                            api: Api::cuStreamEndCapture,
                            result: CuResult(0),
                            stream: Stream(s),
                            begin: 0,
                            aux: 0x6700,
                        },
                    );
                }
            }
            _ => {
                let value = self.rng.below(100);
                self.push(
                    tid,
                    Mark {
                        name: "step".into(),
                        value,
                    },
                );
            }
        }
    }

    pub(super) fn new(seed: u64, steps: usize) -> Program {
        let mut p = Program {
            rng: Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1),
            records: Vec::new(),
            live: Vec::new(),
            freed: Vec::new(),
            next_ptr: 0x7000_0000_0000,
            streams: Vec::new(),
            events: Vec::new(),
            next_handle: 0,
            vmm: Vec::new(),
            ipc: Vec::new(),
            b_alive: false,
        };
        p.push(
            100,
            ProcessInfo {
                pid: 1,
                ppid: 0,
                exe: "/bin/app".into(),
                args: vec![],
                hostname: "h".into(),
                shim_version: "t".into(),
                unwinder: "fp".into(),
                stack_depth: 8,
                start_unix_ns: 0,
            },
        );
        p.push(
            100,
            gpuleak_format::Rank {
                rank: 3,
                local_rank: 1,
                world_size: 8,
                launcher: "torchrun".into(),
            },
        );
        for id in 1..=8u32 {
            p.push(
                100,
                Stack {
                    id: StackId(id),
                    frames: Addrs(Cow::Owned(vec![0x1000 * u64::from(id)])),
                },
            );
        }
        p.push(
            100,
            CtxCreate {
                api: Api::cuDevicePrimaryCtxRetain,
                result: CuResult(0),
                ctx: A,
                device: 0,
                flags: 0,
            },
        );
        for _ in 0..steps {
            p.step();
        }
        if p.rng.below(2) == 0 {
            p.push(100, Exit { code: 0, how: 1 });
        }
        p
    }

    pub(super) fn file(&self) -> Vec<u8> {
        let mut out = vec![0u8; HEADER_SIZE];
        FileHeader {
            version: FORMAT_VERSION,
            block_size: BLOCK_SIZE as u32,
            pid: 1,
            start_unix_ns: 0,
        }
        .write((&mut out[..]).try_into().unwrap());
        write_records(&mut out, self.records.iter().map(|(t, r)| (*t, r.clone())));
        out
    }
}
