//! Which files hold a module's DWARF and symbols: the module's own file when its build id is the
//! recorded one, and otherwise (or when it has no DWARF) a separate debug file found the way gdb
//! finds them: `<dir>/.build-id/xx/yyyy….debug`, `<dir>/<basename>[.debug]` and the file named
//! by `.gnu_debuglink`. Every file used must carry the recorded build id.

use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

use object::Object;

use super::types::ModuleInfo;

/// Searched after the user's debug dirs, for the distributions' `-dbg`/`-debuginfo` packages.
pub(super) const SYSTEM_DEBUG_DIR: &str = "/usr/lib/debug";

/// Where a module's symbols come from.
#[derive(Debug, Default)]
pub(super) struct Files {
    /// The file whose DWARF describes the module.
    pub dwarf: Option<PathBuf>,
    /// The file whose symbol table names the module's functions (the fullest table found).
    pub symbols: Option<PathBuf>,
}

/// What the headers of one ELF file say.
struct Facts {
    build_id: Option<Vec<u8>>,
    has_dwarf: bool,
    /// 2: a `.symtab`; 1: only `.dynsym`; 0: no symbols.
    symbol_rank: u8,
    debuglink: Option<PathBuf>,
}

fn facts(path: &Path) -> io::Result<Facts> {
    let file = File::open(path)?;
    // Mapped rather than read through `object`'s `ReadCache`: parsing an ELF file reads its
    // symbol tables' entries (megabytes in a big library) into the cache, where a map only
    // touches the headers and notes asked for here.
    // SAFETY: memmap2's condition, that the file not change while mapped, is assumed, as for
    // the symbol table (`SymbolTable::read`): the map is read-only and never written through,
    // `object` bounds-checks every read, and a truncation would raise SIGBUS and end the
    // analyzer, the risk addr2line's loader takes for the same files. The map is dropped at the
    // end of this function, after the facts are copied out of it.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    // Headers at both ends of the file and a note: no read-ahead around them.
    let _ = map.advise(memmap2::Advice::Random);
    let object = object::File::parse(&map[..]).map_err(io::Error::other)?;
    let build_id = object.build_id().ok().flatten().map(<[u8]>::to_vec);
    let has_dwarf = object.section_by_name(".debug_info").is_some();
    let symbol_rank = if object.symbol_table().is_some() {
        2
    } else if object.dynamic_symbol_table().is_some() {
        1
    } else {
        0
    };
    let debuglink = object
        .gnu_debuglink()
        .ok()
        .flatten()
        .map(|(name, _crc)| bytes_path(name));
    Ok(Facts {
        build_id,
        has_dwarf,
        symbol_rank,
        debuglink,
    })
}

fn bytes_path(bytes: &[u8]) -> PathBuf {
    use std::os::unix::ffi::OsStrExt;
    PathBuf::from(std::ffi::OsStr::from_bytes(bytes))
}

/// Names that are not files: the vDSO as `dl_iterate_phdr` or `/proc/self/maps` names it.
pub(super) fn is_pseudo(path: &str) -> bool {
    path.is_empty() || path.starts_with('[') || path.starts_with("linux-vdso.so") || path.starts_with("linux-gate.so")
}

/// Finds the files for `module`, searching `debug_dirs` (the user's, then the system's) when the
/// module's own file is missing, was rebuilt, or has no DWARF. Problems go to `warnings`.
pub(super) fn find(
    module: &ModuleInfo,
    debug_dirs: &[PathBuf],
    sysroot: Option<&Path>,
    warnings: &mut Vec<String>,
) -> Files {
    let mut files = Files::default();
    let mut rank = 0;
    let recorded = (!module.build_id.is_empty()).then_some(&module.build_id[..]);
    let pseudo = is_pseudo(&module.path);
    let own_path = own_file(
        module.path.strip_suffix(" (deleted)").unwrap_or(&module.path),
        pseudo,
        sysroot,
    );
    let mut build_id = recorded.map(<[u8]>::to_vec);
    let mut debuglink = None;

    // Why the module's own file is of no use, when it is not.
    let mut problem = None;
    if !pseudo {
        match facts(&own_path) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {
                problem = Some("not found (deleted, or recorded on another machine)".to_owned())
            }
            Err(e) => problem = Some(format!("cannot read it ({e})")),
            Ok(f) if recorded.is_some() && f.build_id.as_deref() != recorded => {
                problem = Some(format!(
                    "was rebuilt since the trace was recorded (build id {}, the file has {})",
                    hex(recorded.unwrap_or_default()),
                    f.build_id.as_deref().map_or_else(|| "none".to_owned(), hex),
                ))
            }
            Ok(f) => {
                if build_id.is_none() {
                    build_id = f.build_id.clone();
                }
                debuglink = f.debuglink.clone();
                if f.symbol_rank > 0 {
                    files.symbols = Some(own_path.clone());
                    rank = f.symbol_rank;
                }
                if f.has_dwarf {
                    files.dwarf = Some(own_path.clone());
                    return files;
                }
            }
        }
    }

    for candidate in candidates(&own_path, pseudo, build_id.as_deref(), debuglink.as_deref(), debug_dirs) {
        if candidate == own_path || !candidate.is_file() {
            continue;
        }
        let f = match facts(&candidate) {
            Ok(f) => f,
            Err(e) => {
                warnings.push(format!("{}: cannot read it ({e}); ignored", candidate.display()));
                continue;
            }
        };
        if let Some(id) = &build_id {
            if f.build_id.as_deref() != Some(&id[..]) {
                warnings.push(format!(
                    "{}: not the debug file of {} (build id {}, wanted {}); ignored",
                    candidate.display(),
                    module.path,
                    f.build_id.as_deref().map_or_else(|| "none".to_owned(), hex),
                    hex(id),
                ));
                continue;
            }
        }
        if f.symbol_rank > rank {
            files.symbols = Some(candidate.clone());
            rank = f.symbol_rank;
        }
        if f.has_dwarf {
            files.dwarf = Some(candidate);
            break;
        }
    }

    let name = Path::new(module.path.strip_suffix(" (deleted)").unwrap_or(&module.path))
        .file_name()
        .map_or_else(|| module.path.clone(), |n| n.to_string_lossy().into_owned());
    let outcome = match (&files.dwarf, &files.symbols) {
        (Some(dwarf), _) => format!("its symbols come from {}", dwarf.display()),
        (None, Some(_)) if rank >= 2 => "no DWARF: no file:line (--debug-dir)".to_owned(),
        // A stripped library keeps only the dynamic symbol table: the functions it exports.
        (None, Some(_)) => "no DWARF, only exported functions named (--debug-dir)".to_owned(),
        (None, None) => "no symbols: frames show as module+offset".to_owned(),
    };
    match problem {
        Some(problem) => warnings.push(format!("{}: {problem}; {outcome}", module.path)),
        // The vDSO and other pseudo modules have no file to complain about.
        None if pseudo => {}
        None if files.dwarf.is_none() => warnings.push(format!("{name}: {outcome}")),
        None => {}
    }
    files
}

