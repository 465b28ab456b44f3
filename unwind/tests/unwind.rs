//! Correctness of the stack capture methods against libgcc's `_Unwind_Backtrace`, on stacks made
//! of Rust frames and of C frames built with `-O2 -fomit-frame-pointer` (tests/fixture/stack.c).
#![cfg(all(target_os = "linux", target_arch = "x86_64"))]

use std::ffi::{c_int, c_void, CStr};
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex, MutexGuard};

use gpuleak_unwind::{cache_stats, capture, capture_keyed, capture_with, init, modules_changed, Method};

type Callback = extern "C" fn(ctx: *mut c_void);
type Recurse = unsafe extern "C" fn(depth: c_int, cb: Callback, ctx: *mut c_void) -> c_int;

#[link(name = "gpuleak_unwind_fixture", kind = "static")]
extern "C" {
    fn fx_recurse(depth: c_int, cb: Callback, ctx: *mut c_void) -> c_int;
}

/// Serialises the tests that change the global method with `init`, flush the cache, or count
/// replayed captures.
fn init_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

/// The methods compared in one go; LibUnwind is covered by its own test (it needs `init`).
const METHODS: [Method; 3] = [Method::Gcc, Method::Dwarf, Method::FramePointer];

/// One capture per method from the same frame. `skip = 1` drops `grab_all`'s own frame, so frame
/// 0 of every method is the same return address (into `grab_all`'s caller).
#[inline(never)]
fn grab_all(methods: &[Method], len: usize) -> Vec<Vec<u64>> {
    let mut captures = Vec::new();
    for &method in methods {
        let mut out = vec![0u64; len];
        let n = capture_with(method, 1, &mut out);
        out.truncate(n);
        captures.push(out);
    }
    black_box(captures)
}

extern "C" fn trampoline(ctx: *mut c_void) {
    // SAFETY: `ctx` points to the `&mut dyn FnMut()` that `with_frames_of` passed to the
    // fixture, on its frame, which outlives this call; nothing else uses it meanwhile.
    let f = unsafe { &mut *ctx.cast::<&mut dyn FnMut()>() };
    f();
}

/// Runs `f` below `depth` C frames of `recurse`.
fn with_frames_of(recurse: Recurse, depth: c_int, mut f: impl FnMut()) {
    let mut f: &mut dyn FnMut() = &mut f;
    // SAFETY: the fixture calls `trampoline(ctx)` once, `depth` frames down, while `f` lives.
    unsafe {
        recurse(depth, trampoline, (&mut f as *mut &mut dyn FnMut()).cast());
    }
}

fn with_c_frames(depth: c_int, f: impl FnMut()) {
    with_frames_of(fx_recurse, depth, f);
}

/// Captures all of `methods` below `depth` C frames.
fn captures_below_c(depth: c_int, methods: &[Method], len: usize) -> Vec<Vec<u64>> {
    let mut result = Vec::new();
    with_c_frames(depth, || result = grab_all(methods, len));
    result
}

#[test]
fn dwarf_matches_libgcc_through_c_frames_without_frame_pointers() {
    for depth in [1, 10, 25, 60] {
        let [gcc, dwarf, fp] =
            <[Vec<u64>; 3]>::try_from(captures_below_c(depth, &METHODS, 512)).expect("three methods");
        assert!(
            gcc.len() > depth as usize,
            "depth {depth}: libgcc saw only {} frames",
            gcc.len()
        );
        assert_eq!(dwarf, gcc, "depth {depth}: dwarf differs from libgcc");
        if depth >= 10 {
            // The frame-pointer walk cannot follow -fomit-frame-pointer frames: proof that the
            // Dwarf method really reads CFI.
            assert_ne!(fp, gcc, "depth {depth}: the frame-pointer walk should be wrong here");
            assert!(fp.len() < gcc.len() || fp[..] != gcc[..fp.len()], "depth {depth}");
        }
    }
}

