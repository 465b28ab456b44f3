//! Opening traces: files mapped, not read, so memory follows what is used, not the size; and
//! directories of traces (a multi-process or multi-rank run) expanded to the traces in them.
//!
//! [`TraceFile::records`] merges a trace's blocks by sequence number exactly as
//! [`gpuleak_format::Trace::records`] does, record for record and error for error, with one
//! difference: the mapped pages it has finished with go back to the kernel as it goes (the
//! format's reader, which only sees bytes, finds every block's header first, and that alone
//! maps the whole file: the kernel maps a block around each header it touches).
//!
//! Only regular files are opened (a FIFO would block the reader forever, a device would be read
//! without end), and a file that shrinks while it is mapped reads as zeros past its new end
//! instead of killing the process with SIGBUS ([`guard`]); [`TraceFile::missing_from`] says
//! where.
//!
//! The segments of a bounded trace ([`gpuleak_format::series`]) are one process:
//! [`TraceFile::open_all`] gives the first segment present, with the later ones behind it
//! ([`series`]), and [`TraceFile::records`] reads them as one trace.

pub mod guard;
pub mod series;

use std::collections::HashSet;
use std::fmt;
use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::Arc;

use gpuleak_format::series::MergeBySeq;
use gpuleak_format::{DecodeError, Entry, FileHeader, Merged, Opened, Segment, Trace, MAGIC};

use guard::GuardedMap;

/// A trace on disk, mapped read-only.
pub struct TraceFile {
    path: PathBuf,
    bytes: Bytes,
    /// The header as read at open (a segment deleted since reads as zeros).
    header: FileHeader,
    segment: Option<Segment>,
    /// The file's device and inode, to tell whether its name still leads to it.
    id: (u64, u64),
    /// The later segments of the same trace, in order, when this file is a segment.
    later: Vec<TraceFile>,
}

/// Where a trace's bytes are.
enum Bytes {
    /// An empty file.
    Empty,
    /// Mapped, guarded against the file shrinking.
    Mapped(GuardedMap),
    /// Read into memory (when no guarded mapping could be made).
    Read(Vec<u8>),
}

/// Where the file at `path`, mapped as `bytes`, was cut while mapped ([`TraceFile::missing_from`]).
fn cut_at(bytes: &Bytes, path: &Path) -> Option<u64> {
    let Bytes::Mapped(m) = bytes else { return None };
    // The guard knows the first page it found gone; the file's length now says where in (or
    // before) that page the cut is.
    let page = m.missing_from()?;
    let now = std::fs::metadata(path).map_or(page, |m| m.len());
    Some(page.min(now))
}

/// Why a trace could not be opened.
#[derive(Debug)]
pub enum OpenError {
    /// The file (or directory) could not be read.
    Io(PathBuf, std::io::Error),
    /// The file is not a trace this version reads.
    Format(PathBuf, DecodeError),
    /// A directory given as a trace holds no trace file.
    NoTraces(PathBuf),
    /// The path names something other than a regular file (what it is).
    NotRegular(PathBuf, &'static str),
    /// The file shrank while it was opened: its header is gone (from the offset given).
    Shrunk(PathBuf, u64),
    /// The file is a segment that cannot be read after the others of its trace (one before
    /// it is missing, or two have its number).
    Series(PathBuf, gpuleak_format::series::SeriesError),
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Io(p, e) => write!(f, "{}: {e}", p.display()),
            OpenError::Format(p, e) => write!(f, "{}: {e}", p.display()),
            OpenError::NoTraces(p) => write!(
                f,
                "{}: no gpuleak trace in this directory (a trace is a file that starts with \
                 the bytes \"GPULEAK\\0\"; subdirectories are not searched)",
                p.display()
            ),
            OpenError::NotRegular(p, what) => write!(
                f,
                "{}: not a regular file ({what}); a gpuleak trace is a file written by \
                 libgpuleak.so (copy a trace out of a pipe into a file first)",
                p.display()
            ),
            OpenError::Shrunk(p, at) => write!(
                f,
                "{}: the file shrank to less than {at} bytes while it was opened (another \
                 program truncated it); open it again once its writer is done",
                p.display()
            ),
            OpenError::Series(p, e) => write!(f, "{}: {e}", p.display()),
        }
    }
}

impl std::error::Error for OpenError {}

