//! Writes a synthetic trace of a long-running multi-threaded CUDA program, for benchmarking the
//! analyzer (`bench/analyzer`): steady allocation churn with a bounded live set and a fixed
//! number of distinct stacks, kernel launches and copies on per-thread streams, and a few
//! allocations left live at exit. The file is written block by block, so the generator's own
//! memory does not grow with the trace either.
//!
//! ```text
//! cargo run --release -p gpuleak-analyzer --example synth_trace -- OUT EVENTS \
//!     [--threads 4] [--live 10000] [--stacks 2000] [--depth 24] [--seed 1] [--pid 4242] [--marks 0]
//!     [--rank N --world N]
//! ```
//!
//! `--rank N` writes a `Rank` record (rank N of `--world`, as torchrun would give it), for the
//! traces of a distributed job (`bench/ranks`).
//!
//! `--marks N` writes a `Mark` record (`gpuleak_mark("step", i)`) every N events, as a
//! training loop that marks its steps would (0: none).
//!
//! EVENTS counts the records of the churn (allocations, frees, launches, copies, syncs); the
//! process, module, stream and stack records come on top.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::process::ExitCode;

use gpuleak_format::{
    Addrs, Alloc, Api, BlockCursor, Body, Copy, Ctx, CtxCreate, CuResult, Exit, FileHeader, Free, Launch, Mark, Module,
    ProcessInfo, Ptr, Rank, Record, Seq, Stack, StackId, Stream, StreamCreate, Sync, BLOCK_SIZE, FORMAT_VERSION,
    HEADER_SIZE,
};

/// Where the synthetic program's code lives: one module, frames anywhere in its text.
const MODULE_START: u64 = 0x5555_5555_0000;
const MODULE_END: u64 = MODULE_START + 0x40_0000;
/// Where device (and stream-ordered) memory is handed out.
const DEVICE_BASE: u64 = 0x7f00_0000_0000;
/// Where pinned host memory is handed out.
const HOST_BASE: u64 = 0x7e00_0000_0000;
const CTX: u64 = 0x5555_0000_1000;

struct Options {
    out: String,
    events: u64,
    threads: usize,
    live: usize,
    stacks: u32,
    depth: usize,
    seed: u64,
    pid: u32,
    marks: u64,
    rank: Option<u64>,
    world: u64,
}

fn usage() -> ExitCode {
    eprintln!(
        "usage: synth_trace OUT EVENTS [--threads N] [--live N] [--stacks N] [--depth N] [--seed N] [--pid N] [--marks N] [--rank N --world N]"
    );
    ExitCode::from(2)
}

fn parse() -> Option<Options> {
    let mut args = std::env::args().skip(1);
    let out = args.next()?;
    let events = args.next()?.parse().ok()?;
    let mut o = Options {
        out,
        events,
        threads: 4,
        live: 10_000,
        stacks: 2_000,
        depth: 24,
        seed: 1,
        pid: 4242,
        marks: 0,
        rank: None,
        world: 1,
    };
    while let Some(flag) = args.next() {
        let value: u64 = args.next()?.parse().ok()?;
        match flag.as_str() {
            "--threads" => o.threads = (value as usize).max(1),
            "--live" => o.live = (value as usize).max(1),
            "--stacks" => o.stacks = (value as u32).max(1),
            "--depth" => o.depth = (value as usize).clamp(1, 128),
            "--seed" => o.seed = value,
            "--pid" => o.pid = value as u32,
            "--marks" => o.marks = value,
            "--rank" => o.rank = Some(value),
            "--world" => o.world = value,
            _ => return None,
        }
    }
    Some(o)
}

/// xorshift64*: fast, deterministic for a seed, good enough to shuffle a workload.
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
}

/// The trace file: blocks are claimed in file order as threads start them, and written out
/// when full.
struct Writer {
    file: File,
    next_block: u64,
    seq: u64,
    time: u64,
}

/// One writing thread: its block, the block's place in the file, and its share of the program.
struct Thread {
    tid: u32,
    stream: Stream,
    block: Vec<u8>,
    slot: u64,
    cursor: Option<BlockCursor>,
    live: Vec<(Api, u64, u64)>,
}

impl Writer {
    fn append(&mut self, t: &mut Thread, body: Body<'_>) -> std::io::Result<()> {
        self.seq += 1;
        self.time += 150 + self.seq % 7 * 40;
        let record = Record {
            seq: Seq(self.seq),
            time_ns: self.time,
            body,
        };
        for _ in 0..2 {
            if t.cursor.is_none() {
                t.block.fill(0);
                t.slot = self.next_block;
                self.next_block += 1;
                t.cursor = Some(BlockCursor::start(&mut t.block, t.tid, self.seq, self.time - 1));
            }
            if let Some(c) = t.cursor.as_mut() {
                if c.append(&mut t.block, &record).is_ok() {
                    return Ok(());
                }
            }
            self.flush(t)?;
        }
        Err(std::io::Error::other("a record does not fit in an empty block"))
    }

