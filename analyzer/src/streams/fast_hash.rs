//! A multiply-rotate hasher for the model's small integer keys (stream, event and context
//! handles, thread ids, finding keys): every stream-ordering record looks up a few of them,
//! and the standard SipHash cost about a sixth of the analysis (bench/streams). The keys come
//! from a trace, which a hostile process could craft to collide; that only slows the analysis
//! of its own trace.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};

/// The hasher (the multiply-rotate scheme of rustc's FxHash).
#[derive(Debug, Default, Clone, Copy)]
pub struct Fast(u64);

impl Fast {
    #[inline]
    fn add(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for Fast {
    #[inline]
    fn finish(&self) -> u64 {
        // The product's low bits only depend on the key's low bits, which are all zero in
        // aligned handles; the table takes its bucket from the low bits: rotate the
        // well-mixed middle bits there (as rustc-hash 2 does).
        self.0.rotate_left(26)
    }

    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.add(u64::from_le_bytes(word));
        }
    }

    #[inline]
    fn write_u8(&mut self, n: u8) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u16(&mut self, n: u16) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u32(&mut self, n: u32) {
        self.add(u64::from(n));
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.add(n);
    }

    #[inline]
    fn write_usize(&mut self, n: usize) {
        self.add(n as u64);
    }

    #[inline]
    fn write_isize(&mut self, n: isize) {
        self.add(n as u64);
    }
}

/// A `HashMap` with the fast hasher.
pub type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<Fast>>;
/// A `HashSet` with the fast hasher.
pub type FastSet<K> = HashSet<K, BuildHasherDefault<Fast>>;

#[cfg(test)]
mod tests {
    use std::hash::{BuildHasher, BuildHasherDefault};

    use super::*;

    #[test]
    fn nearby_handles_spread_over_the_high_bits() {
        // hashbrown picks buckets by the low bits and control bytes by the top 7.
        let b = BuildHasherDefault::<Fast>::default();
        let tops: HashSet<u64> = (0..64u64)
            .map(|i| b.hash_one(0x5ce0_0000_0010 + 16 * i) >> 57)
            .collect();
        assert!(tops.len() > 32, "{}", tops.len());
        let lows: HashSet<u64> = (0..64u64).map(|i| b.hash_one(0x5ce0_0000_0010 + 16 * i) & 63).collect();
        assert!(lows.len() > 32, "{}", lows.len());
        // Byte strings of any length hash by content.
        assert_ne!(b.hash_one("abcdefghi"), b.hash_one("abcdefghj"));
    }
}
