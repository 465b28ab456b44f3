//! Byte sizes as people write them and as gpuleak prints them: one rule for every size a user
//! gives (`GPULEAK_LIMIT`, `gpuleak check --max-leaked-bytes`, the Python API and the pytest
//! markers; python/gpuleak/_sizes.py holds the same rule, and both test suites read the table
//! of cases in tests/data/sizes.txt).
//!
//! The rule follows pytest-memray's `limit_memory` marker: a decimal number (`1`, `1.5`,
//! `.5`), optional spaces, and an optional unit, in any case: `B`, `K`/`KB`/`KiB`,
//! `M`/`MB`/`MiB`, `G`/`GB`/`GiB`, `T`/`TB`/`TiB`, `P`/`PB`/`PiB`. Every unit is a power of
//! 1024: `1MB`, `1 MiB` and `1M` are all 1048576 bytes. No unit means bytes. A fraction is
//! rounded down to a whole byte. No sign, no exponent, nothing after the unit.
//!
//! ```
//! use gpuleak_format::size::{parse_size, Bytes};
//!
//! assert_eq!(parse_size("1 MB"), Ok(1 << 20));
//! assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
//! assert_eq!(Bytes(3 << 29).to_string(), "1.5 GiB");
//! ```
//!
//! Nothing here allocates: the shim parses its settings with it.

use std::fmt;

/// The accepted forms, in words, for error messages.
pub const ACCEPTED: &str = "a number of bytes with an optional unit B, K/KB/KiB, M/MB/MiB, G/GB/GiB, T/TB/TiB \
                            or P/PB/PiB (any case, all powers of 1024), such as 4096, 64KB, 1.5 MiB or 8G";

/// Why a size could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeError {
    /// No number before the unit (`""`, `MB`, `-1`, `1.`, `1.2.3`).
    BadNumber,
    /// Something other than a known unit after the number (`12X`, `1e6`, `1.2.3`).
    UnknownUnit,
    /// More than 2^64 - 1 bytes.
    TooLarge,
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self {
            SizeError::BadNumber => "not a number",
            SizeError::UnknownUnit => "unknown unit",
            SizeError::TooLarge => "too large",
        };
        write!(f, "{why}; expected {ACCEPTED}")
    }
}

impl std::error::Error for SizeError {}

/// The bytes of a unit (case-insensitive), or `None` for an unknown one.
fn unit_bytes(unit: &str) -> Option<u64> {
    let shift = match unit.as_bytes() {
        [] => 0,
        [b] if b.eq_ignore_ascii_case(&b'b') => 0,
        [p, rest @ ..] => {
            let rest_ok = rest.is_empty() || rest.eq_ignore_ascii_case(b"b") || rest.eq_ignore_ascii_case(b"ib");
            if !rest_ok {
                return None;
            }
            match p.to_ascii_lowercase() {
                b'k' => 10,
                b'm' => 20,
                b'g' => 30,
                b't' => 40,
                b'p' => 50,
                _ => return None,
            }
        }
    };
    Some(1 << shift)
}

/// Parses a size by the module's rule.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    // ASCII whitespace only, as Python's side strips it.
    let t = text.trim_matches(|c: char| c.is_ascii_whitespace());
    let number_end = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, unit) = t.split_at(number_end);
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    // `1.` and `1.2.3` are not numbers pytest-memray reads either.
    if (whole.is_empty() && fraction.is_empty()) || number.ends_with('.') || fraction.contains('.') {
        return Err(SizeError::BadNumber);
    }
    let multiplier =
        unit_bytes(unit.trim_start_matches(|c: char| c.is_ascii_whitespace())).ok_or(SizeError::UnknownUnit)?;
    let mut bytes: u64 = 0;
    for d in whole.bytes() {
        bytes = bytes
            .checked_mul(10)
            .and_then(|b| b.checked_add(u64::from(d - b'0')))
            .ok_or(SizeError::TooLarge)?;
    }
    bytes = bytes.checked_mul(multiplier).ok_or(SizeError::TooLarge)?;
    // floor(0.d1d2..dn x multiplier), exactly, by Horner's rule from the last digit:
    // floor((d + x) / 10) = floor((d + floor(x)) / 10) for a whole d, so every step stays a
    // whole number no larger than the multiplier.
    let mut part: u64 = 0;
    for d in fraction.bytes().rev() {
        part = (u64::from(d - b'0') * multiplier + part) / 10;
    }
    bytes.checked_add(part).ok_or(SizeError::TooLarge)
}

