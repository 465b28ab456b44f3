//! Allocations and frees decoded without the generic field path.
//!
//! Nearly every record of a long trace is an [`Alloc`] or a [`Free`], and the generic path
//! ([`Fields::get`](crate::Fields::get)) reads each field through its own function that
//! builds a full error for every way it can fail. [`decode`] reads these two kinds with one
//! varint reader that only says yes or no (a byte, two bytes, or eight at a time), and writes
//! the block's registers back only when the whole record was read. A record with enough of the
//! block after it (nearly all) is read without checking each field against the record's end,
//! then checked once. Anything unusual (a record cut short,
//! a long length, a varint of nine bytes or more, a value out of range) makes it answer `None`,
//! and [`Record::decode`] then reads the record the generic way, which says what is wrong and
//! where: the two paths give the same record for every input where this one answers.

use crate::api::Api;
use crate::fields::{BlockState, Ctx, CuResult, Ptr, StackId, Stream};
use crate::record::{Alloc, Body, Free, Record, Seq};
use crate::varint::unzigzag;

/// Reads the varints of one record.
trait Varints {
    /// An unsigned varint of at most eight bytes.
    fn u(&mut self) -> Option<u64>;

    /// Where the next varint starts, from the record's start.
    fn pos(&self) -> usize;

    #[inline(always)]
    fn u32(&mut self) -> Option<u32> {
        u32::try_from(self.u()?).ok()
    }

    #[inline(always)]
    fn api(&mut self) -> Option<Api> {
        u16::try_from(self.u()?).ok().map(Api)
    }

    /// A field coded against register `reg`.
    #[inline(always)]
    fn delta(&mut self, reg: &mut u64) -> Option<u64> {
        *reg = reg.wrapping_add(unzigzag(self.u()?) as u64);
        Some(*reg)
    }
}

/// The value of the varint of `len` bytes (1 to 8) at the start of `word` (little-endian).
#[inline(always)]
fn varint_of(word: u64, stops: u64) -> u64 {
    // The bytes up to the last one, without their high bits, packed together.
    let mut v = word & (stops ^ (stops - 1)) & 0x7f7f_7f7f_7f7f_7f7f;
    v = (v & 0x007f_007f_007f_007f) | ((v & 0x7f00_7f00_7f00_7f00) >> 1);
    v = (v & 0x0000_3fff_0000_3fff) | ((v & 0x3fff_0000_3fff_0000) >> 2);
    (v & 0x0000_0000_0fff_ffff) | ((v & 0x0fff_ffff_0000_0000) >> 4)
}

/// Reads varints from `data[pos..end]`; may load (never use) bytes of `data` past `end`.
struct Quick<'b> {
    data: &'b [u8],
    pos: usize,
    end: usize,
}

impl Varints for Quick<'_> {
    #[inline(always)]
    fn u(&mut self) -> Option<u64> {
        if self.pos >= self.end {
            return None;
        }
        let b = *self.data.get(self.pos)?;
        if b < 0x80 {
            self.pos += 1;
            return Some(u64::from(b));
        }
        let word = u64::from_le_bytes(*self.data.get(self.pos..)?.first_chunk::<8>()?);
        // The high bit of each byte says whether another follows: the lowest clear one ends
        // the varint.
        let stops = !word & 0x8080_8080_8080_8080;
        if stops == 0 {
            return None;
        }
        let len = (stops.trailing_zeros() / 8 + 1) as usize;
        if len > self.end - self.pos {
            return None;
        }
        self.pos += len;
        Some(varint_of(word, stops))
    }

    #[inline(always)]
    fn pos(&self) -> usize {
        self.pos
    }
}

/// The most varints an allocation or a free has (the sequence number, the time and nine
/// fields).
const FIELDS: usize = 11;
/// Bytes from a record's start that [`Windowed`] may load: its kind and length, then
/// [`FIELDS`] varints of at most eight bytes, each loaded eight bytes at a time.
const WINDOW: usize = 2 + FIELDS * 8 + 8;

/// Reads varints from a record with at least [`WINDOW`] bytes of the block from its start:
/// no check against the record's end at each varint (which crosses it only in a damaged
/// record), but once, after the last ([`decode_into`]). Loads stay within the window
/// whatever the bytes: each varint moves at most eight bytes on.
struct Windowed<'b> {
    window: &'b [u8; WINDOW],
    pos: usize,
}

