//! cuBLAS's workspace functions, exported by the shim and forwarded to the library's own
//! definitions (here reached through `RTLD_NEXT`: the client links the stand-in cuBLAS of
//! `tests/libraries/`). Each status comes back unchanged; a thread that hands the same
//! (handle, workspace, size) again writes no new record; a failed call, or a matmul without a
//! workspace, writes none.

use gpuleak_e2e::{client, shim_command, TempDir};

use crate::trace::{assert_ok, dump, of_type};

/// Runs `shim_cublas` with `status` chosen for the stand-in; its output and its workspace
/// records as (library, ptr, size). The client makes no CUDA call: tracing starts with the
/// first record, so a run that records nothing leaves no trace.
fn run(status: &str) -> (String, Vec<(u64, u64, u64)>) {
    let dir = TempDir::new();
    let trace = dir.path().join("t.trace");
    let out = shim_command(client("shim_cublas"), &trace)
        .env("FAKE_CUBLAS_STATUS", status)
        .output()
        .unwrap();
    assert_ok(&out);
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if !trace.exists() {
        return (stdout, Vec::new());
    }
    let records = dump(&trace);
    let workspaces = of_type(&records, "LibWorkspace")
        .iter()
        .map(|r| {
            let n = |f: &str| r[f].as_u64().unwrap_or_else(|| panic!("{f} in {r}"));
            (n("library"), n("ptr"), n("size"))
        })
        .collect();
    (stdout, workspaces)
}

#[test]
fn a_workspace_is_recorded_once_per_change_and_each_status_comes_back() {
    let (stdout, workspaces) = run("0");
    assert_eq!(stdout, "set 0\nset 0\nset 0\nset 0\nlt 0\nlt 0\n");
    assert_eq!(
        workspaces,
        [
            (1, 0x7f00_0000_0000, 32 << 20),
            (1, 0x7f00_0000_0000, 16 << 20),
            (2, 0x7f00_0200_0000, 1 << 20),
        ]
    );
}

#[test]
fn a_failed_call_returns_the_library_s_status_and_records_nothing() {
    let (stdout, workspaces) = run("13");
    assert_eq!(stdout, "set 13\nset 13\nset 13\nset 13\nlt 13\nlt 13\n");
    assert_eq!(workspaces, []);
}
