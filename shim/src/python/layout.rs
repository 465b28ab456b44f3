//! Where CPython 3.10 to 3.15 keep what a stack walk needs, per version.
//!
//! Written from the public headers of each release (`Include/cpython/pystate.h`,
//! `Include/cpython/code.h`, `Include/internal/pycore_frame.h` (3.11 to 3.13),
//! `Include/internal/pycore_interpframe_structs.h` (3.14+), `Include/cpython/frameobject.h`
//! on 3.10, `Include/cpython/unicodeobject.h`) for the default build of a 64-bit target (no
//! `Py_TRACE_REFS`, not free-threaded), and checked with `offsetof` against the headers of
//! 3.10.13, 3.11.7, 3.12.1, 3.13.0, 3.14.8 and 3.15.0 (the last two Debian's `libpython3.1x-dev`).
//! The layouts of these structures do not change within a minor release. From 3.13 on the
//! interpreter also publishes its offsets for debuggers (`_Py_DebugOffsets`, at the start of
//! `_PyRuntime`); [`DebugOffsets`] says where to find the ones used here, so that a build whose
//! layout differs from its release's is told apart before any frame is read.

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
    /// 3.12+: the eval loop pushes a frame of its own below the first frame it runs, whose
    /// `owner` byte (at the offset) is at least the value: `FRAME_OWNED_BY_CSTACK` (3) on 3.12
    /// and 3.13, `FRAME_OWNED_BY_INTERPRETER` (3) from 3.14 on, which also owns the thread's
    /// base frame at the bottom of the chain. (CPython treats every owner from that value on
    /// as a frame that runs no code: `_PyFrame_IsIncomplete`.)
    Owner(u64, u8),
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
    /// Low bits of the frame's code pointer that are tags, not address (3.14+: `f_executable`
    /// is a `_PyStackRef`, whose `Py_TAG_BITS` are at most the low two).
    pub frame_code_tags: u64,
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
    frame_code_tags: 0,
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
    frame_code_tags: 0,
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
    frame_code_tags: 0,
    frame_previous: 8,
    instr: Instr::Pointer {
        ptr: 56,
        code_start: 192,
    },
    entry: Entry::Owner(70, 3),
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
    frame_code_tags: 0,
    frame_previous: 8,
    instr: Instr::Pointer {
        ptr: 56,
        code_start: 200,
    },
    entry: Entry::Owner(70, 3),
    code_filename: 112,
    code_name: 128,
    code_firstlineno: 68,
    code_linetable: 136,
    ascii_size: 40,
    compact_size: 56,
};

/// 3.14 and 3.15 keep these fields where 3.13 did, but for the frame's `owner` (after a
/// stack pointer that replaced an `int`), the tagged `f_executable`, and the code object's
/// bytecode (after new fields).
const V3_14: Layout = Layout {
    version: 0x030e,
    frame_code_tags: 3,
    instr: Instr::Pointer {
        ptr: 56,
        code_start: 208,
    },
    entry: Entry::Owner(74, 3),
    ..V3_13
};

const V3_15: Layout = Layout {
    version: 0x030f,
    ..V3_14
};

/// The layout of version `major.minor`, if supported.
pub fn for_version(major: u32, minor: u32) -> Option<&'static Layout> {
    match (major, minor) {
        (3, 10) => Some(&V3_10),
        (3, 11) => Some(&V3_11),
        (3, 12) => Some(&V3_12),
        (3, 13) => Some(&V3_13),
        (3, 14) => Some(&V3_14),
        (3, 15) => Some(&V3_15),
        _ => None,
    }
}

/// Where `_Py_DebugOffsets` (3.13+) keeps the offsets this walk uses; each entry is the offset
/// of a `uint64_t` inside that structure. Checked with `offsetof` against the same headers as
/// the layouts.
#[derive(Debug, Clone, Copy)]
pub struct DebugOffsets {
    pub thread_current_frame: u64,
    pub frame_previous: u64,
    pub frame_executable: u64,
    pub frame_instr_ptr: u64,
    pub frame_owner: u64,
    pub code_filename: u64,
    pub code_qualname: u64,
    pub code_linetable: u64,
    pub code_firstlineno: u64,
    pub code_adaptive: u64,
    pub ob_type: u64,
    pub ascii_size: u64,
}

