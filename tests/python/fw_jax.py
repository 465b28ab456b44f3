"""Array work on the fake JAX (tests/python/fake_jax), for tests/e2e/python_frameworks.rs.

    python fw_jax.py MODE

- `leak`: each step keeps one array in a global list (the bug); the rest is freed.
- `cache`: every array is freed; XLA's region keeps the memory (no leak).
- `growth`: a snapshot per step while a list of arrays grows; the list is cleared before exit.
- `flat`: a snapshot per step, each step's arrays freed: the region warms up and stays flat.
- `check`: gpuleak.check() around a block that keeps an array, and its fixed twin whose
  allocator grows while its array dies.
- `idle`: imports jax and never starts a backend.
- `oom`: keeps arrays until XLA raises out of memory (FAKE_JAX_MEMORY_LIMIT), which ends the
  program; `fits`: the same number of arrays under a limit they fit; `oom-thread`: the same in
  a thread that the error ends, the program going on (the arrays freed before exit).

It prints `done` at the end.
"""

import sys

KEPT = []


def step(jnp):
    x = jnp.zeros((300 << 10) // 4)
    y = jnp.ones(200 << 10, dtype=jnp.uint8)
    KEPT.append(jnp.zeros(100 << 10, dtype=jnp.uint8))  # the leak
    del x, y


def step_clean(jnp):
    x = jnp.zeros((300 << 10) // 4)
    y = jnp.ones(200 << 10, dtype=jnp.uint8)
    del x, y


def main(mode):
    import jax
    import jax.numpy as jnp

    import gpuleak

    if mode == "leak":
        for _ in range(4):
            step(jnp)
    elif mode == "cache":
        for _ in range(4):
            step_clean(jnp)
    elif mode == "growth":
        for _ in range(4):
            KEPT.append(jnp.zeros(64 << 10, dtype=jnp.uint8))  # grows every step
            gpuleak.snapshot("step")
        KEPT.clear()
    elif mode == "flat":
        for _ in range(4):
            step_clean(jnp)
            gpuleak.snapshot("step")
    elif mode == "check":
        try:
            with gpuleak.check():
                KEPT.append(jnp.zeros(4096, dtype=jnp.uint8))  # kept past the check
            print("check passed")
        except gpuleak.LeakError as e:
            print("check raised", e.leaked_bytes, str(e).splitlines()[1:3])
        with gpuleak.check():
            z = jnp.zeros(5 << 20, dtype=jnp.uint8)  # a new region, the array dies
            del z
        print("twin passed")
    elif mode in ("oom", "fits"):
        for _ in range(40):
            KEPT.append(jnp.zeros(1 << 20, dtype=jnp.uint8))  # fills the memory
    elif mode == "oom-thread":
        import threading

        def fill():
            for _ in range(40):
                KEPT.append(jnp.zeros(1 << 20, dtype=jnp.uint8))  # fills the memory in a thread

        worker = threading.Thread(target=fill)
        worker.start()
        worker.join()
        print("thread ended with", len(KEPT), "arrays")
        KEPT.clear()
    elif mode == "idle":
        print("backends", len(jax._src.xla_bridge._backends))
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
