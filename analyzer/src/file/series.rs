//! The segments of a bounded trace, gathered into one [`TraceFile`] per trace.
//!
//! A bounded trace is a series of files sharing a trace id (the first keeps the name the shim
//! was given, the later ones add `-000001`, `-000002`...). Whatever order they were named in,
//! the segments of one trace are read as one process: the first segment present whole (its
//! checkpoint stands for the history deleted before it), each later one past its checkpoint,
//! in number order ([`gpuleak_format::series::order`]). A segment missing between two present
//! ones is an error naming the file after the gap: what it held is lost, and a report that
//! went on would be wrong about it.

use std::collections::HashMap;

use gpuleak_format::series::{order, SeriesError, SeriesErrorKind};
use gpuleak_format::{Segment, TraceId};

use super::{OpenError, TraceFile};

/// `files` with the segments of each trace gathered into one, at the place of the first of
/// them in the list; whole traces stay as they are. An error names the segment that cannot
/// follow the others of its trace.
pub fn group(files: Vec<TraceFile>) -> Result<Vec<TraceFile>, OpenError> {
    // Each place in the output: the trace id of its segments, or `None` for a whole trace.
    let mut slots: Vec<Option<TraceId>> = Vec::with_capacity(files.len());
    let mut series: HashMap<TraceId, Vec<(Segment, TraceFile)>> = HashMap::new();
    let mut out = Vec::with_capacity(files.len());
    let mut whole = Vec::new();
    for file in files {
        match file.trace()?.segment() {
            Some(s) => {
                let members = series.entry(s.trace_id).or_default();
                if members.is_empty() {
                    slots.push(Some(s.trace_id));
                }
                members.push((s, file));
            }
            None => {
                slots.push(None);
                whole.push(file);
            }
        }
    }
    let mut whole = whole.into_iter();
    for slot in slots {
        let Some(id) = slot else {
            // One pushed for each `None` slot, in order.
            out.extend(whole.next());
            continue;
        };
        let members = series.remove(&id).unwrap_or_default();
        out.extend(chain(members)?);
    }
    Ok(out)
}

