//! The versioned resolvers: every recorded request of real clients replays, and the variant
//! picked for a (name, version, flags) request is the exact one the real driver returns.

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::process::Stdio;

use gpuleak_e2e::{client, data_dir, output_of, sim_command};
use gpuleak_format::{Api, Library};

/// One line of sim_resolver's output.
#[derive(Debug, Clone, PartialEq)]
struct Answer {
    name: String,
    version: i64,
    flags: u64,
    result: i64,
    status: String,
    symbol: String,
}

fn parse(text: &str) -> Vec<Answer> {
    text.lines()
        .map(|line| {
            let f: Vec<&str> = line.split('\t').collect();
            assert_eq!(f.len(), 6, "bad line {line:?}");
            Answer {
                name: f[0].to_string(),
                version: f[1].parse().unwrap(),
                flags: f[2].parse().unwrap(),
                result: f[3].parse().unwrap(),
                status: f[4].to_string(),
                symbol: f[5].to_string(),
            }
        })
        .collect()
}

/// Replays `requests` (tsv text) through resolver `abi` (v2, v1, ptsz) with extra environment.
fn replay_text(requests: &str, abi: &str, env: &[(&str, &str)]) -> Vec<Answer> {
    let mut cmd = sim_command(client("sim_resolver"));
    cmd.args(["-", abi]).envs(env.iter().copied());
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn sim_resolver");
    child.stdin.take().unwrap().write_all(requests.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "sim_resolver failed ({}):\n{stdout}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    parse(&stdout)
}

fn replay_file(path: &Path, abi: &str) -> Vec<Answer> {
    let out = output_of(sim_command(client("sim_resolver")).arg(path).arg(abi));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "replaying {} failed ({}):\n{}",
        path.display(),
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    parse(&stdout)
}

/// The request rows of a resolver-requests file: (name, version, flags).
fn request_rows(path: &Path) -> Vec<(String, i64, u64)> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with("name\t") && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split('\t').collect();
            (f[0].to_string(), f[1].parse().unwrap(), f[2].parse().unwrap())
        })
        .collect()
}

fn request_files() -> Vec<std::path::PathBuf> {
    let mut files: Vec<_> = std::fs::read_dir(data_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "tsv"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 4, "expected the four resolver-requests logs in tests/data");
    files
}

/// A symbol is `name` plus one of cuda.h's variant suffixes; per-thread ones only on request.
fn is_variant_of(name: &str, symbol: &str, per_thread: bool) -> bool {
    let Some(suffix) = symbol.strip_prefix(name) else {
        return false;
    };
    let legacy = ["", "_v2", "_v3", "_v4"];
    let threaded = ["_ptsz", "_ptds", "_v2_ptsz", "_v2_ptds", "_v3_ptsz", "_v3_ptds"];
    legacy.contains(&suffix) || (per_thread && threaded.contains(&suffix))
}

#[test]
fn every_recorded_request_replays() {
    for file in request_files() {
        let rows = request_rows(&file);
        let answers = replay_file(&file, "v2");
        assert_eq!(answers.len(), rows.len(), "{}: one answer per request", file.display());
        let mut resolved = 0;
        for (a, (name, version, flags)) in answers.iter().zip(&rows) {
            let shown = if name.is_empty() { "(empty)" } else { name };
            assert_eq!((a.name.as_str(), a.version, a.flags), (shown, *version, *flags));
            match a.result {
                0 => {
                    resolved += 1;
                    assert_eq!(a.status, "0", "{a:?}");
                    assert!(is_variant_of(&a.name, &a.symbol, a.flags & 2 != 0), "{a:?}");
                }
                500 => {
                    assert_eq!(a.symbol, "-", "NOT_FOUND must come with a NULL pointer: {a:?}");
                    assert!(a.status == "1" || a.status == "2", "{a:?}");
                }
                _ => panic!("{}: unexpected result {a:?}", file.display()),
            }
        }
        assert!(resolved >= 100, "{}: only {resolved} requests resolved", file.display());
    }
}

