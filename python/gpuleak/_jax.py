"""JAX's device memory seen from inside, through its public interfaces only.

Nothing here imports jax or initializes a backend: `_frameworks.attach_jax` builds the adapter
once the program has imported jax, and a state is written only once the program has started a
backend itself (`jax._src.xla_bridge._backends` is not empty: JAX has no public way to ask
without starting one).

A state joins three readings taken at the same moment:

- `jax.profiler.device_memory_profile()`: a pprof profile with a sample per group of live
  buffers of one Python stack, size and device (`_pprof.decode`). It gives the stacks.
- `jax.live_arrays()`, each addressable shard's `unsafe_buffer_pointer()` and
  `on_device_size_in_bytes()`: where the buffers are. A sample's buffers take the addresses of
  live buffers of the same device and size; where several stacks share a size, which buffer
  goes with which stack is a guess, and only the split between regions can be wrong, never the
  bytes per line. A buffer with no address found is written at address 0.
- `device.memory_stats()`: XLA's counters (`bytes_in_use`, `pool_bytes` or `bytes_reserved`,
  and their peaks). The CPU backend has none.

XLA's allocator regions are driver allocations that Python cannot see. So the state is one
segment per device at address 0 and of size 0, whose blocks are at their absolute addresses:
the analyzer places them in the driver allocations that contain them, and counts XLA's other
driver allocations as cached free (docs/frameworks.md). Executables in the profile are left
out: compiled code that JAX caches for the life of the process is no leak.
"""

import atexit
import re
import sys
import threading

from . import _pprof
from ._frameworks import _Writer, _write_state


def _ordinal(device):
    """The device's ordinal on its host (the CUDA device number on a GPU)."""
    hardware = getattr(device, "local_hardware_id", None)
    return int(hardware) if hardware is not None else int(getattr(device, "id", 0))


_OUT_OF_MEMORY = re.compile(r"RESOURCE_EXHAUSTED\b.*?\b(\d+) ?(?:bytes|B)\b", re.S)


def out_of_memory_request(error):
    """The bytes an XLA out-of-memory error (`XlaRuntimeError` or `JaxRuntimeError`,
    `RESOURCE_EXHAUSTED: Out of memory while trying to allocate N bytes.`) asked for; None for
    any other error."""
    if not isinstance(error, Exception) or "RuntimeError" not in type(error).__name__:
        return None
    found = _OUT_OF_MEMORY.search(str(error))
    return int(found.group(1)) if found else None


