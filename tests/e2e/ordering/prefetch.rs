//! Prefetches and discards of managed memory (`cuMemPrefetchAsync[_v2]`,
//! `cuMemPrefetchBatchAsync`, `cuMemDiscardBatchAsync`, `cuMemDiscardAndPrefetchBatchAsync`,
//! each with `_ptsz`) end to end: each range is a `RangeOp` record; a prefetch is work of its
//! stream that touches nothing, so on the legacy stream it orders blocking streams and it never
//! races; a discard writes its range; neither is work a program must wait for at exit. The
//! client is `tests/clients/report_prefetch.c`.

use gpuleak_e2e::TempDir;
use gpuleak_format::MemLocation;
use serde_json::Value;

use super::{addr, only_finding_of, report_of_case, traced_and_plain};
use crate::trace::{dump, of_type};

fn report_of(how: &str) -> Value {
    report_of_case("report_prefetch", how)
}

fn findings_of(how: &str) -> Vec<Value> {
    report_of(how)["findings"].as_array().unwrap().clone()
}

fn only_finding(how: &str) -> (String, String) {
    let (check, _, message) = only_finding_of("report_prefetch", how);
    (check, message)
}

/// A prefetch on the legacy stream ("standard default stream semantics") comes after the
/// blocking stream a's kernel and before the blocking stream b's read; without it, or with it
/// on the per-thread default stream, the read races.
#[test]
fn a_prefetch_on_the_legacy_stream_orders_blocking_streams() {
    for how in ["legacy", "legacy-v2"] {
        assert_eq!(findings_of(how), Vec::<Value>::new(), "{how}");
    }
    for how in ["none", "ptsz"] {
        let (check, message) = only_finding(how);
        assert_eq!(check, "cross-stream-race", "{how}");
        assert!(
            message.starts_with("cuMemcpyDtoHAsync_v2 on stream")
                && message.contains("and the earlier cuLaunchKernel on stream"),
            "{how}: {message}"
        );
    }
}

/// A prefetch of memory a kernel on another stream is writing is no race (accesses stay
/// coherent while the range migrates); a discard is, unless it waits for the kernel.
#[test]
fn a_discard_races_with_unordered_work_on_its_range_and_a_prefetch_does_not() {
    for how in ["concurrent", "discard"] {
        assert_eq!(findings_of(how), Vec::<Value>::new(), "{how}");
    }
    let (check, message) = only_finding("discard-race");
    assert_eq!(check, "cross-stream-race");
    assert!(
        message.starts_with("cuMemDiscardBatchAsync on stream")
            && message.contains("and the earlier cuLaunchKernel on stream")
            && message.contains("managed allocation"),
        "{message}"
    );
    // Prefetching freed memory is refused, and is a use after free.
    let (check, message) = only_finding("freed");
    assert_eq!(check, "use-after-free");
    assert!(
        message.starts_with("cuMemPrefetchAsync on the legacy default stream touches 0x"),
        "{message}"
    );
}

/// A prefetch left pending at exit is nothing the program could have waited for; a kernel
/// before it still is, and the finding names the kernel. (Both leave their managed buffer
/// allocated: freeing it would wait for the device.)
#[test]
fn a_pending_prefetch_is_not_unsynchronized_at_exit_but_the_kernel_before_it_is() {
    let quiet = report_of("exit");
    assert_eq!(quiet["findings"], serde_json::json!([]), "{quiet:#}");
    assert_eq!(quiet["leaks"].as_array().unwrap().len(), 1);
    let (check, message) = only_finding("exit-kernel");
    assert_eq!(check, "unsynchronized-at-exit");
    assert!(
        message.contains(
            "was never waited for before exit; the last of it: cuLaunchKernel of the 4096-byte managed allocation"
        ),
        "{message}"
    );
}

/// Every entry point is recorded under its own name, one record per range with its
/// location (a batch's locations as its index array assigns them; none for a discard); a
/// batch the driver refuses is one record of no range, with the driver's result, which the
/// program gets unchanged.
#[test]
fn every_prefetch_and_discard_is_recorded_range_by_range_with_its_location() {
    let dir = TempDir::new();
    let (trace, printed, plain) = traced_and_plain(&dir, "report_prefetch", "records");
    let addr = |k: &str| addr(&printed, k);
    let (m, s) = (addr("m"), addr("s"));
    // CUDA_ERROR_INVALID_VALUE: a batch on the legacy NULL stream, traced or not.
    assert!(plain.contains("legacy_batch 1\n"));
    assert_eq!(printed["legacy_batch"], "1");

    let gpu = MemLocation::encode(1, 0);
    let host = MemLocation::encode(2, 0);
    let numa = MemLocation::encode(3, 1);
    let expected: Vec<(&str, u64, u64, u64, u64, u64)> = vec![
        ("cuMemPrefetchAsync", s, m, 4096, gpu, 0),
        ("cuMemPrefetchAsync", s, m, 4096, host, 0),
        ("cuMemPrefetchAsync_ptsz", 0, m, 64, gpu, 0),
        ("cuMemPrefetchAsync_v2", s, m + 64, 128, gpu, 0),
        ("cuMemPrefetchAsync_v2_ptsz", 0, m, 4096, numa, 0),
        ("cuMemPrefetchBatchAsync", s, m, 256, gpu, 0),
        ("cuMemPrefetchBatchAsync", s, m + 256, 256, gpu, 0),
        ("cuMemPrefetchBatchAsync", s, m + 512, 512, host, 0),
        ("cuMemPrefetchBatchAsync_ptsz", 0, m, 256, gpu, 0),
        ("cuMemDiscardBatchAsync", s, m, 256, 0, 0),
        ("cuMemDiscardBatchAsync", s, m + 256, 256, 0, 0),
        ("cuMemDiscardBatchAsync_ptsz", 0, m, 256, 0, 0),
        ("cuMemDiscardAndPrefetchBatchAsync", s, m, 256, gpu, 0),
        ("cuMemDiscardAndPrefetchBatchAsync", s, m + 256, 256, gpu, 0),
        ("cuMemDiscardAndPrefetchBatchAsync", s, m + 512, 512, host, 0),
        ("cuMemDiscardAndPrefetchBatchAsync_ptsz", 0, m + 512, 512, host, 0),
        ("cuMemPrefetchBatchAsync", 0, 0, 0, 0, 1),
    ];
    let records = dump(&trace);
    let got: Vec<(&str, u64, u64, u64, u64, u64)> = of_type(&records, "RangeOp")
        .iter()
        .map(|r| {
            let n = |k: &str| r[k].as_u64().unwrap();
            (
                r["api"].as_str().unwrap(),
                n("stream"),
                n("ptr"),
                n("bytes"),
                n("location"),
                n("result"),
            )
        })
        .collect();
    assert_eq!(got, expected);
}
