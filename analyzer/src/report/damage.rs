//! What could not be read of a trace: records that did not decode, a file that shrank while it
//! was read, a trace with a header and no record. `gpuleak report` notes it and reports what
//! could be read; `gpuleak check` cannot vouch for such a trace and stops (exit 2).

use gpuleak_format::DecodeError;

use crate::model::LeakReplay;

/// What could not be read of one trace.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Damage {
    /// The first decoding error: its offset names the unreadable block or record.
    pub first_error: Option<DecodeError>,
    /// Decoding errors in all (each one a block, or the rest of a block, left unread).
    pub errors: u64,
    /// Records read.
    pub records: u64,
    /// The lowest offset gone from the file when it was read (it shrank while mapped); the
    /// bytes from there on read as zeros.
    pub missing_from: Option<u64>,
    /// The segment file of a segmented trace that holds the first decoding error, and the
    /// error's offset in it, when that is not the trace's first file.
    pub in_segment: Option<(std::path::PathBuf, u64)>,
}

impl Damage {
    /// What the replay of a trace could not read.
    pub fn of(replay: &LeakReplay) -> Damage {
        Damage {
            first_error: replay.errors.first().cloned(),
            errors: replay.error_count,
            records: replay.counts.records,
            missing_from: None,
            in_segment: None,
        }
    }

    /// Why the trace cannot be trusted whole, in one sentence naming the file offset; `None`
    /// when it was read whole and has records.
    pub fn problem(&self) -> Option<String> {
        if let Some(at) = self.missing_from {
            return Some(shrunk(at));
        }
        if let Some(e) = &self.first_error {
            let more = match self.errors {
                0 | 1 => String::new(),
                n => format!(" ({} more unreadable blocks or records after it)", n - 1),
            };
            let segment = match &self.in_segment {
                Some((path, at)) => format!(" (in segment {} at offset {at})", path.display()),
                None => String::new(),
            };
            return Some(format!("unreadable trace: {e}{segment}{more}"));
        }
        (self.records == 0).then(|| NO_RECORDS.to_string())
    }
}

/// The note for a trace with a header and nothing after it.
pub const NO_RECORDS: &str =
    "no records: the process made no CUDA call that was traced, or the trace was cut after its header";

/// The note for a file that shrank from `at` while it was read.
pub fn shrunk(at: u64) -> String {
    format!(
        "the file shrank while it was read: the bytes from offset {at} on were gone and read as \
         zeros (its process was still writing it, or another program truncated it); read it \
         again once its writer is done"
    )
}
