//! Copies to and from CUDA arrays (`cuMemcpy{HtoA,AtoH,AtoA,DtoA,AtoD}_v2`, their `_ptds`
//! forms and `cuMemcpy{HtoA,AtoH}Async_v2[_ptsz]`) end to end: each is recorded with the
//! array side 0; the synchronous ones are work of the legacy default stream, which orders
//! blocking streams, and the host waits for those that copy into host memory; the side in
//! device memory races, is used after a free, and is waited for like any copy's. The client
//! is `tests/clients/report_arrays.c`.

use gpuleak_e2e::TempDir;
use serde_json::Value;

use super::{addr, only_finding_of, report_of_case, traced_and_plain};
use crate::trace::{dump, hex, of_type};

fn findings_of(how: &str) -> Vec<Value> {
    let report = report_of_case("report_arrays", how);
    assert_eq!(report["leaks"], serde_json::json!([]), "{how}: {report:#}");
    report["findings"].as_array().unwrap().clone()
}

fn only_finding(how: &str) -> (String, String, String) {
    only_finding_of("report_arrays", how)
}

/// A synchronous array copy runs on the legacy default stream: it comes after the blocking
/// stream a's kernel and before the blocking stream b's later read, whether it makes the host
/// wait (to or from host memory) or not (between arrays and device memory); an asynchronous
/// one on the NULL stream is the legacy stream's too.
#[test]
fn an_array_copy_on_the_legacy_stream_orders_blocking_streams() {
    for how in [
        "order-htoa",
        "order-atoh",
        "order-atoa",
        "order-dtoa",
        "order-atod",
        "order-async",
    ] {
        assert_eq!(findings_of(how), Vec::<Value>::new(), "{how}");
    }
}

/// The twins: no array copy, or one on the per-thread default stream (`_ptds`, and `_ptsz`
/// with the NULL stream), which orders nothing between two other streams: b's read races
/// with a's kernel.
#[test]
fn without_the_legacy_stream_between_them_the_read_races() {
    for how in ["order-none", "order-ptds", "order-async-ptsz"] {
        let (check, severity, message) = only_finding(how);
        assert_eq!(
            (check.as_str(), severity.as_str()),
            ("cross-stream-race", "error"),
            "{how}"
        );
        assert!(
            message.starts_with("cuMemcpyDtoHAsync_v2 on stream")
                && message.contains("and the earlier cuLaunchKernel on stream"),
            "{how}: {message}"
        );
    }
}

/// The device side of an array copy is read (`DtoA`) or written (`AtoD`) on the legacy
/// stream: ordered with a blocking stream's kernel, a race with a non-blocking one's.
#[test]
fn the_device_side_of_an_array_copy_races_with_a_non_blocking_stream() {
    for how in ["dtoa", "atod"] {
        assert_eq!(findings_of(how), Vec::<Value>::new(), "{how}");
    }
    let (check, severity, message) = only_finding("dtoa-race");
    assert_eq!((check.as_str(), severity.as_str()), ("cross-stream-race", "error"));
    assert!(
        message.starts_with("cuMemcpyDtoA_v2 on the legacy default stream and the earlier cuLaunchKernel on stream"),
        "{message}"
    );
    let (check, _, message) = only_finding("atod-race");
    assert_eq!(check, "cross-stream-race");
    assert!(
        message.starts_with("cuLaunchKernel on stream")
            && message.contains("and the earlier cuMemcpyAtoD_v2 on the legacy default stream"),
        "{message}"
    );
    // A 3D batch from an array into d's last 256 bytes (16 x 4 elements of 4 bytes, as the
    // shim reads the array's descriptor), and a read of d's last 4 bytes on another stream:
    // ordered by an event, nothing; unordered, one race, which a span counted in elements
    // (64 bytes) would miss.
    assert_eq!(findings_of("batch"), Vec::<Value>::new());
    let (check, severity, message) = only_finding("batch-race");
    assert_eq!((check.as_str(), severity.as_str()), ("cross-stream-race", "error"));
    assert!(
        message.starts_with("cuMemcpyDtoHAsync_v2 on stream")
            && message.contains("and the earlier cuMemcpy3DBatchAsync_v2 on stream"),
        "{message}"
    );
    // A copy from freed memory is refused, and is a use after free.
    let (check, _, message) = only_finding("freed");
    assert_eq!(check, "use-after-free");
    assert!(
        message.starts_with("cuMemcpyDtoA_v2 on the legacy default stream touches 0x"),
        "{message}"
    );
}