/// The module's own file: below the sysroot when it is there, else the recorded path.
fn own_file(path: &str, pseudo: bool, sysroot: Option<&Path>) -> PathBuf {
    if let (Some(root), false, Some(relative)) = (sysroot, pseudo, path.strip_prefix('/')) {
        let below = root.join(relative);
        if below.is_file() {
            return below;
        }
    }
    PathBuf::from(path)
}

/// Paths where a debug file of the module may be, best first, each once.
fn candidates(
    own_path: &Path,
    pseudo: bool,
    build_id: Option<&[u8]>,
    debuglink: Option<&Path>,
    debug_dirs: &[PathBuf],
) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let build_id_path = build_id.filter(|id| id.len() >= 2).map(|id| {
        let hex = hex(id);
        PathBuf::from(".build-id")
            .join(&hex[..2])
            .join(format!("{}.debug", &hex[2..]))
    });
    let basename = own_path.file_name().filter(|_| !pseudo);
    for dir in debug_dirs {
        if let Some(p) = &build_id_path {
            out.push(dir.join(p));
        }
        // The system dir (the host's, or a sysroot's) holds files for many programs: only
        // build ids name them reliably.
        let system = dir.ends_with(SYSTEM_DEBUG_DIR.trim_start_matches('/'));
        if let (Some(name), false) = (basename, system) {
            out.push(dir.join(name));
            let mut debug_name = name.to_owned();
            debug_name.push(".debug");
            out.push(dir.join(debug_name));
        }
    }
    if let (Some(link), Some(own_dir)) = (debuglink, own_path.parent()) {
        out.push(own_dir.join(link));
        out.push(own_dir.join(".debug").join(link));
        for dir in debug_dirs {
            // gdb's global layout: the module's directory below the debug dir.
            let relative = own_dir.strip_prefix("/").unwrap_or(own_dir);
            out.push(dir.join(relative).join(link));
            out.push(dir.join(link));
        }
    }
    let mut seen = HashSet::new();
    out.retain(|p| seen.insert(p.clone()));
    out
}

/// Lower-case hex, as build ids are written in paths and by `readelf -n`.
pub(super) fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidate_layout() {
        let dirs = [PathBuf::from("/dbg"), PathBuf::from(SYSTEM_DEBUG_DIR)];
        let got = candidates(
            Path::new("/opt/app/libfoo.so"),
            false,
            Some(&[0xab, 0xcd, 0xef]),
            Some(Path::new("libfoo.so.debug")),
            &dirs,
        );
        let got: Vec<_> = got.iter().map(|p| p.to_str().unwrap()).collect();
        assert_eq!(
            got,
            [
                "/dbg/.build-id/ab/cdef.debug",
                "/dbg/libfoo.so",
                "/dbg/libfoo.so.debug",
                "/usr/lib/debug/.build-id/ab/cdef.debug",
                "/opt/app/libfoo.so.debug",
                "/opt/app/.debug/libfoo.so.debug",
                "/dbg/opt/app/libfoo.so.debug",
                "/usr/lib/debug/opt/app/libfoo.so.debug",
                "/usr/lib/debug/libfoo.so.debug",
            ]
        );
    }

    #[test]
    fn pseudo_modules_are_only_looked_up_by_build_id() {
        let dirs = [PathBuf::from("/dbg")];
        let got = candidates(Path::new("linux-vdso.so.1"), true, Some(&[1, 2, 3]), None, &dirs);
        assert_eq!(got, [PathBuf::from("/dbg/.build-id/01/0203.debug")]);
        assert!(candidates(Path::new("linux-vdso.so.1"), true, None, None, &dirs).is_empty());
    }

    #[test]
    fn hex_is_lower_case() {
        assert_eq!(hex(&[0x00, 0x0f, 0xa0, 0xff]), "000fa0ff");
    }
}
