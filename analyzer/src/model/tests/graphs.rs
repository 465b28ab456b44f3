//! Graph memory: each launch of an instantiated graph allocates what its allocation nodes say.
//! Every rule has a case that must find a leak and a twin that must not.

use gpuleak_format::{GraphExec, GraphMem, Launch};

use super::*;

const S: Stream = Stream(0x5d00);
const NODE: u64 = 0x5a00_0000_0000;
const EXEC: u64 = 0x5ce0_0000_0c01;

impl Script {
    /// A capture on `S` in which `cuMemAllocAsync` made an allocation node at `addr` (stack
    /// `stack`), and, when `free` says so, `cuMemFreeAsync` freed it again (a free node).
    fn captured(&mut self, addr: u64, size: u64, stack: u32, free: bool) -> &mut Self {
        let capture = |begin| Capture {
            api: Api::cuStreamBeginCapture_v2,
            result: CuResult::SUCCESS,
            stream: S,
            begin,
            aux: 0,
        };
        self.push(capture(1));
        self.push(Alloc {
            api: Api::cuMemAllocAsync,
            via: Api::cudaMallocAsync,
            result: CuResult::SUCCESS,
            ctx: CTX,
            stream: S,
            ptr: Ptr(addr),
            size,
            stack: StackId(stack),
            aux: 0,
        });
        if free {
            self.push(Free {
                api: Api::cuMemFreeAsync,
                via: Api::NONE,
                result: CuResult::SUCCESS,
                stream: S,
                ptr: Ptr(addr),
                size: 0,
                stack: StackId::NONE,
            });
        }
        self.push(capture(0))
    }

    /// The shim's records of an instantiation: the memory nodes, then `GraphExec`.
    fn instantiate(&mut self, exec: u64, allocs: &[(u64, u64)], frees: &[u64], flags: u64) -> &mut Self {
        self.push(GraphMem {
            exec,
            allocs: Addrs(Cow::Owned(allocs.iter().flat_map(|&(a, n)| [a, n, 0]).collect())),
            frees: Addrs(Cow::Owned(frees.to_vec())),
        });
        self.push(GraphExec {
            graph: 0x5ce0_0000_0b01,
            flags,
            alloc_nodes: allocs.len() as u32,
            free_nodes: frees.len() as u32,
            ..graph_exec(exec)
        })
    }

    fn launch_with(&mut self, exec: u64, result: u32) -> &mut Self {
        self.push(Launch {
            api: Api::cuGraphLaunch,
            result: CuResult(result),
            stream: S,
            function: exec,
            ptrs: Addrs(Cow::Owned(Vec::new())),
            stack: StackId::NONE,
        })
    }

    fn launch(&mut self, exec: u64) -> &mut Self {
        self.launch_with(exec, 0)
    }
}

/// The replay found neither a leak nor a bad free.
fn assert_clean(r: &LeakReplay) {
    assert!(
        r.leaks.is_empty() && r.bad_frees.is_empty(),
        "{:?} {:?}",
        r.leaks,
        r.bad_frees
    );
}

/// A successful `cuGraphInstantiateWithFlags` of `exec` from graph 1, no flags, nodes listed
/// (none), at stack 40: what the tests change field by field.
fn graph_exec(exec: u64) -> GraphExec {
    GraphExec {
        api: Api::cuGraphInstantiateWithFlags,
        via: Api::NONE,
        result: CuResult::SUCCESS,
        exec,
        graph: 1,
        flags: 0,
        alloc_nodes: 0,
        free_nodes: 0,
        nodes_known: 1,
        stack: StackId(40),
    }
}

#[test]
fn memory_a_graph_launch_allocated_and_nobody_freed_is_a_graph_leak_at_the_capture() {
    let mut script = Script::default();
    script
        .captured(NODE, 4096, 3, false)
        .instantiate(EXEC, &[(NODE, 4096)], &[], 0);
    // Made and instantiated, never launched: no memory.
    assert!(script.run().leaks.is_empty());

    script.launch(EXEC);
    let r = script.run();
    assert_eq!(r.leaks.len(), 1, "{:?}", r.leaks);
    let leak = &r.leaks[0];
    assert_eq!((leak.kind, leak.bytes, leak.allocations), (MemKind::Graph, 4096, 1));
    assert_eq!(
        (leak.first.api, leak.first.via, leak.stack),
        (Api::cuMemAllocAsync, Api::cudaMallocAsync, StackId(3))
    );
    assert_eq!(leak.at, LeakAt::Exit);
    assert_eq!(
        (r.peak_bytes, r.counts.graph_launches, r.counts.graph_allocations),
        (4096, 1, 1)
    );

    // The twin: the program frees it after the launch, outside the graph.
    for free in [Api::cuMemFreeAsync, Api::cuMemFree_v2] {
        let mut twin = Script::default();
        twin.captured(NODE, 4096, 3, false)
            .instantiate(EXEC, &[(NODE, 4096)], &[], 0)
            .launch(EXEC)
            .free(free, NODE)
            .launch(EXEC)
            .free(free, NODE);
        let r = twin.run();
        assert_clean(&r);
        assert_eq!((r.counts.allocations, r.counts.frees, r.counts.graph_frees), (2, 2, 0));
        assert_eq!(r.peak_bytes, 4096);
    }
}