/// What a file that is not a regular file is, for [`OpenError::NotRegular`].
fn kind_of(file_type: std::fs::FileType) -> &'static str {
    if file_type.is_dir() {
        "a directory"
    } else if file_type.is_fifo() {
        "a FIFO"
    } else if file_type.is_char_device() {
        "a character device"
    } else if file_type.is_block_device() {
        "a block device"
    } else if file_type.is_socket() {
        "a socket"
    } else {
        "not a file"
    }
}

impl TraceFile {
    /// Maps `path` and checks its header. Anything but a regular file is refused before it
    /// is read (opening does not wait for a FIFO's writer).
    pub fn open(path: &Path) -> Result<TraceFile, OpenError> {
        let io = |e| OpenError::Io(path.to_owned(), e);
        let file = File::options()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(path)
            .map_err(io)?;
        let meta = file.metadata().map_err(io)?;
        if !meta.file_type().is_file() {
            return Err(OpenError::NotRegular(path.to_owned(), kind_of(meta.file_type())));
        }
        let bytes = if meta.len() == 0 {
            Bytes::Empty
        } else {
            match GuardedMap::new(&file).map_err(io)? {
                Some(map) => Bytes::Mapped(map),
                None => {
                    let mut read = Vec::new();
                    (&file).read_to_end(&mut read).map_err(io)?;
                    Bytes::Read(read)
                }
            }
        };
        let checked = match &bytes {
            Bytes::Empty => Trace::new(&[]),
            Bytes::Mapped(m) => Trace::new(m.bytes()),
            Bytes::Read(v) => Trace::new(v),
        }
        .map(|t| (*t.header(), t.segment()));
        let (header, segment) = match checked {
            Ok(h) => h,
            Err(e) => {
                return Err(match cut_at(&bytes, path) {
                    Some(at) => OpenError::Shrunk(path.to_owned(), at),
                    None => OpenError::Format(path.to_owned(), e),
                });
            }
        };
        Ok(TraceFile {
            path: path.to_owned(),
            bytes,
            header,
            segment,
            id: (meta.dev(), meta.ino()),
            later: Vec::new(),
        })
    }

    /// Whether this segment of a bounded trace, or one of its later segments, is no longer the
    /// file its name leads to: deleted (or replaced) since it was opened. The shim deletes a
    /// bounded trace's oldest segment by its name first and only then gives its blocks back,
    /// so a file whose name still leads to it after it was read was read whole. Whole traces
    /// are never deleted by their writer: always `false` for them.
    pub fn deleted_since_open(&self) -> bool {
        if self.segment.is_none() {
            return false;
        }
        let gone = |f: &TraceFile| std::fs::metadata(&f.path).map_or(true, |m| (m.dev(), m.ino()) != f.id);
        gone(self) || self.later.iter().any(gone)
    }

    /// Opens every trace named by `paths` (each a trace, or a directory of traces, see
    /// [`expand`]) before anything is printed, so that an unreadable one stops a command with
    /// nothing half-written. The segments of one trace come back as one [`TraceFile`], where
    /// the first of them was named ([`series::group`]).
    pub fn open_all(paths: &[PathBuf]) -> Result<Vec<TraceFile>, OpenError> {
        // A bounded trace still being written may delete (and zero) a segment while it is
        // read: if a segment read is gone by the time the series is checked, read again.
        for _ in 0..4 {
            match Self::open_all_once(paths) {
                Err(OpenError::Series(path, _)) if !path.exists() => continue,
                done => return done,
            }
        }
        Self::open_all_once(paths)
    }

    fn open_all_once(paths: &[PathBuf]) -> Result<Vec<TraceFile>, OpenError> {
        let mut files = Vec::new();
        for p in expand(paths)? {
            match TraceFile::open(&p) {
                Ok(f) => files.push(f),
                // Found in a directory and gone since: a bounded trace still being written
                // deleted its oldest segment (the next one stands for it).
                Err(OpenError::Io(_, e)) if e.kind() == std::io::ErrorKind::NotFound && !paths.contains(&p) => {}
                // Deleted while being opened (its blocks read as zeros by then).
                Err(OpenError::Format(..)) if !p.exists() && !paths.contains(&p) => {}
                Err(e) => return Err(e),
            }
        }
        series::group(files)
    }

    /// `files` with the segments of each bounded trace gathered into one ([`open_all`] does
    /// this for what it opens).
    ///
    /// [`open_all`]: Self::open_all
    pub fn group(files: Vec<TraceFile>) -> Result<Vec<TraceFile>, OpenError> {
        series::group(files)
    }

