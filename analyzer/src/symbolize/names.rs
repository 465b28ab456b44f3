//! Function names as people read them in a report: demangled, without C++ parameter lists and
//! return types, and without the hash that Rust's legacy mangling appends.
//!
//! The parameter list is dropped because file and line already tell overloads apart and
//! framework signatures (PyTorch, cuBLAS) run to hundreds of characters.

use addr2line::gimli;
use cpp_demangle::DemangleOptions;

/// Demangles `raw`, a linkage name from DWARF (whose unit's `language` is known) or from a
/// symbol table (`None`: guessed from the name). Names that are not mangled come back as they
/// are.
pub(super) fn demangle(raw: &str, language: Option<gimli::DwLang>) -> String {
    let demangled = match language {
        Some(gimli::DW_LANG_Rust) => rust(raw).map(|(name, _)| name),
        Some(lang) if is_cpp(lang) => cpp(raw),
        // C, Fortran, CUDA and unknown units may still carry C++ or Rust linkage names.
        _ => guess(raw),
    };
    demangled.unwrap_or_else(|| raw.to_owned())
}

/// Rust first, because a Rust legacy name (`_ZN...17h<hash>E`) is also a valid C++ name that
/// would demangle with the hash as a last path element.
fn guess(raw: &str) -> Option<String> {
    if let Some((name, hashed)) = rust(raw) {
        if hashed || raw.starts_with("_R") {
            return Some(name);
        }
    }
    if raw.starts_with("_Z") {
        return cpp(raw);
    }
    None
}

/// The path without its hash, and whether the name had one (which marks it as Rust's).
fn rust(raw: &str) -> Option<(String, bool)> {
    let d = rustc_demangle::try_demangle(raw).ok()?;
    let short = format!("{d:#}");
    let hashed = format!("{d}") != short;
    Some((short, hashed))
}

fn cpp(raw: &str) -> Option<String> {
    let symbol = cpp_demangle::Symbol::new(raw.as_bytes()).ok()?;
    let options = DemangleOptions::new().no_params().no_return_type();
    symbol.demangle_with_options(&options).ok()
}

fn is_cpp(lang: gimli::DwLang) -> bool {
    matches!(
        lang,
        gimli::DW_LANG_C_plus_plus
            | gimli::DW_LANG_C_plus_plus_03
            | gimli::DW_LANG_C_plus_plus_11
            | gimli::DW_LANG_C_plus_plus_14
            | gimli::DW_LANG_C_plus_plus_17
            | gimli::DW_LANG_C_plus_plus_20
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rust_legacy_name_loses_its_hash() {
        let raw = "_ZN7mycrate6module8function17h0123456789abcdefE";
        assert_eq!(demangle(raw, None), "mycrate::module::function");
        assert_eq!(demangle(raw, Some(gimli::DW_LANG_Rust)), "mycrate::module::function");
    }

    #[test]
    fn rust_v0_name() {
        assert_eq!(demangle("_RNvCs1234_7mycrate8function", None), "mycrate::function");
    }

    #[test]
    fn cpp_name_loses_parameters() {
        let raw = "_ZN2ns6WidgetIiE4growEm";
        assert_eq!(demangle(raw, None), "ns::Widget<int>::grow");
        assert_eq!(
            demangle(raw, Some(gimli::DW_LANG_C_plus_plus_14)),
            "ns::Widget<int>::grow"
        );
    }

    #[test]
    fn cpp_name_without_hash_is_not_taken_for_rust() {
        // A valid legacy-Rust shape, but no hash: C++ `ns::foo()`.
        assert_eq!(demangle("_ZN2ns3fooEv", None), "ns::foo");
    }

    #[test]
    fn plain_names_stay() {
        assert_eq!(demangle("cuMemAlloc_v2", None), "cuMemAlloc_v2");
        assert_eq!(demangle("main", Some(gimli::DW_LANG_C99)), "main");
        assert_eq!(demangle("grow", Some(gimli::DW_LANG_C_plus_plus)), "grow");
    }
}
