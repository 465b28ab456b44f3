//! A framework's caching allocator seen from inside: record kinds 70 to 76.
//!
//! The Python package reads the allocator's state (PyTorch: `torch.cuda.memory._snapshot()`)
//! and hands each record's fields, encoded as [`crate::fields`] describes, to the shim's
//! `gpuleak_framework_record(kind, data, len)`. The shim decodes them with [`parse`] before it
//! writes anything, so that a bad payload is refused and never reaches the trace.
//!
//! ```text
//! FrameworkState  id layout framework reason snapshot     the state begins
//! FrameworkSegment state device address size stream pool  one per segment
//! FrameworkBlocks  state segment [offset size requested state frames]*   a segment's blocks
//! FrameworkFrames  id state [file function]* [line]*      an interned Python stack
//! FrameworkStats   state device allocated reserved peak_reserved
//! FrameworkOom     state device requested device_allocated device_free
//! FrameworkEnd     state segments blocks                  the state is complete
//! ```
//!
//! Readers use a state only once its `FrameworkEnd` is read; one without (the process died
//! while writing it) is ignored. `layout` is [`LAYOUT`]; a later layout may append fields.
//!
//! A segment at address 0 and of size 0 is unplaced: its blocks' offsets are their absolute
//! addresses (0: unknown), and the analyzer lays them into the driver allocations that hold
//! them. JAX writes its buffers so, because XLA's allocator regions are invisible to Python.
//!
//! ```
//! use gpuleak_format::framework::parse;
//! use gpuleak_format::{Body, FrameworkEnd};
//!
//! // state 1, 2 segments, 9 blocks: three varints
//! let body = parse(FrameworkEnd::KIND, &[1, 2, 9]).unwrap();
//! assert_eq!(body, Body::FrameworkEnd(FrameworkEnd { state: 1, segments: 2, blocks: 9 }));
//! assert!(parse(FrameworkEnd::KIND, &[1, 2]).is_err());
//! ```

use crate::error::{DecodeError, ErrorKind};
use crate::fields::BlockState as Registers;
use crate::record::{
    Body, Fields, FrameworkBlocks, FrameworkEnd, FrameworkFrames, FrameworkOom, FrameworkSegment, FrameworkState,
    FrameworkStats,
};
use crate::varint::Dec;

/// The layout of records 70 to 76 that this crate writes.
pub const LAYOUT: u32 = 1;
/// The largest payload the shim accepts for one record (a block is 64 KiB).
pub const MAX_PAYLOAD: usize = 16 * 1024;
/// Numbers per block in [`FrameworkBlocks::blocks`].
pub const BLOCK_FIELDS: usize = 5;

/// A block's state, as PyTorch's snapshot names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum BlockState {
    /// `active_allocated`: a live tensor.
    Allocated = 1,
    /// `active_pending_free`: freed by the program, still in use by a stream.
    PendingFree = 2,
    /// `inactive`: cached free memory.
    Inactive = 3,
}

impl BlockState {
    /// From the number written in the trace.
    pub fn from_code(code: u64) -> Option<BlockState> {
        match code {
            1 => Some(BlockState::Allocated),
            2 => Some(BlockState::PendingFree),
            3 => Some(BlockState::Inactive),
            _ => None,
        }
    }
}

/// One block of a [`FrameworkBlocks`] record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Block {
    /// Offset in its segment.
    pub offset: u64,
    /// Bytes (rounded by the allocator).
    pub size: u64,
    /// Bytes asked for.
    pub requested: u64,
    /// Live, pending free or cached free.
    pub state: BlockState,
    /// Its `FrameworkFrames` id (0: none).
    pub frames: u32,
}

impl FrameworkBlocks<'_> {
    /// The blocks, in order (a trailing incomplete or unknown-state one is left out; [`parse`]
    /// refuses those).
    pub fn iter(&self) -> impl Iterator<Item = Block> + '_ {
        self.blocks.0.chunks_exact(BLOCK_FIELDS).filter_map(|b| {
            Some(Block {
                offset: b[0],
                size: b[1],
                requested: b[2],
                state: BlockState::from_code(b[3])?,
                frames: u32::try_from(b[4]).ok()?,
            })
        })
    }
}

/// One Python frame of a [`FrameworkFrames`] record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PyFrame<'r> {
    /// `co_filename`.
    pub file: &'r str,
    /// Function name.
    pub function: &'r str,
    /// Line.
    pub line: u64,
}

impl FrameworkFrames<'_> {
    /// The frames, innermost first.
    pub fn iter(&self) -> impl Iterator<Item = PyFrame<'_>> + '_ {
        self.names
            .chunks_exact(2)
            .zip(self.lines.0.iter())
            .map(|(n, &line)| PyFrame {
                file: &n[0],
                function: &n[1],
                line,
            })
    }
}

