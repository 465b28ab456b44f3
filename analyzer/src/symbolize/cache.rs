//! Resolved frames kept across runs, one small file per module build id: a report on a program
//! that runs again and again (`gpuleak run` after every run of a PyTorch script) names the
//! frames of `libtorch_cuda.so` without parsing its DWARF each time.
//!
//! A file is `DIR/<build id>.json`. It is used only when it names the same build id, the same
//! format version and the same files (path, size, modification time) that the symbolizer would
//! read now; anything else (a corrupt, truncated or foreign file, a debug dir added since) is a
//! miss, and the file is rewritten. Files are written whole under a temporary name and renamed,
//! so that concurrent reports never read half a file; when two write at once, the last wins.
//! Only modules whose symbols came without any warning are cached, so that the notes of a
//! report never depend on the cache.

use std::collections::HashMap;
use std::fs;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::UNIX_EPOCH;

use serde::{Deserialize, Serialize};

use super::files::hex;
use super::types::SourceFrame;

/// Raised whenever what a file holds, or how it is checked, changes.
const VERSION: u32 = 1;

/// Bounds on what is read back, so that a huge or hostile file is refused rather than loaded.
const MAX_FILE_BYTES: u64 = 64 << 20;

/// The directory that `GPULEAK_SYMBOL_CACHE` names: unset or empty, `$XDG_CACHE_HOME/gpuleak/symbols`
/// (else `$HOME/.cache/gpuleak/symbols`); `0` or `off`, none; anything else, that directory.
pub fn directory(
    setting: Option<&std::ffi::OsStr>,
    xdg: Option<&std::ffi::OsStr>,
    home: Option<&std::ffi::OsStr>,
) -> Option<PathBuf> {
    match setting.filter(|v| !v.is_empty()) {
        Some(v) if v == "0" || v == "off" => None,
        Some(v) => Some(PathBuf::from(v)),
        None => {
            let base = match (xdg.filter(|v| !v.is_empty()), home.filter(|v| !v.is_empty())) {
                (Some(xdg), _) => PathBuf::from(xdg),
                (None, Some(home)) => Path::new(home).join(".cache"),
                (None, None) => return None,
            };
            Some(base.join("gpuleak").join("symbols"))
        }
    }
}

/// What one cache file holds.
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    version: u32,
    build_id: String,
    sources: Vec<Source>,
    /// Probe (ELF virtual address looked up) and its frames, innermost first.
    entries: Vec<(u64, Vec<StoredFrame>)>,
}

/// A file the frames were read from, as it was then.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(super) struct Source {
    path: PathBuf,
    size: u64,
    modified_ns: u128,
}

impl Source {
    /// `path` as it is now; `None` when it cannot be examined.
    pub(super) fn of(path: &Path) -> Option<Source> {
        let meta = fs::metadata(path).ok()?;
        let modified_ns = meta.modified().ok()?.duration_since(UNIX_EPOCH).ok()?.as_nanos();
        Some(Source {
            path: path.to_path_buf(),
            size: meta.len(),
            modified_ns,
        })
    }
}

#[derive(Debug, Serialize, Deserialize)]
struct StoredFrame {
    function: Option<String>,
    file: Option<String>,
    line: Option<u32>,
    inlined: bool,
}

/// One module's cache: what was read back, and what this run added.
#[derive(Debug)]
pub(super) struct ModuleCache {
    path: PathBuf,
    build_id: String,
    sources: Vec<Source>,
    known: HashMap<u64, Vec<SourceFrame>>,
    added: usize,
}

impl ModuleCache {
    /// The cache of the module with `build_id` whose frames come from `sources`, read from
    /// `dir` when a valid file is there; empty otherwise.
    pub(super) fn open(dir: &Path, build_id: &[u8], sources: Vec<Source>) -> ModuleCache {
        let build_id = hex(build_id);
        let path = dir.join(format!("{build_id}.json"));
        let known = read(&path, &build_id, &sources).unwrap_or_default();
        ModuleCache {
            path,
            build_id,
            sources,
            known,
            added: 0,
        }
    }

    /// The frames cached for `probe`.
    pub(super) fn get(&self, probe: u64) -> Option<Vec<SourceFrame>> {
        self.known.get(&probe).cloned()
    }

    /// Remembers the frames of `probe`, to be written by [`ModuleCache::save`].
    pub(super) fn insert(&mut self, probe: u64, frames: &[SourceFrame]) {
        if self.known.insert(probe, frames.to_vec()).is_none() {
            self.added += 1;
        }
    }

    /// Writes the file when this run resolved addresses it did not hold. Errors are ignored: a
    /// cache that cannot be written costs time, never a report.
    pub(super) fn save(&self) {
        if self.added == 0 {
            return;
        }
        let _ = self.write();
    }

