//! The shim under real C programs on the simulated driver: every door, every allocation
//! family, transparency, threads, crashes, fork, and processes that never touch CUDA.

mod stress;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use gpuleak_e2e::{client, data_dir, shim_command, sim_command, TempDir};

use crate::trace::{assert_ok, calls, dump, dump_lossy, hex, mask_host_addresses, of_type, recorded_calls};

/// The client's calls, as it printed them, equal the trace's records one for one.
fn assert_trace_matches_program(name: &str, args: &[&str]) -> Vec<serde_json::Value> {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = shim_command(client(name), &trace).args(args).output().unwrap();
    assert_ok(&out);
    let records = dump(&trace);
    let printed = calls(&out.stdout);
    assert!(!printed.is_empty(), "{name} printed no calls");
    assert_eq!(recorded_calls(&records), printed, "{name}: trace and program disagree");
    records
}

#[test]
fn every_allocation_family_is_recorded_once_through_exported_symbols() {
    let records = assert_trace_matches_program("shim_families", &[]);
    let apis: std::collections::BTreeSet<&str> = of_type(&records, "Alloc")
        .iter()
        .map(|r| r["api"].as_str().unwrap())
        .collect();
    for family in [
        "cuMemAlloc_v2",
        "cuMemAllocPitch_v2",
        "cuMemAllocManaged",
        "cuMemAllocHost_v2",
        "cuMemHostAlloc",
        "cuMemHostRegister_v2",
        "cuMemAllocAsync",
        "cuMemAllocAsync_ptsz",
        "cuMemAllocFromPoolAsync",
        "cuMemAddressReserve",
        "cuMemCreate",
        "cuArrayCreate_v2",
        "cuArray3DCreate_v2",
        "cuIpcOpenMemHandle_v2",
    ] {
        assert!(apis.contains(family), "no {family} record");
    }
    for r in of_type(&records, "Alloc") {
        let failed = r["result"] != 0;
        assert_ne!(r["stack"], 0, "every allocation carries a stack: {r}");
        if failed {
            assert_eq!(hex(&r["ptr"]), 0, "a failed allocation is never an allocation: {r}");
        }
    }
    // Bad frees are recorded as failures with the stack of the bad call.
    let bad: Vec<_> = of_type(&records, "Free")
        .into_iter()
        .filter(|r| r["result"] != 0)
        .collect();
    assert_eq!(bad.len(), 2, "unknown pointer and double free");
    assert!(bad.iter().all(|r| r["stack"] != 0));
    // Contexts, streams and events.
    assert_eq!(of_type(&records, "CtxCreate").len(), 2);
    assert_eq!(of_type(&records, "CtxDestroy").len(), 1);
    assert_eq!(of_type(&records, "StreamCreate").len(), 1);
    assert_eq!(of_type(&records, "EventCreate").len(), 1);
    assert_eq!(of_type(&records, "Exit").len(), 1);
}

#[test]
fn the_program_computes_the_same_with_and_without_the_shim() {
    for name in [
        "shim_families",
        "shim_dlsym",
        "shim_resolver",
        "shim_runtime",
        "shim_runtime_static",
    ] {
        let dir = TempDir::new();
        let plain = sim_command(client(name)).output().unwrap();
        let traced = shim_command(client(name), &dir.path().join("t.trace"))
            .output()
            .unwrap();
        assert_ok(&plain);
        assert_ok(&traced);
        assert_eq!(
            mask_host_addresses(&String::from_utf8_lossy(&plain.stdout)),
            mask_host_addresses(&String::from_utf8_lossy(&traced.stdout)),
            "{name}: output differs under the shim"
        );
        assert_eq!(
            String::from_utf8_lossy(&traced.stderr),
            "",
            "{name}: the shim printed something"
        );
    }
}

#[test]
fn dlopen_and_dlsym_clients_are_seen_and_lookups_stay_transparent() {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = shim_command(client("shim_dlsym"), &trace).output().unwrap();
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("RTLD_DEFAULT cuMemAlloc_v2: missing"),
        "a privately loaded driver stays private: {text}"
    );
    assert!(text.contains("RTLD_NEXT puts: found"));
    assert!(text.contains("RTLD_NEXT dlvsym puts: puts"), "{text}");
    assert!(text.contains("RTLD_DEFAULT dlvsym puts: puts"), "{text}");
    assert!(text.contains("unknown: missing"));
    assert_eq!(recorded_calls(&dump(&trace)), calls(&out.stdout));
}

