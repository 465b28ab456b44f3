//! The process's module map: which loaded object an address belongs to.

use std::collections::BTreeMap;

/// A loaded object, from a `Module` record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Module {
    /// Load bias: runtime address minus ELF virtual address.
    pub base: u64,
    /// Lowest mapped address.
    pub start: u64,
    /// One past the highest mapped address.
    pub end: u64,
    /// Path as the loader knows it.
    pub path: String,
    /// GNU build id (empty when the object has none).
    pub build_id: Vec<u8>,
}

impl Module {
    /// The file name without its directory.
    pub fn name(&self) -> &str {
        file_name(&self.path)
    }
}

/// The part of a path after its last `/`.
pub fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// Modules by start address; a later module replaces every earlier one it overlaps (a library
/// unloaded and another loaded in its place).
#[derive(Debug, Default, Clone)]
pub struct Modules {
    by_start: BTreeMap<u64, Module>,
    /// The Python code objects the trace describes: what names the Python frames of stacks
    /// (tagged pseudo-addresses, see [`crate::symbolize::python`]).
    pub python: crate::symbolize::python::PyCodes,
}

impl Modules {
    /// Adds a module, replacing those it overlaps.
    pub fn insert(&mut self, module: Module) {
        let overlapping: Vec<u64> = self
            .by_start
            .range(..module.end.max(module.start.saturating_add(1)))
            .filter(|(_, m)| m.end > module.start)
            .map(|(s, _)| *s)
            .collect();
        for s in overlapping {
            self.by_start.remove(&s);
        }
        self.by_start.insert(module.start, module);
    }

    /// Modules of 0x1000 bytes each at the given starts, by path (for tests).
    #[cfg(test)]
    pub(crate) fn of_paths(modules: &[(u64, &str)]) -> Modules {
        let mut out = Modules::default();
        for &(start, path) in modules {
            out.insert(Module {
                base: start,
                start,
                end: start + 0x1000,
                path: path.into(),
                build_id: Vec::new(),
            });
        }
        out
    }

    /// The module containing `address`.
    pub fn find(&self, address: u64) -> Option<&Module> {
        self.by_start
            .range(..=address)
            .next_back()
            .map(|(_, m)| m)
            .filter(|m| address < m.end)
    }

    /// Every module, by address.
    pub fn iter(&self) -> impl Iterator<Item = &Module> {
        self.by_start.values()
    }

    /// Number of modules.
    pub fn len(&self) -> usize {
        self.by_start.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.by_start.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn module(start: u64, end: u64, path: &str) -> Module {
        Module {
            base: start,
            start,
            end,
            path: path.into(),
            build_id: Vec::new(),
        }
    }

    #[test]
    fn addresses_find_their_module_and_later_modules_replace_overlapping_ones() {
        let mut m = Modules::default();
        m.insert(module(0x1000, 0x2000, "/lib/a.so"));
        m.insert(module(0x3000, 0x4000, "/lib/b.so"));
        assert_eq!(m.find(0x1fff).unwrap().name(), "a.so");
        assert!(m.find(0x2000).is_none());
        assert!(m.find(0xfff).is_none());
        m.insert(module(0x1800, 0x3800, "/lib/c.so"));
        assert_eq!(m.len(), 1);
        assert_eq!(m.find(0x1900).unwrap().name(), "c.so");
        assert!(m.find(0x1000).is_none());
    }
}
