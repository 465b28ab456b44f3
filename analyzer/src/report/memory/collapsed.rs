//! Stacks in the collapsed format of flame graph tools (`flamegraph.pl`, inferno, speedscope):
//! one line per stack, frames outermost first joined by `;`, then a space and the bytes.

use std::fmt::Write as _;

use super::super::user_code::shown_frames;
use super::super::{Frame, Report};

/// What the stacks are weighed by.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Weight {
    /// Bytes leaked (at exit or teardown).
    Leaked,
    /// Bytes live at the process's peak.
    Peak,
}

/// A frame's name in a collapsed line (no `;`, no newline).
pub fn frame_name(f: &Frame) -> String {
    let name = match (&f.function, &f.file, f.line) {
        (Some(func), Some(file), Some(line)) => format!("{func} {}:{line}", crate::model::file_name(file)),
        (Some(func), _, _) => func.clone(),
        (None, _, _) => format!("{}+{:#x}", f.module.as_deref().unwrap_or("?"), f.address),
    };
    name.replace([';', '\n', '\r'], " ")
}

/// One line: the frames shown (`user_code::shown_frames`) outermost first, then the weight.
fn line(root: &str, frames: &[Frame], native_frames: bool, bytes: u64, out: &mut String) {
    out.push_str(root);
    for f in shown_frames(frames, native_frames).into_iter().rev() {
        out.push(';');
        out.push_str(&frame_name(f));
    }
    let _ = writeln!(out, " {bytes}");
}

/// Every process's stacks, each under a root frame naming the process.
pub fn write(report: &Report, weight: Weight) -> String {
    let mut out = String::new();
    for p in &report.processes {
        let root = match &p.process {
            Some(info) => format!("{} [{}]", crate::model::file_name(&info.exe), info.pid),
            None => p.trace.display().to_string(),
        }
        .replace([';', '\n', '\r'], " ");
        match weight {
            Weight::Leaked => {
                for h in &p.leaks {
                    line(&root, &h.stack, report.native_frames, h.bytes, &mut out);
                }
            }
            Weight::Peak => {
                if let Some(m) = &p.memory {
                    for (id, bytes) in &m.peak_sites {
                        let frames = m.sites.get(id).map_or(&[][..], |s| s.stack.as_slice());
                        line(&root, frames, report.native_frames, *bytes, &mut out);
                    }
                }
            }
        }
    }
    out
}
