//! Entry points recorded through the existing record kinds: host functions (`HostFn`),
//! `cuLaunchKernelEx` and graph launches (`Launch`), 2D and 3D copies (`Copy`).

use gpuleak_format::*;

use super::super::*;
use super::{tidy, two_streams, Run, A, B, E, P};

const Q: u64 = P + 0x10000;

impl Run {
    fn graph(&mut self, api: Api, stream: u64) -> &mut Run {
        self.launch_on(MAIN_THREAD, api, stream, &[])
    }

    fn host_fn(&mut self, api: Api, stream: u64) -> &mut Run {
        self.r(HostFn {
            api,
            result: CuResult::SUCCESS,
            stream: Stream(stream),
        })
    }
}

const MAIN_THREAD: u32 = super::MAIN;

#[test]
fn a_graph_launch_left_unsynchronized_is_found_once_and_a_synchronized_one_is_not() {
    let mut r = two_streams(1);
    r.graph(Api::cuGraphLaunch, A).destroy(A).destroy(B);
    let found = r.finish();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].check, Check::UnsynchronizedAtExit);
    assert_eq!(found[0].op.api, Api::cuGraphLaunch);
    assert_eq!(found[0].op.stream, StreamName::Handle(A));
    // A synchronous cuMemFree waits for the device, the graph included.
    let mut r = two_streams(1);
    r.graph(Api::cuGraphLaunch, A).destroy(A).destroy(B);
    r.free_with(Api::cuMemFree_v2, P, 0);
    assert_eq!(r.checks(), Vec::<&str>::new());
    // Twin: the host waits for the stream.
    let mut r = two_streams(1);
    r.graph(Api::cuGraphLaunch, A);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
    // Handle 0 of the _ptsz variant is the thread's own default stream.
    let mut r = Run::new();
    r.graph(Api::cuGraphLaunch_ptsz, 0);
    let found = r.finish();
    assert_eq!(found[0].op.stream, StreamName::PerThread(MAIN_THREAD));
}

