//! `gpuleak report` on traces of real C programs: the JSON report field by field, the text
//! report against golden files (`tests/golden/`, regenerated with `GPULEAK_BLESS=1`), correct
//! twins that must report nothing, several traces at once (a directory of them, with the
//! merged view, on one thread or several), and broken traces.

use std::fs;
use std::path::{Path, PathBuf};

use gpuleak_e2e::{client, gpuleak_report as report, shim_command, TempDir};
use serde_json::Value;

use crate::trace::{assert_ok, dump, of_type};

mod graphs;

/// Runs a client under the shim and returns its trace (inside `dir`).
fn traced(dir: &TempDir, name: &str) -> PathBuf {
    let trace = dir.path().join(format!("{name}.trace"));
    let out = shim_command(client(name), &trace).output().unwrap();
    assert_ok(&out);
    trace
}

/// `gpuleak report --format json`, which must succeed.
fn report_json(args: &[&str], traces: &[&Path]) -> Value {
    let out = report(&[&["--format", "json"], args].concat(), traces);
    assert_ok(&out);
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("not JSON: {e}\n{}", String::from_utf8_lossy(&out.stdout)))
}

/// `gpuleak report` as text, which must succeed.
fn report_text(args: &[&str], traces: &[&Path]) -> String {
    let out = report(args, traces);
    assert_ok(&out);
    String::from_utf8(out.stdout).unwrap()
}

fn u(v: &Value) -> u64 {
    v.as_u64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Function names of a stack's frames.
fn functions(stack: &Value) -> Vec<&str> {
    stack
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["function"].as_str().unwrap_or("?"))
        .collect()
}

/// Asserts frame 0 of `stack` is `function`, in the client's own source file and module.
fn assert_frame0(stack: &Value, function: &str, client_name: &str) {
    let f = &stack[0];
    assert_eq!(f["function"], function, "frame 0 of {stack}");
    assert_eq!(f["module"], client_name, "frame 0 of {stack}");
    let file = f["file"].as_str().unwrap_or_else(|| panic!("no file in {f}"));
    assert!(file.ends_with(&format!("{client_name}.c")), "{file}");
    assert!(u(&f["line"]) > 0);
}

/// The report's one finding, a `bad-free` by `api` whose message contains `message`, made at
/// `function` of `client_name` on memory allocated at `allocated_in`.
fn assert_one_bad_free(r: &Value, api: &str, message: &str, function: &str, allocated_in: &str, client_name: &str) {
    let findings = r["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{findings:#?}");
    let f = &findings[0];
    assert_eq!((f["check"].as_str(), f["api"].as_str()), (Some("bad-free"), Some(api)));
    assert!(f["message"].as_str().unwrap().contains(message), "{f}");
    assert_frame0(&f["stack"], function, client_name);
    assert_frame0(&f["allocation_stack"], allocated_in, client_name);
}

/// Replaces what changes between runs (pids, paths, and the frames from the first one outside
/// the client on, which depend on the C library) by placeholders.
fn mask(text: &str, trace: &Path, client_name: &str) -> String {
    let exe = client(client_name).display().to_string();
    let mut out = Vec::new();
    let mut outside = false;
    for line in text.lines() {
        let line = line.replace(&exe, "EXE").replace(&trace.display().to_string(), "TRACE");
        let line = mask_pids(&line);
        if !line.trim_start().starts_with('#') {
            outside = false;
        } else if outside {
            continue;
        } else if !line.ends_with(&format!("({client_name})")) {
            outside = true;
            out.push("    ...".to_string());
            continue;
        }
        out.push(line);
    }
    out.join("\n") + "\n"
}

/// `pid 1234` becomes `pid PID`, every time.
fn mask_pids(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find("pid ") {
        out.push_str(&rest[..at + 4]);
        rest = &rest[at + 4..];
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits > 0 {
            out.push_str("PID");
            rest = &rest[digits..];
        }
    }
    out.push_str(rest);
    out
}

/// Compares with `tests/golden/<name>`, or writes it when `GPULEAK_BLESS=1`.
fn assert_golden(name: &str, actual: &str) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("golden").join(name);
    if std::env::var_os("GPULEAK_BLESS").is_some_and(|v| v == "1") {
        fs::write(&path, actual).unwrap();
        return;
    }
    let expected =
        fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e} (GPULEAK_BLESS=1 writes it)", path.display()));
    assert_eq!(
        actual,
        expected,
        "text report differs from {} (GPULEAK_BLESS=1 rewrites it)",
        path.display()
    );
}

#[test]
fn two_leak_sites_are_reported_with_sizes_counts_kinds_and_functions() {
    let dir = TempDir::new();
    let trace = traced(&dir, "report_leaks");
    let r = report_json(&[], &[&trace]);
    assert_eq!(r["schema_version"], 1);
    let s = &r["summary"];
    // use_and_free, make_scratch twice, pin_staging.
    assert_eq!(u(&s["allocations"]), 4);
    assert_eq!(u(&s["frees"]), 1);
    assert_eq!(u(&s["leaked_allocations"]), 3);
    assert_eq!(u(&s["leaked_bytes"]), 16000);
    assert_eq!(u(&s["peak_bytes"]), 16000);

    let leaks = r["leaks"].as_array().unwrap();
    assert_eq!(leaks.len(), 2, "{leaks:#?}");
    let (staging, scratch) = (&leaks[0], &leaks[1]);
    assert_eq!((u(&staging["bytes"]), u(&staging["allocations"])), (10000, 1));
    assert_eq!(staging["kind"], "host");
    assert_eq!(staging["at"], "exit");
    assert_eq!(staging["api"], "cuMemAllocHost_v2");
    assert_frame0(&staging["stack"], "pin_staging", "report_leaks");
    assert_eq!(functions(&staging["stack"])[1], "main");

    assert_eq!((u(&scratch["bytes"]), u(&scratch["allocations"])), (6000, 2));
    assert_eq!(scratch["kind"], "device");
    assert_eq!(scratch["api"], "cuMemAlloc_v2");
    assert_eq!(scratch["via"], Value::Null);
    assert_frame0(&scratch["stack"], "make_scratch", "report_leaks");
    assert_eq!(functions(&scratch["stack"])[1], "main");
    assert!(scratch["owner"].as_str().unwrap().ends_with("/report_leaks"));
    assert_eq!(scratch["pool"], Value::Null);

    assert_eq!(r["findings"], serde_json::json!([]));
    assert_eq!(r["process"]["exe"], client("report_leaks").display().to_string());
    assert_eq!(r["process"]["exited"], true);
    assert_eq!(
        r["process"]["exit_code"],
        Value::Null,
        "the shim cannot know the status at unload"
    );
}

