//! Every answer the analyzer's API meanings give, for every known API, against a snapshot
//! (`api_meanings.txt`) taken from the hand-written lists they replaced on 2026-12-06: the
//! meanings now derived from `gpuleak_format::api`'s list must answer exactly as those did.
//! On a difference the test writes the new answers beside the system's temporary files: copy
//! them over the snapshot only for an intended change of meaning, after reading the diff.

use std::fmt::Write;

use gpuleak_format::Api;

use crate::streams::apis::*;

fn answers() -> String {
    let mut out = String::new();
    for (api, name) in Api::ALL {
        let a = *api;
        let (side, memset) = copy_kind(a);
        let (dst_device, src_device) = device_operands(a);
        let flags = [
            ("per_thread", per_thread(a)),
            ("memset", memset),
            ("dst_device", dst_device),
            ("src_device", src_device),
            ("serializes_device", serializes_device(a)),
            ("context_wide", context_wide(a)),
            ("waits_for_pageable_destination", waits_for_pageable_destination(a)),
            ("kernel_launch", is_kernel_launch(a)),
            ("graph_launch", is_graph_launch(a)),
            ("async_free", is_async_free(a)),
            ("async_alloc", is_async_alloc(a)),
            ("range_op", is_range_op(a)),
            ("discard", is_discard(a)),
            ("observable_result", has_observable_result(a)),
            ("synchronizing_free", is_synchronizing_free(a)),
            ("event_wait", is_event_wait(a)),
            ("semaphore_signal", is_semaphore_signal(a)),
            ("semaphore_destroy", is_semaphore_destroy(a)),
        ];
        write!(out, "{} {name} mem_kind={:?} host_side={side:?}", a.0, a.mem_kind()).unwrap();
        for (flag, on) in flags {
            if on {
                write!(out, " {flag}").unwrap();
            }
        }
        out.push('\n');
    }
    out
}

#[test]
fn every_api_means_what_the_snapshot_says() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/src/streams/tests/api_meanings.txt");
    let got = answers();
    let want = std::fs::read_to_string(path).unwrap();
    if got != want {
        let new = std::env::temp_dir().join("api_meanings.txt");
        std::fs::write(&new, &got).unwrap();
        for (g, w) in got.lines().zip(want.lines()) {
            assert_eq!(
                g,
                w,
                "the answers differ from {path}; all of them are in {}",
                new.display()
            );
        }
        panic!(
            "{} answers, {} in {path}; all of them are in {}",
            got.lines().count(),
            want.lines().count(),
            new.display()
        );
    }
}
