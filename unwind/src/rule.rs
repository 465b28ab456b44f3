//! The compact per-address unwind rule and its 29-bit packing.
//!
//! A rule says how to get from the registers of one frame (IP, RSP, RBP) to the registers of
//! its caller. Only what ordinary x86-64 compiler output needs is representable; everything
//! else becomes [`Rule::FramePointer`] (try the RBP chain) so the hot path stays a handful of
//! integer operations.
//!
//! Bit layout of a packed rule (`u32`, bits 29..32 always zero):
//!
//! ```text
//!  28            11 10        3 2    0
//! +----------------+-----------+------+
//! | cfa / 8 (i18)  | rbp slot  | kind |
//! +----------------+-----------+------+
//! ```
//!
//! `kind` is never 0, so a packed rule is never 0 and an all-zero cache word means "empty".

/// How to recover the caller's registers from one frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rule {
    /// CFA = RSP + `cfa`; return address at CFA - 8; caller's RBP saved at CFA - 8 * `rbp_slot`,
    /// or unchanged when `rbp_slot` is 0.
    Rsp { cfa: i64, rbp_slot: u8 },
    /// CFA = RBP + `cfa`; otherwise as [`Rule::Rsp`] (frames with alloca or frame pointers).
    Rbp { cfa: i64, rbp_slot: u8 },
    /// CFA = *(RBP + `cfa`), caller's RBP = *RBP: gcc's dynamic realignment (DRAP) frames.
    DerefRbp { cfa: i64 },
    /// The kernel's signal return trampoline: the interrupted registers are in the
    /// `ucontext_t` at RSP, and the interrupted IP is exact (not a return address).
    Signal,
    /// The return address is undefined: the outermost frame of the thread (`_start`, `clone3`).
    End,
    /// No usable CFI here: follow the RBP chain if RBP looks like a frame pointer, else stop.
    FramePointer,
}

const KIND_BITS: u32 = 3;
const SLOT_BITS: u32 = 8;
const CFA_BITS: u32 = 18;
/// Number of low bits a packed rule occupies.
pub(crate) const RULE_BITS: u32 = KIND_BITS + SLOT_BITS + CFA_BITS;

const KIND_RSP: u32 = 1;
const KIND_RBP: u32 = 2;
const KIND_DEREF_RBP: u32 = 3;
const KIND_SIGNAL: u32 = 4;
const KIND_END: u32 = 5;
const KIND_FRAME_POINTER: u32 = 6;

impl Rule {
    /// A CFA offset and RBP slot if they fit the packing, as the walker needs them.
    pub(crate) fn rsp(cfa: i64, rbp_slot: u8) -> Rule {
        if fits_cfa(cfa) {
            Rule::Rsp { cfa, rbp_slot }
        } else {
            Rule::FramePointer
        }
    }

    /// Like [`Rule::rsp`] for RBP-based CFAs.
    pub(crate) fn rbp(cfa: i64, rbp_slot: u8) -> Rule {
        if fits_cfa(cfa) {
            Rule::Rbp { cfa, rbp_slot }
        } else {
            Rule::FramePointer
        }
    }

    /// Like [`Rule::rsp`] for DRAP frames.
    pub(crate) fn deref_rbp(cfa: i64) -> Rule {
        if fits_cfa(cfa) {
            Rule::DerefRbp { cfa }
        } else {
            Rule::FramePointer
        }
    }

    /// Packs the rule into [`RULE_BITS`] bits; never returns 0.
    pub(crate) fn pack(self) -> u32 {
        let (kind, slot, cfa) = match self {
            Rule::Rsp { cfa, rbp_slot } => (KIND_RSP, rbp_slot, cfa),
            Rule::Rbp { cfa, rbp_slot } => (KIND_RBP, rbp_slot, cfa),
            Rule::DerefRbp { cfa } => (KIND_DEREF_RBP, 0, cfa),
            Rule::Signal => (KIND_SIGNAL, 0, 0),
            Rule::End => (KIND_END, 0, 0),
            Rule::FramePointer => (KIND_FRAME_POINTER, 0, 0),
        };
        let cfa_field = ((cfa >> 3) as u32) & ((1 << CFA_BITS) - 1);
        kind | (u32::from(slot) << KIND_BITS) | (cfa_field << (KIND_BITS + SLOT_BITS))
    }

