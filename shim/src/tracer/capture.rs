//! Capturing a call stack on the hot path: per-thread scratch buffers (kept between captures,
//! so nothing is zeroed per call, in the thread's mapped block: see `crate::scratch`), the replay of a recent capture's stack id from the
//! unwinder's key, and Python frames woven into the native ones.

use gpuleak_format::{Addrs, PyFrames, Stack, StackId};

use super::Tracer;
use crate::fingerprint;
use crate::python::{self, PyFrame};
use crate::scratch::{PyScratch, StackScratch, KEYED, OWN_FRAMES};

/// The slot of `keyed` for `key`.
#[inline(always)]
fn keyed_slot(key: u64) -> usize {
    key as usize & (KEYED - 1)
}

impl StackScratch {
    /// The stack id of a recent capture with `key` by this thread for the tracer `owner`: the
    /// unwinder copied that capture's frames, so nothing needs filtering, comparing or looking
    /// up. Forgets everything kept for another tracer (a forked child's new one).
    #[inline(always)]
    fn recent(&mut self, owner: usize, key: u64) -> Option<StackId> {
        if self.owner != owner {
            self.keyed = [(0, 0); KEYED];
            self.len = 0;
            return None;
        }
        if key == 0 {
            return None;
        }
        let (k, id) = self.keyed[keyed_slot(key)];
        (k == key).then_some(StackId(id))
    }

    /// Moves the program's frames among the first `n` of `buf` to its front, at most `depth`,
    /// and returns how many: the shim's own frames (its wrappers, also the runtime tag wrappers
    /// between the program and the runtime, all inside `own_text`) are never the program's.
    #[inline(always)]
    fn keep_program_frames(&mut self, n: usize, (lo, hi): (u64, u64), depth: usize) -> usize {
        let mut kept = 0;
        for i in 0..n {
            let a = self.buf[i];
            if (a < lo || a >= hi) && kept < depth {
                self.buf[kept] = a;
                kept += 1;
            }
        }
        kept
    }

    /// Keeps `id` as the stack of the capture with `key` (0: none).
    #[inline(always)]
    fn remember(&mut self, key: u64, id: u32) {
        if key != 0 {
            self.keyed[keyed_slot(key)] = (key, id);
        }
    }
}

/// The unwinder's replay key of a capture combined with the hash of its Python frames (0
/// without Python frames: the key itself). The same native frames often run different Python
/// code, so a replayed native capture alone must not give back a stack id. 0 (no key) stays 0.
#[inline(always)]
fn with_python(key: u64, py_hash: u64) -> u64 {
    if key == 0 {
        0
    } else {
        key ^ py_hash
    }
}

impl Tracer {
    /// Captures the calling thread's stack above the shim and interns it.
    #[inline(never)]
    pub(super) fn stack(&self) -> StackId {
        if self.depth == 0 {
            return StackId::NONE;
        }
        if self.python {
            if let Some(rt) = python::runtime() {
                return self.stack_python(rt);
            }
        }
        // No scratch (no memory could be mapped): no stack rather than 5 KiB of buffers on
        // the program's stack.
        crate::scratch::with_capture(|s| self.stack_in(&mut s.native)).unwrap_or(StackId::NONE)
    }

    #[inline(always)]
    fn stack_in(&self, s: &mut StackScratch) -> StackId {
        let (n, key) = gpuleak_unwind::capture_keyed(0, &mut s.buf[..self.depth + OWN_FRAMES]);
        let owner = self as *const Tracer as usize;
        if let Some(id) = s.recent(owner, key) {
            return id;
        }
        let kept = s.keep_program_frames(n, self.own_text, self.depth);
        if kept == 0 {
            return StackId::NONE;
        }
        // A loop allocating from one place repeats this thread's last stack: no hash, no
        // table lookup.
        if s.owner == owner && s.len == kept && s.last[..kept] == s.buf[..kept] {
            s.remember(key, s.id);
            return StackId(s.id);
        }
        let frames = &s.buf[..kept];
        let id = self.stacks.intern(fingerprint::hash(frames), |id| {
            self.cover(frames);
            self.now(
                &Stack {
                    id,
                    frames: Addrs(frames.into()),
                }
                .into(),
            );
        });
        s.owner = owner;
        s.len = kept;
        s.id = id.0;
        s.remember(key, id.0);
        s.last[..kept].copy_from_slice(&s.buf[..kept]);
        id
    }

