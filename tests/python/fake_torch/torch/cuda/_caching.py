"""The caching allocator: 512-byte blocks in segments that are real driver allocations
(cuMemAlloc through cuda-bindings), kept when their blocks are freed."""

import os
import sys

from cuda.bindings import driver as cu

ROUND = 512
SMALL_SIZE = 1 << 20
SMALL_SEGMENT = 2 << 20
LARGE_ROUND = 2 << 20
HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _check(result):
    err, *values = result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"fake torch: CUDA call failed with {err.name}")
    return values[0] if len(values) == 1 else tuple(values)


class Block:
    __slots__ = ("segment", "offset", "size", "requested", "state", "frames")

    def __init__(self, segment, offset, size):
        self.segment = segment
        self.offset = offset
        self.size = size
        self.requested = 0
        self.state = "inactive"
        self.frames = []

    @property
    def address(self):
        return self.segment.address + self.offset


class Segment:
    def __init__(self, address, size, pool):
        self.address = address
        self.size = size
        self.pool = pool
        self.blocks = [Block(self, 0, size)]


def _python_frames():
    """The caller's Python stack, innermost first, as PyTorch records it."""
    frames = []
    f = sys._getframe(2)
    while f is not None:
        frames.append({"filename": f.f_code.co_filename, "line": f.f_lineno, "name": f.f_code.co_name})
        f = f.f_back
    return frames


class Allocator:
    def __init__(self):
        _check(cu.cuInit(0))
        dev = _check(cu.cuDeviceGet(0))
        self.ctx = _check(cu.cuDevicePrimaryCtxRetain(dev))
        _check(cu.cuCtxSetCurrent(self.ctx))
        self.segments = []
        self.recording = False
        self.allocated = 0
        self.reserved = 0
        self.peak_reserved = 0
        limit = os.environ.get("FAKE_TORCH_MEMORY_LIMIT")
        self.limit = int(limit) if limit else None

    def malloc(self, nbytes):
        size = max(ROUND, (nbytes + ROUND - 1) // ROUND * ROUND)
        pool = "small" if size <= SMALL_SIZE else "large"
        block = self._best_fit(size, pool)
        if block is None:
            segment_size = SMALL_SEGMENT if pool == "small" else (size + LARGE_ROUND - 1) // LARGE_ROUND * LARGE_ROUND
            if not self._fits(segment_size):
                self.empty_cache()
            if not self._fits(segment_size):
                self._out_of_memory(size)
            ptr = int(_check(cu.cuMemAlloc(segment_size)))
            segment = Segment(ptr, segment_size, pool)
            self.segments.append(segment)
            self.reserved += segment_size
            self.peak_reserved = max(self.peak_reserved, self.reserved)
            block = segment.blocks[0]
        if block.size > size:
            rest = Block(block.segment, block.offset + size, block.size - size)
            blocks = block.segment.blocks
            blocks.insert(blocks.index(block) + 1, rest)
            block.size = size
        block.state = "active_allocated"
        block.requested = nbytes
        block.frames = _python_frames() if self.recording else []
        self.allocated += block.size
        return block

    def free(self, block):
        if block.state != "active_allocated":
            return
        self.allocated -= block.size
        block.state = "inactive"
        block.requested = 0
        block.frames = []
        blocks = block.segment.blocks
        i = blocks.index(block)
        if i + 1 < len(blocks) and blocks[i + 1].state == "inactive":
            block.size += blocks.pop(i + 1).size
        if i > 0 and blocks[i - 1].state == "inactive":
            blocks[i - 1].size += blocks.pop(i).size

    def empty_cache(self):
        for segment in list(self.segments):
            if all(b.state == "inactive" for b in segment.blocks):
                _check(cu.cuMemFree(segment.address))
                self.segments.remove(segment)
                self.reserved -= segment.size

    def _fits(self, segment_size):
        return self.limit is None or self.reserved + segment_size <= self.limit

    def _best_fit(self, size, pool):
        best = None
        for segment in self.segments:
            if segment.pool != pool:
                continue
            for b in segment.blocks:
                if b.state == "inactive" and b.size >= size and (best is None or b.size < best.size):
                    best = b
        return best

    def _out_of_memory(self, size):
        from .. import _C
        from . import OutOfMemoryError

        free = max(self.limit - self.reserved, 0)
        for observer in list(_C._oom_observers):
            observer(0, size, self.reserved, free)
        raise OutOfMemoryError(f"CUDA out of memory. Tried to allocate {size} bytes; {free} bytes free")

    def segments_snapshot(self):
        out = []
        for s in self.segments:
            blocks = [
                {
                    "address": b.address,
                    "size": b.size,
                    "requested_size": b.requested if b.state != "inactive" else b.size,
                    "state": b.state,
                    "frames": list(b.frames),
                }
                for b in s.blocks
            ]
            out.append(
                {
                    "device": 0,
                    "address": s.address,
                    "total_size": s.size,
                    "allocated_size": sum(b.size for b in s.blocks if b.state != "inactive"),
                    "active_size": sum(b.size for b in s.blocks if b.state != "inactive"),
                    "requested_size": sum(b.requested for b in s.blocks if b.state != "inactive"),
                    "stream": 0,
                    "segment_type": s.pool,
                    "segment_pool_id": (0, 0),
                    "is_expandable": False,
                    "frames": [],
                    "blocks": blocks,
                }
            )
        return out