#[test]
fn resolver_only_clients_are_seen_with_the_exact_variant() {
    let records = assert_trace_matches_program("shim_resolver", &[]);
    let apis: Vec<&str> = of_type(&records, "Alloc")
        .iter()
        .map(|r| r["api"].as_str().unwrap())
        .collect();
    assert_eq!(apis, ["cuMemAlloc_v2", "cuMemAllocAsync_ptsz", "cuMemHostAlloc"]);
}

/// Every (name, version, flags) request real NVIDIA clients made, replayed through the
/// resolver with and without the shim: same result, same status, same exact variant, and
/// for tracked functions the shim's wrapper of that variant.
#[test]
fn every_recorded_resolver_request_gets_the_same_variant_through_the_shim() {
    let tracked_families = [
        "cuMemAlloc_v2",
        "cuMemFree_v2",
        "cuMemAllocPitch_v2",
        "cuMemAllocManaged",
        "cuMemAllocHost_v2",
        "cuMemHostAlloc",
        "cuMemFreeHost",
        "cuMemHostRegister_v2",
        "cuMemHostUnregister",
        "cuMemAllocAsync",
        "cuMemAllocAsync_ptsz",
        "cuMemAllocFromPoolAsync",
        "cuMemAllocFromPoolAsync_ptsz",
        "cuMemFreeAsync",
        "cuMemFreeAsync_ptsz",
        "cuMemAddressReserve",
        "cuMemAddressFree",
        "cuMemCreate",
        "cuMemRelease",
        "cuMemMap",
        "cuMemUnmap",
        "cuMemRetainAllocationHandle",
        "cuMemImportFromShareableHandle",
        "cuMulticastCreate",
        "cuArrayCreate_v2",
        "cuArray3DCreate_v2",
        "cuArrayDestroy",
        "cuMipmappedArrayCreate",
        "cuMipmappedArrayDestroy",
        "cuIpcOpenMemHandle_v2",
        "cuIpcCloseMemHandle",
        "cuMemPoolImportPointer",
        "cuMemPoolTrimTo",
        "cuImportExternalMemory",
        "cuExternalMemoryGetMappedBuffer",
        "cuExternalMemoryGetMappedMipmappedArray",
        "cuDestroyExternalMemory",
        "cuCtxCreate_v2",
        "cuCtxDestroy_v2",
        "cuDevicePrimaryCtxRetain",
        "cuDevicePrimaryCtxRelease_v2",
        "cuDevicePrimaryCtxReset_v2",
        "cuGetProcAddress",
        "cuGetProcAddress_v2",
    ];
    let mut files: Vec<_> = std::fs::read_dir(data_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tsv"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "resolver request data missing");
    let mut seen_tracked = std::collections::BTreeSet::new();
    for file in files {
        let dir = TempDir::new();
        let plain = sim_command(client("shim_resolver")).arg(&file).output().unwrap();
        let traced = shim_command(client("shim_resolver"), &dir.path().join("t.trace"))
            .arg(&file)
            .output()
            .unwrap();
        assert_ok(&plain);
        assert_ok(&traced);
        let rows = |o: &std::process::Output| -> Vec<Vec<String>> {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .map(|l| l.split('\t').map(String::from).collect())
                .collect()
        };
        let (p, t) = (rows(&plain), rows(&traced));
        assert_eq!(p.len(), t.len(), "{}", file.display());
        assert!(p.len() > 400, "{}: only {} requests replayed", file.display(), p.len());
        for (a, b) in p.iter().zip(&t) {
            // name, version, flags, result, status, symbol agree; only the module may change.
            assert_eq!(a[..6], b[..6], "{}: request {:?}", file.display(), a);
            let symbol = &a[5];
            if tracked_families.contains(&symbol.as_str()) {
                assert_eq!(b[6], "libgpuleak.so", "{}: {symbol} not intercepted", file.display());
                seen_tracked.insert(symbol.clone());
            } else if b[6] == "libgpuleak.so" {
                // Other tracked functions (streams, events): the wrapper of the same name.
                assert_eq!(a[6], "libcuda.so.1");
            } else {
                assert_eq!(a[6], b[6], "{}: {symbol} changed module", file.display());
            }
        }
    }
    for must in [
        "cuMemAlloc_v2",
        "cuMemAllocAsync",
        "cuMemAllocAsync_ptsz",
        "cuGetProcAddress",
        "cuGetProcAddress_v2",
        "cuMemCreate",
        "cuMemMap",
        "cuMemRetainAllocationHandle",
        "cuMemImportFromShareableHandle",
        "cuMulticastCreate",
        "cuMemPoolImportPointer",
        "cuMemPoolTrimTo",
        "cuImportExternalMemory",
        "cuExternalMemoryGetMappedBuffer",
    ] {
        assert!(seen_tracked.contains(must), "no request resolved to {must}");
    }
}

#[test]
fn a_shared_runtime_tags_driver_records_and_nothing_is_counted_twice() {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = shim_command(client("shim_runtime"), &trace).output().unwrap();
    assert_ok(&out);
    let records = dump(&trace);
    let allocs: Vec<(String, String, u64)> = of_type(&records, "Alloc")
        .iter()
        .map(|r| {
            (
                r["via"].as_str().unwrap().to_string(),
                r["api"].as_str().unwrap().to_string(),
                r["size"].as_u64().unwrap(),
            )
        })
        .collect();
    let expect = [
        ("cudaMalloc", "cuMemAlloc_v2", 1 << 20),
        ("cudaMallocHost", "cuMemHostAlloc", 4096),
        ("cudaMallocManaged", "cuMemAllocManaged", 8192),
        ("cudaMallocPitch", "cuMemAllocPitch_v2", 1000),
        ("cudaMallocAsync", "cuMemAllocAsync", 2048),
        ("cudaIpcOpenMemHandle", "cuIpcOpenMemHandle_v2", 1 << 20),
        ("cudaMalloc", "cuMemAlloc_v2", 555),
    ];
    let expect: Vec<(String, String, u64)> = expect
        .iter()
        .map(|(v, a, s)| (v.to_string(), a.to_string(), *s))
        .collect();
    assert_eq!(allocs, expect);
    let frees: Vec<&str> = of_type(&records, "Free")
        .iter()
        .map(|r| r["via"].as_str().unwrap())
        .collect();
    assert_eq!(
        frees,
        [
            "cudaFreeAsync",
            "cudaIpcCloseMemHandle",
            "cudaFree",
            "cudaFreeHost",
            "cudaFree",
            "cudaFree"
        ]
    );
}

#[test]
fn a_static_runtime_is_seen_at_the_driver_once_per_allocation() {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = shim_command(client("shim_runtime_static"), &trace).output().unwrap();
    assert_ok(&out);
    let records = dump(&trace);
    let allocs = of_type(&records, "Alloc");
    let sizes: Vec<u64> = allocs.iter().map(|r| r["size"].as_u64().unwrap()).collect();
    assert_eq!(sizes, [1 << 20, 4096, 8192, 1000, 2048, 1 << 20, 555]);
    assert!(
        allocs.iter().all(|r| r["via"] == "-"),
        "a static runtime's calls cannot be tagged"
    );
}

/// (record type, via, api, size) of every Alloc, Free and GraphExec record, in trace order.
fn tagged_records(records: &[serde_json::Value]) -> Vec<(String, String, String, u64)> {
    records
        .iter()
        .filter(|r| ["Alloc", "Free", "GraphExec"].contains(&r["type"].as_str().unwrap()))
        .map(|r| {
            (
                r["type"].as_str().unwrap().to_string(),
                r["via"].as_str().unwrap().to_string(),
                r["api"].as_str().unwrap().to_string(),
                r["size"].as_u64().unwrap_or(0),
            )
        })
        .collect()
}

#[test]
fn the_runtime_s_per_thread_array_registration_and_graph_calls_tag_their_driver_records() {
    let dir = TempDir::new();
    let run = |name: &str| {
        let trace = dir.path().join(format!("{name}.trace"));
        let out = shim_command(client(name), &trace).output().unwrap();
        assert_ok(&out);
        tagged_records(&dump(&trace))
    };
    let expect: Vec<(String, String, String, u64)> = [
        ("Alloc", "cudaMallocAsync_ptsz", "cuMemAllocAsync_ptsz", 2048),
        (
            "Alloc",
            "cudaMallocFromPoolAsync_ptsz",
            "cuMemAllocFromPoolAsync_ptsz",
            4096,
        ),
        ("Free", "cudaFreeAsync_ptsz", "cuMemFreeAsync_ptsz", 0),
        ("Free", "cudaFreeAsync_ptsz", "cuMemFreeAsync_ptsz", 0),
        ("Alloc", "cudaMallocArray", "cuArrayCreate_v2", 64 * 16 * 4),
        ("Alloc", "cudaMalloc3DArray", "cuArray3DCreate_v2", 8 * 8 * 4 * 4),
        // float4 (16 bytes), 64 x 32, four levels; then two.
        (
            "Alloc",
            "cudaMallocMipmappedArray",
            "cuMipmappedArrayCreate",
            16 * (2048 + 512 + 128 + 32),
        ),
        (
            "Alloc",
            "cudaMallocMipmappedArray",
            "cuMipmappedArrayCreate",
            16 * (2048 + 512),
        ),
        ("Alloc", "cudaMalloc3D", "cuMemAllocPitch_v2", 100 * 10 * 2),
        ("Alloc", "cudaHostRegister", "cuMemHostRegister_v2", 8192),
        ("Free", "cudaFreeArray", "cuArrayDestroy", 0),
        ("Free", "cudaFreeArray", "cuArrayDestroy", 0),
        ("Free", "cudaFreeMipmappedArray", "cuMipmappedArrayDestroy", 0),
        ("Free", "cudaFree", "cuMemFree_v2", 0),
        ("Free", "cudaHostUnregister", "cuMemHostUnregister", 0),
        ("Alloc", "cudaMallocAsync", "cuMemAllocAsync", 1024),
        ("Free", "cudaFreeAsync", "cuMemFreeAsync", 0),
        ("GraphExec", "cudaGraphInstantiate", "cuGraphInstantiateWithFlags", 0),
        (
            "GraphExec",
            "cudaGraphInstantiateWithParams",
            "cuGraphInstantiateWithParams",
            0,
        ),
        (
            "GraphExec",
            "cudaGraphInstantiateWithParams_ptsz",
            "cuGraphInstantiateWithParams_ptsz",
            0,
        ),
        ("Alloc", "cudaGraphAddMemAllocNode", "cuGraphAddMemAllocNode", 64 << 10),
        ("Alloc", "cudaGraphAddNode", "cuGraphAddNode", 32 << 10),
        ("Alloc", "cudaGraphAddNode_v2", "cuGraphAddNode_v2", 16 << 10),
        (
            "GraphExec",
            "cudaGraphInstantiateWithFlags",
            "cuGraphInstantiateWithFlags",
            0,
        ),
    ]
    .iter()
    .map(|(t, v, a, s)| (t.to_string(), v.to_string(), a.to_string(), *s))
    .collect();
    assert_eq!(run("shim_runtime_tags"), expect);
    // A static runtime makes the same driver calls, which cannot be tagged.
    let untagged: Vec<_> = expect
        .iter()
        .map(|(t, _, a, s)| (t.clone(), "-".to_string(), a.clone(), *s))
        .collect();
    assert_eq!(run("shim_runtime_tags_static"), untagged);

    // The report names the call the program made for each leak: the second mipmapped array,
    // and the node the graph's launch left allocated; the rest was freed.
    let trace = dir.path().join("shim_runtime_tags.trace");
    let out = gpuleak_e2e::gpuleak_report(&["--format", "json"], &[&trace]);
    assert_ok(&out);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let leaks: Vec<(u64, &str, &str, &str, &str)> = report["leaks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| {
            (
                l["bytes"].as_u64().unwrap(),
                l["kind"].as_str().unwrap(),
                l["api"].as_str().unwrap(),
                l["via"].as_str().unwrap_or("null"),
                l["stack"][0]["function"].as_str().unwrap_or("?"),
            )
        })
        .collect();
    assert_eq!(
        leaks,
        [
            (
                16 * (2048 + 512),
                "array",
                "cuMipmappedArrayCreate",
                "cudaMallocMipmappedArray",
                "leak_mipmapped"
            ),
            (
                16 << 10,
                "graph",
                "cuGraphAddNode_v2",
                "cudaGraphAddNode_v2",
                "add_node_v2"
            ),
        ]
    );
}

