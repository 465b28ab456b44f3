//! The frameworks' allocators read from inside. PyTorch's caching allocator:
//! `tests/python/fw_torch.py` on the stand-in
//! torch of `tests/python/fake_torch` (its segments are real cuMemAlloc calls through
//! cuda-bindings on the simulated driver, under the shim), run by `gpuleak run`, whose
//! sitecustomize hands torch to the wheel's adapter when the program imports it. Each finding
//! (`tensor-leak`, `tensor-growth`, `framework-oom`, `gpuleak.check()` on tensors) has its twin
//! that must not find it. CuPy's memory pool: `tests/python/fw_cupy.py` on the stand-in cupy of
//! `tests/python/fake_cupy` (its chunks real cuMemAlloc calls too), read through CuPy's
//! `MemoryHook`; and the real CuPy takes the hook at import. JAX's live buffers:
//! `tests/python/fw_jax.py` on the stand-in jax of `tests/python/fake_jax` (its XLA regions real
//! cuMemAlloc calls from its `jaxlib`), read through `device_memory_profile()` and
//! `live_arrays()` and placed in those regions by the analyzer; and the adapter's readings of
//! the real JAX on its CPU backend (`tests/python/pkg_jax.py`).

mod workspaces;

use std::path::{Path, PathBuf};
use std::process::Output;

use gpuleak_e2e::{gpuleak_bin, output_of, sim_command, TempDir};

use crate::python_pkg::{line_of, pkgenv_python, python_clean, script, text, traces_in};

fn fake_torch() -> PathBuf {
    script("fake_torch")
}

/// `gpuleak run -- python fw_torch.py MODE` with the stand-in torch on `PYTHONPATH`.
fn run_mode(dir: &Path, mode: &str, env: &[(&str, &str)]) -> Output {
    run_script(dir, "fw_torch.py", Some(&fake_torch()), mode, env)
}

/// `gpuleak run -- python SCRIPT MODE` in `dir`, with `stand_in` (a stand-in framework) on
/// `PYTHONPATH` and `env` set; the script must print `done` and the package must not complain.
fn run_script(dir: &Path, name: &str, stand_in: Option<&Path>, mode: &str, env: &[(&str, &str)]) -> Output {
    let out = run_script_to_its_end(dir, name, stand_in, mode, env);
    let (stdout, stderr) = text(&out);
    assert!(stdout.contains("done\n"), "{mode}: {stdout}\n{stderr}");
    assert!(!stderr.contains("gpuleak: cannot"), "{mode}: {stderr}");
    out
}

/// [`run_script`] for a script that may end otherwise (an error it does not catch).
fn run_script_to_its_end(dir: &Path, name: &str, stand_in: Option<&Path>, mode: &str, env: &[(&str, &str)]) -> Output {
    let python = pkgenv_python();
    let mut cmd = python_clean(sim_command(gpuleak_bin()));
    cmd.current_dir(dir)
        .arg("run")
        .arg("--")
        .arg(&python)
        .arg(script(name))
        .arg(mode);
    if let Some(path) = stand_in {
        cmd.env("PYTHONPATH", path);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    output_of(&mut cmd)
}

/// `pytest --gpuleak TESTS` under `gpuleak run` with `stand_in` on `PYTHONPATH`: the test that
/// keeps 8 KiB (`keeps`) fails at its `# kept past the test` line, the two in `passes` pass.
fn plugin_judges(stand_in: &Path, tests: &str, keeps: &str, passes: [&str; 2]) {
    plugin_judges_with(stand_in, tests, keeps, passes, &[]);
}

/// [`plugin_judges`] with `env` set.
fn plugin_judges_with(stand_in: &Path, tests: &str, keeps: &str, passes: [&str; 2], env: &[(&str, &str)]) {
    let dir = TempDir::new();
    let python = pkgenv_python();
    let mut cmd = python_clean(sim_command(gpuleak_bin()));
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.current_dir(dir.path())
        .env("PYTHONPATH", stand_in)
        .args(["run", "--"])
        .arg(&python)
        .args(["-m", "pytest", "--gpuleak", "-p", "no:cacheprovider", "-rA", "-q"])
        .arg(script(tests));
    let out = output_of(&mut cmd);
    let (stdout, stderr) = text(&out);
    let line = line_of(tests, "# kept past the test");
    assert!(
        stdout.contains("FAILED ") && stdout.contains(&format!("{tests}::{keeps}")),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains("8192 bytes (8.0 KiB) still live (tensor):"), "{stdout}");
    assert!(stdout.contains(&format!("{tests}:{line}")), "{stdout}");
    for passed in passes {
        assert!(
            stdout.contains("PASSED ") && stdout.contains(&format!("{tests}::{passed}")),
            "{stdout}"
        );
        assert!(!stdout.contains(&format!("FAILED {passed}")), "{stdout}");
    }
    assert!(stdout.contains("1 failed, 2 passed"), "{stdout}\n{stderr}");
}

/// The JSON report of the one trace in `dir`.
fn report(dir: &Path) -> serde_json::Value {
    let traces = traces_in(dir);
    assert_eq!(traces.len(), 1, "{traces:?}");
    let out = output_of(
        sim_command(gpuleak_bin())
            .args(["report", "--format", "json"])
            .arg(&traces[0]),
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out).0))
}

fn findings<'a>(doc: &'a serde_json::Value, check: &str) -> Vec<&'a serde_json::Value> {
    doc["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == check)
        .collect()
}

/// `path:line` of the line of fw_torch.py that ends with `ending`.
fn at(ending: &str) -> String {
    format!("{}:{}", script("fw_torch.py").display(), line_of("fw_torch.py", ending))
}

/// The first (only) framework view of the process.
fn torch(doc: &serde_json::Value) -> &serde_json::Value {
    let frameworks = doc["process"]["frameworks"].as_array().expect("a frameworks list");
    assert_eq!(frameworks.len(), 1, "{frameworks:?}");
    assert_eq!(frameworks[0]["framework"], "torch");
    &frameworks[0]
}

