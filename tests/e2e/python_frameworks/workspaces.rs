//! cuBLAS's workspaces are not tensors. PyTorch keeps one workspace per cuBLAS handle and
//! stream from its caching allocator for the life of the process, and hands it to cuBLAS
//! (`cublasSetWorkspace_v2`) or to each cuBLASLt matmul (`cublasLtMatmul`). The stand-in torch
//! does the same through `libtorch_blas.so`, which calls a stand-in cuBLAS through its PLT
//! (`tests/libraries/`), where the shim interposes both functions. Each workspace kept to exit
//! is counted as a workspace and is no `tensor-leak`; its twin, a tensor of the same size kept
//! without being handed to cuBLAS, is one. A failed call comes back with its own status and
//! writes no record.

use std::path::Path;
use std::process::Output;

use gpuleak_e2e::{gpuleak_bin, output_of, sim_command, stand_in_library, TempDir};

use super::{at, findings, report, run_mode, torch};
use crate::python_pkg::{text, traces_in};

const CUBLAS_WORKSPACE: u64 = 4 << 20;
const CUBLAS_LT_WORKSPACE: u64 = 1 << 20;

/// `fw_torch.py MODE` with the stand-in torch's native library, and `env`.
fn run_blas(dir: &Path, mode: &str, env: &[(&str, &str)]) -> Output {
    let lib = stand_in_library("libtorch_blas.so");
    let lib = lib.to_str().expect("a UTF-8 path");
    let mut all = vec![("FAKE_TORCH_BLAS", lib)];
    all.extend_from_slice(env);
    run_mode(dir, mode, &all)
}

/// The `LibWorkspace` records of the one trace in `dir` (from `gpuleak dump`).
fn workspace_records(dir: &Path) -> Vec<serde_json::Value> {
    let traces = traces_in(dir);
    assert_eq!(traces.len(), 1, "{traces:?}");
    let out = output_of(sim_command(gpuleak_bin()).arg("dump").arg(&traces[0]));
    text(&out)
        .0
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter(|r| r["type"] == "LibWorkspace")
        .collect()
}

/// The workspace of `mode` is counted apart, is no tensor, and `live_bytes` still equals the
/// framework's own `memory_allocated()`; three matmuls with the same workspace write one
/// record.
fn a_kept_workspace_is_no_leak(mode: &str, library: u64, bytes: u64) {
    let dir = TempDir::new();
    run_blas(dir.path(), mode, &[]);
    let records = workspace_records(dir.path());
    assert_eq!(records.len(), 1, "{records:?}");
    assert_eq!(records[0]["library"], library, "{records:?}");
    assert_eq!(records[0]["size"], bytes, "{records:?}");
    let doc = report(dir.path());
    assert_eq!(findings(&doc, "tensor-leak"), Vec::<&serde_json::Value>::new());
    assert_eq!(doc["summary"]["findings"], 0, "{}", doc["findings"]);
    let d = &torch(&doc)["devices"][0];
    assert_eq!(d["workspaces"], 1, "{d}");
    assert_eq!(d["workspace_bytes"], bytes, "{d}");
    assert_eq!(d["live_tensors"], 0, "{d}");
    assert_eq!(d["live_bytes"], bytes, "{d}");
    assert_eq!(d["live_bytes"], d["counters"]["allocated"], "{d}");
    assert_eq!(d["sites"], serde_json::json!([]), "{d}");
    // The text splits what is allocated into tensors and workspaces.
    let traces = traces_in(dir.path());
    let out = output_of(sim_command(gpuleak_bin()).arg("report").arg(&traces[0]));
    // The report wraps its lines: compared with its words joined by single spaces.
    let words = text(&out).0.split_whitespace().collect::<Vec<_>>().join(" ");
    let mib = bytes >> 20;
    assert!(
        words.contains(&format!(
            "on device 0: {mib}.0 MiB allocated: 0 B in 0 live tensors, {mib}.0 MiB in 1 cuBLAS workspace;"
        )),
        "{words}"
    );
}

