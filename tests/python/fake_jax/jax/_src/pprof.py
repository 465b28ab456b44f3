"""pprof profiles written as JAX's `device_memory_profile()` writes them (gzipped
`perftools.profiles.Profile`: sample types, samples with packed location ids and values and
string labels, one location per (function, line), one function per (name, file), the string
table with "" first). gpuleak's tests read a real JAX profile and this module's output with the
same decoder (gpuleak/_pprof.py)."""

import gzip

VARINT, LEN = 0, 2


def _put_varint(out, v):
    v &= (1 << 64) - 1
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _put(out, number, value):
    if isinstance(value, (bytes, bytearray)):
        _put_varint(out, number << 3 | LEN)
        _put_varint(out, len(value))
        out.extend(value)
    else:
        _put_varint(out, number << 3 | VARINT)
        _put_varint(out, value)


def _packed(values):
    out = bytearray()
    for v in values:
        _put_varint(out, v)
    return out


def encode(samples, sample_types=(("allocations", "count"), ("space", "bytes"))):
    """A gzipped pprof profile of `samples`: (frames innermost first as (file, line, function),
    {sample type: value}, {label: str or int}) triples."""
    strings = {"": 0}

    def sid(text):
        return strings.setdefault(text, len(strings))

    functions, locations = {}, {}
    body = bytearray()
    for name, unit in sample_types:
        t = bytearray()
        _put(t, 1, sid(name))
        _put(t, 2, sid(unit))
        _put(body, 1, t)
    for frames, values, labels in samples:
        ids = []
        for filename, line, function in frames:
            fkey = (function, filename)
            if fkey not in functions:
                functions[fkey] = len(functions) + 1
            lkey = (functions[fkey], line)
            if lkey not in locations:
                locations[lkey] = len(locations) + 1
            ids.append(locations[lkey])
        rec = bytearray()
        _put(rec, 1, _packed(ids))
        _put(rec, 2, _packed(values.get(name, 0) for name, _u in sample_types))
        for key, value in labels.items():
            label = bytearray()
            _put(label, 1, sid(key))
            if isinstance(value, str):
                _put(label, 2, sid(value))
            else:
                _put(label, 3, value)
            _put(rec, 3, label)
        _put(body, 2, rec)
    for (function_id, line), ident in locations.items():
        loc = bytearray()
        _put(loc, 1, ident)
        ln = bytearray()
        _put(ln, 1, function_id)
        _put(ln, 2, line)
        _put(loc, 4, ln)
        _put(body, 4, loc)
    for (function, filename), ident in functions.items():
        fn = bytearray()
        _put(fn, 1, ident)
        _put(fn, 2, sid(function))
        _put(fn, 3, sid(function))
        _put(fn, 4, sid(filename))
        _put(body, 5, fn)
    for text in strings:
        _put(body, 6, text.encode("utf-8"))
    return gzip.compress(bytes(body), mtime=0)
