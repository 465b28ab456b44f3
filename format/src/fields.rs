//! How each field type is written: the building blocks of every record.
//!
//! Plain integers are LEB128 varints. Address-like fields (`Ptr`, `Ctx`, `Stream`, `Event`)
//! are zigzag deltas against the previous value of the same register in the same block, so a
//! free of the pointer just allocated costs one byte. Registers start at zero in every block,
//! which keeps every block decodable on its own. Rule for future record kinds: a kind that an
//! older reader might not know must not use the delta registers (older readers skip it and
//! would lose track), unless the format version is bumped.

use std::borrow::Cow;

use crate::api::Api;
use crate::error::{DecodeError, ErrorKind};
pub use crate::kind::MemKind;
use crate::varint::{unzigzag, zigzag, Dec, Enc};

/// Delta registers of one block, advanced by every record in it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BlockState {
    /// Sequence number of the previous record.
    pub seq: u64,
    /// Time of the previous record.
    pub time: u64,
    /// Last device or host pointer.
    pub ptr: u64,
    /// Last context handle.
    pub ctx: u64,
    /// Last stream handle.
    pub stream: u64,
    /// Last event handle.
    pub event: u64,
}

/// A field that knows how to write and read itself.
pub trait Field<'a>: Sized {
    /// Appends the field.
    fn put(&self, e: &mut Enc<'_>, s: &mut BlockState);
    /// Reads the field.
    fn get(d: &mut Dec<'a>, s: &mut BlockState) -> Result<Self, DecodeError>;
    /// The field as a generic value, for dumps and generic tools.
    fn value(&self) -> Value<'_>;
}

/// A field's value, typed just enough to print it well.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Value<'v> {
    /// An unsigned number.
    U(u64),
    /// A signed number.
    I(i64),
    /// An address or handle (printed in hex).
    Addr(u64),
    /// An API number.
    Api(Api),
    /// A memory family.
    Kind(MemKind),
    /// Text.
    Str(&'v str),
    /// Raw bytes (printed in hex).
    Bytes(&'v [u8]),
    /// Several addresses.
    Addrs(&'v [u64]),
    /// Several strings.
    Strs(&'v [Cow<'v, str>]),
}

impl<'a> Field<'a> for u64 {
    #[inline]
    fn put(&self, e: &mut Enc<'_>, _: &mut BlockState) {
        e.u(*self)
    }
    fn get(d: &mut Dec<'a>, _: &mut BlockState) -> Result<Self, DecodeError> {
        d.u()
    }
    fn value(&self) -> Value<'_> {
        Value::U(*self)
    }
}

impl<'a> Field<'a> for u32 {
    #[inline]
    fn put(&self, e: &mut Enc<'_>, _: &mut BlockState) {
        e.u(u64::from(*self))
    }
    fn get(d: &mut Dec<'a>, _: &mut BlockState) -> Result<Self, DecodeError> {
        d.u32()
    }
    fn value(&self) -> Value<'_> {
        Value::U(u64::from(*self))
    }
}

impl<'a> Field<'a> for i32 {
    #[inline]
    fn put(&self, e: &mut Enc<'_>, _: &mut BlockState) {
        e.i(i64::from(*self))
    }
    fn get(d: &mut Dec<'a>, _: &mut BlockState) -> Result<Self, DecodeError> {
        let at = d.offset();
        let v = d.i()?;
        i32::try_from(v).map_err(|_| DecodeError::new(at, ErrorKind::OutOfRange(zigzag(v))))
    }
    fn value(&self) -> Value<'_> {
        Value::I(i64::from(*self))
    }
}

impl<'a> Field<'a> for Api {
    #[inline]
    fn put(&self, e: &mut Enc<'_>, _: &mut BlockState) {
        e.u(u64::from(self.0))
    }
    fn get(d: &mut Dec<'a>, _: &mut BlockState) -> Result<Self, DecodeError> {
        let at = d.offset();
        let v = d.u()?;
        u16::try_from(v)
            .map(Api)
            .map_err(|_| DecodeError::new(at, ErrorKind::OutOfRange(v)))
    }
    fn value(&self) -> Value<'_> {
        Value::Api(*self)
    }
}

