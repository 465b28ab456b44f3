"""The cost workload of scripts/validate-gpu (row torch-cost): two PyTorch training loops, each
timed inside the process after a warm-up, so that start-up is left out:

- `mlp`: the small model of torch_leak.py (two linear layers, batch 64), bound by kernel
  launches and the caching allocator's calls: a tensor's allocation and free cost most here;
- `transformer`: one encoder layer (d_model 1024, 16 heads, batch 16 x 512 tokens) with AdamW
  and bf16 autocast, a step that keeps the GPU busy as real training does.

Prints one line per loop, `ms_per_step NAME MILLISECONDS`, the median of five timed windows.
With MEMORY_HISTORY=state it turns on the recording the gpuleak adapter turns on (PyTorch's
cheapest mode that keeps a Python stack per live block), to tell PyTorch's own cost from the
shim's. With COST_TOGGLE=1 (under gpuleak, where the adapter turned the recording on) the
windows alternate between recording and not, ten in all, and it prints `NAME-recording` and
`NAME-not-recording`: PyTorch's recording's cost inside one process, without the spread
between processes."""
import os
import statistics
import sys
import time

import torch

if os.environ.get("MEMORY_HISTORY") == "state":
    torch.cuda.init()
    torch.cuda.memory._record_memory_history(enabled="state", context="state", stacks="python")


def recording(on):
    """PyTorch's recording on (in the adapter's mode) or off, for COST_TOGGLE."""
    if on:
        torch.cuda.memory._record_memory_history(enabled="state", context="state", stacks="python")
    else:
        torch.cuda.memory._record_memory_history(enabled=None)


def timed(name, step, warmup, steps):
    for _ in range(warmup):
        step()
    torch.cuda.synchronize()
    toggle = os.environ.get("COST_TOGGLE") == "1"
    windows = {True: [], False: []}
    for i in range(10 if toggle else 5):
        on = i % 2 == 0 or not toggle
        if toggle:
            recording(on)
        t0 = time.perf_counter()
        for _ in range(steps):
            step()
        torch.cuda.synchronize()
        windows[on].append((time.perf_counter() - t0) * 1000 / steps)
    if toggle:
        recording(True)
        print(f"ms_per_step {name}-recording {statistics.median(windows[True]):.4f}", flush=True)
        print(f"ms_per_step {name}-not-recording {statistics.median(windows[False]):.4f}", flush=True)
    else:
        print(f"ms_per_step {name} {statistics.median(windows[True]):.4f}", flush=True)


def mlp():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 512)).cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    x = torch.randn(64, 512, device="cuda")
    y = torch.randn(64, 512, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.mse_loss(model(x), y).backward()
        opt.step()

    timed("mlp", step, 50, 200)


def transformer():
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(1024, 16, 4096, batch_first=True).cuda()
    opt = torch.optim.AdamW(layer.parameters(), lr=1e-4)
    x = torch.randn(16, 512, 1024, device="cuda")

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = layer(x).float().pow(2).mean()
        loss.backward()
        opt.step()

    timed("transformer", step, 10, 40)


for which in sys.argv[1:] or ["mlp", "transformer"]:
    {"mlp": mlp, "transformer": transformer}[which]()
