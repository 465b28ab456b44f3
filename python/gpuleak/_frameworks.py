"""The frameworks' caching allocators seen from inside (PyTorch, CuPy, JAX), written into the trace.

Nothing here imports a framework or initializes CUDA. `install()` waits for the program to
import torch, cupy or jax (a finder on `sys.meta_path`, or the module already in
`sys.modules`). JAX's adapter is in `_jax.py`.

PyTorch: once the program has initialized CUDA through torch (`torch.cuda._lazy_call` runs a
call at that moment, or at once if it is past), the adapter turns on the allocator's recording
of a Python stack for each live block, in its cheapest mode (`_record_memory_history(
enabled="state", context="state", stacks="python")`; `GPULEAK_TORCH_STACKS` asks for C++ frames
too, or for no recording), and attaches an out-of-memory observer. Its state is
`torch.cuda.memory._snapshot()`.

CuPy: at import, a `cupy.cuda.MemoryHook` is installed in the importing thread. It sees the
chunks the memory pool allocates from the driver, the blocks the pool hands out (with the
caller's Python stack) and the blocks that go back to it. Its state is built from these, with
the default pool's `used_bytes()` and `total_bytes()` as the counters.

Each state is written as records 70 to 76 through the shim's `gpuleak_framework_record`
(docs/frameworks.md has the layout): at exit, from an `atexit` handler, before the
interpreter's teardown frees the program's globals; at each `gpuleak.snapshot()` and
`gpuleak.check()` boundary; for PyTorch, from the out-of-memory observer, before torch
raises; and at the snapshots the shim takes on its own (signal, period, out of memory), from
one watcher thread (`_watch.py`). `GPULEAK_FRAMEWORKS=0` turns all of it off.
"""

import atexit
import bisect
import itertools
import os
import sys

from . import _shim, _watch

# Record kinds (format/src/record.rs).
STATE, SEGMENT, BLOCKS, FRAMES, STATS, OOM, END = range(70, 77)
LAYOUT = 1
# The shim refuses payloads over 16 KiB; blocks go 256 to a record (at most 51 bytes each).
BLOCKS_PER_RECORD = 256
MAX_PAYLOAD = 16 * 1024
MAX_FRAMES = 32
BLOCK_STATES = {"active_allocated": 1, "active_pending_free": 2, "inactive": 3}
POOLS = {"large": 0, "small": 1}


def enabled():
    """False under GPULEAK_FRAMEWORKS=0."""
    return os.environ.get("GPULEAK_FRAMEWORKS", "1") != "0"


TORCH_STACKS = ("python", "all", "none")


def torch_stacks():
    """GPULEAK_TORCH_STACKS: the stack PyTorch's allocator keeps for each live block. `python`
    (the default: Python frames), `all` (Python and C++ frames, at a higher cost per
    allocation) or `none` (no recording: tensors are counted and joined, without their line;
    no cost in the allocator). Anything else: one line on stderr, and `python`."""
    value = os.environ.get("GPULEAK_TORCH_STACKS", "python").strip().lower() or "python"
    if value not in TORCH_STACKS:
        sys.stderr.write(
            f"gpuleak: GPULEAK_TORCH_STACKS={os.environ.get('GPULEAK_TORCH_STACKS')!r} is not one of "
            f"{', '.join(TORCH_STACKS)}; using python\n"
        )
        return "python"
    return value


# Field encoders (format/src/varint.rs, format/src/fields.rs).


def _u(out, v):
    v = int(v) & (2**64 - 1)
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)


def _i(out, v):
    v = int(v)
    _u(out, (v << 1) ^ (v >> 63) if v < 0 else v << 1)


def _s(out, text):
    b = str(text).encode("utf-8", "replace")
    _u(out, len(b))
    out.extend(b)


def _addrs(out, values):
    _u(out, len(values))
    prev = 0
    for v in values:
        v = int(v) & (2**64 - 1)
        d = (v - prev) & (2**64 - 1)
        if d >= 2**63:
            d -= 2**64
        _i(out, d)
        prev = v


class _Writer:
    """Hands encoded records to the shim; stops at the first refusal (no shim, not traced)."""

    def __init__(self):
        self.function = _shim.shim().functions.get("gpuleak_framework_record")

    @property
    def available(self):
        return self.function is not None

    def write(self, kind, payload):
        payload = bytes(payload)
        return self.function(kind, payload, len(payload)) == 0