/// A program started through the dynamic loader (`ld-linux-x86-64.so.2 ./app`, as Nix
/// wrappers and programs run with another C library are): `/proc/self/exe` is the loader, but
/// the trace names the program and its frames symbolize as its own.
#[test]
fn a_program_started_by_the_loader_is_named_and_symbolized_as_itself() {
    let dir = TempDir::new();
    let trace = dir.path().join("loader.trace");
    let loader = Path::new(if cfg!(target_arch = "aarch64") {
        "/lib/ld-linux-aarch64.so.1"
    } else {
        "/lib64/ld-linux-x86-64.so.2"
    });
    let out = shim_command(loader, &trace)
        .arg(client("report_leaks"))
        .output()
        .unwrap();
    assert_ok(&out);
    let r = report_json(&[], &[&trace]);
    let exe = r["process"]["exe"].as_str().unwrap();
    assert!(exe.ends_with("/report_leaks"), "{exe}");
    let leaks = r["leaks"].as_array().unwrap();
    assert_eq!(leaks.len(), 2, "{leaks:#?}");
    assert_frame0(&leaks[0]["stack"], "pin_staging", "report_leaks");
    assert_frame0(&leaks[1]["stack"], "make_scratch", "report_leaks");
    assert_eq!(functions(&leaks[1]["stack"])[1], "main");
}

#[test]
fn the_correct_twin_reports_no_leak_and_no_finding() {
    let dir = TempDir::new();
    let trace = traced(&dir, "report_clean");
    let r = report_json(&[], &[&trace]);
    let s = &r["summary"];
    assert_eq!(u(&s["leaked_allocations"]), 0);
    assert_eq!(u(&s["leaked_bytes"]), 0);
    assert_eq!(r["leaks"], serde_json::json!([]));
    assert_eq!(r["findings"], serde_json::json!([]));
    assert_eq!(r["held_by_pool"], serde_json::json!([]));
    assert_eq!(r["unreleased"], serde_json::json!([]));
    assert_eq!(r["notes"], serde_json::json!([]));
    // Every family it used was counted: the same calls as report_leaks, plus pitched, managed,
    // stream-ordered, a reservation, a physical handle and an allocation in a second context.
    assert_eq!(u(&s["allocations"]), 10);
    assert_eq!(u(&s["frees"]), 10);
    let records = dump(&trace);
    assert_eq!(of_type(&records, "Map").len(), 1);
    // Peak: the 2 MiB physical handle is the largest thing ever live (the reservation is no
    // memory).
    let gran = u(&of_type(&records, "Map")[0]["size"]);
    assert_eq!(u(&s["peak_bytes"]), gran);

    let text = report_text(&[], &[&trace]);
    assert!(text.contains("\nNo leaks.\n"), "{text}");
    assert!(!text.contains("error"), "{text}");
}

