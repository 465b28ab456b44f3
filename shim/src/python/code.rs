//! Code objects described once each: the `PyCode` records and the ids that `PyFrames` use.
//!
//! A code object is known by its address and the address of its line table: a freed code
//! object whose address is reused by another gets a new id and a new description (the new
//! one has its own line table), unless both addresses are reused at once.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Mutex;

use gpuleak_format::PyCode;

use super::read::{copy, Mem};
use super::{PyFrame, Runtime};

/// Longest file name or qualified name kept, in characters.
const MAX_NAME: u64 = 4096;
/// Longest line table kept, in bytes (a truncated one still gives lines for the offsets it
/// covers).
const MAX_TABLE: u64 = 1 << 20;

/// The code objects described so far in this trace.
pub struct Codes {
    ids: Mutex<HashMap<(u64, u64), u32>>,
    next: AtomicU32,
}

impl Default for Codes {
    fn default() -> Self {
        Codes {
            ids: Mutex::new(HashMap::new()),
            next: AtomicU32::new(1),
        }
    }
}

impl Codes {
    /// The id of `frame`'s code object, describing it through `write` the first time; `None`
    /// when it cannot be read.
    pub fn id(&self, rt: &Runtime, frame: &PyFrame, write: impl FnOnce(PyCode<'static>)) -> Option<u32> {
        let mut ids = self.ids.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(&id) = ids.get(&(frame.code, frame.table)) {
            return Some(id);
        }
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let code = describe(rt, frame, id)?;
        write(code);
        ids.insert((frame.code, frame.table), id);
        Some(id)
    }
}

fn describe(rt: &Runtime, frame: &PyFrame, id: u32) -> Option<PyCode<'static>> {
    let l = rt.layout;
    let m = Mem::Careful;
    if m.ptr(frame.code + l.objects.ob_type)? != rt.code_type || m.ptr(frame.code + l.code_linetable)? != frame.table {
        return None;
    }
    let filename = string(rt, m.ptr(frame.code + l.code_filename)?).unwrap_or_else(|| "?".into());
    let qualname = string(rt, m.ptr(frame.code + l.code_name)?).unwrap_or_else(|| "?".into());
    let first_line = m.i32(frame.code + l.code_firstlineno)?.max(0) as u32;
    let line_table = bytes(rt, frame.table).unwrap_or_default();
    Some(PyCode {
        id,
        python: l.version,
        first_line,
        filename: filename.into(),
        qualname: qualname.into(),
        line_table: line_table.into(),
    })
}

/// A compact `str` object's text.
fn string(rt: &Runtime, s: u64) -> Option<String> {
    let (m, o) = (Mem::Careful, &rt.layout.objects);
    if m.ptr(s + o.ob_type)? != rt.str_type {
        return None;
    }
    let len = m.ptr(s + o.str_length)?.min(MAX_NAME);
    let state = (m.i32(s + o.str_state)? as u32) >> o.str_kind_shift;
    let (kind, compact, ascii) = (state & 7, state >> 3 & 1 == 1, state >> 4 & 1 == 1);
    if !compact || !matches!(kind, 1 | 2 | 4) {
        return None;
    }
    let data = s + if ascii {
        rt.layout.ascii_size
    } else {
        rt.layout.compact_size
    };
    let mut raw = vec![0u8; (len * kind as u64) as usize];
    if !copy(data, &mut raw) {
        return None;
    }
    Some(match kind {
        1 => raw.iter().map(|&c| c as char).collect(),
        2 => raw
            .chunks_exact(2)
            .map(|c| char::from_u32(u16::from_ne_bytes([c[0], c[1]]) as u32).unwrap_or('?'))
            .collect(),
        _ => raw
            .chunks_exact(4)
            .map(|c| char::from_u32(u32::from_ne_bytes([c[0], c[1], c[2], c[3]])).unwrap_or('?'))
            .collect(),
    })
}

/// A `bytes` object's content.
fn bytes(rt: &Runtime, b: u64) -> Option<Vec<u8>> {
    let (m, o) = (Mem::Careful, &rt.layout.objects);
    if m.ptr(b + o.ob_type)? != rt.bytes_type {
        return None;
    }
    let len = m.ptr(b + o.ob_size)?.min(MAX_TABLE);
    let mut out = vec![0u8; len as usize];
    copy(b + o.bytes_data, &mut out).then_some(out)
}
