//! Graphs and stream ordering of the third-party Python clients: cuda-bindings' graph nodes
//! and stream memory operations, cuda-core's event nodes and graphs, each reported at the
//! Python line that made it.

use gpuleak_e2e::{shim_command, sim_command, TempDir};
use serde_json::Value;

use super::{python_command, wrapped};
use crate::trace::{assert_ok, checks, dump};

/// Runs `tests/python/<script> MODE` on the simulator alone and under the shim: both must
/// print `expected`; returns the JSON report of the traced run.
fn run_graph_client(dir: &TempDir, script: &str, mode: &str, expected: &str) -> Value {
    let plain = wrapped(python_command(script), |p| sim_command(p))
        .arg(mode)
        .output()
        .unwrap();
    assert_ok(&plain);
    let trace = dir.path().join(format!("{mode}.trace"));
    let traced = wrapped(python_command(script), |p| shim_command(p, &trace))
        .arg(mode)
        .output()
        .unwrap();
    assert_ok(&traced);
    assert_eq!(String::from_utf8_lossy(&plain.stdout), expected);
    assert_eq!(plain.stdout, traced.stdout, "the shim changed what the program printed");
    // --native-frames: the notes about cuda-core's stripped modules, whose frames are folded
    // out of Python stacks by default, are checked below.
    let out = gpuleak_e2e::gpuleak_report(&["--format", "json", "--native-frames"], &[&trace]);
    assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON: {e}"))
}

/// cuda-core's event nodes (`GraphDefinition.wait`, `.record`), and the three ways it switches
/// an executable graph to other events: node by node (cuGraphExecNodeSetParams), from the
/// edited definition (cuGraphNodeSetParams, then cuGraphExecUpdate_v2), and a child graph's
/// (cuGraphExecNodeSetParams given a child graph). Each launch records the events its graph
/// then names, so the consumer's waits order it after the launches: nothing to report. Not
/// switching it leaves the second wait for an event never recorded.
#[test]
fn cuda_core_event_nodes_order_the_streams_that_wait_for_them_as_last_updated() {
    let dir = TempDir::new();
    for mode in ["node-update", "graph-update", "child-update", "no-update"] {
        let done2 = u8::from(mode != "no-update");
        let expected =
            format!("mode {mode}\nlaunch 1 value=7 done=1 done2=0\nlaunch 2 value=7 done=1 done2={done2}\ndone\n");
        let r = run_graph_client(&dir, "cuda_core_graph_events.py", mode, &expected);
        assert!(r["leaks"].as_array().unwrap().is_empty(), "{mode}: {r:#}");
        if mode == "no-update" {
            // The second launch still waits for READY, not for the consumer's clear: its
            // memset races with the clear; and nothing orders the consumer's copy and free
            // after that memset.
            assert_eq!(
                checks(&r),
                [
                    "cross-stream-race",
                    "cross-stream-race",
                    "unordered-free",
                    "wait-on-unrecorded-event"
                ],
                "{r:#}"
            );
        } else {
            assert!(r["findings"].as_array().unwrap().is_empty(), "{mode}: {r:#}");
        }
    }
}

/// Graph memory nodes made through cuda-bindings' resolver table (cuGraphAddMemAllocNode, and
/// the generic cuGraphAddNode at the version cuda-bindings asks for): the node its graph does
/// not free is a `graph` leak at the Python line that made it; the node its graph frees lives
/// only while the graph runs; with that memory freed after the launch, nothing leaks.
#[test]
fn cuda_bindings_graph_nodes_are_reported_at_the_python_line_that_made_them() {
    let dir = TempDir::new();
    let expected = "node call=cuGraphAddMemAllocNode size=65536\n\
                    node call=cuGraphAddNode size=262144\nlaunched\ndone\n";
    let run = |mode: &str| run_graph_client(&dir, "cuda_bindings_graphs.py", mode, expected);
    let leak = run("leak");
    let leaks = leak["leaks"].as_array().unwrap();
    assert_eq!(leaks.len(), 1, "{leaks:#?}");
    let l = &leaks[0];
    assert_eq!(
        (
            l["bytes"].as_u64(),
            l["kind"].as_str(),
            l["api"].as_str(),
            l["at"].as_str()
        ),
        (Some(262144), Some("graph"), Some("cuGraphAddNode_v2"), Some("teardown")),
        "{l:#}"
    );
    let made_here = |f: &Value| {
        f["function"] == "add_generic_node"
            && f["module"] == "python"
            && f["file"]
                .as_str()
                .is_some_and(|p| p.ends_with("cuda_bindings_graphs.py"))
    };
    assert!(l["stack"].as_array().unwrap().iter().any(made_here), "{l:#}");
    // The freed node never counts: the peak is the kept node alone.
    assert_eq!(leak["summary"]["peak_bytes"], 262144);
    assert_eq!(leak["findings"].as_array().unwrap().len(), 0);

    let clean = run("clean");
    assert_eq!(clean["leaks"].as_array().unwrap().len(), 0, "{clean:#}");
    assert_eq!(clean["findings"].as_array().unwrap().len(), 0, "{clean:#}");
    assert_eq!(clean["summary"]["leaked_bytes"], 0);
}

