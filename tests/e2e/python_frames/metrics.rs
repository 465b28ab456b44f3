//! The metrics endpoint's `site` label under Python names the user's line
//! (`hold_scratch python_frames_held.py:N`), as every report does, not CPython's or
//! cuda-bindings' frames; without Python frames it cannot, and falls back to native frames.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;

use gpuleak_e2e::{python, shim_command, TempDir};

use crate::ops::metrics::{free_port, http_get};

const HELD: &str = "python_frames_held.py";

fn held_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python").join(HELD)
}

/// The line of the held script that contains `needle` (exactly one).
fn held_line(needle: &str) -> usize {
    let text = std::fs::read_to_string(held_script()).expect("the script");
    let hits: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| l.contains(needle))
        .map(|(i, _)| i + 1)
        .collect();
    assert_eq!(hits.len(), 1, "{needle:?} in {HELD}: {hits:?}");
    hits[0]
}

/// The `site` label of the 3 MiB site on the metrics page of the held script, run with the
/// extra environment `env`.
fn scratch_site(env: &[(&str, &str)]) -> String {
    let dir = TempDir::new();
    let port = free_port();
    let mut child = shim_command(python(), &dir.path().join("t.trace"))
        .arg("-I")
        .arg(held_script())
        .env("GPULEAK_METRICS", format!("127.0.0.1:{port}"))
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(dir.path().join("stderr")).unwrap())
        .spawn()
        .expect("python");
    let mut stdout = BufReader::new(child.stdout.take().unwrap());
    let mut line = String::new();
    while !line.contains("ready") {
        line.clear();
        let n = stdout.read_line(&mut line).unwrap();
        assert!(
            n > 0,
            "the script ended early: {}",
            std::fs::read_to_string(dir.path().join("stderr")).unwrap()
        );
    }
    let (_, page) = http_get(port, "/metrics").expect("the metrics page");
    drop(child.stdin.take());
    assert!(child.wait().unwrap().success());
    let row = page
        .lines()
        .find(|l| l.starts_with("gpuleak_site_live_bytes{") && l.ends_with(&format!(" {}", 3 << 20)))
        .unwrap_or_else(|| panic!("no 3 MiB site in\n{page}"));
    let site = row.split("site=\"").nth(1).unwrap();
    site[..site.find('"').unwrap()].to_string()
}

#[test]
fn the_metrics_site_label_names_the_scripts_line() {
    let site = scratch_site(&[]);
    assert_eq!(site, format!("hold_scratch {HELD}:{}", held_line("# SITE: scratch")));
    // The twin: without Python frames no label can name a line of the script.
    let native = scratch_site(&[("GPULEAK_PYTHON", "0")]);
    assert!(!native.contains(".py"), "{native}");
}