#[test]
fn a_refused_launch_allocates_nothing_and_a_second_free_is_a_double_free() {
    let mut script = Script::default();
    script
        .captured(NODE, 4096, 3, false)
        .instantiate(EXEC, &[(NODE, 4096)], &[], 0)
        .launch(EXEC)
        .free(Api::cuMemFreeAsync, NODE)
        .launch_with(EXEC, 1)
        .free_with(Api::cuMemFreeAsync, NODE, 0, 9);
    let r = script.run();
    assert!(r.leaks.is_empty());
    assert_eq!(r.bad_frees.len(), 1, "{:?}", r.bad_frees);
    assert!(matches!(r.bad_frees[0].cause, BadFreeCause::DoubleFree(freed) if freed.site.kind == MemKind::Graph));
}

#[test]
fn auto_free_on_launch_frees_the_previous_launch_s_memory() {
    let run = |flags| {
        let mut script = Script::default();
        script
            .captured(NODE, 4096, 3, false)
            .instantiate(EXEC, &[(NODE, 4096)], &[], flags)
            .launch(EXEC)
            .launch(EXEC)
            .launch(EXEC);
        script.run()
    };
    // Auto-free: each launch frees the last one's; the last launch's is still allocated.
    let r = run(GraphExec::AUTO_FREE_ON_LAUNCH);
    assert_eq!(r.leaks.len(), 1);
    assert_eq!((r.leaks[0].bytes, r.leaks[0].allocations), (4096, 1));
    assert_eq!((r.counts.allocations, r.counts.frees, r.counts.missed_frees), (3, 2, 0));
    // Without it the driver refuses such a launch, so successful ones mean frees the trace
    // missed.
    let r = run(0);
    assert_eq!(r.counts.missed_frees, 2);
}

#[test]
fn memory_a_graph_frees_itself_lives_only_during_the_launch() {
    let mut script = Script::default();
    script
        .captured(NODE, 1 << 20, 3, true)
        .instantiate(EXEC, &[(NODE, 1 << 20)], &[NODE], 0)
        .launch(EXEC)
        .launch(EXEC);
    let r = script.run();
    assert!(r.leaks.is_empty(), "{:?}", r.leaks);
    assert_eq!((r.peak_bytes, r.counts.allocations, r.counts.graph_launches), (0, 0, 2));
}

#[test]
fn a_free_node_of_another_graph_frees_its_memory() {
    let other = EXEC + 1;
    let mut script = Script::default();
    script
        .captured(NODE, 4096, 3, false)
        .instantiate(EXEC, &[(NODE, 4096)], &[], 0)
        .instantiate(other, &[], &[NODE], 0)
        .launch(EXEC);
    let leaky = script.run();
    assert_eq!(leaky.leaks.len(), 1);

    script.launch(other);
    let r = script.run();
    assert!(r.leaks.is_empty(), "{:?}", r.leaks);
    // And then freeing it again outside is a double free.
    script.free(Api::cuMemFreeAsync, NODE);
    let r = script.run();
    assert_eq!(r.bad_frees.len(), 1);
}

