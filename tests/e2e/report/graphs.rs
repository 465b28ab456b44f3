//! Graph memory through the shim and the simulated driver (`report_graphs.c`): each launch of
//! an instantiated graph allocates what its allocation nodes say, and memory a launch left
//! allocated at exit is a `graph` leak at the stack that made the node. Every leaking mode has
//! a correct twin that must report nothing.

use super::*;

const SIZE: u64 = 4 << 20;

/// Runs `report_graphs MODE` under the shim: its output and trace.
fn run(dir: &TempDir, mode: &str) -> (String, PathBuf) {
    let trace = dir.path().join(format!("graphs-{mode}.trace"));
    let out = shim_command(client("report_graphs"), &trace)
        .arg(mode)
        .output()
        .unwrap();
    assert_ok(&out);
    (String::from_utf8(out.stdout).unwrap(), trace)
}

/// The one leak of the report: (kind, bytes, allocations, api), and its stack.
fn one_leak(r: &Value) -> ((String, u64, u64, String), &Value) {
    let leaks = r["leaks"].as_array().unwrap();
    assert_eq!(leaks.len(), 1, "{r:#}");
    let l = &leaks[0];
    let s = |v: &Value| v.as_str().unwrap().to_string();
    (
        (s(&l["kind"]), u(&l["bytes"]), u(&l["allocations"]), s(&l["api"])),
        &l["stack"],
    )
}

fn notes(r: &Value) -> String {
    r["notes"].to_string()
}

#[test]
fn memory_a_graph_launch_left_allocated_is_a_graph_leak_at_the_node_s_stack() {
    let dir = TempDir::new();
    let graph = |api: &str| ("graph".to_string(), SIZE, 1, api.to_string());

    // Captured: one launch, never freed.
    let (stdout, trace) = run(&dir, "leak");
    assert!(
        stdout.contains("memory node types 1 0\nlaunches 1\nbytes ok\n"),
        "{stdout}"
    );
    let r = report_json(&[], &[&trace]);
    let (leak, stack) = one_leak(&r);
    assert_eq!(leak, graph("cuMemAllocAsync"));
    assert_frame0(stack, "capture_graph", "report_graphs");
    assert_eq!(u(&r["summary"]["leaked_bytes"]), SIZE);
    assert!(!notes(&r).contains("does not list"), "{r:#}");
    let records = dump(&trace);
    let execs = of_type(&records, "GraphExec");
    assert_eq!(execs.len(), 1);
    let e = &execs[0];
    assert_eq!(e["api"], "cuGraphInstantiateWithFlags");
    assert_eq!(
        (u(&e["alloc_nodes"]), u(&e["free_nodes"]), u(&e["nodes_known"])),
        (1, 0, 1)
    );
    let mem = of_type(&records, "GraphMem");
    assert_eq!(mem.len(), 1);
    assert_eq!(mem[0]["exec"], e["exec"]);
    let node = of_type(&records, "Alloc")
        .into_iter()
        .find(|a| a["api"] == "cuMemAllocAsync")
        .unwrap();
    // Addresses as dump shows them (hex): the node's address, its size, its location (type 1,
    // a device, in the high 32 bits; ordinal 0 in the low).
    assert_eq!(
        mem[0]["allocs"],
        serde_json::json!([node["ptr"].clone(), format!("{SIZE:#x}"), "0x100000000"]),
        "{mem:?}"
    );
    let text = report_text(&[], &[&trace]);
    assert!(
        text.contains("(graph) at exit,\n  allocated by a graph launch, node made by cuMemAllocAsync:"),
        "{text}"
    );
    // A leak fails a check.
    let check = |trace: &Path| {
        std::process::Command::new(gpuleak_e2e::gpuleak_bin())
            .arg("check")
            .arg(trace)
            .output()
            .unwrap()
            .status
            .code()
    };
    assert_eq!(check(&trace), Some(1));

    // The twins: freed after every launch (cuMemFreeAsync, then cuMemFree); auto-free on
    // launch with the last launch's memory freed; a graph that frees its own allocation; a
    // node made by hand freed by another graph's free node.
    for (mode, launches, allocations, frees) in [
        ("clean", 3, 3, 3),
        ("autofree", 3, 3, 3),
        ("transient", 2, 0, 0),
        ("nodes-freed", 1, 1, 1),
    ] {
        let (stdout, trace) = run(&dir, mode);
        assert!(
            stdout.contains(&format!("launches {launches}\nbytes ok\n")),
            "{mode}: {stdout}"
        );
        let r = report_json(&[], &[&trace]);
        assert_eq!(r["leaks"], serde_json::json!([]), "{mode}: {r:#}");
        assert_eq!(r["findings"], serde_json::json!([]), "{mode}: {r:#}");
        let summary = &r["summary"];
        // A graph's own transient allocation is neither counted nor in the peak.
        let peak = if allocations > 0 { SIZE } else { 0 };
        assert_eq!(
            (
                u(&summary["allocations"]),
                u(&summary["frees"]),
                u(&summary["peak_bytes"])
            ),
            (allocations, frees, peak),
            "{mode}: {summary}"
        );
        assert_eq!(check(&trace), Some(0), "{mode}");
    }
    let (stdout, _) = run(&dir, "transient");
    assert!(stdout.contains("memory node types 1 1\n"), "{stdout}");

    // Launched again without a free: the driver refuses (CUDA_ERROR_INVALID_VALUE passes
    // through), and the one launch's memory is the leak.
    let (stdout, trace) = run(&dir, "relaunch");
    assert!(stdout.contains("relaunch 1\nlaunches 1\n"), "{stdout}");
    assert_eq!(one_leak(&report_json(&[], &[&trace])).0, graph("cuMemAllocAsync"));

    // Auto-free: three launches, and only the last one's memory is left.
    let (stdout, trace) = run(&dir, "autofree-leak");
    assert!(stdout.contains("launches 3\n"), "{stdout}");
    assert_eq!(one_leak(&report_json(&[], &[&trace])).0, graph("cuMemAllocAsync"));

    // By hand, instantiated with cuGraphInstantiateWithParams: reported where the node was
    // added.
    let (_, trace) = run(&dir, "nodes");
    let r = report_json(&[], &[&trace]);
    let (leak, stack) = one_leak(&r);
    assert_eq!(leak, graph("cuGraphAddMemAllocNode"));
    assert_frame0(stack, "add_node", "report_graphs");
    assert_eq!(
        of_type(&dump(&trace), "GraphExec")[0]["api"],
        "cuGraphInstantiateWithParams"
    );
    // 600 allocation nodes: listed in two records (512 and 88 nodes), all allocated by the
    // launch, all but one freed.
    let (_, trace) = run(&dir, "many");
    let records = dump(&trace);
    let listed: Vec<usize> = of_type(&records, "GraphMem")
        .iter()
        .map(|m| m["allocs"].as_array().unwrap().len() / 3)
        .collect();
    assert_eq!(listed, [512, 88]);
    assert_eq!(u(&of_type(&records, "GraphExec")[0]["alloc_nodes"]), 600);
    let r = report_json(&[], &[&trace]);
    assert_eq!(
        one_leak(&r).0,
        ("graph".to_string(), 4096, 1, "cuGraphAddMemAllocNode".to_string())
    );
    assert_eq!(u(&r["summary"]["allocations"]), 600);
    assert_eq!(u(&r["summary"]["peak_bytes"]), 600 * 4096);
}

