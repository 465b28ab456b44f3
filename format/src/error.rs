//! Decoding errors: what was wrong and at which byte of the file.

use std::fmt;

/// Why a trace could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// The file is empty.
    Empty,
    /// The file does not start with the gpuleak magic bytes.
    BadMagic,
    /// The file was written by a format version this reader does not know.
    UnsupportedVersion(u32),
    /// A header field has an impossible value.
    BadHeader(&'static str),
    /// A block header is neither empty nor valid.
    BadBlock,
    /// The data ends inside the named item.
    Truncated(&'static str),
    /// A varint is longer than ten bytes.
    BadVarint,
    /// A value does not fit the field it was decoded into.
    OutOfRange(u64),
    /// A string is not valid UTF-8.
    BadUtf8,
    /// A record's payload is shorter than its fields (a corrupted length).
    RecordOverrun,
    /// A known record kind carries a value its field cannot take.
    BadField(&'static str),
}

/// A decoding error with the absolute file offset where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError {
    /// Byte offset in the trace file.
    pub offset: u64,
    /// What was wrong.
    pub kind: ErrorKind,
}

impl DecodeError {
    /// An error of `kind` at `offset`.
    pub fn new(offset: u64, kind: ErrorKind) -> Self {
        DecodeError { offset, kind }
    }
}

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = self.offset;
        match &self.kind {
            ErrorKind::Empty => write!(
                f,
                "empty file, not a gpuleak trace: no header at offset {at} (its writer was stopped before writing one, or the file was emptied)"
            ),
            ErrorKind::BadMagic => write!(f, "not a gpuleak trace: bad magic bytes at offset {at}"),
            ErrorKind::UnsupportedVersion(v) => write!(
                f,
                "trace format version {v} at offset {at} is not supported by this gpuleak (it reads versions {}..={}); use a matching gpuleak release",
                crate::MIN_READ_VERSION,
                crate::FORMAT_VERSION
            ),
            ErrorKind::BadHeader(what) => write!(f, "corrupted trace header at offset {at}: {what}"),
            ErrorKind::BadBlock => write!(f, "corrupted block header at offset {at}"),
            ErrorKind::Truncated(what) => write!(f, "truncated trace: {what} at offset {at} runs past the end of the data"),
            ErrorKind::BadVarint => write!(f, "corrupted trace: overlong integer at offset {at}"),
            ErrorKind::OutOfRange(v) => write!(f, "corrupted trace: value {v} out of range at offset {at}"),
            ErrorKind::BadUtf8 => write!(f, "corrupted trace: string at offset {at} is not UTF-8"),
            ErrorKind::RecordOverrun => write!(f, "corrupted trace: record at offset {at} is longer than its stated length"),
            ErrorKind::BadField(what) => write!(f, "corrupted trace: invalid {what} at offset {at}"),
        }
    }
}

impl std::error::Error for DecodeError {}
