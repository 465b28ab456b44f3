//! The plain data the symbolizer's parts pass between them: a module as the trace's module map
//! records it, and a source frame before its module and address are attached.

/// A loaded object as the trace's module map records it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ModuleInfo {
    /// Load bias: runtime address minus ELF virtual address.
    pub base: u64,
    /// Lowest mapped address.
    pub start: u64,
    /// One past the highest mapped address.
    pub end: u64,
    /// Path as the loader knew it.
    pub path: String,
    /// GNU build id; empty when the object had none (no check is then possible).
    pub build_id: Vec<u8>,
}

impl From<&gpuleak_format::Module<'_>> for ModuleInfo {
    fn from(m: &gpuleak_format::Module<'_>) -> ModuleInfo {
        ModuleInfo {
            base: m.base,
            start: m.start,
            end: m.end,
            path: m.path.clone().into_owned(),
            build_id: m.build_id.clone().into_owned(),
        }
    }
}

/// A source frame before the module's name and the address are attached.
#[derive(Debug, Default, Clone)]
pub(super) struct SourceFrame {
    pub function: Option<String>,
    pub file: Option<String>,
    pub line: Option<u32>,
    pub inlined: bool,
}