class TorchAdapter:
    """PyTorch's caching allocator, once the program has imported torch."""

    def __init__(self, torch):
        self.torch = torch
        # Whether the adapter has started (CUDA initialized), whatever GPULEAK_TORCH_STACKS asks
        # PyTorch to record.
        self.recording = False
        self.writer = None
        self.in_oom = False
        self.exited = False

    def attach(self):
        """Waits for the program's CUDA initialization, and registers the exit state."""
        cuda = getattr(self.torch, "cuda", None)
        if cuda is None:
            return
        lazy_call = getattr(cuda, "_lazy_call", None)
        if lazy_call is not None:
            try:
                lazy_call(self.start)
            except Exception:  # noqa: BLE001 - never break the program
                pass
        elif self._initialized():
            self.start()
        atexit.register(self.at_exit)

    def _initialized(self):
        try:
            return bool(self.torch.cuda.is_initialized())
        except Exception:  # noqa: BLE001
            return False

    def start(self):
        """Turns on the allocator's recording (CUDA is initialized now)."""
        if self.recording:
            return
        self.recording = True
        stacks = torch_stacks()
        if stacks != "none":
            self._record(stacks)
        attach = getattr(getattr(self.torch, "_C", None), "_cuda_attach_out_of_memory_observer", None)
        if attach is not None:
            try:
                attach(self.on_oom)
            except Exception:  # noqa: BLE001
                pass

    def _record(self, stacks):
        """Turns on the allocator's recording of `stacks` (python or all) for each live block."""
        memory = self.torch.cuda.memory
        try:
            memory._record_memory_history(enabled="state", context="state", stacks=stacks)
        except TypeError:
            try:  # PyTorch 2.0 and older: enabled, record_context, trace_alloc_max_entries
                memory._record_memory_history(
                    True, record_context=True, trace_alloc_max_entries=1, record_context_cpp=stacks == "all"
                )
            except Exception as e:  # noqa: BLE001
                sys.stderr.write(f"gpuleak: cannot record PyTorch's allocator stacks: {e!r}\n")
        except Exception as e:  # noqa: BLE001
            sys.stderr.write(f"gpuleak: cannot record PyTorch's allocator stacks: {e!r}\n")

    def on_oom(self, device, alloc, device_allocated, device_free):
        """PyTorch's out-of-memory observer: the state, before torch raises."""
        if self.in_oom:
            return
        self.in_oom = True
        try:
            self.dump("oom", oom=(device, alloc, device_allocated, device_free))
        finally:
            self.in_oom = False

    def at_exit(self):
        if not self.exited:
            self.exited = True
            self.dump("exit")

    def dump(self, reason, snapshot=0, oom=None):
        """Writes the allocator's state; its number, or 0 when nothing was written."""
        try:
            return self._dump(reason, snapshot, oom)
        except Exception as e:  # noqa: BLE001 - the program's own work comes first
            sys.stderr.write(f"gpuleak: cannot write PyTorch's allocator state: {e!r}\n")
            return 0

    def _dump(self, reason, snapshot, oom):
        if not self.recording:
            if not self._initialized():
                return 0  # the program never used CUDA through torch: nothing to say
            self.start()
        if self.writer is None:
            self.writer = _Writer()
        w = self.writer
        if not w.available:
            return 0
        cuda = self.torch.cuda
        snap = cuda.memory._snapshot()
        devices = {int(seg.get("device", 0)) for seg in snap.get("segments", ())}
        if oom is not None:
            devices.add(int(oom[0]))
        stats = {
            d: (cuda.memory_allocated(d), cuda.memory_reserved(d), cuda.max_memory_reserved(d)) for d in devices
        }
        return _write_state(w, "torch", reason, snapshot, snap, stats, oom)


def _next_state():
    """A state number unique in the process (every framework's states share the numbering).
    `next()` on a count is one step under the GIL: the snapshot watcher's thread
    (`_watch.py`) takes numbers too."""
    return next(_STATES)


_STATES = itertools.count(1)


