//! Stacks as source frames: where symbols come from, and which frames a report shows.

use std::collections::HashMap;
use std::path::PathBuf;

use crate::model::Modules;
use crate::symbolize::{ModuleInfo, Symbolizer};

use super::owner::is_runtime_library;

/// One frame of a reported stack: the symbolizer's frame (an address can expand to several,
/// inlined calls first).
pub use crate::symbolize::Frame;

/// Where frames come from: the symbolizer, or module+offset when there are no symbols.
pub trait FrameSource {
    /// Source frames for one return address, innermost first; never empty.
    fn frames(&self, address: u64) -> Vec<Frame>;
    /// Problems met while symbolizing, one line each, for the report's notes.
    fn warnings(&self) -> Vec<String>;
}

/// Frames named only by module and offset, for when no symbols can be read.
#[derive(Debug, Clone)]
pub struct ModuleOffsets {
    modules: Modules,
}

impl ModuleOffsets {
    /// Names addresses by the modules of a trace.
    pub fn new(modules: Modules) -> ModuleOffsets {
        ModuleOffsets { modules }
    }
}

impl FrameSource for ModuleOffsets {
    fn frames(&self, address: u64) -> Vec<Frame> {
        let (module, address) = match self.modules.find(address) {
            Some(m) => (Some(m.name().to_string()), address.wrapping_sub(m.base)),
            None => (None, address),
        };
        vec![Frame {
            function: None,
            file: None,
            line: None,
            module,
            address,
            inlined: false,
        }]
    }

    fn warnings(&self) -> Vec<String> {
        Vec::new()
    }
}

impl FrameSource for Symbolizer {
    fn frames(&self, address: u64) -> Vec<Frame> {
        self.symbolize(address)
    }

    fn warnings(&self) -> Vec<String> {
        Symbolizer::warnings(self)
    }
}

/// The frame source for a trace: the symbolizer over its modules, with `debug_dirs` searched
/// for separate debug files.
pub fn source_for(modules: &Modules, debug_dirs: &[PathBuf]) -> Box<dyn FrameSource> {
    let infos = modules
        .iter()
        .map(|m| ModuleInfo {
            base: m.base,
            start: m.start,
            end: m.end,
            path: m.path.clone(),
            build_id: m.build_id.clone(),
        })
        .collect();
    Box::new(Symbolizer::new(infos, debug_dirs.to_vec()))
}

/// Turns stacks of return addresses into the frames a report shows, each address resolved
/// once.
pub struct Stacks<'a> {
    modules: &'a Modules,
    source: &'a dyn FrameSource,
    cache: HashMap<u64, Vec<Frame>>,
}

impl<'a> Stacks<'a> {
    /// Frames from `source`, with runtime frames recognised by `modules`.
    pub fn new(modules: &'a Modules, source: &'a dyn FrameSource) -> Stacks<'a> {
        Stacks {
            modules,
            source,
            cache: HashMap::new(),
        }
    }

    /// The frames shown for a stack: innermost first, without the leading frames inside the
    /// driver, the runtime or the shim (the record's `api` and `via` already name those calls),
    /// unless nothing else is left.
    pub fn frames(&mut self, addresses: &[u64]) -> Vec<Frame> {
        let plumbing = addresses
            .iter()
            .take_while(|&&a| self.modules.find(a).is_some_and(|m| is_runtime_library(&m.path)))
            .count();
        let shown = if plumbing == addresses.len() {
            addresses
        } else {
            &addresses[plumbing..]
        };
        let mut out = Vec::with_capacity(shown.len());
        for &a in shown {
            // Python frames (tagged by the model) are named from the trace's code objects.
            if let Some(frame) = self.modules.python.frame(a) {
                out.push(frame);
                continue;
            }
            let source = self.source;
            out.extend(self.cache.entry(a).or_insert_with(|| source.frames(a)).iter().cloned());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Module;

    fn modules() -> Modules {
        let mut m = Modules::default();
        for (start, path) in [(0x1000, "/sim/libcudart.so.12"), (0x2000, "/bin/app")] {
            m.insert(Module {
                base: start - 0x100,
                start,
                end: start + 0x1000,
                path: path.into(),
                build_id: Vec::new(),
            });
        }
        m
    }

    #[test]
    fn runtime_frames_are_trimmed_from_the_innermost_end_only() {
        let m = modules();
        let source = ModuleOffsets::new(m.clone());
        let mut stacks = Stacks::new(&m, &source);
        let frames = stacks.frames(&[0x1010, 0x2020, 0x1030, 0x9999]);
        let shown: Vec<(Option<&str>, u64)> = frames.iter().map(|f| (f.module.as_deref(), f.address)).collect();
        assert_eq!(
            shown,
            [(Some("app"), 0x120), (Some("libcudart.so.12"), 0x130), (None, 0x9999)]
        );
        // A stack wholly inside the runtime is shown whole.
        assert_eq!(stacks.frames(&[0x1010]).len(), 1);
        assert!(stacks.frames(&[]).is_empty());
    }
}
