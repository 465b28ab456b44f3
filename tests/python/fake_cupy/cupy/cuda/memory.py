"""The memory pool: 512-byte blocks in chunks that are real driver allocations (cuMemAlloc
through cuda-bindings), kept in the pool when their blocks are freed."""

import os

from cuda.bindings import driver as cu

from .memory_hook import get_memory_hooks

ROUND = 512
_CONTEXT = None


def _check(result):
    err, *values = result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"fake cupy: CUDA call failed with {err.name}")
    return values[0] if len(values) == 1 else tuple(values)


def _context():
    global _CONTEXT
    if _CONTEXT is None:
        _check(cu.cuInit(0))
        dev = _check(cu.cuDeviceGet(0))
        _CONTEXT = _check(cu.cuDevicePrimaryCtxRetain(dev))
        _check(cu.cuCtxSetCurrent(_CONTEXT))
    return _CONTEXT


class OutOfMemoryError(MemoryError):
    """As CuPy's: the pool could not allocate, even after giving its free chunks back."""

    def __init__(self, size, total, limit=0):
        super().__init__(f"Out of memory allocating {size:,} bytes (allocated so far: {total:,} bytes, limit set to: {limit:,} bytes).")


def _limit():
    limit = os.environ.get("FAKE_CUPY_MEMORY_LIMIT")
    return int(limit) if limit else None


class _Chunk:
    __slots__ = ("base", "offset", "size", "in_use")

    def __init__(self, base, offset, size):
        self.base = base
        self.offset = offset
        self.size = size
        self.in_use = False

    @property
    def ptr(self):
        return self.base.ptr + self.offset


class _Memory:
    """One driver allocation of the pool, split into chunks."""

    def __init__(self, ptr, size):
        self.ptr = ptr
        self.size = size
        self.chunks = [_Chunk(self, 0, size)]


class MemoryPointer:
    """A block of the pool; `free()` gives it back (calling the free hooks)."""

    def __init__(self, pool, chunk):
        self.pool = pool
        self.chunk = chunk
        self.ptr = chunk.ptr
        self.device_id = 0

    def free(self):
        chunk, self.chunk = self.chunk, None
        if chunk is None:
            return
        hooks = list(get_memory_hooks().values())
        for h in hooks:
            h.free_preprocess(device_id=0, mem_size=chunk.size, mem_ptr=chunk.ptr, pmem_id=id(chunk))
        self.pool._free(chunk)
        for h in hooks:
            h.free_postprocess(device_id=0, mem_size=chunk.size, mem_ptr=chunk.ptr, pmem_id=id(chunk))


class MemoryPool:
    def __init__(self):
        self.memories = []

    def malloc(self, size):
        rsize = max(ROUND, (size + ROUND - 1) // ROUND * ROUND)
        hooks = list(get_memory_hooks().values())
        for h in hooks:
            h.malloc_preprocess(device_id=0, size=size, mem_size=rsize)
        chunk = self._best_fit(rsize)
        if chunk is None:
            limit = _limit()
            if limit is not None and self.total_bytes() + rsize > limit:
                self.free_all_blocks()  # as CuPy's pool: give free chunks back, then retry
                if self.total_bytes() + rsize > limit:
                    raise OutOfMemoryError(rsize, self.total_bytes(), limit)
            for h in hooks:
                h.alloc_preprocess(device_id=0, mem_size=rsize)
            _context()
            ptr = int(_check(cu.cuMemAlloc(rsize)))
            for h in hooks:
                h.alloc_postprocess(device_id=0, mem_size=rsize, mem_ptr=ptr)
            memory = _Memory(ptr, rsize)
            self.memories.append(memory)
            chunk = memory.chunks[0]
        if chunk.size > rsize:
            chunks = chunk.base.chunks
            chunks.insert(chunks.index(chunk) + 1, _Chunk(chunk.base, chunk.offset + rsize, chunk.size - rsize))
            chunk.size = rsize
        chunk.in_use = True
        for h in hooks:
            h.malloc_postprocess(device_id=0, size=size, mem_size=rsize, mem_ptr=chunk.ptr, pmem_id=id(chunk))
        return MemoryPointer(self, chunk)

    def _free(self, chunk):
        chunk.in_use = False
        chunks = chunk.base.chunks
        i = chunks.index(chunk)
        if i + 1 < len(chunks) and not chunks[i + 1].in_use:
            chunk.size += chunks.pop(i + 1).size
        if i > 0 and not chunks[i - 1].in_use:
            chunks[i - 1].size += chunks.pop(i).size

    def _best_fit(self, rsize):
        best = None
        for m in self.memories:
            for c in m.chunks:
                if not c.in_use and c.size >= rsize and (best is None or c.size < best.size):
                    best = c
        return best

    def free_all_blocks(self, stream=None):
        for m in list(self.memories):
            if not any(c.in_use for c in m.chunks):
                _check(cu.cuMemFree(m.ptr))
                self.memories.remove(m)

    def used_bytes(self):
        return sum(c.size for m in self.memories for c in m.chunks if c.in_use)

    def total_bytes(self):
        return sum(m.size for m in self.memories)

    def free_bytes(self):
        return self.total_bytes() - self.used_bytes()


_POOL = MemoryPool()
_ALLOCATOR = _POOL.malloc


def get_default_memory_pool():
    return _POOL


def set_allocator(allocator=None):
    global _ALLOCATOR
    _ALLOCATOR = allocator


def get_allocator():
    return _ALLOCATOR


def alloc(size):
    """A block from the current allocator (the default pool unless set_allocator changed it)."""
    if _ALLOCATOR is None:
        raise RuntimeError("fake cupy: set_allocator(None) is not simulated")
    return _ALLOCATOR(size)
