"""A pytest suite on the fake JAX (tests/python/fake_jax), for tests/e2e/python_frameworks.rs:
under `pytest --gpuleak` the test that keeps an array fails at its line, and its twins, whose
array dies while XLA's allocator grows or is reused, pass."""

import jax.numpy as jnp
import pytest

KEPT = []


@pytest.mark.gpu_limit_leaks(0)
def test_keeps_an_array():
    KEPT.append(jnp.zeros(8192, dtype=jnp.uint8))  # kept past the test


@pytest.mark.gpu_limit_leaks(0)
def test_region_grows_array_dies():
    x = jnp.zeros(3 << 20, dtype=jnp.uint8)  # a new region; the array dies
    del x


@pytest.mark.gpu_limit_leaks(0)
def test_reuses_the_region():
    x = jnp.zeros(1 << 20, dtype=jnp.uint8)
    del x
