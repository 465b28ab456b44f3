//! Byte sizes and growth tolerances as written on the command line: `4096`, `64K`, `1.5MiB`,
//! `10%`. Sizes follow the one rule of every gpuleak size ([`gpuleak_format::size`]).

use std::fmt;

pub use gpuleak_format::size::{parse_size, SizeError, ACCEPTED};

/// Why a tolerance could not be read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToleranceError {
    /// Not a size.
    Size(SizeError),
    /// A `%` after something other than a non-negative decimal number.
    Percent,
}

impl fmt::Display for ToleranceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ToleranceError::Size(e) => write!(f, "{e}; or a percentage such as 10% or 2.5%"),
            ToleranceError::Percent => {
                write!(
                    f,
                    "not a percentage; expected a percentage such as 10% or 2.5%, or {ACCEPTED}"
                )
            }
        }
    }
}

impl std::error::Error for ToleranceError {}

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
pub fn parse_tolerance(text: &str) -> Result<Tolerance, ToleranceError> {
    let t = text.trim();
    match t.strip_suffix('%') {
        Some(number) => {
            let digits_only = !number.is_empty() && number.chars().all(|c| c.is_ascii_digit() || c == '.');
            let p: f64 = number
                .trim()
                .parse()
                .ok()
                .filter(|p: &f64| digits_only && p.is_finite())
                .ok_or(ToleranceError::Percent)?;
            Ok(if p == 0.0 {
                Tolerance::None
            } else {
                Tolerance::Percent(p)
            })
        }
        None => Ok(match parse_size(t).map_err(ToleranceError::Size)? {
            0 => Tolerance::None,
            b => Tolerance::Bytes(b),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bad_sizes_are_errors_that_say_what_is_accepted() {
        let e = parse_size("12X").unwrap_err().to_string();
        assert!(e.contains("unknown unit") && e.contains("K/KB/KiB"), "{e}");
        let e = parse_tolerance("12X").unwrap_err().to_string();
        assert!(e.contains("unknown unit") && e.contains("10%"), "{e}");
        let e = parse_tolerance("ten%").unwrap_err().to_string();
        assert!(e.starts_with("not a percentage") && e.contains("1.5 MiB"), "{e}");
    }

    #[test]
    fn tolerances_in_bytes_or_percent() {
        assert_eq!(parse_tolerance("0"), Ok(Tolerance::None));
        assert_eq!(parse_tolerance("0%"), Ok(Tolerance::None));
        assert_eq!(parse_tolerance("4K"), Ok(Tolerance::Bytes(4096)));
        assert_eq!(parse_tolerance("4 KB"), Ok(Tolerance::Bytes(4096)));
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
