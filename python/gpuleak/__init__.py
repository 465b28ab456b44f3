"""gpuleak for Python: the control API of libgpuleak.so, and leak checks of blocks of code.

Run the program under the shim (`gpuleak run -- python train.py`); then::

    import gpuleak

    for step in range(steps):
        gpuleak.mark("step", step)            # a Mark record in the trace
        with gpuleak.region("forward"):       # Region records around the block
            forward()
        if gpuleak.live_bytes() > 8 << 30:    # device memory live now, as the shim counts it
            gpuleak.snapshot("over 8 GiB")    # a Snapshot record: gpuleak report --at ID

    with gpuleak.check(max_leaked_bytes=0):   # raises gpuleak.LeakError, with the stacks,
        evaluate()                            # when memory allocated here outlives the block

Without the shim every function does nothing (`live_bytes()` and `snapshot()` give 0, `check()`
checks nothing and warns once, or raises under GPULEAK_REQUIRE_SHIM=1) and `gpuleak.active()` is
False, so the calls can stay in production code.
"""

import contextlib
import functools
import gc
import os
import sys
import warnings

from . import _frameworks, _shim, _tool, _watch
from ._sizes import format_size, parse_size
from ._tool import ToolError

__all__ = [
    "Frame",
    "Leak",
    "LeakCheck",
    "LeakError",
    "ToolError",
    "active",
    "check",
    "format_size",
    "frameworks_uncached",
    "live_bytes",
    "mark",
    "parse_size",
    "region",
    "snapshot",
    "trace_path",
    "window",
]


def active():
    """True when libgpuleak.so is loaded into this process (run under `gpuleak run` or
    `LD_PRELOAD`), so that the functions of this module reach it."""
    return _shim.shim().loaded


def mark(name, value=0):
    """Writes a Mark record (for example a training step) into the trace."""
    _shim.shim().call("gpuleak_mark", _shim.encode(name), int(value) & (2**64 - 1))


class region(contextlib.ContextDecorator):
    """Region records around a block (`with gpuleak.region("forward"):`) or a function
    (`@gpuleak.region("forward")`)."""

    def __init__(self, name):
        self.name = _shim.encode(name)

    def __enter__(self):
        _shim.shim().call("gpuleak_region_begin", self.name)
        return self

    def __exit__(self, *exc):
        _shim.shim().call("gpuleak_region_end", self.name)
        return False


def live_bytes(device=-1):
    """Device memory live now on `device` (every device if negative), in bytes the program
    asked for, as the shim counts it; 0 without the shim. Counted from the first call unless
    the program runs with GPULEAK_LIVE=1 (see docs/ops.md)."""
    return int(_shim.shim().call("gpuleak_live_bytes", int(device), default=0))


def snapshot(reason=None):
    """Writes a Snapshot record; its id (from 1), for `gpuleak report --at ID`, or 0 when
    nothing is traced. The state of a framework's caching allocator (PyTorch, once the program
    has used CUDA through it) is written with it (docs/frameworks.md)."""
    ident = _watch.own_snapshot(reason)
    if ident:
        _frameworks.dump("snapshot", ident)
    return ident


def frameworks_uncached():
    """True under `gpuleak run --no-framework-cache` (which sets GPULEAK_NO_FRAMEWORK_CACHE=1):
    the caching allocators of PyTorch, CuPy and JAX are off, so what their modules hold is
    tensors, not cache."""
    return os.environ.get("GPULEAK_NO_FRAMEWORK_CACHE") == "1"


def trace_path():
    """The path of this process's trace file, or None when nothing is traced (no shim, a
    shim older than gpuleak_trace_path, or GPULEAK_DISABLE=1). Starts the trace."""
    p = _shim.shim().call("gpuleak_trace_path")
    return os.fsdecode(p) if p else None


class Frame:
    """One frame of an allocation stack, as `gpuleak report --format json` names it."""

    __slots__ = ("function", "file", "line", "module", "address")

    def __init__(self, function=None, file=None, line=None, module=None, address=None):
        self.function = function
        self.file = file
        self.line = line
        self.module = module
        self.address = address

    @classmethod
    def from_json(cls, f):
        return cls(f.get("function"), f.get("file"), f.get("line"), f.get("module"), f.get("address"))

    def __str__(self):
        parts = [self.function or self.address or "??"]
        if self.file:
            # Python sources keep their path (it says which package); native sources are named
            # as the text report names them, by file name.
            file = self.file if self.file.endswith(".py") else os.path.basename(self.file)
            parts.append(f"{file}:{self.line}" if self.line else file)
        if self.module:
            parts.append(f"({os.path.basename(self.module)})")
        return " ".join(parts)

    def __repr__(self):
        return f"Frame({self})"