/// Decodes the fields of a record of kind 70 to 76 (without its kind, length, sequence and
/// time) and checks what its fields cannot say alone: block lists of whole blocks of known
/// states, two names per frame line. Offsets in errors are from the payload's start.
pub fn parse(kind: u8, payload: &[u8]) -> Result<Body<'_>, DecodeError> {
    let mut d = Dec::new(payload, 0);
    // Kinds 70 to 76 use no delta register (see crate::record), so fresh ones decode them.
    let mut r = Registers::default();
    let bad = |what| Err(DecodeError::new(0, ErrorKind::BadField(what)));
    let body: Body<'_> = match kind {
        FrameworkState::KIND => FrameworkState::get(&mut d, &mut r)?.into(),
        FrameworkSegment::KIND => FrameworkSegment::get(&mut d, &mut r)?.into(),
        FrameworkBlocks::KIND => {
            let b = FrameworkBlocks::get(&mut d, &mut r)?;
            if b.blocks.0.len() % BLOCK_FIELDS != 0 || b.iter().count() * BLOCK_FIELDS != b.blocks.0.len() {
                return bad("framework block list (five numbers per block, state 1 to 3)");
            }
            b.into()
        }
        FrameworkFrames::KIND => {
            let f = FrameworkFrames::get(&mut d, &mut r)?;
            if f.id == 0 || f.names.len() != 2 * f.lines.0.len() {
                return bad("framework frames (an id, two names per line)");
            }
            f.into()
        }
        FrameworkStats::KIND => FrameworkStats::get(&mut d, &mut r)?.into(),
        FrameworkOom::KIND => FrameworkOom::get(&mut d, &mut r)?.into(),
        FrameworkEnd::KIND => FrameworkEnd::get(&mut d, &mut r)?.into(),
        _ => return bad("framework record kind (70 to 76)"),
    };
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::varint::Enc;

    fn encode<'a, F: Fields<'a>>(f: &F) -> Vec<u8> {
        let mut buf = vec![0u8; 4096];
        let mut e = Enc::new(&mut buf);
        f.put(&mut e, &mut Registers::default());
        let n = e.finish().unwrap();
        buf.truncate(n);
        buf
    }

    #[test]
    fn every_sample_framework_record_parses_back_to_itself() {
        let samples = crate::record::tests::sample_records();
        let mut seen = 0;
        for r in samples.iter().filter(|r| (70..=76).contains(&r.body.kind())) {
            let mut buf = vec![0u8; 4096];
            let mut st = Registers::default();
            let n = r.encode(&mut st, &mut buf).unwrap();
            buf[0] = r.body.kind();
            let (back, _) = crate::Record::decode(&buf[..n], 0, &mut Registers::default())
                .unwrap()
                .unwrap();
            assert_eq!(back, *r);
            seen += 1;
        }
        assert_eq!(seen, 7);
    }

    #[test]
    fn a_block_list_cut_short_or_with_an_unknown_state_is_refused() {
        let whole = FrameworkBlocks {
            state: 1,
            segment: 0x1000,
            blocks: crate::Addrs(vec![0, 512, 500, 1, 0].into()),
        };
        assert!(parse(FrameworkBlocks::KIND, &encode(&whole)).is_ok());
        let short = FrameworkBlocks {
            blocks: crate::Addrs(vec![0, 512, 500, 1].into()),
            ..whole.clone()
        };
        let e = parse(FrameworkBlocks::KIND, &encode(&short)).unwrap_err();
        assert!(e.to_string().contains("framework block list"), "{e}");
        let unknown = FrameworkBlocks {
            blocks: crate::Addrs(vec![0, 512, 500, 9, 0].into()),
            ..whole
        };
        assert!(parse(FrameworkBlocks::KIND, &encode(&unknown)).is_err());
    }

    #[test]
    fn frames_need_two_names_per_line_and_an_id() {
        let f = FrameworkFrames {
            id: 3,
            state: 1,
            names: vec!["a.py".into(), "f".into()],
            lines: crate::Addrs(vec![7].into()),
        };
        let bytes = encode(&f);
        let back = parse(FrameworkFrames::KIND, &bytes).unwrap();
        let Body::FrameworkFrames(back) = back else { panic!() };
        assert_eq!(
            back.iter().collect::<Vec<_>>(),
            vec![PyFrame {
                file: "a.py",
                function: "f",
                line: 7
            }]
        );
        let odd = FrameworkFrames {
            names: vec!["a.py".into()],
            ..f.clone()
        };
        assert!(parse(FrameworkFrames::KIND, &encode(&odd)).is_err());
        assert!(parse(FrameworkFrames::KIND, &encode(&FrameworkFrames { id: 0, ..f })).is_err());
    }

    #[test]
    fn truncated_payloads_and_other_kinds_are_errors_never_panics() {
        let s = FrameworkSegment {
            state: 1,
            device: 0,
            address: u64::MAX,
            size: 1 << 40,
            stream: 7,
            pool: 0,
        };
        let full = encode(&s);
        for cut in 0..full.len() {
            assert!(parse(FrameworkSegment::KIND, &full[..cut]).is_err(), "cut at {cut}");
        }
        assert!(parse(16, &full).is_err());
        assert!(parse(77, &full).is_err());
    }
}
