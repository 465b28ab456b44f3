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

/// The object header and the `str` and `bytes` objects. A free-threaded build's header is twice
/// the default one (`ob_tid`, `ob_flags`, `ob_mutex`, `ob_gc_bits`, `ob_ref_local`,
/// `ob_ref_shared` before `ob_type`), which moves every field after it.
#[derive(Debug, Clone, Copy)]
pub struct Objects {
    /// `ob_type`.
    pub ob_type: u64,
    /// Variable-size objects: `ob_size` (code units of a 3.11+ code object, bytes of a bytes
    /// object).
    pub ob_size: u64,
    /// `PyBytesObject.ob_sval`.
    pub bytes_data: u64,
    /// `PyASCIIObject.length`.
    pub str_length: u64,
    /// `PyASCIIObject.state`.
    pub str_state: u64,
    /// The bit of `state` where its `kind` (3 bits) starts; `compact` and `ascii` follow. 2
    /// after the 2-bit `interned`, 8 where `interned` is a whole byte (free-threaded 3.14+,
    /// which reads it atomically).
    pub str_kind_shift: u32,
}

/// Every default build.
pub const DEFAULT_OBJECTS: Objects = Objects {
    ob_type: 8,
    ob_size: 16,
    bytes_data: 32,
    str_length: 16,
    str_state: 32,
    str_kind_shift: 2,
};

/// Free-threaded 3.13.
const FREE_THREADED_OBJECTS_3_13: Objects = Objects {
    ob_type: 24,
    ob_size: 32,
    bytes_data: 48,
    str_length: 32,
    str_state: 48,
    str_kind_shift: 2,
};

/// Free-threaded 3.14 and 3.15.
const FREE_THREADED_OBJECTS: Objects = Objects {
    str_kind_shift: 8,
    ..FREE_THREADED_OBJECTS_3_13
};

/// Thread-local bytecode (free-threaded 3.14+): a frame run by a thread other than the one
/// that made its code object may execute a copy of the bytecode, which `instr_ptr` then points
/// into. The copy is `code->co_tlbc->entries[frame->tlbc_index]` (a `_PyCodeArray`: a
/// `Py_ssize_t` size, then the entries); index 0 is the code object's own bytecode.
#[derive(Debug, Clone, Copy)]
pub struct Tlbc {
    /// Frame: `tlbc_index` (an `int32_t`).
    pub frame_index: u64,
    /// Code: `co_tlbc`.
    pub code_array: u64,
}

/// `_PyCodeArray.entries`.
pub const CODE_ARRAY_ENTRIES: u64 = 8;