#[test]
fn eight_threads_of_100k_pairs_lose_nothing() {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = shim_command(client("shim_threads"), &trace)
        .args(["8", "100000"])
        .output()
        .unwrap();
    assert_ok(&out);
    let records = dump(&trace);
    let allocs = of_type(&records, "Alloc");
    let frees = of_type(&records, "Free");
    assert_eq!(allocs.len(), 800_000);
    assert_eq!(frees.len(), 800_000);
    assert!(allocs.iter().chain(&frees).all(|r| r["result"] == 0));
    let seqs: Vec<u64> = records.iter().map(|r| r["seq"].as_u64().unwrap()).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "records come out in one strict order"
    );
    let tids: std::collections::BTreeSet<u64> = allocs.iter().map(|r| r["tid"].as_u64().unwrap()).collect();
    assert_eq!(tids.len(), 8);
    // Each pointer is freed after it is allocated and before it is handed out again.
    let mut live = std::collections::HashSet::new();
    for r in &records {
        match r["type"].as_str().unwrap() {
            "Alloc" => assert!(live.insert(hex(&r["ptr"])), "address handed out twice: {r}"),
            "Free" => assert!(live.remove(&hex(&r["ptr"])), "free of a pointer not live: {r}"),
            _ => {}
        }
    }
    assert!(live.is_empty());
}

