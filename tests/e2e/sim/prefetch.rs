//! Prefetches and discards of managed memory: what the simulated driver checks.

use super::run;

#[test]
fn prefetches_and_discards_take_managed_ranges_and_valid_locations_and_no_capture() {
    let f = run("sim_prefetch", "prefetch");
    f.expect_all(&[
        ("to_device", "0"),
        ("to_cpu", "0"),
        ("ptsz", "0"),
        // CUDA_ERROR_INVALID_DEVICE.
        ("bad_device", "101"),
        // CUDA_ERROR_INVALID_VALUE: not managed memory, past the allocation's end.
        ("device_memory", "1"),
        ("past_end", "1"),
        ("v2_device", "0"),
        ("v2_ptsz", "0"),
        ("v2_numa", "0"),
        ("v2_bad_numa", "1"),
        ("v2_bad_device", "101"),
        ("v2_invalid", "1"),
        ("v2_flags", "1"),
        ("batch", "0"),
        ("batch_ptsz", "0"),
        // Batches refuse the legacy NULL stream, by NULL or by name.
        ("batch_legacy", "1"),
        ("batch_stream_legacy", "1"),
        ("batch_empty", "1"),
        ("batch_flags", "1"),
        ("batch_first_index", "1"),
        ("batch_index_order", "1"),
        ("batch_index_past", "1"),
        ("batch_more_locations", "1"),
        ("batch_device_memory", "1"),
        ("discard", "0"),
        ("discard_ptsz", "0"),
        ("discard_legacy", "1"),
        ("discard_null_sizes", "1"),
        ("discard_and_prefetch", "0"),
        ("discard_and_prefetch_ptsz", "0"),
        ("discard_and_prefetch_no_locations", "1"),
        // CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED, then CUDA_ERROR_STREAM_CAPTURE_INVALIDATED.
        ("captured", "900"),
        ("capture_end", "901"),
        ("captured_discard", "900"),
        ("capture_end_discard", "901"),
        ("freed", "1"),
    ]);
}