#[test]
fn shim_families_leaks_at_exit_and_teardown_and_frees_badly_twice() {
    let dir = TempDir::new();
    let trace = traced(&dir, "shim_families");
    let r = report_json(&[], &[&trace]);
    let s = &r["summary"];
    assert_eq!(u(&s["leaked_allocations"]), 2);
    assert_eq!(u(&s["leaked_bytes"]), 777 + 300);
    assert_eq!(u(&s["leaked_bytes_at_exit"]), 777);
    assert_eq!(u(&s["leaked_bytes_at_teardown"]), 300);
    assert_eq!(u(&s["failed_allocations"]), 1);
    assert_eq!(u(&s["allocations"]), 18);
    assert_eq!(u(&s["frees"]), 16);

    let leaks = r["leaks"].as_array().unwrap();
    assert_eq!(leaks.len(), 2);
    assert_eq!((u(&leaks[0]["bytes"]), &leaks[0]["at"]), (777, &Value::from("exit")));
    assert_eq!(leaks[0]["kind"], "device");
    assert_eq!(
        (u(&leaks[1]["bytes"]), &leaks[1]["at"]),
        (300, &Value::from("teardown"))
    );
    assert_eq!(leaks[1]["teardown"]["api"], "cuCtxDestroy_v2");
    for l in leaks {
        assert_frame0(&l["stack"], "main", "shim_families");
    }

    let findings = r["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 2, "{findings:#?}");
    for f in findings {
        assert_eq!(f["check"], "bad-free");
        assert_eq!(f["severity"], "error");
        assert_frame0(&f["stack"], "main", "shim_families");
    }
    let unknown = findings
        .iter()
        .find(|f| f["ptr"] == "0xdead00")
        .expect("unknown pointer");
    assert_eq!(unknown["allocation_stack"], Value::Null);
    let double = findings.iter().find(|f| f["ptr"] != "0xdead00").unwrap();
    assert!(
        double["message"].as_str().unwrap().starts_with("double free"),
        "{double}"
    );
    assert_frame0(&double["allocation_stack"], "main", "shim_families");
    // The free and the allocation are different lines of main.
    assert_ne!(double["stack"][0]["line"], double["allocation_stack"][0]["line"]);
}

/// Runs report_vmm_refs in `mode` under the shim with live accounting on; returns its stdout
/// and the JSON report of its trace.
fn vmm_refs(dir: &TempDir, mode: &str) -> (String, Value) {
    let trace = dir.path().join(format!("{mode}.trace"));
    let out = shim_command(client("report_vmm_refs"), &trace)
        .arg(mode)
        .env("GPULEAK_LIVE", "1")
        .output()
        .unwrap();
    assert_ok(&out);
    (String::from_utf8(out.stdout).unwrap(), report_json(&[], &[&trace]))
}

/// NCCL frees a buffer by retaining its handle and releasing it twice, and retains handles to
/// inspect live buffers; peers' buffers come as imported handles, NVLS groups as multicast
/// objects. Every reference needs its own release: the correct sequences report nothing, and
/// each missing or extra release is found.
#[test]
fn retained_imported_and_multicast_handles_each_need_their_own_release() {
    const GRAN: u64 = 2 << 20; // the simulator's VMM granularity
    let dir = TempDir::new();
    let (stdout, r) = vmm_refs(&dir, "clean");
    assert_nothing_left(&r);
    assert_eq!(r["notes"], serde_json::json!([]), "{r:#}");
    assert_eq!(u(&r["summary"]["retains"]), 4);
    // The shim's live accounting keeps a retained handle's memory until its last release.
    assert!(
        stdout.contains(&format!("live after inspect: {}\n", 2 * GRAN)),
        "{stdout}"
    );
    assert!(stdout.contains("live at end: 0\n"), "{stdout}");

    let (stdout, r) = vmm_refs(&dir, "leak");
    let leaks = r["leaks"].as_array().unwrap();
    assert_eq!(leaks.len(), 1, "{r:#}");
    let l = &leaks[0];
    assert_eq!((l["kind"].as_str(), u(&l["bytes"])), (Some("vmm"), 2 * GRAN));
    assert_eq!((u(&l["retains"]), u(&l["releases_due"])), (2, 1));
    assert_frame0(&l["stack"], "buffer_alloc", "report_vmm_refs");
    assert_eq!(functions(&l["stack"])[1], "main");
    assert_eq!(u(&r["summary"]["leaked_bytes"]), 2 * GRAN);
    assert!(stdout.contains(&format!("live at end: {}\n", 2 * GRAN)), "{stdout}");

    let unreleased = r["unreleased"].as_array().unwrap();
    let kinds: Vec<(&str, u64, &str)> = unreleased
        .iter()
        .map(|h| (h["kind"].as_str().unwrap(), u(&h["bytes"]), h["api"].as_str().unwrap()))
        .collect();
    assert_eq!(
        kinds,
        [
            ("multicast", GRAN, "cuMulticastCreate"),
            ("vmm-import", 0, "cuMemImportFromShareableHandle")
        ]
    );
    assert_frame0(&unreleased[0]["stack"], "multicast", "report_vmm_refs");
    assert_frame0(&unreleased[1]["stack"], "import_peer", "report_vmm_refs");

    assert_one_bad_free(
        &r,
        "cuMemRelease",
        "double free",
        "release_too_often",
        "buffer_alloc",
        "report_vmm_refs",
    );
    let message = r["findings"][0]["message"].as_str().unwrap();
    assert!(message.starts_with("double free"), "{message}");
}

/// Pool allocations shared between processes come back as `cuMemPoolImportPointer` pointers
/// that `cuMemFree` or `cuMemFreeAsync` release, and an IPC handle opened twice maps one address
/// with two references. The correct sequences report nothing; a pointer never freed, a close
/// too few and a close of the wrong kind are each found. The imports' sizes come from the
/// driver, and the shim never counts another process's memory as this one's.
#[test]
fn imported_pool_pointers_and_reopened_ipc_handles_each_need_their_own_release() {
    const SIZE: u64 = 1 << 20;
    let dir = TempDir::new();
    let run = |mode: &str| {
        let trace = dir.path().join(format!("{mode}.trace"));
        let out = shim_command(client("report_ipc_refs"), &trace)
            .arg(mode)
            .env("GPULEAK_LIVE", "1")
            .output()
            .unwrap();
        assert_ok(&out);
        (String::from_utf8(out.stdout).unwrap(), trace)
    };
    let (stdout, trace) = run("clean");
    assert!(stdout.contains("same address: 1, seen 0x5eed\n"), "{stdout}");
    assert!(stdout.contains("same ipc address: 1\n"), "{stdout}");
    assert!(stdout.contains(&format!("live while imported: {SIZE}\n")), "{stdout}");
    assert!(stdout.contains("live at end: 0\n"), "{stdout}");
    let r = report_json(&[], &[&trace]);
    assert_nothing_left(&r);
    assert_eq!(
        u(&r["summary"]["peak_bytes"]),
        SIZE + 4096,
        "imports are not this process's memory"
    );
    let imports: Vec<(u64, u64)> = of_type(&dump(&trace), "Alloc")
        .iter()
        .filter(|a| a["api"] == "cuMemPoolImportPointer" || a["api"] == "cuIpcOpenMemHandle_v2")
        .map(|a| (u(&a["size"]), u(&a["result"])))
        .collect();
    assert_eq!(
        imports,
        [(SIZE, 0), (SIZE, 0), (4096, 0), (4096, 0)],
        "sizes asked of the driver"
    );

    let (stdout, trace) = run("leak");
    assert!(stdout.contains("close of an imported pointer: 1\n"), "{stdout}");
    let r = report_json(&[], &[&trace]);
    assert_eq!(r["leaks"], serde_json::json!([]), "{r:#}");
    let unreleased: Vec<(&str, u64, u64, u64)> = r["unreleased"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["kind"].as_str().unwrap(),
                u(&h["bytes"]),
                u(&h["retains"]),
                u(&h["releases_due"]),
            )
        })
        .collect();
    assert_eq!(unreleased, [("pool-import", SIZE, 1, 1), ("ipc", 4096, 1, 1)], "{r:#}");
    assert_frame0(&r["unreleased"][0]["stack"], "import_buffer", "report_ipc_refs");
    assert_frame0(&r["unreleased"][1]["stack"], "open_ipc", "report_ipc_refs");
    assert_one_bad_free(
        &r,
        "cuIpcCloseMemHandle",
        "wrong free function",
        "close_like_ipc",
        "import_buffer",
        "report_ipc_refs",
    );
    let text = report_text(&[], &[&trace]);
    assert!(text.contains("imported again 1 time, 1 cuMemFree still"), "{text}");
    assert!(text.contains("opened again 1 time, 1 cuIpcCloseMemHandle"), "{text}");
}