/// Streams ordered by a value one writes and the other waits for (stream memory operations),
/// called through cuda-bindings' resolver table: the `_v2` variants are recorded, the ordered
/// and batched programs report nothing, and the program whose consumer does not wait reports
/// the race.
#[test]
fn cuda_bindings_stream_memory_operations_order_streams() {
    let dir = TempDir::new();
    let run = |mode: &str| run_graph_client(&dir, "cuda_bindings_memops.py", mode, "value 7\ndone\n");
    for mode in ["ordered", "batched"] {
        let r = run(mode);
        assert_eq!(r["findings"].as_array().unwrap().len(), 0, "{mode}: {r:#}");
        assert_eq!(r["leaks"].as_array().unwrap().len(), 0, "{mode}: {r:#}");
    }
    let records = dump(&dir.path().join("ordered.trace"));
    let apis: Vec<&str> = records
        .iter()
        .filter(|r| r["type"] == "MemOp")
        .map(|r| r["api"].as_str().unwrap())
        .collect();
    assert_eq!(apis, ["cuStreamWriteValue32_v2", "cuStreamWaitValue32_v2"]);
    let records = dump(&dir.path().join("batched.trace"));
    let ops: Vec<(Option<&str>, Option<u64>)> = records
        .iter()
        .filter(|r| r["type"] == "MemOp")
        .map(|r| (r["api"].as_str(), r["op"].as_u64()))
        .collect();
    assert_eq!(
        ops,
        [
            (Some("cuStreamBatchMemOp_v2"), Some(2)),
            (Some("cuStreamBatchMemOp_v2"), Some(1))
        ]
    );
    let r = run("unordered");
    let checks = checks(&r);
    assert_eq!(checks, ["cross-stream-race"], "{r:#}");
}

/// cuda-core's graphs, built node by node (`GraphDefinition`) and captured (`GraphBuilder`
/// with a `GraphMemoryResource`), which keep what an executable graph needs alive with a user
/// object. The allocation a graph frees itself never counts. The definition's kept node,
/// which no Python object owns, leaks unless a second graph frees it, and is reported at the
/// Python line that made it; the captured `Buffer` is freed by its finalizer, so it leaks
/// only when none runs (`os._exit`), at the line that captured it.
#[test]
fn cuda_core_graphs_are_reported_at_the_python_line_that_made_them() {
    let dir = TempDir::new();
    let expected = "node size=65536 freed=1\nnode size=262144 freed=0\n\
                    node size=65536 freed=1\nnode size=131072 freed=0\nlaunched\ndone\n";
    let run = |mode: &str| run_graph_client(&dir, "cuda_core_graphs.py", mode, expected);
    let made_in = |leak: &Value, function: &str| {
        leak["stack"].as_array().unwrap().iter().any(|f| {
            f["function"] == function
                && f["module"] == "python"
                && f["file"].as_str().is_some_and(|p| p.ends_with("cuda_core_graphs.py"))
        })
    };
    let summary = |l: &Value| {
        (
            l["bytes"].as_u64().unwrap(),
            l["kind"].as_str().unwrap().to_owned(),
            l["api"].as_str().unwrap().to_owned(),
            l["at"].as_str().unwrap().to_owned(),
        )
    };

    let leak = run("leak");
    let leaks = leak["leaks"].as_array().unwrap();
    assert_eq!(leaks.len(), 1, "{leaks:#?}");
    assert_eq!(
        summary(&leaks[0]),
        (
            262144,
            "graph".into(),
            "cuGraphAddMemAllocNode".into(),
            "teardown".into()
        )
    );
    assert!(made_in(&leaks[0], "allocate_kept"), "{:#}", leaks[0]);
    // The scratch nodes never count: the peak is the two kept allocations.
    assert_eq!(leak["summary"]["peak_bytes"], 262144 + 131072);
    // The captured Buffer's finalizer frees it on its stream (cuMemFreeAsync) at interpreter
    // shutdown, and nothing waits for that before the context goes: no finding, since a
    // stream-ordered free left pending hands nothing back that the program could miss.
    assert_eq!(leak["findings"], serde_json::json!([]), "{leak:#}");
    // cuda-core's extension modules are stripped: the note says which frames have no name.
    let stripped = leak["notes"].as_array().unwrap().iter().any(|n| {
        n.as_str()
            .is_some_and(|n| n.contains("_graph_definition.cpython") && n.contains("only exported functions named"))
    });
    assert!(stripped, "{:#}", leak["notes"]);

    let exit = run("exit");
    let leaks = exit["leaks"].as_array().unwrap();
    assert_eq!(leaks.len(), 2, "{leaks:#?}");
    let kept = leaks
        .iter()
        .find(|l| l["bytes"] == 262144)
        .expect("the definition's node");
    let captured = leaks
        .iter()
        .find(|l| l["bytes"] == 131072)
        .expect("the captured buffer");
    assert_eq!(
        summary(kept),
        (262144, "graph".into(), "cuGraphAddMemAllocNode".into(), "exit".into())
    );
    assert!(made_in(kept, "allocate_kept"), "{kept:#}");
    assert_eq!(
        summary(captured),
        (131072, "graph".into(), "cuMemAllocAsync".into(), "exit".into())
    );
    assert!(made_in(captured, "capture_kept"), "{captured:#}");

    let clean = run("clean");
    assert_eq!(clean["leaks"].as_array().unwrap().len(), 0, "{clean:#}");
    assert_eq!(clean["findings"].as_array().unwrap().len(), 0, "{clean:#}");
    assert_eq!(clean["summary"]["leaked_bytes"], 0);
    assert_eq!(clean["summary"]["peak_bytes"], 262144 + 131072);
}
