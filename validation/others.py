"""The CuPy and JAX workload of scripts/validate-gpu: argv[1] is "cupy", "jax", "cupy-oom" or "jax-oom"; runs N steps
(argv[2], default 50), each computing with temporary arrays of 1 MiB and keeping one more 1 MiB
result in a global list (the deliberate leak), as a loop that accumulates results does. The
interpreter's teardown frees the list, as it frees any global, so nothing is left at exit:
`gpuleak report --memory` finds the leak as growth. Prints `leaked_bytes BYTES` (what the list
held), or `skipped NAME` when the framework is not installed.

`cupy-oom` sets the default pool's limit to N MiB and keeps 1 MiB arrays until the pool raises
OutOfMemoryError, then drops them: gpuleak finds `framework-oom` at the KEPT.append line (the
pool's state written by the adapter's function around CuPy's allocator) and no leak.
`jax-oom` keeps N arrays of 1 MiB, asks XLA for 1 TiB, and hands the `RESOURCE_EXHAUSTED`
error to `sys.excepthook` as an error that ends a program would be: gpuleak finds
`framework-oom` at the KEPT.append line (the state written by the JAX adapter's hook)."""
import sys

WHICH = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 50
WORDS = 256 * 1024  # 1 MiB of float32
KEPT = []

try:
    if WHICH == "cupy":
        import cupy

        x = cupy.arange(WORDS, dtype=cupy.float32)
        for i in range(N):
            scaled = x * i  # temporaries, freed when the next step rebinds them
            shifted = scaled + 1
            KEPT.append(shifted * 2)
            float(shifted.sum())
        cupy.cuda.Device().synchronize()
    elif WHICH == "cupy-oom":
        import cupy

        cupy.get_default_memory_pool().set_limit(size=N << 20)
        try:
            for i in range(10 * N):
                KEPT.append(cupy.empty(WORDS, dtype=cupy.float32))
        except cupy.cuda.memory.OutOfMemoryError:
            print(f"oom after {len(KEPT)} arrays")
        KEPT.clear()
        N = 0
    elif WHICH == "jax":
        import jax.numpy as jnp

        x = jnp.arange(WORDS, dtype=jnp.float32)
        for i in range(N):
            scaled = x * i
            shifted = scaled + 1
            KEPT.append(shifted * 2)
            float(shifted.sum())
        for a in KEPT:
            a.block_until_ready()
    elif WHICH == "jax-oom":
        import jax.numpy as jnp

        for i in range(N):
            KEPT.append(jnp.zeros(WORDS, dtype=jnp.float32))
        try:
            too_big = jnp.zeros(1 << 40, dtype=jnp.uint8)  # 1 TiB
            too_big.block_until_ready()
        except Exception:  # noqa: BLE001 - XLA's RESOURCE_EXHAUSTED
            # Handed to sys.excepthook as an error that ends a program is (where gpuleak's
            # JAX adapter writes the state); then the program goes on and exits cleanly.
            sys.excepthook(*sys.exc_info())
            print(f"oom handed to sys.excepthook with {len(KEPT)} arrays kept")
        KEPT.clear()
        N = 0
    else:
        raise SystemExit(f"unknown workload {WHICH}")
except ImportError:
    print(f"skipped {WHICH}")
    sys.exit(0)
print(f"leaked_bytes {N * WORDS * 4}")