    /// The file and the offset in it of `offset` in this file and its later segments taken
    /// end to end (the offsets [`records`](Self::records) gives); past the end, the last.
    pub fn locate(&self, offset: u64) -> (&Path, u64) {
        let mut at = offset;
        let mut file = self;
        for next in &self.later {
            if at < file.own_len() {
                break;
            }
            at -= file.own_len();
            file = next;
        }
        (&file.path, at)
    }

    /// The later segments read after this one, in order (none for a whole trace).
    pub fn later_segments(&self) -> &[TraceFile] {
        &self.later
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        match &self.bytes {
            Bytes::Empty => &[],
            Bytes::Mapped(m) => m.bytes(),
            Bytes::Read(v) => v,
        }
    }

    /// Where the file was cut, when it shrank while it was mapped and the reading went past
    /// its new end (its process was trimming it at exit, or another program truncated it); the
    /// bytes from there on read as zeros.
    pub fn missing_from(&self) -> Option<u64> {
        cut_at(&self.bytes, &self.path)
    }

    /// The bytes to read: the file's length, with its later segments'.
    pub fn len(&self) -> u64 {
        self.own_len() + self.later.iter().map(TraceFile::own_len).sum::<u64>()
    }

    /// This file's own length.
    fn own_len(&self) -> u64 {
        self.bytes().len() as u64
    }

    /// Whether there is nothing to read.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A decoder over the file.
    ///
    /// The header is the one read at open: a file deleted since (its blocks given back, reading
    /// as zeros) reads as a trace whose blocks were never started, not as something else.
    pub fn trace(&self) -> Result<Trace<'_>, OpenError> {
        Ok(Trace::with_header(self.bytes(), self.header, self.segment))
    }

    /// Every record of the trace, ordered by `seq`, as [`Trace::records`] gives them (a
    /// corrupted block yields one error and is dropped; the other blocks go on), handing the
    /// pages of the file back to the kernel every `release_every` bytes of progress (pages up
    /// to `lag` bytes behind the furthest record read stay, for the blocks still open). Then
    /// the records of each later segment past its checkpoint ([`Trace::records_past_checkpoint`]),
    /// which follow on from this file's; their offsets count the segments end to end
    /// ([`locate`](Self::locate) finds the file).
    pub fn records(&self, release_every: u64, lag: u64) -> Result<Records<'_>, OpenError> {
        let trace = self.trace()?;
        let mut released = 0;
        // The merge reads every block header first: without releasing as it goes, that scan
        // alone would keep the whole file resident.
        let merged = trace.records_with(|at| {
            if at >= released + release_every {
                self.release_before(at);
                released = at;
            }
        });
        self.release_before(self.own_len());
        let mut streams = vec![FileRecords::new(self, merged, 0, release_every, lag)];
        let mut base = self.own_len();
        for segment in &self.later {
            // `open` checked every segment's header; one that fails now (it shrank to nothing)
            // adds no record.
            if let Ok(trace) = segment.trace() {
                let merged = trace.records_past_checkpoint();
                segment.release_before(segment.own_len());
                streams.push(FileRecords::new(segment, merged, base, release_every, lag));
            }
            base += segment.own_len();
        }
        Ok(Records(if streams.len() == 1 {
            Parts::One(Box::new(streams.remove(0)))
        } else {
            Parts::Series(MergeBySeq::new(streams), None)
        }))
    }

    /// Lets the kernel drop the mapped pages before `offset` from this process's memory, so
    /// that reading a trace from start to end does not keep the whole file resident. Reading
    /// those bytes again still works: the pages come back from the file.
    pub fn release_before(&self, offset: u64) {
        const PAGE: u64 = 4096;
        let Bytes::Mapped(map) = &self.bytes else { return };
        let map = map.map();
        let end = (offset.min(map.len() as u64) / PAGE * PAGE) as usize;
        if end == 0 {
            return;
        }
        // SAFETY: [0, end) lies inside the map (end <= its length, rounded down to a page).
        // The map is memmap2's shared read-only mapping of the file, never written through, so
        // it holds no private copy of anything: MADV_DONTNEED only drops this process's page
        // table entries, and the next access faults the file's page-cache page back in (the
        // same bytes), or, past a cut, the guard's anonymous zero pages in again as zeros. No
        // reference sees changed contents (beyond what a file modified underneath a mapping
        // shows anyway, as `GuardedMap::new` says).
        let _ = unsafe { map.unchecked_advise_range(memmap2::UncheckedAdvice::DontNeed, 0, end) };
    }
}