#[test]
fn dwarf_truncates_to_the_output_length() {
    for len in [1, 5, 17, 40] {
        let [gcc, dwarf] =
            <[Vec<u64>; 2]>::try_from(captures_below_c(60, &[Method::Gcc, Method::Dwarf], len)).expect("two methods");
        assert_eq!(gcc.len(), len);
        assert_eq!(dwarf, gcc, "out.len() = {len}");
    }
    assert_eq!(capture_with(Method::Dwarf, 0, &mut []), 0);
}

#[inline(never)]
fn rust_recurse(depth: usize, f: &mut dyn FnMut()) -> usize {
    if depth == 0 {
        f();
        return 0;
    }
    // Different frame sizes per level, and no tail call.
    let pad = black_box([depth as u8; 48]);
    rust_recurse(black_box(depth - 1), f) + usize::from(pad[depth % 48])
}

#[test]
fn dwarf_matches_libgcc_through_rust_frames() {
    for depth in [1, 10, 25, 60] {
        let mut result = Vec::new();
        rust_recurse(depth, &mut || result = grab_all(&[Method::Gcc, Method::Dwarf], 512));
        assert!(result[0].len() > depth);
        assert_eq!(result[1], result[0], "depth {depth}");
    }
}

#[inline(never)]
fn frame_zero(method: Method, skip: usize) -> Vec<u64> {
    let mut out = vec![0u64; 16];
    let n = capture_with(method, skip, &mut out);
    out.truncate(n);
    black_box(out)
}

#[test]
fn frame_zero_is_the_return_address_into_the_caller_and_skip_drops_frames() {
    let _lock = init_lock();
    init(Method::LibUnwind).expect("init");
    let start = frame_zero as fn(Method, usize) -> Vec<u64> as usize as u64;
    let methods = [Method::Gcc, Method::Dwarf, Method::FramePointer, Method::LibUnwind];
    for method in methods {
        if method == Method::LibUnwind && gpuleak_unwind::init_fallback_reason().is_some() {
            continue; // libunwind is not installed here
        }
        let frames = frame_zero(method, 0);
        assert!(!frames.is_empty(), "{method}");
        assert!(
            frames[0] > start && frames[0] < start + 0x2000,
            "{method}: frame 0 {:#x} is not inside frame_zero at {start:#x}",
            frames[0]
        );
        if method != Method::FramePointer {
            let skipped = frame_zero(method, 2);
            assert_eq!(skipped[..], frames[2..2 + skipped.len()], "{method}");
        }
    }
}

#[test]
fn libunwind_matches_libgcc_when_installed() {
    let _lock = init_lock();
    let got = init(Method::LibUnwind).expect("init");
    if got != Method::LibUnwind {
        eprintln!("libunwind unavailable: {:?}", gpuleak_unwind::init_fallback_reason());
        return;
    }
    for depth in [1, 25, 60] {
        let result = captures_below_c(depth, &[Method::Gcc, Method::LibUnwind], 512);
        assert_eq!(result[1], result[0], "depth {depth}");
    }
}

#[test]
fn init_keeps_dwarf_and_capture_uses_it() {
    let _lock = init_lock();
    assert_eq!(
        init(Method::Dwarf),
        Ok(Method::Dwarf),
        "{:?}",
        gpuleak_unwind::init_fallback_reason()
    );
    assert_eq!(gpuleak_unwind::init_fallback_reason(), None);
    assert_eq!(init(Method::Gcc), Ok(Method::Gcc));
    assert_eq!(init(Method::FramePointer), Ok(Method::FramePointer));
    // `capture` follows the global method.
    init(Method::Dwarf).expect("init");
    let mut out = [0u64; 16];
    let mut reference = Vec::new();
    let mut n = 0;
    with_c_frames(12, || {
        n = capture(0, &mut out);
        reference = frame_zero(Method::Gcc, 1);
    });
    // Frame 0 differs (two call sites in the closure); the rest is the same stack.
    assert_eq!(n, 16);
    assert_eq!(out[1..], reference[1..]);
}