def _write_state(w, framework, reason, snapshot, snap, stats, oom=None):
    """Writes one allocator state: `snap` in the shape of PyTorch's `_snapshot()` (segments
    with their blocks, live blocks with frames), `stats` {device: (allocated, reserved,
    peak_reserved)}, `oom` (device, requested, device_allocated, device_free) or None. Returns
    the state's number, or 0 when the shim refused its first record."""
    state = _next_state()
    head = bytearray()
    _u(head, state)
    _u(head, LAYOUT)
    _s(head, framework)
    _s(head, reason)
    _u(head, snapshot)
    if not w.write(STATE, head):
        return 0
    frames_ids = {}
    segments = blocks = 0
    for seg in snap.get("segments", ()):
        device = int(seg.get("device", 0))
        address = int(seg["address"])
        rec = bytearray()
        _u(rec, state)
        _i(rec, device)
        _u(rec, address)
        _u(rec, seg["total_size"])
        _u(rec, seg.get("stream", 0))
        _u(rec, POOLS.get(seg.get("segment_type"), 0))
        w.write(SEGMENT, rec)
        segments += 1
        chunk = []
        for block in seg.get("blocks", ()):
            state_code = BLOCK_STATES.get(block.get("state"))
            if state_code is None:
                continue
            frames = 0
            if state_code == 1 and block.get("frames"):
                frames = _frames(w, state, block["frames"], frames_ids)
            chunk += [
                int(block["address"]) - address,
                int(block["size"]),
                int(block.get("requested_size", block["size"])),
                state_code,
                frames,
            ]
            blocks += 1
            if len(chunk) >= 5 * BLOCKS_PER_RECORD:
                _blocks(w, state, address, chunk)
                chunk = []
        if chunk:
            _blocks(w, state, address, chunk)
    for device in sorted(stats):
        rec = bytearray()
        _u(rec, state)
        _i(rec, device)
        for v in stats[device]:
            _u(rec, max(int(v), 0))
        w.write(STATS, rec)
    if oom is not None:
        rec = bytearray()
        _u(rec, state)
        _i(rec, oom[0])
        for v in oom[1:]:
            _u(rec, max(int(v), 0))
        w.write(OOM, rec)
    end = bytearray()
    _u(end, state)
    _u(end, segments)
    _u(end, blocks)
    w.write(END, end)
    return state


def _blocks(w, state, address, chunk):
    rec = bytearray()
    _u(rec, state)
    _u(rec, address)
    _addrs(rec, chunk)
    w.write(BLOCKS, rec)


def _is_python_file(filename):
    """Whether a frame's file is Python source (PyTorch's C++ frames, under
    GPULEAK_TORCH_STACKS=all, name C++ sources or `??`)."""
    return filename.endswith((".py", ".pyw")) or filename.startswith("<")


def _kept_frames(frames):
    """At most MAX_FRAMES of a stack, innermost first: with C++ frames among them, every Python
    frame first (the user's line is one of them), then the innermost C++ frames."""
    if len(frames) <= MAX_FRAMES:
        return frames
    python = [i for i, f in enumerate(frames) if _is_python_file(str(f.get("filename", "?")))]
    keep = set(python[:MAX_FRAMES])
    for i in range(len(frames)):
        if len(keep) >= MAX_FRAMES:
            break
        keep.add(i)
    return [frames[i] for i in sorted(keep)]


def _frames(w, state, frames, ids):
    """The id of a block's stack in this state, written the first time it is met."""
    key = tuple((f.get("filename", "?"), f.get("line", 0), f.get("name", "?")) for f in _kept_frames(frames))
    found = ids.get(key)
    if found is not None:
        return found
    ident = len(ids) + 1
    for keep in range(len(key), 0, -1):
        rec = bytearray()
        _u(rec, ident)
        _u(rec, state)
        _u(rec, 2 * keep)
        for filename, _line, name in key[:keep]:
            _s(rec, filename[-1024:])
            _s(rec, name[-256:])
        _addrs(rec, [max(int(line), 0) for _f, line, _n in key[:keep]])
        if len(rec) <= MAX_PAYLOAD:
            break
    if not w.write(FRAMES, rec):
        return 0
    ids[key] = ident
    return ident


