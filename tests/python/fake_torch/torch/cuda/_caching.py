"""The caching allocator: 512-byte blocks in segments that are real driver allocations
(cuMemAlloc through cuda-bindings), kept when their blocks are freed.

With `PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True`, as PyTorch's expandable segments: one
reserved address range per pool (cuMemAddressReserve), grown by mapping physical handles
(cuMemCreate, cuMemMap, cuMemSetAccess) of 2 MiB (small pool) or 20 MiB (large pool) one after
another, and shrunk by unmapping and releasing the free pages at its end (empty_cache). The
snapshot reports one segment per contiguous mapped range, `is_expandable` true."""

import os
import sys

from cuda.bindings import driver as cu

ROUND = 512
SMALL_SIZE = 1 << 20
SMALL_SEGMENT = 2 << 20
LARGE_ROUND = 2 << 20
# The pages of an expandable segment, per pool (PyTorch's kSmallBuffer and kLargeBuffer).
EXPANDABLE_PAGE = {"small": 2 << 20, "large": 20 << 20}
EXPANDABLE_RESERVE = 1 << 30
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
    expandable = False

    def __init__(self, address, size, pool):
        self.address = address
        self.size = size
        self.pool = pool
        self.blocks = [Block(self, 0, size)]


def _expandable_requested():
    conf = os.environ.get("PYTORCH_CUDA_ALLOC_CONF", "")
    return any(item.strip() == "expandable_segments:True" for item in conf.split(","))


class ExpandableSegment(Segment):
    """A reserved range whose first `size` bytes are mapped, page by page."""

    expandable = True

    def __init__(self, pool):
        self.page = EXPANDABLE_PAGE[pool]
        super().__init__(int(_check(cu.cuMemAddressReserve(EXPANDABLE_RESERVE, 0, 0, 0))), 0, pool)
        self.blocks = []
        self.handles = []

    def grow(self, nbytes):
        """Maps pages at the end until `nbytes` more are mapped; returns the bytes added."""
        prop = cu.CUmemAllocationProp()
        prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        prop.location.id = 0
        access = cu.CUmemAccessDesc()
        access.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        access.location.id = 0
        access.flags = cu.CUmemAccess_flags.CU_MEM_ACCESS_FLAGS_PROT_READWRITE
        pages = (nbytes + self.page - 1) // self.page
        for _ in range(pages):
            handle = _check(cu.cuMemCreate(self.page, prop, 0))
            at = self.address + self.size
            _check(cu.cuMemMap(at, self.page, 0, handle, 0))
            _check(cu.cuMemSetAccess(at, self.page, [access], 1))
            self.handles.append(handle)
            self.size += self.page
        added = pages * self.page
        if self.blocks and self.blocks[-1].state == "inactive":
            self.blocks[-1].size += added
        else:
            self.blocks.append(Block(self, self.size - added, added))
        return added

    def shrink(self):
        """Unmaps and releases the pages wholly inside the free block at the end; returns the
        bytes given back."""
        freed = 0
        while self.blocks and self.blocks[-1].state == "inactive" and self.blocks[-1].size >= self.page:
            last = self.blocks[-1]
            self.size -= self.page
            _check(cu.cuMemUnmap(self.address + self.size, self.page))
            _check(cu.cuMemRelease(self.handles.pop()))
            last.size -= self.page
            if last.size == 0:
                self.blocks.pop()
            freed += self.page
        return freed


def _python_frames(cpp=False):
    """The caller's Python stack, innermost first, as PyTorch records it; with `cpp`
    (`stacks="all"`), interleaved with C++ frames as PyTorch's combined traceback lays them out:
    the allocator's and the operator's innermost, each Python frame before the interpreter's
    frame that ran it, and the interpreter's start outermost."""
    frames = []
    if cpp:
        frames += [
            {"filename": "??", "line": 0, "name": "c10::cuda::CUDACachingAllocator::Native::DeviceCachingAllocator::malloc"},
            {"filename": "/pytorch/aten/src/ATen/native/cuda/TensorFactories.cu", "line": 60, "name": "at::native::empty_cuda"},
            {"filename": "/pytorch/torch/csrc/utils/python_arg_parser.cpp", "line": 1041, "name": "torch::autograd::THPVariable_empty"},
        ]
    f = sys._getframe(2)
    while f is not None:
        frames.append({"filename": f.f_code.co_filename, "line": f.f_lineno, "name": f.f_code.co_name})
        if cpp:
            frames.append({"filename": "??", "line": 0, "name": "_PyEval_EvalFrameDefault"})
        f = f.f_back
    if cpp:
        frames += [{"filename": "??", "line": 0, "name": "Py_RunMain"}, {"filename": "??", "line": 0, "name": "main"}]
    return frames


class Allocator:
    def __init__(self):
        _check(cu.cuInit(0))
        dev = _check(cu.cuDeviceGet(0))
        self.ctx = _check(cu.cuDevicePrimaryCtxRetain(dev))
        _check(cu.cuCtxSetCurrent(self.ctx))
        self.segments = []
        self.recording = False
        self.cpp = False
        self.allocated = 0
        self.reserved = 0
        self.peak_reserved = 0
        limit = os.environ.get("FAKE_TORCH_MEMORY_LIMIT")
        self.limit = int(limit) if limit else None
        self.expandable = {} if _expandable_requested() else None

    def malloc(self, nbytes):
        size = max(ROUND, (nbytes + ROUND - 1) // ROUND * ROUND)
        pool = "small" if size <= SMALL_SIZE else "large"
        block = self._best_fit(size, pool)
        if block is None and self.expandable is not None:
            block = self._expand(size, pool)
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
        block.frames = _python_frames(self.cpp) if self.recording else []
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

    def _expand(self, size, pool):
        """Grows the pool's expandable segment so that its last block fits `size`."""
        segment = self.expandable.get(pool)
        if segment is None:
            segment = self.expandable[pool] = ExpandableSegment(pool)
            self.segments.append(segment)
        last = segment.blocks[-1] if segment.blocks else None
        tail = last.size if last is not None and last.state == "inactive" else 0
        page = segment.page
        grow = (size - tail + page - 1) // page * page
        if not self._fits(grow):
            self.empty_cache()
        if not self._fits(grow):
            self._out_of_memory(size)
        self.reserved += segment.grow(grow)
        self.peak_reserved = max(self.peak_reserved, self.reserved)
        return segment.blocks[-1]

    def empty_cache(self):
        for segment in list(self.segments):
            if segment.expandable:
                self.reserved -= segment.shrink()
                continue
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
            if s.size == 0:
                continue
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
                    "is_expandable": s.expandable,
                    "frames": [],
                    "blocks": blocks,
                }
            )
        return out
