"""The shim's gpuleak_framework_record entry called directly through ctypes, for
tests/e2e/python_frameworks.rs: what it accepts, what it refuses, and that a refusal changes
nothing. Prints one `name=RESULT` per call, then `done`."""

import ctypes

from gpuleak import _frameworks

f = ctypes.CDLL(None).gpuleak_framework_record
f.restype = ctypes.c_int
f.argtypes = [ctypes.c_uint, ctypes.c_char_p, ctypes.c_size_t]


def call(name, kind, payload, length=None):
    print(f"{name}={f(kind, payload, len(payload) if length is None else length)}", flush=True)


end = bytearray()
for v in (1, 0, 0):
    _frameworks._u(end, v)
call("end", _frameworks.END, bytes(end))
call("kind_16", 16, bytes(end))
call("kind_77", 77, bytes(end))
call("kind_huge", 2**32 - 1, bytes(end))
call("cut_short", _frameworks.END, bytes(end[:2]))
call("null", _frameworks.END, None, 3)
call("too_long", _frameworks.END, bytes(end) + bytes(17000))
call("bad_blocks", _frameworks.BLOCKS, bytes([1, 0x80, 0x10, 4, 0, 2, 2, 2]))
print("done", flush=True)
