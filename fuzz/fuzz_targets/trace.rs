//! The trace decoder on any bytes: every block and the merged, sequence-ordered walk must end
//! in records or a `DecodeError` (with its offset), never a panic or a hang.
#![no_main]

use gpuleak_format::Trace;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(trace) = Trace::new(data) else { return };
    for i in 0..trace.block_count() {
        if let Ok(Some(block)) = trace.block(i) {
            for record in block {
                if record.is_err() {
                    break;
                }
            }
        }
    }
    // The merge reports an error and goes on with the other blocks: bound the walk.
    let limit = data.len() + 16;
    for (n, entry) in trace.records().enumerate() {
        let _ = entry.map(|e| e.record.body.name());
        assert!(n <= limit, "more entries than bytes");
    }
});
