"""A stand-in for JAX (tests/python/fake_jax/README.md): arrays whose buffers lie in regions
that are real driver allocations, and the public interfaces gpuleak reads."""

import sys
import weakref

from jax._src import xla_bridge

__version__ = "0.0.0+fake"

from jax import numpy, profiler  # noqa: E402,F401

_TRACEBACK_DEPTH = 32


class Shard:
    def __init__(self, device, data):
        self.device = device
        self.data = data


class Array:
    """A single-device array; its buffer goes back to the allocator when it dies."""

    def __init__(self, nbytes, dtype):
        client = xla_bridge.get_backend()
        self.dtype = dtype
        self.nbytes = nbytes
        self._device = client.devices[0]
        self._pointer, self._size = client.allocate(nbytes)
        self._client = client
        frames = []
        f = sys._getframe(1)
        while f is not None and len(frames) < _TRACEBACK_DEPTH:
            frames.append((f.f_code.co_filename, f.f_lineno, f.f_code.co_name))
            f = f.f_back
        client.live[self._pointer] = (self._size, frames, weakref.ref(self))

    def unsafe_buffer_pointer(self):
        return self._pointer

    def on_device_size_in_bytes(self):
        return self._size

    def devices(self):
        return {self._device}

    @property
    def addressable_shards(self):
        return [Shard(self._device, self)]

    def delete(self):
        client, self._client = self.__dict__.get("_client"), None
        if client is not None:
            client.live.pop(self._pointer, None)
            client.release(self._pointer)

    __del__ = delete


def live_arrays(platform=None):
    client = xla_bridge.get_backend(platform)
    return [a for a in (ref() for _s, _f, ref in list(client.live.values())) if a is not None]


def devices(backend=None):
    return list(xla_bridge.get_backend(backend).devices)


local_devices = devices


def default_backend():
    return "gpu"
