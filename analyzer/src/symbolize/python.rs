//! Python frames, resolved offline from the trace's `PyCode` and `PyFrames` records.
//!
//! The shim records a Python frame as a code object id and an instruction offset; each code
//! object is described once (file, qualified name, first line, line table). The line of a
//! frame is computed here from the line table, as CPython's `PyCode_Addr2Line` does:
//! 3.10 uses the PEP 626 line table, 3.11 and later the PEP 657 location table.
//!
//! In a stack, a Python frame is carried as a tagged pseudo-address ([`tag`]) among the native
//! return addresses, so that everything that walks stacks keeps working; [`Frame`]s made from
//! it have the module `python`, the function (qualified name), the file and the line.

use std::collections::HashMap;

use super::Frame;

/// The top bit marks a Python frame (no user-space return address has it).
pub const TAG: u64 = 1 << 63;

/// The module name of every Python frame.
pub const MODULE: &str = "python";

/// A code object as the trace describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PyCode {
    /// `major << 8 | minor` of the interpreter.
    pub python: u32,
    /// `co_firstlineno`.
    pub first_line: u32,
    /// `co_filename`.
    pub filename: String,
    /// `co_qualname` (3.11+), `co_name` (3.10).
    pub qualname: String,
    /// `co_linetable`.
    pub line_table: Vec<u8>,
}

/// The code objects of one process, by id.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PyCodes(HashMap<u32, PyCode>);

impl PyCodes {
    /// Adds (or replaces) the code object `id`.
    pub fn insert(&mut self, id: u32, code: PyCode) {
        self.0.insert(id, code);
    }

    /// The frame for a tagged pseudo-address, if it is one.
    pub fn frame(&self, address: u64) -> Option<Frame> {
        let (id, offset) = untag(address)?;
        let code = self.0.get(&id);
        Some(Frame {
            function: code.map(|c| c.qualname.clone()),
            file: code.map(|c| c.filename.clone()),
            line: code.and_then(|c| line_at(c.python, c.first_line, &c.line_table, offset)),
            module: Some(MODULE.to_string()),
            address: offset as u64,
            inlined: false,
            user: false,
        })
    }
}

/// The pseudo-address of a Python frame.
pub fn tag(code: u32, offset: u32) -> u64 {
    TAG | (code as u64) << 32 | offset as u64
}

/// The code id and offset of a pseudo-address made by [`tag`].
pub fn untag(address: u64) -> Option<(u32, u32)> {
    (address & TAG != 0).then_some((((address & !TAG) >> 32) as u32, address as u32))
}

/// Merges the Python frames of a `PyFrames` record (`(position, code, offset)` triples) into
/// a stack's native return addresses: each goes before the native frame at its position, in
/// the record's order; positions past the end go after the last native frame.
pub fn interleave(native: &[u64], triples: &[u64]) -> Vec<u64> {
    let mut out = Vec::with_capacity(native.len() + triples.len() / 3);
    let mut py = triples.chunks_exact(3).peekable();
    for (k, &a) in native.iter().enumerate() {
        while let Some(t) = py.next_if(|t| t[0] <= k as u64) {
            out.push(tag(t[1] as u32, t[2] as u32));
        }
        out.push(a);
    }
    out.extend(py.map(|t| tag(t[1] as u32, t[2] as u32)));
    out
}

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
            line += delta as i64;
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
        line += match code {
            13 | 14 => signed_varint(&table[i + 1..])?,
            10..=12 => (code - 10) as i64,
            _ => 0,
        };
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
    }

    #[test]
    fn python_frames_go_before_the_native_frame_at_their_position() {
        let native = [10, 11, 12];
        let merged = interleave(&native, &[1, 7, 4, 1, 8, 6, 3, 9, 0]);
        assert_eq!(merged, vec![10, tag(7, 4), tag(8, 6), 11, 12, tag(9, 0)]);
        assert_eq!(untag(tag(7, 4)), Some((7, 4)));
        assert_eq!(untag(12), None);
        let mut codes = PyCodes::default();
        codes.insert(
            7,
            PyCode {
                python: 0x030b,
                first_line: 2,
                filename: "/src/a.py".into(),
                qualname: "A.f".into(),
                line_table: F_3_11.to_vec(),
            },
        );
        let f = codes.frame(tag(7, 12)).unwrap();
        assert_eq!(
            (f.function.as_deref(), f.file.as_deref(), f.line, f.module.as_deref()),
            (Some("A.f"), Some("/src/a.py"), Some(5), Some("python"))
        );
        assert!(codes.frame(tag(8, 0)).unwrap().function.is_none(), "undescribed code");
        assert!(codes.frame(0x5555_0000).is_none());
    }
}
