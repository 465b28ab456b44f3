"""The shim's control API (shim/include/gpuleak.h), reached through ctypes.

Under `gpuleak run` (or `LD_PRELOAD=libgpuleak.so`) the shim is already loaded into the
process and its functions are in the global symbol scope, so they are looked up there
(`ctypes.CDLL(None)`, which is `dlopen(NULL)`); nothing is loaded here. Without the shim every
function is absent and the Python API does nothing.
"""

import ctypes
import os

_FUNCTIONS = {
    # name: (restype, argtypes)
    "gpuleak_mark": (None, [ctypes.c_char_p, ctypes.c_uint64]),
    "gpuleak_region_begin": (None, [ctypes.c_char_p]),
    "gpuleak_region_end": (None, [ctypes.c_char_p]),
    "gpuleak_live_bytes": (ctypes.c_uint64, [ctypes.c_int]),
    "gpuleak_snapshot": (ctypes.c_uint64, [ctypes.c_char_p]),
    "gpuleak_trace_path": (ctypes.c_char_p, []),
    "gpuleak_window_begin": (None, [ctypes.c_uint64]),
    "gpuleak_window_stats": (ctypes.c_int, [ctypes.POINTER(ctypes.c_uint64), ctypes.c_int]),
    "gpuleak_framework_record": (ctypes.c_int, [ctypes.c_uint, ctypes.c_char_p, ctypes.c_size_t]),
    "gpuleak_snapshot_generation": (ctypes.c_uint64, []),
    "gpuleak_workspaces": (ctypes.c_int, [ctypes.POINTER(ctypes.c_uint64), ctypes.c_int]),
}


class Shim:
    """The control functions found in this process (each `None` when absent)."""

    def __init__(self, handle=None):
        self.functions = {}
        if handle is None:
            try:
                handle = ctypes.CDLL(None)
            except OSError:
                handle = None
        for name, (restype, argtypes) in _FUNCTIONS.items():
            try:
                f = getattr(handle, name) if handle is not None else None
            except AttributeError:
                f = None
            if f is not None:
                f.restype = restype
                f.argtypes = argtypes
            self.functions[name] = f

    @property
    def loaded(self):
        """Whether the shim is in this process (its oldest control function is found)."""
        return self.functions["gpuleak_mark"] is not None

    def call(self, name, *args, default=None):
        f = self.functions.get(name)
        return default if f is None else f(*args)


_SHIM = None


def shim():
    """The shim of this process, looked up once."""
    global _SHIM
    if _SHIM is None:
        _SHIM = Shim()
    return _SHIM


def encode(name):
    """A name for the C API: None stays NULL, str is UTF-8."""
    if name is None:
        return None
    if isinstance(name, bytes):
        return name
    return str(name).encode("utf-8", "replace")


def loaded_library_path():
    """The path of the libgpuleak.so mapped into this process, or None."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            for line in maps:
                parts = line.split(None, 5)
                if len(parts) == 6 and os.path.basename(parts[5].strip()) == "libgpuleak.so":
                    return parts[5].strip()
    except OSError:
        pass
    return None


class WindowStats:
    """The counters of the shim's open window (`gpuleak_window_stats`): allocations made in
    it, bytes allocated in it, bytes allocated in it and still live, the highest those have
    been, and the id of the snapshot written when the watch was passed (0: none)."""

    __slots__ = ("allocations", "allocated_bytes", "live_bytes", "peak_bytes", "watch_snapshot")

    def __init__(self, values):
        self.allocations, self.allocated_bytes, self.live_bytes, self.peak_bytes, self.watch_snapshot = values

    def __repr__(self):
        return "WindowStats(" + ", ".join(f"{k}={getattr(self, k)}" for k in self.__slots__) + ")"


_STATS = (ctypes.c_uint64 * 5)()


def window_begin(watch_bytes=0):
    """Opens a window in the shim (False when the shim has no windows)."""
    s = shim()
    if s.functions.get("gpuleak_window_begin") is None or s.functions.get("gpuleak_window_stats") is None:
        return False
    s.functions["gpuleak_window_begin"](int(watch_bytes) & (2**64 - 1))
    return True


def window_stats():
    """The open window's `WindowStats`, or None without a window's shim."""
    f = shim().functions.get("gpuleak_window_stats")
    if f is None or f(_STATS, 5) != 5:
        return None
    return WindowStats(tuple(_STATS))


_WORKSPACES = 256
_PAIRS = (ctypes.c_uint64 * (2 * _WORKSPACES))()


def workspaces():
    """{address: size} of the device memory handed to cuBLAS and cuBLASLt as workspaces so far
    (empty without a shim that records them)."""
    f = shim().functions.get("gpuleak_workspaces")
    if f is None:
        return {}
    n = max(0, min(f(_PAIRS, _WORKSPACES), _WORKSPACES))
    return {_PAIRS[2 * i]: _PAIRS[2 * i + 1] for i in range(n)}