impl<'a> Field<'a> for Cow<'a, str> {
    #[inline]
    fn put(&self, e: &mut Enc<'_>, _: &mut BlockState) {
        e.bytes(self.as_bytes())
    }
    fn get(d: &mut Dec<'a>, _: &mut BlockState) -> Result<Self, DecodeError> {
        d.str().map(Cow::Borrowed)
    }
    fn value(&self) -> Value<'_> {
        Value::Str(self)
    }
}

impl<'a> Field<'a> for Cow<'a, [u8]> {
    #[inline]
    fn put(&self, e: &mut Enc<'_>, _: &mut BlockState) {
        e.bytes(self)
    }
    fn get(d: &mut Dec<'a>, _: &mut BlockState) -> Result<Self, DecodeError> {
        d.bytes().map(Cow::Borrowed)
    }
    fn value(&self) -> Value<'_> {
        Value::Bytes(self)
    }
}

/// A list of strings (program arguments).
impl<'a> Field<'a> for Vec<Cow<'a, str>> {
    #[inline]
    fn put(&self, e: &mut Enc<'_>, _: &mut BlockState) {
        e.u(self.len() as u64);
        for s in self {
            e.bytes(s.as_bytes());
        }
    }
    fn get(d: &mut Dec<'a>, _: &mut BlockState) -> Result<Self, DecodeError> {
        let n = d.u()?;
        let mut out = Vec::new();
        for _ in 0..n {
            out.push(Cow::Borrowed(d.str()?));
        }
        Ok(out)
    }
    fn value(&self) -> Value<'_> {
        Value::Strs(self)
    }
}

/// A list of addresses (stack frames, kernel pointer arguments): a count, then each address
/// as a zigzag delta from the one before it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Addrs<'a>(pub Cow<'a, [u64]>);

impl<'a> Field<'a> for Addrs<'a> {
    #[inline]
    fn put(&self, e: &mut Enc<'_>, _: &mut BlockState) {
        e.u(self.0.len() as u64);
        let mut prev = 0u64;
        for &a in self.0.iter() {
            e.i(a.wrapping_sub(prev) as i64);
            prev = a;
        }
    }
    fn get(d: &mut Dec<'a>, _: &mut BlockState) -> Result<Self, DecodeError> {
        let at = d.offset();
        let n = d.u()?;
        // Each address takes at least one byte: a larger count is corruption, not a reason to
        // reserve gigabytes.
        if n > d.remaining() as u64 {
            return Err(DecodeError::new(at, ErrorKind::RecordOverrun));
        }
        let mut out = Vec::with_capacity(n as usize);
        let mut prev = 0u64;
        for _ in 0..n {
            prev = prev.wrapping_add(unzigzag(d.u()?) as u64);
            out.push(prev);
        }
        Ok(Addrs(Cow::Owned(out)))
    }
    fn value(&self) -> Value<'_> {
        Value::Addrs(&self.0)
    }
}

macro_rules! newtype_field {
    ($(#[$m:meta])* $name:ident($inner:ty), plain) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub $inner);
        impl<'a> Field<'a> for $name {
            #[inline]
            fn put(&self, e: &mut Enc<'_>, s: &mut BlockState) {
                self.0.put(e, s)
            }
            fn get(d: &mut Dec<'a>, s: &mut BlockState) -> Result<Self, DecodeError> {
                <$inner>::get(d, s).map($name)
            }
            fn value(&self) -> Value<'_> {
                self.0.value()
            }
        }
    };
    ($(#[$m:meta])* $name:ident(u64), delta $reg:ident) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
        pub struct $name(pub u64);
        impl<'a> Field<'a> for $name {
            #[inline]
            fn put(&self, e: &mut Enc<'_>, s: &mut BlockState) {
                e.i(self.0.wrapping_sub(s.$reg) as i64);
                s.$reg = self.0;
            }
            fn get(d: &mut Dec<'a>, s: &mut BlockState) -> Result<Self, DecodeError> {
                s.$reg = s.$reg.wrapping_add(d.i()? as u64);
                Ok($name(s.$reg))
            }
            fn value(&self) -> Value<'_> {
                Value::Addr(self.0)
            }
        }
    };
}

