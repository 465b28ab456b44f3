"""A pytest suite on the fake torch (tests/python/fake_torch), for tests/e2e/python_frameworks.rs:
under `pytest --gpuleak` the test that keeps a tensor fails at its line, and its twin, whose
tensor dies while the cache grows, passes."""

import pytest
import torch

KEPT = []


@pytest.mark.gpu_limit_leaks(0)
def test_keeps_a_tensor():
    KEPT.append(torch.empty(8192, device="cuda"))  # kept past the test


@pytest.mark.gpu_limit_leaks(0)
def test_cache_grows_tensor_dies():
    x = torch.empty(3 << 20, device="cuda")  # the cache grows; the tensor dies
    del x


@pytest.mark.gpu_limit_leaks(0)
def test_reuses_the_cache():
    x = torch.empty(1 << 20, device="cuda")
    del x