/// External memory: a buffer mapped onto an imported object is freed with `cuMemFree` and the
/// object destroyed with `cuDestroyExternalMemory`; done so, nothing is reported (no bad free
/// of memory the trace never saw allocated); left, both are unreleased, with their stacks, and
/// neither counts as this process's memory.
#[test]
fn external_memory_and_its_mapped_buffers_are_released_by_their_own_calls() {
    let dir = TempDir::new();
    let run = |mode: &str| {
        let trace = dir.path().join(format!("{mode}.trace"));
        let out = shim_command(client("report_external"), &trace)
            .arg(mode)
            .output()
            .unwrap();
        assert_ok(&out);
        let stdout = String::from_utf8(out.stdout).unwrap();
        assert!(stdout.contains("round trip: 1\n"), "{stdout}");
        assert!(stdout.contains("past_the_buffer 1\n"), "{stdout}");
        trace
    };
    let trace = run("clean");
    let r = report_json(&[], &[&trace]);
    assert_nothing_left(&r);
    assert_eq!(
        u(&r["summary"]["peak_bytes"]),
        4096,
        "the exporter's memory is not counted"
    );

    let trace = run("leak");
    let r = report_json(&[], &[&trace]);
    assert_eq!(r["leaks"], serde_json::json!([]), "{r:#}");
    assert_eq!(r["findings"], serde_json::json!([]), "{r:#}");
    let mut unreleased: Vec<(String, u64)> = r["unreleased"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| (h["kind"].as_str().unwrap().to_string(), u(&h["bytes"])))
        .collect();
    unreleased.sort();
    assert_eq!(
        unreleased,
        [
            ("external".to_string(), 1 << 20),
            ("external-buffer".to_string(), 64 << 10)
        ],
        "{r:#}"
    );
    for h in r["unreleased"].as_array().unwrap() {
        let frame0 = if h["kind"] == "external" {
            "import_object"
        } else {
            "map_buffer"
        };
        assert_frame0(&h["stack"], frame0, "report_external");
    }
    let text = report_text(&[], &[&trace]);
    assert!(text.contains("cuExternalMemoryGetMappedBuffer"), "{text}");
}

