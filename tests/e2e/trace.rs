//! Reading traces in tests: `gpuleak dump` output as records, and the program output lines
//! the clients print ("alloc|free|map|unmap <api> <result> <ptr> <size>").

use std::path::Path;
use std::process::Output;

use gpuleak_e2e::gpuleak_bin;
use serde_json::Value;

/// Every record of a trace, in sequence order; panics if `gpuleak dump` reports an error.
pub fn dump(trace: &Path) -> Vec<Value> {
    let (records, stderr, ok) = dump_lossy(trace);
    assert!(ok, "gpuleak dump {} failed: {stderr}", trace.display());
    records
}

/// Like [`dump`], but returns the records, stderr and success instead of panicking.
pub fn dump_lossy(trace: &Path) -> (Vec<Value>, String, bool) {
    let out = std::process::Command::new(gpuleak_bin())
        .arg("dump")
        .arg(trace)
        .output()
        .expect("run gpuleak dump");
    let records = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect();
    (
        records,
        String::from_utf8_lossy(&out.stderr).into_owned(),
        out.status.success(),
    )
}

/// Records of one type.
pub fn of_type<'a>(records: &'a [Value], ty: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["type"] == ty).collect()
}

/// A hex string field as a number.
pub fn hex(v: &Value) -> u64 {
    let s = v.as_str().unwrap_or_else(|| panic!("not a hex string: {v}"));
    u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap()
}

/// The check names of a report's findings, in the report's order.
pub fn checks(report: &Value) -> Vec<&str> {
    report["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["check"].as_str().unwrap())
        .collect()
}

/// One line a client printed about a call it made.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// alloc, free, map or unmap.
    pub event: String,
    /// API name.
    pub api: String,
    /// Result code.
    pub result: i64,
    /// Pointer or handle.
    pub ptr: u64,
    /// Size.
    pub size: u64,
}

/// Parses the call lines of a client's stdout (other lines are ignored).
pub fn calls(stdout: &[u8]) -> Vec<Call> {
    String::from_utf8_lossy(stdout)
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            if f.len() != 5 || !["alloc", "free", "map", "unmap"].contains(&f[0]) {
                return None;
            }
            let ptr = f[3].trim_start_matches("0x");
            Some(Call {
                event: f[0].into(),
                api: f[1].into(),
                result: f[2].parse().ok()?,
                ptr: if ptr == "(nil)" {
                    0
                } else {
                    u64::from_str_radix(ptr, 16).ok()?
                },
                size: f[4].parse().ok()?,
            })
        })
        .collect()
}

/// The trace's allocation-side records as calls, in order.
pub fn recorded_calls(records: &[Value]) -> Vec<Call> {
    records
        .iter()
        .filter_map(|r| {
            let event = match r["type"].as_str()? {
                "Alloc" => "alloc",
                "Free" => "free",
                "Map" => "map",
                "Unmap" => "unmap",
                _ => return None,
            };
            Some(Call {
                event: event.into(),
                api: r["api"].as_str()?.into(),
                result: r["result"].as_i64()?,
                ptr: hex(&r["ptr"]),
                size: r["size"].as_u64()?,
            })
        })
        .collect()
}

/// Asserts a process exited successfully, showing its output otherwise.
pub fn assert_ok(out: &Output) {
    assert!(
        out.status.success(),
        "exit {:?}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Replaces host addresses (which move with ASLR and with any library's own mappings) by a
/// placeholder, keeping the simulated driver's deterministic device addresses and handles.
pub fn mask_host_addresses(text: &str) -> String {
    text.split('\n')
        .map(|l| {
            l.split(' ')
                .map(
                    |tok| match tok.strip_prefix("0x").and_then(|h| u64::from_str_radix(h, 16).ok()) {
                        Some(v) if (0x5500_0000_0000..0x5700_0000_0000).contains(&v) || v >= 0x7e00_0000_0000 => {
                            "HOST".to_string()
                        }
                        _ => tok.to_string(),
                    },
                )
                .collect::<Vec<_>>()
                .join(" ")
        })
        .collect::<Vec<_>>()
        .join("\n")
}
