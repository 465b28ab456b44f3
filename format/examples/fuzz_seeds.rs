//! Writes small, valid traces for the trace decoder's fuzz target to start from
//! (`fuzz/fuzz_targets/trace.rs`): the smallest block size the reader accepts (4 KiB), two
//! threads' blocks, most record kinds (Python frames, pool samples, graph memory and event nodes, external semaphores, prefetches, host functions, library workspaces and checkpoints included), and the same
//! file cut inside its last block.
//!
//! cargo run -p gpuleak-format --example fuzz_seeds -- DIR

use std::borrow::Cow;

use gpuleak_format::*;

const SMALL_BLOCK: usize = 4096;

fn body_at(i: u64) -> Body<'static> {
    let ptr = 0x7f00_0000_0000 + (i % 7) * 0x1000;
    match i % 29 {
        0 => Alloc {
            api: Api::cuMemAlloc_v2,
            via: Api::NONE,
            result: CuResult(0),
            ctx: Ctx(0x5555_0000),
            stream: Stream(0),
            ptr: Ptr(ptr),
            size: 4096 + i,
            stack: StackId(1),
            aux: 0,
        }
        .into(),
        1 => Free {
            api: Api::cuMemFree_v2,
            via: Api::NONE,
            result: CuResult(0),
            stream: Stream(0),
            ptr: Ptr(ptr),
            size: 0,
            stack: StackId::NONE,
        }
        .into(),
        2 => StreamCreate {
            api: Api::cuStreamCreate,
            result: CuResult(0),
            stream: Stream(0x6000 + i),
            flags: 1,
            priority: -1,
            stack: StackId(1),
        }
        .into(),
        3 => Launch {
            api: Api::cuLaunchKernel,
            result: CuResult(0),
            stream: Stream(0x6000),
            function: 0x4242,
            ptrs: Addrs(Cow::Owned(vec![ptr, ptr + 64])),
            stack: StackId::NONE,
        }
        .into(),
        4 => Mark {
            name: "step".into(),
            value: i,
        }
        .into(),
        5 => Snapshot {
            id: i,
            reason: "api".into(),
        }
        .into(),
        6 => Alloc {
            api: Api::cuMemAllocAsync,
            via: Api::NONE,
            result: CuResult(2),
            ctx: Ctx(0x5555_0000),
            stream: Stream(0x6000),
            ptr: Ptr(0),
            size: 1 << 30,
            stack: StackId(1),
            aux: 0,
        }
        .into(),
        7 => StreamDestroy {
            api: Api::cuStreamDestroy_v2,
            result: CuResult(0),
            stream: Stream(0x6000 + i - 5),
        }
        .into(),
        8 => Region {
            name: "epoch".into(),
            begin: (i % 2) as u32,
        }
        .into(),
        9 => PyCode {
            id: i as u32,
            python: 0x030b_07f0,
            first_line: 12,
            filename: "train.py".into(),
            qualname: "Model.step".into(),
            line_table: Cow::Owned(vec![0x80, 0x00, 0xd8, 0x04, 0x08, 0x89, 0x04]),
        }
        .into(),
        10 => PyFrames {
            stack: StackId(1),
            frames: Addrs(Cow::Owned(vec![2, i, 48, 3, i, 120])),
        }
        .into(),
        11 => PoolUsage {
            pool: 0x7000,
            device: 0,
            reserved: 32 << 20,
            used: (i % 5) << 20,
        }
        .into(),
        12 => PoolCreate {
            api: Api::cuMemPoolCreate,
            via: Api::cudaMemPoolCreate,
            result: CuResult(0),
            pool: 0x7000 + i,
            location_type: 1,
            location: 0,
            max_size: 1 << 30,
            handle_types: 0,
            stack: StackId(1),
        }
        .into(),
        13 => PoolDestroy {
            api: Api::cuMemPoolDestroy,
            via: Api::NONE,
            result: CuResult(0),
            pool: 0x7000 + i - 1,
            stack: StackId::NONE,
        }
        .into(),
        14 => GraphMem {
            exec: 0x9000 + i,
            allocs: Addrs(Cow::Owned(vec![0x5a00_0000_0000 + i * 0x1000, 4096, 0])),
            frees: Addrs(Cow::Owned(vec![0x5a00_0000_0000 + i * 0x1000])),
        }
        .into(),
        15 => GraphExec {
            api: Api::cuGraphInstantiateWithFlags,
            via: Api::NONE,
            result: CuResult(0),
            exec: 0x9000 + i - 1,
            graph: 0x8000 + i,
            flags: GraphExec::AUTO_FREE_ON_LAUNCH,
            alloc_nodes: 1,
            free_nodes: 1,
            nodes_known: 1,
            stack: StackId(1),
        }
        .into(),
        16 => GraphEvents {
            exec: 0x9000 + i - 2,
            records: Addrs(Cow::Owned(vec![0x6000 + i, 0xe000 + i, 0])),
            waits: Addrs(Cow::Owned(vec![0x6100 + i, 0xe100 + i, 0x6200 + i])),
        }
        .into(),
        17 => GraphAccesses {
            exec: 0x9000 + i - 3,
            nodes: Addrs(Cow::Owned(vec![
                0x6300 + i,
                0,
                0x5a00_0000_0000 + i * 0x1000,
                GraphAccesses::encode(4096, GraphAccesses::WRITE),
            ])),
        }
        .into(),
        18 => GraphNode {
            api: Api::cuLaunchKernel,
            graph: 0x8000 + i - 3,
            node: 0x6300 + i - 1,
            kind: GraphNode::KERNEL,
            stack: StackId(1),
        }
        .into(),
        19 => GraphEdges {
            exec: 0x9000 + i - 5,
            entries: Addrs(Cow::Owned(vec![GraphEdges::EDGE, 0x6300 + i - 2, 0x6300 + i - 1])),
        }
        .into(),
        20 => GraphMemNodes {
            exec: 0x9000 + i - 6,
            allocs: Addrs(Cow::Owned(vec![0x6300 + i, 0, 0x5a00_0000_0000 + i * 0x1000, 4096])),
            frees: Addrs(Cow::Owned(vec![0x6300 + i + 1, 0, 0x5a00_0000_0000 + i * 0x1000])),
        }
        .into(),
        21 => ExtSemaphore {
            api: Api::cuImportExternalSemaphore,
            result: CuResult(0),
            semaphore: 0x5e5e_0000_0000 + i % 3,
            handle_type: [1, 9, 7][(i % 3) as usize],
            flags: 0,
            stack: StackId(1),
        }
        .into(),
        23 => RangeOp {
            api: Api::cuMemPrefetchAsync_v2,
            result: CuResult(0),
            stream: 0x5100 + i % 2,
            ptr,
            bytes: 0x1000,
            location: MemLocation::encode(1, 0),
            stack: StackId(1),
        }
        .into(),
        22 => ExtSemaphoreOp {
            api: Api::cuSignalExternalSemaphoresAsync,
            result: CuResult(0),
            stream: 0x5100 + i % 2,
            semaphore: 0x5e5e_0000_0000 + i % 3,
            value: i,
            key: i % 2,
            flags: 0,
        }
        .into(),
        26 => HostFnQueued {
            api: Api::cuLaunchHostFunc,
            result: CuResult(0),
            stream: 0x6000,
            id: i,
        }
        .into(),
        // The run of the host function queued just before.
        27 => HostFnRan { id: i - 1 }.into(),
        28 => LibWorkspace {
            library: [LibWorkspace::CUBLAS, LibWorkspace::CUBLAS_LT][(i % 2) as usize],
            ptr,
            size: 32 << 20,
        }
        .into(),
        25 => Checkpoint {
            as_of: i,
            segment: 1,
            kept: 3,
            dropped: 40,
            missing: 0,
            counts: Addrs(Cow::Owned(vec![
                u64::from(Alloc::KIND),
                u64::from(Api::cuMemAlloc_v2.0),
                0,
                30,
                u64::from(Free::KIND),
                u64::from(Api::cuMemFree_v2.0),
                Checkpoint::FAILED,
                10,
            ])),
        }
        .into(),
        _ => GraphUpdate {
            api: Api::cuGraphExecUpdate_v2,
            via: Api::NONE,
            result: CuResult(0),
            what: GraphUpdate::GRAPH,
            exec: 0x9000 + i - 4,
            node: 0,
            event: 0,
            graph: 0x8000 + i,
            listed: 1,
        }
        .into(),
    }
}