class Leak:
    """An allocation site whose live bytes grew between two snapshots."""

    def __init__(self, bytes, stack_id, kind=None, api=None, pool=False, stack=()):
        self.bytes = bytes
        self.stack_id = stack_id
        self.kind = kind
        self.api = api
        self.pool = pool
        self.stack = list(stack)

    def trimmed(self, caller):
        """The stack up to the frame of `caller`, a (file, function) pair, when it has one:
        the frames outside it (the interpreter, a test runner) say nothing about the leak."""
        file, function = caller
        for i, frame in enumerate(self.stack):
            name = frame.function or ""
            if frame.file == file and (name == function or name.endswith("." + function)):
                return self.stack[: i + 1]
        return self.stack

    def format(self, max_frames=32, caller=None, state="still live"):
        """The leak as text: size, kind and the stack (cut at `caller`, see `trimmed`)."""
        stack = self.trimmed(caller) if caller else self.stack
        what = f"{self.bytes} bytes ({format_size(self.bytes)})"
        how = ", ".join(x for x in (self.kind, self.api and f"allocated by {self.api}") if x)
        pool = " [held by a caching allocator]" if self.pool else ""
        lines = [f"{what} {state}{pool}" + (f" ({how})" if how else "") + ":"]
        for i, frame in enumerate(stack[:max_frames]):
            lines.append(f"    #{i} {frame}")
        if len(stack) > max_frames:
            lines.append(f"    ... {len(stack) - max_frames} more frames")
        if not stack:
            lines.append("    (no stack recorded)")
        return "\n".join(lines)

    def __repr__(self):
        return f"Leak(bytes={self.bytes}, stack_id={self.stack_id}, kind={self.kind!r})"


class Window:
    """What changed between two snapshots of this process (`gpuleak report --at A..B`)."""

    def __init__(self, first, last, doc):
        self.first = first
        self.last = last
        self.report = doc
        proc = doc.get("process") or (doc.get("processes") or [None])[0]
        memory = (proc or {}).get("memory") or {}
        snap = memory.get("snapshot") or {}
        sites = {s["stack_id"]: s for s in memory.get("sites") or ()}
        self.live_bytes_before = snap.get("live_bytes") or 0
        self.live_bytes_after = snap.get("to_live_bytes") or 0
        # The highest live bytes from A to B (None from an analyzer without the field).
        self.peak_bytes = snap.get("peak_bytes_between")
        self.grown = []
        for row in snap.get("sites") or ():
            delta = row.get("delta") or 0
            if delta <= 0:
                continue
            site = sites.get(row["stack_id"], {})
            self.grown.append(
                Leak(
                    delta,
                    row["stack_id"],
                    kind=site.get("kind"),
                    api=site.get("api"),
                    pool=bool(site.get("pool")),
                    stack=[Frame.from_json(f) for f in site.get("stack") or ()],
                )
            )
        self.grown.sort(key=lambda leak: -leak.bytes)

    def leaks(self, count_pools=None, tensors=False):
        """Sites that grew; memory held by caching allocators only with `count_pools` (by
        default: when the program runs under `gpuleak run --no-framework-cache`). With
        `tensors` (a framework's tensors are judged instead), driver memory allocated through
        a framework's Python code is its allocator's too."""
        if count_pools is None:
            count_pools = frameworks_uncached()
        return [
            leak
            for leak in self.grown
            if count_pools or not (leak.pool or (tensors and _frameworks.is_framework_stack(leak.stack)))
        ]


def _tensor_leaks(before, after):
    """Tensor sites whose live bytes grew between two `_frameworks.tensor_sites()` readings."""
    grown = []
    for key, (size, frames) in after.items():
        delta = size - before.get(key, (0, ()))[0]
        if delta > 0:
            # From the user's frame out: the framework's own frames say nothing of the leak.
            user = _frameworks.user_frame(frames)
            stack = [Frame(function=name, file=file, line=line) for file, line, name in frames[user:]]
            grown.append(Leak(delta, 0, kind="tensor", api=None, stack=stack))
    grown.sort(key=lambda leak: -leak.bytes)
    return grown


def window(first, last, trace=None):
    """What changed between snapshots `first` and `last` of this process's trace, read from the
    running trace by the gpuleak command (`gpuleak report --format json --at FIRST..LAST`)."""
    trace = trace or trace_path()
    if not trace:
        raise ToolError("nothing is traced in this process: run it under gpuleak run")
    return Window(first, last, _tool.report_json(trace, "--at", f"{first}..{last}"))


def _caller(depth):
    """(file, function) of the Python frame `depth` levels above the caller of this function."""
    try:
        frame = sys._getframe(depth + 1)
    except ValueError:
        return None
    code = frame.f_code
    return (code.co_filename, getattr(code, "co_qualname", code.co_name))


class LeakError(AssertionError):
    """Memory allocated inside a `gpuleak.check()` block outlived it by more than the limit.

    `leaks` lists the sites that grew (largest first), each with its stack; `leaked_bytes` is
    their sum; `limit` the allowed bytes."""

    def __init__(self, leaks, limit, what="the block", caller=None):
        self.leaks = leaks
        self.limit = limit
        self.leaked_bytes = sum(leak.bytes for leak in leaks)
        head = (
            f"gpuleak: {self.leaked_bytes} bytes ({format_size(self.leaked_bytes)}) allocated in "
            f"{what} outlived it (limit {limit} bytes) at {len(leaks)} "
            f"site{'s' if len(leaks) != 1 else ''}"
        )
        super().__init__("\n".join([head] + [leak.format(caller=caller) for leak in leaks]))