#[test]
fn a_tensor_kept_in_a_global_is_a_leak_at_its_line_and_the_cache_is_not() {
    let dir = TempDir::new();
    run_mode(dir.path(), "leak", &[]);
    let doc = report(dir.path());
    let leaks = findings(&doc, "tensor-leak");
    assert_eq!(leaks.len(), 1, "{leaks:?}");
    let line = at("KEPT.append(torch.empty(100 << 10, device=\"cuda\"))  # the leak");
    assert!(leaks[0]["message"].as_str().unwrap().contains(&line), "{}", leaks[0]);
    assert_eq!(leaks[0]["tensors"], 4);
    assert_eq!(leaks[0]["bytes"], 4 * (100 << 10));
    assert_eq!(leaks[0]["severity"], "error");
    // The driver's 2 MiB segment is the allocator's, not a leak of the program.
    assert_eq!(doc["summary"]["leaked_bytes"], 0);
    assert_eq!(doc["held_by_pool"][0]["bytes"], 2 << 20);
    assert_eq!(doc["held_by_pool"][0]["pool"], "pytorch");
    // The join: the segment splits into the live tensors and cached free memory, and the
    // totals are the framework's own counters.
    let d = &torch(&doc)["devices"][0];
    assert_eq!(torch(&doc)["reason"], "exit");
    assert_eq!(d["reserved_bytes"], 2 << 20);
    assert_eq!(d["live_bytes"], 4 * (100 << 10));
    assert_eq!(d["cached_free_bytes"], (2 << 20) - 4 * (100 << 10));
    assert_eq!(d["live_bytes"], d["counters"]["allocated"]);
    assert_eq!(d["reserved_bytes"], d["counters"]["reserved"]);
    assert_eq!(d["unmatched_segments"], 0);
    assert_eq!(d["sites"][0]["line"], line);
    assert_eq!(torch(&doc)["outside"], serde_json::json!([]));
}

/// The functions of the stack of the largest tensor site.
fn site_functions(doc: &serde_json::Value) -> Vec<String> {
    torch(doc)["devices"][0]["sites"][0]["stack"]
        .as_array()
        .expect("a stack")
        .iter()
        .map(|f| f["function"].as_str().unwrap_or("").to_string())
        .collect()
}

/// `GPULEAK_TORCH_STACKS=all` asks PyTorch for C++ frames too: they are kept, and the line is
/// still the user's Python line; by default there are none.
#[test]
fn torch_stacks_all_keeps_cpp_frames_and_the_user_s_python_line() {
    let line = at("KEPT.append(torch.empty(100 << 10, device=\"cuda\"))  # the leak");
    for (stacks, cpp) in [("all", true), ("python", false)] {
        let dir = TempDir::new();
        run_mode(dir.path(), "leak", &[("GPULEAK_TORCH_STACKS", stacks)]);
        let doc = report(dir.path());
        let leaks = findings(&doc, "tensor-leak");
        assert_eq!(leaks.len(), 1, "{stacks}: {leaks:?}");
        assert!(
            leaks[0]["message"].as_str().unwrap().contains(&line),
            "{stacks}: {}",
            leaks[0]
        );
        assert_eq!(leaks[0]["bytes"], 4 * (100 << 10));
        assert_eq!(torch(&doc)["devices"][0]["sites"][0]["line"], line);
        let functions = site_functions(&doc);
        assert_eq!(
            functions.iter().any(|f| f == "at::native::empty_cuda"),
            cpp,
            "{stacks}: {functions:?}"
        );
    }
}

/// `GPULEAK_TORCH_STACKS=none` turns no recording on: the tensors are still counted and joined
/// (the same bytes, equal to PyTorch's counters), without their line.
#[test]
fn torch_stacks_none_counts_the_tensors_without_their_line() {
    let dir = TempDir::new();
    run_mode(dir.path(), "leak", &[("GPULEAK_TORCH_STACKS", "none")]);
    let doc = report(dir.path());
    let leaks = findings(&doc, "tensor-leak");
    assert_eq!(leaks.len(), 1, "{leaks:?}");
    assert!(
        leaks[0]["message"].as_str().unwrap().contains("an unknown line"),
        "{}",
        leaks[0]
    );
    assert_eq!(leaks[0]["bytes"], 4 * (100 << 10));
    let d = &torch(&doc)["devices"][0];
    assert_eq!(d["live_bytes"], d["counters"]["allocated"]);
    assert_eq!(d["reserved_bytes"], d["counters"]["reserved"]);
    assert_eq!(site_functions(&doc), Vec::<String>::new());
}

/// A bad value says so in one line and records Python frames.
#[test]
fn a_bad_torch_stacks_setting_says_so_once_and_records_python_frames() {
    let dir = TempDir::new();
    let out = run_mode(dir.path(), "leak", &[("GPULEAK_TORCH_STACKS", "cpp")]);
    let (_, stderr) = text(&out);
    let said: Vec<&str> = stderr.lines().filter(|l| l.contains("GPULEAK_TORCH_STACKS")).collect();
    assert_eq!(
        said,
        ["gpuleak: GPULEAK_TORCH_STACKS='cpp' is not one of python, all, none; using python"],
        "{stderr}"
    );
    let doc = report(dir.path());
    let line = at("KEPT.append(torch.empty(100 << 10, device=\"cuda\"))  # the leak");
    assert_eq!(torch(&doc)["devices"][0]["sites"][0]["line"], line);
}

#[test]
fn tensors_all_freed_leave_a_cache_that_is_no_leak() {
    let dir = TempDir::new();
    run_mode(dir.path(), "cache", &[]);
    let doc = report(dir.path());
    assert_eq!(findings(&doc, "tensor-leak"), Vec::<&serde_json::Value>::new());
    assert_eq!(doc["summary"]["leaked_bytes"], 0);
    assert_eq!(doc["summary"]["findings"], 0);
    let d = &torch(&doc)["devices"][0];
    assert_eq!(d["live_tensors"], 0);
    assert_eq!(d["cached_free_bytes"], 2 << 20);
    assert_eq!(d["largest_free_block"], 2 << 20);
    // And the text says so in one line.
    let traces = traces_in(dir.path());
    let out = output_of(sim_command(gpuleak_bin()).arg("report").arg(&traces[0]));
    let (stdout, _) = text(&out);
    assert!(
        stdout.contains("PyTorch holds 2.0 MiB on device 0: 0 B in 0 live tensors, 2.0 MiB cached free"),
        "{stdout}"
    );
}