impl Varints for Windowed<'_> {
    #[inline(always)]
    fn u(&mut self) -> Option<u64> {
        let b = *self.window.get(self.pos)?;
        if b < 0x80 {
            self.pos += 1;
            return Some(u64::from(b));
        }
        // Two bytes (a time step, a size under 16 KiB) are nearly as common as one, and
        // cheaper read as two than as a word.
        let c = *self.window.get(self.pos + 1)?;
        if c < 0x80 {
            self.pos += 2;
            return Some(u64::from(b & 0x7f) | (u64::from(c) << 7));
        }
        let word = u64::from_le_bytes(*self.window.get(self.pos..)?.first_chunk::<8>()?);
        let stops = !word & 0x8080_8080_8080_8080;
        if stops == 0 {
            return None;
        }
        self.pos += (stops.trailing_zeros() / 8 + 1) as usize;
        Some(varint_of(word, stops))
    }

    #[inline(always)]
    fn pos(&self) -> usize {
        self.pos
    }
}

/// The allocation or free at the start of `data`, and its length, as
/// [`Record::decode`] reads it; `None` for any other kind and for anything unusual (see the
/// module's overview), with `state` then untouched.
#[cfg(test)]
pub(crate) fn decode<'a>(data: &[u8], state: &mut BlockState) -> Option<(Record<'a>, usize)> {
    let mut out = (None, false);
    let n = decode_into(data, state, &mut out)?;
    match out {
        (Some(record), true) => Some((record, n)),
        _ => None,
    }
}

/// Where [`decode_into`] writes the record it reads.
pub(crate) trait Slot<'a> {
    /// A record whose body is [`BLANK_ALLOC`] (`alloc`) or [`BLANK_FREE`], where the record
    /// goes, to be filled in. It counts only once [`keep`](Self::keep) is called; the next
    /// call may hand out the same place.
    fn blank(&mut self, alloc: bool) -> Option<&mut Record<'a>>;
    /// The record filled in is whole; called only after [`blank`](Self::blank) answered
    /// `Some`, with nothing else done to the slot's owner since.
    fn keep(&mut self);
}

#[cfg(test)]
impl<'a> Slot<'a> for (Option<Record<'a>>, bool) {
    fn blank(&mut self, alloc: bool) -> Option<&mut Record<'a>> {
        let body = if alloc { BLANK_ALLOC.into() } else { BLANK_FREE.into() };
        Some(self.0.insert(Record {
            seq: Seq(0),
            time_ns: 0,
            body,
        }))
    }

    fn keep(&mut self) {
        self.1 = true;
    }
}

/// The allocation a [`Slot`] starts from.
pub(crate) const BLANK_ALLOC: Alloc = Alloc {
    api: Api(0),
    via: Api(0),
    result: CuResult(0),
    ctx: Ctx(0),
    stream: Stream(0),
    ptr: Ptr(0),
    size: 0,
    stack: StackId(0),
    aux: 0,
};

/// The free a [`Slot`] starts from.
pub(crate) const BLANK_FREE: Free = Free {
    api: Api(0),
    via: Api(0),
    result: CuResult(0),
    stream: Stream(0),
    ptr: Ptr(0),
    size: 0,
    stack: StackId(0),
};

/// As [`decode`], but writes the record field by field where `slot` keeps it (on a blank
/// copied from a constant), and answers its length. A record built first and moved there
/// afterwards is assembled on the stack and copied from it: the copy reads back in 16-byte
/// loads what was just written in narrower stores, which the processor does not forward from
/// its store buffer: in profiles of the report, that copy took half the time of the
/// decoding loop.
#[inline(always)]
pub(crate) fn decode_into<'a>(data: &[u8], state: &mut BlockState, slot: &mut impl Slot<'a>) -> Option<usize> {
    let (&kind, rest) = data.split_first()?;
    if kind != Alloc::KIND && kind != Free::KIND {
        return None;
    }
    let len = *rest.first()?;
    if len >= 0x80 {
        return None;
    }
    let end = 2 + usize::from(len);
    if end > data.len() {
        return None;
    }
    // Most records have a window of the block after them: read the quick way, then checked
    // against their end once. The last few of a block, the checked way.
    match data.first_chunk::<WINDOW>() {
        Some(window) => fields(Windowed { window, pos: 2 }, kind, end, state, slot),
        None => fields(Quick { data, pos: 2, end }, kind, end, state, slot),
    }
}