/// A tensor of the workspace's size kept without being handed to cuBLAS is a leak.
fn a_kept_tensor_of_its_size_is_a_leak(mode: &str, bytes: u64) {
    let dir = TempDir::new();
    run_blas(dir.path(), mode, &[]);
    assert_eq!(workspace_records(dir.path()), Vec::<serde_json::Value>::new());
    let doc = report(dir.path());
    let leaks = findings(&doc, "tensor-leak");
    assert_eq!(leaks.len(), 1, "{leaks:?}");
    assert_eq!(leaks[0]["bytes"], bytes);
    let line = at("KEPT.append(torch.empty(size, device=\"cuda\"))  # kept, never handed to cuBLAS");
    assert!(leaks[0]["message"].as_str().unwrap().contains(&line), "{}", leaks[0]);
    let d = &torch(&doc)["devices"][0];
    assert_eq!(
        (d["workspaces"].as_u64(), d["live_tensors"].as_u64()),
        (Some(0), Some(1)),
        "{d}"
    );
}

#[test]
fn a_workspace_handed_to_cublas_set_workspace_and_kept_to_exit_is_no_tensor_leak() {
    a_kept_workspace_is_no_leak("workspace", 1, CUBLAS_WORKSPACE);
}

#[test]
fn a_tensor_of_a_cublas_workspace_s_size_never_handed_to_cublas_is_a_tensor_leak() {
    a_kept_tensor_of_its_size_is_a_leak("kept", CUBLAS_WORKSPACE);
}

#[test]
fn a_workspace_given_to_cublaslt_matmul_and_kept_to_exit_is_no_tensor_leak() {
    a_kept_workspace_is_no_leak("workspace-lt", 2, CUBLAS_LT_WORKSPACE);
}

#[test]
fn a_tensor_of_a_cublaslt_workspace_s_size_never_handed_to_cublaslt_is_a_tensor_leak() {
    a_kept_tensor_of_its_size_is_a_leak("kept-lt", CUBLAS_LT_WORKSPACE);
}

/// The status the library returns reaches the caller unchanged, and a failed call writes no
/// record: the blocks the framework kept are then its tensors, leaks at the matmul's line.
#[test]
fn a_failed_cublas_call_returns_its_own_status_and_records_no_workspace() {
    let dir = TempDir::new();
    let out = run_blas(dir.path(), "workspace-failed", &[("FAKE_CUBLAS_STATUS", "13")]);
    let (stdout, _) = text(&out);
    for api in ["cublas", "cublaslt"] {
        assert!(
            stdout.contains(&format!("raised: CUDA error: CUBLAS_STATUS 13 when calling {api}\n")),
            "{stdout}"
        );
    }
    assert_eq!(workspace_records(dir.path()), Vec::<serde_json::Value>::new());
    let doc = report(dir.path());
    let leaks = findings(&doc, "tensor-leak");
    let line = at("torch.matmul(x, api=api)  # fails");
    assert_eq!(leaks.len(), 1, "{leaks:?}");
    assert!(leaks[0]["message"].as_str().unwrap().contains(&line), "{}", leaks[0]);
    assert_eq!(leaks[0]["bytes"], CUBLAS_WORKSPACE + CUBLAS_LT_WORKSPACE);
    assert_eq!(torch(&doc)["devices"][0]["workspaces"], 0);
}

/// `gpuleak.check()` around the first matmul, which allocates the workspace that PyTorch
/// keeps: the check passes (its twin, a tensor kept past a check, fails in
/// `check_judges_tensors_not_the_cache_that_grew_inside_it`).
#[test]
fn check_leaves_out_a_workspace_allocated_inside_it() {
    let dir = TempDir::new();
    let out = run_blas(dir.path(), "check-workspace", &[]);
    let (stdout, stderr) = text(&out);
    assert!(stdout.contains("check passed\n"), "{stdout}\n{stderr}");
}

/// The pytest plugin: the tests whose first matmul allocates the workspace pass; their twin,
/// which keeps a tensor, fails at its line.
#[test]
fn the_pytest_plugin_passes_the_tests_whose_matmul_allocates_a_workspace() {
    let lib = stand_in_library("libtorch_blas.so");
    super::plugin_judges_with(
        &super::fake_torch(),
        "fw_torch_blas_tests.py",
        "test_keeps_a_tensor",
        [
            "test_first_matmul_allocates_its_workspace",
            "test_first_cublaslt_matmul_allocates_its_workspace",
        ],
        &[("FAKE_TORCH_BLAS", lib.to_str().expect("a UTF-8 path"))],
    );
}