#[test]
fn memory_outside_the_framework_is_named_by_owner() {
    let dir = TempDir::new();
    run_mode(dir.path(), "outside", &[]);
    let doc = report(dir.path());
    let outside = &torch(&doc)["outside"];
    assert_eq!(outside[0]["owner"], "the program", "{outside}");
    assert_eq!(outside[0]["bytes"], 3 << 20);
    // The program's own buffer is a leak of the driver's view; the framework's cache is not.
    assert_eq!(doc["summary"]["leaked_bytes"], 3 << 20);
}

#[test]
fn tensors_that_grow_across_snapshots_are_tensor_growth_and_a_flat_cache_is_not() {
    let dir = TempDir::new();
    run_mode(dir.path(), "growth", &[]);
    let doc = report(dir.path());
    let grown = findings(&doc, "tensor-growth");
    assert_eq!(grown.len(), 1, "{grown:?}");
    let line = at("KEPT.append(torch.empty(64 << 10, device=\"cuda\"))  # grows every step");
    assert!(grown[0]["message"].as_str().unwrap().contains(&line), "{}", grown[0]);
    assert_eq!(grown[0]["first_bytes"], 64 << 10);
    assert_eq!(grown[0]["last_bytes"], 256 << 10);
    // Cleared before exit: no tensor is left.
    assert_eq!(findings(&doc, "tensor-leak"), Vec::<&serde_json::Value>::new());

    let flat = TempDir::new();
    run_mode(flat.path(), "flat", &[]);
    let doc = report(flat.path());
    assert_eq!(doc["summary"]["findings"], 0, "{}", doc["findings"]);
}

#[test]
fn out_of_memory_names_the_line_holding_the_tensors_and_a_run_that_fits_has_no_finding() {
    let dir = TempDir::new();
    let limit = (8u64 << 20).to_string();
    let out = run_mode(dir.path(), "oom", &[("FAKE_TORCH_MEMORY_LIMIT", &limit)]);
    assert!(text(&out).0.contains("oom caught"));
    let doc = report(dir.path());
    let oom = findings(&doc, "framework-oom");
    assert_eq!(oom.len(), 1, "{oom:?}");
    let line = at("KEPT.append(torch.empty(1 << 20, device=\"cuda\"))  # fills the device");
    let message = oom[0]["message"].as_str().unwrap();
    assert!(message.contains(&line), "{message}");
    assert!(
        message.contains("asking for 1.0 MiB: 8.0 MiB in 8 live tensors"),
        "{message}"
    );
    assert_eq!(oom[0]["requested"], 1 << 20);
    assert_eq!(oom[0]["live_bytes"], 8 << 20);

    let fits = TempDir::new();
    let limit = (128u64 << 20).to_string();
    let out = run_mode(fits.path(), "oom", &[("FAKE_TORCH_MEMORY_LIMIT", &limit)]);
    assert!(!text(&out).0.contains("oom caught"));
    assert_eq!(findings(&report(fits.path()), "framework-oom").len(), 0);
}

/// PyTorch's expandable segments (`PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`): the
/// stand-in maps 2 MiB handles into a reserved range, as PyTorch does.
const EXPANDABLE: (&str, &str) = ("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True");

#[test]
fn an_expandable_segment_is_joined_through_its_mapped_handles_and_a_kept_tensor_is_a_leak() {
    let dir = TempDir::new();
    run_mode(dir.path(), "leak", &[EXPANDABLE]);
    let doc = report(dir.path());
    let leaks = findings(&doc, "tensor-leak");
    assert_eq!(leaks.len(), 1, "{leaks:?}");
    let line = at("KEPT.append(torch.empty(100 << 10, device=\"cuda\"))  # the leak");
    assert!(leaks[0]["message"].as_str().unwrap().contains(&line), "{}", leaks[0]);
    assert_eq!(leaks[0]["bytes"], 4 * (100 << 10));
    // The handle mapped into the segment is the allocator's, not a leak of the program, and
    // not memory outside PyTorch.
    assert_eq!(doc["summary"]["leaked_bytes"], 0, "{}", doc["leaks"]);
    assert_eq!(doc["held_by_pool"][0]["bytes"], 2 << 20);
    assert_eq!(doc["held_by_pool"][0]["pool"], "pytorch");
    assert_eq!(doc["held_by_pool"][0]["kind"], "vmm");
    let d = &torch(&doc)["devices"][0];
    assert_eq!(d["unmatched_segments"], 0);
    assert_eq!(d["reserved_bytes"], 2 << 20);
    assert_eq!(d["live_bytes"], d["counters"]["allocated"]);
    assert_eq!(d["reserved_bytes"], d["counters"]["reserved"]);
    assert_eq!(d["cached_free_bytes"], (2 << 20) - 4 * (100 << 10));
    assert_eq!(torch(&doc)["outside"], serde_json::json!([]));
}

#[test]
fn an_expandable_segment_whose_tensors_are_freed_is_cache_and_no_leak() {
    let dir = TempDir::new();
    run_mode(dir.path(), "cache", &[EXPANDABLE]);
    let doc = report(dir.path());
    assert_eq!(doc["summary"]["findings"], 0, "{}", doc["findings"]);
    assert_eq!(doc["summary"]["leaked_bytes"], 0);
    let d = &torch(&doc)["devices"][0];
    assert_eq!(
        (d["live_tensors"].as_u64(), d["unmatched_segments"].as_u64()),
        (Some(0), Some(0))
    );
    assert_eq!(d["cached_free_bytes"], 2 << 20);
    assert_eq!(torch(&doc)["outside"], serde_json::json!([]));
}

#[test]
fn the_program_s_own_vmm_memory_beside_expandable_segments_is_outside_and_counted_once() {
    let dir = TempDir::new();
    run_mode(dir.path(), "vmm-outside", &[EXPANDABLE]);
    let doc = report(dir.path());
    let outside = &torch(&doc)["outside"];
    assert_eq!(outside[0]["owner"], "the program", "{outside}");
    // A 4 MiB handle mapped twice and a 2 MiB handle mapped nowhere: 6 MiB in 2 allocations.
    assert_eq!(outside[0]["bytes"], 6 << 20, "{outside}");
    assert_eq!(outside[0]["allocations"], 2, "{outside}");
    let d = &torch(&doc)["devices"][0];
    assert_eq!(
        (d["reserved_bytes"].as_u64(), d["unmatched_segments"].as_u64()),
        (Some(2 << 20), Some(0))
    );
    // The program's handles are leaks; the allocator's is not. The allocator's reserved range
    // is its own, the program's is nobody's.
    assert_eq!(doc["summary"]["leaked_bytes"], 6 << 20, "{}", doc["leaks"]);
    let reserves: Vec<(u64, Option<&str>)> = doc["unreleased"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|u| u["kind"] == "vmm-reserve")
        .map(|u| (u["bytes"].as_u64().unwrap(), u["pool"].as_str()))
        .collect();
    assert_eq!(
        reserves,
        [(1 << 30, Some("pytorch")), (8 << 20, None)],
        "{}",
        doc["unreleased"]
    );
}