#[test]
fn nodes_made_by_cu_graph_add_node_and_nodes_of_a_moved_child_graph_are_reported_where_they_were_made() {
    let dir = TempDir::new();
    let clean = |mode: &str, trace: &Path, allocations: u64| {
        let r = report_json(&[], &[trace]);
        assert_eq!(r["leaks"], serde_json::json!([]), "{mode}: {r:#}");
        assert_eq!(r["findings"], serde_json::json!([]), "{mode}: {r:#}");
        let summary = &r["summary"];
        let peak = if allocations > 0 { SIZE } else { 0 };
        assert_eq!(
            (u(&summary["allocations"]), u(&summary["peak_bytes"])),
            (allocations, peak),
            "{mode}: {summary}"
        );
    };

    // The generic constructor (CUDA 12.3's cuGraphAddNode_v2), given allocation parameters.
    let (stdout, trace) = run(&dir, "generic");
    assert!(stdout.contains("bytes ok\nlaunches 1\n"), "{stdout}");
    let r = report_json(&[], &[&trace]);
    let (leak, stack) = one_leak(&r);
    assert_eq!(leak, ("graph".to_string(), SIZE, 1, "cuGraphAddNode_v2".to_string()));
    assert_frame0(stack, "generic_node", "report_graphs");
    assert!(notes(&r).contains("by cuGraphAddNode: 1;"), "{r:#}");
    let (_, trace) = run(&dir, "generic-freed");
    clean("generic-freed", &trace, 1);

    // A graph with an allocation node: cloning it into a child graph node is refused
    // (CUDA_ERROR_INVALID_VALUE passes through); moved into its parent by cuGraphAddNode
    // (CUDA 12.2's signature), it is listed with the parent's nodes at instantiation.
    let (stdout, trace) = run(&dir, "child");
    assert!(
        stdout.contains("clone refused 1\nchild moved\nmoved child refuses 1 1 1\nbytes ok\nlaunches 1\n"),
        "{stdout}"
    );
    let records = dump(&trace);
    // The refused instantiation of the moved graph, then the parent's.
    let execs = of_type(&records, "GraphExec");
    let results: Vec<u64> = execs.iter().map(|e| u(&e["result"])).collect();
    assert_eq!(results, [1, 0]);
    let e = &execs[1];
    assert_eq!(
        (u(&e["alloc_nodes"]), u(&e["free_nodes"]), u(&e["nodes_known"])),
        (1, 0, 1),
        "{e}"
    );
    let r = report_json(&[], &[&trace]);
    let (leak, stack) = one_leak(&r);
    assert_eq!(
        leak,
        ("graph".to_string(), SIZE, 1, "cuGraphAddMemAllocNode".to_string())
    );
    assert_frame0(stack, "make_child", "report_graphs");
    // The twin: the parent frees the child's allocation itself.
    let (stdout, trace) = run(&dir, "child-freed");
    assert!(
        stdout.contains("child moved\nmoved child refuses 1 1 1\nlaunches 1\n"),
        "{stdout}"
    );
    let records = dump(&trace);
    let e = &of_type(&records, "GraphExec")[1];
    assert_eq!((u(&e["alloc_nodes"]), u(&e["free_nodes"])), (1, 1), "{e}");
    clean("child-freed", &trace, 0);
}