fn run_until_ready(mode: &str, n: usize, trace: &std::path::Path) -> std::process::Child {
    let mut child = shim_command(client("shim_crash"), trace)
        .args([mode, &n.to_string()])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut line)
        .unwrap();
    assert_eq!(line.trim(), "ready");
    child
}

#[test]
fn kill_9_leaves_a_readable_trace_with_every_recorded_allocation() {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let mut child = run_until_ready("hang", 3000, &trace);
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let records = dump(&trace);
    assert_eq!(of_type(&records, "Alloc").len(), 3000);
    assert!(of_type(&records, "Exit").is_empty(), "killed: no exit record");
}

#[test]
fn segv_and_abort_lose_nothing() {
    for mode in ["segv", "abort"] {
        let dir = TempDir::new();
        let trace = dir.path().join("t.trace");
        let mut child = run_until_ready(mode, 2500, &trace);
        let status = child.wait().unwrap();
        assert!(!status.success(), "{mode} should crash");
        let records = dump(&trace);
        assert_eq!(of_type(&records, "Alloc").len(), 2500, "{mode}");
    }
}

#[test]
fn a_forked_child_writes_its_own_trace_and_a_child_without_cuda_none() {
    let dir = TempDir::new();
    let template = dir.path().join("t.%p.trace");
    let out = shim_command(client("shim_fork"), &template).output().unwrap();
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let pids: Vec<u32> = text
        .lines()
        .find_map(|l| l.strip_prefix("children "))
        .unwrap()
        .split(' ')
        .map(|p| p.parse().unwrap())
        .collect();
    let mut files: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    assert_eq!(files.len(), 2, "parent and CUDA child only: {files:?}");
    assert!(
        !files.contains(&format!("t.{}.trace", pids[1])),
        "the child without CUDA wrote a trace"
    );
    let child = dump(&dir.path().join(format!("t.{}.trace", pids[0])));
    assert_eq!(of_type(&child, "ProcessInfo")[0]["pid"], pids[0]);
    assert_eq!(of_type(&child, "Alloc").len(), 3);
    assert_eq!(of_type(&child, "Free").len(), 1);
    // The child allocates from the parent's call site: its own trace must hold that stack.
    let stack_ids: std::collections::BTreeSet<u64> = of_type(&child, "Stack")
        .iter()
        .map(|s| s["id"].as_u64().unwrap())
        .collect();
    for a in of_type(&child, "Alloc") {
        assert!(
            stack_ids.contains(&a["stack"].as_u64().unwrap()),
            "child alloc refers to a stack not in its trace: {a}"
        );
    }
    let parent_file = files.iter().find(|f| **f != format!("t.{}.trace", pids[0])).unwrap();
    let parent = dump(&dir.path().join(parent_file));
    assert_eq!(of_type(&parent, "Alloc").len(), 1);
    assert_eq!(of_type(&parent, "Free").len(), 1);
}