#[test]
fn out_of_memory_in_expandable_segments_names_the_line_holding_the_tensors() {
    let dir = TempDir::new();
    let limit = (8u64 << 20).to_string();
    let out = run_mode(dir.path(), "oom", &[("FAKE_TORCH_MEMORY_LIMIT", &limit), EXPANDABLE]);
    assert!(text(&out).0.contains("oom caught"));
    let doc = report(dir.path());
    let oom = findings(&doc, "framework-oom");
    assert_eq!(oom.len(), 1, "{oom:?}");
    let line = at("KEPT.append(torch.empty(1 << 20, device=\"cuda\"))  # fills the device");
    assert!(oom[0]["message"].as_str().unwrap().contains(&line), "{}", oom[0]);
    assert_eq!(oom[0]["live_bytes"], 8 << 20);
}

#[test]
fn check_judges_tensors_not_the_cache_that_grew_inside_it() {
    let dir = TempDir::new();
    let out = run_mode(dir.path(), "check", &[]);
    let (stdout, stderr) = text(&out);
    let line = line_of(
        "fw_torch.py",
        "KEPT.append(torch.empty(4096, device=\"cuda\"))  # kept past the check",
    );
    assert!(
        stdout.contains("check raised 4096 ['4096 bytes (4.0 KiB) still live (tensor):', '    #0 main "),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains(&format!("fw_torch.py:{line}']")), "{stdout}");
    assert!(stdout.contains("twin passed\n"), "{stdout}\n{stderr}");
}

/// The `FrameworkState` records of the one trace in `dir`, with the number of live blocks
/// each state's `FrameworkBlocks` records carry (from `gpuleak dump`).
fn states_in(dir: &Path) -> Vec<(serde_json::Value, usize)> {
    let traces = traces_in(dir);
    assert_eq!(traces.len(), 1, "{traces:?}");
    let out = output_of(sim_command(gpuleak_bin()).arg("dump").arg(&traces[0]));
    let records: Vec<serde_json::Value> = text(&out)
        .0
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    let live = |state: &serde_json::Value| {
        records
            .iter()
            .filter(|r| r["type"] == "FrameworkBlocks" && r["state"] == *state)
            .flat_map(|r| r["blocks"].as_array().unwrap().chunks(5).map(|b| b[3] == "0x1"))
            .filter(|&live| live)
            .count()
    };
    records
        .iter()
        .filter(|r| r["type"] == "FrameworkState")
        .map(|r| (r.clone(), live(&r["id"])))
        .collect()
}

#[test]
fn a_snapshot_on_the_shim_s_signal_writes_the_tensors_live_then_and_a_freed_twin_none() {
    let signal = [("GPULEAK_SNAPSHOT_SIGNAL", "USR2")];
    let dir = TempDir::new();
    let out = run_mode(dir.path(), "signal", &signal);
    // Snapshot 1 is the package's own (`gpuleak.snapshot()`), 2 the signal's.
    assert!(text(&out).0.contains("watched [2]\n"), "{}", text(&out).0);
    let states = states_in(dir.path());
    let at =
        |id: u64| -> Vec<&(serde_json::Value, usize)> { states.iter().filter(|(s, _)| s["snapshot"] == id).collect() };
    // One state per snapshot: the watcher leaves the package's own to it.
    assert_eq!(at(1).len(), 1, "{states:?}");
    assert_eq!(at(1)[0].1, 3, "{states:?}");
    // The watcher's state carries the signal's snapshot id and the three tensors; the exit
    // state comes after, with none.
    assert_eq!(at(2).len(), 1, "{states:?}");
    assert_eq!(at(2)[0].0["reason"], "snapshot");
    assert_eq!(at(2)[0].1, 3, "{states:?}");
    let exit = states
        .iter()
        .find(|(s, _)| s["reason"] == "exit")
        .expect("an exit state");
    assert_eq!(exit.1, 0);
    let doc = report(dir.path());
    assert_eq!(findings(&doc, "tensor-leak"), Vec::<&serde_json::Value>::new());

    let twin = TempDir::new();
    let out = run_mode(twin.path(), "signal-freed", &signal);
    assert!(text(&out).0.contains("watched [2]\n"), "{}", text(&out).0);
    let states = states_in(twin.path());
    let at_signal: Vec<_> = states.iter().filter(|(s, _)| s["snapshot"] == 2).collect();
    assert_eq!(at_signal.len(), 1, "{states:?}");
    assert_eq!(at_signal[0].1, 0, "{states:?}");
}

/// A forked child has no thread of its parent's: the package starts its own watcher there, and
/// the child's own first snapshot gets the child's tensor.
#[test]
fn a_forked_child_s_signal_snapshot_writes_the_child_s_tensors() {
    let dir = TempDir::new();
    let out = run_mode(dir.path(), "signal-fork", &[("GPULEAK_SNAPSHOT_SIGNAL", "USR2")]);
    assert!(text(&out).0.contains("child watched [1]\n"), "{}", text(&out).0);
    // The parent made no CUDA call: the child's is the only trace.
    let traces = traces_in(dir.path());
    assert_eq!(traces.len(), 1, "{traces:?}");
    let child = traces
        .iter()
        .map(|t| text(&output_of(sim_command(gpuleak_bin()).arg("dump").arg(t))).0)
        .find(|d| d.contains("\"reason\":\"signal\""))
        .expect("the child's trace, with the signal's snapshot");
    assert!(
        child.contains("\"type\":\"FrameworkState\",\"id\":1,\"layout\":1,\"framework\":\"torch\",\"reason\":\"snapshot\",\"snapshot\":1}"),
        "{child}"
    );
}

