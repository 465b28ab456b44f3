//! Offline symbolization: return addresses recorded by the shim turned into source frames
//! (function, file, line, inlined calls), from the trace's module map.
//!
//! Each module's file is checked against the build id recorded at run time, so a library
//! rebuilt since the run is never used to name its old addresses; debug files kept elsewhere
//! are found in debug dirs (`--debug-dir`, then `/usr/lib/debug`) by build id, by name, or by
//! `.gnu_debuglink`. Code without DWARF is named from `.symtab`/`.dynsym`, and code without any
//! symbols shows as module+offset. C++ and Rust names are demangled. A trace recorded on another
//! machine, in a container or under an emulator names its modules by paths there: with a
//! sysroot (`--sysroot`, [`Symbolizer::with_sysroot`]) each module is looked for below it
//! first, then at its recorded path.
//!
//! Modules are opened on first use and each address is resolved once: of a module's DWARF, only
//! the units that hold the addresses asked are parsed, and of its symbol table only the entries
//! are indexed, names read when found. With a cache directory
//! ([`Symbolizer::with_symbol_cache`]) frames resolved in a module with a build id are kept
//! across runs ([`cache`]).
//!
//! ```no_run
//! use gpuleak_analyzer::symbolize::{ModuleInfo, Symbolizer};
//!
//! let module = ModuleInfo {
//!     base: 0x5555_5555_4000,
//!     start: 0x5555_5555_4000,
//!     end: 0x5555_5555_9000,
//!     path: "/usr/bin/app".into(),
//!     build_id: vec![],
//! };
//! let symbolizer = Symbolizer::new(vec![module], vec!["/srv/debug".into()]);
//! for frame in symbolizer.symbolize(0x5555_5555_5123) {
//!     println!("{:?} {:?}:{:?}", frame.function, frame.file, frame.line);
//! }
//! for note in symbolizer.warnings() {
//!     eprintln!("note: {note}");
//! }
//! ```

pub mod cache;
mod debug_info;
mod dwarf;
mod files;
mod names;
pub mod python;
mod symbol_table;
mod types;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{OnceLock, PoisonError, RwLock};

use debug_info::DebugInfo;
pub use types::ModuleInfo;

/// One source-level frame. An address can expand to several: the calls inlined at it first,
/// innermost first, then the function that contains them all.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Frame {
    /// Demangled function name, without C++ parameters or Rust hash; `None` when unknown.
    pub function: Option<String>,
    /// Source file as the debug info names it (usually an absolute path).
    pub file: Option<String>,
    /// Line of the call (the return address minus one is what is looked up).
    pub line: Option<u32>,
    /// Base name of the module's file; `None` when the address is in no recorded module.
    pub module: Option<String>,
    /// The return address relative to the module's load bias (what `addr2line -e FILE` takes,
    /// plus one) when `module` is known, else the absolute return address.
    pub address: u64,
    /// Whether this frame is a call inlined into the next frame (same address).
    pub inlined: bool,
    /// Whether the frame is in the user's code (`report::user_code`); the symbolizer leaves it
    /// `false` and the report sets it.
    pub user: bool,
}

/// Turns return addresses into source frames. Shared between threads; loads each module's
/// symbols on first use and remembers every address it resolved.
pub struct Symbolizer {
    modules: Vec<Module>,
    debug_dirs: Vec<PathBuf>,
    sysroot: Option<PathBuf>,
    symbol_cache: Option<PathBuf>,
    cache: RwLock<HashMap<u64, Vec<Frame>>>,
}

struct Module {
    info: ModuleInfo,
    name: String,
    debug: OnceLock<DebugInfo>,
}

impl Symbolizer {
    /// A symbolizer over `modules` (in trace order: where ranges overlap, a later module
    /// replaced an earlier one, and wins) that looks for debug files in `debug_dirs`, then in
    /// `/usr/lib/debug`. Reads nothing yet.
    pub fn new(modules: Vec<ModuleInfo>, mut debug_dirs: Vec<PathBuf>) -> Symbolizer {
        if !debug_dirs.iter().any(|d| d == Path::new(files::SYSTEM_DEBUG_DIR)) {
            debug_dirs.push(PathBuf::from(files::SYSTEM_DEBUG_DIR));
        }
        let modules = modules
            .into_iter()
            .map(|info| {
                let path = info.path.strip_suffix(" (deleted)").unwrap_or(&info.path);
                let name = Path::new(path)
                    .file_name()
                    .map_or_else(|| path.to_owned(), |n| n.to_string_lossy().into_owned());
                Module {
                    info,
                    name,
                    debug: OnceLock::new(),
                }
            })
            .collect();
        Symbolizer {
            modules,
            debug_dirs,
            sysroot: None,
            symbol_cache: None,
            cache: RwLock::new(HashMap::new()),
        }
    }

    /// Looks for each module's file below `sysroot` first (`/lib/libc.so.6` as
    /// `SYSROOT/lib/libc.so.6`), then at its recorded path, and for debug files by build id in
    /// `SYSROOT/usr/lib/debug` before `/usr/lib/debug`; `None` keeps the recorded paths only.
    pub fn with_sysroot(mut self, sysroot: Option<PathBuf>) -> Symbolizer {
        if let Some(root) = &sysroot {
            let system = Path::new(files::SYSTEM_DEBUG_DIR);
            let theirs = root.join(system.strip_prefix("/").unwrap_or(system));
            let at = self
                .debug_dirs
                .iter()
                .position(|d| d == system)
                .unwrap_or(self.debug_dirs.len());
            if !self.debug_dirs.contains(&theirs) {
                self.debug_dirs.insert(at, theirs);
            }
        }
        self.sysroot = sysroot;
        self
    }

