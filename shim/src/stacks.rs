//! Interning call stacks: each distinct stack is written once and referred to by id.
//!
//! Identity is a 64-bit hash of the return addresses (a collision would merge two stacks;
//! at a million distinct stacks the odds are about 1 in 30 million). A per-thread
//! direct-mapped cache answers repeated stacks without a lock; misses go to a sharded map.

use std::cell::Cell;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use gpuleak_format::StackId;

/// Hashes a stack.
#[inline]
pub fn hash(frames: &[u64]) -> u64 {
    let mut h: u64 = 0x243f_6a88_85a3_08d3 ^ frames.len() as u64;
    for &f in frames {
        h = (h ^ f).wrapping_mul(0x9e37_79b9_7f4a_7c15).rotate_left(29);
    }
    // Final avalanche (from MurmurHash3's fmix64).
    h ^= h >> 33;
    h = h.wrapping_mul(0xff51_afd7_ed55_8ccd);
    h ^= h >> 33;
    h = h.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    h ^ (h >> 33)
}

/// Keys are already hashes.
#[derive(Default)]
pub struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, _: &[u8]) {
        unreachable_hash()
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

#[cold]
fn unreachable_hash() {}

const SHARDS: usize = 16;
const CACHE: usize = 256;

thread_local! {
    static RECENT: [Cell<(u64, u32)>; CACHE] = const { [const { Cell::new((0, 0)) }; CACHE] };
}

/// Forgets this thread's cached stack ids. Called in a forked child: the ids belong to the
/// parent's trace, and the child's new trace must write its stacks again.
pub fn forget_recent() {
    let _ = RECENT.try_with(|c| c.iter().for_each(|e| e.set((0, 0))));
}

/// The process's stack table.
pub struct Stacks {
    shards: [Mutex<HashMap<u64, u32, BuildHasherDefault<Identity>>>; SHARDS],
    next: AtomicU32,
}

impl Default for Stacks {
    fn default() -> Self {
        Self::new()
    }
}

impl Stacks {
    /// An empty table.
    pub fn new() -> Stacks {
        Stacks {
            shards: std::array::from_fn(|_| Mutex::new(HashMap::default())),
            next: AtomicU32::new(1),
        }
    }

    /// Looks a stack up by hash, assigning an id to a new one. `write_new` runs for a new
    /// stack before any other thread can be told its id.
    #[inline]
    pub fn intern(&self, h: u64, write_new: impl FnOnce(StackId)) -> StackId {
        let slot = (h as usize) % CACHE;
        if let Ok(Some(id)) = RECENT.try_with(|c| {
            let (k, v) = c[slot].get();
            (k == h && v != 0).then_some(v)
        }) {
            return StackId(id);
        }
        let shard = &self.shards[(h >> 56) as usize % SHARDS];
        let mut map = shard.lock().unwrap_or_else(|p| p.into_inner());
        let id = match map.get(&h) {
            Some(&id) => id,
            None => {
                let id = self.next.fetch_add(1, Ordering::Relaxed);
                map.insert(h, id);
                write_new(StackId(id));
                id
            }
        };
        drop(map);
        let _ = RECENT.try_with(|c| c[slot].set((h, id)));
        StackId(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_stack_same_id_and_new_stacks_written_once() {
        let s = Stacks::new();
        let mut written = Vec::new();
        let a = s.intern(hash(&[1, 2, 3]), |id| written.push(id));
        let b = s.intern(hash(&[1, 2, 4]), |id| written.push(id));
        let a2 = s.intern(hash(&[1, 2, 3]), |id| written.push(id));
        assert_eq!(a, a2);
        assert_ne!(a, b);
        assert_eq!(written, vec![a, b]);
        assert_ne!(hash(&[1, 2]), hash(&[2, 1]));
    }
}
