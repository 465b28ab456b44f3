//! Stacks as source frames: where symbols come from, and which frames a report shows.

use std::collections::{HashMap, HashSet};

use crate::model::Modules;
use crate::symbolize::{ModuleInfo, Symbolizer};

use super::owner::is_runtime_library;
use super::user_code::{shown_frames, UserCode};

/// One frame of a reported stack: the symbolizer's frame (an address can expand to several,
/// inlined calls first).
pub use crate::symbolize::Frame;

/// Where frames come from: the symbolizer, or module+offset when there are no symbols.
pub trait FrameSource {
    /// Source frames for one return address, innermost first; never empty.
    fn frames(&self, address: u64) -> Vec<Frame>;
    /// Problems met while symbolizing, one line each with the base name of the module it is
    /// about, for the report's notes.
    fn warnings(&self) -> Vec<(String, String)>;
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
            user: false,
        }]
    }

    fn warnings(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}

impl FrameSource for Symbolizer {
    fn frames(&self, address: u64) -> Vec<Frame> {
        self.symbolize(address)
    }

    fn warnings(&self) -> Vec<(String, String)> {
        Symbolizer::module_warnings(self)
    }
}

/// The frame source for a trace: the symbolizer over its modules, with the options' debug dirs
/// searched for separate debug files, module files looked for below their sysroot first, and
/// resolved frames kept across runs in their symbol cache; module+offset when only counts are
/// wanted.
pub fn source_for(modules: &Modules, options: &super::Options) -> Box<dyn FrameSource> {
    if options.counts_only {
        return Box::new(ModuleOffsets::new(modules.clone()));
    }
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
    Box::new(
        Symbolizer::new(infos, options.debug_dirs.clone())
            .with_sysroot(options.sysroot.clone())
            .with_symbol_cache(options.symbol_cache.clone()),
    )
}

/// Turns stacks of return addresses into the frames a report shows, each address resolved
/// once.
pub struct Stacks<'a> {
    modules: &'a Modules,
    source: &'a dyn FrameSource,
    user_code: UserCode,
    native_frames: bool,
    shown_modules: HashSet<String>,
    cache: HashMap<u64, Vec<Frame>>,
}

impl<'a> Stacks<'a> {
    /// Frames from `source`, with runtime frames recognised by `modules` and the user's
    /// frames marked by the default rule.
    pub fn new(modules: &'a Modules, source: &'a dyn FrameSource) -> Stacks<'a> {
        Stacks {
            modules,
            source,
            user_code: UserCode::default(),
            native_frames: false,
            shown_modules: HashSet::new(),
            cache: HashMap::new(),
        }
    }

    /// Counts every frame as shown (`--native-frames`), not only those
    /// [`shown_frames`] keeps, for [`Stacks::shown_modules`].
    pub fn with_native_frames(mut self, native_frames: bool) -> Stacks<'a> {
        self.native_frames = native_frames;
        self
    }

    /// The modules (base names) of the frames shown of every stack made so far: the notes
    /// about missing symbols matter for these only.
    pub fn shown_modules(&self) -> &HashSet<String> {
        &self.shown_modules
    }

    /// Marks the user's frames by `user_code` (`--focus`, `--hide`).
    pub fn with_user_code(mut self, user_code: UserCode) -> Stacks<'a> {
        self.user_code = user_code;
        self.cache.clear();
        self
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
        // Python frames (tagged by the model) are named from the trace's code objects. They
        // precede the eval-loop frame that ran them; when that address expands to calls
        // inlined into the eval loop, they go between those calls and the eval loop itself.
        let mut python = Vec::new();
        for &a in shown {
            if let Some(mut frame) = self.modules.python.frame(a) {
                frame.user = self.user_code.is_users(&frame, None);
                python.push(frame);
                continue;
            }
            let (source, modules, user_code) = (self.source, self.modules, &self.user_code);
            let frames = self.cache.entry(a).or_insert_with(|| {
                let path = modules.find(a).map(|m| m.path.as_str());
                let mut frames = source.frames(a);
                for f in &mut frames {
                    f.user = user_code.is_users(f, path);
                }
                frames
            });
            if python.is_empty() {
                out.extend(frames.iter().cloned());
            } else {
                let (last, inlined) = frames.split_last().expect("never empty");
                out.extend(inlined.iter().cloned());
                out.append(&mut python);
                out.push(last.clone());
            }
        }
        out.append(&mut python);
        for f in shown_frames(&out, self.native_frames) {
            if let Some(m) = &f.module {
                if !self.shown_modules.contains(m) {
                    self.shown_modules.insert(m.clone());
                }
            }
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

    #[test]
    fn counts_only_reads_no_module_s_symbols() {
        let m = modules();
        let counts = crate::report::Options {
            counts_only: true,
            ..Default::default()
        };
        let source = source_for(&m, &counts);
        assert_eq!(source.frames(0x2020)[0].module.as_deref(), Some("app"));
        assert!(source.warnings().is_empty(), "no file was looked for");
        // The symbolizer looks for /bin/app, and says so when it is not there.
        let source = source_for(&m, &crate::report::Options::default());
        assert_eq!(source.frames(0x2020)[0].module.as_deref(), Some("app"));
        assert!(!source.warnings().is_empty());
    }

    /// Returns two frames (one inlined) for 0x2020, one for anything else.
    struct Inlining;

    impl FrameSource for Inlining {
        fn frames(&self, address: u64) -> Vec<Frame> {
            let frame = |name: &str, inlined| Frame {
                function: Some(name.into()),
                file: None,
                line: None,
                module: Some("libpython3.10.so".into()),
                address,
                inlined,
                user: false,
            };
            if address == 0x2020 {
                vec![frame("call_function", true), frame("_PyEval_EvalFrameDefault", false)]
            } else {
                vec![frame("native", false)]
            }
        }

        fn warnings(&self) -> Vec<(String, String)> {
            Vec::new()
        }
    }

    #[test]
    fn python_frames_go_inside_the_eval_loop_frame_after_calls_inlined_into_it() {
        use crate::symbolize::python::{tag, PyCode};
        let mut m = modules();
        for id in [1, 2] {
            m.python.insert(
                id,
                PyCode {
                    python: 0x030a,
                    first_line: 1,
                    filename: "a.py".into(),
                    qualname: format!("f{id}"),
                    line_table: vec![],
                },
            );
        }
        let mut stacks = Stacks::new(&m, &Inlining);
        let names: Vec<String> = stacks
            .frames(&[0x2010, tag(1, 0), 0x2020, tag(2, 0)])
            .iter()
            .map(|f| f.function.clone().unwrap())
            .collect();
        assert_eq!(
            names,
            ["native", "call_function", "f1", "_PyEval_EvalFrameDefault", "f2"]
        );
    }
}
