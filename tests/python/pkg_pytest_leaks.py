"""Tests for the gpuleak pytest plugin (tests/e2e/python_pkg.rs runs them under
`gpuleak run -- pytest --gpuleak`, with and without pytest-xdist): each leaking test has a
fixed twin, and the e2e test asserts exactly which ones fail and why.

The leaks are real allocations through cuda-bindings on the simulated driver."""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from pkg_cuda import alloc, free  # noqa: E402

MIB = 1 << 20
CACHE = []  # what the leaking tests keep: alive after the test, as a leak is


def make_cache(size):
    """The leaking line: a buffer put in a module-level list and never freed."""
    CACHE.append(alloc(size))


@pytest.mark.gpu_limit_leaks("1 MB")
def test_leaks_2_mib():
    make_cache(2 * MIB)


@pytest.mark.gpu_limit_leaks("1 MB")
def test_leaks_2_mib_fixed():
    ptr = alloc(2 * MIB)
    free(ptr)


@pytest.mark.gpu_limit_leaks("1 MB")
def test_leaks_1_mib_at_a_1_mb_limit():
    # "1 MB" is 1048576 bytes, as pytest-memray reads it: exactly at the limit passes.
    make_cache(MIB)


@pytest.mark.gpu_limit_leaks("1 MB")
def test_leaks_512_kib_under_the_limit():
    make_cache(512 << 10)


@pytest.mark.gpu_limit_memory("4 MB")
def test_peak_8_mib():
    a = alloc(8 * MIB)
    free(a)


@pytest.mark.gpu_limit_memory("4 MB")
def test_peak_8_mib_fixed():
    for _ in range(4):
        a = alloc(2 * MIB)
        free(a)


def test_unmarked_leak():
    make_cache(256 << 10)
