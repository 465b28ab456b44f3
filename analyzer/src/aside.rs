//! An ordered map of address ranges by start that keeps its newest entry out of the tree.
//!
//! A program that allocates and frees at the same address over and over (the usual churn)
//! makes the stream-ordering model and the memory pass insert a range and remove it again at
//! every pair; with the newest
//! entry set aside, that churn never touches the B-tree. Reads see the tree and the entry set
//! aside as one map.

use std::collections::BTreeMap;
use std::ops::{Bound, RangeBounds};

/// A `BTreeMap<u64, V>` whose newest entry is kept aside (never at a key the tree holds).
#[derive(Debug)]
pub struct AsideMap<V> {
    tree: BTreeMap<u64, V>,
    newest: Option<(u64, V)>,
}

impl<V> Default for AsideMap<V> {
    fn default() -> Self {
        AsideMap {
            tree: BTreeMap::new(),
            newest: None,
        }
    }
}

impl<V> AsideMap<V> {
    /// Removes the entry at `key`, dropping it where it lies (cheaper than moving it out
    /// with [`remove`](Self::remove) only to drop it); whether there was one.
    #[inline]
    pub fn delete(&mut self, key: u64) -> bool {
        if self.newest.as_ref().is_some_and(|(k, _)| *k == key) {
            self.newest = None;
            return true;
        }
        !self.tree.is_empty() && self.tree.remove(&key).is_some()
    }

    /// The entry set aside: the one inserted last, unless it was removed since.
    #[inline]
    pub fn newest(&self) -> Option<(u64, &V)> {
        self.newest.as_ref().map(|(k, v)| (*k, v))
    }

    /// Entries.
    pub fn len(&self) -> usize {
        self.tree.len() + usize::from(self.newest.is_some())
    }

    /// Makes the entry at `key` the newest (replacing what was there) and answers it, for the
    /// caller to write whole: it holds `blank` or an older value until then. Writing the fields
    /// where they are kept spares copying a value built on the stack, which the processor
    /// reads back in wide loads that straddle the narrower stores just made.
    #[inline(always)]
    pub fn insert_in_place(&mut self, key: u64, blank: impl FnOnce() -> V) -> &mut V {
        if self.newest.as_ref().is_some_and(|(k, _)| *k != key) {
            if let Some((k, older)) = self.newest.take() {
                self.tree.insert(k, older);
            }
        }
        if !self.tree.is_empty() {
            self.tree.remove(&key);
        }
        let (k, v) = self.newest.get_or_insert_with(|| (key, blank()));
        *k = key;
        v
    }

    /// Removes the entry at `key`.
    #[inline]
    pub fn remove(&mut self, key: u64) -> Option<V> {
        if self.newest.as_ref().is_some_and(|(k, _)| *k == key) {
            return self.newest.take().map(|(_, v)| v);
        }
        if self.tree.is_empty() {
            return None;
        }
        self.tree.remove(&key)
    }

    /// The entry at `key`.
    #[inline]
    pub fn get(&self, key: u64) -> Option<&V> {
        match &self.newest {
            Some((k, v)) if *k == key => Some(v),
            _ => self.tree.get(&key),
        }
    }

    /// Every entry in key order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &V)> {
        let (before, newest, after) = match &self.newest {
            Some((k, v)) => (
                self.tree.range(..*k),
                Some((*k, v)),
                self.tree.range((Bound::Excluded(*k), Bound::Unbounded)),
            ),
            None => (
                self.tree.range(..),
                None,
                self.tree.range((Bound::Excluded(u64::MAX), Bound::Unbounded)),
            ),
        };
        before
            .map(|(k, v)| (*k, v))
            .chain(newest)
            .chain(after.map(|(k, v)| (*k, v)))
    }

    /// The entry with the highest key in `range`.
    #[inline]
    pub fn last_in(&self, range: impl RangeBounds<u64> + Clone) -> Option<(u64, &V)> {
        let aside = self.newest.as_ref().filter(|(k, _)| range.contains(k));
        if self.tree.is_empty() {
            // Churn at one address: nothing but the entry aside, no tree to search.
            return aside.map(|(k, v)| (*k, v));
        }
        let tree = self.tree.range(range).next_back();
        match (tree, aside) {
            (Some((&t, v)), Some((n, _))) if t > *n => Some((t, v)),
            (_, Some((n, v))) => Some((*n, v)),
            (t, None) => t.map(|(&k, v)| (k, v)),
        }
    }

    /// The entry with the highest key in `range`, mutable.
    #[inline]
    pub fn last_in_mut(&mut self, range: impl RangeBounds<u64> + Clone) -> Option<(u64, &mut V)> {
        let aside = self.newest.as_mut().filter(|(k, _)| range.contains(k));
        if self.tree.is_empty() {
            return aside.map(|(k, v)| (*k, v));
        }
        let tree = self.tree.range_mut(range).next_back();
        match (tree, aside) {
            (Some((&t, v)), Some((n, _))) if t > *n => Some((t, v)),
            (_, Some((n, v))) => Some((*n, v)),
            (t, None) => t.map(|(&k, v)| (k, v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_as_one_map_whatever_the_order_of_inserts_and_removes() {
        let mut aside = AsideMap::default();
        let mut plain = BTreeMap::new();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..50_000u64 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let key = state % 24;
            if state % 5 < 2 {
                if state % 5 == 0 {
                    assert_eq!(aside.delete(key), plain.remove(&key).is_some(), "step {step}");
                } else {
                    assert_eq!(aside.remove(key), plain.remove(&key), "step {step}");
                }
            } else {
                // Over a blank, or over the value there before.
                *aside.insert_in_place(key, || u64::MAX) = step;
                plain.insert(key, step);
            }
            if let Some((k, v)) = aside.newest() {
                assert_eq!(plain.get(&k), Some(v), "step {step}");
            }
            assert_eq!(aside.len(), plain.len());
            assert!(aside.iter().eq(plain.iter().map(|(k, v)| (*k, v))), "step {step}");
            for k in 0..26 {
                assert_eq!(aside.get(k), plain.get(&k));
                let want = plain.range(..k).next_back().map(|(&k, v)| (k, *v));
                assert_eq!(aside.last_in(..k).map(|(k, v)| (k, *v)), want, "below {k}");
                let want = plain.range(..=k).next_back().map(|(&k, v)| (k, *v));
                assert_eq!(aside.last_in_mut(..=k).map(|(k, v)| (k, *v)), want, "at or below {k}");
            }
        }
    }
}
