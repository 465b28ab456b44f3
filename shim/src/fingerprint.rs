//! The hashes that identify a captured stack (its return addresses, and the Python frames
//! woven into it): pure functions, shared by the stack table and the Python reader.

/// Hashes a stack: four independent multiply-rotate lanes over the frames (so that the CPU
/// overlaps them instead of waiting on one dependent chain), combined, then avalanched.
#[inline]
pub fn hash(frames: &[u64]) -> u64 {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut lanes: [u64; 4] = [
        0x243f_6a88_85a3_08d3 ^ frames.len() as u64,
        0x1319_8a2e_0370_7344,
        0xa409_3822_299f_31d0,
        0x082e_fa98_ec4e_6c89,
    ];
    let mut chunks = frames.chunks_exact(4);
    for c in &mut chunks {
        for (lane, &f) in lanes.iter_mut().zip(c) {
            *lane = (*lane ^ f).wrapping_mul(K).rotate_left(29);
        }
    }
    for (lane, &f) in lanes.iter_mut().zip(chunks.remainder()) {
        *lane = (*lane ^ f).wrapping_mul(K).rotate_left(29);
    }
    finish_hash(lanes[0] ^ lanes[1].rotate_left(16) ^ lanes[2].rotate_left(32) ^ lanes[3].rotate_left(48))
}

/// The final avalanche of [`hash`] (MurmurHash3's fmix64), also used for Python frames.
#[inline(always)]
pub fn finish_hash(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}