_NO_SHIM = "gpuleak.check: libgpuleak.so is not loaded, so nothing is checked: run under gpuleak run"
_warned_no_shim = False


def _unchecked(strict):
    """A check that cannot check: raises under `strict` or GPULEAK_REQUIRE_SHIM=1, else warns
    once per process (a check that silently passes would read as "no leak")."""
    global _warned_no_shim
    if strict or os.environ.get("GPULEAK_REQUIRE_SHIM") == "1":
        raise ToolError(_NO_SHIM)
    if not _warned_no_shim:
        _warned_no_shim = True
        warnings.warn(_NO_SHIM + " (GPULEAK_REQUIRE_SHIM=1 makes this an error)", RuntimeWarning, stacklevel=3)


class LeakCheck:
    """`with gpuleak.check(max_leaked_bytes=0):`: a snapshot at entry and one at exit, then
    the sites whose live bytes grew in between (memory allocated in the block and still live
    after it, net of what the block freed at the same sites). Raises `LeakError` with their
    stacks when the total is over the limit, unless the block raised first. The result is kept
    on the object (`leaked_bytes`, `leaks`, `checked`).

    Allocations of every thread count, not only the calling one. A garbage collection runs
    before the exit snapshot unless `collect=False`. Memory that caching allocators (PyTorch,
    CuPy, JAX, RMM) hold counts with `count_pools=True`; by default (`None`) it counts under
    `gpuleak run --no-framework-cache`, where those caches are off and each tensor is a real
    allocation. Without the shim nothing is checked (`checked` stays False) and the first such
    check of the process warns (`RuntimeWarning`); `strict=True` or the setting
    `GPULEAK_REQUIRE_SHIM=1` raises `ToolError` (a `RuntimeError`) instead."""

    def __init__(self, max_leaked_bytes=0, count_pools=None, strict=False, what="the block", collect=True):
        self.limit = parse_size(max_leaked_bytes)
        self.count_pools = count_pools
        self.collect = collect
        self.strict = strict
        self.what = what
        self.first = 0
        self.last = 0
        self.checked = False
        self.leaks = []
        self.leaked_bytes = 0
        self.window = None
        self.caller = None
        self.fixed_caller = None
        self.tensors_before = None

    def __enter__(self):
        self.checked = False
        self.leaks = []
        self.leaked_bytes = 0
        self.caller = self.fixed_caller or _caller(1)
        self.first = snapshot("gpuleak.check begin") if active() else 0
        # With a framework recording (and its cache on), its tensors are judged, not the
        # driver memory its cache holds.
        self.tensors_before = None if self._count_pools() else _frameworks.tensor_sites()
        if not self.first:
            _unchecked(self.strict)
        return self

    def __exit__(self, exc_type, exc, tb):
        if not self.first:
            return False
        if exc_type is not None:
            return False  # the block's own exception says more than a leak report would
        if self.collect:
            gc.collect()  # memory held only by unreachable cycles is not the block's leak
        self.last = snapshot("gpuleak.check end")
        self.window = window(self.first, self.last)
        after = _frameworks.tensor_sites() if self.tensors_before is not None else None
        judged = after is not None
        self.leaks = self.window.leaks(self.count_pools, tensors=judged)
        if judged:
            self.leaks = _tensor_leaks(self.tensors_before, after) + self.leaks
        self.leaked_bytes = sum(leak.bytes for leak in self.leaks)
        self.checked = True
        if self.leaked_bytes > self.limit:
            raise LeakError(self.leaks, self.limit, self.what, self.caller)
        return False

    def _count_pools(self):
        return frameworks_uncached() if self.count_pools is None else self.count_pools

    def __call__(self, func):
        @functools.wraps(func)
        def checked(*args, **kwargs):
            what = f"{func.__qualname__}()"
            inner = LeakCheck(self.limit, self.count_pools, self.strict, what, self.collect)
            code = func.__code__
            inner.fixed_caller = (code.co_filename, getattr(code, "co_qualname", code.co_name))
            with inner:
                return func(*args, **kwargs)

        return checked


def check(max_leaked_bytes=0, count_pools=None, strict=False, collect=True):
    """A context manager (or decorator) that raises `LeakError` when memory allocated inside
    it outlives it by more than `max_leaked_bytes` (bytes, or a size like "1 MB", "64KiB"; every
    unit a power of 1024, see `parse_size`; ValueError on anything else).
    `collect` runs a garbage collection before the exit snapshot. See `LeakCheck`."""
    return LeakCheck(max_leaked_bytes, count_pools=count_pools, strict=strict, collect=collect)


if _shim.shim().loaded:
    # Under the shim, PyTorch's allocator is read from inside once the program uses it.
    _frameworks.install()