#[test]
fn named_requests_get_the_exact_variant() {
    let cases: &[(&str, i64, u64, i64, &str, &str)] = &[
        ("cuMemAlloc", 3020, 0, 0, "0", "cuMemAlloc_v2"),
        ("cuMemAlloc", 2000, 0, 0, "0", "cuMemAlloc"),
        ("cuMemAlloc", 1000, 0, 500, "2", "-"),
        ("cuGetProcAddress", 11030, 0, 0, "0", "cuGetProcAddress"),
        ("cuGetProcAddress", 12000, 0, 0, "0", "cuGetProcAddress_v2"),
        ("cuGetProcAddress", 11020, 0, 500, "2", "-"),
        ("cuCtxCreate", 3020, 0, 0, "0", "cuCtxCreate_v2"),
        ("cuCtxCreate", 11040, 0, 0, "0", "cuCtxCreate_v3"),
        ("cuCtxCreate", 12050, 0, 0, "0", "cuCtxCreate_v4"),
        ("cuCtxDestroy", 4000, 0, 0, "0", "cuCtxDestroy_v2"),
        ("cuStreamDestroy", 4000, 0, 0, "0", "cuStreamDestroy_v2"),
        ("cuStreamDestroy", 3020, 0, 0, "0", "cuStreamDestroy"),
        ("cuMemHostRegister", 6050, 0, 0, "0", "cuMemHostRegister_v2"),
        ("cuMemHostRegister", 4000, 0, 0, "0", "cuMemHostRegister"),
        ("cuIpcOpenMemHandle", 11000, 0, 0, "0", "cuIpcOpenMemHandle_v2"),
        ("cuIpcOpenMemHandle", 4010, 0, 0, "0", "cuIpcOpenMemHandle"),
        (
            "cuDevicePrimaryCtxRelease",
            11000,
            0,
            0,
            "0",
            "cuDevicePrimaryCtxRelease_v2",
        ),
        (
            "cuDevicePrimaryCtxRelease",
            7000,
            0,
            0,
            "0",
            "cuDevicePrimaryCtxRelease",
        ),
        (
            "cuDevicePrimaryCtxReset",
            11000,
            0,
            0,
            "0",
            "cuDevicePrimaryCtxReset_v2",
        ),
        ("cuCtxSynchronize", 13000, 0, 0, "0", "cuCtxSynchronize_v2"),
        ("cuCtxSynchronize", 12090, 0, 0, "0", "cuCtxSynchronize"),
        ("cuEventElapsedTime", 12080, 0, 0, "0", "cuEventElapsedTime_v2"),
        ("cuDeviceGetUuid", 11040, 0, 0, "0", "cuDeviceGetUuid_v2"),
        ("cuMemAllocAsync", 11020, 0, 0, "0", "cuMemAllocAsync"),
        ("cuMemAllocAsync", 11020, 2, 0, "0", "cuMemAllocAsync_ptsz"),
        ("cuMemAllocAsync", 11020, 1, 0, "0", "cuMemAllocAsync"),
        ("cuMemAllocAsync", 11010, 0, 500, "2", "-"),
        ("cuMemFreeAsync", 11020, 2, 0, "0", "cuMemFreeAsync_ptsz"),
        (
            "cuMemAllocFromPoolAsync",
            11020,
            2,
            0,
            "0",
            "cuMemAllocFromPoolAsync_ptsz",
        ),
        ("cuMemcpyHtoD", 7000, 2, 0, "0", "cuMemcpyHtoD_v2_ptds"),
        ("cuMemcpyHtoD", 3020, 2, 0, "0", "cuMemcpyHtoD_v2"),
        ("cuMemcpyHtoDAsync", 7000, 2, 0, "0", "cuMemcpyHtoDAsync_v2_ptsz"),
        ("cuMemcpy", 7000, 2, 0, "0", "cuMemcpy_ptds"),
        ("cuMemsetD8Async", 7000, 2, 0, "0", "cuMemsetD8Async_ptsz"),
        ("cuStreamSynchronize", 7000, 2, 0, "0", "cuStreamSynchronize_ptsz"),
        ("cuStreamSynchronize", 7000, 0, 0, "0", "cuStreamSynchronize"),
        ("cuEventRecord", 7000, 2, 0, "0", "cuEventRecord_ptsz"),
        ("cuStreamGetCtx", 12050, 2, 0, "0", "cuStreamGetCtx_v2_ptsz"),
        ("cuStreamBeginCapture", 10010, 2, 0, "0", "cuStreamBeginCapture_v2_ptsz"),
        ("cuStreamBeginCapture", 10000, 0, 0, "0", "cuStreamBeginCapture"),
        ("cuLaunchKernel", 7000, 2, 0, "0", "cuLaunchKernel_ptsz"),
        // No per-thread variant exists: the ordinary one, as the real driver answers.
        ("cuMemAllocHost", 3020, 2, 0, "0", "cuMemAllocHost_v2"),
        ("cuMemAlloc", 3020, 2, 0, "0", "cuMemAlloc_v2"),
        ("cuGetExportTable", 3000, 0, 0, "0", "cuGetExportTable"),
        ("cuNoSuchFunction", 12000, 0, 500, "1", "-"),
        ("cuMipmappedArrayCreate", 5000, 0, 0, "0", "cuMipmappedArrayCreate"),
        ("cuMipmappedArrayGetLevel", 5000, 0, 0, "0", "cuMipmappedArrayGetLevel"),
        ("cuMipmappedArrayDestroy", 5000, 0, 0, "0", "cuMipmappedArrayDestroy"),
        ("cuMipmappedArrayDestroy", 12090, 2, 0, "0", "cuMipmappedArrayDestroy"),
        ("cuMipmappedArrayCreate", 4020, 0, 500, "2", "-"),
        // Kernel, memcpy and memset nodes: the versions cudaTypedefs.h gives their PFN types.
        ("cuGraphAddKernelNode", 10000, 0, 0, "0", "cuGraphAddKernelNode"),
        ("cuGraphAddKernelNode", 11080, 0, 0, "0", "cuGraphAddKernelNode"),
        ("cuGraphAddKernelNode", 12000, 0, 0, "0", "cuGraphAddKernelNode_v2"),
        ("cuGraphAddKernelNode", 9020, 0, 500, "2", "-"),
        (
            "cuGraphKernelNodeGetParams",
            10000,
            0,
            0,
            "0",
            "cuGraphKernelNodeGetParams",
        ),
        (
            "cuGraphKernelNodeGetParams",
            12000,
            0,
            0,
            "0",
            "cuGraphKernelNodeGetParams_v2",
        ),
        (
            "cuGraphKernelNodeGetParams",
            13000,
            2,
            0,
            "0",
            "cuGraphKernelNodeGetParams_v2",
        ),
        (
            "cuGraphKernelNodeSetParams",
            10000,
            0,
            0,
            "0",
            "cuGraphKernelNodeSetParams",
        ),
        (
            "cuGraphKernelNodeSetParams",
            12000,
            0,
            0,
            "0",
            "cuGraphKernelNodeSetParams_v2",
        ),
        ("cuGraphAddMemcpyNode", 10000, 0, 0, "0", "cuGraphAddMemcpyNode"),
        (
            "cuGraphMemcpyNodeGetParams",
            10000,
            0,
            0,
            "0",
            "cuGraphMemcpyNodeGetParams",
        ),
        (
            "cuGraphMemcpyNodeSetParams",
            12000,
            0,
            0,
            "0",
            "cuGraphMemcpyNodeSetParams",
        ),
        (
            "cuGraphMemsetNodeGetParams",
            10000,
            0,
            0,
            "0",
            "cuGraphMemsetNodeGetParams",
        ),
        (
            "cuGraphMemsetNodeSetParams",
            10000,
            0,
            0,
            "0",
            "cuGraphMemsetNodeSetParams",
        ),
        ("cuGraphMemsetNodeGetParams", 9020, 0, 500, "2", "-"),
        (
            "cuGraphExecKernelNodeSetParams",
            10010,
            0,
            0,
            "0",
            "cuGraphExecKernelNodeSetParams",
        ),
        (
            "cuGraphExecKernelNodeSetParams",
            12000,
            0,
            0,
            "0",
            "cuGraphExecKernelNodeSetParams_v2",
        ),
        ("cuGraphExecKernelNodeSetParams", 10000, 0, 500, "2", "-"),
        (
            "cuGraphExecMemcpyNodeSetParams",
            10020,
            0,
            0,
            "0",
            "cuGraphExecMemcpyNodeSetParams",
        ),
        ("cuGraphExecMemcpyNodeSetParams", 10010, 0, 500, "2", "-"),
        (
            "cuGraphExecMemsetNodeSetParams",
            10020,
            0,
            0,
            "0",
            "cuGraphExecMemsetNodeSetParams",
        ),
        (
            "cuGraphExecMemsetNodeSetParams",
            12090,
            2,
            0,
            "0",
            "cuGraphExecMemsetNodeSetParams",
        ),
        ("cuGraphNodeSetEnabled", 11060, 0, 0, "0", "cuGraphNodeSetEnabled"),
        ("cuGraphNodeGetEnabled", 11060, 0, 0, "0", "cuGraphNodeGetEnabled"),
        ("cuGraphNodeSetEnabled", 11050, 0, 500, "2", "-"),
        (
            "cuGraphAddEventRecordNode",
            11010,
            0,
            0,
            "0",
            "cuGraphAddEventRecordNode",
        ),
        ("cuGraphAddEventRecordNode", 11000, 0, 500, "2", "-"),
        ("cuGraphAddEventWaitNode", 11010, 0, 0, "0", "cuGraphAddEventWaitNode"),
        (
            "cuGraphEventRecordNodeGetEvent",
            11010,
            0,
            0,
            "0",
            "cuGraphEventRecordNodeGetEvent",
        ),
        (
            "cuGraphEventRecordNodeSetEvent",
            11010,
            0,
            0,
            "0",
            "cuGraphEventRecordNodeSetEvent",
        ),
        (
            "cuGraphEventWaitNodeGetEvent",
            11010,
            0,
            0,
            "0",
            "cuGraphEventWaitNodeGetEvent",
        ),
        (
            "cuGraphEventWaitNodeSetEvent",
            12090,
            2,
            0,
            "0",
            "cuGraphEventWaitNodeSetEvent",
        ),
        (
            "cuGraphExecEventRecordNodeSetEvent",
            11010,
            0,
            0,
            "0",
            "cuGraphExecEventRecordNodeSetEvent",
        ),
        (
            "cuGraphExecEventWaitNodeSetEvent",
            11010,
            0,
            0,
            "0",
            "cuGraphExecEventWaitNodeSetEvent",
        ),
        (
            "cuGraphExecChildGraphNodeSetParams",
            11010,
            0,
            0,
            "0",
            "cuGraphExecChildGraphNodeSetParams",
        ),
        ("cuGraphExecUpdate", 10020, 0, 0, "0", "cuGraphExecUpdate"),
        ("cuGraphExecUpdate", 11080, 0, 0, "0", "cuGraphExecUpdate"),
        ("cuGraphExecUpdate", 12000, 0, 0, "0", "cuGraphExecUpdate_v2"),
        ("cuGraphExecUpdate", 10010, 0, 500, "2", "-"),
        ("cuGraphExecNodeSetParams", 12020, 0, 0, "0", "cuGraphExecNodeSetParams"),
        ("cuGraphExecNodeSetParams", 12010, 0, 500, "2", "-"),
        ("cuGraphNodeSetParams", 12020, 0, 0, "0", "cuGraphNodeSetParams"),
        ("cuGraphAddMemsetNode", 10000, 0, 0, "0", "cuGraphAddMemsetNode"),
        ("cuGraphNodeFindInClone", 10000, 0, 0, "0", "cuGraphNodeFindInClone"),
        ("(empty)", 0, 0, 500, "1", "-"),
        ("cuMemAlloc", 99990, 0, 1, "99", "-"),
        ("cuMemAlloc", 3020, 4, 1, "99", "-"),
    ];
    let requests: String = cases.iter().map(|(n, v, f, ..)| format!("{n}\t{v}\t{f}\n")).collect();
    let answers = replay_text(&requests, "v2", &[]);
    assert_eq!(answers.len(), cases.len());
    for (a, (name, version, flags, result, status, symbol)) in answers.iter().zip(cases) {
        let got = (a.result, a.status.as_str(), a.symbol.as_str());
        assert_eq!(got, (*result, *status, *symbol), "{name} {version} {flags}");
    }
}