#[test]
fn a_process_that_never_calls_cuda_writes_nothing_and_behaves_the_same() {
    let dir = TempDir::new();
    let plain = sim_command(client("no_cuda")).current_dir(dir.path()).output().unwrap();
    let mut cmd = shim_command(client("no_cuda"), &dir.path().join("t.trace"));
    cmd.env_remove("GPULEAK_OUTPUT").current_dir(dir.path());
    let traced = cmd.output().unwrap();
    assert_ok(&traced);
    assert_eq!(plain.stdout, traced.stdout);
    assert_eq!(
        String::from_utf8_lossy(&traced.stdout).trim(),
        "printf found, cuMemAlloc_v2 missing"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no file for a process without CUDA"
    );
}

#[test]
fn the_default_trace_name_carries_program_and_pid_and_never_overwrites() {
    let dir = TempDir::new();
    let mut cmd = shim_command(client("shim_crash"), &dir.path().join("unused"));
    cmd.env_remove("GPULEAK_OUTPUT")
        .current_dir(dir.path())
        .args(["exit", "3"]);
    let out = cmd.output().unwrap();
    assert_ok(&out);
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names.len(), 1);
    assert!(
        names[0].starts_with("gpuleak.shim_crash.") && names[0].ends_with(".trace"),
        "{names:?}"
    );
    // An explicit name that exists is not overwritten either.
    let fixed = dir.path().join("fixed.trace");
    for _ in 0..2 {
        assert_ok(
            &shim_command(client("shim_crash"), &fixed)
                .args(["exit", "3"])
                .output()
                .unwrap(),
        );
    }
    assert_eq!(of_type(&dump(&fixed), "Alloc").len(), 3);
    assert_eq!(of_type(&dump(&dir.path().join("fixed.trace.1")), "Alloc").len(), 3);
}