/// The `pool-leak` findings of a report: (severity, api, message).
fn pool_leaks(r: &Value) -> Vec<(String, String, String)> {
    r["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["check"] == "pool-leak")
        .map(|f| {
            let s = |k: &str| f[k].as_str().unwrap_or("?").to_string();
            (s("severity"), s("api"), s("message"))
        })
        .collect()
}

/// Runs the pool client `name` in `mode` under the shim with `GPULEAK_POOL_SAMPLE=sample`,
/// writing its trace into `dir`: (stdout, trace).
fn run_pool_client(dir: &Path, name: &str, mode: &str, sample: &str) -> (String, PathBuf) {
    let trace = dir.join(format!("{name}-{mode}-{sample}.trace"));
    let out = shim_command(client(name), &trace)
        .arg(mode)
        .env("GPULEAK_POOL_SAMPLE", sample)
        .output()
        .unwrap();
    assert_ok(&out);
    (String::from_utf8(out.stdout).unwrap(), trace)
}

/// A memory pool created and never destroyed keeps what it reserved until the process ends: a
/// `pool-leak` warning at its creation stack with the bytes it last reserved. A destroyed pool,
/// a refused creation or destroy, and the exporter's own destroyed pool are no finding; an
/// imported pool never destroyed is one.
#[test]
fn memory_pools_never_destroyed_are_pool_leaks() {
    const SIZE: u64 = 4 << 20;
    let dir = TempDir::new();
    // `sample` (GPULEAK_POOL_SAMPLE) 1: every stream-ordered call samples its pool.
    let run_sampled = |name: &str, mode: &str, sample: &str| run_pool_client(dir.path(), name, mode, sample);
    let run = |name: &str, mode: &str| run_sampled(name, mode, "64");

    let (stdout, trace) = run("report_pools", "leak");
    assert!(stdout.contains(&format!("reserved {SIZE}\n")), "{stdout}");
    let r = report_json(&[], &[&trace]);
    assert_eq!(r["leaks"], serde_json::json!([]), "{r:#}");
    let found = pool_leaks(&r);
    assert_eq!(found.len(), 1, "{r:#}");
    let (severity, api, message) = &found[0];
    assert_eq!((severity.as_str(), api.as_str()), ("warning", "cuMemPoolCreate"));
    assert!(
        message.contains("created by cuMemPoolCreate on device 0 was never destroyed"),
        "{message}"
    );
    assert!(
        message.contains("it reserved up to 4.0 MiB of memory while sampled"),
        "{message}"
    );
    let f = &r["findings"][0];
    assert_eq!(u(&f["reserved_bytes_max"]), SIZE, "{f}");
    assert_frame0(&f["stack"], "make_pool", "report_pools");
    let created = of_type(&dump(&trace), "PoolCreate")
        .iter()
        .map(|c| {
            (
                c["api"].as_str().unwrap().to_string(),
                u(&c["location_type"]),
                u(&c["result"]),
            )
        })
        .collect::<Vec<_>>();
    assert_eq!(created, [("cuMemPoolCreate".to_string(), 1, 0)]);
    // A warning fails a check only when asked to, and a suppression silences it.
    let check = |args: &[&str]| {
        std::process::Command::new(gpuleak_e2e::gpuleak_bin())
            .arg("check")
            .args(args)
            .arg(&trace)
            .output()
            .unwrap()
    };
    assert_eq!(check(&[]).status.code(), Some(0));
    let failed = check(&["--fail-on", "warning"]);
    assert_eq!(
        failed.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&failed.stdout)
    );
    assert!(String::from_utf8_lossy(&failed.stdout).contains("pool-leak"));
    let supp = dir.path().join("supp.txt");
    fs::write(&supp, "pool-leak:^make_pool$\n").unwrap();
    let supp_arg = supp.to_str().unwrap();
    assert_eq!(
        check(&["--fail-on", "warning", "--suppressions", supp_arg])
            .status
            .code(),
        Some(0)
    );

    // Sampling every call: the free samples the pool its memory came from (asked of the
    // pointer before the free), which keeps the 4 MiB reserved.
    let (_, sampled) = run_sampled("report_pools", "leak", "1");
    let records = dump(&sampled);
    let pool = u(&of_type(&records, "PoolCreate")[0]["pool"]);
    let usage: Vec<(u64, u64)> = of_type(&records, "PoolUsage")
        .iter()
        .filter(|p| u(&p["pool"]) == pool)
        .map(|p| (u(&p["reserved"]), u(&p["used"])))
        .collect();
    assert_eq!(usage, [(SIZE, SIZE), (SIZE, 0)]);

    // The twin destroys its pool: nothing, and the memory pass says the pool was destroyed.
    let (stdout, trace) = run("report_pools", "clean");
    assert!(stdout.contains(&format!("reserved {SIZE}\n")), "{stdout}");
    let r = report_json(&["--memory"], &[&trace]);
    assert_eq!(r["findings"], serde_json::json!([]), "{r:#}");
    assert_eq!(r["leaks"], serde_json::json!([]), "{r:#}");
    let pools = r["process"]["memory"]["pools"].as_array().unwrap();
    assert!(
        !pools.is_empty() && pools.iter().all(|p| p["destroyed_seq"].is_u64()),
        "{pools:#?}"
    );

    // A pool destroyed with an allocation outstanding: the allocation is freed after, so
    // neither is a leak, and no sample names the pool once it is destroyed.
    let (_, outstanding) = run_sampled("report_pools", "outstanding", "1");
    let r = report_json(&[], &[&outstanding]);
    assert_eq!(r["findings"], serde_json::json!([]), "{r:#}");
    assert_eq!(r["leaks"], serde_json::json!([]), "{r:#}");
    let records = dump(&outstanding);
    let pool = u(&of_type(&records, "PoolCreate")[0]["pool"]);
    let destroyed = records.iter().position(|r| r["type"] == "PoolDestroy").unwrap();
    assert!(
        !records[destroyed..]
            .iter()
            .any(|r| r["type"] == "PoolUsage" && u(&r["pool"]) == pool),
        "{records:#?}"
    );

    // Refused calls make and end nothing.
    let (stdout, trace) = run("report_pools", "failed");
    assert!(stdout.contains("bad properties: 1\n"), "{stdout}");
    assert!(stdout.contains("default pool: 1\n"), "{stdout}");
    assert!(stdout.contains("second destroy: 1\n"), "{stdout}");
    let r = report_json(&[], &[&trace]);
    assert_eq!(r["findings"], serde_json::json!([]), "{r:#}");
    let results: Vec<(String, u64)> = dump(&trace)
        .iter()
        .filter(|c| c["type"] == "PoolCreate" || c["type"] == "PoolDestroy")
        .map(|c| (c["type"].as_str().unwrap().to_string(), u(&c["result"])))
        .collect();
    let named = |t: &str, r: u64| (t.to_string(), r);
    assert_eq!(
        results,
        [
            named("PoolCreate", 1),
            named("PoolDestroy", 1),
            named("PoolCreate", 0),
            named("PoolDestroy", 0),
            named("PoolDestroy", 1)
        ]
    );

    // An imported pool is a pool of its own to destroy.
    let (_, trace) = run("report_pools", "import");
    let r = report_json(&[], &[&trace]);
    let found = pool_leaks(&r);
    assert_eq!(found.len(), 1, "{r:#}");
    assert_eq!(found[0].1, "cuMemPoolImportFromShareableHandle");
    assert!(found[0].2.contains("exporting process's"), "{}", found[0].2);
    assert_frame0(&r["findings"][0]["stack"], "import_pool", "report_pools");

    // Through the runtime, whose driver calls come from cuGetProcAddress: the runtime call is
    // named, and the stack is the program's.
    let (_, trace) = run("report_pools_runtime", "leak");
    let r = report_json(&[], &[&trace]);
    let found = pool_leaks(&r);
    assert_eq!(found.len(), 1, "{r:#}");
    assert!(
        found[0].2.contains("cuMemPoolCreate (through cudaMemPoolCreate)"),
        "{}",
        found[0].2
    );
    assert_frame0(&r["findings"][0]["stack"], "make_runtime_pool", "report_pools_runtime");
    let (_, trace) = run("report_pools_runtime", "clean");
    assert_eq!(report_json(&[], &[&trace])["findings"], serde_json::json!([]));
}