#[test]
fn a_graph_launch_touches_no_memory_it_could_race_on() {
    // Kernels on both sides of graph launches, with no edge between the streams: only the
    // kernels race, and only with each other.
    let mut r = two_streams(1);
    r.launch(A, P)
        .graph(Api::cuGraphLaunch, B)
        .graph(Api::cuGraphLaunch, A)
        .graph(Api::cuGraphLaunch_ptsz, 0);
    tidy(&mut r);
    r.ctx_sync();
    assert_eq!(r.checks(), Vec::<&str>::new());
    // A stream-ordered free after a graph launch on another stream: nothing known to race.
    let mut r = two_streams(1);
    r.alloc_with(Api::cuMemAllocAsync, Q, 4096, A)
        .sync(A)
        .graph(Api::cuGraphLaunch, B)
        .free_async(Q, A);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn a_graph_launch_is_work_that_orders_and_is_ordered() {
    // A graph launch on the legacy stream waits for blocking stream A's kernel, and blocking
    // stream B's later read waits for the graph: no race.
    let mut r = two_streams(0);
    r.launch(A, P).graph(Api::cuGraphLaunch, 0).read_back(B);
    tidy(&mut r);
    r.sync(0);
    assert_eq!(r.checks(), Vec::<&str>::new());
    // Without it, the read races with the kernel.
    let mut r = two_streams(1);
    r.launch(A, P).graph(Api::cuGraphLaunch, 0).read_back(B);
    tidy(&mut r);
    r.sync(0);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
    // An event recorded after a graph launch covers it.
    let mut r = two_streams(1);
    r.event(E)
        .graph(Api::cuGraphLaunch, A)
        .record(E, A)
        .sync_on(MAIN_THREAD, Api::cuEventSynchronize, 0, E)
        .event_destroy(E)
        .destroy(A);
    r.sync(B).destroy(B);
    r.free_with(Api::cuMemFree_v2, P, 0);
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn a_host_function_is_queued_work_like_a_callback() {
    for api in [Api::cuLaunchHostFunc, Api::cuStreamAddCallback] {
        let mut r = two_streams(1);
        r.host_fn(api, A).destroy(A).destroy(B);
        let found = r.finish();
        assert_eq!(found.len(), 1, "{api}: {found:#?}");
        assert_eq!(found[0].check, Check::UnsynchronizedAtExit);
        assert_eq!(found[0].op.api, api);
        // Twin: waited for.
        let mut r = two_streams(1);
        r.host_fn(api, A);
        tidy(&mut r);
        assert_eq!(r.checks(), Vec::<&str>::new(), "{api}");
    }
    let mut r = Run::new();
    r.host_fn(Api::cuLaunchHostFunc_ptsz, 0);
    assert_eq!(r.finish()[0].op.stream, StreamName::PerThread(MAIN_THREAD));
}

#[test]
fn a_kernel_launched_with_a_config_or_cooperatively_races_and_orders_like_any_kernel() {
    for (api, ptsz) in [
        (Api::cuLaunchKernelEx, Api::cuLaunchKernelEx_ptsz),
        (Api::cuLaunchCooperativeKernel, Api::cuLaunchCooperativeKernel_ptsz),
    ] {
        let mut r = two_streams(1);
        r.launch_on(MAIN_THREAD, api, A, &[P]).read_back(B);
        tidy(&mut r);
        let found = r.finish();
        assert_eq!(found.len(), 1, "{found:#?}");
        assert_eq!(found[0].check, Check::CrossStreamRace);
        assert_eq!(found[0].other.unwrap().api, api);
        assert!(found[0].is_error(), "{found:#?}");
        // With another kernel: a warning (neither is known to write).
        let mut r = two_streams(1);
        r.launch_on(MAIN_THREAD, ptsz, 0, &[P]).launch(B, P);
        tidy(&mut r);
        let found = r.finish();
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(found[0].kernels_only() && !found[0].is_error(), "{found:#?}");
        // Twin: ordered by an event.
        let mut r = two_streams(1);
        r.event(E)
            .launch_on(MAIN_THREAD, ptsz, A, &[P])
            .record(E, A)
            .wait(B, E)
            .read_back(B)
            .event_destroy(E);
        tidy(&mut r);
        assert_eq!(r.checks(), Vec::<&str>::new(), "{api}");
    }
}

#[test]
fn a_2d_async_copy_races_on_the_range_it_spans() {
    // Kernel on A writes P; a 2D copy on B reads rows of P's allocation to the host. (A
    // kernel is taken to touch the byte its pointer names, so the rows start there.)
    let mut r = two_streams(1);
    r.launch(A, P).copy(Api::cuMemcpy2DAsync_v2, B, 0x1000, P, 3 * 512 + 64);
    tidy(&mut r);
    let found = r.finish();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(found[0].op.api, Api::cuMemcpy2DAsync_v2);
    // Ordered by an event: nothing.
    let mut r = two_streams(1);
    r.event(E)
        .launch(A, P)
        .record(E, A)
        .wait(B, E)
        .copy(Api::cuMemcpy3DAsync_v2_ptsz, B, 0x1000, P, 4096)
        .event_destroy(E);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn a_synchronous_2d_copy_blocks_the_host_only_when_a_side_is_host_memory() {
    for (api, dst, src, host_waits) in [
        // Host to device and device to host: the host waits.
        (Api::cuMemcpy2D_v2, P, 0x1000, true),
        (Api::cuMemcpy3D_v2, 0x1000, P, true),
        // Pinned host memory is host memory too.
        (Api::cuMemcpy2DUnaligned_v2, 0x5000_0000, P, true),
        // Device to device, and device to an array (0): queued on the legacy stream.
        (Api::cuMemcpy2D_v2, Q, P, false),
        (Api::cuMemcpy3D_v2_ptds, P, 0, false),
    ] {
        let mut r = Run::new();
        r.alloc(P).alloc(Q);
        r.alloc_with(Api::cuMemAllocHost_v2, 0x5000_0000, 4096, 0);
        r.copy(api, 0, dst, src, 64);
        let checks = r.checks();
        let expected: Vec<&str> = if host_waits {
            vec![]
        } else {
            vec!["unsynchronized-at-exit"]
        };
        assert_eq!(checks, expected, "{api} {dst:#x} <- {src:#x}");
    }
}

#[test]
fn the_new_per_thread_variants_name_the_thread_s_stream() {
    let mut r = Run::new();
    r.alloc(P);
    r.on(
        7,
        Copy {
            api: Api::cuMemcpy2DAsync_v2_ptsz,
            result: CuResult::SUCCESS,
            stream: Stream(0),
            dst: Ptr(P),
            src: 0x1000,
            bytes: 64,
            stack: StackId::NONE,
        },
    );
    let found = r.finish();
    assert_eq!(found[0].op.stream, StreamName::PerThread(7), "{found:#?}");
}
