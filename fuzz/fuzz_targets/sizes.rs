//! The size and tolerance arguments of `gpuleak check` (`--max-leaked-bytes 1.5MiB`,
//! `--tolerance 5%`) on any text: a value or an error, never a panic or an overflow.
#![no_main]

use gpuleak_analyzer::check::size::{parse_size, parse_tolerance};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    let _ = parse_size(text);
    if let Ok(t) = parse_tolerance(text) {
        for base in [0, 1, 4096, u64::MAX / 2, u64::MAX] {
            let allowed = t.allowance(base);
            let _ = t.exceeded(base, allowed);
            let _ = t.exceeded(base, base.saturating_add(1));
        }
    }
});