/// The fields of an allocation (`kind`) or a free after its kind and length, written into
/// `slot`; `None` (with `state` untouched and nothing kept) when anything is unusual or the
/// fields do not end within the record's `end`.
#[inline(always)]
fn fields<'a>(
    mut q: impl Varints,
    kind: u8,
    end: usize,
    state: &mut BlockState,
    slot: &mut impl Slot<'a>,
) -> Option<usize> {
    let mut s = *state;
    s.seq = s.seq.wrapping_add(q.u()?);
    s.time = s.time.wrapping_add(q.u()?);
    // Each kind asks for its own blank and writes its own header: one blank and a `match` on
    // its body cost 18 more instructions a record (callgrind, the bench's trace).
    if kind == Alloc::KIND {
        let r = slot.blank(true)?;
        r.seq = Seq(s.seq);
        r.time_ns = s.time;
        let Body::Alloc(a) = &mut r.body else { return None };
        a.api = q.api()?;
        a.via = q.api()?;
        a.result = CuResult(q.u32()?);
        a.ctx = Ctx(q.delta(&mut s.ctx)?);
        a.stream = Stream(q.delta(&mut s.stream)?);
        a.ptr = Ptr(q.delta(&mut s.ptr)?);
        a.size = q.u()?;
        a.stack = StackId(q.u32()?);
        a.aux = q.u()?;
    } else {
        let r = slot.blank(false)?;
        r.seq = Seq(s.seq);
        r.time_ns = s.time;
        let Body::Free(f) = &mut r.body else { return None };
        f.api = q.api()?;
        f.via = q.api()?;
        f.result = CuResult(q.u32()?);
        f.stream = Stream(q.delta(&mut s.stream)?);
        f.ptr = Ptr(q.delta(&mut s.ptr)?);
        f.size = q.u()?;
        f.stack = StackId(q.u32()?);
    }
    if q.pos() > end {
        return None;
    }
    *state = s;
    slot.keep();
    Some(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn alloc(ptr: u64, size: u64, stack: u32, aux: u64) -> Body<'static> {
        Body::Alloc(Alloc {
            api: Api::cuMemAlloc_v2,
            via: Api(u16::MAX),
            result: CuResult(if size == 7 { u32::MAX } else { 0 }),
            ctx: Ctx(0x5555_1234_0000),
            stream: Stream(ptr / 3),
            ptr: Ptr(ptr),
            size,
            stack: StackId(stack),
            aux,
        })
    }

    fn free(ptr: u64, size: u64, stack: u32) -> Body<'static> {
        Body::Free(Free {
            api: Api::cuMemFreeAsync,
            via: Api::NONE,
            result: CuResult(1),
            stream: Stream(u64::MAX - ptr),
            ptr: Ptr(ptr),
            size,
            stack: StackId(stack),
        })
    }

    /// A block's worth of allocations and frees with fields of every length, a record of
    /// another kind among them.
    fn block() -> Vec<u8> {
        let mut buf = vec![0u8; 1 << 14];
        let mut state = BlockState::default();
        let mut pos = 0;
        let values = [
            0u64,
            1,
            0x7f,
            0x80,
            1 << 20,
            1 << 35,
            (1 << 56) - 1,
            1 << 56,
            1 << 63,
            u64::MAX,
        ];
        let mut i = 0u64;
        for &a in &values {
            for &b in &values {
                i += 1;
                let bodies = [
                    alloc(a, b, (b & 0xffff_ffff) as u32, a ^ b),
                    free(b, a, u32::MAX),
                    crate::Mark {
                        name: "m".into(),
                        value: a,
                    }
                    .into(),
                ];
                for body in bodies {
                    let r = Record {
                        seq: Seq(i.wrapping_mul(a | 1)),
                        time_ns: b,
                        body,
                    };
                    let n = r.encode(&mut state, &mut buf[pos..]).unwrap();
                    buf[pos] = r.body.kind();
                    pos += n;
                }
            }
        }
        buf.truncate(pos + 1);
        buf
    }

    /// Decodes `data` record by record both ways; the quick path, where it answers, must give
    /// what the generic one does, and leave the registers alone where it does not.
    fn compare(data: &[u8]) -> usize {
        let (mut quick_state, mut generic_state) = (BlockState::default(), BlockState::default());
        let (mut pos, mut answered) = (0, 0);
        while pos < data.len() {
            let before = quick_state;
            let quick = decode(&data[pos..], &mut quick_state);
            let generic = Record::decode(&data[pos..], pos as u64, &mut generic_state);
            let n = match (quick, generic) {
                (Some(q), Ok(Some(g))) => {
                    assert_eq!(q, g, "at {pos}");
                    answered += 1;
                    g.1
                }
                (Some(q), other) => panic!("at {pos}: quick {q:?}, generic {other:?}"),
                (None, Ok(Some(g))) => {
                    assert_eq!(quick_state, before, "at {pos}");
                    quick_state = generic_state;
                    g.1
                }
                (None, _) => {
                    assert_eq!(quick_state, before, "at {pos}");
                    break;
                }
            };
            assert_eq!(quick_state, generic_state, "at {pos}");
            pos += n;
        }
        answered
    }

    #[test]
    fn allocations_and_frees_read_as_the_generic_path_reads_them() {
        let data = block();
        let answered = compare(&data);
        // Of 200 allocations and frees, those with a field of nine bytes or more go the generic way.
        assert!((50..200).contains(&answered), "{answered}");
    }

    #[test]
    fn a_damaged_record_reads_as_the_generic_path_reads_it_or_not_at_all() {
        let data = block();
        // Every byte of the first records set to values that end or lengthen a varint, or cut
        // a record short; then each record cut at every length.
        for at in 0..200 {
            for v in [0u8, 1, 0x7f, 0x80, 0xff] {
                let mut bad = data.clone();
                bad[at] = v;
                let mut st = BlockState::default();
                let mut pos = 0;
                while let Ok(Some((_, n))) = Record::decode(&bad[pos..], pos as u64, &mut st) {
                    pos += n;
                }
                let mut good = bad[..pos].to_vec();
                good.push(0);
                compare(&good);
                // The record that failed, alone: the quick path must not answer it.
                let mut st = BlockState::default();
                let mut prefix = 0;
                while prefix < pos {
                    let (_, n) = Record::decode(&bad[prefix..], 0, &mut st).unwrap().unwrap();
                    prefix += n;
                }
                if pos < bad.len() && Record::decode(&bad[pos..], 0, &mut st.clone()).is_err() {
                    assert!(decode(&bad[pos..], &mut st).is_none(), "{at} {v}");
                }
            }
        }
        let mut st = BlockState::default();
        let mut pos = 0;
        let mut windowed = 0;
        while let Ok(Some((_, n))) = Record::decode(&data[pos..], 0, &mut st.clone()) {
            for cut in 0..n {
                let mut short = data[pos..pos + n].to_vec();
                short[1] = short[1].min(cut as u8);
                short.truncate(cut);
                let mut q = st;
                let generic = Record::decode(&short, 0, &mut st.clone());
                match decode(&short, &mut q) {
                    Some(r) => assert_eq!(Ok(Some(r)), generic),
                    None => assert_eq!(q, st),
                }
                // The same length with the rest of the block still after it: read through the
                // window, fields that run past the record's end must be refused as they are
                // when the record is all there is.
                let mut long = data[pos..].to_vec();
                long[1] = long[1].min(cut as u8);
                let mut q = st;
                let generic = Record::decode(&long, 0, &mut st.clone());
                match decode(&long, &mut q) {
                    Some(r) => assert_eq!(Ok(Some(r)), generic, "cut at {cut}"),
                    None => assert_eq!(q, st),
                }
                if cut < n && long.len() >= WINDOW {
                    windowed += 1;
                }
            }
            Record::decode(&data[pos..], 0, &mut st).unwrap();
            pos += n;
        }
        assert!(windowed > 1000, "{windowed} records cut short read through the window");
    }
}