#[test]
fn the_four_argument_resolver_answers_like_the_five_argument_one() {
    let file = data_dir().join("libcudart-12.9.79.tsv");
    let v2 = replay_file(&file, "v2");
    let v1 = replay_file(&file, "v1");
    assert_eq!(v1.len(), v2.len());
    for (a, b) in v1.iter().zip(&v2) {
        assert_eq!(
            (a.result, a.symbol.as_str()),
            (b.result, b.symbol.as_str()),
            "{a:?} / {b:?}"
        );
        assert_eq!(a.status, "-");
    }
}

#[test]
fn the_ptsz_resolver_defaults_to_the_per_thread_stream() {
    let cases = [
        ("cuMemAllocAsync", 11020, 0, "cuMemAllocAsync_ptsz"),
        ("cuMemAllocAsync", 11020, 1, "cuMemAllocAsync"),
        ("cuMemAllocAsync", 11020, 2, "cuMemAllocAsync_ptsz"),
        ("cuMemcpyHtoD", 7000, 0, "cuMemcpyHtoD_v2_ptds"),
        ("cuMemcpyHtoD", 7000, 1, "cuMemcpyHtoD_v2"),
        ("cuMemAlloc", 3020, 0, "cuMemAlloc_v2"),
        ("cuGetProcAddress", 12000, 0, "cuGetProcAddress_v2_ptsz"),
        ("cuGetProcAddress", 11030, 0, "cuGetProcAddress"),
    ];
    let requests: String = cases.iter().map(|(n, v, f, _)| format!("{n}\t{v}\t{f}\n")).collect();
    let answers = replay_text(&requests, "ptsz", &[]);
    for (a, (name, version, flags, symbol)) in answers.iter().zip(&cases) {
        assert_eq!((a.result, a.symbol.as_str()), (0, *symbol), "{name} {version} {flags}");
    }
}