/// The records of a trace in `seq` order; see [`TraceFile::records`]: the format reader's merge
/// of each file, handing pages back behind it, and the files' streams merged by `seq`.
pub struct Records<'a>(Parts<'a>);

/// A whole trace, or the segments of a bounded one.
enum Parts<'a> {
    One(Box<FileRecords<'a>>),
    /// With the record handed out last.
    Series(MergeBySeq<'a, FileRecords<'a>>, Option<Entry<'a>>),
}

impl<'a> Records<'a> {
    /// The next record, lent where the reader decoded it (in a whole trace: a record is 144
    /// bytes, and copying it from layer to layer was about a quarter of a report's time), or the next
    /// error. The [`Iterator`] gives a copy of the same.
    pub fn next_ref(&mut self) -> Option<Result<&Entry<'a>, DecodeError>> {
        match &mut self.0 {
            Parts::One(file) => file.next_mut().map(|r| r.map(|e| &*e)),
            Parts::Series(merge, held) => match merge.next()? {
                Ok(e) => Some(Ok(held.insert(e))),
                Err(e) => Some(Err(e)),
            },
        }
    }
}

impl<'a> Records<'a> {
    /// Appends the next records and errors to `out` until it holds `max` or the records end
    /// (false when nothing was added), in the order of [`next_ref`](Self::next_ref); a whole
    /// trace hands over runs of records as they were decoded ([`Merged::next_batch`]): hand
    /// the emptied buffers back with [`give_back`](Self::give_back).
    pub fn next_batch(&mut self, out: &mut Vec<Result<Entry<'a>, DecodeError>>, max: usize) -> bool {
        match &mut self.0 {
            Parts::One(file) => file.next_batch(out, max),
            Parts::Series(..) => {
                let start = out.len();
                while out.len() < max {
                    let Some(r) = self.next_ref() else { break };
                    out.push(r.cloned());
                }
                out.len() > start
            }
        }
    }

    /// For threads that open and decode blocks ahead of the merge: a whole trace's blocks in
    /// the order the merge opens them, the trace to open them from, and the number of records
    /// to decode of each ([`Merged::run_hint`]); then hand the opened blocks over in that
    /// order with [`decode_ahead`](Self::decode_ahead). `None` for the segments of a bounded
    /// trace (read as they are).
    pub fn ahead_plan(&self) -> Option<(Trace<'a>, Vec<usize>, Arc<AtomicUsize>)> {
        match &self.0 {
            Parts::One(file) => {
                let trace = file.file.trace().ok()?;
                Some((trace, file.merged.admission_order(), file.merged.run_hint()))
            }
            Parts::Series(..) => None,
        }
    }

    /// See [`ahead_plan`](Self::ahead_plan) and [`Merged::decode_ahead`].
    pub fn decode_ahead(&mut self, next: impl FnMut() -> Option<Opened<'a>> + Send + 'a) {
        if let Parts::One(file) = &mut self.0 {
            file.merged.decode_ahead(next);
        }
    }

    /// Takes back a buffer emptied after [`next_batch`](Self::next_batch), to decode into.
    pub fn give_back(&mut self, run: Vec<Result<Entry<'a>, DecodeError>>) {
        if let Parts::One(file) = &mut self.0 {
            file.merged.give_back(run);
        }
    }
}

impl<'a> Iterator for Records<'a> {
    type Item = Result<Entry<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_ref().map(|r| r.cloned())
    }
}

/// One file's records, their offsets counted from the start of the first segment.
pub struct FileRecords<'a> {
    file: &'a TraceFile,
    merged: Merged<'a>,
    release_every: u64,
    lag: u64,
    furthest: u64,
    released: u64,
    /// Where the file starts, the segments before it taken end to end.
    base: u64,
    ended: bool,
}

impl<'a> FileRecords<'a> {
    fn new(file: &'a TraceFile, merged: Merged<'a>, base: u64, release_every: u64, lag: u64) -> Self {
        FileRecords {
            file,
            merged,
            release_every,
            lag,
            furthest: 0,
            released: 0,
            base,
            ended: false,
        }
    }
}

