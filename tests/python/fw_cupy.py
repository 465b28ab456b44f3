"""Array work on the fake CuPy (tests/python/fake_cupy), for tests/e2e/python_frameworks.rs.

    python fw_cupy.py MODE

- `leak`: each step keeps one array in a global list (the bug); the rest is freed.
- `cache`: every array is freed; the memory pool keeps the memory (no leak).
- `released`: every array is freed and the pool hands its memory back (`free_all_blocks`).
- `check`: gpuleak.check() around a block that keeps an array, and its fixed twin whose
  pool grows while its array dies.
- `oom`: kept arrays fill the pool's limit (FAKE_CUPY_MEMORY_LIMIT) until it raises.
- `real`: imports the real CuPy (no GPU needed for that) and allocates nothing.

It prints `done` at the end.
"""

import sys

KEPT = []


def step(cupy):
    x = cupy.empty(300 << 10, dtype=cupy.uint8)
    y = cupy.zeros((200 << 10) // 4, dtype=cupy.float32)
    KEPT.append(cupy.empty(100 << 10, dtype=cupy.uint8))  # the leak
    del x, y


def step_clean(cupy):
    x = cupy.empty(300 << 10, dtype=cupy.uint8)
    y = cupy.zeros((200 << 10) // 4, dtype=cupy.float32)
    del x, y


def main(mode):
    import cupy

    import gpuleak

    if mode == "leak":
        for _ in range(4):
            step(cupy)
    elif mode in ("cache", "released"):
        for _ in range(4):
            step_clean(cupy)
        if mode == "released":
            cupy.get_default_memory_pool().free_all_blocks()
            x = cupy.empty(1000, dtype=cupy.uint8)  # a new chunk after the release
            del x
    elif mode == "check":
        try:
            with gpuleak.check():
                KEPT.append(cupy.empty(4096, dtype=cupy.uint8))  # kept past the check
            print("check passed")
        except gpuleak.LeakError as e:
            print("check raised", e.leaked_bytes, str(e).splitlines()[1:3])
        with gpuleak.check():
            z = cupy.empty(5 << 20, dtype=cupy.uint8)  # the pool grows, the array dies
            del z
        print("twin passed")
    elif mode == "oom":
        try:
            for _ in range(100):
                KEPT.append(cupy.empty(1 << 20, dtype=cupy.uint8))  # fills the device
        except cupy.cuda.memory.OutOfMemoryError:
            print("oom caught", flush=True)
        KEPT.clear()
    elif mode == "real":
        print("hooked", [type(h).__name__ for h in _hooks(cupy)])
        print("allocator", getattr(cupy.cuda.get_allocator(), "__name__", None))
    print("done", flush=True)


def _hooks(cupy):
    from cupy.cuda import memory_hook

    return list(memory_hook.get_memory_hooks().values())


if __name__ == "__main__":
    main(sys.argv[1])
