//! Stream memory operations (`MemOp` records): a wait for a value written by another
//! stream's earlier write is an edge; anything else orders nothing.

use gpuleak_format::*;

use super::super::*;
use super::{tidy, two_streams, Run, A, B, P};

/// A flag in page-locked host memory (untracked by the model).
const FLAG: u64 = 0x5000_0000;
const EQ: u32 = 1;
const C: u64 = 0xc0;

impl Run {
    fn mem_op(&mut self, api: Api, stream: u64, op: u32, addr: u64, value: u64, flags: u32) -> &mut Run {
        self.r(MemOp {
            api,
            result: CuResult::SUCCESS,
            stream,
            op,
            addr,
            value,
            flags,
        })
    }

    fn write_value(&mut self, stream: u64, value: u64) -> &mut Run {
        self.mem_op(Api::cuStreamWriteValue32_v2, stream, MemOp::WRITE_32, FLAG, value, 0)
    }

    fn wait_value(&mut self, stream: u64, value: u64) -> &mut Run {
        self.mem_op(Api::cuStreamWaitValue32_v2, stream, MemOp::WAIT_32, FLAG, value, EQ)
    }
}

#[test]
fn a_wait_for_the_value_another_stream_wrote_after_its_kernel_orders_the_read() {
    let mut r = two_streams(1);
    r.launch(A, P).write_value(A, 1).wait_value(B, 1).read_back(B);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
    // Twins: the value written before the kernel, or a value nobody wrote.
    let mut r = two_streams(1);
    r.write_value(A, 1).launch(A, P).wait_value(B, 1).read_back(B);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
    let mut r = two_streams(1);
    r.launch(A, P).write_value(A, 1).wait_value(B, 2).read_back(B);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
}

#[test]
fn a_wait_queued_before_the_write_it_waits_for_orders_nothing() {
    // What the trace shows of a value written elsewhere (another process's barrier): the
    // kernel and the read are unordered in this process.
    let mut r = two_streams(1);
    r.wait_value(B, 1).launch(A, P).read_back(B);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
}

#[test]
fn a_value_two_streams_wrote_orders_only_what_both_writes_follow() {
    // A writes 1 after its kernel, and so does B; C waits for 1, met by either write. B's
    // write follows A's kernel only when B waited for A's value first (the twin).
    let run = |b_waits_for_a: bool| {
        let mut r = two_streams(1);
        r.stream(C, 1).launch(A, P).write_value(A, 1);
        if b_waits_for_a {
            r.wait_value(B, 1);
        }
        r.write_value(B, 1).wait_value(C, 1).read_back(C).sync(C).destroy(C);
        tidy(&mut r);
        r.checks()
    };
    assert_eq!(run(false), vec!["cross-stream-race"]);
    assert_eq!(run(true), Vec::<&str>::new());
}

#[test]
fn a_wait_for_a_counter_follows_every_reduction_of_it() {
    let q = P + 0x10000;
    let batch = Api::cuStreamBatchMemOp_v2;
    let run = |reduce_b: bool| {
        let mut r = two_streams(1);
        r.alloc(q).stream(C, 1).launch(A, P).launch(B, q);
        r.mem_op(batch, A, MemOp::REDUCTION, FLAG, 1, 0);
        if reduce_b {
            r.mem_op(batch, B, MemOp::REDUCTION, FLAG, 1, 0);
        }
        r.mem_op(batch, C, MemOp::WAIT_64, FLAG, 2, 0)
            .copy(Api::cuMemcpyDtoHAsync_v2, C, 0x1000, P, 64)
            .copy(Api::cuMemcpyDtoHAsync_v2, C, 0x1000, q, 64)
            .sync(C)
            .destroy(C)
            .free_with(Api::cuMemFree_v2, q, 0);
        tidy(&mut r);
        r.checks()
    };
    assert_eq!(run(true), Vec::<&str>::new());
    // Twin: B never added, so its kernel is unordered with the read of its buffer.
    assert_eq!(run(false), vec!["cross-stream-race"]);
}

#[test]
fn widths_conditions_and_variants_are_told_apart() {
    // A 64-bit write does not meet a 32-bit wait at its address.
    let mut r = two_streams(1);
    r.launch(A, P)
        .mem_op(Api::cuStreamWriteValue64_v2, A, MemOp::WRITE_64, FLAG, 1, 0)
        .wait_value(B, 1)
        .read_back(B);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
    // Greater-or-equal (0) is met by a larger value; the first ABI and per-thread default
    // streams work alike.
    let mut r = two_streams(1);
    r.launch_on(super::MAIN, Api::cuLaunchKernel_ptsz, 0, &[P])
        .mem_op(Api::cuStreamWriteValue64_ptsz, 0, MemOp::WRITE_64, FLAG, 7, 0)
        .mem_op(Api::cuStreamWaitValue64, B, MemOp::WAIT_64, FLAG, 5, 0)
        .read_back(B)
        .sync_on(super::MAIN, Api::cuStreamSynchronize_ptsz, 0, 0);
    tidy(&mut r);
    assert_eq!(r.checks(), Vec::<&str>::new());
}

#[test]
fn a_write_is_work_to_wait_for_and_barriers_and_captured_operations_are_nothing() {
    let mut r = two_streams(1);
    r.write_value(A, 1).destroy(A).destroy(B);
    let found = r.finish();
    assert_eq!(found.len(), 1, "{found:#?}");
    assert_eq!(
        (found[0].check, found[0].op.api),
        (Check::UnsynchronizedAtExit, Api::cuStreamWriteValue32_v2)
    );
    // A barrier and a flush: no work, no edge.
    let mut r = two_streams(1);
    r.launch(A, P)
        .mem_op(Api::cuStreamBatchMemOp_v2, A, 6, 0, 0, 0)
        .mem_op(Api::cuStreamBatchMemOp_v2, B, 3, 0, 0, 0)
        .read_back(B);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
    // A write under capture is a graph node: nothing to wait for, nothing to wait on.
    let mut r = two_streams(1);
    r.launch(A, P)
        .capture_on(A, 1, 0)
        .write_value(A, 1)
        .capture_on(A, 0, 0)
        .wait_value(B, 1)
        .read_back(B);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
    // A refused write is nothing either.
    let mut r = two_streams(1);
    r.launch(A, P);
    r.r(MemOp {
        api: Api::cuStreamWriteValue32_v2,
        result: CuResult(1),
        stream: A,
        op: MemOp::WRITE_32,
        addr: FLAG,
        value: 1,
        flags: 0,
    });
    r.wait_value(B, 1).read_back(B);
    tidy(&mut r);
    assert_eq!(r.checks(), vec!["cross-stream-race"]);
}
