//! Hosts that leave the shim little room: threads with the smallest stacks glibc allows, a
//! deep recursion on a small stack, an allocating signal handler on a classic 8 KiB alternate
//! stack, a coroutine on a stack of its own, and JIT code without unwind information
//! (`shim_small_stacks`). The shim must neither take their stack away (static TLS is carved
//! out of every thread's stack) nor need much of it.

use std::path::Path;

use gpuleak_e2e::{client, shim_command, shim_lib, TempDir};

use crate::trace::{assert_ok, dump, of_type};

/// Runs `shim_small_stacks ARGS` under the shim with the extra environment `env`, writing
/// `ARGS-VALUES.trace` (the arguments and the values of `env`, joined by `-`) in `dir`; returns
/// its output, checked for success, as text.
fn small_stacks(dir: &Path, env: &[(&str, &str)], args: &[&str]) -> String {
    let name: Vec<&str> = args.iter().copied().chain(env.iter().map(|(_, v)| *v)).collect();
    let trace = dir.join(format!("{}.trace", name.join("-")));
    let mut cmd = shim_command(client("shim_small_stacks"), &trace);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert_ok(&out);
    String::from_utf8(out.stdout).unwrap()
}

/// The value after `key ` on the client's output line that starts with it.
fn value<'a>(stdout: &'a str, key: &str) -> &'a str {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no `{key}` line in:\n{stdout}"))
}

/// The memory size of the shim's PT_TLS segment (its static thread-local storage), read from
/// its ELF64 program headers.
fn static_tls_size(lib: &Path) -> u64 {
    let elf = std::fs::read(lib).unwrap();
    let word = |at: usize, n: usize| -> u64 { elf[at..at + n].iter().rev().fold(0, |v, &b| (v << 8) | u64::from(b)) };
    assert_eq!(&elf[..4], b"\x7fELF", "{}", lib.display());
    assert_eq!((elf[4], elf[5]), (2, 1), "a little-endian ELF64 shim");
    let (phoff, phentsize, phnum) = (word(0x20, 8) as usize, word(0x36, 2) as usize, word(0x38, 2) as usize);
    const PT_TLS: u64 = 7;
    (0..phnum)
        .map(|i| phoff + i * phentsize)
        .find(|&ph| word(ph, 4) == PT_TLS)
        .map_or(0, |ph| word(ph + 0x28, 8))
}

/// glibc takes every loaded library's static TLS from each new thread's stack: the shim's
/// must stay small (it was 14 KiB, and a 16 KiB `pthread_create` failed with EINVAL in any
/// program that loaded it).
#[test]
fn the_shim_s_static_thread_local_storage_stays_small() {
    let size = static_tls_size(&shim_lib());
    assert!(size <= 512, "PT_TLS of the shim is {size} bytes");
}

#[test]
fn threads_with_the_smallest_stacks_start_and_allocate() {
    let dir = TempDir::new();
    for env in [&[][..], &[("GPULEAK_DISABLE", "1")][..]] {
        for kb in ["16", "20"] {
            let out = small_stacks(dir.path(), env, &["plain", kb]);
            assert_eq!(value(&out, "plain"), format!("{kb} ok"), "{env:?}");
        }
        for kb in ["16", "24", "32"] {
            let out = small_stacks(dir.path(), env, &["alloc", kb]);
            assert_eq!(value(&out, "alloc"), format!("{kb} ok"), "{env:?}");
        }
    }
}

#[test]
fn a_small_thread_that_recursed_deeply_still_allocates() {
    let dir = TempDir::new();
    let out = small_stacks(dir.path(), &[], &["deep", "32", "150"]);
    assert_eq!(value(&out, "deep"), "32 ok");
}

