"""The frameworks' caching allocators seen from inside (PyTorch), written into the trace.

Nothing here imports a framework or initializes CUDA. `install()` waits for the program to
import torch (a finder on `sys.meta_path`, or torch already in `sys.modules`); then, once the
program has initialized CUDA through torch (`torch.cuda._lazy_call` runs a call at that moment,
or at once if it is past), it turns on the allocator's recording of a Python stack for each live
block, in its cheapest mode (`_record_memory_history(enabled="state", context="state",
stacks="python")`), and attaches an out-of-memory observer.

The allocator's state (`torch.cuda.memory._snapshot()`) is written as records 70 to 76 through
the shim's `gpuleak_framework_record` (docs/frameworks.md has the layout): at exit, from an
`atexit` handler, before the interpreter's teardown frees the program's globals; at each
`gpuleak.snapshot()` and `gpuleak.check()` boundary; and from the out-of-memory observer,
before torch raises. `GPULEAK_FRAMEWORKS=0` turns all of it off.
"""

import atexit
import os
import sys

from . import _shim

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
        self.recording = False
        self.states = 0
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
        memory = self.torch.cuda.memory
        try:
            memory._record_memory_history(enabled="state", context="state", stacks="python")
        except TypeError:
            try:  # PyTorch 2.0 and older: enabled, record_context, trace_alloc_max_entries
                memory._record_memory_history(True, record_context=True, trace_alloc_max_entries=1)
            except Exception as e:  # noqa: BLE001
                sys.stderr.write(f"gpuleak: cannot record PyTorch's allocator stacks: {e!r}\n")
        except Exception as e:  # noqa: BLE001
            sys.stderr.write(f"gpuleak: cannot record PyTorch's allocator stacks: {e!r}\n")
        attach = getattr(getattr(self.torch, "_C", None), "_cuda_attach_out_of_memory_observer", None)
        if attach is not None:
            try:
                attach(self.on_oom)
            except Exception:  # noqa: BLE001
                pass

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
        self.states += 1
        state = self.states
        head = bytearray()
        _u(head, state)
        _u(head, LAYOUT)
        _s(head, "torch")
        _s(head, reason)
        _u(head, snapshot)
        if not w.write(STATE, head):
            return 0
        frames_ids = {}
        segments = blocks = 0
        devices = set()
        for seg in snap.get("segments", ()):
            device = int(seg.get("device", 0))
            devices.add(device)
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
                    frames = self._frames(w, state, block["frames"], frames_ids)
                chunk += [
                    int(block["address"]) - address,
                    int(block["size"]),
                    int(block.get("requested_size", block["size"])),
                    state_code,
                    frames,
                ]
                blocks += 1
                if len(chunk) >= 5 * BLOCKS_PER_RECORD:
                    self._blocks(w, state, address, chunk)
                    chunk = []
            if chunk:
                self._blocks(w, state, address, chunk)
        if oom is not None:
            devices.add(int(oom[0]))
        for device in sorted(devices):
            rec = bytearray()
            _u(rec, state)
            _i(rec, device)
            _u(rec, cuda.memory_allocated(device))
            _u(rec, cuda.memory_reserved(device))
            _u(rec, cuda.max_memory_reserved(device))
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

    @staticmethod
    def _blocks(w, state, address, chunk):
        rec = bytearray()
        _u(rec, state)
        _u(rec, address)
        _addrs(rec, chunk)
        w.write(BLOCKS, rec)

    @staticmethod
    def _frames(w, state, frames, ids):
        """The id of a block's Python stack in this state, written the first time it is met."""
        key = tuple((f.get("filename", "?"), f.get("line", 0), f.get("name", "?")) for f in frames[:MAX_FRAMES])
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


_TORCH = None


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


def dump(reason, snapshot=0):
    """Writes every attached framework's state (the number of states written)."""
    written = 0
    if _TORCH is not None:
        written += bool(_TORCH.dump(reason, snapshot))
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
    """Waits for `import torch` (never imports it)."""

    gpuleak_frameworks = True

    def find_spec(self, name, path, target=None):
        if name != "torch":
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is not None and spec.loader is not None:
            spec.loader = _Loader(spec.loader, attach_torch)
        return spec


def install():
    """Attaches to torch now if the program has imported it, or when it does."""
    if not enabled():
        return
    torch = sys.modules.get("torch")
    if torch is not None:
        attach_torch(torch)
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


def is_framework_stack(frames):
    """Whether an allocation's stack (gpuleak Frames) passes through a framework's Python code:
    driver memory that the framework's allocator holds, judged on its tensors instead."""
    return any(f.file and f.file.endswith(".py") and _is_framework_file(f.file) for f in frames)


def tensor_sites():
    """Live tensors by the user's Python line, read in this process: {(file, line, function):
    (bytes, frames)}, frames as (file, line, function) innermost first; None when the program
    has not imported a framework (empty before it has used CUDA through one)."""
    if _TORCH is None:
        return None
    if not _TORCH.recording:
        return {}
    try:
        snap = _TORCH.torch.cuda.memory._snapshot()
    except Exception:  # noqa: BLE001
        return None
    sites = {}
    for seg in snap.get("segments", ()):
        for block in seg.get("blocks", ()):
            if block.get("state") != "active_allocated":
                continue
            frames = [(f.get("filename", "?"), int(f.get("line", 0)), f.get("name", "?")) for f in block.get("frames") or ()]
            user = next((f for f in frames if not _is_framework_file(f[0])), frames[0] if frames else ("?", 0, "?"))
            bytes_, first = sites.get(user, (0, frames))
            sites[user] = (bytes_ + int(block["size"]), first)
    return sites
