//! Opening a trace file: mapped, not read, so memory follows what is used, not the size.

use std::fmt;
use std::fs::File;
use std::path::{Path, PathBuf};

use gpuleak_format::{DecodeError, Trace};

/// A trace on disk, mapped read-only.
pub struct TraceFile {
    path: PathBuf,
    map: Option<memmap2::Mmap>,
}

/// Why a trace could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// The file could not be read.
    Io(PathBuf, std::io::Error),
    /// The file is not a trace this version reads.
    Format(PathBuf, DecodeError),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            OpenError::Format(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

impl std::error::Error for OpenError {}

impl TraceFile {
    /// Maps `path` and checks its header.
    pub fn open(path: &Path) -> Result<TraceFile, OpenError> {
        let file = File::open(path).map_err(|e| OpenError::Io(path.to_owned(), e))?;
        let len = file.metadata().map_err(|e| OpenError::Io(path.to_owned(), e))?.len();
        let map = if len == 0 {
            None
        } else {
            // SAFETY: the map is read-only; a trace being appended to by a live process only
            // gains bytes, which the decoder treats like any other data it validates.
            Some(unsafe { memmap2::Mmap::map(&file) }.map_err(|e| OpenError::Io(path.to_owned(), e))?)
        };
        let t = TraceFile {
            path: path.to_owned(),
            map,
        };
        t.trace()?;
        Ok(t)
    }

    /// Opens every trace before anything is printed, so that an unreadable one stops a
    /// command with nothing half-written.
    pub fn open_all(paths: &[PathBuf]) -> Result<Vec<TraceFile>, OpenError> {
        paths.iter().map(|p| TraceFile::open(p)).collect()
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        self.map.as_deref().unwrap_or(&[])
    }

    /// A decoder over the file.
    pub fn trace(&self) -> Result<Trace<'_>, OpenError> {
        Trace::new(self.bytes()).map_err(|e| OpenError::Format(self.path.clone(), e))
    }
}
