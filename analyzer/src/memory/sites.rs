//! Per-site state by stack id, with the site asked last found without hashing.
//!
//! The memory pass changes a site's bytes at every allocation and free, twice (the process's
//! share and the device's); a program allocates from one site many times in a row.

use gpuleak_format::StackId;

use crate::hash::HashMap;

/// Values by stack id, in the order they were made; the one asked last is found first.
#[derive(Debug)]
pub struct Sites<V> {
    entries: Vec<(StackId, V)>,
    index: HashMap<StackId, usize>,
    /// Index in `entries` of the site asked last (`usize::MAX`: none yet).
    last: usize,
}

impl<V> Default for Sites<V> {
    fn default() -> Self {
        Sites {
            entries: Vec::new(),
            index: HashMap::default(),
            last: usize::MAX,
        }
    }
}

impl<V> Sites<V> {
    /// The value of `stack`, made by `make` if it has none.
    #[inline]
    pub fn entry_or_insert_with(&mut self, stack: StackId, make: impl FnOnce() -> V) -> &mut V {
        if self.entries.get(self.last).is_some_and(|(s, _)| *s == stack) {
            return &mut self.entries[self.last].1;
        }
        let i = match self.index.get(&stack) {
            Some(&i) => i,
            None => {
                self.entries.push((stack, make()));
                self.index.insert(stack, self.entries.len() - 1);
                self.entries.len() - 1
            }
        };
        self.last = i;
        &mut self.entries[i].1
    }

    /// Every site, in the order they were made.
    pub fn iter(&self) -> impl Iterator<Item = (&StackId, &V)> {
        self.entries.iter().map(|(s, v)| (s, v))
    }

    /// Every site, mutable.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = (&StackId, &mut V)> {
        self.entries.iter_mut().map(|(s, v)| (&*s, v))
    }

    /// Every value, mutable.
    pub fn values_mut(&mut self) -> impl Iterator<Item = &mut V> {
        self.entries.iter_mut().map(|(_, v)| v)
    }
}

impl<V> IntoIterator for Sites<V> {
    type Item = (StackId, V);
    type IntoIter = std::vec::IntoIter<(StackId, V)>;

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
