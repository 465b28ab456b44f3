"""`jax.profiler.device_memory_profile()`: the live buffers as a pprof profile, grouped as
JAX groups them (one sample per Python stack, size and device; values `allocations` and
`space`; labels `kind` and `device`), and one compiled executable, which is no array."""

from jax._src import pprof, xla_bridge


def device_memory_profile(backend=None):
    client = xla_bridge.get_backend(backend)
    groups = {}
    for size, frames, _ref in list(client.live.values()):
        key = (tuple(frames), size, str(client.devices[0]))
        groups[key] = groups.get(key, 0) + 1
    samples = [
        (list(frames), {"allocations": n, "space": n * size}, {"kind": "buffer", "device": device})
        for (frames, size, device), n in groups.items()
    ]
    samples.append(([(__file__, 1, "compile")], {"allocations": 1, "space": 4096}, {"kind": "executable"}))
    return pprof.encode(samples)
