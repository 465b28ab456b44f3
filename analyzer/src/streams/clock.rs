//! Vector clocks indexed by stream slot.
//!
//! Only streams are dimensions: every check asks "was this stream's operation number `e`
//! complete, as far as this stream, host thread or event knows?". Host threads and events
//! carry clocks but never need a dimension of their own.

/// A stream's place in every clock, reused after the stream is gone (see `Slots`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Slot(pub u32);

/// A stream operation: the `epoch`-th operation counted on `slot` (counts continue across
/// the streams that occupy a slot in turn, so a stale entry never claims a newer stream's
/// work).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Epoch {
    /// The stream's slot.
    pub slot: Slot,
    /// The operation's number on it.
    pub n: u64,
}

/// For each stream slot, how many of its operations are known complete.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Clock(Vec<u64>);

impl Clone for Clock {
    fn clone(&self) -> Clock {
        Clock(self.0.clone())
    }

    /// Reuses this clock's allocation (event records copy a stream's clock every time).
    fn clone_from(&mut self, source: &Clock) {
        self.0.clone_from(&source.0);
    }
}

impl Clock {
    /// Knows nothing.
    pub fn new() -> Clock {
        Clock(Vec::new())
    }

    /// Operations of `slot` known complete.
    #[inline]
    pub fn get(&self, slot: Slot) -> u64 {
        self.0.get(slot.0 as usize).copied().unwrap_or(0)
    }

    /// Sets the count of `slot` (a stream ticking its own entry).
    pub fn set(&mut self, slot: Slot, n: u64) {
        let i = slot.0 as usize;
        if self.0.len() <= i {
            self.0.resize(i + 1, 0);
        }
        self.0[i] = n;
    }

    /// Whether operation `e` is known complete.
    #[inline]
    pub fn covers(&self, e: Epoch) -> bool {
        self.get(e.slot) >= e.n
    }

    /// Learns everything `other` knows (element-wise maximum).
    #[inline]
    pub fn join(&mut self, other: &Clock) {
        if self.0.len() < other.0.len() {
            self.0.resize(other.0.len(), 0);
        }
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            if *b > *a {
                *a = *b;
            }
        }
    }

    /// Keeps only what `other` knows too (element-wise minimum).
    pub fn meet(&mut self, other: &Clock) {
        self.0.truncate(other.0.len());
        for (a, b) in self.0.iter_mut().zip(&other.0) {
            if *b < *a {
                *a = *b;
            }
        }
    }

    /// Whether `self` knows of operations of some stream other than `except` that `other`
    /// does not.
    pub fn knows_more_than(&self, other: &Clock, except: Option<Slot>) -> bool {
        self.0
            .iter()
            .enumerate()
            .any(|(i, &n)| Some(Slot(i as u32)) != except && n > other.get(Slot(i as u32)))
    }

    /// Whether `self` knows at least everything `other` knows.
    pub fn includes(&self, other: &Clock) -> bool {
        other.0.iter().enumerate().all(|(i, &n)| self.get(Slot(i as u32)) >= n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn join_is_the_elementwise_maximum_and_grows_as_needed_and_meet_the_minimum() {
        let mut a = Clock::new();
        a.set(Slot(0), 3);
        let mut b = Clock::new();
        b.set(Slot(2), 5);
        b.set(Slot(0), 1);
        a.join(&b);
        assert_eq!((a.get(Slot(0)), a.get(Slot(1)), a.get(Slot(2))), (3, 0, 5));
        assert!(a.covers(Epoch { slot: Slot(2), n: 5 }));
        assert!(!a.covers(Epoch { slot: Slot(2), n: 6 }));
        assert!(a.includes(&b));
        assert!(!b.includes(&a));
        assert_eq!(a.get(Slot(40)), 0);
        assert!(a.knows_more_than(&b, None));
        assert!(!a.knows_more_than(&b, Some(Slot(0))));
        assert!(!b.knows_more_than(&a, None));
        let mut m = a.clone();
        m.meet(&b);
        assert_eq!((m.get(Slot(0)), m.get(Slot(1)), m.get(Slot(2))), (1, 0, 5));
        let mut short = Clock::new();
        short.set(Slot(0), 9);
        m.meet(&short);
        assert_eq!((m.get(Slot(0)), m.get(Slot(2))), (1, 0));
    }
}
