//! Handles that need their own release (retained, imported and multicast VMM handles, IPC and
//! pool imports, external memory), memory pools never destroyed and their sampled usage, and
//! physical memory counted on its device.

use std::fs;
use std::path::{Path, PathBuf};

use gpuleak_e2e::{client, shim_command, TempDir};
use serde_json::Value;

use super::{assert_frame0, assert_nothing_left, assert_one_bad_free, functions, report_json, report_text, u};
use crate::trace::{assert_ok, dump, of_type};

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
