//! The whole analysis over record sequences made from pseudo-random bytes (`synth`, shared
//! with the fuzz target `analyze`): the models, every report format and `gpuleak check` must
//! take whatever a decodable trace can say without a panic, and half the cases also go through
//! a trace file (`gpuleak dump` must print every record written, and the two-reader replay
//! runs). `cargo fuzz run analyze` explores
//! far more; this keeps a fixed sample in every test run, and replays the inputs in
//! `fuzz/regressions/analyze/`: each one made the analysis panic once (an arithmetic overflow,
//! with the overflow checks of a debug build or of `scripts/fuzz`), fixed since. Run this file
//! without `--release` to have the overflow checks here too.

#[path = "synth/mod.rs"]
mod synth;

/// xorshift64*: a fixed sequence, so that a failure here names its seed.
fn bytes(seed: u64, len: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            (x.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 56) as u8
        })
        .collect()
}

#[test]
fn any_records_analyze_without_a_panic() {
    let (mut leaks, mut checks, mut files) = (0, std::collections::BTreeSet::new(), 0);
    for seed in 0..3000u64 {
        let len = 16 + (seed as usize * 37) % 3000;
        let data = bytes(seed, len);
        let case = synth::case(&data);
        match std::panic::catch_unwind(|| synth::analyze(&case)) {
            Ok(reached) => {
                if let Some((written, (dumped, errors))) = reached.read {
                    // Written as a trace file and read back, every record comes out once.
                    assert_eq!(
                        (dumped, errors),
                        (written, 0),
                        "seed {seed}: records lost on the way through a file"
                    );
                    files += 1;
                }
                leaks += reached.leaks;
                checks.extend(reached.checks);
            }
            Err(_) => panic!("seed {seed} (len {len}) panicked"),
        }
    }
    // The sample must reach the models' findings, not stop at the first record: leaks, bad
    // frees, stream-ordering mistakes and the memory pass's findings.
    assert!(leaks > 1000, "{leaks} leak groups");
    assert!(files > 1000, "{files} cases read back from a file");
    eprintln!("checks reached: {checks:?}");
    for check in ["bad-free", "stream-leak", "event-leak", "growth"] {
        assert!(checks.contains(check), "no {check} finding in the sample: {checks:?}");
    }
}

/// The maps of the replay are seeded at random in each run, and no output may show their
/// order: the same records give the same report, byte for byte, every time (ties between
/// records that share a sequence number included, which these cases make often).
#[test]
fn the_same_records_give_the_same_report_every_time() {
    for seed in 0..1000u64 {
        let len = 16 + (seed as usize * 37) % 3000;
        let case = synth::case(&bytes(seed, len));
        let first = synth::rendered(&case);
        for _ in 0..2 {
            assert!(synth::rendered(&case) == first, "seed {seed}: a second report differs");
        }
    }
}

#[test]
fn fuzz_regressions_analyze_without_a_panic() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions/analyze");
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let path = entry.expect("directory entry").path();
        let data = std::fs::read(&path).expect("regression input");
        let case = synth::case(&data);
        let result = std::panic::catch_unwind(|| synth::analyze(&case));
        assert!(result.is_ok(), "{} panicked", path.display());
    }
}
