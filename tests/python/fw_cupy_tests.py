"""A pytest suite on the fake CuPy (tests/python/fake_cupy), for tests/e2e/python_frameworks.rs:
under `pytest --gpuleak` the test that keeps an array fails at its line, and its twin, whose
array dies while the pool grows, passes."""

import cupy
import pytest

KEPT = []


@pytest.mark.gpu_limit_leaks(0)
def test_keeps_an_array():
    KEPT.append(cupy.empty(8192, dtype=cupy.uint8))  # kept past the test


@pytest.mark.gpu_limit_leaks(0)
def test_pool_grows_array_dies():
    x = cupy.empty(3 << 20, dtype=cupy.uint8)  # the pool grows; the array dies
    del x


@pytest.mark.gpu_limit_leaks(0)
def test_reuses_the_pool():
    x = cupy.empty(1 << 20, dtype=cupy.uint8)
    del x
