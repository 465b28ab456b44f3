"""A client with XLA's BFC allocator in small: buffers rounded to 256 bytes, placed best fit in
regions that are real driver allocations (cuMemAlloc through cuda-bindings), a new region of
at least REGION bytes when none has room; freed buffers stay in their region."""

import os

from cuda.bindings import driver as cu

ROUND = 256
REGION = 2 << 20


def _check(result):
    err, *values = result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"fake jaxlib: CUDA call failed with {err.name}")
    return values[0] if len(values) == 1 else tuple(values)


class XlaRuntimeError(RuntimeError):
    """What XLA raises (`jaxlib.xla_extension.XlaRuntimeError`), out of memory among others."""


class Device:
    """One GPU, as `jax.Device` shows it."""

    platform = "gpu"
    device_kind = "Fake GPU"

    def __init__(self, client, ordinal):
        self.client = client
        self.id = ordinal
        self.local_hardware_id = ordinal

    def __str__(self):
        return f"cuda:{self.id}"

    __repr__ = __str__

    def memory_stats(self):
        """XLA's counters for a BFC allocator (the keys of PjRt's `memory_stats()`)."""
        c = self.client
        return {
            "bytes_in_use": c.in_use,
            "peak_bytes_in_use": c.peak_in_use,
            "bytes_limit": 1 << 30,
            "pool_bytes": c.pool,
            "peak_pool_bytes": c.peak_pool,
            "num_allocs": c.allocs,
            "largest_alloc_size": c.largest,
        }


class Client:
    def __init__(self):
        _check(cu.cuInit(0))
        dev = _check(cu.cuDeviceGet(0))
        self.context = _check(cu.cuDevicePrimaryCtxRetain(dev))
        _check(cu.cuCtxSetCurrent(self.context))
        self.devices = [Device(self, 0)]
        self.regions = []  # [base, size, {offset: size in use}]
        self.live = {}  # address -> (size on device, frames innermost first, weak reference)
        self.in_use = self.peak_in_use = self.pool = self.peak_pool = 0
        self.allocs = self.largest = 0
        limit = os.environ.get("FAKE_JAX_MEMORY_LIMIT")
        self.limit = int(limit) if limit else None

    def allocate(self, nbytes):
        size = max(ROUND, (nbytes + ROUND - 1) // ROUND * ROUND)
        best = None
        for region in self.regions:
            for offset, room in self._gaps(region):
                if room >= size and (best is None or room < best[2]):
                    best = (region, offset, room)
        if best is None:
            total = max(REGION, size)
            if self.limit is not None and self.pool + total > self.limit:
                raise XlaRuntimeError(
                    f"RESOURCE_EXHAUSTED: Out of memory while trying to allocate {size} bytes."
                )
            base = int(_check(cu.cuMemAlloc(total)))
            region = [base, total, {}]
            self.regions.append(region)
            self.pool += total
            self.peak_pool = max(self.peak_pool, self.pool)
            best = (region, 0, total)
        region, offset, _room = best
        region[2][offset] = size
        self.in_use += size
        self.peak_in_use = max(self.peak_in_use, self.in_use)
        self.allocs += 1
        self.largest = max(self.largest, size)
        return region[0] + offset, size

    def release(self, address):
        for base, _total, used in self.regions:
            size = used.pop(address - base, None)
            if size is not None:
                self.in_use -= size
                return

    @staticmethod
    def _gaps(region):
        base, total, used = region
        at = 0
        for offset in sorted(used):
            if offset > at:
                yield at, offset - at
            at = offset + used[offset]
        if at < total:
            yield at, total - at