/// `cuMemPoolTrimTo` gives reserved memory back at once, so a successful trim samples its pool
/// then, whatever the count to the next sample: the memory pass ends the pool at 0 bytes
/// reserved where its twin, never trimmed, ends at what the pool kept. A refused trim (of a
/// destroyed pool) and `GPULEAK_POOL_SAMPLE=0` sample nothing.
#[test]
fn a_trimmed_pool_is_sampled_at_the_trim() {
    const SIZE: u64 = 4 << 20;
    let dir = TempDir::new();
    let run = |mode: &str, sample: &str| run_pool_client(dir.path(), "report_pools", mode, sample);
    // (reserved, used) of every sample of the first pool created, and the memory pass's last.
    let samples = |trace: &Path| {
        let records = dump(trace);
        let created = of_type(&records, "PoolCreate");
        let pool = u(&created[0]["pool"]);
        let others: Vec<u64> = created[1..].iter().map(|c| u(&c["pool"])).collect();
        let usage = of_type(&records, "PoolUsage");
        assert!(usage.iter().all(|p| !others.contains(&u(&p["pool"]))), "{usage:#?}");
        let seen: Vec<(u64, u64)> = usage
            .iter()
            .filter(|p| u(&p["pool"]) == pool)
            .map(|p| (u(&p["reserved"]), u(&p["used"])))
            .collect();
        let r = report_json(&["--memory"], &[trace]);
        let pools = r["process"]["memory"]["pools"].as_array().unwrap().clone();
        let entry = pools.iter().find(|p| u(&p["pool"]) == pool).unwrap().clone();
        (seen, u(&entry["reserved_bytes"]), u(&entry["reserved_bytes_max"]))
    };

    let (stdout, trimmed) = run("trimmed", "64");
    assert!(stdout.contains("trimmed 0\n"), "{stdout}");
    assert!(stdout.contains("trim of a destroyed pool: 1\n"), "{stdout}");
    assert_eq!(samples(&trimmed), (vec![(SIZE, SIZE), (0, 0)], 0, SIZE));

    // The twin, never trimmed: its one sample (the allocation, the thread's first
    // stream-ordered call) is its last.
    let (_, kept) = run("leak", "64");
    assert_eq!(samples(&kept), (vec![(SIZE, SIZE)], SIZE, SIZE));

    let (_, off) = run("trimmed", "0");
    assert!(of_type(&dump(&off), "PoolUsage").is_empty());
}

/// `cuMemCreate` puts memory where its properties say, not on the current context's device:
/// the shim's live accounting and the report's per-device memory follow the properties.
#[test]
fn physical_memory_is_counted_on_the_device_its_properties_name() {
    const GRAN: u64 = 2 << 20;
    let dir = TempDir::new();
    let trace = dir.path().join("devices.trace");
    let out = shim_command(client("report_vmm_refs"), &trace)
        .arg("devices")
        .env("SIMCUDA_DEVICES", "2")
        .env("GPULEAK_LIVE", "1")
        .output()
        .unwrap();
    assert_ok(&out);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains(&format!("live on 0: 0, on 1: {}\n", 3 * GRAN)),
        "{stdout}"
    );
    let r = report_json(&["--memory"], &[&trace]);
    let devices = r["process"]["memory"]["devices"].as_array().unwrap();
    let peaks: Vec<(&str, u64)> = devices
        .iter()
        .map(|d| (d["device"].as_str().unwrap(), u(&d["peak_bytes"])))
        .collect();
    assert_eq!(peaks, [("device 1", 3 * GRAN)], "{devices:#?}");
}

#[test]
fn text_reports_match_their_golden_files() {
    let dir = TempDir::new();
    for name in ["report_leaks", "shim_families"] {
        let trace = traced(&dir, name);
        let text = report_text(&[], &[&trace]);
        assert!(!text.contains('\x1b'), "no colour when stdout is not a terminal");
        let masked = mask(&text, &trace, name);
        for line in masked.lines() {
            assert!(line.chars().count() <= 80, "longer than 80 columns: {line:?}");
        }
        assert_golden(&format!("{name}.txt"), &masked);
    }
}

#[test]
fn top_limits_the_groups_shown_but_not_the_totals() {
    let dir = TempDir::new();
    let trace = traced(&dir, "report_leaks");
    let r = report_json(&["--top", "1"], &[&trace]);
    assert_eq!(r["leaks"].as_array().unwrap().len(), 1);
    assert_eq!(u(&r["leaks"][0]["bytes"]), 10000);
    assert_eq!(u(&r["summary"]["leaked_bytes"]), 16000);
    assert_eq!(u(&r["processes"][0]["omitted"]["leaks"]["groups"]), 1);
    let text = report_text(&["--top", "1"], &[&trace]);
    assert!(text.contains("1 more leak groups (6000 bytes)"), "{text}");
}

