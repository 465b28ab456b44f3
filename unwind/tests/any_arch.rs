//! What every architecture gets (x86-64 and aarch64 alike): the fallback chain of `init`, and
//! the frame-pointer walk, which is aarch64's default method, checked frame by frame against
//! libgcc's unwinder on a stack of known depth. (The workspace builds with frame pointers;
//! `scripts/test-aarch64` runs this under qemu.)

use std::hint::black_box;

use gpuleak_unwind::{capture_with, capture_with_sp, current_method, init, init_fallback_reason, Method};

const DEPTH: usize = 12;

/// Both methods from one frame, skipping it: they see the same stack from frame 0 on.
#[inline(never)]
fn probe(method: Method, got: &mut [u64; 64], want: &mut [u64; 64]) -> (usize, usize) {
    let n = capture_with(method, 1, got);
    let m = capture_with(Method::Gcc, 1, want);
    black_box((n, m))
}

/// `depth` nested calls, then the probe.
#[inline(never)]
fn nested(depth: usize, method: Method, got: &mut [u64; 64], want: &mut [u64; 64]) -> (usize, usize) {
    let r = if depth == 0 {
        probe(method, got, want)
    } else {
        nested(black_box(depth - 1), method, got, want)
    };
    black_box(r)
}

#[test]
fn the_frame_pointer_walk_agrees_with_libgcc_through_nested_frames() {
    let (mut got, mut want) = ([0u64; 64], [0u64; 64]);
    let (n, m) = nested(DEPTH, Method::FramePointer, &mut got, &mut want);
    // The nested frames, the probe's caller and this test's own frame at least.
    assert!(m > DEPTH + 2, "libgcc saw {m} frames");
    let common = n.min(m);
    assert!(common > DEPTH + 2, "frame pointers gave {n} frames, libgcc {m}");
    assert_eq!(got[..common], want[..common], "frame pointers vs libgcc");
    // The nested frames return to one address in `nested`.
    let repeated = got[1..=DEPTH].windows(2).filter(|w| w[0] == w[1]).count();
    assert_eq!(repeated, DEPTH - 1, "{:x?}", &got[..n]);
}

#[test]
fn init_uses_the_best_method_of_the_architecture_and_says_why_it_fell_back() {
    let used = init(Method::Dwarf).expect("some method works on Linux");
    assert_eq!(used, current_method());
    if cfg!(target_arch = "x86_64") {
        assert_eq!(used, Method::Dwarf);
        assert_eq!(init_fallback_reason(), None);
    } else {
        assert_eq!(used, Method::FramePointer);
        let reason = init_fallback_reason().expect("a reason for the fallback").to_string();
        assert!(reason.contains("not available on this architecture"), "{reason}");
    }
    assert_eq!(init(Method::FramePointer), Ok(Method::FramePointer));
    assert_eq!(init_fallback_reason(), None);
}

/// Frames with their stack pointers, from inside `inner`, called by `holder`.
#[inline(never)]
fn inner(ips: &mut [u64; 64], sps: &mut [u64; 64], plain: &mut [u64; 64]) -> (usize, usize) {
    let n = capture_with_sp(0, ips, sps);
    let m = capture_with(Method::Gcc, 0, plain);
    black_box((n, m))
}

#[inline(never)]
fn holder(ips: &mut [u64; 64], sps: &mut [u64; 64], plain: &mut [u64; 64]) -> (usize, usize, u64) {
    let local = black_box([7u64; 4]);
    let r = inner(ips, sps, plain);
    black_box(&local);
    (r.0, r.1, &local as *const _ as u64)
}

#[test]
fn stack_pointers_tell_which_frame_holds_a_local_variable() {
    let (mut ips, mut sps, mut plain) = ([0u64; 64], [0u64; 64], [0u64; 64]);
    let (n, m, local) = holder(&mut ips, &mut sps, &mut plain);
    assert!(n > 3 && n == m, "{n} frames with stack pointers, {m} without");
    // Frame 0 is inner's (a return address into it), frame 1 holder's.
    assert_eq!(ips[1..n], plain[1..m], "the same frames as libgcc's plain capture");
    assert!(sps[..n].windows(2).all(|w| w[0] < w[1]), "{:x?}", &sps[..n]);
    let j = (0..n - 1).find(|&j| sps[j] <= local && local < sps[j + 1]);
    assert_eq!(j, Some(1), "holder's local {local:#x} in {:x?}", &sps[..n]);
}