#[test]
fn concurrent_captures_are_correct() {
    // Flushes the cache, which drops every memo: not while a test counts replays.
    let _lock = init_lock();
    const THREADS: usize = 8;
    const CAPTURES: usize = 10_000;
    let stop = Arc::new(AtomicBool::new(false));
    let barrier = Arc::new(Barrier::new(THREADS + 1));
    let mismatches = Arc::new(AtomicUsize::new(0));
    // Flushes while the workers run make racing cache writers and cold lookups happen.
    let flusher = {
        let (stop, barrier) = (stop.clone(), barrier.clone());
        std::thread::spawn(move || {
            barrier.wait();
            let mut flushes = 0;
            while !stop.load(Ordering::Relaxed) && flushes < 200 {
                modules_changed();
                flushes += 1;
                std::thread::sleep(std::time::Duration::from_micros(500));
            }
        })
    };
    let workers: Vec<_> = (0..THREADS)
        .map(|i| {
            let (barrier, mismatches) = (barrier.clone(), mismatches.clone());
            std::thread::spawn(move || {
                let depth = 3 + 8 * i as c_int;
                with_c_frames(depth, || {
                    let reference = grab_all(&[Method::Gcc], 256).remove(0);
                    barrier.wait();
                    let mut out = [0u64; 256];
                    for _ in 0..CAPTURES {
                        let n = capture_once(&mut out);
                        // Frame 0 is the return address into the closure from another call site.
                        if n != reference.len() || out[1..n] != reference[1..] {
                            mismatches.fetch_add(1, Ordering::Relaxed);
                        }
                    }
                });
            })
        })
        .collect();
    for worker in workers {
        worker.join().expect("worker");
    }
    stop.store(true, Ordering::Relaxed);
    flusher.join().expect("flusher");
    assert_eq!(mismatches.load(Ordering::Relaxed), 0);
}

/// Like `grab_all` (skips its own frame), with Dwarf only and no allocation.
#[inline(never)]
fn capture_once(out: &mut [u64]) -> usize {
    black_box(capture_with(Method::Dwarf, 1, out))
}

#[test]
fn a_module_loaded_after_the_first_capture_unwinds_correctly() {
    // Flushes the cache, which drops every memo: not while a test counts replays.
    let _lock = init_lock();
    let warm = captures_below_c(5, &[Method::Dwarf], 64);
    assert!(!warm[0].is_empty());

    let path = std::ffi::CString::new(env!("GPULEAK_UNWIND_LATE_SO")).expect("path");
    // SAFETY: dlopen/dlsym with valid C strings; `late_recurse` has the `Recurse` signature
    // (it is the fixture compiled with another prefix); the handle is closed only after use.
    let (handle, recurse) = unsafe {
        let handle = libc::dlopen(path.as_ptr(), libc::RTLD_NOW | libc::RTLD_LOCAL);
        assert!(!handle.is_null(), "dlopen {path:?}");
        let symbol = libc::dlsym(handle, c"late_recurse".as_ptr());
        assert!(!symbol.is_null());
        (handle, std::mem::transmute::<*mut c_void, Recurse>(symbol))
    };
    let mut result = Vec::new();
    with_frames_of(recurse, 30, || result = grab_all(&[Method::Gcc, Method::Dwarf], 512));
    assert_eq!(result[1], result[0]);
    let in_late = result[1].iter().filter(|&&ip| module_of(ip).contains("late")).count();
    assert!(in_late >= 30, "only {in_late} frames in the late module");

    // Unloading it must not break later captures (the unload is noticed on the next miss).
    let flushes = cache_stats().flushes;
    // SAFETY: no code of the module is running and no pointer into it is used after this.
    assert_eq!(unsafe { libc::dlclose(handle) }, 0);
    let mut after = Vec::new();
    rust_recurse(7, &mut || after = grab_all(&[Method::Gcc, Method::Dwarf], 512));
    assert_eq!(after[1], after[0]);
    assert!(cache_stats().flushes > flushes, "the unload was not noticed");
}