    /// Inverse of [`Rule::pack`]; anything malformed reads as [`Rule::End`].
    #[inline(always)]
    pub(crate) fn unpack(bits: u32) -> Rule {
        let packed = Packed(bits);
        let (cfa, rbp_slot) = (packed.cfa(), packed.rbp_slot() as u8);
        match bits & ((1 << KIND_BITS) - 1) {
            KIND_RSP => Rule::Rsp { cfa, rbp_slot },
            KIND_RBP => Rule::Rbp { cfa, rbp_slot },
            KIND_DEREF_RBP => Rule::DerefRbp { cfa },
            KIND_SIGNAL => Rule::Signal,
            KIND_FRAME_POINTER => Rule::FramePointer,
            _ => Rule::End,
        }
    }
}

/// A packed rule read straight from the cache: the walker's common case (CFA from RSP or RBP)
/// decodes it with a few shifts and no branch on the kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Packed(pub(crate) u32);

impl Packed {
    /// Whether this is [`Rule::Rsp`] or [`Rule::Rbp`].
    #[inline(always)]
    pub(crate) fn is_common(self) -> bool {
        let kind = self.0 & ((1 << KIND_BITS) - 1);
        kind == KIND_RSP || kind == KIND_RBP
    }

    /// Whether the CFA is based on RBP (meaningful for common rules).
    #[inline(always)]
    pub(crate) fn cfa_from_rbp(self) -> bool {
        self.0 & ((1 << KIND_BITS) - 1) == KIND_RBP
    }

    /// The CFA offset in bytes.
    #[inline(always)]
    pub(crate) fn cfa(self) -> i64 {
        // Sign-extend the 18-bit field: move its top bit to bit 31, shift back arithmetically.
        i64::from(((self.0 << (32 - RULE_BITS)) as i32) >> (32 - CFA_BITS)) << 3
    }

    /// The RBP slot (0: unchanged, n: saved at CFA - 8n).
    #[inline(always)]
    pub(crate) fn rbp_slot(self) -> u64 {
        u64::from((self.0 >> KIND_BITS) & ((1 << SLOT_BITS) - 1))
    }
}

/// Whether a CFA offset is a multiple of 8 within +-1 MiB (every compiler-generated frame
/// smaller than that).
fn fits_cfa(cfa: i64) -> bool {
    let limit = 1i64 << (CFA_BITS + 2);
    cfa % 8 == 0 && (-limit..limit).contains(&cfa)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pack_round_trips_every_kind() {
        let rules = [
            Rule::Rsp { cfa: 8, rbp_slot: 0 },
            Rule::Rsp { cfa: 4016, rbp_slot: 2 },
            Rule::Rsp {
                cfa: (1 << 20) - 8,
                rbp_slot: 255,
            },
            Rule::Rbp { cfa: 16, rbp_slot: 2 },
            Rule::Rbp {
                cfa: -(1 << 20),
                rbp_slot: 0,
            },
            Rule::DerefRbp { cfa: -24 },
            Rule::Signal,
            Rule::End,
            Rule::FramePointer,
        ];
        for rule in rules {
            let bits = rule.pack();
            assert_ne!(bits, 0);
            assert_eq!(bits >> RULE_BITS, 0, "{rule:?} spills out of its bits");
            assert_eq!(Rule::unpack(bits), rule);
        }
    }

    #[test]
    fn unrepresentable_offsets_fall_back_to_frame_pointer() {
        assert_eq!(Rule::rsp(12, 0), Rule::FramePointer);
        assert_eq!(Rule::rsp(1 << 20, 0), Rule::FramePointer);
        assert_eq!(Rule::rbp(-(1 << 20) - 8, 0), Rule::FramePointer);
        assert_eq!(Rule::deref_rbp(-24), Rule::DerefRbp { cfa: -24 });
    }
}
