//! A bounded memory of recently freed pointers, so that a double free can name the allocation
//! that used to live at its address.

use std::collections::VecDeque;

use crate::hash::HashMap;

use gpuleak_format::{Api, MemKind, StackId};

use super::AllocSite;
use crate::allocation::Allocation;
use gpuleak_format::space::Space;

/// What was freed at an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Freed {
    /// The allocation that lived there.
    pub site: AllocSite,
    /// Stack of the free that released it (often none: the shim captures free stacks only
    /// when asked to).
    pub free_stack: StackId,
}

/// What a remembered free is written over.
const BLANK: Freed = Freed {
    site: AllocSite {
        kind: MemKind::Device,
        api: Api(0),
        size: 0,
        stack: StackId(0),
    },
    free_stack: StackId(0),
};

/// The last `capacity` frees, by (space, pointer); older ones are forgotten first, and an
/// address drops out as soon as it is allocated again.
#[derive(Debug)]
pub struct RecentFrees {
    capacity: usize,
    next_generation: u64,
    order: VecDeque<((Space, u64), u64)>,
    /// Every free remembered but the newest, which is kept aside in `newest` (never at a key
    /// this map holds): a program that frees and allocates again at the same address, the
    /// usual churn, would otherwise put an entry in this map and take it out at every pair.
    entries: HashMap<(Space, u64), (u64, Freed)>,
    newest: Option<((Space, u64), (u64, Freed))>,
}

impl RecentFrees {
    /// Remembers at most `capacity` frees.
    pub fn new(capacity: usize) -> RecentFrees {
        RecentFrees {
            capacity: capacity.max(1),
            next_generation: 0,
            order: VecDeque::new(),
            entries: HashMap::default(),
            newest: None,
        }
    }

    /// Records a free at `key` of `alloc`, by the call at `free_stack`.
    ///
    /// The entry is written where it is kept, field by field (a `Freed` built on the stack and
    /// copied is read back in loads wider than the stores that just made it, which the
    /// processor does not forward). The newest free stays out of the order of eviction until
    /// a newer one comes: a program that allocates again at once, the usual churn, then never
    /// touches that order.
    #[inline(always)]
    pub fn insert(&mut self, key: (Space, u64), alloc: &Allocation, free_stack: StackId) {
        let generation = self.next_generation;
        self.next_generation += 1;
        // A free is remembered for the next `capacity` frees.
        while let Some(&(old, old_generation)) = self.order.front() {
            if old_generation + self.capacity as u64 > generation {
                break;
            }
            self.order.pop_front();
            // (The map never holds the newest entry's key.)
            if self.entries.get(&old).is_some_and(|(g, _)| *g == old_generation) {
                self.entries.remove(&old);
            }
        }
        // The entry set aside before goes into the map and the order, unless this one
        // replaces it or it is too old to remember (a capacity of one).
        if self.newest.as_ref().is_some_and(|(k, _)| *k != key) {
            if let Some((k, older)) = self.newest.take() {
                if older.0 + self.capacity as u64 > generation {
                    self.order.push_back((k, older.0));
                    self.entries.insert(k, older);
                }
            }
        }
        if !self.entries.is_empty() {
            self.entries.remove(&key);
        }
        let (k, (g, freed)) = self.newest.get_or_insert((key, (0, BLANK)));
        *k = key;
        *g = generation;
        freed.site.kind = alloc.kind;
        freed.site.api = alloc.api;
        freed.site.size = alloc.size;
        freed.site.stack = alloc.stack;
        freed.free_stack = free_stack;
    }

    /// Forgets `key` (it holds a live allocation again).
    #[inline]
    pub fn remove(&mut self, key: (Space, u64)) {
        if self.newest.as_ref().is_some_and(|(k, _)| *k == key) {
            // Not in the order yet: nothing more to do (the usual churn, an address allocated
            // again at once).
            self.newest = None;
            return;
        }
        if !self.entries.is_empty() {
            // Its place in the order stays, and is passed over when its turn comes (its
            // generation no longer matches).
            self.entries.remove(&key);
        }
    }

    /// The free remembered at `key`.
    pub fn get(&self, key: (Space, u64)) -> Option<&Freed> {
        self.entry(key).map(|(_, f)| f)
    }

    /// The free remembered at `key`, with its generation.
    fn entry(&self, key: (Space, u64)) -> Option<&(u64, Freed)> {
        match &self.newest {
            Some((k, e)) if *k == key => Some(e),
            _ => self.entries.get(&key),
        }
    }

    /// How many frees are remembered.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len() + usize::from(self.newest.is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn freed(stack: u32) -> Allocation {
        Allocation {
            kind: MemKind::Device,
            api: Api::cuMemAlloc_v2,
            size: 1,
            stack: StackId(stack),
            ..Allocation::BLANK
        }
    }

    #[test]
    fn oldest_frees_are_forgotten_first() {
        let mut r = RecentFrees::new(2);
        r.insert((Space::Device, 1), &freed(1), StackId::NONE);
        r.insert((Space::Device, 2), &freed(2), StackId::NONE);
        r.insert((Space::Device, 3), &freed(3), StackId::NONE);
        assert!(r.get((Space::Device, 1)).is_none());
        assert_eq!(r.get((Space::Device, 3)).unwrap().site.stack, StackId(3));
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn a_refreed_address_keeps_its_newest_entry() {
        let mut r = RecentFrees::new(2);
        r.insert((Space::Device, 1), &freed(1), StackId::NONE);
        r.insert((Space::Device, 1), &freed(5), StackId::NONE);
        r.insert((Space::Device, 2), &freed(2), StackId::NONE);
        // The first entry for address 1 is evicted from the queue, but the newer one stays.
        assert_eq!(r.get((Space::Device, 1)).unwrap().site.stack, StackId(5));
        r.remove((Space::Device, 1));
        assert!(r.get((Space::Device, 1)).is_none());
    }

    #[test]
    fn the_newest_free_set_aside_reads_as_one_map_of_frees() {
        // Against a plain map with the same eviction, on few addresses so that they repeat.
        for capacity in [1, 2, 5] {
            let mut r = RecentFrees::new(capacity);
            let mut plain: HashMap<(Space, u64), (u64, u32)> = HashMap::default();
            let mut order = VecDeque::new();
            let mut state = 0x2545_f491_4f6c_dd1du64;
            for generation in 0..20_000u64 {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                let key = (Space::Device, state % 9);
                let stack = (state >> 32) as u32;
                if state % 3 == 0 {
                    r.remove(key);
                    plain.remove(&key);
                } else {
                    r.insert(key, &freed(stack), StackId::NONE);
                    plain.insert(key, (generation, stack));
                    order.push_back((key, generation));
                    while order.len() > capacity {
                        let (old, g) = order.pop_front().unwrap();
                        if plain.get(&old).is_some_and(|e| e.0 == g) {
                            plain.remove(&old);
                        }
                    }
                }
                assert_eq!(r.len(), plain.len(), "after {generation}");
                for a in 0..9 {
                    let key = (Space::Device, a);
                    assert_eq!(
                        r.get(key).map(|f| f.site.stack.0),
                        plain.get(&key).map(|e| e.1),
                        "address {a} after {generation}"
                    );
                }
            }
        }
    }
}