/// Bytes as every gpuleak output prints them: `512 B` under 1 KiB, else one decimal and a
/// binary unit (`1.5 MiB`, `8.0 GiB`), never a bare number or a letter alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes(pub u64);

impl fmt::Display for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
        let mut v = self.0 as f64;
        let mut u = 0;
        while v >= 1024.0 && u + 1 < UNITS.len() {
            v /= 1024.0;
            u += 1;
        }
        if u == 0 {
            write!(f, "{} B", self.0)
        } else {
            write!(f, "{v:.1} {}", UNITS[u])
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The shared table: `text<TAB>bytes`, or `text<TAB>error` for a text that is not a size.
    const CASES: &str = include_str!("../../tests/data/sizes.txt");

    /// Undoes the table's escapes: `\s` a space, `\t` a tab; `<empty>` the empty text.
    fn unescape(field: &str) -> String {
        if field == "<empty>" {
            return String::new();
        }
        field.replace("\\s", " ").replace("\\t", "\t")
    }

    #[test]
    fn the_shared_table_of_sizes() {
        let mut n = 0;
        for (i, line) in CASES.lines().enumerate() {
            if line.starts_with('#') || line.trim().is_empty() {
                continue;
            }
            let (text, want) = line
                .split_once('\t')
                .unwrap_or_else(|| panic!("line {}: no tab", i + 1));
            let text = unescape(text);
            let got = parse_size(&text);
            if want == "error" {
                assert!(got.is_err(), "line {}: {text:?} gave {got:?}", i + 1);
            } else {
                let want: u64 = want.parse().unwrap_or_else(|_| panic!("line {}: {want:?}", i + 1));
                assert_eq!(got, Ok(want), "line {}: {text:?}", i + 1);
            }
            n += 1;
        }
        assert!(n > 40, "only {n} cases read");
    }

    #[test]
    fn errors_say_why_and_what_is_accepted() {
        assert_eq!(parse_size("MB"), Err(SizeError::BadNumber));
        assert_eq!(parse_size("1.2.3"), Err(SizeError::BadNumber));
        assert_eq!(parse_size("12X"), Err(SizeError::UnknownUnit));
        assert_eq!(parse_size("99999999999999999999"), Err(SizeError::TooLarge));
        assert_eq!(parse_size("16384P"), Err(SizeError::TooLarge));
        let e = parse_size("12X").unwrap_err().to_string();
        assert!(e.starts_with("unknown unit; expected a number of bytes"), "{e}");
        assert!(e.contains("K/KB/KiB") && e.contains("powers of 1024"), "{e}");
    }

    #[test]
    fn long_fractions_round_down_exactly() {
        let many = format!("0.{}PiB", "9".repeat(200));
        assert_eq!(parse_size(&many), Ok((1 << 50) - 1));
        assert_eq!(parse_size("0.5000000000000000000000000000001K"), Ok(512));
        assert_eq!(parse_size("0.0009765625K"), Ok(1));
        assert_eq!(parse_size("0.0009765624K"), Ok(0));
        assert_eq!(parse_size("15.99999P"), Ok(18_014_387_250_482_915));
        assert_eq!(parse_size("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_size("18446744073709551615.9"), Ok(u64::MAX));
        assert_eq!(parse_size("18446744073709551616"), Err(SizeError::TooLarge));
    }

    #[test]
    fn printed_sizes_always_name_their_unit() {
        let shown: Vec<String> = [0, 1000, 1023, 1024, 1536, 3 << 20, 5 << 30, 3 << 40, u64::MAX]
            .iter()
            .map(|&n| Bytes(n).to_string())
            .collect();
        assert_eq!(
            shown,
            [
                "0 B",
                "1000 B",
                "1023 B",
                "1.0 KiB",
                "1.5 KiB",
                "3.0 MiB",
                "5.0 GiB",
                "3.0 TiB",
                "16777216.0 TiB"
            ]
        );
    }
}