    fn write(&self) -> std::io::Result<()> {
        let mut entries: Vec<(u64, Vec<StoredFrame>)> = self
            .known
            .iter()
            .map(|(&probe, frames)| (probe, frames.iter().map(StoredFrame::from).collect()))
            .collect();
        entries.sort_by_key(|e| e.0);
        let stored = Stored {
            version: VERSION,
            build_id: self.build_id.clone(),
            sources: self.sources.clone(),
            entries,
        };
        let dir = self.path.parent().unwrap_or(Path::new("."));
        fs::create_dir_all(dir)?;
        let temporary = dir.join(format!(".{}.{}.tmp", self.build_id, std::process::id()));
        let result = (|| {
            let mut file = fs::File::create(&temporary)?;
            file.write_all(&serde_json::to_vec(&stored).map_err(std::io::Error::other)?)?;
            file.sync_data()?;
            fs::rename(&temporary, &self.path)
        })();
        if result.is_err() {
            let _ = fs::remove_file(&temporary);
        }
        result
    }
}

/// The entries of the file at `path`, when it is a valid cache of `build_id` read from
/// `sources`.
fn read(path: &Path, build_id: &str, sources: &[Source]) -> Option<HashMap<u64, Vec<SourceFrame>>> {
    let file = fs::File::open(path).ok()?;
    if file.metadata().ok()?.len() > MAX_FILE_BYTES {
        return None;
    }
    let stored: Stored = serde_json::from_reader(std::io::BufReader::new(file)).ok()?;
    if stored.version != VERSION || stored.build_id != build_id || stored.sources != sources {
        return None;
    }
    let entries = stored
        .entries
        .into_iter()
        .map(|(probe, frames)| (probe, frames.into_iter().map(SourceFrame::from).collect()))
        .collect();
    Some(entries)
}

impl From<&SourceFrame> for StoredFrame {
    fn from(f: &SourceFrame) -> StoredFrame {
        StoredFrame {
            function: f.function.clone(),
            file: f.file.clone(),
            line: f.line,
            inlined: f.inlined,
        }
    }
}

impl From<StoredFrame> for SourceFrame {
    fn from(f: StoredFrame) -> SourceFrame {
        SourceFrame {
            function: f.function,
            file: f.file,
            line: f.line,
            inlined: f.inlined,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsStr;

    #[test]
    fn directory_follows_the_setting_then_xdg_then_home() {
        let dir = |s: Option<&str>, x: Option<&str>, h: Option<&str>| {
            directory(s.map(OsStr::new), x.map(OsStr::new), h.map(OsStr::new))
        };
        assert_eq!(dir(Some("0"), Some("/x"), Some("/h")), None);
        assert_eq!(dir(Some("off"), None, Some("/h")), None);
        assert_eq!(dir(Some("/c"), Some("/x"), None), Some(PathBuf::from("/c")));
        assert_eq!(
            dir(None, Some("/x"), Some("/h")),
            Some(PathBuf::from("/x/gpuleak/symbols"))
        );
        assert_eq!(
            dir(Some(""), Some(""), Some("/h")),
            Some(PathBuf::from("/h/.cache/gpuleak/symbols"))
        );
        assert_eq!(dir(None, None, None), None);
    }

    fn frame(name: &str) -> SourceFrame {
        SourceFrame {
            function: Some(name.into()),
            file: Some("a.c".into()),
            line: Some(3),
            inlined: false,
        }
    }

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("gpuleak-cache-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        dir
    }

    fn source(size: u64) -> Source {
        Source {
            path: "/lib/libx.so".into(),
            size,
            modified_ns: 7,
        }
    }

    #[test]
    fn saved_frames_come_back_for_the_same_build_id_and_sources_only() {
        let dir = scratch("round-trip");
        let mut cache = ModuleCache::open(&dir, &[0xab, 0xcd], vec![source(10)]);
        assert!(cache.get(0x10).is_none());
        cache.insert(0x10, &[frame("f")]);
        cache.save();
        let again = ModuleCache::open(&dir, &[0xab, 0xcd], vec![source(10)]);
        assert_eq!(again.get(0x10).unwrap()[0].function.as_deref(), Some("f"));
        assert!(ModuleCache::open(&dir, &[0xab, 0xce], vec![source(10)])
            .get(0x10)
            .is_none());
        assert!(
            ModuleCache::open(&dir, &[0xab, 0xcd], vec![source(11)])
                .get(0x10)
                .is_none(),
            "a file changed since is not trusted"
        );
        let _ = fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_corrupt_or_foreign_file_is_ignored_and_replaced() {
        let dir = scratch("corrupt");
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("abcd.json");
        for junk in [&b"{\"version\": 1, \"build_id\": \"ab"[..], b"\x00\xff garbage", b"[]"] {
            fs::write(&path, junk).unwrap();
            let cache = ModuleCache::open(&dir, &[0xab, 0xcd], vec![source(10)]);
            assert!(cache.get(0x10).is_none());
        }
        // A well-formed file that claims another build id is not this module's.
        let mut other = ModuleCache::open(&dir, &[0x12, 0x34], vec![source(10)]);
        other.insert(0x10, &[frame("other")]);
        other.save();
        fs::rename(dir.join("1234.json"), &path).unwrap();
        let mut cache = ModuleCache::open(&dir, &[0xab, 0xcd], vec![source(10)]);
        assert!(cache.get(0x10).is_none());
        cache.insert(0x10, &[frame("mine")]);
        cache.save();
        let cache = ModuleCache::open(&dir, &[0xab, 0xcd], vec![source(10)]);
        assert_eq!(cache.get(0x10).unwrap()[0].function.as_deref(), Some("mine"));
        let _ = fs::remove_dir_all(&dir);
    }
}
