//! Which streams are capturing, following a capture across streams.
//!
//! A capture begins on one stream (`cuStreamBeginCapture`) and ends on it
//! (`cuStreamEndCapture`). An event recorded on a capturing stream records nothing the host or
//! another capture can wait for: it marks the event as the capture's, and a stream that waits
//! for it joins the capture (its work builds the same graph instead of running) until the
//! capture ends, which releases every stream that joined. This is how a capture forks work onto
//! other streams (PyTorch's side streams and NCCL's inside `torch.cuda.graph`, say).
//!
//! ```
//! use gpuleak_format::captures::Captures;
//!
//! let mut c = Captures::default();
//! c.begin(1u64);
//! c.record(0xe, 1, 0);
//! c.wait(2, 0xe, 0);
//! assert!(c.is_capturing(&2));
//! c.end(1);
//! assert!(!c.is_capturing(&2));
//! ```

use std::collections::HashMap;
use std::hash::Hash;

/// `CU_EVENT_RECORD_EXTERNAL` and `CU_EVENT_WAIT_EXTERNAL` (both 1): in a capture, an event
/// record or wait node of the graph instead of the capture's own use of the event.
pub const EXTERNAL: u32 = 1;

/// The capturing streams (named by `K`) and the events recorded in their captures.
#[derive(Debug)]
pub struct Captures<K> {
    /// Each capturing stream, with the id of its capture.
    streams: HashMap<K, u64>,
    /// Each event last recorded in a capture still under way, with that capture's id.
    events: HashMap<u64, u64>,
    /// The last capture id given.
    last: u64,
}

impl<K> Default for Captures<K> {
    fn default() -> Self {
        Captures {
            streams: HashMap::new(),
            events: HashMap::new(),
            last: 0,
        }
    }
}

impl<K: Copy + Eq + Hash> Captures<K> {
    /// A capture began on `stream`.
    pub fn begin(&mut self, stream: K) {
        self.last += 1;
        self.streams.insert(stream, self.last);
    }

    /// The capture `stream` is in ended: every stream in it stops capturing, and its events
    /// are no capture's any more.
    pub fn end(&mut self, stream: K) {
        if let Some(id) = self.streams.get(&stream).copied() {
            self.streams.retain(|_, c| *c != id);
            self.events.retain(|_, c| *c != id);
        }
    }

    /// `event` was recorded on `stream` with `flags`: in its capture if it is capturing, else
    /// outside any. A record with [`EXTERNAL`] in a capture is an event record node of the
    /// graph (recorded when the graph runs), not a fork of the capture: it changes nothing here.
    pub fn record(&mut self, event: u64, stream: K, flags: u32) {
        if flags & EXTERNAL != 0 {
            return;
        }
        match self.streams.get(&stream) {
            Some(&id) => {
                self.events.insert(event, id);
            }
            None => {
                self.events.remove(&event);
            }
        }
    }

    /// `stream` waited for `event` with `flags`: it joins the capture the event was recorded
    /// in, if any (a wait with [`EXTERNAL`], an event wait node of a capture, joins nothing).
    pub fn wait(&mut self, stream: K, event: u64, flags: u32) {
        if flags & EXTERNAL != 0 {
            return;
        }
        if let Some(&id) = self.events.get(&event) {
            self.streams.entry(stream).or_insert(id);
        }
    }

    /// `stream` was destroyed: whatever capture it was in, it is in none now (a stream made
    /// later with the same handle starts outside any).
    pub fn forget(&mut self, stream: K) {
        self.streams.remove(&stream);
    }

    /// Whether work on `stream` is captured rather than run.
    pub fn is_capturing(&self, stream: &K) -> bool {
        self.streams.contains_key(stream)
    }

    /// The capture `stream` is in (an id unique in the trace), if any.
    pub fn capture_of(&self, stream: &K) -> Option<u64> {
        self.streams.get(stream).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_capture_s_event_joins_until_the_end_and_an_ordinary_record_does_not() {
        let mut c = Captures::default();
        c.begin(1u64);
        c.begin(10);
        c.record(0xe, 1, 0);
        c.record(0xf, 10, 0);
        c.wait(2, 0xe, 0);
        c.wait(3, 0xf, 0);
        assert!(c.is_capturing(&2) && c.is_capturing(&3));
        // Ending the first capture releases only the streams in it.
        c.end(1);
        assert!(!c.is_capturing(&1) && !c.is_capturing(&2));
        assert!(c.is_capturing(&10) && c.is_capturing(&3));
        // Its event is no capture's any more.
        c.wait(4, 0xe, 0);
        assert!(!c.is_capturing(&4));
        // Recorded again outside a capture, an event joins nothing.
        c.record(0xf, 5, 0);
        c.wait(6, 0xf, 0);
        assert!(!c.is_capturing(&6));
        // A destroyed stream is in no capture; the capture goes on for the others.
        c.forget(3);
        assert!(!c.is_capturing(&3) && c.is_capturing(&10));
        assert_eq!((c.capture_of(&10), c.capture_of(&3)), (Some(2), None));
        // External records and waits are graph nodes: no fork, no join.
        c.record(0xd, 10, EXTERNAL);
        c.wait(7, 0xd, EXTERNAL);
        c.wait(8, 0xd, 0);
        assert!(!c.is_capturing(&7) && !c.is_capturing(&8));
    }
}