newtype_field!(
    /// A stack written once in a [`crate::Stack`] record; 0 means "no stack captured".
    StackId(u32), plain
);
newtype_field!(
    /// A `CUresult` (0 is success).
    CuResult(u32), plain
);
newtype_field!(
    /// A device, managed or host address, or an opaque handle in its place (VMM handles,
    /// arrays).
    Ptr(u64), delta ptr
);
newtype_field!(
    /// A `CUcontext` handle.
    Ctx(u64), delta ctx
);
newtype_field!(
    /// A `CUstream` handle (0 legacy default, 1 `CU_STREAM_LEGACY`, 2 `CU_STREAM_PER_THREAD`).
    Stream(u64), delta stream
);
newtype_field!(
    /// A `CUevent` handle.
    Event(u64), delta event
);

impl StackId {
    /// No stack was captured.
    pub const NONE: StackId = StackId(0);
}

impl CuResult {
    /// `CUDA_SUCCESS`.
    pub const SUCCESS: CuResult = CuResult(0);
    /// `CUDA_ERROR_OUT_OF_MEMORY`.
    pub const OUT_OF_MEMORY: CuResult = CuResult(2);

    /// Whether the call succeeded.
    pub fn is_success(self) -> bool {
        self.0 == 0
    }
}

/// Where `cuMemCreate` put its memory, as its `Alloc` record's `aux` carries it: the
/// `CUmemAllocationProp`'s location type in the high 32 bits, its id in the low 32 (0: not
/// recorded, as in traces of shims before this field).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemLocation {
    /// On a device (`CU_MEM_LOCATION_TYPE_DEVICE`), by ordinal.
    Device(i32),
    /// In host memory (`CU_MEM_LOCATION_TYPE_HOST`, `_HOST_NUMA`, `_HOST_NUMA_CURRENT`).
    Host,
    /// Not recorded, or a location type this reader does not know.
    Unknown,
}

impl MemLocation {
    /// `aux` for a `cuMemCreate` record from the properties' location type and id.
    pub fn encode(location_type: u32, id: i32) -> u64 {
        (u64::from(location_type) << 32) | u64::from(id as u32)
    }

    /// The location a `cuMemCreate` record's `aux` names.
    pub fn decode(aux: u64) -> MemLocation {
        match aux >> 32 {
            1 => MemLocation::Device(aux as u32 as i32),
            2..=4 => MemLocation::Host,
            _ => MemLocation::Unknown,
        }
    }
}

impl<'a> Field<'a> for MemKind {
    #[inline]
    fn put(&self, e: &mut Enc<'_>, _: &mut BlockState) {
        e.byte(*self as u8)
    }
    fn get(d: &mut Dec<'a>, _: &mut BlockState) -> Result<Self, DecodeError> {
        let at = d.offset();
        let b = d.byte()?;
        MemKind::ALL
            .get(usize::from(b))
            .copied()
            .ok_or(DecodeError::new(at, ErrorKind::BadField("memory kind")))
    }
    fn value(&self) -> Value<'_> {
        Value::Kind(*self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_vmm_location_round_trips_through_aux() {
        assert_eq!(MemLocation::decode(MemLocation::encode(1, 3)), MemLocation::Device(3));
        assert_eq!(MemLocation::decode(MemLocation::encode(1, 0)), MemLocation::Device(0));
        for host in [2, 3, 4] {
            assert_eq!(MemLocation::decode(MemLocation::encode(host, 1)), MemLocation::Host);
        }
        assert_eq!(MemLocation::decode(0), MemLocation::Unknown, "older traces");
        assert_eq!(MemLocation::decode(MemLocation::encode(9, 0)), MemLocation::Unknown);
    }
}
