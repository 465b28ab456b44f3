//! Memory by device and by pool: each device's own peak and top sites, sizes rounded as the
//! driver aligns them, and a pool's reserved bytes beyond what is used.

use std::path::PathBuf;

use gpuleak_e2e::{client, gpuleak_report as report, shim_command, TempDir};
use serde_json::Value;

use super::{functions, memory_json, rendered_dom, traced, u, MIB};
use crate::trace::assert_ok;

/// Runs `memory_devices` on two simulated devices.
fn two_devices(dir: &TempDir) -> PathBuf {
    let trace = dir.path().join("memory_devices.trace");
    let mut cmd = shim_command(client("memory_devices"), &trace);
    cmd.env("SIMCUDA_DEVICES", "2").env("SIMCUDA_MEM_BYTES", "64MiB");
    let out = cmd.output().unwrap();
    assert_ok(&out);
    trace
}

/// The first function of a site of `m["sites"]`.
fn site_function(m: &Value, id: &Value) -> String {
    let site = m["sites"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["stack_id"] == *id)
        .unwrap_or_else(|| panic!("site {id} not in sites"));
    functions(&site["stack"])[0].to_string()
}

#[test]
fn each_device_shows_its_own_peak_and_top_sites() {
    let dir = TempDir::new();
    let trace = two_devices(&dir);
    let doc = memory_json(&trace);
    let m = &doc["process"]["memory"];
    let devices = m["devices"].as_array().unwrap();
    let dev = |name: &str| devices.iter().find(|d| d["device"] == name).unwrap();
    let (d0, d1) = (dev("device 0"), dev("device 1"));
    assert_eq!(u(&d0["peak_bytes"]), 33 * MIB);
    assert_eq!(u(&d1["peak_bytes"]), 48 * MIB);
    assert!(u(&d0["peak_seq"]) < u(&d1["peak_seq"]), "device 0 peaks first");
    // The process's peak is device 1's moment: keep_dev0 and fill_dev1, no fill_dev0.
    assert_eq!(u(&m["peak"]["bytes"]), 49 * MIB);
    let by = |v: &Value| -> Vec<(String, u64)> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|s| (site_function(m, &s["stack_id"]), u(&s["bytes"])))
            .collect()
    };
    let s = |f: &str, b: u64| (f.to_string(), b);
    assert_eq!(
        by(&m["peak"]["by_site"]),
        [s("fill_dev1", 48 * MIB), s("keep_dev0", MIB)]
    );
    // Each device: its own peak, by site, and its own stacked sites.
    assert_eq!(by(&d0["peak_by_site"]), [s("fill_dev0", 32 * MIB), s("keep_dev0", MIB)]);
    assert_eq!(by(&d1["peak_by_site"]), [s("fill_dev1", 48 * MIB)]);
    let stacked = |d: &Value| -> Vec<String> {
        d["stacked"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| site_function(m, &s["stack_id"]))
            .collect()
    };
    let mut s0 = stacked(d0);
    s0.sort();
    assert_eq!(s0, ["fill_dev0", "keep_dev0"]);
    assert_eq!(stacked(d1), ["fill_dev1"]);
    let series = d1["stacked"][0]["live_bytes"].as_array().unwrap();
    assert_eq!(series.len(), m["stacked"]["times_ns"].as_array().unwrap().len());
    assert_eq!(series.iter().map(u).max(), Some(48 * MIB));

    // Text: each device's peak lists its own sites.
    let out = report(&["--memory"], &[&trace]);
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    let section = |name: &str| {
        let start = text
            .find(&format!("\n{name}: peak"))
            .unwrap_or_else(|| panic!("{name}:\n{text}"));
        let end = text[start + 1..].find("\n\n").map_or(text.len(), |e| start + 1 + e);
        text[start..end].to_string()
    };
    let t0 = section("device 0");
    let t1 = section("device 1");
    assert!(t0.contains("peak 33.0 MiB") && t0.contains("at its peak:"), "{t0}");
    assert!(t0.contains("32.0 MiB  fill_dev0 memory_devices.c:"), "{t0}");
    assert!(!t0.contains("fill_dev1"), "{t0}");
    assert!(t1.contains("48.0 MiB  fill_dev1 memory_devices.c:"), "{t1}");
    assert!(!t1.contains("fill_dev0"), "{t1}");

    // HTML: a stacked chart and a peak table per device.
    let page = dir.path().join("devices.html");
    assert_ok(&report(&["--format", "html", "-o", page.to_str().unwrap()], &[&trace]));
    let profile = TempDir::new();
    let dom = rendered_dom(&page, profile.path());
    assert!(dom.contains("data-rendered=\"ok\""), "{}", &dom[..dom.len().min(3000)]);
    assert_eq!(dom.matches("class=\"timeline-device\"").count(), 2);
    assert_eq!(dom.matches("<table class=\"device-peak\"").count(), 2);
    assert!(dom.contains("device 1: live bytes by allocation site (peak 48.0 MiB)"));
}

