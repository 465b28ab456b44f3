//! Function symbols from `.symtab` and `.dynsym`, for code that has no DWARF: the main
//! executable built without `-g`, stripped system and vendor libraries.
//!
//! Unlike `addr2line::Loader::find_symbol`, a lookup honours the symbol's size: an address
//! past the end of the nearest exported function (a static function in a library that kept only
//! `.dynsym`) gets no name rather than a wrong one.

use std::fs::File;
use std::path::Path;

use object::read::ReadCache;
use object::{Object, ObjectSymbol, ObjectSymbolTable, SymbolKind};

/// The function symbols of one file, sorted by address.
#[derive(Debug, Default)]
pub(super) struct SymbolTable {
    entries: Vec<Entry>,
}

#[derive(Debug)]
struct Entry {
    address: u64,
    /// 0 when the symbol does not say (hand-written assembly): it then reaches to the next one.
    size: u64,
    name: Box<str>,
}

impl SymbolTable {
    /// Reads both symbol tables of the ELF file at `path`, through a read cache so that only
    /// the headers and the tables themselves are read, never the whole file.
    pub(super) fn read(path: &Path) -> Result<SymbolTable, String> {
        let file = File::open(path).map_err(|e| e.to_string())?;
        let cache = ReadCache::new(file);
        let object = object::File::parse(&cache).map_err(|e| e.to_string())?;
        let mut entries = Vec::new();
        let tables = [object.symbol_table(), object.dynamic_symbol_table()];
        for table in tables.into_iter().flatten() {
            for symbol in table.symbols() {
                if symbol.kind() != SymbolKind::Text || !symbol.is_definition() {
                    continue;
                }
                let Ok(name) = symbol.name() else { continue };
                if name.is_empty() || symbol.address() == 0 {
                    continue;
                }
                entries.push(Entry {
                    address: symbol.address(),
                    size: symbol.size(),
                    name: name.into(),
                });
            }
        }
        Ok(SymbolTable::from_entries(entries))
    }

    fn from_entries(mut entries: Vec<Entry>) -> SymbolTable {
        // At one address (aliases, and every .dynsym entry again in .symtab) keep the first
        // symbol that has a size: .symtab comes first and has the fuller names.
        entries.sort_by_key(|e| (e.address, e.size == 0));
        entries.dedup_by_key(|e| e.address);
        SymbolTable { entries }
    }

    /// The name of the function containing `probe` (an ELF virtual address).
    pub(super) fn find(&self, probe: u64) -> Option<&str> {
        let i = self.entries.partition_point(|e| e.address <= probe);
        let entry = self.entries.get(i.checked_sub(1)?)?;
        if entry.size != 0 && probe - entry.address >= entry.size {
            return None;
        }
        Some(&entry.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(entries: &[(u64, u64, &str)]) -> SymbolTable {
        let entries = entries
            .iter()
            .map(|&(address, size, name)| Entry {
                address,
                size,
                name: name.into(),
            })
            .collect();
        SymbolTable::from_entries(entries)
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