impl<'a> FileRecords<'a> {
    /// The next record (lent, see [`Merged::next_mut`]) or error.
    fn next_mut(&mut self) -> Option<Result<&mut Entry<'a>, DecodeError>> {
        if self.ended {
            return None;
        }
        match self.merged.next_mut() {
            Some(Ok(e)) => {
                self.furthest = self.furthest.max(e.offset);
                if self.furthest >= self.released + self.release_every + self.lag {
                    self.released = self.furthest - self.lag;
                    self.file.release_before(self.released);
                }
                e.offset += self.base;
                Some(Ok(e))
            }
            Some(Err(mut e)) => {
                e.offset += self.base;
                Some(Err(e))
            }
            None => {
                self.ended = true;
                self.file.release_before(self.file.own_len());
                None
            }
        }
    }
}

impl<'a> FileRecords<'a> {
    /// [`Records::next_batch`] of this file: offsets rebased, pages handed back as
    /// [`next_mut`](Self::next_mut) does.
    fn next_batch(&mut self, out: &mut Vec<Result<Entry<'a>, DecodeError>>, max: usize) -> bool {
        if self.ended {
            return false;
        }
        let start = out.len();
        if !self.merged.next_batch(out, max) {
            self.ended = true;
            self.file.release_before(self.file.own_len());
            return false;
        }
        // The furthest record read, for handing pages back: the batch's last (a run handed
        // over whole is in file order; one put together from several blocks may end a little
        // behind its furthest, which only hands pages back a little later).
        if let Some(Ok(e)) = out[start..].iter().rev().find(|r| r.is_ok()) {
            self.furthest = self.furthest.max(e.offset);
        }
        if self.base != 0 {
            for r in &mut out[start..] {
                match r {
                    Ok(e) => e.offset += self.base,
                    Err(e) => e.offset += self.base,
                }
            }
        }
        if self.furthest >= self.released + self.release_every + self.lag {
            self.released = self.furthest - self.lag;
            self.file.release_before(self.released);
        }
        true
    }
}

impl<'a> Iterator for FileRecords<'a> {
    type Item = Result<Entry<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_mut().map(|r| r.map(|e| e.clone()))
    }
}

/// The trace files that `paths` name, in order: a file stands for itself; a directory for
/// every trace file directly in it (recognised by the magic bytes at its start, whatever its
/// name; other files, subdirectories and special files are passed over), sorted by name. A
/// file named twice (itself and through its directory) is taken once, where first named.
///
/// A directory without any trace is an error, as is one that cannot be listed, or a file in
/// it that cannot be read to tell whether it is a trace.
pub fn expand(paths: &[PathBuf]) -> Result<Vec<PathBuf>, OpenError> {
    let mut out = Vec::with_capacity(paths.len());
    for path in paths {
        if !path.is_dir() {
            out.push(path.clone());
            continue;
        }
        let io = |e| OpenError::Io(path.clone(), e);
        let mut found = Vec::new();
        for entry in std::fs::read_dir(path).map_err(io)? {
            let entry = entry.map_err(io)?;
            let file = entry.path();
            // Follows symbolic links, as a trace named on the command line would be.
            match std::fs::metadata(&file) {
                Ok(m) if m.is_file() => {}
                Ok(_) => continue,
                // A dangling link is no trace.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(OpenError::Io(file, e)),
            }
            if is_trace(&file)? {
                found.push(file);
            }
        }
        if found.is_empty() {
            return Err(OpenError::NoTraces(path.clone()));
        }
        found.sort();
        out.extend(found);
    }
    let mut seen = HashSet::new();
    out.retain(|p| seen.insert(std::fs::canonicalize(p).unwrap_or_else(|_| p.clone())));
    Ok(out)
}

