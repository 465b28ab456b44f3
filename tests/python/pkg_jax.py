"""The JAX adapter's readings against the real JAX on its CPU backend, which runs
`device_memory_profile()`, `live_arrays()` and `unsafe_buffer_pointer()` for real (no GPU
needed). tests/e2e/python_frameworks.rs runs `python -m pytest` on this file in target/pkgenv,
where jax[cpu] is pinned (scripts/wheel-test-env).

The arrays are made by `keep_*` functions below; each test finds them at their lines."""

import gzip
import importlib.util
import os
import pathlib
import sys

import pytest

# Two CPU devices, for a sharded array (read when the backend starts, after this).
os.environ["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2").strip()

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from gpuleak import _frameworks, _jax, _pprof  # noqa: E402

HERE = pathlib.Path(__file__).resolve()
KEPT = []


def line_of(ending):
    return next(i + 1 for i, t in enumerate(HERE.read_text().splitlines()) if t.rstrip().endswith(ending))


def keep_ones():
    KEPT.append(jnp.ones((1000,), dtype=jnp.float32))  # 4000 bytes


def keep_zeros():
    KEPT.append(jnp.zeros((3, 100), dtype=jnp.uint8))  # 300 bytes, three times
    KEPT.append(jnp.zeros((3, 100), dtype=jnp.uint8))  # 300 bytes, three times
    KEPT.append(jnp.zeros((3, 100), dtype=jnp.uint8))  # 300 bytes, three times


def fake_encoder():
    """The stand-in's encoder (tests/python/fake_jax), loaded by path: the real jax is the
    `jax` module here."""
    path = HERE.parent / "fake_jax" / "jax" / "_src" / "pprof.py"
    spec = importlib.util.spec_from_file_location("fake_jax_pprof", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def arrays():
    KEPT.clear()
    keep_ones()
    for _ in range(2):
        keep_zeros()
    for a in KEPT:
        a.block_until_ready()
    yield KEPT
    KEPT.clear()


def user_line(frames):
    """`file:line` of the first frame outside jax (the analyzer's rule)."""
    f = next(f for f in frames if not _frameworks._is_framework_file(f[0]))
    return f"{f[0]}:{f[1]}"


def test_a_real_profile_names_each_kept_array_at_its_line(arrays):
    raw = jax.profiler.device_memory_profile()
    assert raw[:2] == b"\x1f\x8b"
    samples = _pprof.decode(raw)
    buffers = [s for s in samples if s.labels.get("kind") == "buffer"]
    by_line = {}
    for s in buffers:
        key = user_line(s.frames)
        n, b = by_line.get(key, (0, 0))
        by_line[key] = (n + s.values["allocations"], b + s.values["space"])
    ones = f"{HERE}:{line_of('# 4000 bytes')}"
    assert by_line[ones] == (1, 4000), by_line
    zeros = f"{HERE}:{line_of('KEPT.append(jnp.zeros((3, 100), dtype=jnp.uint8))  # 300 bytes, three times')}"
    # The first of the three lines; each of the three holds two arrays of 300 bytes.
    assert by_line[zeros] == (2, 600), by_line
    # Innermost first: jax's own frames, then this file's keep_*, then its caller.
    s = next(s for s in buffers if user_line(s.frames) == ones)
    names = [f[2] for f in s.frames if f[0] == str(HERE)]
    assert names[:2] == ["keep_ones", "arrays"], s.frames
    assert all(isinstance(s.labels.get("device"), str) for s in buffers)
    assert {s.labels.get("kind") for s in samples} <= {"buffer", "executable"}


def test_the_stand_in_s_encoder_writes_what_the_decoder_reads_from_the_real_one(arrays):
    real = _pprof.decode(jax.profiler.device_memory_profile())
    fake = fake_encoder()
    again = _pprof.decode(fake.encode([(s.frames, s.values, s.labels) for s in real]))
    assert again == real
    # The same message shape: the top-level fields JAX writes are the ones the stand-in writes.
    top = lambda data: sorted({n for n, _w, _v, _o in _pprof._fields(gzip.decompress(data))})  # noqa: E731
    assert top(fake.encode([(s.frames, s.values, s.labels) for s in real])) == top(
        jax.profiler.device_memory_profile()
    )


def test_the_adapter_places_each_buffer_at_its_array_s_address(arrays):
    adapter = _jax.JaxAdapter(jax)
    assert adapter.started()
    snap, stats = adapter.snapshot()
    assert stats == {}  # the CPU backend has no memory_stats()
    (segment,) = snap["segments"]
    assert (segment["address"], segment["total_size"]) == (0, 0)
    blocks = {b["address"]: b for b in segment["blocks"]}
    for a in arrays:
        b = blocks[a.unsafe_buffer_pointer()]
        assert b["size"] == a.on_device_size_in_bytes()
        assert b["state"] == "active_allocated"
        frames = [(f["filename"], f["line"], f["name"]) for f in b["frames"]]
        assert user_line(frames).startswith(f"{HERE}:")
    # Host memory is no device's: the adapter writes no state for the CPU backend.
    assert adapter.dump("snapshot") == 0
    assert adapter.sites() == []


def test_a_sharded_array_s_buffers_are_placed_per_device(arrays):
    from jax.sharding import Mesh, NamedSharding, PartitionSpec

    mesh = Mesh(jax.devices()[:2], ("x",))
    sharded = jax.device_put(jnp.ones((2, 512), dtype=jnp.float32), NamedSharding(mesh, PartitionSpec("x")))
    sharded.block_until_ready()
    try:
        snap, _stats = _jax.JaxAdapter(jax).snapshot()
        placed = {(s["device"], b["address"]) for s in snap["segments"] for b in s["blocks"]}
        for shard in sharded.addressable_shards:
            assert (shard.device.id, shard.data.unsafe_buffer_pointer()) in placed, (shard.device, placed)
        assert {s["device"] for s in snap["segments"]} == {0, 1}
    finally:
        sharded.delete()


def test_a_profile_that_is_not_pprof_is_an_error_with_its_offset():
    with pytest.raises(_pprof.PprofError, match="offset"):
        _pprof.decode(b"\x0a\x05ab")  # field 1, 5 bytes announced, 2 there
    with pytest.raises(_pprof.PprofError, match="gzip"):
        _pprof.decode(b"\x1f\x8bnot gzip")
    assert _pprof.decode(b"") == []


def test_jax_is_not_started_by_the_adapter():
    code = (
        "import sys, jax\n"
        "from gpuleak import _jax\n"
        "a = _jax.JaxAdapter(jax)\n"
        "print(a.started(), a.dump('exit'), a.sites(), bool(jax._src.xla_bridge._backends))\n"
    )
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "False 0 [] False\n", out.stderr
