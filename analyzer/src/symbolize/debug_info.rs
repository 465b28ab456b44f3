//! One module's symbols, loaded once: the DWARF reader of the file that has it and the symbol
//! table of the file with the fullest one, and the source frames of one address from them.

use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};

use super::cache::{ModuleCache, Source};
use super::dwarf::Dwarf;
use super::files::{self, Files};
use super::names::demangle;
use super::symbol_table::SymbolTable;
use super::types::ModuleInfo;
pub(super) use super::types::SourceFrame;

/// Everything known about one module's symbols.
pub(super) struct DebugInfo {
    /// The module's path, for warnings.
    path: String,
    /// The file whose DWARF describes the module.
    dwarf_path: Option<PathBuf>,
    /// Opened on first use: not at all when the cache holds every address asked. addr2line's
    /// context is not `Sync` (it parses units lazily through cells): one lookup at a time per
    /// module.
    dwarf: OnceLock<Option<Mutex<Dwarf>>>,
    /// Frames kept across runs (`cache.rs`), for a module with a build id and DWARF.
    cache: Option<Mutex<ModuleCache>>,
    symbols_path: Option<PathBuf>,
    /// Read on first use: most lookups in a module with DWARF never need it.
    symbols: OnceLock<SymbolTable>,
    warnings: Mutex<Vec<String>>,
}

impl DebugInfo {
    /// Finds the files for `module` (reading their headers only), and its cache in
    /// `cache_dir` when it has a build id, DWARF, and nothing to warn about.
    pub(super) fn load(
        module: &ModuleInfo,
        debug_dirs: &[PathBuf],
        sysroot: Option<&Path>,
        cache_dir: Option<&Path>,
    ) -> DebugInfo {
        let mut warnings = Vec::new();
        let Files { dwarf, symbols } = files::find(module, debug_dirs, sysroot, &mut warnings);
        let cache = match (cache_dir, &dwarf) {
            (Some(dir), Some(dwarf)) if !module.build_id.is_empty() && warnings.is_empty() => {
                let mut paths = vec![dwarf.clone()];
                paths.extend(symbols.iter().filter(|s| *s != dwarf).cloned());
                let sources: Option<Vec<Source>> = paths.iter().map(|p| Source::of(p)).collect();
                sources.map(|sources| Mutex::new(ModuleCache::open(dir, &module.build_id, sources)))
            }
            _ => None,
        };
        DebugInfo {
            path: module.path.clone(),
            dwarf_path: dwarf,
            dwarf: OnceLock::new(),
            cache,
            symbols_path: symbols,
            symbols: OnceLock::new(),
            warnings: Mutex::new(warnings),
        }
    }

    /// The problems met with this module so far.
    pub(super) fn warnings(&self) -> Vec<String> {
        self.warnings.lock().unwrap_or_else(PoisonError::into_inner).clone()
    }

    fn warn(&self, line: String) {
        let mut warnings = self.warnings.lock().unwrap_or_else(PoisonError::into_inner);
        if !warnings.contains(&line) {
            warnings.push(line);
        }
    }

    /// Writes the frames resolved by this run to the module's cache, unless something went
    /// wrong with its symbols (the notes of a report never depend on the cache).
    pub(super) fn save_cache(&self) {
        if let Some(cache) = &self.cache {
            if self.warnings.lock().unwrap_or_else(PoisonError::into_inner).is_empty() {
                cache.lock().unwrap_or_else(PoisonError::into_inner).save();
            }
        }
    }

    /// The source frames at `probe` (an ELF virtual address of the module), innermost first;
    /// empty when nothing is known.
    pub(super) fn frames(&self, probe: u64) -> Vec<SourceFrame> {
        let Some(cache) = &self.cache else {
            return self.resolve(probe);
        };
        if let Some(frames) = cache.lock().unwrap_or_else(PoisonError::into_inner).get(probe) {
            return frames;
        }
        let frames = self.resolve(probe);
        cache
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(probe, &frames);
        frames
    }

    fn resolve(&self, probe: u64) -> Vec<SourceFrame> {
        let mut frames = self.dwarf_frames(probe);
        // DWARF without a function entry for this code (assembly, or a unit built without -g
        // among ones built with it) still may have a symbol.
        if frames.last().is_none_or(|f| f.function.is_none()) {
            if let Some(name) = self.symbol(probe) {
                match frames.last_mut() {
                    Some(outer) => outer.function = Some(name),
                    None => frames.push(SourceFrame {
                        function: Some(name),
                        ..SourceFrame::default()
                    }),
                }
            }
        }
        frames
    }

    fn dwarf_frames(&self, probe: u64) -> Vec<SourceFrame> {
        let dwarf = self.dwarf.get_or_init(|| {
            let path = self.dwarf_path.as_ref()?;
            match Dwarf::open(path) {
                Ok(dwarf) => Some(Mutex::new(dwarf)),
                Err(e) => {
                    self.warn(format!("{}: cannot read its DWARF ({e})", path.display()));
                    None
                }
            }
        });
        let Some(dwarf) = dwarf else {
            return Vec::new();
        };
        let loader = dwarf.lock().unwrap_or_else(PoisonError::into_inner);
        let mut frames = Vec::new();
        let result = (|| -> Result<(), Box<dyn std::error::Error>> {
            let mut iter = loader.find_frames(probe)?;
            while let Some(frame) = iter.next()? {
                let function = match &frame.function {
                    Some(name) => Some(demangle(&name.raw_name()?, name.language)),
                    None => None,
                };
                let (file, line) = match &frame.location {
                    Some(l) => (l.file.map(str::to_owned), l.line),
                    None => (None, None),
                };
                frames.push(SourceFrame {
                    function,
                    file,
                    line,
                    inlined: true,
                });
            }
            Ok(())
        })();
        if let Err(e) = result {
            self.warn(format!(
                "{}: bad DWARF ({e}); those frames fall back to the symbol table",
                self.path
            ));
            frames.clear();
        }
        // Every frame but the outermost is an inlined call inside it.
        if let Some(outer) = frames.last_mut() {
            outer.inlined = false;
        }
        if frames.iter().all(|f| f.function.is_none() && f.file.is_none()) {
            frames.clear();
        }
        frames
    }

    fn symbol(&self, probe: u64) -> Option<String> {
        let path = self.symbols_path.as_ref()?;
        let table = self.symbols.get_or_init(|| match SymbolTable::read(path) {
            Ok(table) => table,
            Err(e) => {
                self.warn(format!("{}: cannot read its symbol table ({e})", path.display()));
                SymbolTable::default()
            }
        });
        table.find(probe).map(|name| demangle(name, None))
    }
}