#[test]
fn one_device_has_no_per_device_repeat_of_the_peak() {
    let dir = TempDir::new();
    let trace = traced(&dir, "memory_steps", "staircase");
    let doc = memory_json(&trace);
    let m = &doc["process"]["memory"];
    // The device's breakdown is the process's (one device), and the text does not repeat it.
    let d = &m["devices"][0];
    assert_eq!(d["peak_by_site"], m["peak"]["by_site"]);
    assert!(!d["stacked"].as_array().unwrap().is_empty());
    let out = report(&["--memory"], &[&trace]);
    assert_ok(&out);
    assert!(!String::from_utf8_lossy(&out.stdout).contains("at its peak:"));
}

#[test]
fn granted_bytes_are_the_sizes_rounded_as_the_driver_aligns_them() {
    let dir = TempDir::new();
    let run = |mode: &str| {
        let trace = dir.path().join(format!("granted-{mode}.trace"));
        let mut cmd = shim_command(client("memory_granted"), &trace);
        cmd.arg(mode);
        let out = cmd.output().unwrap();
        assert_ok(&out);
        (trace, String::from_utf8_lossy(&out.stdout).to_string())
    };
    // 64 x 1000 bytes: the simulator places them 1024 apart, as the rule says.
    let (odd, stdout) = run("odd");
    assert!(stdout.contains("gap 1024"), "{stdout}");
    let doc = memory_json(&odd);
    let d = &doc["process"]["memory"]["devices"][0];
    assert_eq!(u(&d["peak_bytes"]), 64_000);
    assert_eq!(u(&d["granted_peak_bytes"]), 65_536);
    let granted: Vec<u64> = d["granted_bytes_max"].as_array().unwrap().iter().map(u).collect();
    let live: Vec<u64> = d["live_bytes_max"].as_array().unwrap().iter().map(u).collect();
    assert_eq!(granted.len(), live.len());
    assert_eq!(granted.iter().max(), Some(&65_536));
    // Bucket by bucket, each live allocation holds 24 bytes more than it asked for.
    for (g, l) in granted.iter().zip(&live) {
        assert_eq!(*g, l / 1000 * 1024, "granted {g} for {l} asked for");
    }
    assert_eq!(d["granted_bytes"].as_array().unwrap().last().map(u), Some(0));
    assert!(d["granted_rule"].as_str().unwrap().contains("256 bytes"));
    let text = String::from_utf8_lossy(&report(&["--memory"], &[&odd]).stdout).to_string();
    assert!(
        text.contains(
            "granted: peak 64.0 KiB, 1.5 KiB more than asked for (device allocations rounded up to 256 bytes)"
        ),
        "{text}"
    );

    // Its twin: 1024 bytes each, granted as asked.
    let (even, stdout) = run("even");
    assert!(stdout.contains("gap 1024"), "{stdout}");
    let doc = memory_json(&even);
    let d = &doc["process"]["memory"]["devices"][0];
    assert_eq!(u(&d["peak_bytes"]), 65_536);
    assert_eq!(u(&d["granted_peak_bytes"]), 65_536);
    assert_eq!(d["granted_bytes_max"], d["live_bytes_max"]);
    let text = String::from_utf8_lossy(&report(&["--memory"], &[&even]).stdout).to_string();
    assert!(text.contains("granted: peak 64.0 KiB, as asked"), "{text}");

    // HTML: a granted line beside the requested one only where they differ.
    let profile = TempDir::new();
    for (trace, lines) in [(&odd, 1), (&even, 0)] {
        let page = dir.path().join("granted.html");
        assert_ok(&report(&["--format", "html", "-o", page.to_str().unwrap()], &[trace]));
        let dom = rendered_dom(&page, profile.path());
        assert!(dom.contains("data-rendered=\"ok\""), "{}", &dom[..dom.len().min(3000)]);
        assert_eq!(
            dom.matches("<title>live bytes (granted: sizes rounded up to 256 bytes)</title>")
                .count(),
            lines,
            "{}",
            trace.display()
        );
    }
}

