//! The whole analysis on any record sequence a trace can decode to (`analyzer/tests/synth`):
//! the leak, memory and stream-ordering models, every report format and `gpuleak check` with a
//! baseline must take it without a panic (overflow checks on: `scripts/fuzz` builds with `-a`).
//! A crash's input goes into fuzz/regressions/analyze/, which
//! `analyzer/tests/any_records.rs` replays.
#![no_main]

use libfuzzer_sys::fuzz_target;

// What the fuzzer does not read of the results (the test checks them).
#[allow(dead_code)]
#[path = "../../analyzer/tests/synth/mod.rs"]
mod synth;

fuzz_target!(|data: &[u8]| {
    let case = synth::case(data);
    let _ = synth::analyze(&case);
});
