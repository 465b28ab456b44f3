//! ns per stack capture for every method at 10, 25, 30 and 60 frames, warm cache.
//!
//! `cargo bench -p gpuleak-unwind --bench capture`
//!
//! The stacks are the C fixture of the tests (tests/fixture/stack.c) below this benchmark's
//! frames, built twice: with `-fomit-frame-pointer` (how most CUDA libraries ship; the
//! frame-pointer walk cannot follow it, see its frame count) and with frame pointers (where all
//! four methods agree, so the timings compare equal work). Each capture asks for exactly N frames
//! (`out.len() == N`) from a stack at least N deep. Each cell is the fastest of 60 batches
//! of about 1 ms (the machine is shared; the minimum is the least disturbed).

use std::ffi::{c_int, c_void};
use std::hint::black_box;
use std::time::{Duration, Instant};

use gpuleak_unwind::{capture_with, init, modules_changed, set_memo, Method};

type Callback = extern "C" fn(ctx: *mut c_void);
type Recurse = unsafe extern "C" fn(depth: c_int, cb: Callback, ctx: *mut c_void) -> c_int;

#[link(name = "gpuleak_unwind_fixture", kind = "static")]
extern "C" {
    fn fx_recurse(depth: c_int, cb: Callback, ctx: *mut c_void) -> c_int;
}

#[link(name = "gpuleak_unwind_fixture_fp", kind = "static")]
extern "C" {
    fn fxfp_recurse(depth: c_int, cb: Callback, ctx: *mut c_void) -> c_int;
}

const FRAMES: [usize; 4] = [10, 25, 30, 60];
/// Columns: the method, and whether the Dwarf memo is on.
const COLUMNS: [(Method, bool, &str); 5] = [
    (Method::Dwarf, true, "dwarf"),
    (Method::Dwarf, false, "dwarf, no memo"),
    (Method::LibUnwind, false, "libunwind"),
    (Method::FramePointer, false, "frame-pointer"),
    (Method::Gcc, false, "gcc"),
];
const BATCHES: usize = 60;
const BATCH_TIME: Duration = Duration::from_millis(1);

extern "C" fn trampoline(ctx: *mut c_void) {
    // SAFETY: `ctx` is the `&mut dyn FnMut()` that `below` passed to the fixture.
    let f = unsafe { &mut *ctx.cast::<&mut dyn FnMut()>() };
    f();
}

/// Runs `f` below `depth` frames of the fixture `recurse`.
fn below(recurse: Recurse, depth: usize, mut f: impl FnMut()) {
    let mut f: &mut dyn FnMut() = &mut f;
    let depth = c_int::try_from(depth).expect("small depth");
    // SAFETY: the fixture calls `trampoline(ctx)` once, `depth` frames down, while `f` lives.
    unsafe {
        recurse(depth, trampoline, (&mut f as *mut &mut dyn FnMut()).cast());
    }
}

/// One timed capture loop: (frames per capture, ns per capture).
#[inline(never)]
fn time_batch(method: Method, out: &mut [u64], iterations: u64) -> (usize, f64) {
    let mut frames = 0;
    let start = Instant::now();
    for _ in 0..iterations {
        frames = capture_with(method, 0, black_box(&mut *out));
    }
    let elapsed = start.elapsed();
    (frames, elapsed.as_nanos() as f64 / iterations as f64)
}

/// The fastest batch's ns per capture of `len` frames (the least disturbed by other work on a
/// shared machine), and the frame count.
fn measure(method: Method, len: usize) -> (usize, f64) {
    let mut out = vec![0u64; len];
    // Warm the cache (and libunwind's) and size the batches.
    let (_, rough) = time_batch(method, &mut out, 100);
    let iterations = ((BATCH_TIME.as_nanos() as f64 / rough.max(1.0)) as u64).max(10);
    let mut samples = Vec::new();
    let mut frames = 0;
    for _ in 0..BATCHES {
        let (n, ns) = time_batch(method, &mut out, iterations);
        frames = n;
        samples.push(ns);
    }
    samples.sort_by(f64::total_cmp);
    (frames, samples[0])
}

/// Frames a capture from `time_batch` sees below `depth` fixture frames.
fn stack_depth(recurse: Recurse, depth: usize) -> usize {
    let mut frames = 0;
    below(recurse, depth, || {
        frames = time_batch(Method::Gcc, &mut [0u64; 512], 1).0
    });
    frames
}

fn bench(name: &str, recurse: Recurse) {
    let base = stack_depth(recurse, 1) - 1;
    println!("\n{name} (stack outside the fixture: {base} frames)\n");
    print!("| frames |");
    for (_, _, name) in COLUMNS {
        print!(" {name} ns |");
    }
    println!(" dwarf / libunwind | dwarf no memo / libunwind |");
    println!("|---|---|---|---|---|---|---|---|");
    for frames in FRAMES {
        let depth = frames.saturating_sub(base).max(1);
        let mut row = Vec::new();
        below(recurse, depth, || {
            row = COLUMNS
                .iter()
                .map(|&(method, memo, _)| {
                    set_memo(memo);
                    measure(method, frames)
                })
                .collect();
            set_memo(true);
        });
        print!("| {frames} |");
        for &(n, ns) in &row {
            if n == frames {
                print!(" {ns:.0} |");
            } else {
                print!(" {ns:.0} ({n} frames) |");
            }
        }
        println!(" {:.2} | {:.2} |", row[0].1 / row[2].1, row[1].1 / row[2].1);
    }
}

/// The first capture after a cache flush: every frame takes the cold path.
fn cold(recurse: Recurse) {
    let mut out = [0u64; 25];
    let mut total = Duration::ZERO;
    let rounds = 50;
    below(recurse, 25, || {
        for _ in 0..rounds {
            modules_changed();
            let start = Instant::now();
            black_box(capture_with(Method::Dwarf, 0, &mut out));
            total += start.elapsed();
        }
    });
    let per_frame = total.as_nanos() as f64 / rounds as f64 / out.len() as f64;
    println!("\ndwarf, cold cache (first capture after a flush): {per_frame:.0} ns per frame");
}

fn main() {
    // Run on a fresh thread: its stack outside the fixture is shallower than main's.
    std::thread::spawn(|| {
        let libunwind = init(Method::LibUnwind);
        assert_eq!(libunwind, Ok(Method::LibUnwind), "this benchmark needs libunwind.so.8");
        assert_eq!(init(Method::Dwarf), Ok(Method::Dwarf));
        bench("-O2 -fomit-frame-pointer fixture", fx_recurse);
        bench("-O2 -fno-omit-frame-pointer fixture", fxfp_recurse);
        cold(fx_recurse);
    })
    .join()
    .expect("benchmark thread");
}