    /// Keeps the frames resolved in modules with a build id in `dir` across runs (see
    /// [`cache`]), written when the symbolizer is dropped; `None` keeps nothing.
    pub fn with_symbol_cache(mut self, dir: Option<PathBuf>) -> Symbolizer {
        self.symbol_cache = dir;
        self
    }

    /// Source frames for one return address, innermost first (resolved at `address - 1`, the
    /// call instruction). Never fails: an address in a module without symbols gives one frame
    /// with only `module` and the module-relative `address`; one outside every module gives
    /// one frame with `module` `None` too.
    pub fn symbolize(&self, address: u64) -> Vec<Frame> {
        if let Some(frames) = self.cache.read().unwrap_or_else(PoisonError::into_inner).get(&address) {
            return frames.clone();
        }
        let frames = self.resolve(address);
        let mut cache = self.cache.write().unwrap_or_else(PoisonError::into_inner);
        cache.entry(address).or_insert(frames).clone()
    }

    /// Problems met so far (a file missing, rebuilt since the run, without debug info...), one
    /// line each, in module order, for the report's notes.
    pub fn warnings(&self) -> Vec<String> {
        self.module_warnings().into_iter().map(|(_, line)| line).collect()
    }

    /// [`Symbolizer::warnings`], each with the base name of the module it is about (as
    /// [`Frame::module`] names it).
    pub fn module_warnings(&self) -> Vec<(String, String)> {
        let mut out: Vec<(String, String)> = Vec::new();
        for module in &self.modules {
            for line in module.debug.get().map(DebugInfo::warnings).unwrap_or_default() {
                // The same file may be recorded twice (unloaded and loaded again).
                if !out.iter().any(|(_, l)| *l == line) {
                    out.push((module.name.clone(), line));
                }
            }
        }
        out
    }

    fn module_of(&self, address: u64) -> Option<&Module> {
        // A linear scan is cheap next to a DWARF lookup, and each address is resolved once.
        self.modules
            .iter()
            .rev()
            .find(|m| m.info.start <= address && address < m.info.end)
    }

    fn resolve(&self, address: u64) -> Vec<Frame> {
        let Some(module) = self.module_of(address) else {
            return vec![Frame {
                function: None,
                file: None,
                line: None,
                module: None,
                address,
                inlined: false,
                user: false,
            }];
        };
        let offset = address.wrapping_sub(module.info.base);
        let debug = module.debug.get_or_init(|| {
            let cache = self.symbol_cache.as_deref();
            DebugInfo::load(&module.info, &self.debug_dirs, self.sysroot.as_deref(), cache)
        });
        let frame = |f: debug_info::SourceFrame| Frame {
            function: f.function,
            file: f.file,
            line: f.line,
            module: Some(module.name.clone()),
            address: offset,
            inlined: f.inlined,
            user: false,
        };
        let frames: Vec<Frame> = debug.frames(offset.wrapping_sub(1)).into_iter().map(frame).collect();
        if frames.is_empty() {
            return vec![frame(debug_info::SourceFrame::default())];
        }
        frames
    }
}

impl Drop for Symbolizer {
    fn drop(&mut self) {
        for module in &self.modules {
            if let Some(debug) = module.debug.get() {
                debug.save_cache();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn assert_send_sync<T: Send + Sync>() {}

    #[test]
    fn symbolizer_is_shareable() {
        assert_send_sync::<Symbolizer>();
    }

    fn module(start: u64, end: u64, path: &str) -> ModuleInfo {
        ModuleInfo {
            base: start,
            start,
            end,
            path: path.into(),
            build_id: vec![],
        }
    }

    #[test]
    fn unknown_address_keeps_its_absolute_value() {
        let s = Symbolizer::new(vec![module(0x1000, 0x2000, "linux-vdso.so.1")], vec![]);
        let frames = s.symbolize(0x5000);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].module, None);
        assert_eq!(frames[0].address, 0x5000);
    }

    #[test]
    fn pseudo_module_gives_module_and_offset_quietly() {
        let s = Symbolizer::new(vec![module(0x1000, 0x2000, "linux-vdso.so.1")], vec![]);
        let frames = s.symbolize(0x1234);
        assert_eq!(frames.len(), 1);
        assert_eq!(frames[0].module.as_deref(), Some("linux-vdso.so.1"));
        assert_eq!(frames[0].function, None);
        assert_eq!(frames[0].address, 0x234);
        assert!(s.warnings().is_empty(), "{:?}", s.warnings());
    }

    #[test]
    fn later_module_over_the_same_range_wins() {
        let s = Symbolizer::new(
            vec![module(0x1000, 0x2000, "[old]"), module(0x1000, 0x2000, "[new]")],
            vec![],
        );
        assert_eq!(s.symbolize(0x1100)[0].module.as_deref(), Some("[new]"));
    }

    #[test]
    fn missing_file_is_a_warning_not_a_failure() {
        let s = Symbolizer::new(
            vec![module(0x1000, 0x2000, "/nonexistent/libgone.so (deleted)")],
            vec![],
        );
        let frames = s.symbolize(0x1010);
        assert_eq!(frames[0].module.as_deref(), Some("libgone.so"));
        assert_eq!(frames[0].address, 0x10);
        let warnings = s.warnings();
        assert_eq!(warnings.len(), 1, "{warnings:?}");
        assert!(warnings[0].contains("not found"), "{warnings:?}");
    }
}
