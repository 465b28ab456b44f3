"""cupy.cuda: memory hooks, the memory pool and the allocator switch."""

from . import memory  # noqa: F401
from .memory import MemoryPointer, MemoryPool, alloc, get_allocator, get_default_memory_pool, set_allocator  # noqa: F401
from .memory_hook import MemoryHook  # noqa: F401


def set_pinned_memory_allocator(allocator=None):
    pass
