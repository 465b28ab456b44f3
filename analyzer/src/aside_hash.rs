//! A hash map that keeps its newest entry out of the table, as [`crate::aside`] does for an
//! ordered map.
//!
//! The leak model's live allocations take an insert at every allocation and a look-up and a
//! removal at every free. A program that allocates and frees at the same address over and
//! over (the usual churn) then hashes the same key three times a pair; with the newest entry
//! set aside, that churn never touches the table.

use std::hash::Hash;

use crate::hash::HashMap;

/// A [`HashMap`] whose newest entry is kept aside (never at a key the table holds). Iteration
/// order is unspecified, as a [`HashMap`]'s is.
#[derive(Debug)]
pub struct AsideHashMap<K, V> {
    table: HashMap<K, V>,
    newest: Option<(K, V)>,
}

impl<K, V> Default for AsideHashMap<K, V> {
    fn default() -> Self {
        AsideHashMap {
            table: HashMap::default(),
            newest: None,
        }
    }
}

impl<K: Hash + Eq + Copy, V> AsideHashMap<K, V> {
    /// Entries.
    pub fn len(&self) -> usize {
        self.table.len() + usize::from(self.newest.is_some())
    }

    /// Makes the entry at `key` the newest (replacing what was there) and answers it, for the
    /// caller to write whole: it holds `blank` or an older value until then (see
    /// [`AsideMap::insert_in_place`](crate::aside::AsideMap::insert_in_place)).
    #[inline(always)]
    pub fn insert_in_place(&mut self, key: K, blank: impl FnOnce() -> V) -> &mut V {
        if self.newest.as_ref().is_some_and(|(k, _)| *k != key) {
            if let Some((k, older)) = self.newest.take() {
                self.table.insert(k, older);
            }
        }
        if !self.table.is_empty() {
            self.table.remove(&key);
        }
        let (k, v) = self.newest.get_or_insert_with(|| (key, blank()));
        *k = key;
        v
    }

    /// Removes the entry at `key`.
    #[inline]
    pub fn remove(&mut self, key: &K) -> Option<V> {
        if self.newest.as_ref().is_some_and(|(k, _)| k == key) {
            return self.newest.take().map(|(_, v)| v);
        }
        if self.table.is_empty() {
            return None;
        }
        self.table.remove(key)
    }

    /// Removes the entry at `key`, dropping it where it lies (cheaper than moving it out
    /// with [`remove`](Self::remove) only to drop it); whether there was one.
    #[inline]
    pub fn delete(&mut self, key: &K) -> bool {
        if self.newest.as_ref().is_some_and(|(k, _)| k == key) {
            self.newest = None;
            return true;
        }
        !self.table.is_empty() && self.table.remove(key).is_some()
    }

    /// The entry at `key`.
    #[inline]
    pub fn get(&self, key: &K) -> Option<&V> {
        match &self.newest {
            Some((k, v)) if k == key => Some(v),
            _ if self.table.is_empty() => None,
            _ => self.table.get(key),
        }
    }

    /// The entry at `key`, mutable.
    #[inline]
    pub fn get_mut(&mut self, key: &K) -> Option<&mut V> {
        match &mut self.newest {
            Some((k, v)) if k == key => Some(v),
            _ if self.table.is_empty() => None,
            _ => self.table.get_mut(key),
        }
    }

    /// Whether `key` has an entry.
    pub fn contains_key(&self, key: &K) -> bool {
        self.get(key).is_some()
    }

    /// Every entry, in no particular order.
    pub fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.newest.iter().map(|(k, v)| (k, v)).chain(self.table.iter())
    }

    /// Every value, in no particular order.
    pub fn values(&self) -> impl Iterator<Item = &V> {
        self.iter().map(|(_, v)| v)
    }

    /// Takes every entry out, in no particular order.
    pub fn drain(&mut self) -> impl Iterator<Item = (K, V)> + '_ {
        self.newest.take().into_iter().chain(self.table.drain())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_as_one_map_whatever_the_order_of_inserts_and_removes() {
        let mut aside = AsideHashMap::default();
        let mut plain = std::collections::HashMap::new();
        let mut state = 0x9e37_79b9_7f4a_7c15u64;
        for step in 0..50_000u64 {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let key = state % 24;
            match state % 8 {
                0..=1 => assert_eq!(aside.remove(&key), plain.remove(&key), "step {step}"),
                7 => assert_eq!(aside.delete(&key), plain.remove(&key).is_some(), "step {step}"),
                2 => {
                    if let (Some(a), Some(p)) = (aside.get_mut(&key), plain.get_mut(&key)) {
                        *a += 1;
                        *p += 1;
                    }
                }
                // Over a blank, or over the value there before.
                _ => {
                    *aside.insert_in_place(key, || u64::MAX) = step;
                    plain.insert(key, step);
                }
            }
            assert_eq!(aside.len(), plain.len());
            let mut entries: Vec<(u64, u64)> = aside.iter().map(|(k, v)| (*k, *v)).collect();
            entries.sort_unstable();
            let mut want: Vec<(u64, u64)> = plain.iter().map(|(k, v)| (*k, *v)).collect();
            want.sort_unstable();
            assert_eq!(entries, want, "step {step}");
            for k in 0..26 {
                assert_eq!(aside.get(&k), plain.get(&k));
                assert_eq!(aside.contains_key(&k), plain.contains_key(&k));
            }
        }
        let mut drained: Vec<(u64, u64)> = aside.drain().collect();
        drained.sort_unstable();
        let mut want: Vec<(u64, u64)> = plain.drain().collect();
        want.sort_unstable();
        assert_eq!(drained, want);
        assert_eq!(aside.len(), 0);
    }
}