#[test]
fn bad_settings_give_one_line_and_defaults() {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = shim_command(client("shim_crash"), &trace)
        .env("GPULEAK_STACK_DEPTH", "lots")
        .args(["exit", "2"])
        .output()
        .unwrap();
    assert_ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.starts_with("gpuleak: GPULEAK_STACK_DEPTH=\"lots\""), "{err}");
    let records = dump(&trace);
    assert_eq!(of_type(&records, "ProcessInfo")[0]["stack_depth"], 64);

    // The same for the pool sampling period, read with the others when tracing starts.
    let trace = dir.path().join("pool.trace");
    let out = shim_command(client("shim_crash"), &trace)
        .env("GPULEAK_POOL_SAMPLE", "often")
        .args(["exit", "2"])
        .output()
        .unwrap();
    assert_ok(&out);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        err.trim_end(),
        "gpuleak: GPULEAK_POOL_SAMPLE=\"often\" is not 0 or a sampling period N; using 64"
    );
}

#[test]
fn an_unwritable_output_leaves_the_program_unaffected() {
    let plain = sim_command(client("shim_families")).output().unwrap();
    let out = shim_command(
        client("shim_families"),
        std::path::Path::new("/nonexistent-dir/x.trace"),
    )
    .output()
    .unwrap();
    assert_ok(&out);
    assert_eq!(
        mask_host_addresses(&String::from_utf8_lossy(&plain.stdout)),
        mask_host_addresses(&String::from_utf8_lossy(&out.stdout))
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("cannot create trace /nonexistent-dir/x.trace"), "{err}");
}

#[test]
fn stacks_start_at_the_program_s_call_site() {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    assert_ok(
        &shim_command(client("shim_crash"), &trace)
            .args(["exit", "5"])
            .output()
            .unwrap(),
    );
    let records = dump(&trace);
    let exe = of_type(&records, "Module")
        .into_iter()
        .find(|m| m["path"].as_str().unwrap().ends_with("/shim_crash"))
        .expect("executable module");
    let (start, end) = (exe["start"].as_u64().unwrap(), exe["end"].as_u64().unwrap());
    let alloc = of_type(&records, "Alloc")[0];
    let stack = of_type(&records, "Stack")
        .into_iter()
        .find(|s| s["id"] == alloc["stack"])
        .expect("stack record");
    let frames: Vec<u64> = stack["frames"].as_array().unwrap().iter().map(hex).collect();
    assert!(
        (start..end).contains(&frames[0]),
        "frame 0 {:#x} is not in the program [{start:#x}, {end:#x})",
        frames[0]
    );
    assert!(frames.len() >= 3, "main, libc start, _start: {frames:x?}");
}

