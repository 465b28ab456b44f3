//! The entry points recorded after the first ones: `cuLaunchHostFunc`, `cuLaunchKernelEx`,
//! graph launches and 2D/3D copies. Each is recorded with the right stream and pointers; each
//! carries a mistake that must be found exactly once, with twins that must find nothing; and the
//! simulated driver runs them as the real one does (host functions and graphs in stream order,
//! 2D/3D copies row by row).

use gpuleak_e2e::{client, shim_command, sim_command, TempDir};
use serde_json::Value;

use super::{addr, facts, report_json, traced};
use crate::trace::{assert_ok, dump, hex};

/// The records of one exact entry point.
fn of_api<'a>(records: &'a [Value], api: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["api"] == api).collect()
}

#[test]
fn the_simulator_runs_host_functions_graphs_and_2d_3d_copies_like_the_driver() {
    let plain = sim_command(client("shim_later_calls")).output().unwrap();
    assert_ok(&plain);
    let f = facts(&plain.stdout);
    let expect = [
        ("launch_ex_value", "6"),
        ("host_calls", "2"),
        // cuLaunchHostFunc at 13010 is cuLaunchHostFunc_v2 (and _v2_ptsz per thread).
        ("host_v2_resolved", "1"),
        ("host_v2_calls", "2"),
        // CUDA_ERROR_INVALID_VALUE: sync modes are 0 and 1.
        ("host_v2_bad_mode", "1"),
        ("roundtrip_2d", "1"),
        // An array's rows are reached through its handle; CUDA_ERROR_INVALID_HANDLE once
        // it is destroyed.
        ("copy_from_array", "0"),
        ("copy_from_destroyed_array", "400"),
        // Captured, a host function does not run; each graph launch runs it (and the kernel).
        ("captured_host_calls", "2"),
        ("graph_value", "9"),
        ("graph_host_calls", "4"),
        ("launch_destroyed", "1"),
    ];
    for (key, value) in expect {
        assert_eq!(f.get(key).map(String::as_str), Some(value), "{key}: {f:?}");
    }
    // The shim changes nothing the program computes.
    let dir = TempDir::new();
    let traced = shim_command(client("shim_later_calls"), &dir.path().join("t.trace"))
        .output()
        .unwrap();
    assert_ok(&traced);
    let g = facts(&traced.stdout);
    for (key, _) in expect {
        assert_eq!(f[key], g[key], "{key}");
    }
}

#[test]
fn each_later_entry_point_is_recorded_with_its_stream_and_pointers() {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = shim_command(client("shim_later_calls"), &trace).output().unwrap();
    assert_ok(&out);
    let f = facts(&out.stdout);
    let (d, e, s, host, exec) = (
        addr(&f, "d"),
        addr(&f, "e"),
        addr(&f, "s"),
        addr(&f, "host"),
        addr(&f, "exec"),
    );
    let records = dump(&trace);
    let one = |api: &str| -> &Value {
        let found = of_api(&records, api);
        assert_eq!(found.len(), 1, "{api}: {found:#?}");
        found[0]
    };
    let ptrs = |r: &Value| -> Vec<u64> { r["ptrs"].as_array().unwrap().iter().map(hex).collect() };

    // cuLaunchKernelEx: the configuration's stream, the pointer among the parameters (from
    // kernelParams and from the extra buffer alike).
    let ex = one("cuLaunchKernelEx");
    assert_eq!(
        (ex["type"].as_str(), hex(&ex["stream"]), ptrs(ex)),
        (Some("Launch"), s, vec![d])
    );
    let ex = one("cuLaunchKernelEx_ptsz");
    assert_eq!((hex(&ex["stream"]), ptrs(ex)), (0, vec![d]));

    // cuLaunchHostFunc: a host callback on its stream, wrapped (`HostFnQueued`, with the
    // plain stream handle of the kinds added later).
    // The second is the captured one, on the capturing stream (which is not `s`): passed on
    // unwrapped, a plain `HostFn`.
    let queued_stream = |r: &Value| r["stream"].as_u64().unwrap();
    let hs = of_api(&records, "cuLaunchHostFunc");
    assert_eq!(hs.len(), 2);
    assert_eq!(
        (hs[0]["type"].as_str(), queued_stream(hs[0])),
        (Some("HostFnQueued"), s)
    );
    assert_eq!(hs[1]["type"], "HostFn");
    assert_ne!(hex(&hs[1]["stream"]), s);
    assert_eq!(queued_stream(one("cuLaunchHostFunc_ptsz")), 0);
    // CUDA 13.1's variant, reached through the resolver as the 13.1+ runtime reaches it: the
    // refused call (bad sync mode) is recorded with its error.
    let v2 = of_api(&records, "cuLaunchHostFunc_v2");
    assert_eq!(v2.len(), 2, "{v2:#?}");
    assert_eq!(
        (v2[0]["type"].as_str(), queued_stream(v2[0]), &v2[0]["result"]),
        (Some("HostFnQueued"), s, &Value::from(0))
    );
    assert_eq!((queued_stream(v2[1]), &v2[1]["result"]), (s, &Value::from(1)));
    let v2p = one("cuLaunchHostFunc_v2_ptsz");
    assert_eq!((v2p["type"].as_str(), queued_stream(v2p)), (Some("HostFnQueued"), 0));

    // Graph launches: work on their stream, the executable graph as the function, no pointers.
    let gl = of_api(&records, "cuGraphLaunch");
    assert_eq!(gl.len(), 2, "{gl:#?}");
    assert_eq!(
        (
            gl[0]["type"].as_str(),
            hex(&gl[0]["stream"]),
            gl[0]["function"].as_u64(),
            ptrs(gl[0])
        ),
        (Some("Launch"), s, Some(exec), vec![])
    );
    assert_eq!(gl[0]["result"], 0);
    // The launch of the destroyed graph failed, and says so.
    assert_ne!(gl[1]["result"], 0);
    let gp = one("cuGraphLaunch_ptsz");
    assert_eq!((hex(&gp["stream"]), ptrs(gp)), (0, vec![]));

    // 2D and 3D copies: first byte of each side as the memory type says, the larger span.
    let fields = |c: &Value| {
        assert_eq!(c["type"], "Copy", "{c}");
        (
            hex(&c["stream"]),
            hex(&c["dst"]),
            c["src"].as_u64().unwrap(),
            c["bytes"].as_u64().unwrap(),
        )
    };
    let copies = |api: &str| -> Vec<(u64, u64, u64, u64)> {
        of_api(&records, api)
            .into_iter()
            .filter(|c| c["result"] == 0)
            .map(fields)
            .collect()
    };
    let copy = |api: &str| {
        let ok = copies(api);
        assert_eq!(ok.len(), 1, "{api}: {ok:#?}");
        ok[0]
    };
    let rows_2d = 3 * 256 + 64;
    // The second is the copy of an array's 4 rows of 64 bytes: the array side is 0.
    assert_eq!(
        copies("cuMemcpy2D_v2"),
        [(0, d + 256, host, rows_2d), (0, e, 0, 3 * 64 + 64)]
    );
    assert_eq!(copy("cuMemcpy2D_v2_ptds"), (0, d + 256, host, rows_2d));
    assert_eq!(copy("cuMemcpy2DUnaligned_v2"), (0, host + 2048, d + 256, rows_2d));
    assert_eq!(copy("cuMemcpy2DUnaligned_v2_ptds"), (0, host + 2048, d + 256, rows_2d));
    assert_eq!(copy("cuMemcpy2DAsync_v2"), (s, e, d, rows_2d));
    assert_eq!(copy("cuMemcpy2DAsync_v2_ptsz"), (0, e, d, rows_2d));
    // Source slice 1 of 5-row slices; two slices of 4 rows span (5 + 3) rows and a width.
    let rows_3d = (5 + 3) * 256 + 64;
    assert_eq!(copy("cuMemcpy3D_v2"), (0, e, d + 5 * 256, rows_3d));
    assert_eq!(copy("cuMemcpy3D_v2_ptds"), (0, e, d + 5 * 256, rows_3d));
    assert_eq!(copy("cuMemcpy3DAsync_v2"), (s, e, d + 5 * 256, rows_3d));
    assert_eq!(copy("cuMemcpy3DAsync_v2_ptsz"), (0, e, d + 5 * 256, rows_3d));
    // The refused copy from a destroyed array: recorded with its result, and no addresses.
    let refused: Vec<&Value> = of_api(&records, "cuMemcpy2D_v2")
        .into_iter()
        .filter(|c| c["result"] != 0)
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(
        (refused[0]["result"].as_u64(), fields(refused[0])),
        (Some(400), (0, 0, 0, 0))
    );

    // Everything was waited for, freed and destroyed: nothing to report.
    let r = report_json(&trace);
    assert_eq!(r["findings"], serde_json::json!([]), "{r:#}");
    assert_eq!(r["leaks"], serde_json::json!([]));
}

