"""pprof profiles (gzipped `perftools.profiles.Profile` protobufs), read and written by hand.

`jax.profiler.device_memory_profile()` returns one: a sample per group of live buffers (and
executables) with the same Python stack, size and device, its values the buffer count and
bytes, its labels `kind` (`buffer`, `executable`) and `device`. Only the fields gpuleak reads
are decoded (profile.proto: sample_type 1, sample 2, location 4, function 5, string_table 6);
the rest are skipped by wire type, so a profile from a later JAX still reads. The tests'
stand-in JAX writes its profiles with `tests/python/fake_jax/jax/_src/pprof.py`.
"""

import gzip
import zlib

# Wire types.
VARINT, I64, LEN, I32 = 0, 1, 2, 5


class PprofError(ValueError):
    """A profile that is not a pprof protobuf (the offset is in the decompressed bytes)."""


def _varint(buf, at):
    value = shift = 0
    while True:
        if at >= len(buf):
            raise PprofError(f"varint past the end at offset {at}")
        b = buf[at]
        at += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, at
        shift += 7
        if shift > 63:
            raise PprofError(f"varint longer than 10 bytes at offset {at}")


def _fields(buf, start=0, end=None):
    """(field number, wire type, value, offset) for each field of a message; `value` is an int
    for VARINT/I64/I32 and a (start, end) pair for LEN."""
    end = len(buf) if end is None else end
    at = start
    while at < end:
        where = at
        key, at = _varint(buf, at)
        number, wire = key >> 3, key & 7
        if wire == VARINT:
            value, at = _varint(buf, at)
        elif wire == I64:
            value, at = int.from_bytes(buf[at : at + 8], "little"), at + 8
        elif wire == I32:
            value, at = int.from_bytes(buf[at : at + 4], "little"), at + 4
        elif wire == LEN:
            n, at = _varint(buf, at)
            value, at = (at, at + n), at + n
        else:
            raise PprofError(f"wire type {wire} of field {number} at offset {where}")
        if at > end:
            raise PprofError(f"field {number} at offset {where} runs past its message's end {end}")
        yield number, wire, value, where


def _ints(buf, wire, value):
    """A repeated integer field, packed (LEN) or not."""
    if wire != LEN:
        return [value]
    out = []
    at, end = value
    while at < end:
        v, at = _varint(buf, at)
        out.append(v)
    return out


def _signed(v):
    return v - (1 << 64) if v >= 1 << 63 else v


class Sample:
    """One sample: `frames` (file, line, function) innermost first, `values` by sample type
    (`allocations`, `space`), `labels` {key: str or int}."""

    __slots__ = ("frames", "values", "labels")

    def __init__(self, frames, values, labels):
        self.frames = frames
        self.values = values
        self.labels = labels

    def __eq__(self, other):
        return (self.frames, self.values, self.labels) == (other.frames, other.values, other.labels)

    def __repr__(self):
        return f"Sample({self.frames!r}, {self.values!r}, {self.labels!r})"


def decode(data):
    """The samples of a pprof profile (gzipped or not)."""
    raw = bytes(data)
    if raw[:2] == b"\x1f\x8b":
        try:
            raw = gzip.decompress(raw)
        except (OSError, EOFError, zlib.error) as e:
            raise PprofError(f"not a gzip stream: {e}") from None
    strings, types, samples, locations, functions = [], [], [], {}, {}
    for number, wire, value, _ in _fields(raw):
        if number == 6 and wire == LEN:
            strings.append(raw[value[0] : value[1]].decode("utf-8", "replace"))
        elif number == 1 and wire == LEN:
            t = {n: v for n, w, v, _ in _fields(raw, *value) if w == VARINT}
            types.append(t.get(1, 0))
        elif number == 2 and wire == LEN:
            samples.append(value)
        elif number == 4 and wire == LEN:
            ident, lines = 0, []
            for n, w, v, _ in _fields(raw, *value):
                if n == 1 and w == VARINT:
                    ident = v
                elif n == 4 and w == LEN:
                    line = {nn: vv for nn, ww, vv, _ in _fields(raw, *v) if ww == VARINT}
                    lines.append((line.get(1, 0), _signed(line.get(2, 0))))
            locations[ident] = lines
        elif number == 5 and wire == LEN:
            f = {n: v for n, w, v, _ in _fields(raw, *value) if w == VARINT}
            functions[f.get(1, 0)] = (f.get(2, 0), f.get(4, 0))

    def text(i):
        return strings[i] if 0 <= i < len(strings) else ""

    names = [text(t) for t in types]
    out = []
    for start, end in samples:
        location_ids, values, labels = [], [], {}
        for n, w, v, _ in _fields(raw, start, end):
            if n == 1:
                location_ids += _ints(raw, w, v)
            elif n == 2:
                values += [_signed(x) for x in _ints(raw, w, v)]
            elif n == 3 and w == LEN:
                label = {nn: vv for nn, ww, vv, _ in _fields(raw, *v) if ww == VARINT}
                key = text(label.get(1, 0))
                labels[key] = text(label[2]) if label.get(2) else _signed(label.get(3, 0))
        frames = []
        for loc in location_ids:
            # A location's lines are innermost first (inlined frames before their caller).
            for function_id, line in locations.get(loc, ()):
                name, filename = functions.get(function_id, (0, 0))
                frames.append((text(filename), line, text(name)))
        out.append(Sample(frames, dict(zip(names, values)), labels))
    return out
