//! Replays the trace fuzz target's regression inputs (`fuzz/regressions/trace/`): every file
//! must decode to records or a `DecodeError`, never a panic. The two seeds that
//! `examples/fuzz_seeds.rs` writes are checked record by record.

use std::path::Path;

use gpuleak_format::{ErrorKind, Trace};

/// Walks every block and the merged order, as the fuzz target does; returns (records, error).
fn walk(data: &[u8]) -> (usize, Option<gpuleak_format::DecodeError>) {
    let trace = match Trace::new(data) {
        Ok(t) => t,
        Err(e) => return (0, Some(e)),
    };
    for i in 0..trace.block_count() {
        if let Ok(Some(block)) = trace.block(i) {
            for r in block {
                if r.is_err() {
                    break;
                }
            }
        }
    }
    let (mut n, mut first_error) = (0, None);
    for entry in trace.records() {
        match entry {
            Ok(_) => n += 1,
            Err(e) => {
                first_error.get_or_insert(e);
            }
        }
    }
    (n, first_error)
}

#[test]
fn every_regression_input_decodes_or_fails_cleanly() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/regressions/trace");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("fuzz/regressions/trace") {
        let path = entry.unwrap().path();
        let data = std::fs::read(&path).unwrap();
        let (records, error) = walk(&data);
        match path.file_name().unwrap().to_str().unwrap() {
            "two_threads.trace" => {
                assert_eq!(records, 63, "the whole seed");
                assert!(error.is_none(), "{error:?}");
            }
            "cut.trace" => {
                // The first block whole, the second up to the record the cut went through.
                let e = error.expect("the cut is reported");
                assert!(matches!(e.kind, ErrorKind::Truncated(_)), "{e}");
                assert!(records > 30 && records < 63, "{records}");
            }
            _ => {}
        }
        seen += 1;
    }
    assert!(seen >= 2, "the seeds are missing from {}", dir.display());
}
