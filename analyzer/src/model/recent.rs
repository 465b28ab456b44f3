//! A bounded memory of recently freed pointers, so that a double free can name the allocation
//! that used to live at its address.

use std::collections::VecDeque;

use crate::hash::HashMap;

use gpuleak_format::StackId;

use super::AllocSite;
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

/// The last `capacity` frees, by (space, pointer); older ones are forgotten first, and an
/// address drops out as soon as it is allocated again.
#[derive(Debug)]
pub struct RecentFrees {
    capacity: usize,
    next_generation: u64,
    order: VecDeque<((Space, u64), u64)>,
    entries: HashMap<(Space, u64), (u64, Freed)>,
}

impl RecentFrees {
    /// Remembers at most `capacity` frees.
    pub fn new(capacity: usize) -> RecentFrees {
        RecentFrees {
            capacity: capacity.max(1),
            next_generation: 0,
            order: VecDeque::new(),
            entries: HashMap::default(),
        }
    }

    /// Records a free at `key`.
    pub fn insert(&mut self, key: (Space, u64), freed: Freed) {
        let generation = self.next_generation;
        self.next_generation += 1;
        self.entries.insert(key, (generation, freed));
        self.order.push_back((key, generation));
        while self.order.len() > self.capacity {
            if let Some((old, old_generation)) = self.order.pop_front() {
                if self.entries.get(&old).is_some_and(|(g, _)| *g == old_generation) {
                    self.entries.remove(&old);
                }
            }
        }
    }

    /// Forgets `key` (it holds a live allocation again).
    pub fn remove(&mut self, key: (Space, u64)) {
        self.entries.remove(&key);
    }

    /// The free remembered at `key`.
    pub fn get(&self, key: (Space, u64)) -> Option<&Freed> {
        self.entries.get(&key).map(|(_, f)| f)
    }

    /// How many frees are remembered.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.entries.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use gpuleak_format::{Api, MemKind};

    fn freed(stack: u32) -> Freed {
        Freed {
            site: AllocSite {
                kind: MemKind::Device,
                api: Api::cuMemAlloc_v2,
                size: 1,
                stack: StackId(stack),
            },
            free_stack: StackId::NONE,
        }
    }

    #[test]
    fn oldest_frees_are_forgotten_first() {
        let mut r = RecentFrees::new(2);
        r.insert((Space::Device, 1), freed(1));
        r.insert((Space::Device, 2), freed(2));
        r.insert((Space::Device, 3), freed(3));
        assert!(r.get((Space::Device, 1)).is_none());
        assert_eq!(r.get((Space::Device, 3)).unwrap().site.stack, StackId(3));
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn a_refreed_address_keeps_its_newest_entry() {
        let mut r = RecentFrees::new(2);
        r.insert((Space::Device, 1), freed(1));
        r.insert((Space::Device, 1), freed(5));
        r.insert((Space::Device, 2), freed(2));
        // The first entry for address 1 is evicted from the queue, but the newer one stays.
        assert_eq!(r.get((Space::Device, 1)).unwrap().site.stack, StackId(5));
        r.remove((Space::Device, 1));
        assert!(r.get((Space::Device, 1)).is_none());
    }
}
