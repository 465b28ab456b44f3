"""The PyTorch workload of scripts/validate-gpu: a small training loop that keeps one 1 MiB
tensor per step in a global list (the deliberate leak). Prints what PyTorch itself says:
`torch_allocated BYTES` (torch.cuda.memory_allocated() at the end) and `leaked_bytes BYTES`.

With MEMORY_HISTORY=1 it records PyTorch's own allocation history meanwhile
(torch.cuda.memory._record_memory_history), the baseline for the slowdown comparison."""
import os
import sys

import torch

STEPS = int(sys.argv[1]) if len(sys.argv) > 1 else 50
KEPT = []


def step(model, opt, x, y):
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    opt.step()
    # The leak: a 1 MiB tensor kept from every step.
    KEPT.append(torch.empty(256 * 1024, dtype=torch.float32, device="cuda"))


def main():
    if os.environ.get("MEMORY_HISTORY") == "1":
        torch.cuda.memory._record_memory_history(max_entries=100000)
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 512, device="cuda")
    y = torch.randn(64, 512, device="cuda")
    for _ in range(STEPS):
        step(model, opt, x, y)
    torch.cuda.synchronize()
    print(f"torch_allocated {torch.cuda.memory_allocated()}")
    print(f"leaked_bytes {STEPS * 1024 * 1024}")


if __name__ == "__main__":
    main()
