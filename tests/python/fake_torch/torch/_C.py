"""torch._C: the out-of-memory observers."""

_oom_observers = []


def _cuda_attach_out_of_memory_observer(observer):
    """`observer(device, alloc, device_allocated, device_free)` is called before an
    out-of-memory error is raised."""
    _oom_observers.append(observer)
