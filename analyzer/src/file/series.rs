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

use gpuleak_format::series::order;
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
    first.later = in_order.collect();
    Ok(Some(first))
}
