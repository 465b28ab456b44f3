"""torch.cuda: lazy initialization, the caching allocator's counters and empty_cache."""

import traceback

from . import memory  # noqa: F401
from .memory import empty_cache, max_memory_reserved, memory_allocated, memory_reserved  # noqa: F401


class OutOfMemoryError(RuntimeError):
    """CUDA out of memory."""


_initialized = False
_queued_calls = []
_ALLOCATOR = None


def is_available():
    return True


def is_initialized():
    return _initialized


def _lazy_call(callable, **kwargs):
    """Runs `callable` at CUDA initialization, or now if that is past (as PyTorch does)."""
    if _initialized:
        callable()
    else:
        _queued_calls.append((callable, traceback.format_stack()))


def _lazy_init():
    global _initialized, _ALLOCATOR
    if _initialized:
        return
    from ._caching import Allocator

    _ALLOCATOR = Allocator()
    _initialized = True
    for call, _where in _queued_calls:
        call()
    _queued_calls.clear()


def _allocator():
    _lazy_init()
    return _ALLOCATOR


def synchronize(device=None):
    pass
