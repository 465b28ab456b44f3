//! Mappings of VMM physical handles into reserved address ranges.
//!
//! A physical handle holds memory until it is released *and* every mapping of it is gone
//! (the CUDA driver API's virtual memory management), so the model needs to know, per handle, how many mappings remain.

use std::collections::BTreeMap;

/// One live mapping.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapping {
    /// Physical handle mapped.
    pub handle: u64,
    /// Bytes mapped.
    pub size: u64,
}

/// Live mappings by start address.
#[derive(Debug, Default)]
pub struct Mappings {
    by_address: BTreeMap<u64, Mapping>,
}

impl Mappings {
    /// Adds a mapping; returns the one it replaces (an unmap the trace missed).
    pub fn map(&mut self, address: u64, mapping: Mapping) -> Option<Mapping> {
        self.by_address.insert(address, mapping)
    }

    /// Removes every mapping that starts inside `[address, address + size)` and returns them.
    pub fn unmap(&mut self, address: u64, size: u64) -> Vec<Mapping> {
        let end = address.saturating_add(size.max(1));
        let starts: Vec<u64> = self.by_address.range(address..end).map(|(a, _)| *a).collect();
        starts.into_iter().filter_map(|a| self.by_address.remove(&a)).collect()
    }

    /// Removes every mapping of a handle that no longer exists (its context was torn down).
    pub fn forget_handle(&mut self, handle: u64) {
        self.by_address.retain(|_, m| m.handle != handle);
    }

    /// The live mappings, by start address.
    pub fn iter(&self) -> impl Iterator<Item = (u64, Mapping)> + '_ {
        self.by_address.iter().map(|(a, m)| (*a, *m))
    }

    /// Number of live mappings.
    pub fn len(&self) -> usize {
        self.by_address.len()
    }

    /// Whether no mapping is live.
    pub fn is_empty(&self) -> bool {
        self.by_address.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unmap_removes_every_mapping_that_starts_in_the_range() {
        let mut m = Mappings::default();
        m.map(
            0x1000,
            Mapping {
                handle: 1,
                size: 0x1000,
            },
        );
        m.map(
            0x2000,
            Mapping {
                handle: 2,
                size: 0x1000,
            },
        );
        m.map(
            0x3000,
            Mapping {
                handle: 3,
                size: 0x1000,
            },
        );
        let gone = m.unmap(0x1000, 0x2000);
        assert_eq!(gone.iter().map(|g| g.handle).collect::<Vec<_>>(), [1, 2]);
        assert_eq!(m.len(), 1);
        m.forget_handle(3);
        assert_eq!(m.len(), 0);
    }
}