#[test]
fn gpuleak_frameworks_0_leaves_the_program_alone() {
    let dir = TempDir::new();
    run_mode(dir.path(), "leak", &[("GPULEAK_FRAMEWORKS", "0")]);
    let doc = report(dir.path());
    assert!(doc["process"].get("frameworks").is_none(), "{}", doc["process"]);
    assert_eq!(findings(&doc, "tensor-leak").len(), 0);
    // Without the framework's state, its segment is the driver's view only: a leak.
    assert_eq!(doc["summary"]["leaked_bytes"], 2 << 20);
}

#[test]
fn the_shim_s_entry_writes_what_decodes_and_refuses_the_rest_without_harm() {
    let dir = TempDir::new();
    let python = pkgenv_python();
    let entry = |disable: bool| {
        let mut cmd = python_clean(sim_command(gpuleak_bin()));
        cmd.current_dir(dir.path())
            .arg("run")
            .arg("--")
            .arg(&python)
            .arg(script("fw_entry.py"));
        if disable {
            cmd.env("GPULEAK_DISABLE", "1");
        }
        let out = output_of(&mut cmd);
        let (stdout, stderr) = text(&out);
        assert!(stdout.ends_with("done\n"), "{stdout}\n{stderr}");
        stdout
    };
    let stdout = entry(false);
    for line in [
        "end=0",
        "kind_16=-2",
        "kind_77=-2",
        "kind_huge=-2",
        "cut_short=-2",
        "null=-2",
        "too_long=-2",
        "bad_blocks=-2",
    ] {
        assert!(stdout.contains(&format!("{line}\n")), "missing {line} in\n{stdout}");
    }
    // The one accepted record (an end of no open state) is in the trace, nothing else, and
    // the trace reads without an error.
    let traces = traces_in(dir.path());
    let dump = output_of(sim_command(gpuleak_bin()).arg("dump").arg(&traces[0]));
    let (listing, err) = text(&dump);
    assert!(dump.status.success(), "{err}");
    assert_eq!(listing.matches("FrameworkEnd").count(), 1, "{listing}");
    assert!(!listing.contains("Framework") || listing.matches("Framework").count() == 1);
    assert!(!listing.contains("error"), "{listing}");
    // Nothing traced: every call is -1.
    std::fs::remove_file(&traces[0]).unwrap();
    let stdout = entry(true);
    assert!(stdout.contains("end=-1\n"), "{stdout}");
}

#[test]
fn the_pytest_plugin_fails_the_test_that_keeps_a_tensor_and_passes_the_one_whose_cache_grew() {
    plugin_judges(
        &fake_torch(),
        "fw_torch_tests.py",
        "test_keeps_a_tensor",
        ["test_cache_grows_tensor_dies", "test_reuses_the_cache"],
    );
}

#[test]
fn reports_with_framework_states_merge_into_the_report_of_both_traces() {
    let (a, b) = (TempDir::new(), TempDir::new());
    run_mode(a.path(), "leak", &[]);
    run_mode(b.path(), "cache", &[]);
    let traces = [traces_in(a.path()).remove(0), traces_in(b.path()).remove(0)];
    let json = |paths: &[&Path]| {
        let out = output_of(
            sim_command(gpuleak_bin())
                .args(["report", "--format", "json"])
                .args(paths),
        );
        out.stdout
    };
    let whole = json(&[&traces[0], &traces[1]]);
    assert!(String::from_utf8_lossy(&whole).contains("\"frameworks\""));
    let (ra, rb) = (a.path().join("a.json"), b.path().join("b.json"));
    std::fs::write(&ra, json(&[&traces[0]])).unwrap();
    std::fs::write(&rb, json(&[&traces[1]])).unwrap();
    let merged = output_of(sim_command(gpuleak_bin()).arg("merge").arg(&ra).arg(&rb));
    assert!(merged.stdout == whole, "{}", String::from_utf8_lossy(&merged.stdout));
}

/// `gpuleak run -- python fw_cupy.py MODE`, with the stand-in CuPy of `tests/python/fake_cupy`
/// on `PYTHONPATH` unless `real` (then the pinned CuPy of the package's environment).
fn run_cupy(dir: &Path, mode: &str, real: bool) -> Output {
    run_cupy_env(dir, mode, real, &[])
}

/// [`run_cupy`] on the stand-in with `env` set.
fn run_cupy_with(dir: &Path, mode: &str, env: &[(&str, &str)]) -> Output {
    run_cupy_env(dir, mode, false, env)
}

fn run_cupy_env(dir: &Path, mode: &str, real: bool, env: &[(&str, &str)]) -> Output {
    let stand_in = (!real).then(|| script("fake_cupy"));
    run_script(dir, "fw_cupy.py", stand_in.as_deref(), mode, env)
}

/// `path:line` of the line of fw_cupy.py that ends with `ending`.
fn at_cupy(ending: &str) -> String {
    format!("{}:{}", script("fw_cupy.py").display(), line_of("fw_cupy.py", ending))
}

/// The one framework view of the process, which must be CuPy's.
fn cupy(doc: &serde_json::Value) -> &serde_json::Value {
    let frameworks = doc["process"]["frameworks"].as_array().expect("a frameworks list");
    assert_eq!(frameworks.len(), 1, "{frameworks:?}");
    assert_eq!(frameworks[0]["framework"], "cupy");
    &frameworks[0]
}