#[test]
fn every_driver_call_real_clients_make_resolves() {
    let listed: Vec<String> = std::fs::read_to_string(data_dir().join("driver-calls-used-by-real-clients.txt"))
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(str::to_string)
        .collect();
    assert!(listed.len() > 40);
    let mut seen = HashSet::new();
    for file in request_files() {
        for a in replay_file(&file, "v2") {
            if listed.contains(&a.name) {
                seen.insert(a.name.clone());
                assert_eq!(a.result, 0, "{}: {a:?}", file.display());
            }
        }
    }
    for name in &listed {
        assert!(
            seen.contains(name),
            "{name} is called by real clients but never requested"
        );
    }
}

#[test]
fn every_symbol_cudarc_looks_up_is_exported() {
    let out = output_of(sim_command(client("sim_dlsym")).arg(data_dir().join("cudarc-0.19.10-dlsym.txt")));
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(text.lines().count(), 20, "{text}");
    for line in text.lines() {
        assert!(line.ends_with("\tfound"), "{line}");
    }
}

#[test]
fn every_allocation_family_resolves_to_an_exported_symbol() {
    let families = [
        ("cuMemAlloc", 3020),
        ("cuMemAllocPitch", 3020),
        ("cuMemAllocManaged", 6000),
        ("cuMemFree", 3020),
        ("cuMemAllocHost", 3020),
        ("cuMemHostAlloc", 2020),
        ("cuMemFreeHost", 2000),
        ("cuMemHostRegister", 6050),
        ("cuMemHostUnregister", 4000),
        ("cuMemAllocAsync", 11020),
        ("cuMemAllocFromPoolAsync", 11020),
        ("cuMemFreeAsync", 11020),
        ("cuMemPoolCreate", 11020),
        ("cuMemPoolDestroy", 11020),
        ("cuMemPoolTrimTo", 11020),
        ("cuMemAddressReserve", 10020),
        ("cuMemAddressFree", 10020),
        ("cuMemCreate", 10020),
        ("cuMemRelease", 10020),
        ("cuMemMap", 10020),
        ("cuMemUnmap", 10020),
        ("cuMemRetainAllocationHandle", 11000),
        ("cuArrayCreate", 3020),
        ("cuArray3DCreate", 3020),
        ("cuArrayDestroy", 2000),
        ("cuMipmappedArrayCreate", 5000),
        ("cuMipmappedArrayDestroy", 5000),
        ("cuIpcOpenMemHandle", 11000),
        ("cuIpcCloseMemHandle", 4010),
        ("cuMemPoolImportPointer", 11020),
        ("cuCtxDestroy", 4000),
        ("cuDevicePrimaryCtxRelease", 11000),
        ("cuDevicePrimaryCtxReset", 11000),
    ];
    let requests: String = families
        .iter()
        .flat_map(|(n, v)| [format!("{n}\t{v}\t0\n"), format!("{n}\t{v}\t2\n")])
        .collect();
    // sim_resolver also checks that each pointer is dlsym's answer for its symbol name.
    for a in replay_text(&requests, "v2", &[]) {
        assert_eq!(a.result, 0, "{a:?}");
        assert!(is_variant_of(&a.name, &a.symbol, a.flags & 2 != 0), "{a:?}");
    }
}

