//! The lock-free rule cache: a 4-way set-associative table of `(address, rule)` words.
//!
//! Each entry is one `AtomicU64` holding the address's tag and its packed [`Rule`], so a reader
//! can never see the address of one writer with the rule of another: racing writers only
//! overwrite each other's whole entries, and a lost entry is recomputed on the next miss.
//!
//! ```text
//!  63                    29 28          0
//! +------------------------+-------------+
//! | tag = address >> 12    | packed rule |
//! +------------------------+-------------+
//! ```
//!
//! The set index is the low 12 bits of the address xor the next 12, so it is recoverable
//! from (tag, set): equal tags in the same set mean equal addresses. Addresses at or above
//! 2^47 (5-level paging) do not fit and are never cached; they take the cold path every time.

use std::sync::atomic::{AtomicU64, Ordering};

use crate::rule::{Packed, Rule, RULE_BITS};

const SET_BITS: u32 = 12;
const SETS: usize = 1 << SET_BITS;
const WAYS: usize = 4;
/// Addresses below this bound are cacheable: 2^47, the x86-64 4-level user address space.
const ADDRESS_LIMIT: u64 = 1 << 47;

#[repr(C, align(32))]
struct Set([AtomicU64; WAYS]);

/// 4096 sets x 4 ways x 8 bytes = 128 KiB of zeroed `.bss`; only touched pages become resident.
static TABLE: [Set; SETS] = [const { Set([const { AtomicU64::new(0) }; WAYS]) }; SETS];

#[inline(always)]
fn set_of(address: u64) -> &'static Set {
    let index = (address ^ (address >> SET_BITS)) as usize;
    &TABLE[index & (SETS - 1)]
}

/// The cached rule for the instruction at `address`, if any.
pub(crate) fn lookup(address: u64) -> Option<Rule> {
    lookup_packed(address).map(|packed| Rule::unpack(packed.0))
}

/// The cached rule for the instruction at `address`, still packed.
#[inline(always)]
pub(crate) fn lookup_packed(address: u64) -> Option<Packed> {
    if address >= ADDRESS_LIMIT {
        return None;
    }
    let tag = address >> SET_BITS;
    for way in &set_of(address).0 {
        let word = way.load(Ordering::Relaxed);
        // A valid word is never 0, and only address < 4096 has tag 0.
        if word >> RULE_BITS == tag && word != 0 {
            return Some(Packed(word as u32 & ((1 << RULE_BITS) - 1)));
        }
    }
    None
}

/// Remembers `rule` for `address`: in the way that already holds the address (threads that
/// missed on the same address together must not fill the set with copies), else in an empty
/// way, else in a pseudo-random one.
pub(crate) fn insert(address: u64, rule: Rule) {
    if address >= ADDRESS_LIMIT {
        return;
    }
    let tag = address >> SET_BITS;
    let word = (tag << RULE_BITS) | u64::from(rule.pack());
    let set = &set_of(address).0;
    let mut empty = None;
    for (i, way) in set.iter().enumerate() {
        let current = way.load(Ordering::Relaxed);
        if current != 0 && current >> RULE_BITS == tag {
            way.store(word, Ordering::Relaxed);
            return;
        }
        if current == 0 && empty.is_none() {
            empty = Some(i);
        }
    }
    let victim = empty.unwrap_or((address.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 62) as usize % WAYS);
    set[victim].store(word, Ordering::Relaxed);
}

/// Forgets every entry (modules were unloaded: their addresses may be reused by other code).
pub(crate) fn flush() {
    for set in &TABLE {
        for way in &set.0 {
            way.store(0, Ordering::Relaxed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // The table is process-wide, so these tests use addresses no other test can produce.
    #[test]
    fn inserted_rules_read_back_under_their_own_address() {
        let base = 0x7000_dead_0000_u64;
        for i in 0..3u64 {
            insert(
                base + (i << 24),
                Rule::Rsp {
                    cfa: 8 * (i as i64 + 1),
                    rbp_slot: 0,
                },
            );
        }
        for i in 0..3u64 {
            let expected = Rule::Rsp {
                cfa: 8 * (i as i64 + 1),
                rbp_slot: 0,
            };
            assert_eq!(lookup(base + (i << 24)), Some(expected));
        }
        assert_eq!(lookup(base + 1), None);
    }

    #[test]
    fn inserting_an_address_again_does_not_take_another_way() {
        // Five addresses of one set: the fifth evicts one of the first four, unless the repeated
        // inserts of the first had filled the set with copies of it.
        let base = 0x7000_beef_0000_u64;
        let set = set_of(base) as *const Set;
        let mut members = (0..)
            .map(|i: u64| base + (i << 12))
            .filter(|&address| std::ptr::eq(set_of(address), set));
        let members: Vec<u64> = (&mut members).take(4).collect();
        let same_set = |i: u64| members[i as usize];
        for _ in 0..4 {
            insert(same_set(0), Rule::End);
        }
        for i in 1..4 {
            insert(same_set(i), Rule::End);
        }
        for i in 0..4 {
            assert_eq!(lookup(same_set(i)), Some(Rule::End), "address {i}");
        }
    }

    #[test]
    fn high_addresses_are_never_cached() {
        insert(ADDRESS_LIMIT + 64, Rule::End);
        assert_eq!(lookup(ADDRESS_LIMIT + 64), None);
    }
}
