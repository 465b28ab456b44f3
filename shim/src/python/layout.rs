//! Where CPython 3.10 to 3.13 keep what a stack walk needs, per version.
//!
//! Written from the public headers of each release (`Include/cpython/pystate.h`,
//! `Include/cpython/code.h`, `Include/internal/pycore_frame.h`, `Include/cpython/frameobject.h`
//! on 3.10, `Include/cpython/unicodeobject.h`) for the default x86-64 build (no
//! `Py_TRACE_REFS`, not free-threaded), and checked with `offsetof` against the headers of
//! 3.10.13, 3.11.7, 3.12.1 and 3.13.0. The layouts of these structures do not change within a
//! minor release.

/// How to find the innermost Python frame of a thread state.
#[derive(Debug, Clone, Copy)]
pub enum Chain {
    /// `tstate->frame` (3.10: a `PyFrameObject`).
    Frame(u64),
    /// `tstate->cframe->current_frame` (3.11, 3.12).
    CFrame { cframe: u64, current: u64 },
    /// `tstate->current_frame` (3.13).
    Current(u64),
}

/// How a frame says that it is the first one its `_PyEval_EvalFrameDefault` call ran (the
/// boundary between the Python frames of two native eval-loop frames).
#[derive(Debug, Clone, Copy)]
pub enum Entry {
    /// 3.10: every frame has its own eval-loop call.
    EveryFrame,
    /// 3.11: the frame's `is_entry` byte.
    Flag(u64),
    /// 3.12+: the eval loop pushes a frame with `owner == FRAME_OWNED_BY_CSTACK` (the byte at
    /// the first offset equals the second value) below the first frame it runs.
    CStackOwner(u64, u8),
}

/// Where a frame's instruction position is.
#[derive(Debug, Clone, Copy)]
pub enum Instr {
    /// 3.10: `f_lasti`, an `int` counting 2-byte code units from the start of `co_code` (a
    /// bytes object at the given code object offset).
    LastI { lasti: u64, co_code: u64 },
    /// 3.11+: a pointer into the code object's own bytecode, which starts at the given code
    /// object offset (`co_code_adaptive`).
    Pointer { ptr: u64, code_start: u64 },
}

/// One version's offsets (bytes).
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// `major << 8 | minor`.
    pub version: u32,
    /// Thread state to innermost frame.
    pub chain: Chain,
    /// Frame: its code object.
    pub frame_code: u64,
    /// Frame: the next older frame.
    pub frame_previous: u64,
    /// Frame: where it is in its code.
    pub instr: Instr,
    /// Frame: eval-loop boundaries.
    pub entry: Entry,
    /// Code: `co_filename`.
    pub code_filename: u64,
    /// Code: `co_qualname` (3.11+) or `co_name` (3.10).
    pub code_name: u64,
    /// Code: `co_firstlineno` (an `int`).
    pub code_firstlineno: u64,
    /// Code: `co_linetable` (a bytes object).
    pub code_linetable: u64,
    /// `sizeof(PyASCIIObject)`: where a compact ASCII string's characters start.
    pub ascii_size: u64,
    /// `sizeof(PyCompactUnicodeObject)`: where other compact strings' characters start.
    pub compact_size: u64,
}

/// Every object: `ob_type`.
pub const OB_TYPE: u64 = 8;
/// Variable-size objects: `ob_size` (code units of a 3.11+ code object, bytes of a bytes
/// object).
pub const OB_SIZE: u64 = 16;
/// `PyBytesObject.ob_sval`.
pub const BYTES_DATA: u64 = 32;
/// `PyASCIIObject.length`.
pub const STR_LENGTH: u64 = 16;
/// `PyASCIIObject.state` (bits: interned 2, kind 3, compact 1, ascii 1 on every version here).
pub const STR_STATE: u64 = 32;

const V3_10: Layout = Layout {
    version: 0x030a,
    chain: Chain::Frame(24),
    frame_code: 32,
    frame_previous: 24,
    instr: Instr::LastI { lasti: 96, co_code: 48 },
    entry: Entry::EveryFrame,
    code_filename: 104,
    code_name: 112,
    code_firstlineno: 40,
    code_linetable: 120,
    ascii_size: 48,
    compact_size: 72,
};

const V3_11: Layout = Layout {
    version: 0x030b,
    chain: Chain::CFrame { cframe: 56, current: 8 },
    frame_code: 32,
    frame_previous: 48,
    instr: Instr::Pointer {
        ptr: 56,
        code_start: 184,
    },
    entry: Entry::Flag(68),
    code_filename: 112,
    code_name: 128,
    code_firstlineno: 72,
    code_linetable: 136,
    ascii_size: 48,
    compact_size: 72,
};

const V3_12: Layout = Layout {
    version: 0x030c,
    chain: Chain::CFrame { cframe: 56, current: 0 },
    frame_code: 0,
    frame_previous: 8,
    instr: Instr::Pointer {
        ptr: 56,
        code_start: 192,
    },
    entry: Entry::CStackOwner(70, 3),
    code_filename: 112,
    code_name: 128,
    code_firstlineno: 68,
    code_linetable: 136,
    ascii_size: 40,
    compact_size: 56,
};

const V3_13: Layout = Layout {
    version: 0x030d,
    chain: Chain::Current(72),
    frame_code: 0,
    frame_previous: 8,
    instr: Instr::Pointer {
        ptr: 56,
        code_start: 200,
    },
    entry: Entry::CStackOwner(70, 3),
    code_filename: 112,
    code_name: 128,
    code_firstlineno: 68,
    code_linetable: 136,
    ascii_size: 40,
    compact_size: 56,
};

/// The layout of version `major.minor`, if supported.
pub fn for_version(major: u32, minor: u32) -> Option<&'static Layout> {
    match (major, minor) {
        (3, 10) => Some(&V3_10),
        (3, 11) => Some(&V3_11),
        (3, 12) => Some(&V3_12),
        (3, 13) => Some(&V3_13),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_3_10_to_3_13_only() {
        for minor in 10..=13 {
            assert_eq!(for_version(3, minor).map(|l| l.version), Some(0x0300 | minor));
        }
        assert!(for_version(3, 9).is_none());
        assert!(for_version(3, 14).is_none());
        assert!(for_version(2, 11).is_none());
    }
}