fn module_of(ip: u64) -> String {
    let mut info = std::mem::MaybeUninit::<libc::Dl_info>::zeroed();
    // SAFETY: dladdr only inspects the address and fills `info`; dli_fname is a C string owned
    // by the loader, copied out while the module is loaded.
    unsafe {
        if libc::dladdr(ip as *const c_void, info.as_mut_ptr()) == 0 {
            return String::new();
        }
        let name = info.assume_init().dli_fname;
        if name.is_null() {
            String::new()
        } else {
            CStr::from_ptr(name).to_string_lossy().into_owned()
        }
    }
}

/// A stack of frames no other test creates, so their cache entries are this test's alone.
#[inline(never)]
fn unique_recurse(depth: usize, f: &mut dyn FnMut()) -> usize {
    if depth == 0 {
        f();
        return 0;
    }
    // An opaque call: the optimiser can neither turn the recursion into a loop nor inline it.
    let next: fn(usize, &mut dyn FnMut()) -> usize = black_box(unique_recurse);
    next(depth - 1, f) + black_box(1)
}

#[test]
fn the_second_capture_of_a_stack_hits_the_cache() {
    // 16 frames, all inside `unique_recurse` 20 levels deep: the walk stops before reaching the
    // frames of this function, whose call sites differ between the runs below.
    const FRAMES: usize = 16;
    let run = || {
        let before = cache_stats();
        let mut n = 0;
        unique_recurse(20, &mut || n = grab_all(&[Method::Dwarf], FRAMES)[0].len());
        let after = cache_stats();
        // Frames confirmed from the thread's memo of its last capture need no rule at all.
        let resolved = after.hits - before.hits + after.memo - before.memo;
        (n, resolved, after.misses - before.misses)
    };
    modules_changed();
    let (n, _, misses) = run();
    assert_eq!(n, FRAMES);
    assert!(misses >= 1, "a flushed cache cannot hit this test's own frames");
    // Other tests flush the cache concurrently (and a flush in progress is not counted yet), so
    // a second capture may miss; one that does not must come soon, and must be all hits.
    let mut runs = Vec::new();
    for _ in 0..50 {
        let (n, hits, misses) = run();
        runs.push((n, hits, misses));
        if misses == 0 {
            assert!(
                hits as usize > n,
                "{hits} hits or memo frames for {n} frames and the capture's own"
            );
            return;
        }
    }
    panic!("the second capture never hit the cache: {runs:?}");
}

static SIGNAL_FRAMES: [[AtomicU64; 128]; 2] = [const { [const { AtomicU64::new(0) }; 128] }; 2];
static SIGNAL_COUNTS: [AtomicUsize; 2] = [const { AtomicUsize::new(0) }; 2];

extern "C" fn on_signal(_: c_int) {
    let mut out = [[0u64; 128]; 2];
    let counts = signal_grab(&mut out);
    for i in 0..2 {
        for (slot, &ip) in SIGNAL_FRAMES[i].iter().zip(&out[i][..counts[i]]) {
            slot.store(ip, Ordering::Relaxed);
        }
        SIGNAL_COUNTS[i].store(counts[i], Ordering::Relaxed);
    }
}

/// libgcc's and Dwarf's frames from one frame, both skipping it (no allocation: this runs in a
/// signal handler).
#[inline(never)]
fn signal_grab(out: &mut [[u64; 128]; 2]) -> [usize; 2] {
    let [gcc, dwarf] = out;
    let counts = [capture_with(Method::Gcc, 1, gcc), capture_with(Method::Dwarf, 1, dwarf)];
    black_box(counts)
}

