//! What every architecture gets (x86-64 and aarch64 alike): the fallback chain of `init`, and
//! the frame-pointer walk, which is aarch64's default method, checked frame by frame against
//! libgcc's unwinder on a stack of known depth. (The workspace builds with frame pointers;
//! `scripts/test-aarch64` runs this under qemu.)

use std::hint::black_box;

use gpuleak_unwind::{capture_with, current_method, init, init_fallback_reason, Method};

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