/// The segments of one trace as one file: the lowest first, the others behind it in order.
fn chain(members: Vec<(Segment, TraceFile)>) -> Result<Option<TraceFile>, OpenError> {
    let numbers: Vec<Option<Segment>> = members.iter().map(|(s, _)| Some(*s)).collect();
    let sequence = order(&numbers).map_err(|e| OpenError::Series(members[e.at].1.path.clone(), e))?;
    let mut files: Vec<Option<TraceFile>> = members.into_iter().map(|(_, f)| Some(f)).collect();
    let mut in_order = sequence.into_iter().filter_map(|i| files[i].take());
    let Some(mut first) = in_order.next() else {
        return Ok(None);
    };
    // The first segment left stands for the history before it through its checkpoint (one
    // with no block at all, just created, stands for nothing yet).
    if let Some(seg) = first.trace()?.segment().filter(|s| s.number > 0) {
        let trace = first.trace()?;
        if trace.block_count() > 0 && !trace.checkpoint_blocks().1 {
            let e = SeriesError {
                at: 0,
                kind: SeriesErrorKind::Unfinished(seg.number),
            };
            return Err(OpenError::Series(first.path.clone(), e));
        }
    }
    first.later = in_order.collect();
    Ok(Some(first))
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use gpuleak_format::series::SeriesErrorKind;
    use gpuleak_format::{FileHeader, BLOCK_SIZE, FORMAT_VERSION, HEADER_SIZE};

    use super::*;

    use crate::file::tests::Dir;

    /// Writes a trace with a header only at `dir/name`: segment `(trace, number)`, or whole.
    fn write(dir: &Path, name: &str, segment: Option<(u64, u64)>) -> PathBuf {
        let mut h = [0u8; HEADER_SIZE];
        FileHeader {
            version: FORMAT_VERSION,
            block_size: BLOCK_SIZE as u32,
            pid: 1,
            start_unix_ns: 0,
        }
        .write(&mut h);
        if let Some((trace, number)) = segment {
            Segment {
                number,
                trace_id: TraceId(trace),
            }
            .write(&mut h);
        }
        let path = dir.join(name);
        std::fs::write(&path, h).unwrap();
        path
    }

    fn names(files: &[TraceFile]) -> Vec<Vec<String>> {
        let name = |f: &TraceFile| f.path().file_name().unwrap().to_string_lossy().into_owned();
        files
            .iter()
            .map(|f| std::iter::once(f).chain(f.later_segments()).map(name).collect())
            .collect()
    }

    #[test]
    fn segments_are_gathered_in_number_order_where_their_trace_is_first_named() {
        let d = Dir::new("group");
        let b2 = write(&d.0, "b.trace-000002", Some((2, 2)));
        let whole = write(&d.0, "whole.trace", None);
        let a1 = write(&d.0, "a.trace-000001", Some((1, 1)));
        let b3 = write(&d.0, "b.trace-000003", Some((2, 3)));
        let a0 = write(&d.0, "a.trace", Some((1, 0)));
        let files = [b3, whole, a1, b2, a0]
            .iter()
            .map(|p| TraceFile::open(p).unwrap())
            .collect();
        assert_eq!(
            names(&group(files).unwrap()),
            [
                vec!["b.trace-000002", "b.trace-000003"],
                vec!["whole.trace"],
                vec!["a.trace", "a.trace-000001"],
            ]
        );
        // Whole traces alone stay as they are.
        let lone = vec![TraceFile::open(&d.0.join("whole.trace")).unwrap()];
        assert_eq!(names(&group(lone).unwrap()), [vec!["whole.trace"]]);
    }

    #[test]
    fn a_gap_names_the_segment_after_it() {
        let d = Dir::new("gap");
        let files = [("x.trace", 0), ("x.trace-000002", 2)]
            .iter()
            .map(|(n, k)| TraceFile::open(&write(&d.0, n, Some((7, *k)))).unwrap())
            .collect();
        let Err(OpenError::Series(path, e)) = group(files) else {
            panic!("no error")
        };
        assert_eq!(path, d.0.join("x.trace-000002"));
        assert_eq!(e.kind, SeriesErrorKind::Missing { expected: 1, found: 2 });
    }

    #[test]
    fn a_segment_deleted_after_it_was_opened_still_groups_and_says_it_is_gone() {
        let d = Dir::new("deleted");
        let first = write(&d.0, "r.trace", Some((9, 0)));
        let second = write(&d.0, "r.trace-000001", Some((9, 1)));
        let whole = write(&d.0, "w.trace", None);
        let files: Vec<TraceFile> = [&first, &second, &whole]
            .iter()
            .map(|p| TraceFile::open(p).unwrap())
            .collect();
        assert!(files.iter().all(|f| !f.deleted_since_open()));
        // What the shim does to its oldest segment: the name first, then the blocks given back
        // (here overwritten with zeros, as a punched hole reads).
        let len = std::fs::metadata(&first).unwrap().len() as usize;
        let inode = std::fs::OpenOptions::new().write(true).open(&first).unwrap();
        std::fs::remove_file(&first).unwrap();
        std::os::unix::fs::FileExt::write_all_at(&inode, &vec![0u8; len], 0).unwrap();
        let grouped = group(files).unwrap();
        assert_eq!(names(&grouped), [vec!["r.trace", "r.trace-000001"], vec!["w.trace"]]);
        assert!(grouped[0].trace().is_ok(), "the header read at open stands");
        assert!(grouped[0].deleted_since_open());
        // A whole trace deleted by someone else is not a segment its writer deleted.
        std::fs::remove_file(&whole).unwrap();
        assert!(!grouped[1].deleted_since_open());
    }
}