/// `_Py_DebugOffsets.cookie`, its first eight bytes.
pub const DEBUG_COOKIE: &[u8; 8] = b"xdebugpy";
/// `_Py_DebugOffsets.version` (`PY_VERSION_HEX`) and `.free_threaded`.
pub const DEBUG_VERSION: u64 = 8;
pub const DEBUG_FREE_THREADED: u64 = 16;

const DEBUG_3_13: DebugOffsets = DebugOffsets {
    thread_current_frame: 184,
    frame_previous: 232,
    frame_executable: 240,
    frame_instr_ptr: 248,
    frame_owner: 264,
    code_filename: 280,
    code_qualname: 296,
    code_linetable: 304,
    code_firstlineno: 312,
    code_adaptive: 344,
    ob_type: 360,
    ascii_size: 560,
};

const DEBUG_3_14: DebugOffsets = DebugOffsets {
    thread_current_frame: 208,
    frame_previous: 256,
    frame_executable: 264,
    frame_instr_ptr: 272,
    frame_owner: 288,
    code_filename: 320,
    code_qualname: 336,
    code_linetable: 344,
    code_firstlineno: 352,
    code_adaptive: 384,
    ob_type: 408,
    ascii_size: 640,
};

const DEBUG_3_15: DebugOffsets = DebugOffsets {
    thread_current_frame: 208,
    frame_previous: 320,
    frame_executable: 328,
    frame_instr_ptr: 336,
    frame_owner: 352,
    code_filename: 384,
    code_qualname: 400,
    code_linetable: 408,
    code_firstlineno: 416,
    code_adaptive: 448,
    ob_type: 472,
    ascii_size: 736,
};

/// Where version `major.minor` publishes its offsets for debuggers (3.13+).
pub fn debug_offsets(major: u32, minor: u32) -> Option<&'static DebugOffsets> {
    match (major, minor) {
        (3, 13) => Some(&DEBUG_3_13),
        (3, 14) => Some(&DEBUG_3_14),
        (3, 15) => Some(&DEBUG_3_15),
        _ => None,
    }
}

impl Layout {
    /// The `(name, offset)` pairs of this layout that `_Py_DebugOffsets` also publishes, with
    /// where it publishes each.
    pub fn published(&self, d: &DebugOffsets) -> Vec<(&'static str, u64, u64)> {
        let mut v = vec![
            ("interpreter_frame.previous", self.frame_previous, d.frame_previous),
            ("interpreter_frame.executable", self.frame_code, d.frame_executable),
            ("code_object.filename", self.code_filename, d.code_filename),
            ("code_object.qualname", self.code_name, d.code_qualname),
            ("code_object.linetable", self.code_linetable, d.code_linetable),
            ("code_object.firstlineno", self.code_firstlineno, d.code_firstlineno),
            ("pyobject.ob_type", OB_TYPE, d.ob_type),
            ("unicode_object.asciiobject_size", self.ascii_size, d.ascii_size),
        ];
        if let Chain::Current(off) = self.chain {
            v.push(("thread_state.current_frame", off, d.thread_current_frame));
        }
        if let Instr::Pointer { ptr, code_start } = self.instr {
            v.push(("interpreter_frame.instr_ptr", ptr, d.frame_instr_ptr));
            v.push(("code_object.co_code_adaptive", code_start, d.code_adaptive));
        }
        if let Entry::Owner(off, _) = self.entry {
            v.push(("interpreter_frame.owner", off, d.frame_owner));
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_3_10_to_3_15_only() {
        for minor in 10..=15 {
            assert_eq!(for_version(3, minor).map(|l| l.version), Some(0x0300 | minor));
        }
        assert!(for_version(3, 9).is_none());
        assert!(for_version(3, 16).is_none());
        assert!(for_version(2, 11).is_none());
        for minor in 10..=15 {
            assert_eq!(debug_offsets(3, minor).is_some(), minor >= 13, "3.{minor}");
        }
    }

    #[test]
    fn every_layout_with_published_offsets_names_all_it_reads() {
        for minor in 13..=15 {
            let l = for_version(3, minor).unwrap();
            let names: Vec<_> = l
                .published(debug_offsets(3, minor).unwrap())
                .iter()
                .map(|p| p.0)
                .collect();
            assert_eq!(names.len(), 12, "3.{minor}: {names:?}");
        }
    }
}
