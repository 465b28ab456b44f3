//! A module's DWARF, read in place from its mapped file: addr2line's `Context` over sections
//! that borrow the map, so that only the pages of the units a lookup needs are ever read.
//!
//! This replaces `addr2line::Loader`, which does the same but also builds a sorted map of the
//! whole symbol table when it opens a file (hundreds of thousands of names read and sorted for a
//! library such as `libtorch_cuda.so`); the symbolizer has its own index of symbols
//! (`symbol_table.rs`), built only for modules that need it. Split DWARF is read as the loader
//! reads it: a `.dwp` package beside the file first, then each unit's `.dwo` file.

use std::fs::File;
use std::ops::Deref;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use addr2line::gimli;
use addr2line::gimli::Reader as _;
use addr2line::{Context, FrameIter, LookupContinuation, LookupResult, SplitDwarfLoad};
use object::{Object, ObjectSection};

/// The bytes of one section: a range of the mapped file, or the section decompressed.
#[derive(Debug, Clone)]
pub(super) struct SectionBytes {
    file: Arc<Backing>,
    start: usize,
    end: usize,
}

#[derive(Debug)]
enum Backing {
    Mapped(memmap2::Mmap),
    Owned(Vec<u8>),
}

impl Deref for SectionBytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        let all: &[u8] = match &*self.file {
            Backing::Mapped(map) => map,
            Backing::Owned(bytes) => bytes,
        };
        &all[self.start..self.end]
    }
}

// SAFETY: the bytes live in an `Arc`'d map or vector that is never moved, grown or written
// while any `SectionBytes` holds it, so a deref gives the same address for as long as the value
// (or any clone, which shares the `Arc`) lives: what gimli's `EndianReader` requires.
unsafe impl gimli::StableDeref for SectionBytes {}
// SAFETY: as above; a clone shares the same `Arc` and range, so it derefs to the same bytes.
unsafe impl gimli::CloneStableDeref for SectionBytes {}

/// What reading a file's DWARF can fail with.
type Error = Box<dyn std::error::Error + Send + Sync>;

/// The reader of every section.
pub(super) type Reader = gimli::EndianReader<gimli::RunTimeEndian, SectionBytes>;

/// One mapped file and the means to slice its sections.
struct Mapped {
    map: Arc<Backing>,
}

impl Mapped {
    fn open(path: &Path) -> Result<Mapped, Error> {
        let file = File::open(path)?;
        // SAFETY: memmap2's condition, that the file not change while mapped, is assumed, as
        // for the symbol table (`SymbolTable::read`): the map is read-only and never written
        // through, gimli and object bounds-check every read, and a truncation would raise
        // SIGBUS and end the analyzer, the risk addr2line's loader takes for the same files. The
        // map is kept in an `Arc` for as long as any section slice of it lives.
        let map = unsafe { memmap2::Mmap::map(&file) }?;
        // No `Advice::Random`: it cuts what a cold report reads of a large library ninefold
        // (no read-ahead around each unit header), but the units asked are then read a page
        // per fault, and on the local disk measured that was slower (docs/performance.md).
        Ok(Mapped {
            map: Arc::new(Backing::Mapped(map)),
        })
    }

    fn bytes(&self) -> &[u8] {
        match &*self.map {
            Backing::Mapped(map) => map,
            Backing::Owned(bytes) => bytes,
        }
    }

    /// The DWARF of this file (`dwo`: the `.dwo` names of a split-DWARF file or package).
    fn dwarf(&self, dwo: bool) -> Result<gimli::Dwarf<Reader>, Error> {
        let object = object::File::parse(self.bytes())?;
        let endian = if object.is_little_endian() {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        };
        gimli::Dwarf::load(|id| {
            let name = if dwo { id.dwo_name() } else { Some(id.name()) };
            self.section(&object, name, endian)
        })
    }

    fn package(&self) -> Result<gimli::DwarfPackage<Reader>, Error> {
        let object = object::File::parse(self.bytes())?;
        let endian = if object.is_little_endian() {
            gimli::RunTimeEndian::Little
        } else {
            gimli::RunTimeEndian::Big
        };
        let empty = self.slice(0, 0, endian);
        gimli::DwarfPackage::load(|id| self.section(&object, id.dwo_name(), endian), empty)
    }