#[test]
fn the_shim_s_live_gauges_count_graph_memory_while_a_launch_holds_it() {
    let dir = TempDir::new();
    // The "live WHEN N" lines of `report_graphs MODE` with live accounting on from the start.
    let live = |mode: &str| -> Vec<(String, u64)> {
        let trace = dir.path().join(format!("live-{mode}.trace"));
        let out = shim_command(client("report_graphs"), &trace)
            .arg(mode)
            .env("GPULEAK_LIVE", "1")
            .env("REPORT_GRAPHS_LIVE", "1")
            .output()
            .unwrap();
        assert_ok(&out);
        String::from_utf8(out.stdout)
            .unwrap()
            .lines()
            .filter_map(|l| l.strip_prefix("live "))
            .map(|l| {
                let (when, n) = l.split_once(' ').unwrap();
                (when.to_string(), n.parse().unwrap())
            })
            .collect()
    };
    let at = |pairs: &[(&str, u64)]| -> Vec<(String, u64)> { pairs.iter().map(|&(w, n)| (w.to_string(), n)).collect() };
    // A captured allocation is a node, not memory: nothing live until the launch.
    assert_eq!(
        live("leak"),
        at(&[("before", 0), ("launch", SIZE), ("after", SIZE), ("end", SIZE)])
    );
    assert_eq!(
        live("clean"),
        at(&[
            ("before", 0),
            ("launch", SIZE),
            ("after", 0),
            ("launch", SIZE),
            ("after", 0),
            ("launch", SIZE),
            ("after", 0),
            ("end", 0)
        ])
    );
    // Freed within the launch: never live.
    assert_eq!(
        live("transient"),
        at(&[
            ("before", 0),
            ("launch", 0),
            ("after", 0),
            ("launch", 0),
            ("after", 0),
            ("end", 0)
        ])
    );
    // Auto-free: each launch frees the last one's memory first.
    assert_eq!(
        live("autofree"),
        at(&[
            ("before", 0),
            ("launch", SIZE),
            ("after", SIZE),
            ("launch", SIZE),
            ("after", SIZE),
            ("launch", SIZE),
            ("after", 0),
            ("end", 0)
        ])
    );
    // A refused launch allocates nothing more.
    assert_eq!(
        live("relaunch"),
        at(&[
            ("before", 0),
            ("launch", SIZE),
            ("after", SIZE),
            ("launch", SIZE),
            ("end", SIZE)
        ])
    );
    // Nodes made by hand, by the generic constructor, and in a moved child graph; a child's
    // allocation its parent frees.
    assert_eq!(
        live("nodes-freed"),
        at(&[("before", 0), ("launch", SIZE), ("after", SIZE), ("end", 0)])
    );
    assert_eq!(
        live("generic-freed"),
        at(&[("before", 0), ("launch", SIZE), ("end", 0)])
    );
    assert_eq!(live("child"), at(&[("before", 0), ("launch", SIZE), ("end", SIZE)]));
    assert_eq!(live("child-freed"), at(&[("before", 0), ("launch", 0), ("end", 0)]));
}
