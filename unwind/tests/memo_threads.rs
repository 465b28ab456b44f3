//! The per-thread memos are mapped on a thread's first capture and unmapped when it exits: a
//! program that keeps starting threads that capture keeps its address space flat. (Its own test
//! binary: no other test's threads change the address space while it measures.) The memos
//! belong to the DWARF method, which is x86-64 only.
#![cfg(target_arch = "x86_64")]

use std::hint::black_box;

use gpuleak_unwind::{capture_keyed, init, Method};

/// The process's virtual size in KiB (`VmSize` of /proc/self/status).
fn vm_size_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("VmSize:"))
        .expect("a VmSize line");
    line.split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("VmSize in kB")
}

/// Starts `n` threads one after another, each capturing once if `capture`, and joins them.
fn threads(n: usize, capture: bool) {
    for _ in 0..n {
        std::thread::spawn(move || {
            if capture {
                let mut out = [0u64; 64];
                let (frames, key) = capture_keyed(0, &mut out);
                assert!(frames > 0 && key != 0, "the capture walked with a memo");
            }
            black_box(capture)
        })
        .join()
        .expect("thread");
    }
}

#[test]
fn exiting_threads_unmap_their_memos() {
    init(Method::Dwarf).expect("init");
    // Warm glibc's cache of thread stacks, so that the threads below reuse those stacks.
    threads(50, false);
    let before = vm_size_kib();
    threads(200, true);
    let grown = vm_size_kib().saturating_sub(before);
    // 200 threads' memos left mapped would be about 7 MiB.
    assert!(
        grown < 2048,
        "the address space grew by {grown} KiB over 200 capturing threads"
    );
}
