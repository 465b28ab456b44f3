"""The CuPy and JAX workload of scripts/validate-gpu: argv[1] is "cupy" or "jax"; leaks N
(argv[2], default 50) arrays of 1 MiB kept in a global list, which the interpreter's teardown
frees, as it frees any global: `gpuleak report --memory` finds the leak as growth. Prints
`leaked_bytes BYTES`, or `skipped NAME` when the framework is not installed."""
import sys

WHICH = sys.argv[1]
N = int(sys.argv[2]) if len(sys.argv) > 2 else 50
KEPT = []

try:
    if WHICH == "cupy":
        import cupy

        for _ in range(N):
            KEPT.append(cupy.zeros(256 * 1024, dtype=cupy.float32))
        cupy.cuda.Device().synchronize()
    elif WHICH == "jax":
        import jax
        import jax.numpy as jnp

        for i in range(N):
            KEPT.append(jax.device_put(jnp.full((256 * 1024,), i, dtype=jnp.float32)))
        for a in KEPT:
            a.block_until_ready()
    else:
        raise SystemExit(f"unknown workload {WHICH}")
except ImportError:
    print(f"skipped {WHICH}")
    sys.exit(0)
print(f"leaked_bytes {N * 1024 * 1024}")
