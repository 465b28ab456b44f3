"""The CuPy and JAX workload of scripts/validate-gpu: argv[1] is "cupy", "jax" or "cupy-oom"; runs N steps
(argv[2], default 50), each computing with temporary arrays of 1 MiB and keeping one more 1 MiB
result in a global list (the deliberate leak), as a loop that accumulates results does. The
interpreter's teardown frees the list, as it frees any global, so nothing is left at exit:
`gpuleak report --memory` finds the leak as growth. Prints `leaked_bytes BYTES` (what the list
held), or `skipped NAME` when the framework is not installed.

`cupy-oom` sets the default pool's limit to N MiB and keeps 1 MiB arrays until the pool raises
OutOfMemoryError, then drops them: gpuleak finds `framework-oom` at the KEPT.append line (the
pool's state written by the adapter's function around CuPy's allocator) and no leak."""
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
    else:
        raise SystemExit(f"unknown workload {WHICH}")
except ImportError:
    print(f"skipped {WHICH}")
    sys.exit(0)
print(f"leaked_bytes {N * WORDS * 4}")