#[test]
fn a_cupy_array_kept_in_a_global_is_a_leak_at_its_line_and_the_pool_is_not() {
    let dir = TempDir::new();
    run_cupy(dir.path(), "leak", false);
    let doc = report(dir.path());
    let leaks = findings(&doc, "tensor-leak");
    assert_eq!(leaks.len(), 1, "{leaks:?}");
    let line = at_cupy("KEPT.append(cupy.empty(100 << 10, dtype=cupy.uint8))  # the leak");
    assert!(leaks[0]["message"].as_str().unwrap().contains(&line), "{}", leaks[0]);
    assert_eq!(leaks[0]["tensors"], 4);
    assert_eq!(leaks[0]["bytes"], 4 * (100 << 10));
    assert_eq!(leaks[0]["framework"], "cupy");
    assert!(leaks[0]["message"]
        .as_str()
        .unwrap()
        .starts_with("400.0 KiB in 4 CuPy arrays allocated at"));
    // The pool's chunks (300 KiB and 200 KiB reused each step, four of 100 KiB kept) are the
    // pool's, not leaks of the driver's view.
    assert_eq!(doc["summary"]["leaked_bytes"], 0);
    let held = doc["held_by_pool"].as_array().unwrap();
    assert!(held.iter().all(|p| p["pool"] == "cupy"), "{held:?}");
    let held: u64 = held.iter().map(|p| p["bytes"].as_u64().unwrap()).sum();
    assert_eq!(held, 900 << 10);
    let view = cupy(&doc);
    assert_eq!(view["reason"], "exit");
    let d = &view["devices"][0];
    assert_eq!(d["reserved_bytes"], 900 << 10);
    assert_eq!(d["live_bytes"], 4 * (100 << 10));
    assert_eq!(d["cached_free_bytes"], 500 << 10);
    // The totals are the pool's own counters (used_bytes, total_bytes).
    assert_eq!(d["live_bytes"], d["counters"]["allocated"]);
    assert_eq!(d["reserved_bytes"], d["counters"]["reserved"]);
    assert_eq!(d["unmatched_segments"], 0);
    assert_eq!(d["sites"][0]["line"], line);
    assert!(
        view["summary"]
            .as_str()
            .unwrap()
            .starts_with("CuPy holds 900.0 KiB on device 0: 400.0 KiB in 4 live arrays"),
        "{}",
        view["summary"]
    );
}

#[test]
fn cupy_arrays_all_freed_leave_a_pool_that_is_no_leak() {
    let dir = TempDir::new();
    run_cupy(dir.path(), "cache", false);
    let doc = report(dir.path());
    assert_eq!(doc["summary"]["findings"], 0, "{}", doc["findings"]);
    assert_eq!(doc["summary"]["leaked_bytes"], 0);
    let d = &cupy(&doc)["devices"][0];
    assert_eq!(d["live_tensors"], 0);
    assert_eq!(d["reserved_bytes"], 500 << 10);
    assert_eq!(d["cached_free_bytes"], 500 << 10);
    assert_eq!(d["largest_free_block"], 300 << 10);
    assert_eq!(d["counters"]["allocated"], 0);
}

#[test]
fn chunks_the_cupy_pool_gave_back_leave_its_state() {
    let dir = TempDir::new();
    run_cupy(dir.path(), "released", false);
    let doc = report(dir.path());
    assert_eq!(doc["summary"]["findings"], 0, "{}", doc["findings"]);
    let d = &cupy(&doc)["devices"][0];
    // free_all_blocks() handed 500 KiB back to the driver; one 1 KiB chunk came after.
    assert_eq!(d["reserved_bytes"], 1024);
    assert_eq!(d["reserved_bytes"], d["counters"]["reserved"]);
    assert_eq!(d["unmatched_segments"], 0);
}

#[test]
fn check_judges_cupy_arrays_not_the_pool_that_grew_inside_it() {
    let dir = TempDir::new();
    let out = run_cupy(dir.path(), "check", false);
    let (stdout, stderr) = text(&out);
    let line = line_of(
        "fw_cupy.py",
        "KEPT.append(cupy.empty(4096, dtype=cupy.uint8))  # kept past the check",
    );
    assert!(
        stdout.contains("check raised 4096 ['4096 bytes (4.0 KiB) still live (tensor):', '    #0 main "),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains(&format!("fw_cupy.py:{line}']")), "{stdout}");
    assert!(stdout.contains("twin passed\n"), "{stdout}\n{stderr}");
}

#[test]
fn cupy_out_of_memory_names_the_line_holding_the_arrays_and_a_run_that_fits_has_no_finding() {
    let dir = TempDir::new();
    let out = run_cupy_with(
        dir.path(),
        "oom",
        &[("FAKE_CUPY_MEMORY_LIMIT", &(8u64 << 20).to_string())],
    );
    assert!(text(&out).0.contains("oom caught"), "{}", text(&out).0);
    let doc = report(dir.path());
    let oom = findings(&doc, "framework-oom");
    assert_eq!(oom.len(), 1, "{oom:?}");
    let line = at_cupy("KEPT.append(cupy.empty(1 << 20, dtype=cupy.uint8))  # fills the device");
    let message = oom[0]["message"].as_str().unwrap();
    assert!(message.contains(&line), "{message}");
    assert!(message.contains("8.0 MiB in 8 live arrays"), "{message}");
    assert_eq!(oom[0]["requested"], 1 << 20);
    assert_eq!(oom[0]["live_bytes"], 8 << 20);

    let fits = TempDir::new();
    let out = run_cupy_with(
        fits.path(),
        "oom",
        &[("FAKE_CUPY_MEMORY_LIMIT", &(128u64 << 20).to_string())],
    );
    assert!(!text(&out).0.contains("oom caught"));
    assert_eq!(findings(&report(fits.path()), "framework-oom").len(), 0);
}

#[test]
fn the_real_cupy_takes_the_hook_at_import_and_a_program_that_allocates_nothing_writes_no_state() {
    let dir = TempDir::new();
    let out = run_cupy(dir.path(), "real", true);
    let (stdout, _) = text(&out);
    assert!(stdout.contains("hooked ['_Hook']\n"), "{stdout}");
    // And the pool's allocator is wrapped, to write the state when it runs out of memory.
    assert!(stdout.contains("allocator gpuleak_malloc\n"), "{stdout}");
    // Importing CuPy makes no CUDA call: the shim has nothing to trace, and no state was
    // written to a trace either.
    for trace in traces_in(dir.path()) {
        let out = output_of(sim_command(gpuleak_bin()).arg("dump").arg(&trace));
        assert!(!text(&out).0.contains("Framework"), "{}", text(&out).0);
    }
}

#[test]
fn the_pytest_plugin_fails_the_test_that_keeps_a_cupy_array_and_passes_the_one_whose_pool_grew() {
    plugin_judges(
        &script("fake_cupy"),
        "fw_cupy_tests.py",
        "test_keeps_an_array",
        ["test_pool_grows_array_dies", "test_reuses_the_pool"],
    );
}