/// Functions built with pointer authentication (aarch64's `pac-ret`, as distributions build
/// their arm64 packages) save signed return addresses in their frame records: the stack names
/// each of them all the same (unsigned, the frame-pointer walk read the signatures as parts of
/// the addresses, which then fell in no module). On x86-64 the same program is unsigned.
#[test]
fn signed_return_addresses_name_their_functions() {
    let dir = TempDir::new();
    let trace = dir.path().join("signed.trace");
    assert_ok(&shim_command(client("shim_signed_returns"), &trace).output().unwrap());
    let out = gpuleak_e2e::gpuleak_report(&["--format", "json"], &[&trace]);
    assert_ok(&out);
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let leaks = report["leaks"].as_array().unwrap();
    assert_eq!(leaks.len(), 1, "{report:#}");
    assert_eq!(leaks[0]["bytes"], 12345);
    let functions: Vec<&str> = leaks[0]["stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["function"].as_str().unwrap_or("?"))
        .collect();
    assert_eq!(
        functions[..4],
        ["signed_leaf", "signed_middle", "signed_outer", "main"],
        "{functions:?}"
    );
}

/// Runs `shim_sites` with `sites` call sites in turn, `rounds` times, and checks every
/// allocation's stack: one stack per site, whose frame 0 is the return address into that site.
/// Captures of a site are replayed from the unwinder's memos and their stack ids found by key
/// (up to 32 sites), or walked and interned again (more sites than memos): a stack id kept
/// for the wrong key, or a memo replayed for the wrong site, gives a site a second stack or
/// another site's frames.
fn assert_one_stack_per_site(sites: usize, rounds: usize) {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = shim_command(client("shim_sites"), &trace)
        .args([sites.to_string(), rounds.to_string()])
        .output()
        .unwrap();
    assert_ok(&out);
    let starts: Vec<u64> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_prefix("site "))
        .map(|l| u64::from_str_radix(l.split_whitespace().nth(1).unwrap().trim_start_matches("0x"), 16).unwrap())
        .collect();
    assert_eq!(starts.len(), sites);
    let records = dump(&trace);
    let frame0: std::collections::HashMap<u64, u64> = of_type(&records, "Stack")
        .into_iter()
        .map(|s| (s["id"].as_u64().unwrap(), hex(&s["frames"][0])))
        .collect();
    let mut stack_of_site = vec![std::collections::BTreeSet::new(); sites];
    let allocs = of_type(&records, "Alloc");
    assert_eq!(allocs.len(), sites * rounds);
    for a in allocs {
        let site = (a["size"].as_u64().unwrap() as usize - 4096) / 256;
        stack_of_site[site].insert(a["stack"].as_u64().unwrap());
    }
    let mut all = std::collections::BTreeSet::new();
    for (site, ids) in stack_of_site.iter().enumerate() {
        assert_eq!(ids.len(), 1, "site {site} of {sites} has stacks {ids:?}");
        let id = *ids.first().unwrap();
        assert!(all.insert(id), "site {site} shares stack {id} with another site");
        let ret = frame0[&id];
        assert!(
            ret > starts[site] && ret - starts[site] < 64,
            "site {site}: frame 0 {ret:#x} is not a return address into the site at {:#x}",
            starts[site]
        );
    }
}

#[test]
fn many_call_sites_in_turn_each_keep_their_own_stack() {
    // Fewer sites than the unwinder keeps memos (all replayed), then more (some walk).
    assert_one_stack_per_site(24, 12);
    assert_one_stack_per_site(48, 12);
}

#[test]
fn dump_of_a_truncated_trace_names_the_offset_and_keeps_what_came_before() {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    assert_ok(
        &shim_command(client("shim_crash"), &trace)
            .args(["exit", "50"])
            .output()
            .unwrap(),
    );
    let bytes = std::fs::read(&trace).unwrap();
    let whole = dump(&trace);
    let cut_at = whole.iter().filter(|r| r["type"] == "Alloc").nth(20).unwrap()["offset"]
        .as_u64()
        .unwrap() as usize
        + 3;
    let short = dir.path().join("short.trace");
    std::fs::write(&short, &bytes[..cut_at]).unwrap();
    let (records, stderr, ok) = dump_lossy(&short);
    assert!(!ok, "a truncated trace is an error");
    assert!(stderr.contains("truncated") && stderr.contains("offset"), "{stderr}");
    assert_eq!(of_type(&records, "Alloc").len(), 20);
    std::fs::write(&short, b"not a trace at all").unwrap();
    let (_, stderr, ok) = dump_lossy(&short);
    assert!(!ok && stderr.contains("not a gpuleak trace"), "{stderr}");
}

#[test]
fn no_stack_contains_a_frame_of_the_shim_itself() {
    // The runtime tag wrappers sit between the program and libcudart: their frames must go too.
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    assert_ok(&shim_command(client("shim_runtime"), &trace).output().unwrap());
    let records = dump(&trace);
    let shim = of_type(&records, "Module")
        .into_iter()
        .find(|m| m["path"].as_str().unwrap().ends_with("libgpuleak.so"))
        .expect("shim module");
    let (start, end) = (shim["start"].as_u64().unwrap(), shim["end"].as_u64().unwrap());
    let stacks = of_type(&records, "Stack");
    assert!(stacks.len() >= 6);
    for s in stacks {
        for f in s["frames"].as_array().unwrap() {
            assert!(!(start..end).contains(&hex(f)), "shim frame in {s}");
        }
    }
}