fn main() {
    let dir = std::env::args().nth(1).expect("usage: fuzz_seeds DIR");
    std::fs::create_dir_all(&dir).expect("create the seed directory");
    let mut file = vec![0u8; HEADER_SIZE + 2 * SMALL_BLOCK];
    FileHeader {
        version: FORMAT_VERSION,
        block_size: SMALL_BLOCK as u32,
        pid: 4242,
        start_unix_ns: 1_700_000_000_000_000_000,
    }
    .write((&mut file[..HEADER_SIZE]).try_into().expect("header size"));
    let (first, second) = file[HEADER_SIZE..].split_at_mut(SMALL_BLOCK);
    let mut c0 = BlockCursor::start(first, 100, 1, 0);
    let mut c1 = BlockCursor::start(second, 101, 4, 0);
    let preamble: [Body<'static>; 3] = [
        ProcessInfo {
            pid: 4242,
            ppid: 1,
            exe: "/usr/bin/app".into(),
            args: vec!["app".into(), "--epochs=2".into()],
            hostname: "node".into(),
            shim_version: "0.1.0".into(),
            unwinder: "dwarf".into(),
            stack_depth: 64,
            start_unix_ns: 1_700_000_000_000_000_000,
        }
        .into(),
        Module {
            base: 0x5555_0000_0000,
            start: 0x5555_0000_1000,
            end: 0x5555_0001_0000,
            path: "/usr/bin/app".into(),
            build_id: Cow::Owned(vec![0xab; 20]),
        }
        .into(),
        Stack {
            id: StackId(1),
            frames: Addrs(Cow::Owned(vec![0x5555_0000_1234, 0x5555_0000_2345, 0x5555_0000_3456])),
        }
        .into(),
    ];
    let mut seq = 1;
    for body in preamble {
        let rec = Record {
            seq: Seq(seq),
            time_ns: seq,
            body,
        };
        c0.append(first, &rec).expect("the preamble fits");
        seq += 1;
    }
    for i in 0..60u64 {
        let rec = Record {
            seq: Seq(seq),
            time_ns: seq * 1000,
            body: body_at(i),
        };
        let ok = if i % 2 == 0 {
            c0.append(first, &rec)
        } else {
            c1.append(second, &rec)
        };
        if ok.is_err() {
            break;
        }
        seq += 1;
    }
    let path = std::path::Path::new(&dir).join("two_threads.trace");
    std::fs::write(&path, &file).expect("write the seed");
    // The same, cut inside its second block (a killed process's last block).
    let cut = std::path::Path::new(&dir).join("cut.trace");
    std::fs::write(&cut, &file[..HEADER_SIZE + SMALL_BLOCK + 300]).expect("write the seed");
    println!("{} {}", path.display(), cut.display());
}
