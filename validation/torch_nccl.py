"""The NCCL workload of scripts/validate-gpu (row torch-nccl): one rank of torch.distributed
with the NCCL backend, ten all_reduce of 4 MiB, then the process group destroyed. NCCL
allocates its buffers with cuMemCreate and retains them (cuMemRetainAllocationHandle); all of
it is released by the end, so no leak and no finding is expected (PyTorch's streams and
events, kept for the life of the process, are notes). Prints `leaked_bytes 0`.

With `outside` (row torch-nccl-tensors) the process group is destroyed by an exit handler
registered before torch is imported, so it runs after gpuleak's, which writes PyTorch's state
while NCCL's buffers are still allocated: they are memory outside PyTorch, named NCCL."""
import atexit
import os
import sys

OUTSIDE = sys.argv[1:] == ["outside"]
if OUTSIDE:
    atexit.register(lambda: dist.destroy_process_group())

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
os.environ.setdefault("MASTER_PORT", "29511")
dist.init_process_group("nccl", rank=0, world_size=1, device_id=torch.device("cuda:0"))
x = torch.ones(1 << 20, device="cuda")
for _ in range(10):
    dist.all_reduce(x)
torch.cuda.synchronize()
if not OUTSIDE:
    dist.destroy_process_group()
assert x[0].item() == 1.0, x[0].item()
del x  # no tensor of the program's is live at exit
print("leaked_bytes 0")