#[test]
fn dwarf_unwinds_through_a_signal_frame() {
    // SAFETY: installs a one-argument handler (no SA_SIGINFO, matching `on_signal`'s type) for
    // SIGUSR1, which nothing else in this binary uses; the handler only captures, without
    // allocating, into atomics.
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_signal as extern "C" fn(c_int) as usize;
        assert_eq!(libc::sigaction(libc::SIGUSR1, &action, std::ptr::null_mut()), 0);
    }
    with_c_frames(10, || {
        // SAFETY: raise has no preconditions; the handler installed above runs on this thread
        // before it returns, interrupting only raise itself, which holds no lock the handler's
        // captures take.
        assert_eq!(unsafe { libc::raise(libc::SIGUSR1) }, 0);
    });
    let frames = |i: usize| -> Vec<u64> {
        let n = SIGNAL_COUNTS[i].load(Ordering::Relaxed);
        SIGNAL_FRAMES[i][..n]
            .iter()
            .map(|ip| ip.load(Ordering::Relaxed))
            .collect()
    };
    let (gcc, dwarf) = (frames(0), frames(1));
    assert!(gcc.len() > 12, "libgcc saw {} frames", gcc.len());
    assert_eq!(dwarf, gcc);
}

/// Runs `f` below 20 fixture frames, reached from one of two call sites with equal frames, so
/// that the fixture frames have the same addresses and values either way and only the return
/// address above them differs.
#[inline(never)]
fn fixture_from_site(site: bool, f: &mut dyn FnMut()) {
    if black_box(site) {
        with_c_frames(20, &mut *f);
        black_box(1);
    } else {
        black_box(2);
        with_c_frames(20, &mut *f);
    }
}

#[test]
fn the_memo_confirms_unchanged_frames_and_notices_a_changed_caller() {
    let mut memo_frames = 0;
    for round in 0..40 {
        let mut result = Vec::new();
        let before = cache_stats();
        fixture_from_site(round % 4 < 2, &mut || {
            result = grab_all(&[Method::Gcc, Method::Dwarf], 512)
        });
        memo_frames += cache_stats().memo - before.memo;
        assert_eq!(result[1], result[0], "round {round}");
    }
    assert!(memo_frames > 0, "repeated captures never used the memo");
}

/// A keyed capture and libgcc's frames from the same frame (`skip = 1` drops this one).
#[inline(never)]
fn grab_keyed(len: usize) -> (Vec<u64>, u64, Vec<u64>) {
    let mut out = vec![0u64; len];
    let (n, key) = capture_keyed(1, &mut out);
    out.truncate(n);
    let mut gcc = vec![0u64; len];
    let m = capture_with(Method::Gcc, 1, &mut gcc);
    gcc.truncate(m);
    black_box((out, key, gcc))
}

#[test]
fn keyed_captures_repeat_a_key_only_for_the_same_frames() {
    let _lock = init_lock();
    init(Method::Dwarf).expect("init");
    let mut seen: Vec<(u64, Vec<u64>)> = Vec::new();
    for round in 0..30 {
        // Three captures from one site, then three from the other, and so on: only a return
        // address 20 frames up tells the sites apart.
        fixture_from_site(round % 2 == 0, &mut || {
            // An opaque count, so that the loop is not unrolled into three call sites.
            for _ in 0..black_box(3) {
                let (frames, key, gcc) = grab_keyed(512);
                assert_eq!(frames, gcc, "round {round}");
                assert_ne!(key, 0, "a Dwarf capture always has a key");
                seen.push((key, frames));
            }
        });
        // Output lengths are part of the key: a shorter capture is not a repeat.
        fixture_from_site(round % 2 == 0, &mut || {
            let mut short = [0u64; 5];
            let (n, key) = capture_keyed(1, &mut short);
            assert_eq!(n, 5);
            seen.push((key, short.to_vec()));
        });
    }
    let mut repeats = 0;
    for (i, (key, frames)) in seen.iter().enumerate() {
        for (other_key, other) in &seen[..i] {
            if key == other_key {
                assert_eq!(frames, other, "capture {i} repeats a key with different frames");
            }
        }
        repeats += usize::from(i > 0 && seen[i - 1].0 == *key);
    }
    // The second and third capture of each group repeat the first.
    assert!(repeats >= 40, "only {repeats} of {} captures were replayed", seen.len());
    // A changed caller 20 frames up is never replayed: each group starts with a new key.
    for group in seen.chunks(4).collect::<Vec<_>>().windows(2) {
        assert_ne!(group[0][0].0, group[1][0].0);
    }
}

