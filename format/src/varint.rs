//! LEB128 varints and zigzag integers, the only number encodings in a trace.

use crate::error::{DecodeError, ErrorKind};

/// Longest LEB128 encoding of a `u64`.
pub const MAX_VARINT_LEN: usize = 10;

/// Maps signed integers to unsigned ones so that small magnitudes stay short.
#[inline]
pub fn zigzag(v: i64) -> u64 {
    ((v << 1) ^ (v >> 63)) as u64
}

/// Inverse of [`zigzag`].
#[inline]
pub fn unzigzag(v: u64) -> i64 {
    ((v >> 1) as i64) ^ -((v & 1) as i64)
}

/// Writes into a caller-owned slice without allocating; every put reports overflow through
/// `ok`, so an encoder can write a whole record and check once at the end.
pub struct Enc<'a> {
    buf: &'a mut [u8],
    pos: usize,
    ok: bool,
}

impl<'a> Enc<'a> {
    /// Starts writing at the beginning of `buf`.
    pub fn new(buf: &'a mut [u8]) -> Self {
        Enc { buf, pos: 0, ok: true }
    }

    /// Bytes written so far, or `None` if the slice was too small.
    pub fn finish(&self) -> Option<usize> {
        self.ok.then_some(self.pos)
    }

    /// Appends one byte.
    #[inline]
    pub fn byte(&mut self, b: u8) {
        match self.buf.get_mut(self.pos) {
            Some(slot) => {
                *slot = b;
                self.pos += 1;
            }
            None => self.ok = false,
        }
    }

    /// Appends an unsigned LEB128 varint.
    #[inline(always)]
    pub fn u(&mut self, mut v: u64) {
        if v < 0x80 {
            self.byte(v as u8);
            return;
        }
        // Away from the end of the buffer (always, but for a record's last bytes in a block),
        // one bounds check serves the whole varint. `pos <= buf.len()` always holds: `pos`
        // only moves over bytes written.
        if let Some(dst) = self.buf[self.pos..].first_chunk_mut::<MAX_VARINT_LEN>() {
            let mut n = 0;
            for slot in dst.iter_mut() {
                n += 1;
                if v < 0x80 {
                    *slot = v as u8;
                    break;
                }
                *slot = (v as u8) | 0x80;
                v >>= 7;
            }
            self.pos += n;
            return;
        }
        loop {
            let low = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                self.byte(low);
                return;
            }
            self.byte(low | 0x80);
        }
    }

    /// Appends a zigzag-encoded signed varint.
    #[inline]
    pub fn i(&mut self, v: i64) {
        self.u(zigzag(v));
    }

    /// Appends a length-prefixed byte string.
    pub fn bytes(&mut self, b: &[u8]) {
        self.u(b.len() as u64);
        match self.buf.get_mut(self.pos..self.pos + b.len()) {
            Some(dst) => {
                dst.copy_from_slice(b);
                self.pos += b.len();
            }
            None => self.ok = false,
        }
    }
}

/// Reads from a record's payload; errors carry the absolute file offset.
pub struct Dec<'a> {
    buf: &'a [u8],
    pos: usize,
    base: u64,
}

impl<'a> Dec<'a> {
    /// Reads `buf`, which starts at absolute file offset `base`.
    pub fn new(buf: &'a [u8], base: u64) -> Self {
        Dec { buf, pos: 0, base }
    }

    /// Absolute file offset of the next byte.
    pub fn offset(&self) -> u64 {
        self.base + self.pos as u64
    }