/// Whether the regular file at `path` starts with a trace's magic bytes.
fn is_trace(path: &Path) -> Result<bool, OpenError> {
    let mut head = [0u8; MAGIC.len()];
    let mut file = match File::open(path) {
        Ok(f) => f,
        // Listed and deleted since (a bounded trace's oldest segment).
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(OpenError::Io(path.to_owned(), e)),
    };
    let mut filled = 0;
    while filled < head.len() {
        match file.read(&mut head[filled..]) {
            Ok(0) => return Ok(false),
            Ok(n) => filled += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(OpenError::Io(path.to_owned(), e)),
        }
    }
    Ok(head == MAGIC)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A fresh directory under the system's temporary directory, removed on drop.
    pub(crate) struct Dir(pub(crate) PathBuf);

    impl Dir {
        pub(crate) fn new(name: &str) -> Dir {
            let path = std::env::temp_dir().join(format!("gpuleak-file-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&path);
            std::fs::create_dir(&path).unwrap();
            Dir(path)
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn header() -> Vec<u8> {
        let mut h = [0u8; gpuleak_format::HEADER_SIZE];
        gpuleak_format::FileHeader {
            version: gpuleak_format::FORMAT_VERSION,
            block_size: gpuleak_format::BLOCK_SIZE as u32,
            pid: 1,
            start_unix_ns: 0,
        }
        .write(&mut h);
        h.to_vec()
    }

    #[test]
    fn a_directory_stands_for_its_traces_by_content_not_name_sorted() {
        let d = Dir::new("expand");
        std::fs::write(d.0.join("b.bin"), header()).unwrap();
        std::fs::write(d.0.join("a.trace"), header()).unwrap();
        std::fs::write(d.0.join("notes.trace"), b"not a trace, whatever its name").unwrap();
        std::fs::write(d.0.join("short"), b"GPU").unwrap();
        std::fs::write(d.0.join("empty"), b"").unwrap();
        std::fs::create_dir(d.0.join("sub")).unwrap();
        std::fs::write(d.0.join("sub").join("c.trace"), header()).unwrap();
        std::os::unix::fs::symlink(d.0.join("gone"), d.0.join("dangling")).unwrap();

        let all = expand(std::slice::from_ref(&d.0)).unwrap();
        assert_eq!(all, [d.0.join("a.trace"), d.0.join("b.bin")]);
        // Named again, by itself or through the directory: taken once, where first named.
        let twice = expand(&[d.0.join("b.bin"), d.0.clone()]).unwrap();
        assert_eq!(twice, [d.0.join("b.bin"), d.0.join("a.trace")]);
        assert_eq!(TraceFile::open_all(std::slice::from_ref(&d.0)).unwrap().len(), 2);
    }

    #[test]
    fn a_directory_without_traces_is_an_error_naming_it() {
        let d = Dir::new("empty");
        std::fs::write(d.0.join("README"), b"hello").unwrap();
        let e = expand(std::slice::from_ref(&d.0)).unwrap_err();
        assert!(matches!(e, OpenError::NoTraces(_)));
        assert!(
            e.to_string()
                .starts_with(&format!("{}: no gpuleak trace", d.0.display())),
            "{e}"
        );
    }

    #[test]
    fn records_are_the_format_reader_s_record_for_record_and_error_for_error() {
        let d = Dir::new("records");
        let path = d.0.join("t");
        crate::report::load::tests::write_trace(&path, 7, 60_000);
        let mut bytes = std::fs::read(&path).unwrap();
        let block = gpuleak_format::BLOCK_SIZE;
        let blocks = (bytes.len() - gpuleak_format::HEADER_SIZE) / block;
        assert!(blocks >= 8, "{blocks} blocks");
        // A block's header, and the middle of another's records.
        let at = gpuleak_format::HEADER_SIZE + 2 * block;
        bytes[at..at + 4].copy_from_slice(b"XXXX");
        let at = gpuleak_format::HEADER_SIZE + 5 * block + 20_000;
        bytes[at..at + 40].fill(0xfe);
        std::fs::write(&path, &bytes).unwrap();

        let t = TraceFile::open(&path).unwrap();
        let expected: Vec<_> = t.trace().unwrap().records().collect();
        assert!(expected.iter().filter(|r| r.is_err()).count() >= 2);
        // Handing pages back at every block changes nothing.
        let got: Vec<_> = t.records(block as u64, 0).unwrap().collect();
        assert!(got == expected, "{} records against {}", got.len(), expected.len());
        let got: Vec<_> = t.records(32 << 20, 8 << 20).unwrap().collect();
        assert!(got == expected);
        // So do batches, handed back or not, pages handed back at every block.
        for (max, give_back) in [(4096, true), (100, false), (1, true)] {
            let mut records = t.records(block as u64, 0).unwrap();
            let (mut got, mut batch) = (Vec::new(), Vec::new());
            while records.next_batch(&mut batch, max) {
                got.append(&mut batch);
                if give_back {
                    records.give_back(std::mem::take(&mut batch));
                }
            }
            assert!(
                got == expected,
                "batches of {max}: {} records against {}",
                got.len(),
                expected.len()
            );
        }
    }

    #[test]
    fn a_trace_cut_after_it_was_opened_reads_what_is_left_without_sigbus() {
        let d = Dir::new("cut");
        let path = d.0.join("t");
        crate::report::load::tests::write_trace(&path, 7, 60_000);
        let whole = std::fs::metadata(&path).unwrap().len();
        let t = TraceFile::open(&path).unwrap();
        assert_eq!(t.missing_from(), None);
        // What the shim does at exit to a trace still being read, or any other program.
        let cut = whole / 2 + 1000;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(cut)
            .unwrap();
        let records: Vec<_> = t.records(1 << 20, 0).unwrap().collect();
        assert!(
            records.iter().filter(|r| r.is_ok()).count() > 1000,
            "the first half was read"
        );
        let gone = t.missing_from().expect("the cut was seen");
        assert_eq!(gone, cut);
        assert_eq!(t.len(), whole, "the rest reads as zeros");

        let report = crate::report::from_file(&t, &crate::report::Options::default());
        assert_eq!(report.damage.missing_from, Some(gone));
        let why = report.damage.problem().unwrap();
        assert!(
            why.contains("shrank") && why.contains(&format!("offset {gone}")),
            "{why}"
        );
        assert!(report.notes[0].contains("shrank"), "{:?}", report.notes);

        // Cut to nothing, header included: an error that says so, not a bad trace.
        let t = TraceFile::open(&path).unwrap();
        std::fs::File::create(&path).unwrap();
        let report = crate::report::from_file(&t, &crate::report::Options::default());
        assert_eq!(report.damage.missing_from, Some(0));
    }

    #[test]
    fn only_regular_files_are_opened_and_a_fifo_does_not_block() {
        let d = Dir::new("special");
        let fifo = d.0.join("fifo");
        let name = std::ffi::CString::new(fifo.as_os_str().as_encoded_bytes()).unwrap();
        // SAFETY: `name` is a NUL-terminated path that lives across the call; mkfifo only
        // reads it.
        assert_eq!(unsafe { libc::mkfifo(name.as_ptr(), 0o600) }, 0);
        // On a thread: a regression blocks in open() until a writer comes, which none will.
        let (tx, rx) = std::sync::mpsc::channel();
        let opening = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(TraceFile::open(&opening).err().map(|e| e.to_string()));
        });
        let e = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("opening a FIFO must not wait for a writer");
        assert_eq!(
            e.unwrap(),
            format!(
                "{}: not a regular file (a FIFO); a gpuleak trace is a file written by \
                 libgpuleak.so (copy a trace out of a pipe into a file first)",
                fifo.display()
            )
        );
        let e = TraceFile::open(Path::new("/dev/zero")).err().unwrap().to_string();
        assert!(
            e.starts_with("/dev/zero: not a regular file (a character device)"),
            "{e}"
        );
        let e = TraceFile::open(&d.0).err().unwrap().to_string();
        assert!(e.ends_with("not a regular file (a directory); a gpuleak trace is a file written by libgpuleak.so (copy a trace out of a pipe into a file first)"), "{e}");
    }

    #[test]
    fn an_empty_file_and_a_small_one_are_not_traces() {
        let d = Dir::new("small");
        let empty = d.0.join("empty");
        std::fs::write(&empty, b"").unwrap();
        let e = TraceFile::open(&empty).err().unwrap().to_string();
        assert!(e.contains("empty file, not a gpuleak trace"), "{e}");
        let small = d.0.join("small");
        std::fs::write(&small, b"hi\n").unwrap();
        let e = TraceFile::open(&small).err().unwrap().to_string();
        assert!(e.contains("not a gpuleak trace: bad magic bytes at offset 0"), "{e}");
    }

    #[test]
    fn released_pages_read_back_the_same_bytes() {
        let d = Dir::new("release");
        let path = d.0.join("t");
        let mut bytes = header();
        bytes.extend((0..3 * 4096u32).map(|i| i as u8));
        std::fs::write(&path, &bytes).unwrap();
        let t = TraceFile::open(&path).unwrap();
        let before = t.bytes().to_vec();
        t.release_before(t.len());
        t.release_before(5000);
        assert_eq!(t.bytes(), &before[..]);
    }
}
