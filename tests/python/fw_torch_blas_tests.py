"""A pytest suite on the fake torch (tests/python/fake_torch) with its cuBLAS, for
tests/e2e/python_frameworks/workspaces.rs: under `pytest --gpuleak` the first matmul's
workspace, which the framework keeps for the life of the process, fails no test; a tensor kept
past its test does."""

import pytest
import torch

KEPT = []


@pytest.mark.gpu_limit_leaks(0)
def test_first_matmul_allocates_its_workspace():
    x = torch.empty(4096, device="cuda")
    y = torch.matmul(x)  # the workspace is cuBLAS's from now on
    del x, y


@pytest.mark.gpu_limit_leaks(0)
def test_keeps_a_tensor():
    KEPT.append(torch.empty(8192, device="cuda"))  # kept past the test


@pytest.mark.gpu_limit_leaks(0)
def test_first_cublaslt_matmul_allocates_its_workspace():
    x = torch.empty(4096, device="cuda")
    y = torch.matmul(x, api="cublaslt")  # the workspace is cuBLASLt's from now on
    del x, y