/// `dir`'s one trace cut after its last `FrameworkEnd` as a rotation and a bound would have
/// left it (issue 45): the segment after the cut alone, in a directory of its own.
fn kept_after_last_state(dir: &Path) -> (TempDir, serde_json::Value) {
    use gpuleak_format::{checkpoint::segment, FrameworkEnd, Seq, Trace, TraceId};
    let traces = traces_in(dir);
    let bytes = std::fs::read(&traces[0]).unwrap();
    let whole = Trace::new(&bytes).unwrap();
    let end = whole
        .records()
        .map(|e| e.unwrap().record)
        .filter(|r| r.body.kind() == FrameworkEnd::KIND)
        .map(|r| r.seq)
        .last()
        .expect("a complete framework state");
    let kept = TempDir::new();
    let seg = segment(&whole, Some(end), Seq(u64::MAX), 2, TraceId(0x45)).unwrap();
    std::fs::write(kept.path().join("app.trace-000002"), seg).unwrap();
    let out = output_of(
        sim_command(gpuleak_bin())
            .args(["report", "--format", "json"])
            .arg(kept.path()),
    );
    let doc = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out).0));
    (kept, doc)
}

#[test]
fn a_framework_state_in_dropped_history_still_judges_tensors() {
    let dir = TempDir::new();
    run_mode(dir.path(), "leak", &[]);
    let whole = report(dir.path());
    let (_kept, doc) = kept_after_last_state(dir.path());
    let leaks = findings(&doc, "tensor-leak");
    assert_eq!(leaks, findings(&whole, "tensor-leak"));
    assert_eq!(leaks.len(), 1, "{:#}", doc["findings"]);
    assert_eq!(leaks[0]["tensors"], 4);
    assert_eq!(torch(&doc)["devices"][0], torch(&whole)["devices"][0]);
    // Twin: every tensor freed, the cache kept: still no leak.
    let dir = TempDir::new();
    run_mode(dir.path(), "cache", &[]);
    let (_kept, doc) = kept_after_last_state(dir.path());
    assert_eq!(findings(&doc, "tensor-leak"), Vec::<&serde_json::Value>::new());
    assert_eq!(torch(&doc)["devices"][0]["live_tensors"], 0);
}

/// `gpuleak run -- python fw_jax.py MODE`, with the stand-in JAX of `tests/python/fake_jax` on
/// `PYTHONPATH`.
fn run_jax(dir: &Path, mode: &str) -> Output {
    run_script(dir, "fw_jax.py", Some(&script("fake_jax")), mode, &[])
}

/// `path:line` of the line of fw_jax.py that ends with `ending`.
fn at_jax(ending: &str) -> String {
    format!("{}:{}", script("fw_jax.py").display(), line_of("fw_jax.py", ending))
}

/// The one framework view of the process, which must be JAX's.
fn jax(doc: &serde_json::Value) -> &serde_json::Value {
    let frameworks = doc["process"]["frameworks"].as_array().expect("a frameworks list");
    assert_eq!(frameworks.len(), 1, "{frameworks:?}");
    assert_eq!(frameworks[0]["framework"], "jax");
    &frameworks[0]
}

/// JAX has no out-of-memory observer: XLA's `RESOURCE_EXHAUSTED` error that ends the program
/// writes the state, with the request, before the interpreter prints it. Its twin fits.
#[test]
fn jax_out_of_memory_that_ends_the_program_names_the_line_holding_the_arrays_and_a_run_that_fits_has_none() {
    let dir = TempDir::new();
    let limit = (8u64 << 20).to_string();
    let out = run_script_to_its_end(
        dir.path(),
        "fw_jax.py",
        Some(&script("fake_jax")),
        "oom",
        &[("FAKE_JAX_MEMORY_LIMIT", &limit)],
    );
    let (stdout, stderr) = text(&out);
    assert_ne!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    // The program's own error still reaches the user, unchanged.
    assert!(
        stderr.contains("XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 1048576 bytes."),
        "{stderr}"
    );
    assert!(!stderr.contains("gpuleak: cannot"), "{stderr}");
    let doc = report(dir.path());
    let oom = findings(&doc, "framework-oom");
    assert_eq!(oom.len(), 1, "{oom:?}");
    let line = at_jax("KEPT.append(jnp.zeros(1 << 20, dtype=jnp.uint8))  # fills the memory");
    let message = oom[0]["message"].as_str().unwrap();
    assert!(
        message.starts_with("JAX ran out of memory on device 0 asking for 1.0 MiB"),
        "{message}"
    );
    assert!(message.contains(&line), "{message}");
    assert_eq!(oom[0]["requested"], 1 << 20);
    assert_eq!(oom[0]["live_bytes"], 8 << 20);

    let fits = TempDir::new();
    run_script(
        fits.path(),
        "fw_jax.py",
        Some(&script("fake_jax")),
        "fits",
        &[("FAKE_JAX_MEMORY_LIMIT", &(128u64 << 20).to_string())],
    );
    assert_eq!(findings(&report(fits.path()), "framework-oom").len(), 0);
}

/// The same error ending a thread: the state is written then, and the program goes on.
#[test]
fn jax_out_of_memory_that_ends_a_thread_names_the_line_holding_the_arrays() {
    let dir = TempDir::new();
    let out = run_script(
        dir.path(),
        "fw_jax.py",
        Some(&script("fake_jax")),
        "oom-thread",
        &[("FAKE_JAX_MEMORY_LIMIT", &(8u64 << 20).to_string())],
    );
    let (stdout, stderr) = text(&out);
    assert!(stdout.contains("thread ended with 8 arrays"), "{stdout}");
    assert!(stderr.contains("XlaRuntimeError: RESOURCE_EXHAUSTED"), "{stderr}");
    let doc = report(dir.path());
    let oom = findings(&doc, "framework-oom");
    assert_eq!(oom.len(), 1, "{oom:?}");
    let line = at_jax("KEPT.append(jnp.zeros(1 << 20, dtype=jnp.uint8))  # fills the memory in a thread");
    assert!(oom[0]["message"].as_str().unwrap().contains(&line), "{}", oom[0]);
    assert_eq!(oom[0]["live_bytes"], 8 << 20);
    // The arrays were freed before exit: no leak.
    assert_eq!(findings(&doc, "tensor-leak").len(), 0);
}

