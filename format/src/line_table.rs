//! CPython line tables: the source line of an instruction of a code object, from the code
//! object's `co_linetable` bytes, as CPython's `PyCode_Addr2Line` computes it. 3.10 uses the
//! PEP 626 line table, 3.11 and later the PEP 657 location table.
//!
//! The shim writes line tables into `PyCode` records and the analyzer reads lines from them;
//! the shim also decodes them itself for its metrics labels, so both share this decoder.
//!
//! ```
//! use gpuleak_format::line_table::line_at;
//!
//! // A 3.11 table of three one-instruction entries: the first line, one line down, the same.
//! let table = [0x80, 0x00, 0xd8, 0x09, 0x0a, 0x88];
//! assert_eq!(line_at(0x030b, 10, &table, 0), Some(10));
//! assert_eq!(line_at(0x030b, 10, &table, 2), Some(11));
//! assert_eq!(line_at(0x030b, 10, &table, 4), Some(11));
//! assert_eq!(line_at(0x030b, 10, &table, 6), None, "past the table");
//! ```

/// The source line of the instruction at byte `offset` of a code object, as CPython's
/// `PyCode_Addr2Line` computes it; `None` for an instruction without a line or an offset past
/// the table.
pub fn line_at(python: u32, first_line: u32, table: &[u8], offset: u32) -> Option<u32> {
    let line = if python >= 0x030b {
        locations(first_line as i64, table, offset as u64)
    } else {
        lines_3_10(first_line as i64, table, offset as u64)
    }?;
    u32::try_from(line).ok()
}

/// 3.10 (PEP 626): pairs of (bytecode bytes advanced, signed line delta; -128: no line).
fn lines_3_10(first_line: i64, table: &[u8], offset: u64) -> Option<i64> {
    let (mut line, mut end) = (first_line, 0u64);
    for pair in table.chunks_exact(2) {
        let start = end;
        end += pair[0] as u64;
        let delta = pair[1] as i8;
        let here = if delta == -128 {
            None
        } else {
            line = line.saturating_add(delta as i64);
            Some(line)
        };
        if start <= offset && offset < end {
            return here;
        }
    }
    None
}

/// 3.11+ (PEP 657): entries of a first byte `1 ccccc lll` (code `c`, `l + 1` code units)
/// followed by their operands; only codes 13 and 14 (a signed varint) and 10 to 12 (the code
/// minus 10) move the line; code 15 has no location.
fn locations(first_line: i64, table: &[u8], offset: u64) -> Option<i64> {
    let (mut line, mut end, mut i) = (first_line, 0u64, 0usize);
    while i < table.len() {
        let first = table[i];
        if first & 0x80 == 0 {
            return None;
        }
        let code = (first >> 3) & 15;
        let start = end;
        end += ((first & 7) as u64 + 1) * 2;
        // Saturating: a table is read from another process's memory and may be anything.
        line = line.saturating_add(match code {
            13 | 14 => signed_varint(&table[i + 1..])?,
            10..=12 => (code - 10) as i64,
            _ => 0,
        });
        if start <= offset && offset < end {
            return (code != 15).then_some(line);
        }
        i += 1;
        while i < table.len() && table[i] & 0x80 == 0 {
            i += 1;
        }
    }
    None
}

fn signed_varint(bytes: &[u8]) -> Option<i64> {
    let mut it = bytes.iter();
    let mut read = *it.next()?;
    let mut value = (read & 63) as u64;
    let mut shift = 0;
    while read & 64 != 0 {
        read = *it.next()?;
        shift += 6;
        if shift > 60 {
            return None;
        }
        value |= ((read & 63) as u64) << shift;
    }
    Some(if value & 1 != 0 {
        -((value >> 1) as i64)
    } else {
        (value >> 1) as i64
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `co_linetable` and `co_lines()` of this function (first line 2) on CPython 3.11.7,
    /// 3.10.13 and 3.13.0:
    /// ```python
    /// def f(x):
    ///     y = x + 1
    ///
    ///     return g(
    ///         y)
    /// ```
    const F_3_11: &[u8] = &[
        128, 0, 216, 8, 9, 136, 65, 137, 5, 128, 65, 229, 11, 12, 216, 8, 9, 241, 3, 1, 12, 11, 244, 0, 1, 12, 11, 240,
        0, 1, 5, 11,
    ];
    const LINES_3_11: &[(u32, u32, u32)] = &[
        (0, 2, 2),
        (2, 4, 3),
        (4, 6, 3),
        (6, 10, 3),
        (10, 12, 3),
        (12, 24, 5),
        (24, 26, 6),
        (26, 30, 5),
        (30, 40, 5),
        (40, 42, 5),
    ];
    const F_3_10: &[u8] = &[8, 1, 2, 2, 2, 1, 4, 255];
    const LINES_3_10: &[(u32, u32, u32)] = &[(0, 8, 3), (8, 10, 5), (10, 12, 6), (12, 16, 5)];
    const F_3_13: &[u8] = &[
        128, 0, 216, 8, 9, 136, 65, 137, 5, 128, 65, 228, 11, 12, 216, 8, 9, 243, 3, 1, 12, 11, 240, 0, 1, 5, 11,
    ];
    const LINES_3_13: &[(u32, u32, u32)] = &[(0, 2, 2), (2, 12, 3), (12, 22, 5), (22, 24, 6), (24, 34, 5)];

    fn check(python: u32, table: &[u8], lines: &[(u32, u32, u32)]) {
        for &(start, end, line) in lines {
            for offset in (start..end).step_by(2) {
                assert_eq!(line_at(python, 2, table, offset), Some(line), "{python:#x} at {offset}");
            }
        }
        let end = lines.last().unwrap().1;
        assert_eq!(line_at(python, 2, table, end), None, "past the table");
    }

    #[test]
    fn lines_match_cpython_co_lines() {
        check(0x030b, F_3_11, LINES_3_11);
        check(0x030c, F_3_11, LINES_3_11);
        check(0x030d, F_3_13, LINES_3_13);
        check(0x030a, F_3_10, LINES_3_10);
    }

    #[test]
    fn odd_tables_give_no_line_never_a_panic() {
        assert_eq!(line_at(0x030b, 1, &[0x05], 0), None, "not an entry start");
        // A no-location entry (code 15).
        assert_eq!(line_at(0x030c, 10, &[0xf8], 0), None);
        // A long-form entry (code 14) moving back 3 lines.
        assert_eq!(line_at(0x030c, 10, &[0xf0, 0x07, 0x00, 0x00, 0x00], 0), Some(7));
        // A truncated varint.
        assert_eq!(line_at(0x030d, 10, &[0xe8, 0x41], 0), None);
        assert_eq!(line_at(0x030d, 10, &[0xe8], 0), None);
        assert_eq!(line_at(0x030a, 1, &[2, 0x80], 0), None, "3.10's -128: no line");
        assert_eq!(line_at(0x030a, 1, &[2], 0), None);
        for len in 0..F_3_11.len() {
            let _ = line_at(0x030b, 2, &F_3_11[..len], 40);
        }
        // Huge deltas saturate rather than overflow.
        let huge = [
            0xf0, 0x7e, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f, 0x3f, 0xf0, 0x7e, 0x7f, 0x7f, 0x7f, 0x7f, 0x7f,
            0x7f, 0x7f, 0x7f, 0x3f,
        ];
        assert_eq!(line_at(0x030c, 10, &huge, 2), None);
        assert_eq!(line_at(0x030a, u32::MAX, &[2, 127, 2, 127], 2), None);
    }
}
