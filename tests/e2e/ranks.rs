//! The ranks of a distributed job: the shim reads each process's rank from its launcher's
//! variables; a report over the job's traces has a per-rank table that flags the rank that
//! stands apart, and merged sites that say on how many ranks they appear.

use std::path::{Path, PathBuf};

use gpuleak_e2e::{client, gpuleak_report, shim_command, TempDir};
use serde_json::Value;

use crate::trace::assert_ok;

/// Runs eight ranks under torchrun's variables, rank `r` running `program(r)`; their traces.
fn job(dir: &Path, program: impl Fn(u64) -> &'static str) -> Vec<PathBuf> {
    (0..8u64)
        .map(|r| {
            let trace = dir.join(format!("rank{r}.trace"));
            let out = shim_command(client(program(r)), &trace)
                .env("RANK", r.to_string())
                .env("LOCAL_RANK", (r % 4).to_string())
                .env("WORLD_SIZE", "8")
                .env("TORCHELASTIC_RUN_ID", "e2e")
                .output()
                .unwrap();
            assert_ok(&out);
            trace
        })
        .collect()
}

fn report(args: &[&str], traces: &[PathBuf]) -> String {
    let paths: Vec<&Path> = traces.iter().map(PathBuf::as_path).collect();
    let out = gpuleak_report(args, &paths);
    assert_ok(&out);
    String::from_utf8(out.stdout).unwrap()
}

fn json(traces: &[PathBuf]) -> Value {
    serde_json::from_str(&report(&["--format", "json"], traces)).unwrap()
}

fn outliers(doc: &Value) -> Vec<(u64, Vec<String>)> {
    doc["ranks"]
        .as_array()
        .unwrap_or_else(|| panic!("no ranks table: {doc:#}"))
        .iter()
        .filter(|r| !r["outliers"].as_array().unwrap().is_empty())
        .map(|r| {
            (
                r["rank"].as_u64().unwrap(),
                r["outliers"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|o| o.as_str().unwrap().to_string())
                    .collect(),
            )
        })
        .collect()
}

#[test]
fn the_one_rank_of_eight_that_leaks_is_flagged() {
    let dir = TempDir::new();
    let traces = job(dir.path(), |r| if r == 5 { "report_leaks" } else { "report_clean" });
    let doc = json(&traces);
    let rows = doc["ranks"].as_array().unwrap();
    assert_eq!(
        rows.iter().map(|r| r["rank"].as_u64().unwrap()).collect::<Vec<_>>(),
        (0..8).collect::<Vec<_>>()
    );
    assert_eq!(rows[5]["leaked_bytes"], 16000);
    assert_eq!(rows[5]["growth_bytes"], Value::Null, "growth needs --memory");
    let flagged = outliers(&doc);
    assert_eq!(flagged.len(), 1, "{flagged:?}");
    assert_eq!(flagged[0].0, 5);
    assert!(flagged[0].1.contains(&"leaked".to_string()), "{flagged:?}");
    // Each process says where it stands.
    let p = &doc["processes"][5];
    assert_eq!(
        p["rank"],
        serde_json::json!({"rank": 5, "local_rank": 1, "world_size": 8, "launcher": "torchrun"})
    );
    assert!(p["hostname"].as_str().is_some_and(|h| !h.is_empty()));

    let text = report(&[], &traces);
    assert!(text.contains("gpuleak report: pid "), "{text}");
    assert!(text.contains(", rank 5 of 8 ("), "{text}");
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Ranks ("))
        .skip(2)
        .take_while(|l| !l.is_empty())
        .collect();
    assert_eq!(table.len(), 8, "{text}");
    for (r, line) in table.iter().enumerate() {
        assert_eq!(line.contains('!'), r == 5, "{line}");
        assert!(line.trim_start().starts_with(&r.to_string()), "{line}");
    }
    // The one site of the leaking rank is on 1 of 8 ranks, named by rank.
    assert!(text.contains("on 1 of 8 ranks,"), "{text}");
    assert!(text.contains("  in rank 5 (pid "), "{text}");
}

#[test]
fn eight_ranks_that_leak_alike_flag_none_and_say_each() {
    let dir = TempDir::new();
    let traces = job(dir.path(), |_| "report_leaks");
    let doc = json(&traces);
    assert_eq!(doc["ranks"].as_array().unwrap().len(), 8);
    assert_eq!(outliers(&doc), Vec::<(u64, Vec<String>)>::new());
    let text = report(&[], &traces);
    let table: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.starts_with("Ranks ("))
        .skip(2)
        .take(8)
        .collect();
    assert_eq!(table.len(), 8, "{text}");
    assert!(!table.iter().any(|l| l.contains('!')), "{text}");
    assert!(table.iter().all(|l| l.chars().count() <= 80), "{text}");
    assert!(text.contains("on 8 of 8 ranks, 10000 bytes each,"), "{text}");
    assert!(text.contains("on 8 of 8 ranks, 6000 bytes each,"), "{text}");
    let merged = doc["merged_leaks"].as_array().unwrap();
    let ranks: Vec<u64> = merged[0]["per_process"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["rank"].as_u64().unwrap())
        .collect();
    assert_eq!(ranks, (0..8).collect::<Vec<_>>());
}