#[test]
fn cu_graph_add_mem_alloc_node_is_a_node_and_the_instantiation_stands_in_for_unknown_nodes() {
    let mut script = Script::default();
    script.push(Alloc {
        api: Api::cuGraphAddMemAllocNode,
        via: Api::NONE,
        result: CuResult::SUCCESS,
        ctx: CTX,
        stream: Stream(0),
        ptr: Ptr(NODE),
        size: 512,
        stack: StackId(5),
        aux: 0,
    });
    assert!(script.run().leaks.is_empty(), "a node is no memory");
    script
        .instantiate(EXEC, &[(NODE, 512), (NODE + 0x1000, 256)], &[], 0)
        .launch(EXEC);
    let r = script.run();
    let mut sites: Vec<(StackId, Api, u64)> = r.leaks.iter().map(|l| (l.stack, l.first.api, l.bytes)).collect();
    sites.sort();
    // The node the trace saw made is reported where it was made; the other (a node the shim
    // could not see made) at the instantiation.
    assert_eq!(
        sites,
        [
            (StackId(5), Api::cuGraphAddMemAllocNode, 512),
            (StackId(40), Api::cuGraphInstantiateWithFlags, 256)
        ]
    );
}

#[test]
fn launches_of_graphs_with_unknown_nodes_count_nothing_and_are_noted() {
    let mut script = Script::default();
    script.captured(NODE, 4096, 3, false).push(GraphExec {
        nodes_known: 0,
        ..graph_exec(EXEC)
    });
    script.launch(EXEC).launch(EXEC + 9).free(Api::cuMemFreeAsync, NODE);
    let r = script.run();
    assert_clean(&r);
    assert_eq!((r.counts.unknown_graph_launches, r.counts.graph_frees), (2, 1));
}

#[test]
fn a_failed_instantiation_makes_no_graph() {
    let mut script = Script::default();
    script.captured(NODE, 4096, 3, false).push(GraphMem {
        exec: EXEC,
        allocs: Addrs(Cow::Owned(vec![NODE, 4096, 0])),
        frees: Addrs(Cow::Owned(vec![])),
    });
    script.push(GraphExec {
        result: CuResult(1),
        alloc_nodes: 1,
        ..graph_exec(EXEC)
    });
    script.launch(EXEC);
    let r = script.run();
    assert!(r.leaks.is_empty());
    assert_eq!(r.counts.unknown_graph_launches, 1);
}

#[test]
fn graph_memory_goes_with_its_context() {
    let mut script = Script::default();
    script
        .ctx(Api::cuCtxCreate_v2, CTX)
        .captured(NODE, 4096, 3, false)
        .instantiate(EXEC, &[(NODE, 4096)], &[], 0)
        .launch(EXEC)
        .destroy(Api::cuCtxDestroy_v2, CTX, 0);
    let r = script.run();
    assert_eq!(r.leaks.len(), 1);
    assert!(matches!(r.leaks[0].at, LeakAt::Teardown { .. }));
}

#[test]
fn the_generic_cu_graph_add_node_makes_a_node_like_cu_graph_add_mem_alloc_node() {
    for api in [Api::cuGraphAddNode, Api::cuGraphAddNode_v2] {
        let mut script = Script::default();
        script.alloc(api, NODE, 512, 6);
        assert!(script.run().leaks.is_empty(), "a node is no memory");
        script.instantiate(EXEC, &[(NODE, 512)], &[], 0).launch(EXEC);
        let r = script.run();
        let sites: Vec<(StackId, Api, u64)> = r.leaks.iter().map(|l| (l.stack, l.first.api, l.bytes)).collect();
        assert_eq!(sites, [(StackId(6), api, 512)], "reported where the node was made");
        assert_eq!((r.counts.graph_allocations, r.counts.allocations), (1, 1));
        // The twin: freed after the launch.
        script.free(Api::cuMemFree_v2, NODE);
        let r = script.run();
        assert_clean(&r);
    }
}

#[test]
fn a_node_s_location_names_its_device_or_host_memory() {
    use gpuleak_format::MemLocation;

    use super::super::graphs::Graphs;

    let mut graphs = Graphs::default();
    graphs.listed(&GraphMem {
        exec: EXEC,
        allocs: Addrs(Cow::Owned(vec![
            NODE,
            64,
            MemLocation::encode(1, 2),
            NODE + 0x1000,
            64,
            MemLocation::encode(3, 0),
            // The first shims that wrote the record: the device ordinal alone.
            NODE + 0x2000,
            64,
            1,
            NODE + 0x3000,
            64,
            MemLocation::encode(9, 0),
        ])),
        frees: Addrs(Cow::Owned(vec![])),
    });
    graphs.instantiated(&GraphExec {
        alloc_nodes: 4,
        ..graph_exec(EXEC)
    });
    let exec = graphs.exec(EXEC).expect("instantiated");
    let devices: Vec<i32> = exec.allocs.iter().map(|a| a.device).collect();
    assert_eq!(devices, [2, crate::memory::HOST, 1, crate::memory::UNKNOWN_DEVICE]);
}
