//! The suppressions parser (`gpuleak check --suppressions`) on any text: suppressions or a
//! `SuppressionError` naming the line, never a panic.
#![no_main]

use gpuleak_analyzer::check::suppress::Suppressions;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let mut s = Suppressions::default();
    match s.parse(text, "fuzz.supp") {
        Ok(()) => {
            for kind in ["leak", "bad-free", "stream-leak", "growth"] {
                let _ = s.find(kind, &[]);
            }
        }
        Err(e) => {
            let _ = e.to_string();
        }
    }
});
