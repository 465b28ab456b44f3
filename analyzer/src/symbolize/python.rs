//! Python frames, resolved offline from the trace's `PyCode` and `PyFrames` records.
//!
//! The shim records a Python frame as a code object id and an instruction offset; each code
//! object is described once (file, qualified name, first line, line table). The line of a
//! frame is computed here from the line table by the format crate's
//! [`line_table`](gpuleak_format::line_table), as CPython's `PyCode_Addr2Line` does.
//!
//! In a stack, a Python frame is carried as a tagged pseudo-address ([`tag`]) among the native
//! return addresses, so that everything that walks stacks keeps working; [`Frame`]s made from
//! it have the module `python`, the function (qualified name), the file and the line.

use std::collections::HashMap;

use gpuleak_format::line_table::line_at;

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

    /// Whether the trace named no Python code object (not a Python process, or no Python
    /// frames recorded).
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
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

#[cfg(test)]
mod tests {
    use super::*;

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
                // Three one-instruction entries: line 2, then 3, then 3.
                line_table: vec![0x80, 0x00, 0xd8, 0x09, 0x0a, 0x88],
            },
        );
        let f = codes.frame(tag(7, 4)).unwrap();
        assert_eq!(
            (f.function.as_deref(), f.file.as_deref(), f.line, f.module.as_deref()),
            (Some("A.f"), Some("/src/a.py"), Some(3), Some("python"))
        );
        assert!(codes.frame(tag(8, 0)).unwrap().function.is_none(), "undescribed code");
        assert!(codes.frame(0x5555_0000).is_none());
    }
}