/// A keyed capture and libgcc's frames from the same frame, into arrays: no heap address that
/// changes between calls lands in a register whose saved value the walk reads.
#[inline(never)]
fn grab_keyed_fixed() -> ([u64; 64], usize, u64, [u64; 64], usize) {
    let mut out = [0u64; 64];
    let (n, key) = capture_keyed(1, &mut out);
    let mut gcc = [0u64; 64];
    let m = capture_with(Method::Gcc, 1, &mut gcc);
    black_box((out, n, key, gcc, m))
}

#[inline(never)]
fn site_a() -> ([u64; 64], usize, u64, [u64; 64], usize) {
    black_box(grab_keyed_fixed())
}

/// Another call site: one frame more than [`site_a`] (two bodies alike could be folded into one).
#[inline(never)]
fn site_b() -> ([u64; 64], usize, u64, [u64; 64], usize) {
    black_box(site_a())
}

#[test]
fn captures_alternating_between_two_sites_replay_each_sites_last_capture() {
    let _lock = init_lock();
    init(Method::Dwarf).expect("init");
    let mut seen: Vec<(u64, [u64; 64], usize)> = Vec::with_capacity(64);
    // A loop below 20 C frames capturing from two call sites in turn: no capture repeats the
    // one before it, only the one before that.
    with_c_frames(20, || {
        for round in 0..black_box(40) {
            let (frames, n, key, gcc, m) = if round % 2 == 0 { site_a() } else { site_b() };
            assert_eq!(frames[..n], gcc[..m], "round {round}");
            seen.push((key, frames, n));
        }
    });
    let mut replays = 0;
    for i in 2..seen.len() {
        assert_ne!(seen[i].0, seen[i - 1].0, "capture {i} repeats the other site's key");
        assert_ne!(seen[i].1[..seen[i].2], seen[i - 1].1[..seen[i - 1].2]);
        if seen[i].0 == seen[i - 2].0 {
            assert_eq!(
                seen[i].1,
                seen[i - 2].1,
                "capture {i} repeats a key with different frames"
            );
            replays += 1;
        }
    }
    // Each site's memo survives the other site's capture.
    assert!(
        replays >= 30,
        "only {replays} of {} captures were replayed",
        seen.len() - 2
    );
}

/// Call site `k` of eight: [`site_a`] below `k` more frames.
#[inline(never)]
fn site_at_depth(k: u32) -> ([u64; 64], usize, u64, [u64; 64], usize) {
    if black_box(k) == 0 {
        black_box(site_a())
    } else {
        black_box(site_at_depth(k - 1))
    }
}

#[test]
fn captures_cycling_through_eight_sites_replay_each_sites_last_capture() {
    let _lock = init_lock();
    init(Method::Dwarf).expect("init");
    const SITES: usize = 8;
    let mut seen: Vec<(u64, [u64; 64], usize)> = Vec::with_capacity(64);
    // Eight call sites in turn: each capture repeats only the one eight captures before (a
    // pattern that least-recently-used memos with fewer than eight ways never replay).
    with_c_frames(20, || {
        for round in 0..black_box(6 * SITES) {
            let (frames, n, key, gcc, m) = site_at_depth((round % SITES) as u32);
            assert_eq!(frames[..n], gcc[..m], "round {round}");
            seen.push((key, frames, n));
        }
    });
    let replays = replays_of_cycle(&seen, SITES);
    assert!(
        replays >= 4 * SITES,
        "only {replays} of {} captures were replayed",
        seen.len() - SITES
    );
}

type Site = fn() -> ([u64; 64], usize, u64, [u64; 64], usize);