/// One version's offsets (bytes).
#[derive(Debug, Clone, Copy)]
pub struct Layout {
    /// `major << 8 | minor`.
    pub version: u32,
    /// A free-threaded build's.
    pub free_threaded: bool,
    /// The object header, strings and bytes.
    pub objects: Objects,
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
    /// Frame and code: where a thread's own copy of the bytecode is (free-threaded 3.14+).
    pub tlbc: Option<Tlbc>,
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

const V3_10: Layout = Layout {
    version: 0x030a,
    free_threaded: false,
    objects: DEFAULT_OBJECTS,
    chain: Chain::Frame(24),
    frame_code: 32,
    frame_code_tags: 0,
    frame_previous: 24,
    instr: Instr::LastI { lasti: 96, co_code: 48 },
    tlbc: None,
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
    free_threaded: false,
    objects: DEFAULT_OBJECTS,
    chain: Chain::CFrame { cframe: 56, current: 8 },
    frame_code: 32,
    frame_code_tags: 0,
    frame_previous: 48,
    instr: Instr::Pointer {
        ptr: 56,
        code_start: 184,
    },
    tlbc: None,
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
    free_threaded: false,
    objects: DEFAULT_OBJECTS,
    chain: Chain::CFrame { cframe: 56, current: 0 },
    frame_code: 0,
    frame_code_tags: 0,
    frame_previous: 8,
    instr: Instr::Pointer {
        ptr: 56,
        code_start: 192,
    },
    tlbc: None,
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
    free_threaded: false,
    objects: DEFAULT_OBJECTS,
    chain: Chain::Current(72),
    frame_code: 0,
    frame_code_tags: 0,
    frame_previous: 8,
    instr: Instr::Pointer {
        ptr: 56,
        code_start: 200,
    },
    tlbc: None,
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

/// Free-threaded 3.13: the default 3.13 frames, every object field 16 bytes further on.
const V3_13T: Layout = Layout {
    free_threaded: true,
    objects: FREE_THREADED_OBJECTS_3_13,
    instr: Instr::Pointer {
        ptr: 56,
        code_start: 216,
    },
    code_filename: 128,
    code_name: 144,
    code_firstlineno: 84,
    code_linetable: 152,
    ascii_size: 56,
    compact_size: 72,
    ..V3_13
};

/// Free-threaded 3.14: as 3.13t, with the frame's `tlbc_index` before `owner` and the code
/// object's `co_tlbc` before its bytecode.
const V3_14T: Layout = Layout {
    version: 0x030e,
    objects: FREE_THREADED_OBJECTS,
    frame_code_tags: 3,
    instr: Instr::Pointer {
        ptr: 56,
        code_start: 232,
    },
    tlbc: Some(Tlbc {
        frame_index: 72,
        code_array: 224,
    }),
    entry: Entry::Owner(78, 3),
    ..V3_13T
};

const V3_15T: Layout = Layout {
    version: 0x030f,
    ..V3_14T
};

/// The layout of version `major.minor`'s default or free-threaded build, if supported.
pub fn for_build(major: u32, minor: u32, free_threaded: bool) -> Option<&'static Layout> {
    match (major, minor, free_threaded) {
        (3, 10, false) => Some(&V3_10),
        (3, 11, false) => Some(&V3_11),
        (3, 12, false) => Some(&V3_12),
        (3, 13, false) => Some(&V3_13),
        (3, 14, false) => Some(&V3_14),
        (3, 15, false) => Some(&V3_15),
        (3, 13, true) => Some(&V3_13T),
        (3, 14, true) => Some(&V3_14T),
        (3, 15, true) => Some(&V3_15T),
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
    pub str_state: u64,
    pub str_length: u64,
    pub bytes_ob_size: u64,
    pub bytes_ob_sval: u64,
    /// `interpreter_frame.tlbc_index` and `code_object.co_tlbc` (3.14+; 0 in a default
    /// build's); 0 where the version publishes neither.
    pub frame_tlbc_index: u64,
    pub code_tlbc: u64,
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
    str_state: 544,
    str_length: 552,
    bytes_ob_size: 520,
    bytes_ob_sval: 528,
    frame_tlbc_index: 0,
    code_tlbc: 0,
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
    str_state: 624,
    str_length: 632,
    bytes_ob_size: 600,
    bytes_ob_sval: 608,
    frame_tlbc_index: 304,
    code_tlbc: 392,
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
    str_state: 720,
    str_length: 728,
    bytes_ob_size: 696,
    bytes_ob_sval: 704,
    frame_tlbc_index: 368,
    code_tlbc: 456,
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
            ("pyobject.ob_type", self.objects.ob_type, d.ob_type),
            ("unicode_object.asciiobject_size", self.ascii_size, d.ascii_size),
            ("unicode_object.state", self.objects.str_state, d.str_state),
            ("unicode_object.length", self.objects.str_length, d.str_length),
            ("bytes_object.ob_size", self.objects.ob_size, d.bytes_ob_size),
            ("bytes_object.ob_sval", self.objects.bytes_data, d.bytes_ob_sval),
        ];
        if d.frame_tlbc_index != 0 {
            // A default build publishes 0 for both.
            let (index, array) = self.tlbc.map_or((0, 0), |t| (t.frame_index, t.code_array));
            v.push(("interpreter_frame.tlbc_index", index, d.frame_tlbc_index));
            v.push(("code_object.co_tlbc", array, d.code_tlbc));
        }
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
    fn versions_3_10_to_3_15_only_and_free_threaded_from_3_13() {
        for minor in 10..=15 {
            let l = for_build(3, minor, false).unwrap();
            assert_eq!((l.version, l.free_threaded), (0x0300 | minor, false));
            assert_eq!(
                for_build(3, minor, true).map(|l| (l.version, l.free_threaded)),
                (minor >= 13).then_some((0x0300 | minor, true))
            );
        }
        for ft in [false, true] {
            assert!(for_build(3, 9, ft).is_none());
            assert!(for_build(3, 16, ft).is_none());
            assert!(for_build(2, 11, ft).is_none());
        }
        for minor in 10..=15 {
            assert_eq!(debug_offsets(3, minor).is_some(), minor >= 13, "3.{minor}");
        }
    }

    #[test]
    fn every_layout_with_published_offsets_names_all_it_reads() {
        for minor in 13..=15 {
            for ft in [false, true] {
                let l = for_build(3, minor, ft).unwrap();
                let names: Vec<_> = l
                    .published(debug_offsets(3, minor).unwrap())
                    .iter()
                    .map(|p| p.0)
                    .collect();
                // 3.14+ also publish where thread-local bytecode is (0 in a default build).
                let tlbc = if minor >= 14 { 2 } else { 0 };
                assert_eq!(names.len(), 16 + tlbc, "3.{minor} free-threaded {ft}: {names:?}");
                assert_eq!(l.tlbc.is_some(), ft && minor >= 14);
            }
        }
    }

    #[test]
    fn free_threaded_layouts_differ_from_the_default_ones_only_where_the_headers_do() {
        for minor in 13..=15 {
            let (d, t) = (for_build(3, minor, false).unwrap(), for_build(3, minor, true).unwrap());
            // A frame is no object: its fields stay; the object header grows by 16 bytes.
            assert_eq!((d.frame_code, d.frame_previous), (t.frame_code, t.frame_previous));
            assert_eq!(t.objects.ob_type, d.objects.ob_type + 16);
            for (a, b) in [
                (d.code_filename, t.code_filename),
                (d.code_name, t.code_name),
                (d.code_firstlineno, t.code_firstlineno),
                (d.code_linetable, t.code_linetable),
                (d.ascii_size, t.ascii_size),
                (d.compact_size, t.compact_size),
            ] {
                assert_eq!(b, a + 16, "3.{minor}");
            }
            let (Instr::Pointer { code_start: a, .. }, Instr::Pointer { code_start: b, .. }) = (d.instr, t.instr)
            else {
                panic!("3.{minor}: no instruction pointer");
            };
            // 3.14t: `co_tlbc` before the bytecode.
            assert_eq!(b, a + if minor >= 14 { 24 } else { 16 }, "3.{minor}");
        }
    }
}