class JaxAdapter:
    """JAX's live buffers, once the program has imported jax and started a backend."""

    def __init__(self, jax):
        self.jax = jax
        self.writer = None
        self.exited = False

    def attach(self):
        """Registers the exit state (after jax's own handlers, so it runs before them), and
        watches for an out-of-memory error that ends the program or one of its threads."""
        atexit.register(self.at_exit)
        previous = sys.excepthook
        adapter = self

        def gpuleak_excepthook(kind, value, traceback):
            try:
                adapter.on_uncaught(value)
            except Exception:  # noqa: BLE001 - the program's error is what must be printed
                pass
            previous(kind, value, traceback)

        gpuleak_excepthook.__wrapped__ = previous
        sys.excepthook = gpuleak_excepthook
        # The same for a thread that the error ends (the program may go on without it).
        previous_thread = threading.excepthook

        def gpuleak_thread_excepthook(args):
            try:
                adapter.on_uncaught(args.exc_value)
            except Exception:  # noqa: BLE001
                pass
            previous_thread(args)

        gpuleak_thread_excepthook.__wrapped__ = previous_thread
        threading.excepthook = gpuleak_thread_excepthook

    def on_uncaught(self, error):
        """JAX has no out-of-memory observer. XLA's allocator raises `RESOURCE_EXHAUSTED` ("Out
        of memory while trying to allocate N bytes"); when that error ends the program (or a
        thread), the
        state is written (its buffers are still live, held by the traceback's frames) with the
        request, XLA's bytes in use and what its limit leaves (`bytes_limit` less
        `pool_bytes`) as the device's free bytes."""
        requested = out_of_memory_request(error)
        if requested is None:
            return
        try:
            device = self.jax.local_devices()[0]
            stats = device.memory_stats() or {}
            ordinal = _ordinal(device)
        except Exception:  # noqa: BLE001 - the state matters more than these numbers
            stats, ordinal = {}, 0
        in_use = int(stats.get("bytes_in_use", 0))
        pool = int(stats.get("pool_bytes", stats.get("bytes_reserved", 0)))
        free = max(int(stats.get("bytes_limit", pool)) - pool, 0)
        self.dump("oom", oom=(ordinal, requested, in_use, free))

    def started(self):
        """Whether the program has started a JAX backend (never starts one)."""
        bridge = sys.modules.get("jax._src.xla_bridge")
        return bool(getattr(bridge, "_backends", None))

    def at_exit(self):
        if not self.exited:
            self.exited = True
            self.dump("exit")

    def dump(self, reason, snapshot=0, oom=None):
        """Writes the live buffers' state; its number, or 0 when nothing was written (no
        backend started, or JAX computes on the CPU: host memory is no device's)."""
        try:
            if not self.started() or self.jax.default_backend() == "cpu":
                return 0
            if self.writer is None:
                self.writer = _Writer()
            if not self.writer.available:
                return 0
            snap, stats = self.snapshot()
            return _write_state(self.writer, "jax", reason, snapshot, snap, stats, oom=oom)
        except Exception as e:  # noqa: BLE001 - the program's own work comes first
            sys.stderr.write(f"gpuleak: cannot write JAX's device memory state: {e!r}\n")
            return 0

    def buffers(self):
        """{(device name, bytes): [address, ...]} of the live arrays' buffers, and
        {device name: ordinal}."""
        where, ordinals = {}, {}

        def add(device, data):
            key = (str(device), int(data.on_device_size_in_bytes()))
            where.setdefault(key, []).append(int(data.unsafe_buffer_pointer()))
            ordinals[key[0]] = _ordinal(device)

        for array in self.jax.live_arrays():
            try:
                # A single-device array is its own buffer: no shard objects to make.
                devices = array.devices()
                if len(devices) == 1:
                    add(next(iter(devices)), array)
                    continue
                shards = array.addressable_shards
            except Exception:  # noqa: BLE001 - deleted meanwhile
                continue
            for shard in shards:
                try:
                    add(shard.device, shard.data)
                except Exception:  # noqa: BLE001 - a buffer without a pointer (deleted, donated)
                    continue
        for addresses in where.values():
            addresses.sort(reverse=True)
        return where, ordinals

    def snapshot(self):
        """The state in the shape of PyTorch's `_snapshot()` (one unplaced segment per device,
        blocks at absolute addresses), and {device: (in use, reserved, peak reserved)}."""
        samples = _pprof.decode(self.jax.profiler.device_memory_profile())
        where, ordinals = self.buffers()
        blocks = {}
        for s in samples:
            if s.labels.get("kind") != "buffer":
                continue
            count = int(s.values.get("allocations", 0))
            space = int(s.values.get("space", 0))
            if count <= 0 or space < 0:
                continue
            name = str(s.labels.get("device", ""))
            device = ordinals.get(name)
            if device is None:
                tail = name.rpartition(":")[2]
                device = int(tail) if tail.isdigit() else 0
            size = space // count
            free = where.get((name, size), [])
            frames = [{"filename": f, "line": line, "name": fn} for f, line, fn in s.frames]
            for _ in range(count):
                blocks.setdefault(device, []).append(
                    {
                        "address": free.pop() if free else 0,
                        "size": size,
                        "requested_size": size,
                        "state": "active_allocated",
                        "frames": frames,
                    }
                )
        stats = {}
        for d in self.jax.local_devices():
            try:
                m = d.memory_stats()
            except Exception:  # noqa: BLE001 - a backend without counters
                m = None
            if not m:
                continue
            reserved = m.get("pool_bytes", m.get("bytes_reserved", 0))
            peak = m.get("peak_pool_bytes", m.get("peak_bytes_reserved", reserved))
            stats[_ordinal(d)] = (m.get("bytes_in_use", 0), reserved, peak)
            blocks.setdefault(_ordinal(d), [])
        segments = [
            {
                "device": device,
                "address": 0,
                "total_size": 0,
                "segment_type": "large",
                "blocks": sorted(found, key=lambda b: b["address"]),
            }
            for device, found in sorted(blocks.items())
        ]
        return {"segments": segments}, stats

    def sites(self):
        """Live buffers as (bytes, frames) pairs, frames as (file, line, function); none before
        the program has started a backend."""
        if not self.started() or self.jax.default_backend() == "cpu":
            return []
        out = []
        for s in _pprof.decode(self.jax.profiler.device_memory_profile()):
            if s.labels.get("kind") == "buffer" and s.values.get("space", 0) > 0:
                out.append((int(s.values["space"]), list(s.frames)))
        return out