/// Runs `memory_pool MODE` with `GPULEAK_POOL_SAMPLE=every` (None: unset); returns the trace
/// and what the program printed.
fn pooled(dir: &TempDir, mode: &str, every: Option<&str>) -> (PathBuf, String) {
    let trace = dir
        .path()
        .join(format!("pool-{mode}-{}.trace", every.unwrap_or("default")));
    let mut cmd = shim_command(client("memory_pool"), &trace);
    cmd.arg(mode);
    if let Some(every) = every {
        cmd.env("GPULEAK_POOL_SAMPLE", every);
    }
    let out = cmd.output().unwrap();
    assert_ok(&out);
    (trace, String::from_utf8_lossy(&out.stdout).to_string())
}

#[test]
fn a_pool_keeping_freed_memory_shows_reserved_beyond_used() {
    let dir = TempDir::new();
    let (keep, stdout) = pooled(&dir, "keep", Some("1"));
    assert!(
        stdout.contains(&format!("reserved {} used 0", 16 * MIB + 4096)),
        "{stdout}"
    );
    let doc = memory_json(&keep);
    let m = &doc["process"]["memory"];
    let pools = m["pools"].as_array().unwrap();
    assert_eq!(pools.len(), 1, "{pools:#?}");
    let p = &pools[0];
    assert_eq!(p["device"], "device 0");
    // Every call sampled, a record only when a value changed: 16 + 16 + 8 + 8 calls.
    assert!(u(&p["samples"]) >= 20 && u(&p["samples"]) <= 48, "{p:#}");
    assert_eq!(u(&p["reserved_bytes_max"]), 16 * MIB + 4096);
    assert_eq!(u(&p["used_bytes_max"]), 16 * MIB);
    // At the end: 16 MiB reserved and nothing used, as the program itself read it.
    assert_eq!(u(&p["reserved_bytes"]), 16 * MIB + 4096);
    assert_eq!(u(&p["used_bytes"]), 0);
    let d = &m["devices"][0];
    assert_eq!(u(&d["pool_samples"]), u(&p["samples"]));
    let reserved: Vec<u64> = d["pool_reserved_bytes"].as_array().unwrap().iter().map(u).collect();
    let used: Vec<u64> = d["pool_used_bytes"].as_array().unwrap().iter().map(u).collect();
    assert_eq!(reserved.len(), d["live_bytes"].as_array().unwrap().len());
    assert_eq!(reserved.last(), Some(&(16 * MIB + 4096)));
    assert!(used.last().is_some_and(|u| *u <= 4096), "{used:?}");
    let out = report(&["--memory"], &[&keep]);
    assert_ok(&out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("stream-ordered pools (") && text.contains("reserved up to 16.0 MiB, used up to 16.0 MiB"),
        "{text}"
    );
    assert!(
        text.contains("16.0 MiB reserved, 0 B used at the last sample (16.0 MiB unused)"),
        "{text}"
    );

    // Its twin: the default threshold gives the memory back at the synchronisation.
    let (trim, stdout) = pooled(&dir, "trim", Some("1"));
    assert!(stdout.contains("reserved 4096 used 0"), "{stdout}");
    let doc = memory_json(&trim);
    let p = &doc["process"]["memory"]["pools"][0];
    assert_eq!(u(&p["reserved_bytes_max"]), 16 * MIB, "{p:#}");
    assert_eq!(u(&p["reserved_bytes"]), 4096);
    assert_eq!(u(&p["used_bytes"]), 0);

    // Sampling off: no pool records, and the rest of the report is the same.
    let (off, _) = pooled(&dir, "keep", Some("0"));
    let doc = memory_json(&off);
    let m = &doc["process"]["memory"];
    assert_eq!(m["pools"], serde_json::json!([]));
    assert_eq!(u(&m["devices"][0]["pool_samples"]), 0);
    assert_eq!(u(&m["devices"][0]["peak_bytes"]), 16 * MIB);
    let text = String::from_utf8_lossy(&report(&["--memory"], &[&off]).stdout).to_string();
    assert!(!text.contains("stream-ordered pools"), "{text}");

    // By default one call in 64 on each thread: the first call is sampled.
    let (default, _) = pooled(&dir, "keep", None);
    let doc = memory_json(&default);
    let samples = u(&doc["process"]["memory"]["pools"][0]["samples"]);
    assert!((1..=2).contains(&samples), "48 calls, one in 64 sampled: {samples}");

    // HTML: the reserved and used lines on the device chart.
    let page = dir.path().join("pool.html");
    assert_ok(&report(&["--format", "html", "-o", page.to_str().unwrap()], &[&keep]));
    let profile = TempDir::new();
    let dom = rendered_dom(&page, profile.path());
    assert!(dom.contains("data-rendered=\"ok\""), "{}", &dom[..dom.len().min(3000)]);
    assert!(dom.contains("<title>stream-ordered pools: reserved (sampled)</title>"));
    assert!(dom.contains("<title>stream-ordered pools: used (sampled)</title>"));
}
