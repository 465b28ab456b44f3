"""The pytest workload of scripts/validate-gpu (row torch-pytest, through
validation/torch_pytest.py): a test that keeps eight 4 MiB tensors in a global list, and its
twin that deletes them, each limited to 1 MB left allocated. Under `gpuleak run
--no-framework-cache` and `pytest --gpuleak` the first must fail and the second pass."""
import pytest
import torch

KEPT = []


@pytest.mark.gpu_limit_leaks("1 MB")
def test_leaks():
    for _ in range(8):
        KEPT.append(torch.empty(1 << 20, device="cuda"))  # 4 MiB each, kept


@pytest.mark.gpu_limit_leaks("1 MB")
def test_clean():
    for _ in range(8):
        t = torch.empty(1 << 20, device="cuda")
        del t
