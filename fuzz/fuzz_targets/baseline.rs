//! The baseline reader (`gpuleak check --baseline`) on any bytes: a baseline or a
//! `BaselineError`, never a panic.
#![no_main]

use std::path::Path;

use gpuleak_analyzer::check::Baseline;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(doc) = serde_json::from_slice::<serde_json::Value>(data) else {
        return;
    };
    match Baseline::from_json(&doc, Path::new("fuzz.json")) {
        Ok(b) => {
            let _ = format!("{b:?}");
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
