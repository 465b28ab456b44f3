//! Every door into the driver: `dlopen` and `dlsym`, the resolvers (each request answered with
//! the exact variant), and the CUDA runtime, shared or static, whose driver records are tagged
//! with the runtime call (`via`) and counted once.

use gpuleak_e2e::{client, data_dir, shim_command, sim_command, TempDir};

use super::assert_trace_matches_program;
use crate::trace::{assert_ok, calls, dump, of_type, recorded_calls};

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