    /// Bytes left.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn truncated(&self, what: &'static str) -> DecodeError {
        DecodeError::new(self.offset(), ErrorKind::Truncated(what))
    }

    /// Reads one byte.
    pub fn byte(&mut self) -> Result<u8, DecodeError> {
        let b = *self.buf.get(self.pos).ok_or_else(|| self.truncated("byte"))?;
        self.pos += 1;
        Ok(b)
    }

    /// Reads an unsigned LEB128 varint.
    #[inline(always)]
    pub fn u(&mut self) -> Result<u64, DecodeError> {
        // Most fields are one byte; away from the end of the buffer (always, but for a
        // record's last bytes), one bounds check serves a longer varint. Anything unusual (a
        // malformed varint, the buffer's end) takes the byte-by-byte path below, which says
        // what is wrong and where.
        let rest = self.buf.get(self.pos..).unwrap_or_default();
        if let Some(&b) = rest.first() {
            if b < 0x80 {
                self.pos += 1;
                return Ok(u64::from(b));
            }
        }
        if let Some(bytes) = rest.first_chunk::<MAX_VARINT_LEN>() {
            let mut v: u64 = 0;
            for (i, &b) in bytes.iter().enumerate() {
                v |= u64::from(b & 0x7f) << (7 * i);
                if b & 0x80 == 0 {
                    if i == MAX_VARINT_LEN - 1 && b > 1 {
                        break;
                    }
                    self.pos += i + 1;
                    return Ok(v);
                }
            }
        }
        self.u_bytewise()
    }

    /// [`Dec::u`] a byte at a time.
    #[cold]
    fn u_bytewise(&mut self) -> Result<u64, DecodeError> {
        let start = self.offset();
        let mut v: u64 = 0;
        for shift in (0..64).step_by(7) {
            let b = self.byte()?;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                if shift == 63 && b > 1 {
                    break;
                }
                return Ok(v);
            }
        }
        Err(DecodeError::new(start, ErrorKind::BadVarint))
    }

    /// Reads a varint that must fit in 32 bits.
    #[inline]
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let start = self.offset();
        let v = self.u()?;
        u32::try_from(v).map_err(|_| DecodeError::new(start, ErrorKind::OutOfRange(v)))
    }

    /// Reads a zigzag-encoded signed varint.
    #[inline]
    pub fn i(&mut self) -> Result<i64, DecodeError> {
        self.u().map(unzigzag)
    }

    /// Reads a length-prefixed byte string.
    pub fn bytes(&mut self) -> Result<&'a [u8], DecodeError> {
        let len = self.u()?;
        let len = usize::try_from(len).unwrap_or(usize::MAX);
        if len > self.remaining() {
            return Err(self.truncated("byte string"));
        }
        let out = &self.buf[self.pos..self.pos + len];
        self.pos += len;
        Ok(out)
    }

    /// Reads a length-prefixed UTF-8 string.
    pub fn str(&mut self) -> Result<&'a str, DecodeError> {
        let at = self.offset();
        let b = self.bytes()?;
        std::str::from_utf8(b).map_err(|_| DecodeError::new(at, ErrorKind::BadUtf8))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_fast_varint_path_reads_as_the_bytewise_one() {
        // Every length, well and badly formed (an eleventh byte, a tenth byte over 1), at
        // every distance from the end of the buffer.
        let mut inputs: Vec<Vec<u8>> = Vec::new();
        for len in 1..=11usize {
            for last in [0u8, 1, 2, 0x7f] {
                let mut v = vec![0xffu8; len - 1];
                v.push(last);
                inputs.push(v);
            }
            inputs.push(vec![0x80; len]);
        }
        for input in &inputs {
            for tail in 0..12 {
                let mut buf = input.clone();
                buf.extend(std::iter::repeat_n(0x33, tail));
                let (mut fast, mut slow) = (Dec::new(&buf, 100), Dec::new(&buf, 100));
                let a = fast.u();
                let b = slow.u_bytewise();
                assert_eq!(a, b, "{buf:02x?}");
                if a.is_ok() {
                    assert_eq!(fast.offset(), slow.offset(), "{buf:02x?}");
                }
            }
        }
    }

    #[test]
    fn varints_round_trip_at_every_length() {
        let values = [0, 1, 127, 128, 300, 1 << 35, u64::MAX - 1, u64::MAX];
        for v in values {
            let mut buf = [0u8; MAX_VARINT_LEN];
            let mut e = Enc::new(&mut buf);
            e.u(v);
            let n = e.finish().unwrap();
            let mut d = Dec::new(&buf[..n], 0);
            assert_eq!(d.u().unwrap(), v);
            assert_eq!(d.remaining(), 0);
        }
        for v in [0i64, -1, 1, i64::MIN, i64::MAX, -300] {
            assert_eq!(unzigzag(zigzag(v)), v);
        }
    }

    #[test]
    fn overlong_varint_is_an_error_not_a_panic() {
        let buf = [0xffu8; 11];
        let err = Dec::new(&buf, 100).u().unwrap_err();
        assert_eq!(err.offset, 100);
    }

    #[test]
    fn encoder_reports_overflow() {
        let mut buf = [0u8; 2];
        let mut e = Enc::new(&mut buf);
        e.u(1 << 20);
        assert_eq!(e.finish(), None);
    }
}