/// The host waits for a synchronous copy from an array into host memory (and, through the
/// legacy stream, for a blocking stream's earlier work), and for an asynchronous one into
/// pageable memory; not for one into page-locked memory, nor for a non-blocking stream's work.
#[test]
fn the_host_waits_for_a_copy_from_an_array_into_host_memory_as_for_device_memory() {
    for how in ["exit-atoh", "exit-pageable"] {
        assert_eq!(findings_of(how), Vec::<Value>::new(), "{how}");
    }
    for (how, last) in [
        ("exit-nonblocking", "cuMemcpyHtoAAsync_v2"),
        ("exit-pinned", "cuMemcpyAtoHAsync_v2"),
    ] {
        let (check, severity, message) = only_finding(how);
        assert_eq!(
            (check.as_str(), severity.as_str()),
            ("unsynchronized-at-exit", "warning"),
            "{how}"
        );
        assert!(
            message.contains(&format!("was never waited for before exit; the last of it: {last};")),
            "{how}: {message}"
        );
    }
}

/// Every entry point is recorded under its own name, with its stream (0 for the synchronous
/// ones and the per-thread stream), the array side 0, the other side's address and the byte
/// count; a copy into a destroyed array is refused, recorded with the driver's result, which
/// the program gets unchanged.
#[test]
fn every_array_copy_is_recorded_with_its_stream_and_its_side_outside_the_array() {
    let dir = TempDir::new();
    let (trace, printed, plain) = traced_and_plain(&dir, "report_arrays", "records");
    let addr = |k: &str| addr(&printed, k);
    let (d, s, host, host_out) = (addr("d"), addr("s"), addr("host"), addr("out"));
    assert!(plain.contains("destroyed 400\n"));
    assert_eq!(printed["destroyed"], "400");

    let records = dump(&trace);
    let copies: Vec<(String, u64, u64, u64, u64, u64)> = of_type(&records, "Copy")
        .iter()
        .map(|r| {
            (
                r["api"].as_str().unwrap().to_string(),
                hex(&r["stream"]),
                hex(&r["dst"]),
                r["src"].as_u64().unwrap(),
                r["bytes"].as_u64().unwrap(),
                r["result"].as_u64().unwrap(),
            )
        })
        .collect();
    let n = 4096;
    let expected: Vec<(String, u64, u64, u64, u64, u64)> = [
        ("cuMemcpyHtoA_v2", 0, 0, host, n, 0),
        ("cuMemcpyHtoA_v2_ptds", 0, 0, host, n, 0),
        ("cuMemcpyAtoH_v2", 0, host_out, 0, n, 0),
        ("cuMemcpyAtoH_v2_ptds", 0, host_out, 0, n, 0),
        ("cuMemcpyAtoA_v2", 0, 0, 0, n, 0),
        ("cuMemcpyAtoA_v2_ptds", 0, 0, 0, n, 0),
        ("cuMemcpyDtoA_v2", 0, 0, d, n, 0),
        ("cuMemcpyDtoA_v2_ptds", 0, 0, d, n, 0),
        ("cuMemcpyAtoD_v2", 0, d, 0, n, 0),
        ("cuMemcpyAtoD_v2_ptds", 0, d, 0, n, 0),
        ("cuMemcpyHtoAAsync_v2", s, 0, host, n, 0),
        ("cuMemcpyHtoAAsync_v2_ptsz", 0, 0, host, n, 0),
        ("cuMemcpyAtoHAsync_v2", s, host_out, 0, n, 0),
        ("cuMemcpyAtoHAsync_v2_ptsz", 0, host_out, 0, n, 0),
        ("cuMemcpyHtoA_v2", 0, 0, host, n, 400),
    ]
    .iter()
    .map(|&(api, stream, dst, src, bytes, result)| (api.to_string(), stream, dst, src, bytes, result))
    .collect();
    assert_eq!(copies, expected);
}