/// The stack one allocation and free takes below the caller, with and without the shim: the
/// shim may add at most 2 KiB, even when the unwinder meets new frames (its parsing runs on a
/// stack of its own).
#[test]
fn an_allocation_needs_little_more_stack_under_the_shim() {
    let dir = TempDir::new();
    let with = small_stacks(dir.path(), &[], &["hwm"]);
    let without = small_stacks(dir.path(), &[("GPULEAK_DISABLE", "1")], &["hwm"]);
    for phase in ["first", "site", "warm"] {
        let key = format!("hwm {phase}");
        let (with, without): (u64, u64) = (
            value(&with, &key).parse().unwrap(),
            value(&without, &key).parse().unwrap(),
        );
        assert!(
            with <= without + 2048,
            "{phase}: {with} bytes of stack with the shim, {without} without"
        );
    }
}

/// A handler on a classic `SIGSTKSZ` (8 KiB) alternate stack, of which the kernel's signal frame
/// takes up to 3.5 KiB on machines with AVX-512, allocates: nothing below the alternate stack
/// may change (the shim used to write up to 1 KiB there), and its stack has the frames on the
/// alternate stack.
#[test]
fn an_allocating_signal_handler_on_an_8_kib_alternate_stack_stays_on_it() {
    let dir = TempDir::new();
    let out = small_stacks(dir.path(), &[], &["altstack"]);
    assert_eq!(value(&out, "handler"), "0");
    assert_eq!(value(&out, "canary damaged"), "0");
    let functions = leak_functions(&dir.path().join("altstack.trace"), 4096 * 3);
    assert!(functions.iter().any(|f| f == "on_signal"), "{functions:?}");
}

/// A coroutine's allocation (makecontext/swapcontext, its stack mapped by the program) has the
/// coroutine's frames: the unwinder bounds its reads by the mapping that holds the stack
/// pointer, not only by the thread's own stack.
#[test]
fn a_coroutine_s_allocation_has_the_coroutine_s_frames() {
    let dir = TempDir::new();
    let out = small_stacks(dir.path(), &[], &["coroutine"]);
    assert_eq!(value(&out, "coroutine"), "0");
    let functions = leak_functions(&dir.path().join("coroutine.trace"), 12345);
    assert_eq!(
        functions.first().map(String::as_str),
        Some("coro_site"),
        "{functions:?}"
    );
    assert!(functions.iter().any(|f| f == "coro_main"), "{functions:?}");
}

/// JIT code (mapped at run time, no unwind information) between the program and `cuMemAlloc`,
/// with a frame-pointer frame and without one (RBP holding data): every unwinder crosses it or
/// stops there, and the program runs on (libunwind's frame-chain fallback read through RBP).
#[test]
fn jit_code_without_unwind_information_is_crossed_or_left_by_every_unwinder() {
    let dir = TempDir::new();
    for (setting, method) in [
        ("dwarf", "dwarf"),
        ("libunwind", "libunwind"),
        ("fp", "frame-pointer"),
        ("gcc", "gcc"),
    ] {
        let out = small_stacks(dir.path(), &[("GPULEAK_UNWIND", setting)], &["jit"]);
        if value(&out, "jit") == "unsupported" {
            return;
        }
        assert_eq!(value(&out, "jit framed"), "0", "{method}");
        assert_eq!(value(&out, "jit frameless"), "0", "{method}");
        let records = dump(&dir.path().join(format!("jit-{setting}.trace")));
        let info = &of_type(&records, "ProcessInfo")[0];
        assert_eq!(info["unwinder"], method, "{info}");
        assert_eq!(of_type(&records, "Alloc").len(), 7, "{method}");
    }
}

/// The functions of the stack of the one allocation of `size` bytes that leaked, innermost
/// first, as `gpuleak report` names them.
fn leak_functions(trace: &Path, size: u64) -> Vec<String> {
    let out = gpuleak_e2e::gpuleak_report(&["--format", "json"], &[trace]);
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    let leaks = report["leaks"].as_array().unwrap();
    let leak = leaks
        .iter()
        .find(|l| l["bytes"] == size)
        .unwrap_or_else(|| panic!("no leak of {size} bytes: {report:#}"));
    leak["stack"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["function"].as_str().unwrap_or("?").to_string())
        .collect()
}
