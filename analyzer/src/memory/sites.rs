//! Per-site state by stack id (and per-device state by device), with the one asked last found
//! without hashing.
//!
//! The memory pass changes a site's bytes at every allocation and free, twice (the process's
//! share and the device's), and its device's series; a program allocates from one site, on
//! one device, many times in a row.

use std::hash::Hash;

use gpuleak_format::StackId;

use crate::hash::HashMap;

/// Values by key (a stack id unless told), in the order they were made; the one asked last is
/// found first.
#[derive(Debug)]
pub struct Sites<V, K = StackId> {
    entries: Vec<(K, V)>,
    index: HashMap<K, usize>,
    /// Index in `entries` of the site asked last (`usize::MAX`: none yet).
    last: usize,
}

impl<V, K> Default for Sites<V, K> {
    fn default() -> Self {
        Sites {
            entries: Vec::new(),
            index: HashMap::default(),
            last: usize::MAX,
        }
    }
}

impl<V, K: Copy + Eq + Hash> Sites<V, K> {
    /// The value of `stack`, made by `make` if it has none.
    #[inline]
    pub fn entry_or_insert_with(&mut self, stack: K, make: impl FnOnce() -> V) -> &mut V {
        let i = self.index_or_insert_with(stack, make);
        self.at(i)
    }

    /// Where `stack`'s value is (made by `make` if it has none), for [`Sites::at`]: a place
    /// that stays while values are added.
    #[inline]
    pub fn index_or_insert_with(&mut self, stack: K, make: impl FnOnce() -> V) -> usize {
        if self.is_last(stack) {
            self.last
        } else {
            self.find_or_insert_with(stack, make)
        }
    }

    /// The value at `i`, from [`Sites::index_or_insert_with`].
    #[inline(always)]
    pub fn at(&mut self, i: usize) -> &mut V {
        &mut self.entries[i].1
    }

    /// Whether `stack` is the one asked last: then [`Sites::last_mut`] is its value, found
    /// without building anything to make a value with (the callers' fastest path).
    #[inline(always)]
    pub fn is_last(&self, stack: K) -> bool {
        self.entries.get(self.last).is_some_and(|(s, _)| *s == stack)
    }

    /// The value asked for last (see [`Sites::is_last`]).
    #[inline(always)]
    pub fn last_mut(&mut self) -> &mut V {
        &mut self.entries[self.last].1
    }

    /// The rest of [`Sites::index_or_insert_with`], out of line: the callers' fast path stays
    /// small, without the frame that making a value needs.
    #[cold]
    #[inline(never)]
    fn find_or_insert_with(&mut self, stack: K, make: impl FnOnce() -> V) -> usize {
        let i = match self.index.get(&stack) {
            Some(&i) => i,
            None => {
                self.entries.push((stack, make()));
                self.index.insert(stack, self.entries.len() - 1);
                self.entries.len() - 1
            }
        };
        self.last = i;
        i
    }

    /// Every site, in the order they were made.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.entries.iter().map(|(s, v)| (s, v))
    }

    /// Every site, mutable.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&K, &mut V)> {
        self.entries.iter_mut().map(|(s, v)| (&*s, v))
    }

    /// Every value, mutable.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.entries.iter_mut().map(|(_, v)| v)
    }
}

impl<V, K> IntoIterator for Sites<V, K> {
    type Item = (K, V);
    type IntoIter = std::vec::IntoIter<(K, V)>;

    fn into_iter(self) -> Self::IntoIter {
        self.entries.into_iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_stack_has_one_value_whichever_was_asked_last() {
        let mut sites: Sites<u32> = Sites::default();
        let mut plain: std::collections::HashMap<StackId, u32> = std::collections::HashMap::new();
        for (n, stack) in [1u32, 1, 2, 1, 3, 3, 2, 2, 1, 4, 3].into_iter().enumerate() {
            *sites.entry_or_insert_with(StackId(stack), || n as u32 * 100) += 1;
            *plain.entry(StackId(stack)).or_insert(n as u32 * 100) += 1;
        }
        let mut got: Vec<(StackId, u32)> = sites.iter().map(|(s, v)| (*s, *v)).collect();
        got.sort();
        let mut want: Vec<(StackId, u32)> = plain.into_iter().collect();
        want.sort();
        assert_eq!(got, want);
        assert_eq!(
            sites.iter().map(|(s, _)| s.0).collect::<Vec<_>>(),
            [1, 2, 3, 4],
            "in order made"
        );
    }
}