    fn flush(&mut self, t: &mut Thread) -> std::io::Result<()> {
        if t.cursor.take().is_some() {
            let at = HEADER_SIZE as u64 + t.slot * BLOCK_SIZE as u64;
            self.file.write_all_at(&t.block, at)?;
        }
        Ok(())
    }
}

fn main() -> ExitCode {
    let Some(o) = parse() else { return usage() };
    match generate(&o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("synth_trace: {}: {e}", o.out);
            ExitCode::from(2)
        }
    }
}

fn generate(o: &Options) -> std::io::Result<()> {
    let file = File::create(&o.out)?;
    let mut header = [0u8; HEADER_SIZE];
    FileHeader {
        version: FORMAT_VERSION,
        block_size: BLOCK_SIZE as u32,
        pid: o.pid,
        start_unix_ns: 1_700_000_000_000_000_000,
    }
    .write(&mut header);
    file.write_all_at(&header, 0)?;
    let mut w = Writer {
        file,
        next_block: 0,
        seq: 0,
        time: 0,
    };
    let mut rng = Rng(o.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut threads: Vec<Thread> = (0..o.threads)
        .map(|i| Thread {
            tid: o.pid + i as u32,
            stream: Stream(0x5555_0100_0000 + i as u64 * 0x100),
            block: vec![0; BLOCK_SIZE],
            slot: 0,
            cursor: None,
            live: Vec::new(),
        })
        .collect();
    // Stacks: each a fixed list of return addresses, written by the first thread to use it.
    let stack_frames = |id: u32| -> Vec<u64> {
        let mut r = Rng(u64::from(id).wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        (0..o.depth)
            .map(|_| MODULE_START + 0x1000 + r.below(MODULE_END - MODULE_START - 0x2000))
            .collect()
    };
    let mut written = vec![false; o.stacks as usize + 1];

    let main = &mut threads[0];
    let exe = "/opt/synthetic/bin/trainer";
    w.append(
        main,
        ProcessInfo {
            pid: o.pid,
            ppid: 1,
            exe: exe.into(),
            args: vec![exe.into(), "--synthetic".into()],
            hostname: "bench".into(),
            shim_version: "synthetic".into(),
            unwinder: "fp".into(),
            stack_depth: o.depth as u32,
            start_unix_ns: 1_700_000_000_000_000_000,
        }
        .into(),
    )?;
    if let Some(rank) = o.rank {
        w.append(
            main,
            Rank {
                rank,
                local_rank: rank % 8,
                world_size: o.world,
                launcher: "torchrun".into(),
            }
            .into(),
        )?;
    }
    w.append(
        main,
        Module {
            base: MODULE_START - 0x1000,
            start: MODULE_START,
            end: MODULE_END,
            path: "/opt/synthetic/lib/libtrainer.so".into(),
            build_id: (&[0xab; 20][..]).into(),
        }
        .into(),
    )?;
    w.append(
        main,
        CtxCreate {
            api: Api::cuDevicePrimaryCtxRetain,
            result: CuResult::SUCCESS,
            ctx: Ctx(CTX),
            device: 0,
            flags: 0,
        }
        .into(),
    )?;
    for t in threads.iter_mut() {
        let stream = t.stream;
        w.append(
            t,
            StreamCreate {
                api: Api::cuStreamCreate,
                result: CuResult::SUCCESS,
                stream,
                flags: 1,
                priority: 0,
                stack: StackId::NONE,
            }
            .into(),
        )?;
    }

    let per_thread = (o.live / o.threads).max(1);
    let mut free_device: Vec<u64> = Vec::new();
    let mut free_host: Vec<u64> = Vec::new();
    let (mut next_device, mut next_host) = (DEVICE_BASE, HOST_BASE);
    for event in 0..o.events {
        let t = &mut threads[rng.below(o.threads as u64) as usize];
        if o.marks > 0 && event % o.marks == 0 {
            let mark = Mark {
                name: "step".into(),
                value: event / o.marks,
            };
            w.append(t, mark.into())?;
        }
        let roll = rng.below(100);
        let fill = t.live.len() as u64 * 100 / per_thread as u64;
        if roll < 8 && !t.live.is_empty() {
            // A kernel on the thread's stream over two of its buffers.
            let a = t.live[rng.below(t.live.len() as u64) as usize].1;
            let b = t.live[rng.below(t.live.len() as u64) as usize].1;
            let stream = t.stream;
            w.append(
                t,
                Launch {
                    api: Api::cuLaunchKernel,
                    result: CuResult::SUCCESS,
                    stream,
                    function: 0x5555_0200_0000 + roll,
                    ptrs: Addrs(vec![a, b].into()),
                    stack: StackId::NONE,
                }
                .into(),
            )?;
        } else if roll < 10 && !t.live.is_empty() {
            let (api, dst, size) = t.live[rng.below(t.live.len() as u64) as usize];
            let stream = t.stream;
            if api != Api::cuMemAllocHost_v2 {
                w.append(
                    t,
                    Copy {
                        api: Api::cuMemcpyHtoDAsync_v2,
                        result: CuResult::SUCCESS,
                        stream,
                        dst: Ptr(dst),
                        src: 0x5555_7000_0000,
                        bytes: size.min(4096),
                        stack: StackId::NONE,
                    }
                    .into(),
                )?;
            }
        } else if roll < 11 {
            let stream = t.stream;
            w.append(
                t,
                Sync {
                    api: Api::cuStreamSynchronize,
                    result: CuResult::SUCCESS,
                    stream,
                    event: Default::default(),
                    ctx: Ctx(0),
                }
                .into(),
            )?;
        } else if rng.below(100) >= fill || t.live.is_empty() {
            // Allocate: mostly device memory, some stream-ordered, a little pinned host.
            let stack = 1 + rng.below(u64::from(o.stacks)) as u32;
            if !written[stack as usize] {
                written[stack as usize] = true;
                let frames = stack_frames(stack);
                w.append(
                    t,
                    Stack {
                        id: StackId(stack),
                        frames: Addrs(frames.into()),
                    }
                    .into(),
                )?;
            }
            let kind = rng.below(20);
            let api = match kind {
                0..=13 => Api::cuMemAlloc_v2,
                14..=18 => Api::cuMemAllocAsync,
                _ => Api::cuMemAllocHost_v2,
            };
            let size = 256 << rng.below(14);
            let (pool, next) = if api == Api::cuMemAllocHost_v2 {
                (&mut free_host, &mut next_host)
            } else {
                (&mut free_device, &mut next_device)
            };
            // Addresses come back the way a first-fit heap hands them out: recent ones first.
            let ptr = match pool.pop() {
                Some(p) => p,
                None => {
                    *next += 1 << 22;
                    *next
                }
            };
            let stream = t.stream;
            w.append(
                t,
                Alloc {
                    api,
                    via: Api::NONE,
                    result: CuResult::SUCCESS,
                    ctx: Ctx(CTX),
                    stream: if api == Api::cuMemAllocAsync { stream } else { Stream(0) },
                    ptr: Ptr(ptr),
                    size,
                    stack: StackId(stack),
                    aux: 0,
                }
                .into(),
            )?;
            t.live.push((api, ptr, size));
        } else {
            let i = rng.below(t.live.len() as u64) as usize;
            let (api, ptr, _) = t.live.swap_remove(i);
            free(&mut w, t, api, ptr)?;
            if api == Api::cuMemAllocHost_v2 {
                free_host.push(ptr);
            } else {
                free_device.push(ptr);
            }
        }
    }
    // At exit: one allocation in fifty is left live (a leak); the rest is freed.
    for t in threads.iter_mut() {
        let live = std::mem::take(&mut t.live);
        for (i, (api, ptr, _)) in live.into_iter().enumerate() {
            if i % 50 != 7 {
                free(&mut w, t, api, ptr)?;
            }
        }
    }
    let main = &mut threads[0];
    w.append(main, Exit { code: 0, how: 0 }.into())?;
    for t in threads.iter_mut() {
        w.flush(t)?;
    }
    Ok(())
}

fn free(w: &mut Writer, t: &mut Thread, api: Api, ptr: u64) -> std::io::Result<()> {
    let (api, stream) = match api {
        Api::cuMemAllocHost_v2 => (Api::cuMemFreeHost, Stream(0)),
        Api::cuMemAllocAsync => (Api::cuMemFreeAsync, t.stream),
        _ => (Api::cuMemFree_v2, Stream(0)),
    };
    w.append(
        t,
        Free {
            api,
            via: Api::NONE,
            result: CuResult::SUCCESS,
            stream,
            ptr: Ptr(ptr),
            size: 0,
            stack: StackId::NONE,
        }
        .into(),
    )
}