    fn section(
        &self,
        object: &object::File<'_>,
        name: Option<&str>,
        endian: gimli::RunTimeEndian,
    ) -> Result<Reader, Error> {
        let Some(section) = name.and_then(|name| object.section_by_name(name)) else {
            return Ok(self.slice(0, 0, endian));
        };
        let compressed = section.compressed_file_range()?;
        if compressed.format == object::CompressionFormat::None {
            let start = usize::try_from(compressed.offset)?;
            let size = usize::try_from(compressed.uncompressed_size)?;
            let end = start.checked_add(size).filter(|&end| end <= self.bytes().len());
            let Some(end) = end else {
                let name = section.name().unwrap_or("?");
                return Err(format!("section {name} runs past the end of the file").into());
            };
            return Ok(self.slice(start, end, endian));
        }
        // A compressed section is decompressed whole: there is no reading part of it.
        let bytes = section.uncompressed_data()?.into_owned();
        let end = bytes.len();
        Ok(gimli::EndianReader::new(
            SectionBytes {
                file: Arc::new(Backing::Owned(bytes)),
                start: 0,
                end,
            },
            endian,
        ))
    }

    fn slice(&self, start: usize, end: usize, endian: gimli::RunTimeEndian) -> Reader {
        gimli::EndianReader::new(
            SectionBytes {
                file: self.map.clone(),
                start,
                end,
            },
            endian,
        )
    }
}

/// The DWARF of one module, for lookups; units are parsed as lookups reach them.
pub(super) struct Dwarf {
    context: Context<Reader>,
    package: Option<gimli::DwarfPackage<Reader>>,
}

impl Dwarf {
    /// Maps the file at `path` and reads the headers of its units (not their contents).
    pub(super) fn open(path: &Path) -> Result<Dwarf, Error> {
        let mapped = Mapped::open(path)?;
        let mut dwarf = mapped.dwarf(false)?;
        dwarf.populate_abbreviations_cache(gimli::AbbreviationsCacheStrategy::Duplicates);
        let context = Context::from_dwarf(dwarf)?;
        let package = package_path(path)
            .and_then(|p| Mapped::open(&p).ok())
            .and_then(|m| m.package().ok());
        Ok(Dwarf { context, package })
    }

    /// The frames at `probe`, innermost first, loading split-DWARF files as needed.
    pub(super) fn find_frames(&self, probe: u64) -> Result<FrameIter<'_, Reader>, gimli::Error> {
        let mut lookup = self.context.find_frames(probe);
        loop {
            match lookup {
                LookupResult::Output(output) => return output,
                LookupResult::Load { load, continuation } => {
                    let dwo = self.load_dwo(&load);
                    lookup = continuation.resume(dwo);
                }
            }
        }
    }

    /// The split unit `load` asks for, from the package or its `.dwo` file; `None` when neither
    /// has it (the unit then gives what the skeleton says).
    fn load_dwo(&self, load: &SplitDwarfLoad<Reader>) -> Option<Arc<gimli::Dwarf<Reader>>> {
        if let Some(package) = &self.package {
            if let Ok(Some(unit)) = package.find_cu(load.dwo_id, &load.parent) {
                return Some(Arc::new(unit));
            }
        }
        let mut path = PathBuf::new();
        if let Some(dir) = &load.comp_dir {
            path.push(bytes_path(&dir.to_slice().ok()?));
        }
        path.push(bytes_path(&load.path.as_ref()?.to_slice().ok()?));
        let mut dwarf = Mapped::open(&path).ok()?.dwarf(true).ok()?;
        let header = dwarf.units().next().ok()??;
        let unit = dwarf.unit(header).ok()?;
        if unit.dwo_id != Some(load.dwo_id) {
            return None;
        }
        dwarf.make_dwo(&load.parent);
        Some(Arc::new(dwarf))
    }
}

/// `libfoo.so.dwp` beside `libfoo.so` (`app.dwp` beside `app`), as the loader looks for it.
fn package_path(path: &Path) -> Option<PathBuf> {
    let mut name = path.file_name()?.to_os_string();
    if path.extension().is_none() {
        name = path.file_stem()?.to_os_string();
    }
    name.push(".dwp");
    let candidate = path.with_file_name(name);
    candidate.is_file().then_some(candidate)
}

fn bytes_path(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
}
