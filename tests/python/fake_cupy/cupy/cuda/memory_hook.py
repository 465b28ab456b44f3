"""cupy.cuda.MemoryHook: per-thread hooks called around the pool's allocations."""

import threading

_local = threading.local()


def get_memory_hooks():
    hooks = getattr(_local, "hooks", None)
    if hooks is None:
        hooks = _local.hooks = {}
    return hooks


class MemoryHook:
    """Base class of memory hooks; `name` keys it among the thread's hooks."""

    name = "MemoryHook"

    def __enter__(self):
        hooks = get_memory_hooks()
        if self.name in hooks:
            raise RuntimeError(f"memory hook {self.name} already exists")
        hooks[self.name] = self
        return self

    def __exit__(self, *exc):
        del get_memory_hooks()[self.name]

    def alloc_preprocess(self, **kwargs):
        pass

    def alloc_postprocess(self, **kwargs):
        pass

    def malloc_preprocess(self, **kwargs):
        pass

    def malloc_postprocess(self, **kwargs):
        pass

    def free_preprocess(self, **kwargs):
        pass

    def free_postprocess(self, **kwargs):
        pass