/// Forty call sites at the same depth: functions alike but for a constant (so not merged into
/// one), each calling [`grab_keyed_fixed`] from its own call instruction. A capture from any of
/// them starts at the same stack pointer; only the return address one frame up tells them apart.
macro_rules! same_depth_sites {
    ($($name:ident $k:literal)*) => {
        $(
            #[inline(never)]
            fn $name() -> ([u64; 64], usize, u64, [u64; 64], usize) {
                black_box($k);
                black_box(grab_keyed_fixed())
            }
        )*
        const SAME_DEPTH_SITES: &[Site] = &[$($name),*];
    };
}

same_depth_sites! {
    s00 0 s01 1 s02 2 s03 3 s04 4 s05 5 s06 6 s07 7 s08 8 s09 9
    s10 10 s11 11 s12 12 s13 13 s14 14 s15 15 s16 16 s17 17 s18 18 s19 19
    s20 20 s21 21 s22 22 s23 23 s24 24 s25 25 s26 26 s27 27 s28 28 s29 29
    s30 30 s31 31 s32 32 s33 33 s34 34 s35 35 s36 36 s37 37 s38 38 s39 39
}

/// Captures from `sites` sites of [`SAME_DEPTH_SITES`] in turn, `cycles` times, each checked
/// against libgcc, on a new thread (whose memos are all empty: `init` captures too); returns how
/// many captures after the first cycle replayed the capture of the same site a cycle before
/// (same key, same frames), and how many there were.
fn replays_cycling_through(sites: usize, cycles: usize) -> (usize, usize) {
    let _lock = init_lock();
    init(Method::Dwarf).expect("init");
    let seen = std::thread::spawn(move || {
        let mut seen: Vec<(u64, [u64; 64], usize)> = Vec::with_capacity(sites * cycles);
        with_c_frames(20, || {
            for round in 0..black_box(sites * cycles) {
                let site = SAME_DEPTH_SITES[round % sites];
                let (frames, n, key, gcc, m) = black_box(site)();
                assert_eq!(frames[..n], gcc[..m], "round {round}");
                seen.push((key, frames, n));
            }
        });
        seen
    })
    .join()
    .expect("the capturing thread");
    (replays_of_cycle(&seen, sites), seen.len() - sites)
}

/// How many of the captures `seen` (key, frames, count), taken from `sites` sites in turn,
/// replayed the capture of the same site a cycle before: same key, and then the same frames.
/// No capture may repeat the key or the frames of the one before it (another site's).
fn replays_of_cycle(seen: &[(u64, [u64; 64], usize)], sites: usize) -> usize {
    let mut replays = 0;
    for i in sites..seen.len() {
        assert_ne!(seen[i].0, seen[i - 1].0, "capture {i} repeats the previous site's key");
        assert_ne!(seen[i].1[..seen[i].2], seen[i - 1].1[..seen[i - 1].2]);
        if seen[i].0 == seen[i - sites].0 {
            assert_eq!(
                seen[i].1,
                seen[i - sites].1,
                "capture {i} repeats a key with different frames"
            );
            replays += 1;
        }
    }
    replays
}

#[test]
fn captures_cycling_through_as_many_sites_as_memos_all_replay() {
    // Each site's memo survives the captures of all the others (with eight memos, or with
    // replacement of the least recently used one below MEMOS, none would).
    let (replays, captures) = replays_cycling_through(gpuleak_unwind::MEMOS, 5);
    assert_eq!(replays, captures, "only {replays} of {captures} captures were replayed");
}

#[test]
fn captures_cycling_through_more_sites_than_memos_still_replay_some() {
    // Eight sites more than memos: least-recently-used replacement would evict, every time, the
    // memo needed next and replay nothing; a random victim leaves most in place (about 60%).
    assert!(SAME_DEPTH_SITES.len() > gpuleak_unwind::MEMOS);
    let (replays, captures) = replays_cycling_through(SAME_DEPTH_SITES.len(), 6);
    assert!(
        replays * 3 >= captures,
        "only {replays} of {captures} captures were replayed"
    );
}
