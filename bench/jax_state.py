"""bench/jax_state.py: what one JAX state costs the program (docs/performance.md): N live arrays
of 1 KiB made at one line on the real JAX's CPU backend, then each step of the JAX adapter
(python/gpuleak/_jax.py) timed once: device_memory_profile(), its decoding, the addresses of
live_arrays(), and the whole state. Needs jax in the interpreter (target/pkgenv has jax[cpu]):

    JAX_PLATFORMS=cpu PYTHONPATH=python target/pkgenv/bin/python bench/jax_state.py 10000
"""

import sys
import time

import jax
import jax.numpy as jnp

from gpuleak import _jax, _pprof

N = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
base = jnp.ones((256,), dtype=jnp.float32)
kept = [base + i for i in range(N)]
for a in kept:
    a.block_until_ready()
t = time.perf_counter()
raw = jax.profiler.device_memory_profile()
t_prof = time.perf_counter() - t
t = time.perf_counter()
samples = _pprof.decode(raw)
t_dec = time.perf_counter() - t
adapter = _jax.JaxAdapter(jax)
t = time.perf_counter()
adapter.buffers()
t_buf = time.perf_counter() - t
t = time.perf_counter()
adapter.snapshot()
t_snap = time.perf_counter() - t
print(
    f"arrays {N}: profile {len(raw)} B in {t_prof * 1e3:.1f} ms, decode {len(samples)} samples in "
    f"{t_dec * 1e3:.1f} ms, live_arrays addresses {t_buf * 1e3:.1f} ms, whole snapshot {t_snap * 1e3:.1f} ms"
)