#[test]
fn several_traces_give_a_section_each_and_one_summary() {
    let dir = TempDir::new();
    let leaks = traced(&dir, "report_leaks");
    let families = traced(&dir, "shim_families");
    let r = report_json(&[], &[&leaks, &families]);
    let processes = r["processes"].as_array().unwrap();
    assert_eq!(processes.len(), 2);
    assert_eq!(r.get("process"), None, "one `process` only for one trace");
    assert_eq!(u(&r["summary"]["leaked_bytes"]), 16000 + 1077);
    assert_eq!(
        u(&r["summary"]["allocations"]),
        u(&processes[0]["summary"]["allocations"]) + u(&processes[1]["summary"]["allocations"])
    );
    let sizes: Vec<u64> = r["leaks"].as_array().unwrap().iter().map(|l| u(&l["bytes"])).collect();
    assert_eq!(sizes, [10000, 6000, 777, 300]);
    let pids: Vec<&Value> = processes.iter().map(|p| &p["pid"]).collect();
    assert_eq!(r["leaks"][0]["pid"], *pids[0]);
    assert_eq!(r["leaks"][2]["pid"], *pids[1]);
    assert_eq!(r["findings"].as_array().unwrap().len(), 2);

    let text = report_text(&[], &[&leaks, &families]);
    assert_eq!(text.matches("gpuleak report: pid").count(), 2);
    assert!(text.contains("Total over 2 processes:"), "{text}");
}

#[test]
fn an_unreadable_trace_is_an_error_with_its_path_and_offset() {
    let dir = TempDir::new();
    let bogus = dir.path().join("bogus.trace");
    fs::write(&bogus, b"this is not a gpuleak trace at all, not even close").unwrap();
    let out = report(&[], &[&bogus]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr,
        format!(
            "gpuleak: {}: not a gpuleak trace: bad magic bytes at offset 0\n",
            bogus.display()
        )
    );
    assert!(out.stdout.is_empty());

    let missing = dir.path().join("missing.trace");
    let out = report(&["--format", "json"], &[&missing]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with(&format!("gpuleak: {}: ", missing.display())));
}