class CupyAdapter:
    """CuPy's memory pool, once the program has imported cupy: a `cupy.cuda.MemoryHook` (CuPy's
    public hook interface) sees each chunk the pool allocates from the driver, each block it
    hands out (with the Python stack, taken here) and each block that goes back to it."""

    def __init__(self, cupy):
        self.cupy = cupy
        self.segments = {}  # address -> [device, size]: the pool's driver allocations seen
        self.live = {}  # address -> (size, requested, device, frames innermost first)
        self.peak = 0
        self.writer = None
        self.exited = False
        self.in_oom = False

    def attach(self):
        """Installs the hook in the importing thread (CuPy's hooks are per thread)."""
        adapter = self

        class _Hook(self.cupy.cuda.MemoryHook):
            name = "gpuleak"

            def alloc_postprocess(self, **kwargs):
                adapter._guard(adapter._alloc, kwargs)

            def malloc_postprocess(self, **kwargs):
                adapter._guard(adapter._malloc, kwargs)

            def free_preprocess(self, **kwargs):
                adapter._guard(adapter._free, kwargs)

        _Hook().__enter__()
        self._observe_out_of_memory()
        atexit.register(self.at_exit)

    def _observe_out_of_memory(self):
        """CuPy has no out-of-memory observer: the adapter puts a function around the current
        allocator (`cupy.cuda.get_allocator()`, the default pool's `malloc` after import) with
        `cupy.cuda.set_allocator`. When the allocator raises `OutOfMemoryError` (after the
        pool's own retry), the function writes the pool's state and raises the same error.
        A program that sets its own allocator later replaces it, and loses only this."""
        cuda = self.cupy.cuda
        get, put = getattr(cuda, "get_allocator", None), getattr(cuda, "set_allocator", None)
        error = getattr(getattr(cuda, "memory", None), "OutOfMemoryError", None)
        if get is None or put is None or error is None:
            return
        try:
            inner = get()
        except Exception:  # noqa: BLE001 - never break the program's import
            return
        if inner is None:
            return  # the program disabled the pool: nothing of CuPy's to judge
        adapter = self

        def gpuleak_malloc(size):
            try:
                return inner(size)
            except error:
                adapter.on_oom(size)
                raise

        gpuleak_malloc.__qualname__ = "gpuleak_malloc"
        gpuleak_malloc.__wrapped__ = inner  # what `inspect.unwrap` and readers of it find
        try:
            put(gpuleak_malloc)
        except Exception:  # noqa: BLE001
            pass

    def on_oom(self, size):
        """The pool's state when its allocator raised out of memory, before the error
        reaches the program: the request, the pool's bytes and the device's free bytes."""
        if self.in_oom:
            return
        self.in_oom = True
        try:
            device, free = 0, 0
            runtime = getattr(self.cupy.cuda, "runtime", None)
            try:
                device = int(runtime.getDevice())
                free = int(runtime.memGetInfo()[0])
            except Exception:  # noqa: BLE001 - the state matters more than these two numbers
                pass
            try:
                reserved = int(self._pool().total_bytes())
            except Exception:  # noqa: BLE001
                reserved = 0
            self.dump("oom", oom=(device, int(size), reserved, free))
        finally:
            self.in_oom = False

    @staticmethod
    def _guard(step, kwargs):
        try:
            step(kwargs)
        except Exception:  # noqa: BLE001 - a hook must never break the program's allocation
            pass

    def _alloc(self, kw):
        ptr = int(kw.get("mem_ptr") or 0)
        if ptr:
            self.segments[ptr] = [int(kw.get("device_id", 0)), int(kw["mem_size"])]

    def _malloc(self, kw):
        ptr = int(kw.get("mem_ptr") or 0)
        if not ptr:
            return
        frames = []
        f = sys._getframe(3)  # past _guard and the hook: the pool's caller
        while f is not None and len(frames) < MAX_FRAMES:
            frames.append((f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
            f = f.f_back
        size = int(kw["mem_size"])
        self.live[ptr] = (size, int(kw.get("size", size)), int(kw.get("device_id", 0)), frames)

    def _free(self, kw):
        self.live.pop(int(kw.get("mem_ptr") or 0), None)

    def at_exit(self):
        if not self.exited:
            self.exited = True
            self.dump("exit")

    def dump(self, reason, snapshot=0, oom=None):
        """Writes the pool's state; its number, or 0 when nothing was written."""
        try:
            return self._dump(reason, snapshot, oom)
        except Exception as e:  # noqa: BLE001 - the program's own work comes first
            sys.stderr.write(f"gpuleak: cannot write CuPy's memory pool state: {e!r}\n")
            return 0

    def _pool(self):
        return self.cupy.get_default_memory_pool()

    def _settle(self):
        """Forgets chunks the pool gave back to the driver (`free_all_blocks`, or its retry
        after an out-of-memory error), which no hook reports: while the pool's
        `total_bytes()` is below the chunks seen, the chunks without a live block go, largest
        first, as long as they fit the difference."""
        excess = sum(size for _d, size in self.segments.values()) - int(self._pool().total_bytes())
        if excess <= 0:
            return
        starts = sorted(self.segments)
        busy = set()
        for ptr in self.live:
            i = bisect.bisect_right(starts, ptr) - 1
            if i >= 0:
                busy.add(starts[i])
        for ptr in sorted((p for p in starts if p not in busy), key=lambda p: -self.segments[p][1]):
            size = self.segments[ptr][1]
            if size <= excess:
                del self.segments[ptr]
                excess -= size

    def snapshot(self):
        """The pool's state in the shape of PyTorch's `_snapshot()`: each chunk a segment, its
        live blocks, and the gaps between them cached free."""
        self._settle()
        starts = sorted(self.segments)
        by_segment = {p: [] for p in starts}
        for ptr in sorted(self.live):
            i = bisect.bisect_right(starts, ptr) - 1
            if i >= 0 and ptr < starts[i] + self.segments[starts[i]][1]:
                by_segment[starts[i]].append(ptr)
        segments = []
        for base in starts:
            device, total = self.segments[base]
            blocks = []
            at = base
            for ptr in by_segment[base]:
                size, requested, _device, frames = self.live[ptr]
                if ptr > at:
                    blocks.append({"address": at, "size": ptr - at, "requested_size": ptr - at, "state": "inactive"})
                blocks.append(
                    {
                        "address": ptr,
                        "size": size,
                        "requested_size": requested,
                        "state": "active_allocated",
                        "frames": [{"filename": f, "line": n, "name": fn} for f, n, fn in frames],
                    }
                )
                at = max(at, ptr + size)
            if at < base + total:
                rest = base + total - at
                blocks.append({"address": at, "size": rest, "requested_size": rest, "state": "inactive"})
            segments.append(
                {"device": device, "address": base, "total_size": total, "segment_type": "large", "blocks": blocks}
            )
        return {"segments": segments}

    def _dump(self, reason, snapshot, oom=None):
        if not self.segments and not self.live and oom is None:
            return 0  # the program never allocated through CuPy's pool: nothing to say
        if self.writer is None:
            self.writer = _Writer()
        w = self.writer
        if not w.available:
            return 0
        snap = self.snapshot()
        devices = sorted({s["device"] for s in snap["segments"]})
        pool = self._pool()
        reserved = int(pool.total_bytes())
        self.peak = max(self.peak, reserved)
        if len(devices) == 1:
            # The default pool's counters (CuPy's are for the current device).
            stats = {devices[0]: (int(pool.used_bytes()), reserved, self.peak)}
        else:
            stats = {}
            for s in snap["segments"]:
                used = sum(b["size"] for b in s["blocks"] if b["state"] == "active_allocated")
                a, r, _p = stats.get(s["device"], (0, 0, 0))
                stats[s["device"]] = (a + used, r + s["total_size"], r + s["total_size"])
        return _write_state(w, "cupy", reason, snapshot, snap, stats, oom)

    def sites(self):
        """Live blocks as (bytes, frames) pairs, frames as (file, line, function)."""
        return [(size, frames) for size, _r, _d, frames in list(self.live.values())]


_TORCH = None
_CUPY = None
_JAX = None


def torch_adapter():
    """The adapter, once torch is imported (None before)."""
    return _TORCH


def attach_torch(module):
    """Called when the program has imported torch (once per process)."""
    global _TORCH
    if _TORCH is not None or not enabled():
        return
    _TORCH = TorchAdapter(module)
    _TORCH.attach()
    _watch.start()


def attach_cupy(module):
    """Called when the program has imported cupy (once per process)."""
    global _CUPY
    if _CUPY is not None or not enabled():
        return
    _CUPY = CupyAdapter(module)
    _CUPY.attach()
    _watch.start()


def attach_jax(module):
    """Called when the program has imported jax (once per process)."""
    global _JAX
    if _JAX is not None or not enabled():
        return
    from ._jax import JaxAdapter

    _JAX = JaxAdapter(module)
    _JAX.attach()
    _watch.start()


ATTACH = {"torch": attach_torch, "cupy": attach_cupy, "jax": attach_jax}


def attach(module):
    """Attaches to a framework module by its name (the finders' step after its import)."""
    step = ATTACH.get(module.__name__)
    if step is not None:
        step(module)


def dump(reason, snapshot=0):
    """Writes every attached framework's state (the number of states written)."""
    written = 0
    if _TORCH is not None:
        written += bool(_TORCH.dump(reason, snapshot))
    if _CUPY is not None:
        written += bool(_CUPY.dump(reason, snapshot))
    if _JAX is not None:
        written += bool(_JAX.dump(reason, snapshot))
    return written


class _Loader:
    """A module's own loader, with a step after it runs (everything else is delegated)."""

    def __init__(self, loader, after):
        self.loader = loader
        self.after = after

    def __getattr__(self, name):
        return getattr(self.loader, name)

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module):
        self.loader.exec_module(module)
        try:
            self.after(module)
        except Exception as e:  # noqa: BLE001 - never break the program's import
            sys.stderr.write(f"gpuleak: cannot attach to {module.__name__}: {e!r}\n")


class _Finder:
    """Waits for `import torch`, `import cupy` and `import jax` (never imports them)."""

    gpuleak_frameworks = True

    def find_spec(self, name, path, target=None):
        if name not in ATTACH:
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, ATTACH[name])
        return spec


