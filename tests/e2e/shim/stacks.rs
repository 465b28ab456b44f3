//! Stacks as the shim records them: from the program's call site, without a frame of the shim,
//! one per call site however many take turns, with signed return addresses stripped, modules
//! loaded late recorded, and object stacks and the clock as their settings say.

use gpuleak_e2e::{client, shim_command, TempDir};

use crate::trace::{assert_ok, dump, hex, of_type};

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