#[test]
fn a_library_loaded_after_tracing_started_gets_its_module_record() {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    assert_ok(&shim_command(client("shim_late_module"), &trace).output().unwrap());
    let records = dump(&trace);
    let alloc = of_type(&records, "Alloc")
        .into_iter()
        .find(|r| r["size"] == 4321)
        .expect("the runtime's allocation");
    let modules = of_type(&records, "Module");
    let rt = modules
        .iter()
        .find(|m| m["path"].as_str().unwrap().contains("libcudart.so"))
        .expect("a record for libcudart loaded later");
    let first_alloc_seq = of_type(&records, "ProcessInfo")[0]["seq"].as_u64().unwrap();
    assert!(
        rt["seq"].as_u64().unwrap() > first_alloc_seq,
        "written when first needed, not in the preamble"
    );
    let stack = of_type(&records, "Stack")
        .into_iter()
        .find(|s| s["id"] == alloc["stack"])
        .unwrap();
    for f in stack["frames"].as_array().unwrap() {
        let a = hex(f);
        assert!(
            modules
                .iter()
                .any(|m| m["start"].as_u64().unwrap() <= a && a < m["end"].as_u64().unwrap()),
            "frame {a:#x} lies in no recorded module"
        );
    }
}

#[test]
fn object_stacks_and_the_clock_follow_their_settings() {
    let dir = TempDir::new();
    let run = |name: &str, env: &[(&str, &str)]| {
        let trace = dir.path().join(name);
        let mut cmd = shim_command(client("shim_families"), &trace);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().unwrap();
        assert_ok(&out);
        (dump(&trace), String::from_utf8_lossy(&out.stderr).into_owned())
    };
    let creates = |records: &[serde_json::Value]| {
        let mut c = of_type(records, "StreamCreate");
        c.extend(of_type(records, "EventCreate"));
        assert!(c.len() >= 2, "a stream and an event are created");
        c.into_iter().map(|r| r["stack"].as_u64().unwrap()).collect::<Vec<_>>()
    };
    // By default streams and events are created without a stack (stream and event calls
    // capture none); GPULEAK_OBJECT_STACKS=1 records it (what stream-leak and event-leak
    // findings then show).
    let (default, _) = run("default.trace", &[]);
    assert!(creates(&default).iter().all(|&s| s == 0));
    assert!(
        of_type(&default, "Alloc").iter().all(|r| r["stack"] != 0),
        "allocations keep theirs"
    );
    let (on, err) = run("on.trace", &[("GPULEAK_OBJECT_STACKS", "1")]);
    assert!(err.is_empty(), "{err}");
    assert!(creates(&on).iter().all(|&s| s != 0));

    // The precise clock gives every record of the thread its own time; the default coarse one
    // moves by timer ticks (records within one tick share a time). In sequence order, times
    // never go back.
    let (precise, _) = run("precise.trace", &[("GPULEAK_CLOCK", "precise")]);
    for records in [&default, &precise] {
        let mut times: Vec<(u64, u64)> = records
            .iter()
            .map(|r| (r["seq"].as_u64().unwrap(), r["time_ns"].as_u64().unwrap()))
            .collect();
        times.sort_unstable();
        assert!(times.windows(2).all(|w| w[0].1 <= w[1].1), "{times:?}");
    }
    let distinct = |records: &[serde_json::Value]| {
        let mut t: Vec<u64> = records.iter().map(|r| r["time_ns"].as_u64().unwrap()).collect();
        t.dedup();
        t.len()
    };
    assert!(
        distinct(&precise) > precise.len() / 2,
        "precise times: {}",
        distinct(&precise)
    );

    // A bad value is one line on stderr and the default.
    let (bad, err) = run(
        "bad.trace",
        &[("GPULEAK_CLOCK", "sundial"), ("GPULEAK_OBJECT_STACKS", "maybe")],
    );
    assert_eq!(err.lines().count(), 2, "{err}");
    assert!(
        err.contains("GPULEAK_CLOCK=\"sundial\" is not coarse or precise; using coarse"),
        "{err}"
    );
    assert!(
        err.contains("GPULEAK_OBJECT_STACKS=\"maybe\" is not 0 or 1; using 0"),
        "{err}"
    );
    assert!(creates(&bad).iter().all(|&s| s == 0));
}