#[test]
fn a_trace_cut_short_reports_what_was_read_with_a_note() {
    let dir = TempDir::new();
    let trace = traced(&dir, "report_leaks");
    // Cut inside the last allocation record (pin_staging's): what came before still reports.
    let records = dump(&trace);
    let last_alloc = of_type(&records, "Alloc").last().map(|r| u(&r["offset"])).unwrap();
    let mut bytes = fs::read(&trace).unwrap();
    bytes.truncate(last_alloc as usize + 3);
    let cut = dir.path().join("cut.trace");
    fs::write(&cut, bytes).unwrap();

    let r = report_json(&[], &[&cut]);
    let sizes: Vec<u64> = r["leaks"].as_array().unwrap().iter().map(|l| u(&l["bytes"])).collect();
    assert_eq!(sizes, [6000], "make_scratch's leaks were read");
    let notes: Vec<&str> = r["notes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n.as_str().unwrap())
        .collect();
    assert!(
        notes
            .iter()
            .any(|n| n.contains("unreadable records") && n.contains("offset")),
        "{notes:?}"
    );
    assert!(notes.iter().any(|n| n.contains("no exit record")), "{notes:?}");
    let text = report_text(&[], &[&cut]);
    assert!(text.contains("note: unreadable records"), "{text}");
}

/// A directory as a multi-process run leaves it: report_leaks as three ranks (rank 1 with an
/// extra argument, so that its make_scratch leaks three times instead of twice), its clean
/// twin, and things that are not traces: a text file, an empty file, a file that only looks
/// like one by name, and a subdirectory with a trace in it (not searched).
fn run_directory() -> TempDir {
    let dir = TempDir::new();
    for rank in 0..3 {
        let trace = dir.path().join(format!("rank{rank}.trace"));
        let mut cmd = shim_command(client("report_leaks"), &trace);
        if rank == 1 {
            cmd.arg("again");
        }
        assert_ok(&cmd.output().unwrap());
    }
    let clean = dir.path().join("twin.trace");
    assert_ok(&shim_command(client("report_clean"), &clean).output().unwrap());
    fs::write(dir.path().join("README.txt"), "traces of a run\n").unwrap();
    fs::write(dir.path().join("empty"), "").unwrap();
    fs::write(dir.path().join("fake.trace"), "GPULEAK but no zero byte after it").unwrap();
    fs::create_dir(dir.path().join("old")).unwrap();
    fs::copy(&clean, dir.path().join("old").join("rank9.trace")).unwrap();
    dir
}

/// The report masked for a golden file: the directory, pids, and frames outside the client.
fn mask_directory(text: &str, dir: &Path) -> String {
    let text = text.replace(&dir.display().to_string(), "DIR");
    let mut out = Vec::new();
    let mut outside = false;
    for line in text.lines() {
        let line = mask_pids(&line.replace(&client("report_leaks").display().to_string(), "EXE"));
        let line = line.replace(&client("report_clean").display().to_string(), "EXE");
        if !line.trim_start().starts_with('#') {
            outside = false;
        } else if outside {
            continue;
        } else if !line.ends_with("(report_leaks)") && !line.ends_with("(report_clean)") {
            outside = true;
            out.push("    ...".to_string());
            continue;
        }
        out.push(line);
    }
    out.join("\n") + "\n"
}

#[test]
fn a_directory_is_every_trace_in_it_with_a_merged_view_of_the_sites() {
    let dir = run_directory();
    let r = report_json(&[], &[dir.path()]);
    let traces: Vec<String> = r["processes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["trace"].as_str().unwrap().to_string())
        .collect();
    let expected: Vec<String> = ["rank0.trace", "rank1.trace", "rank2.trace", "twin.trace"]
        .iter()
        .map(|n| dir.path().join(n).display().to_string())
        .collect();
    assert_eq!(
        traces, expected,
        "the traces in the directory, by name, and nothing else"
    );
    assert_eq!(u(&r["summary"]["leaked_bytes"]), 3 * 10000 + 7 * 3000);

    let merged = r["merged_leaks"].as_array().unwrap();
    assert_eq!(merged.len(), 2, "{merged:#?}");
    let (staging, scratch) = (&merged[0], &merged[1]);
    assert_eq!((u(&staging["bytes"]), u(&staging["allocations"])), (30000, 3));
    assert_eq!(u(&staging["process_count"]), 3);
    assert_eq!(staging["kind"], "host");
    assert_frame0(&staging["stack"], "pin_staging", "report_leaks");
    assert_eq!((u(&scratch["bytes"]), u(&scratch["allocations"])), (21000, 7));
    assert_eq!(scratch["api"], "cuMemAlloc_v2");
    assert!(
        scratch["site"]
            .as_str()
            .unwrap()
            .starts_with("make_scratch@report_leaks.c:21|main@report_leaks.c:"),
        "{scratch}"
    );
    let per: Vec<(u64, u64)> = scratch["per_process"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (u(&p["bytes"]), u(&p["allocations"])))
        .collect();
    assert_eq!(per, [(6000, 2), (9000, 3), (6000, 2)]);
    assert_eq!(scratch["per_process"][1]["pid"], r["processes"][1]["pid"]);
    assert_eq!(r["merged_omitted"], serde_json::json!({"sites": 0, "bytes": 0}));

    // The merged view, as a golden file: what stays the same from run to run.
    let golden: Vec<Value> = merged
        .iter()
        .map(|m| {
            let mut m = m.clone();
            let stack: Vec<Value> = m["stack"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|f| f["module"] == "report_leaks")
                .map(|f| {
                    let file = f["file"].as_str().and_then(|p| p.rsplit('/').next());
                    serde_json::json!({"function": f["function"], "file": file, "line": f["line"]})
                })
                .collect();
            m["stack"] = Value::from(stack);
            for p in m["per_process"].as_array_mut().unwrap() {
                p["pid"] = Value::from("PID");
                p["trace"] = Value::from(
                    p["trace"]
                        .as_str()
                        .unwrap()
                        .replace(&dir.path().display().to_string(), "DIR"),
                );
            }
            m
        })
        .collect();
    assert_golden(
        "directory_merged.json",
        &(serde_json::to_string_pretty(&golden).unwrap() + "\n"),
    );

    let out = report(&[], &[dir.path()]);
    assert_ok(&out);
    assert!(out.stderr.is_empty(), "no progress bar when stderr is not a terminal");
    let text = String::from_utf8(out.stdout).unwrap();
    let masked = mask_directory(&text, dir.path());
    for line in masked.lines() {
        assert!(line.chars().count() <= 80, "longer than 80 columns: {line:?}");
    }
    assert_golden("directory.txt", &masked);
}

#[test]
fn one_thread_and_every_core_give_the_same_report() {
    let dir = run_directory();
    for format in ["text", "json"] {
        let serial = report(&["--format", format, "-j", "1"], &[dir.path()]);
        assert_ok(&serial);
        for jobs in [None, Some("2"), Some("8")] {
            let mut args = vec!["--format", format];
            if let Some(j) = jobs {
                args.extend(["--jobs", j]);
            }
            let parallel = report(&args, &[dir.path()]);
            assert_ok(&parallel);
            assert!(
                parallel.stdout == serial.stdout,
                "--jobs {jobs:?} differs from -j 1 in {format}"
            );
        }
    }
    // A trace named again, and a trace alone (decoded beside its replay).
    let rank0 = dir.path().join("rank0.trace");
    let again = report(&["--format", "json"], &[&rank0, dir.path()]);
    assert_ok(&again);
    let doc: Value = serde_json::from_slice(&again.stdout).unwrap();
    assert_eq!(doc["processes"].as_array().unwrap().len(), 4, "rank0 once");
    assert_eq!(
        report(&["-j", "1"], &[&rank0]).stdout,
        report(&["-j", "2"], &[&rank0]).stdout
    );
    let zero = report(&["-j", "0"], &[&rank0]);
    assert_eq!(zero.status.code(), Some(2));
}

#[test]
fn a_directory_without_traces_is_an_error_naming_it() {
    let dir = TempDir::new();
    let out = report(&[], &[dir.path()]);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(
        String::from_utf8_lossy(&out.stderr),
        format!(
            "gpuleak: {}: no gpuleak trace in this directory (a trace is a file that starts with the bytes \"GPULEAK\\0\"; subdirectories are not searched)\n",
            dir.path().display()
        )
    );
    assert!(out.stdout.is_empty());
    // Only files that are not traces: the same.
    fs::write(dir.path().join("notes.trace"), "not a trace").unwrap();
    let out = report(&["--format", "json"], &[dir.path()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    // A trace of a bad version in a directory is an error naming the file.
    let bad = dir.path().join("future.trace");
    let mut bytes = b"GPULEAK\0".to_vec();
    bytes.extend([99, 0, 0, 0]);
    bytes.resize(4096, 0);
    fs::write(&bad, bytes).unwrap();
    let out = report(&[], &[dir.path()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.starts_with(&format!("gpuleak: {}: ", bad.display())), "{stderr}");
    assert!(stderr.contains("offset 8"), "{stderr}");
}

/// A report with no leak, no finding and nothing left unreleased.
fn assert_nothing_left(r: &Value) {
    assert_eq!(r["leaks"], serde_json::json!([]), "{r:#}");
    assert_eq!(r["findings"], serde_json::json!([]), "{r:#}");
    assert_eq!(r["unreleased"], serde_json::json!([]), "{r:#}");
}
