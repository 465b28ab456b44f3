//! Every hooked stream-ordering variant reaches the trace once per call, under its exact name.

use gpuleak_e2e::{client, shim_command, TempDir};

use super::report_json;
use crate::trace::{assert_ok, checks, dump, hex, of_type};

/// Every hooked stream-ordering variant reaches the trace once per call, under its exact
/// name, with what the analysis needs.
#[test]
fn every_stream_ordering_variant_is_recorded_under_its_exact_name() {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = shim_command(client("shim_ordering"), &trace).output().unwrap();
    assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("callbacks 2"), "{stdout}");
    let ptr = stdout
        .lines()
        .find_map(|l| l.strip_prefix("ptr 0x"))
        .map(|h| u64::from_str_radix(h, 16).unwrap())
        .unwrap();
    let records = dump(&trace);
    let count = |api: &str| records.iter().filter(|r| r["api"] == api).count();
    let once = [
        "cuMemcpy",
        "cuMemcpy_ptds",
        "cuMemcpyAsync",
        "cuMemcpyAsync_ptsz",
        "cuMemcpyHtoD_v2",
        "cuMemcpyHtoD_v2_ptds",
        "cuMemcpyDtoH_v2",
        "cuMemcpyDtoH_v2_ptds",
        "cuMemcpyDtoD_v2",
        "cuMemcpyDtoD_v2_ptds",
        "cuMemcpyHtoDAsync_v2",
        "cuMemcpyHtoDAsync_v2_ptsz",
        "cuMemcpyDtoHAsync_v2",
        "cuMemcpyDtoHAsync_v2_ptsz",
        "cuMemcpyDtoDAsync_v2",
        "cuMemcpyDtoDAsync_v2_ptsz",
        "cuMemsetD8_v2",
        "cuMemsetD8_v2_ptds",
        "cuMemsetD16_v2",
        "cuMemsetD16_v2_ptds",
        "cuMemsetD32_v2",
        "cuMemsetD32_v2_ptds",
        "cuMemsetD8Async",
        "cuMemsetD8Async_ptsz",
        "cuMemsetD16Async",
        "cuMemsetD16Async_ptsz",
        "cuMemsetD32Async",
        "cuMemsetD32Async_ptsz",
        "cuStreamAddCallback",
        "cuStreamAddCallback_ptsz",
        "cuEventRecord",
        "cuEventRecord_ptsz",
        "cuEventRecordWithFlags",
        "cuEventRecordWithFlags_ptsz",
        "cuStreamWaitEvent",
        "cuStreamWaitEvent_ptsz",
        "cuEventSynchronize",
        "cuEventQuery",
        "cuStreamQuery",
        "cuStreamQuery_ptsz",
        "cuStreamSynchronize",
        "cuStreamSynchronize_ptsz",
        "cuCtxSynchronize",
        "cuCtxSynchronize_v2",
        "cuCtxRecordEvent",
        "cuCtxWaitEvent",
        "cuStreamBeginCapture_v2",
        "cuStreamBeginCapture",
        "cuStreamBeginCapture_v2_ptsz",
        "cuStreamBeginCapture_ptsz",
        "cuStreamBeginCaptureToGraph",
        "cuStreamBeginCaptureToGraph_ptsz",
        "cuLaunchCooperativeKernel",
        "cuLaunchCooperativeKernel_ptsz",
        "cuStreamWriteValue32",
        "cuStreamWriteValue32_ptsz",
        "cuStreamWriteValue32_v2",
        "cuStreamWriteValue32_v2_ptsz",
        "cuStreamWriteValue64",
        "cuStreamWriteValue64_ptsz",
        "cuStreamWriteValue64_v2",
        "cuStreamWriteValue64_v2_ptsz",
        "cuStreamWaitValue32",
        "cuStreamWaitValue32_ptsz",
        "cuStreamWaitValue32_v2",
        "cuStreamWaitValue32_v2_ptsz",
        "cuStreamWaitValue64",
        "cuStreamWaitValue64_ptsz",
        "cuStreamWaitValue64_v2",
        "cuStreamWaitValue64_v2_ptsz",
        "cuEventDestroy",
        "cuStreamDestroy",
        "cuStreamDestroy_v2",
    ];
    for api in once {
        assert_eq!(count(api), 1, "{api}");
    }
    assert_eq!(count("cuStreamEndCapture"), 3);
    assert_eq!(count("cuStreamEndCapture_ptsz"), 3);
    assert_eq!(count("cuLaunchKernel"), 2);
    assert_eq!(count("cuLaunchKernel_ptsz"), 2);
    // 2D memsets span their rows; peer copies name both sides, the 3D ones from their
    // descriptors (the larger span: one 256-byte row and 64 bytes).
    let copies = |api: &str| -> Vec<(u64, u64, Option<u64>)> {
        records
            .iter()
            .filter(|r| r["api"] == api)
            .map(|r| (hex(&r["dst"]), r["src"].as_u64().unwrap(), r["bytes"].as_u64()))
            .collect()
    };
    for (elem, apis) in [
        (
            1,
            [
                "cuMemsetD2D8_v2",
                "cuMemsetD2D8_v2_ptds",
                "cuMemsetD2D8Async",
                "cuMemsetD2D8Async_ptsz",
            ],
        ),
        (
            2,
            [
                "cuMemsetD2D16_v2",
                "cuMemsetD2D16_v2_ptds",
                "cuMemsetD2D16Async",
                "cuMemsetD2D16Async_ptsz",
            ],
        ),
        (
            4,
            [
                "cuMemsetD2D32_v2",
                "cuMemsetD2D32_v2_ptds",
                "cuMemsetD2D32Async",
                "cuMemsetD2D32Async_ptsz",
            ],
        ),
    ] {
        for api in apis {
            assert_eq!(copies(api), [(ptr, 0, Some(2 * 256 + 16 * elem))], "{api}");
        }
    }
    let d2 = copies("cuMemcpyPeer")[0].0;
    assert_ne!(d2, ptr);
    for api in [
        "cuMemcpyPeer",
        "cuMemcpyPeer_ptds",
        "cuMemcpyPeerAsync",
        "cuMemcpyPeerAsync_ptsz",
    ] {
        assert_eq!(copies(api), [(d2, ptr, Some(64))], "{api}");
    }
    for api in [
        "cuMemcpy3DPeer",
        "cuMemcpy3DPeer_ptds",
        "cuMemcpy3DPeerAsync",
        "cuMemcpy3DPeerAsync_ptsz",
    ] {
        assert_eq!(copies(api), [(d2, ptr, Some(256 + 64))], "{api}");
    }
    // A context's event record and wait carry the context where a stream would be.
    let ctx = stdout
        .lines()
        .find_map(|l| l.strip_prefix("ctx 0x"))
        .map(|h| u64::from_str_radix(h, 16).unwrap())
        .unwrap();
    for api in ["cuCtxRecordEvent", "cuCtxWaitEvent"] {
        let r = records.iter().find(|r| r["api"] == api).unwrap();
        assert_eq!(hex(&r["stream"]), ctx, "{api}: {r}");
        assert_ne!(hex(&r["event"]), 0, "{api}: {r}");
    }
    // A batch of copies is a Copy per copy, in array order.
    let d2 = records
        .iter()
        .find(|r| r["api"] == "cuMemcpyBatchAsync")
        .map(|r| hex(&r["dst"]))
        .unwrap();
    for api in [
        "cuMemcpyBatchAsync",
        "cuMemcpyBatchAsync_ptsz",
        "cuMemcpyBatchAsync_v2",
        "cuMemcpyBatchAsync_v2_ptsz",
    ] {
        let copies: Vec<(u64, u64, Option<u64>)> = records
            .iter()
            .filter(|r| r["api"] == api)
            .map(|r| (hex(&r["dst"]), r["src"].as_u64().unwrap(), r["bytes"].as_u64()))
            .collect();
        assert_eq!(copies, [(d2, ptr, Some(64)), (d2 + 64, ptr + 64, Some(32))], "{api}");
    }
    // A copy with attributes is one copy; a 3D batch a Copy per operation, in array order,
    // each spanning its larger side (the source's 4 rows 64 bytes apart: 3 * 64 + 16).
    for api in ["cuMemcpyWithAttributesAsync", "cuMemcpyWithAttributesAsync_ptsz"] {
        assert_eq!(copies(api), [(d2, ptr, Some(64))], "{api}");
    }
    for api in [
        "cuMemcpy3DBatchAsync",
        "cuMemcpy3DBatchAsync_ptsz",
        "cuMemcpy3DBatchAsync_v2",
        "cuMemcpy3DBatchAsync_v2_ptsz",
    ] {
        assert_eq!(
            copies(api),
            [(d2, ptr, Some(3 * 64 + 16)), (d2 + 128, ptr + 256, Some(32))],
            "{api}"
        );
    }
    for api in ["cuMemcpy3DWithAttributesAsync", "cuMemcpy3DWithAttributesAsync_ptsz"] {
        assert_eq!(copies(api), [(d2, ptr, Some(3 * 64 + 16))], "{api}");
    }
    // A batch of memory operations is a record per operation, in array order.
    for api in [
        "cuStreamBatchMemOp",
        "cuStreamBatchMemOp_ptsz",
        "cuStreamBatchMemOp_v2",
        "cuStreamBatchMemOp_v2_ptsz",
    ] {
        let ops: Vec<_> = records
            .iter()
            .filter(|r| r["api"] == api)
            .map(|r| {
                (
                    r["op"].as_u64(),
                    r["addr"].as_u64(),
                    r["value"].as_u64(),
                    r["flags"].as_u64(),
                )
            })
            .collect();
        assert_eq!(
            ops,
            vec![
                (Some(2), Some(ptr + 16), Some(9), Some(0)),
                (Some(4), Some(ptr + 8), Some(0x1122_3344_5566_7788), Some(1))
            ],
            "{api}"
        );
    }
    let wait = records
        .iter()
        .find(|r| r["api"] == "cuStreamWaitValue32_v2_ptsz")
        .unwrap();
    assert_eq!(
        (
            wait["type"].as_str(),
            wait["op"].as_u64(),
            wait["addr"].as_u64(),
            wait["value"].as_u64()
        ),
        (Some("MemOp"), Some(1), Some(ptr), Some(1))
    );
    assert_eq!(
        (wait["stream"].as_u64(), wait["flags"].as_u64()),
        (Some(0), Some(3 | 1 << 30))
    );
    let write = records
        .iter()
        .find(|r| r["api"] == "cuStreamWriteValue64_v2_ptsz")
        .unwrap();
    assert_eq!(
        (write["op"].as_u64(), write["value"].as_u64()),
        (Some(5), Some(0x1122_3344_5566_7788))
    );
    // Kernel parameters: the buffer, through kernelParams and through the extra buffer, and
    // nothing else (the 4-byte value and count are not recorded).
    for l in of_type(&records, "Launch") {
        let ptrs: Vec<u64> = l["ptrs"].as_array().unwrap().iter().map(hex).collect();
        assert_eq!(ptrs, vec![ptr], "{l}");
    }
    // Copies carry their ranges; memsets their bytes; synchronous calls stream 0.
    let memset16 = records.iter().find(|r| r["api"] == "cuMemsetD16_v2").unwrap();
    assert_eq!((hex(&memset16["dst"]), memset16["bytes"].as_u64()), (ptr, Some(64)));
    assert_eq!(hex(&memset16["stream"]), 0);
    // No stacks on these calls by default.
    for c in of_type(&records, "Copy") {
        assert_eq!(c["stack"], 0, "{c}");
    }
    // The program mixes a non-blocking stream with the default streams on one buffer
    // without ever waiting: races, and nothing else.
    let r = report_json(&trace);
    let checks = checks(&r);
    assert!(
        !checks.is_empty() && checks.iter().all(|c| *c == "cross-stream-race"),
        "{checks:?}"
    );
}