#[test]
fn a_jax_array_kept_in_a_global_is_a_leak_at_its_line_and_xla_s_region_is_not() {
    let dir = TempDir::new();
    run_jax(dir.path(), "leak");
    let doc = report(dir.path());
    let leaks = findings(&doc, "tensor-leak");
    assert_eq!(leaks.len(), 1, "{leaks:?}");
    let line = at_jax("KEPT.append(jnp.zeros(100 << 10, dtype=jnp.uint8))  # the leak");
    let message = leaks[0]["message"].as_str().unwrap();
    assert!(message.contains(&line), "{}", leaks[0]);
    assert!(
        message.starts_with("400.0 KiB in 4 JAX arrays allocated at"),
        "{message}"
    );
    assert_eq!(
        (&leaks[0]["tensors"], &leaks[0]["bytes"]),
        (&4.into(), &(400 << 10).into())
    );
    assert_eq!(leaks[0]["framework"], "jax");
    // XLA's region (one 2 MiB driver allocation made by jaxlib) is the allocator's, not a leak.
    assert_eq!(doc["summary"]["leaked_bytes"], 0);
    assert_eq!(doc["held_by_pool"][0]["pool"], "xla");
    assert_eq!(doc["held_by_pool"][0]["bytes"], 2 << 20);
    // The join: the buffers' addresses place them in the region, whose rest is cached free;
    // the totals are XLA's counters (bytes_in_use, pool_bytes).
    let view = jax(&doc);
    assert_eq!(view["reason"], "exit");
    let d = &view["devices"][0];
    assert_eq!(d["segments"], 1);
    assert_eq!(d["reserved_bytes"], 2 << 20);
    assert_eq!(d["live_bytes"], 400 << 10);
    assert_eq!(d["cached_free_bytes"], (2 << 20) - (400 << 10));
    assert_eq!(d["live_bytes"], d["counters"]["allocated"]);
    assert_eq!(d["reserved_bytes"], d["counters"]["reserved"]);
    assert_eq!(d["unmatched_segments"], 0);
    assert_eq!(d["sites"][0]["line"], line);
    assert_eq!(view["outside"], serde_json::json!([]));
    assert!(
        view["summary"]
            .as_str()
            .unwrap()
            .starts_with("JAX holds 2.0 MiB on device 0: 400.0 KiB in 4 live arrays"),
        "{}",
        view["summary"]
    );
}

#[test]
fn jax_arrays_all_freed_leave_a_region_that_is_no_leak() {
    let dir = TempDir::new();
    run_jax(dir.path(), "cache");
    let doc = report(dir.path());
    assert_eq!(doc["summary"]["findings"], 0, "{}", doc["findings"]);
    assert_eq!(doc["summary"]["leaked_bytes"], 0);
    assert_eq!(doc["held_by_pool"][0]["pool"], "xla");
    // No buffer lies in the region: it is XLA's by the jaxlib frames of its allocation.
    let d = &jax(&doc)["devices"][0];
    assert_eq!(d["live_tensors"], 0);
    assert_eq!(d["reserved_bytes"], 2 << 20);
    assert_eq!(d["cached_free_bytes"], 2 << 20);
    assert_eq!(d["reserved_bytes"], d["counters"]["reserved"]);
    assert_eq!(d["counters"]["allocated"], 0);
}

#[test]
fn jax_arrays_that_grow_across_snapshots_are_tensor_growth_and_a_flat_region_is_not() {
    let dir = TempDir::new();
    run_jax(dir.path(), "growth");
    let doc = report(dir.path());
    let grown = findings(&doc, "tensor-growth");
    assert_eq!(grown.len(), 1, "{grown:?}");
    let line = at_jax("KEPT.append(jnp.zeros(64 << 10, dtype=jnp.uint8))  # grows every step");
    assert!(grown[0]["message"].as_str().unwrap().contains(&line), "{}", grown[0]);
    assert_eq!(grown[0]["framework"], "jax");
    assert_eq!(grown[0]["first_bytes"], 64 << 10);
    assert_eq!(grown[0]["last_bytes"], 256 << 10);
    assert_eq!(findings(&doc, "tensor-leak"), Vec::<&serde_json::Value>::new());

    let flat = TempDir::new();
    run_jax(flat.path(), "flat");
    let doc = report(flat.path());
    assert_eq!(doc["summary"]["findings"], 0, "{}", doc["findings"]);
}

#[test]
fn check_judges_jax_arrays_not_the_region_that_grew_inside_it() {
    let dir = TempDir::new();
    let out = run_jax(dir.path(), "check");
    let (stdout, stderr) = text(&out);
    let line = line_of(
        "fw_jax.py",
        "KEPT.append(jnp.zeros(4096, dtype=jnp.uint8))  # kept past the check",
    );
    assert!(
        stdout.contains("check raised 4096 ['4096 bytes (4.0 KiB) still live (tensor):', '    #0 main "),
        "{stdout}\n{stderr}"
    );
    assert!(stdout.contains(&format!("fw_jax.py:{line}']")), "{stdout}");
    assert!(stdout.contains("twin passed\n"), "{stdout}\n{stderr}");
}

#[test]
fn jax_imported_but_never_started_is_left_alone() {
    let dir = TempDir::new();
    let out = run_jax(dir.path(), "idle");
    assert!(text(&out).0.contains("backends 0\n"), "{}", text(&out).0);
    for trace in traces_in(dir.path()) {
        let out = output_of(sim_command(gpuleak_bin()).arg("dump").arg(&trace));
        assert!(!text(&out).0.contains("Framework"), "{}", text(&out).0);
    }
}

#[test]
fn the_pytest_plugin_fails_the_test_that_keeps_a_jax_array_and_passes_the_one_whose_region_grew() {
    plugin_judges(
        &script("fake_jax"),
        "fw_jax_tests.py",
        "test_keeps_an_array",
        ["test_region_grows_array_dies", "test_reuses_the_region"],
    );
}

/// The real JAX (pinned jax[cpu] in target/pkgenv), on its CPU backend: a real
/// `device_memory_profile()` read by the package's decoder, the stand-in's encoder checked
/// against it, and the adapter's addresses checked against `live_arrays()`. The only test that
/// imports the real JAX; it runs once, on the package environment's Python.
#[test]
fn the_jax_adapter_reads_the_real_jax_s_profile_and_buffers() {
    let dir = TempDir::new();
    let mut cmd = python_clean(sim_command(pkgenv_python()));
    cmd.current_dir(dir.path())
        .env("JAX_PLATFORMS", "cpu")
        .args(["-m", "pytest", "-p", "no:cacheprovider", "-q"])
        .arg(format!("--rootdir={}", dir.path().display()))
        .arg(script("pkg_jax.py"));
    let out = output_of(&mut cmd);
    let (stdout, stderr) = text(&out);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    assert!(stdout.contains("6 passed"), "{stdout}");
}