def install():
    """Attaches to torch, cupy and jax now if the program has imported them, or when it does."""
    if not enabled():
        return
    for name, step in ATTACH.items():
        module = sys.modules.get(name)
        if module is not None:
            step(module)
    if all(name in sys.modules for name in ATTACH):
        return
    if not any(getattr(f, "gpuleak_frameworks", False) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())


def _is_framework_file(filename):
    """Whether a Python file is inside a framework or gpuleak (never the user's line); the
    analyzer's rule (analyzer/src/frameworks/join.rs)."""
    if filename.startswith("<"):
        return True
    parts = filename.replace("\\", "/").split("/")[:-1]
    return any(p in ("torch", "cupy", "cupy_backends", "jax", "jaxlib", "gpuleak") for p in parts)


def user_frame(frames):
    """The index of the user's frame in (file, line, function) frames, innermost first: the
    first Python frame outside the frameworks, else the first frame outside them, else the
    first; the analyzer's rule (analyzer/src/frameworks/join.rs)."""
    for i, f in enumerate(frames):
        if _is_python_file(f[0]) and not _is_framework_file(f[0]):
            return i
    return next((i for i, f in enumerate(frames) if not _is_framework_file(f[0])), 0)


def is_framework_stack(frames):
    """Whether an allocation's stack (gpuleak Frames) passes through a framework's Python code:
    driver memory that the framework's allocator holds, judged on its tensors instead."""
    return any(f.file and f.file.endswith(".py") and _is_framework_file(f.file) for f in frames)


