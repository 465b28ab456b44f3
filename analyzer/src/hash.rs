//! The hash maps of the replay: every allocation and free looks up the live table, the table
//! of recent frees and a finding's group, so the hasher is a large part of a report's time.
//!
//! Their keys (addresses, handles, stack ids) come from the trace, which a hostile process
//! could fill with keys that collide under a fixed hash function, turning each look-up into a
//! scan. The hasher is therefore foldhash seeded at random per map (the seed is never part of
//! any output, so a trace cannot learn it), and no output depends on the order of a map.
//!
//! Measured with `gpuleak report -j1 --format json` on the 4M-event churn of bench/heaptrack
//! (CPU seconds, best of 5, interleaved): the standard SipHash 1.47, rustc-hash's FxHash 1.12,
//! ahash 1.08, foldhash 1.08; on the stream-ordering trace of bench/streams (2M calls) the four
//! were within 0.03 s of each other. FxHash has a fixed function, so a crafted trace can make
//! every key collide; ahash brings more dependencies for no gain here.

/// The hasher of [`HashMap`] and [`HashSet`].
pub type Seeded = foldhash::fast::RandomState;

/// A `HashMap` with the replay's hasher; make one with `HashMap::default()`.
pub type HashMap<K, V> = std::collections::HashMap<K, V, Seeded>;
/// A `HashSet` with the replay's hasher; make one with `HashSet::default()`.
pub type HashSet<K> = std::collections::HashSet<K, Seeded>;
