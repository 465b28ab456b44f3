"""torch.cuda.memory: the allocator's history recording, snapshot and counters."""

import sys


def _alloc():
    from . import _ALLOCATOR

    return _ALLOCATOR


def _record_memory_history(enabled="all", context="all", stacks="all", max_entries=sys.maxsize, device=None):
    """Keeps a Python stack for each live block when `enabled` (as PyTorch 2.1 and later)."""
    if enabled not in (None, "state", "all") or context not in (None, "state", "alloc", "all"):
        raise ValueError("bad arguments")
    if stacks not in ("python", "all"):
        raise ValueError("bad stacks")
    from . import _lazy_init

    _lazy_init()
    _alloc().recording = enabled is not None and context is not None
    _alloc().cpp = stacks == "all"


def _snapshot(device=None):
    """{"segments": [...], "device_traces": [[]]}, as PyTorch's `Snapshot` type."""
    a = _alloc()
    return {"segments": a.segments_snapshot() if a else [], "device_traces": [[]]}


def memory_allocated(device=None):
    a = _alloc()
    return a.allocated if a else 0


def memory_reserved(device=None):
    a = _alloc()
    return a.reserved if a else 0


def max_memory_reserved(device=None):
    a = _alloc()
    return a.peak_reserved if a else 0


def empty_cache():
    a = _alloc()
    if a:
        a.empty_cache()
