//! Function symbols from `.symtab` and `.dynsym`, for code that has no DWARF: the main
//! executable built without `-g`, stripped system and vendor libraries.
//!
//! Unlike `addr2line::Loader::find_symbol`, a lookup honours the symbol's size: an address
//! past the end of the nearest exported function (a static function in a library that kept only
//! `.dynsym`) gets no name rather than a wrong one.

use std::fs::File;
use std::ops::Range;
use std::path::Path;

use object::elf::{FileHeader32, FileHeader64, SHN_LORESERVE, SHN_UNDEF, SHN_XINDEX, SHT_DYNSYM, SHT_SYMTAB, STT_FUNC};
use object::read::elf::{FileHeader, SectionHeader, Sym};
use object::{Endianness, FileKind};

/// The function symbols of one file, sorted by address.
///
/// Only addresses, sizes and name offsets are kept: a library such as `libtorch_cuda.so` has
/// hundreds of thousands of symbols and tens of MB of names, of which a report shows a few.
/// The names stay in the mapped file and are read when found.
#[derive(Debug, Default)]
pub(super) struct SymbolTable {
    bytes: Bytes,
    entries: Vec<Entry>,
    /// The string tables of `.symtab` (0) and `.dynsym` (1), as ranges of `bytes`.
    strings: [Range<usize>; 2],
}

#[derive(Debug, Default)]
enum Bytes {
    #[default]
    None,
    Mapped(memmap2::Mmap),
    #[cfg(test)]
    Owned(Vec<u8>),
}

impl Bytes {
    fn get(&self) -> &[u8] {
        match self {
            Bytes::None => &[],
            Bytes::Mapped(map) => map,
            #[cfg(test)]
            Bytes::Owned(v) => v,
        }
    }
}

#[derive(Debug)]
struct Entry {
    address: u64,
    /// 0 when the symbol does not say (hand-written assembly): it then reaches to the next one.
    size: u64,
    /// Offset of the name in its string table.
    name: u32,
    /// Which string table: 0 `.symtab`'s, 1 `.dynsym`'s.
    table: u8,
}

impl SymbolTable {
    /// Indexes both symbol tables of the ELF file at `path`. The file is mapped, and only the
    /// symbol entries are read: names are read from the map when a lookup finds them.
    pub(super) fn read(path: &Path) -> Result<SymbolTable, String> {
        let file = File::open(path).map_err(|e| e.to_string())?;
        // SAFETY: memmap2's condition, that the file not change while mapped, is assumed, not
        // enforced: a library or debug file is not expected to change during a report (one
        // rebuilt before it was refused when its build id differed from the trace's, where the
        // trace recorded one). Were it changed anyway: the map is read-only and never written
        // through, and every read here bounds-checks the bytes like any data; a truncation would
        // raise SIGBUS and end the analyzer (not one of the guard's mappings), the risk
        // addr2line's loader takes for the DWARF of the same file. The map lives in the table.
        let map = unsafe { memmap2::Mmap::map(&file) }.map_err(|e| e.to_string())?;
        let (entries, strings) = match FileKind::parse(&map[..]).map_err(|e| e.to_string())? {
            FileKind::Elf32 => index::<FileHeader32<Endianness>>(&map)?,
            FileKind::Elf64 => index::<FileHeader64<Endianness>>(&map)?,
            kind => return Err(format!("not an ELF file ({kind:?})")),
        };
        Ok(SymbolTable::from_entries(Bytes::Mapped(map), entries, strings))
    }

    fn from_entries(bytes: Bytes, mut entries: Vec<Entry>, strings: [Range<usize>; 2]) -> SymbolTable {
        // At one address (aliases, and every .dynsym entry again in .symtab) keep the first
        // symbol that has a size: .symtab comes first and has the fuller names.
        entries.sort_by_key(|e| (e.address, e.size == 0));
        entries.dedup_by_key(|e| e.address);
        SymbolTable {
            bytes,
            entries,
            strings,
        }
    }