#[test]
fn processes_without_a_launcher_have_no_rank_table() {
    let dir = TempDir::new();
    let traces: Vec<PathBuf> = (0..3)
        .map(|i| {
            let t = dir.path().join(format!("p{i}.trace"));
            assert_ok(&shim_command(client("report_leaks"), &t).output().unwrap());
            t
        })
        .collect();
    let doc = json(&traces);
    assert!(doc.get("ranks").is_none(), "{doc:#}");
    assert_eq!(doc["processes"][0]["rank"], Value::Null);
    let text = report(&[], &traces);
    assert!(!text.contains("Ranks ("), "{text}");
    assert!(text.contains("in 3 of 3 processes,"), "{text}");
}

fn merge(reports: &[&Path]) -> std::process::Output {
    std::process::Command::new(gpuleak_e2e::gpuleak_bin())
        .arg("merge")
        .args(reports)
        .output()
        .unwrap()
}

#[test]
fn node_reports_merge_into_the_report_of_every_trace_byte_for_byte() {
    let dir = TempDir::new();
    let traces = job(dir.path(), |r| if r == 5 { "report_leaks" } else { "report_clean" });
    for args in [&["--format", "json"][..], &["--format", "json", "--memory"][..]] {
        let full = report(args, &traces);
        // Two nodes of four ranks each, and one node of one rank with one of seven.
        for split in [4, 1] {
            let a = dir.path().join(format!("node-a-{split}.json"));
            let b = dir.path().join(format!("node-b-{split}.json"));
            std::fs::write(&a, report(args, &traces[..split])).unwrap();
            std::fs::write(&b, report(args, &traces[split..])).unwrap();
            let out = merge(&[&a, &b]);
            assert_ok(&out);
            let merged = String::from_utf8(out.stdout).unwrap();
            assert!(merged == full, "{args:?} split {split}: merged\n{merged}\nfull\n{full}");
        }
    }
    // One report merged alone is itself.
    let one = dir.path().join("one.json");
    let alone = report(&["--format", "json"], &traces[2..3]);
    std::fs::write(&one, &alone).unwrap();
    let out = merge(&[&one]);
    assert_ok(&out);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), alone);
}

#[test]
fn merge_refuses_reports_it_cannot_merge_exactly() {
    let dir = TempDir::new();
    let traces = job(dir.path(), |_| "report_leaks");
    let topped = dir.path().join("topped.json");
    std::fs::write(&topped, report(&["--format", "json", "--top", "1"], &traces[..2])).unwrap();
    let good = dir.path().join("good.json");
    std::fs::write(&good, report(&["--format", "json"], &traces[2..])).unwrap();
    let text = dir.path().join("text.txt");
    std::fs::write(&text, report(&[], &traces[..1])).unwrap();
    let other = dir.path().join("other.json");
    std::fs::write(&other, r#"{"schema_version": 99, "processes": []}"#).unwrap();
    for (bad, says) in [
        (&topped, "left out 1 group of process"),
        (&text, "not JSON"),
        (&other, "schema version 99"),
    ] {
        let out = merge(&[&good, bad]);
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(&bad.display().to_string()) && err.contains(says), "{err}");
        assert!(out.stdout.is_empty());
    }
}