def is_workspace(workspaces, block):
    """Whether a snapshot's block is a library workspace: it starts at a workspace's address
    and holds its size."""
    size = workspaces.get(int(block.get("address", 0)))
    return size is not None and int(block.get("size", 0)) >= size


def tensor_sites():
    """Live tensors by the user's Python line, read in this process: {(file, line, function):
    (bytes, frames)}, frames as (file, line, function) innermost first; None when the program
    has not imported a framework (empty before it has used CUDA through one)."""
    if _TORCH is None and _CUPY is None and _JAX is None:
        return None
    blocks = []
    if _TORCH is not None and _TORCH.recording:
        try:
            snap = _TORCH.torch.cuda.memory._snapshot()
        except Exception:  # noqa: BLE001
            return None
        # cuBLAS's workspaces are the library's, kept for the life of the process: never a
        # tensor of the program (the analyzer's rule, analyzer/src/frameworks/join.rs).
        workspaces = _shim.workspaces()
        for seg in snap.get("segments", ()):
            for block in seg.get("blocks", ()):
                if block.get("state") != "active_allocated":
                    continue
                if is_workspace(workspaces, block):
                    continue
                frames = [
                    (f.get("filename", "?"), int(f.get("line", 0)), f.get("name", "?")) for f in block.get("frames") or ()
                ]
                blocks.append((int(block["size"]), frames))
    if _CUPY is not None:
        blocks += _CUPY.sites()
    if _JAX is not None:
        try:
            blocks += _JAX.sites()
        except Exception:  # noqa: BLE001
            return None
    sites = {}
    for size, frames in blocks:
        user = frames[user_frame(frames)] if frames else ("?", 0, "?")
        bytes_, first = sites.get(user, (0, frames))
        sites[user] = (bytes_ + size, first)
    return sites
