//! Byte sizes and growth tolerances as written on the command line: `4096`, `64K`, `1.5MiB`,
//! `10%`.

use std::fmt;

/// Why a size or tolerance could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SizeError {
    text: String,
    why: &'static str,
}

impl fmt::Display for SizeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "invalid size {:?}: {} (expected a number of bytes with an optional K, M, G (powers of \
             1000) or KiB, MiB, GiB (powers of 1024) suffix)",
            self.text, self.why
        )
    }
}

impl std::error::Error for SizeError {}

/// Parses a byte count: digits with an optional fraction and an optional suffix, case
/// insensitive: `K`/`KB` = 1000, `M`/`MB` = 1000², `G`/`GB` = 1000³, `KiB` = 1024,
/// `MiB` = 1024², `GiB` = 1024³, `B` = 1. A fraction is rounded down to whole bytes.
pub fn parse_size(text: &str) -> Result<u64, SizeError> {
    let err = |why| SizeError {
        text: text.to_string(),
        why,
    };
    let t = text.trim();
    let split = t.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(t.len());
    let (number, suffix) = t.split_at(split);
    let multiplier: u64 = match suffix.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "k" | "kb" => 1000,
        "m" | "mb" => 1_000_000,
        "g" | "gb" => 1_000_000_000,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        _ => return Err(err("unknown suffix")),
    };
    let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
    if whole.is_empty() && fraction.is_empty() {
        return Err(err("no number"));
    }
    if fraction.contains('.') {
        return Err(err("more than one decimal point"));
    }
    let too_big = || err("too large");
    let whole: u64 = if whole.is_empty() {
        0
    } else {
        whole.parse().map_err(|_| too_big())?
    };
    let bytes = whole.checked_mul(multiplier).ok_or_else(too_big)?;
    // Digits past the 18th cannot add a whole byte (the largest multiplier is under 10^10).
    let digits = &fraction[..fraction.len().min(18)];
    let tenths: u128 = if digits.is_empty() {
        0
    } else {
        digits.parse().map_err(|_| err("not a number"))?
    };
    let part = tenths * u128::from(multiplier) / 10u128.pow(digits.len() as u32);
    let bytes = bytes.checked_add(part as u64).ok_or_else(too_big)?;
    Ok(bytes)
}

/// How much a leak site may grow over its baseline before it fails.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub enum Tolerance {
    /// At most this many bytes more.
    Bytes(u64),
    /// At most this percentage of the baseline's bytes more.
    Percent(f64),
    /// No growth at all (the default).
    #[default]
    None,
}

impl Tolerance {
    /// The bytes a site of `baseline` bytes may grow by.
    pub fn allowance(self, baseline: u64) -> u64 {
        match self {
            Tolerance::None => 0,
            Tolerance::Bytes(b) => b,
            // Rounded down; f64 holds every size a process can have exactly enough.
            Tolerance::Percent(p) => (baseline as f64 * p / 100.0) as u64,
        }
    }

    /// Whether a site that went from `baseline` to `now` bytes grew beyond the tolerance.
    pub fn exceeded(self, baseline: u64, now: u64) -> bool {
        now > baseline.saturating_add(self.allowance(baseline))
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tolerance::None => f.write_str("0 bytes"),
            Tolerance::Bytes(b) => write!(f, "{b} bytes"),
            Tolerance::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// Parses a tolerance: a size ([`parse_size`]) or a percentage (`10%`, `2.5%`).
pub fn parse_tolerance(text: &str) -> Result<Tolerance, SizeError> {
    let t = text.trim();
    match t.strip_suffix('%') {
        Some(number) => {
            let err = |why| SizeError {
                text: text.to_string(),
                why,
            };
            let digits_only = !number.is_empty() && number.chars().all(|c| c.is_ascii_digit() || c == '.');
            let p: f64 = number
                .trim()
                .parse()
                .ok()
                .filter(|_| digits_only)
                .ok_or(err("not a percentage"))?;
            if !p.is_finite() {
                return Err(err("not a percentage"));
            }
            Ok(if p == 0.0 {
                Tolerance::None
            } else {
                Tolerance::Percent(p)
            })
        }
        None => Ok(match parse_size(t)? {
            0 => Tolerance::None,
            b => Tolerance::Bytes(b),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_with_and_without_suffixes() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("64K"), Ok(64_000));
        assert_eq!(parse_size("64k"), Ok(64_000));
        assert_eq!(parse_size("64KB"), Ok(64_000));
        assert_eq!(parse_size("64KiB"), Ok(65_536));
        assert_eq!(parse_size("2M"), Ok(2_000_000));
        assert_eq!(parse_size("2MiB"), Ok(2 << 20));
        assert_eq!(parse_size("3G"), Ok(3_000_000_000));
        assert_eq!(parse_size("3GiB"), Ok(3 << 30));
        assert_eq!(parse_size("1.5MiB"), Ok(3 << 19));
        assert_eq!(parse_size("1.5K"), Ok(1500));
        assert_eq!(parse_size(".5K"), Ok(500));
        assert_eq!(parse_size("10 MiB"), Ok(10 << 20));
        assert_eq!(parse_size("7B"), Ok(7));
        // A fraction of a byte is dropped.
        assert_eq!(parse_size("1.9"), Ok(1));
        assert_eq!(parse_size("1.0001K"), Ok(1000));
    }

    #[test]
    fn bad_sizes_are_errors_that_say_why() {
        for bad in [
            "",
            "K",
            "12X",
            "-1",
            "1.2.3",
            "1e6",
            "0x10",
            "99999999999999999999",
            "20000000000G",
        ] {
            assert!(parse_size(bad).is_err(), "{bad:?} should not parse");
        }
        let e = parse_size("12X").unwrap_err().to_string();
        assert!(e.contains("\"12X\"") && e.contains("unknown suffix"), "{e}");
    }

    #[test]
    fn tolerances_in_bytes_or_percent() {
        assert_eq!(parse_tolerance("0"), Ok(Tolerance::None));
        assert_eq!(parse_tolerance("0%"), Ok(Tolerance::None));
        assert_eq!(parse_tolerance("4K"), Ok(Tolerance::Bytes(4000)));
        assert_eq!(parse_tolerance("10%"), Ok(Tolerance::Percent(10.0)));
        assert_eq!(parse_tolerance("2.5%"), Ok(Tolerance::Percent(2.5)));
        for bad in ["%", "-5%", "ten%", "inf%", "NaN%", "5x"] {
            assert!(parse_tolerance(bad).is_err(), "{bad:?} should not parse");
        }
    }

    #[test]
    fn growth_within_and_beyond_the_tolerance() {
        assert!(!Tolerance::None.exceeded(1000, 1000));
        assert!(Tolerance::None.exceeded(1000, 1001));
        assert!(!Tolerance::None.exceeded(1000, 10));
        assert!(!Tolerance::Bytes(100).exceeded(1000, 1100));
        assert!(Tolerance::Bytes(100).exceeded(1000, 1101));
        assert!(!Tolerance::Percent(10.0).exceeded(1000, 1100));
        assert!(Tolerance::Percent(10.0).exceeded(1000, 1101));
        assert!(!Tolerance::Bytes(u64::MAX).exceeded(u64::MAX, u64::MAX));
    }
}
