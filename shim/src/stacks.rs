//! Interning call stacks: each distinct stack is written once and referred to by id.
//!
//! Identity is a 64-bit hash of the return addresses (a collision would merge two stacks;
//! at a million distinct stacks the odds are about 1 in 30 million). A per-thread
//! direct-mapped cache answers repeated stacks without a lock; misses go to a sharded map.

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use gpuleak_format::StackId;

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

/// The calling thread's cache; `None` when it has none (exiting, or out of memory).
#[inline]
fn recent() -> Option<&'static crate::scratch::Recent> {
    crate::scratch::current().map(|b| &b.recent)
}

/// Forgets this thread's cached stack ids. Called in a forked child: the ids belong to the
/// parent's trace, and the child's new trace must write its stacks again.
pub fn forget_recent() {
    if let Some(r) = recent() {
        r.0.iter().for_each(|e| e.set((0, 0)));
    }
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
        let slot = (h as usize) % crate::scratch::RECENT;
        let recent = recent();
        if let Some(r) = recent {
            let (k, v) = r.0[slot].get();
            if k == h && v != 0 {
                return StackId(v);
            }
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
        if let Some(r) = recent {
            r.0[slot].set((h, id));
        }
        StackId(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fingerprint::hash;

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
        // Lanes are combined with different rotations: swapping whole lanes changes the hash,
        // and so does a frame moving across the chunk boundary or a trailing zero frame.
        assert_ne!(hash(&[1, 2, 3, 4, 5, 6, 7, 8]), hash(&[2, 1, 3, 4, 6, 5, 7, 8]));
        assert_ne!(hash(&[1, 2, 3, 4, 5]), hash(&[5, 1, 2, 3, 4]));
        assert_ne!(hash(&[1, 2, 3]), hash(&[1, 2, 3, 0]));
        let distinct: std::collections::HashSet<u64> = (0..10_000u64)
            .map(|i| hash(&[0x5555_0000_1000 + i * 16, 0x7f00_0000_2000, i]))
            .collect();
        assert_eq!(distinct.len(), 10_000);
    }
}