#[test]
fn versions_above_the_driver_are_invalid() {
    let answers = replay_text(
        "cuCtxSynchronize\t13000\t0\ncuCtxSynchronize\t12090\t0\n",
        "v2",
        &[("SIMCUDA_DRIVER_VERSION", "12090")],
    );
    assert_eq!((answers[0].result, answers[0].symbol.as_str()), (1, "-"));
    assert_eq!((answers[1].result, answers[1].symbol.as_str()), (0, "cuCtxSynchronize"));
}

/// A file of the simulator, by its path under `simcuda/`.
fn simcuda_source(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../simcuda").join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The rows of the simulator's resolver table: symbol -> (base name, per-thread row), one per
/// base name it answers for (`cuGraphInstantiateWithFlags` also answers `cuGraphInstantiate`).
fn resolver_rows() -> std::collections::HashMap<String, Vec<(String, bool)>> {
    let mut rows: std::collections::HashMap<String, Vec<(String, bool)>> = Default::default();
    for line in simcuda_source("driver/resolver.c").lines() {
        let line = line.trim();
        let (per_thread, rest) = match (line.strip_prefix("PTROW(\""), line.strip_prefix("ROW(\"")) {
            (Some(rest), _) => (true, rest),
            (None, Some(rest)) => (false, rest),
            (None, None) => continue,
        };
        let (base, rest) = rest.split_once('"').unwrap();
        let symbol = rest.trim_end_matches("),").rsplit(", ").next().unwrap();
        rows.entry(symbol.to_string())
            .or_default()
            .push((base.to_string(), per_thread));
    }
    rows
}

/// The functions `simcuda.h` declares.
fn simulated_functions() -> HashSet<String> {
    simcuda_source("include/simcuda.h")
        .split("SIMCUDA_API ")
        .skip(1)
        .filter_map(|decl| decl.split('(').next()?.split_whitespace().last().map(str::to_string))
        .collect()
}

/// The simulator agrees with the API list (`gpuleak_format::api`): every listed driver entry
/// point it simulates has a resolver row, per-thread exactly when the list says so and under
/// its base's name, and it simulates the per-thread twins of every base it simulates.
#[test]
fn simulator_rows_name_every_per_thread_twin_the_api_list_declares() {
    let rows = resolver_rows();
    let simulated = simulated_functions();
    assert!(
        rows.len() > 300 && simulated.len() > 400,
        "{} rows, {} functions",
        rows.len(),
        simulated.len()
    );
    let mut twins = 0;
    for (api, name) in Api::ALL {
        let base = api.base().name().unwrap();
        if api.per_thread() && simulated.contains(base) {
            assert!(
                simulated.contains(*name),
                "simcuda.h declares {base} but not its twin {name}"
            );
            twins += 1;
        }
        if api.library() != Some(Library::Driver) || !simulated.contains(*name) {
            continue;
        }
        let named = rows.get(*name).unwrap_or_else(|| panic!("no resolver row for {name}"));
        for (row_base, per_thread) in named {
            assert_eq!(
                *per_thread,
                api.per_thread(),
                "{name}: PTROW exactly for a per-thread twin"
            );
            if api.per_thread() {
                assert!(
                    rows[base].iter().any(|(b, _)| b == row_base),
                    "{name} resolves under {row_base}, not under its base {base}'s name"
                );
            }
        }
    }
    assert!(twins > 80, "only {twins} per-thread twins simulated");
}