/// (mistake, the check, what its message must say, its twins).
const MISTAKES: [(&str, &str, &str, &[&str]); 6] = [
    (
        "host-func",
        "unsynchronized-at-exit",
        "never waited for before exit; the last of it: cuLaunchHostFunc",
        &["host", "event"],
    ),
    (
        "graph",
        "unsynchronized-at-exit",
        "never waited for before exit; the last of it: cuGraphLaunch",
        &["host", "event"],
    ),
    (
        "launch-ex",
        "cross-stream-race",
        "and the earlier cuLaunchKernelEx on stream",
        &["host", "event"],
    ),
    (
        "copy-2d",
        "cross-stream-race",
        "cuMemcpy2DAsync_v2 on stream",
        &["host", "event"],
    ),
    (
        "copy-3d",
        "cross-stream-race",
        "cuMemcpy3DAsync_v2 on stream",
        &["host", "event"],
    ),
    (
        "copy-2d-sync",
        "cross-stream-race",
        "and the earlier cuMemcpy2D_v2 on the legacy default stream",
        &["pinned", "event"],
    ),
];

fn findings(args: &[&str]) -> Vec<Value> {
    let dir = TempDir::new();
    let r = report_json(&traced(&dir, "report_later_calls", args, &[]));
    assert_eq!(r["leaks"], serde_json::json!([]), "{args:?}: {r:#}");
    r["findings"].as_array().unwrap().clone()
}

#[test]
fn a_mistake_through_each_later_entry_point_is_found_exactly_once() {
    for (mistake, check, says, _) in MISTAKES {
        let found = findings(&[mistake]);
        assert_eq!(found.len(), 1, "{mistake}: {found:#?}");
        let f = &found[0];
        assert_eq!(
            (f["check"].as_str(), f["count"].as_u64()),
            (Some(check), Some(1)),
            "{mistake}"
        );
        let message = f["message"].as_str().unwrap();
        assert!(message.contains(says), "{mistake}: {message}");
        if mistake == "launch-ex" {
            // As for cuLaunchKernel: a kernel may write whatever it is given.
            assert!(
                message.contains("at least one writing (a kernel is taken to write the memory it is given)"),
                "{message}"
            );
        }
    }
}

#[test]
fn correctly_ordered_twins_of_the_later_entry_points_report_nothing() {
    for (mistake, _, _, twins) in MISTAKES {
        for twin in twins {
            let found = findings(&[mistake, twin]);
            assert!(found.is_empty(), "{mistake} {twin}: {found:#?}");
        }
    }
}