    /// The name of the function containing `probe` (an ELF virtual address).
    pub(super) fn find(&self, probe: u64) -> Option<&str> {
        let i = self.entries.partition_point(|e| e.address <= probe);
        let entry = self.entries.get(i.checked_sub(1)?)?;
        if entry.size != 0 && probe - entry.address >= entry.size {
            return None;
        }
        let table = self.bytes.get().get(self.strings[usize::from(entry.table)].clone())?;
        let name = table.get(usize::try_from(entry.name).ok()?..)?;
        let name = &name[..name.iter().position(|&b| b == 0)?];
        std::str::from_utf8(name).ok().filter(|n| !n.is_empty())
    }
}

/// The function definitions of both symbol tables of an ELF file, and where their string tables
/// are. Only the entries are read, not the names.
type Index = (Vec<Entry>, [Range<usize>; 2]);

fn index<Elf: FileHeader<Endian = Endianness>>(data: &[u8]) -> Result<Index, String> {
    let header = Elf::parse(data).map_err(|e| e.to_string())?;
    let endian = header.endian().map_err(|e| e.to_string())?;
    let sections = header.sections(endian, data).map_err(|e| e.to_string())?;
    let mut entries = Vec::new();
    let mut strings = [0..0, 0..0];
    for (table_id, kind) in [(0u8, SHT_SYMTAB), (1, SHT_DYNSYM)] {
        let table = sections.symbols(endian, data, kind).map_err(|e| e.to_string())?;
        if table.is_empty() {
            continue;
        }
        let names = sections.section(table.string_section()).map_err(|e| e.to_string())?;
        let Some((offset, size)) = names.file_range(endian) else {
            continue;
        };
        let start = usize::try_from(offset).map_err(|e| e.to_string())?;
        let end = start.saturating_add(usize::try_from(size).map_err(|e| e.to_string())?);
        strings[usize::from(table_id)] = start.min(data.len())..end.min(data.len());
        for symbol in table.symbols() {
            // What `object` counts as a defined function (`SymbolKind::Text` and
            // `is_definition`): an STT_FUNC in a real section.
            let section = symbol.st_shndx(endian);
            if symbol.st_type() != STT_FUNC
                || section == SHN_UNDEF
                || (section >= SHN_LORESERVE && section != SHN_XINDEX)
            {
                continue;
            }
            let address: u64 = symbol.st_value(endian).into();
            let name = symbol.st_name(endian);
            if address == 0 || name == 0 {
                continue;
            }
            entries.push(Entry {
                address,
                size: symbol.st_size(endian).into(),
                name,
                table: table_id,
            });
        }
    }
    Ok((entries, strings))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table over a string table of its own, as `.symtab`'s.
    fn table(entries: &[(u64, u64, &str)]) -> SymbolTable {
        let mut names = vec![0u8];
        let entries = entries
            .iter()
            .map(|&(address, size, name)| {
                let offset = names.len() as u32;
                names.extend_from_slice(name.as_bytes());
                names.push(0);
                Entry {
                    address,
                    size,
                    name: offset,
                    table: 0,
                }
            })
            .collect();
        let strings = [0..names.len(), 0..0];
        SymbolTable::from_entries(Bytes::Owned(names), entries, strings)
    }

    #[test]
    fn lookup_honours_sizes() {
        let t = table(&[(0x2000, 0x10, "b"), (0x1000, 0x100, "a"), (0x3000, 0, "asm")]);
        assert_eq!(t.find(0xfff), None);
        assert_eq!(t.find(0x1000), Some("a"));
        assert_eq!(t.find(0x10ff), Some("a"));
        assert_eq!(t.find(0x1100), None, "past the end of a, before b");
        assert_eq!(t.find(0x200f), Some("b"));
        assert_eq!(t.find(0x2010), None);
        assert_eq!(t.find(0x9999), Some("asm"), "an unsized symbol reaches on");
    }

    #[test]
    fn aliases_prefer_a_sized_symbol() {
        let t = table(&[(0x1000, 0, "alias"), (0x1000, 0x20, "real")]);
        assert_eq!(t.find(0x1010), Some("real"));
        assert_eq!(t.find(0x1020), None);
    }
}