    /// [`stack`](Self::stack) in a Python process: the native capture of
    /// [`stack_in`](Self::stack_in) plus the thread's Python frames, which take part in every
    /// cache check (the same native frames often run different Python code).
    #[cold]
    #[inline(never)]
    fn stack_python(&self, rt: &python::Runtime) -> StackId {
        crate::scratch::with_capture(|s| self.stack_in_python(rt, &mut s.native, &mut s.py)).unwrap_or(StackId::NONE)
    }

    fn stack_in_python(&self, rt: &python::Runtime, s: &mut StackScratch, p: &mut PyScratch) -> StackId {
        let (n, key) = gpuleak_unwind::capture_keyed(0, &mut s.buf[..self.depth + OWN_FRAMES]);
        let (py_n, py_hash) = rt.capture(&mut p.frames);
        let key = with_python(key, py_hash);
        let owner = self as *const Tracer as usize;
        if let Some(id) = s.recent(owner, key) {
            return id;
        }
        let kept = s.keep_program_frames(n, self.own_text, self.depth);
        if kept == 0 {
            return StackId::NONE;
        }
        if s.owner == owner && s.len == kept && p.last == py_hash && s.last[..kept] == s.buf[..kept] {
            s.remember(key, s.id);
            return StackId(s.id);
        }
        let frames = &s.buf[..kept];
        let pyframes = &p.frames[..py_n];
        let id = self.stacks.intern(fingerprint::hash(frames) ^ py_hash, |id| {
            self.cover(frames);
            self.now(
                &Stack {
                    id,
                    frames: Addrs(frames.into()),
                }
                .into(),
            );
            if !pyframes.is_empty() {
                self.write_python(rt, id, frames, pyframes);
            }
        });
        s.owner = owner;
        s.len = kept;
        p.last = py_hash;
        s.id = id.0;
        s.remember(key, id.0);
        s.last[..kept].copy_from_slice(&s.buf[..kept]);
        id
    }

    /// Writes where the Python frames of a new stack go among its native frames, describing
    /// their code objects first.
    ///
    /// The rule: each native frame inside `_PyEval_EvalFrameDefault` ran one group of Python
    /// frames (those from an entry frame inwards), so the innermost group goes just before
    /// (on the inner side of) the innermost eval-loop frame, the next group before the next
    /// one, and so on; groups left over (native frames cut by the depth limit, or an eval loop
    /// that cannot be found) go after the last native frame, in order. A group's eval-loop
    /// frame is the one holding its boundary frame on the stack (3.12+,
    /// [`python::NativeFrames`]), else the next one inside the function's symbol.
    #[cold]
    fn write_python(&self, rt: &python::Runtime, id: StackId, native: &[u64], py: &[PyFrame]) {
        // Metrics labels and the OOM summary name a site by its user's Python line.
        let labels = crate::ops::labels_wanted();
        let mut triples = Vec::with_capacity(py.len() * 3);
        let mut next = 0;
        let mut i = 0;
        let mut here = None;
        while i < py.len() {
            let end = (i..py.len()).find(|&j| py[j].entry).unwrap_or(py.len() - 1);
            let at = match py[end].boundary {
                0 => None,
                b => here
                    .get_or_insert_with(python::NativeFrames::here)
                    .eval_frame(b, native, next),
            }
            .or_else(|| (next..native.len()).find(|&k| rt.in_eval_loop(native[k])))
            .unwrap_or(native.len());
            for f in &py[i..=end] {
                let described = |c: gpuleak_format::PyCode<'static>| {
                    if labels {
                        crate::ops::sites::python_code(&c);
                    }
                    self.now(&c.into());
                };
                if let Some(code) = self.codes.id(rt, f, described) {
                    triples.extend([at as u64, code as u64, f.offset as u64]);
                }
            }
            next = (at + 1).min(native.len());
            i = end + 1;
        }
        if labels {
            crate::ops::sites::python_frames(id, &triples);
        }
        if !triples.is_empty() {
            self.now(
                &PyFrames {
                    stack: id,
                    frames: Addrs(triples.into()),
                }
                .into(),
            );
        }
    }
}
