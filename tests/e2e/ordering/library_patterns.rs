//! Correct patterns of third-party libraries that once drew false findings, each beside the
//! mistake that must still be found. The client is `tests/clients/report_library_patterns.c`.

use serde_json::Value;

use super::{only_finding_of, report_of_case};

fn findings_of(how: &str) -> Vec<Value> {
    report_of_case("report_library_patterns", how)["findings"]
        .as_array()
        .unwrap()
        .clone()
}

/// numba-cuda: after a managed allocation is freed, a NumPy array can land in its address
/// range, be page-locked with `cuMemHostRegister` and copied from and to. Neither that nor
/// the same array used as plain pageable memory is a use after free of the managed memory;
/// a memset of the freed managed pointer (a device pointer to the driver) is.
#[test]
fn a_host_array_where_managed_memory_was_freed_is_no_use_after_free() {
    for how in ["managed-registered", "managed-host"] {
        assert_eq!(findings_of(how), Vec::<Value>::new(), "{how}");
    }
    let (check, severity, message) = only_finding_of("report_library_patterns", "managed-memset");
    assert_eq!(
        (check.as_str(), severity.as_str()),
        ("use-after-free", "error"),
        "{message}"
    );
    assert!(
        message.starts_with("cuMemsetD32Async on the legacy default stream"),
        "{message}"
    );
    assert!(message.contains("managed allocation"), "{message}");
}

/// cudarc's `test_htod_copy_pinned`: the pinned buffer's event, never recorded, is
/// synchronized when the buffer is dropped, after a copy into pageable memory made the host
/// wait for the stream; only a stream-ordered free was queued since, which nobody waits for.
/// With a kernel queued after the copy back, the wait is one that waits for nothing.
#[test]
fn a_wait_on_an_unrecorded_event_after_the_host_waited_for_everything_is_no_finding() {
    assert_eq!(findings_of("pinned-round-trip"), Vec::<Value>::new());
    let (check, severity, message) = only_finding_of("report_library_patterns", "pinned-round-trip-pending");
    assert_eq!(
        (check.as_str(), severity.as_str()),
        ("wait-on-unrecorded-event", "warning"),
        "{message}"
    );
    assert!(message.starts_with("cuEventSynchronize waits for event"), "{message}");
}
