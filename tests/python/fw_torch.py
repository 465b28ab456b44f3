"""A training loop on the fake torch (tests/python/fake_torch), for tests/e2e/python_frameworks.rs.

    python fw_torch.py MODE

- `leak`: each step keeps one activation in a global list (the bug); the rest is freed.
- `cache`: every tensor is freed; the allocator keeps its segments cached (no leak).
- `growth`: a snapshot per step while a list of tensors grows; the list is cleared before exit.
- `flat`: a snapshot per step, each step's tensors freed: the cache warms up and stays flat.
- `oom`: kept tensors fill the allocator's limit (FAKE_TORCH_MEMORY_LIMIT) until it raises.
- `outside`: the program's own cuMemAlloc beside the framework, kept to the end.
- `vmm-outside`: the program's own VMM memory beside the framework, kept to the end: a 4 MiB
  handle mapped at two addresses and a 2 MiB handle mapped nowhere (run with expandable
  segments, whose handles are the framework's).
- `check`: gpuleak.check() around a block that keeps a tensor, and its fixed twin.
- `signal`: three tensors live at a `gpuleak.snapshot()` and then when the process sends itself
  GPULEAK_SNAPSHOT_SIGNAL's signal (USR2); it waits for the package's watcher to write their
  state, then frees them.
- `signal-freed`: the same with the tensors freed before the signal.
- `signal-fork`: a forked child keeps a tensor of a new segment and sends itself the signal.
- `workspace`, `workspace-lt`: matmuls through cuBLAS (`cublasSetWorkspace_v2`) or cuBLASLt
  (`cublasLtMatmul`), whose workspace the framework keeps to the end, as PyTorch does (run
  with FAKE_TORCH_BLAS naming the native library); `workspace-failed`: both, with the status
  FAKE_CUBLAS_STATUS chooses, printed as they raise.
- `kept`, `kept-lt`: a tensor of a workspace's size kept to the end, never handed to cuBLAS.
- `check-workspace`: gpuleak.check() around the first matmul, which allocates its workspace.

It prints `done` at the end; `oom` prints `oom caught` first.
"""

import sys

import torch

KEPT = []


def step(n):
    x = torch.empty(300 << 10, device="cuda")
    y = torch.empty(200 << 10, device="cuda")
    KEPT.append(torch.empty(100 << 10, device="cuda"))  # the leak
    del x, y


def step_clean(n):
    x = torch.empty(300 << 10, device="cuda")
    y = torch.empty(200 << 10, device="cuda")
    del x, y


def main(mode):
    import gpuleak

    if mode == "leak":
        for n in range(4):
            step(n)
    elif mode == "cache":
        for n in range(4):
            step_clean(n)
    elif mode == "growth":
        for n in range(4):
            KEPT.append(torch.empty(64 << 10, device="cuda"))  # grows every step
            gpuleak.snapshot("step")
        KEPT.clear()
    elif mode == "flat":
        for n in range(4):
            step_clean(n)
            gpuleak.snapshot("step")
    elif mode == "oom":
        try:
            for n in range(100):
                KEPT.append(torch.empty(1 << 20, device="cuda"))  # fills the device
        except torch.cuda.OutOfMemoryError:
            print("oom caught", flush=True)
        KEPT.clear()
    elif mode == "outside":
        from cuda.bindings import driver as cu

        step_clean(0)
        err, mine = cu.cuMemAlloc(3 << 20)  # the program's own buffer
        assert err == cu.CUresult.CUDA_SUCCESS
    elif mode == "vmm-outside":
        from cuda.bindings import driver as cu

        def ok(result):
            assert result[0] == cu.CUresult.CUDA_SUCCESS, result
            return result[1] if len(result) == 2 else None

        step_clean(0)
        prop = cu.CUmemAllocationProp()
        prop.type = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
        prop.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
        prop.location.id = 0
        mapped = ok(cu.cuMemCreate(4 << 20, prop, 0))  # the program's handle, mapped twice
        spare = ok(cu.cuMemCreate(2 << 20, prop, 0))  # the program's handle, mapped nowhere
        base = int(ok(cu.cuMemAddressReserve(8 << 20, 0, 0, 0)))
        ok(cu.cuMemMap(base, 4 << 20, 0, mapped, 0))
        ok(cu.cuMemMap(base + (4 << 20), 4 << 20, 0, mapped, 0))
    elif mode in ("signal", "signal-freed"):
        import os
        import signal
        import time

        from gpuleak import _watch

        for n in range(3):
            KEPT.append(torch.empty(100 << 10, device="cuda"))  # live at the signal
        if mode == "signal-freed":
            KEPT.clear()
        gpuleak.snapshot("own")  # its state is the package's, never the watcher's too
        os.kill(os.getpid(), signal.SIGUSR2)
        deadline = time.monotonic() + 20
        while not _watch.written() and time.monotonic() < deadline:
            time.sleep(0.02)
        print("watched", _watch.written())
        KEPT.clear()
    elif mode == "signal-fork":
        import os
        import signal
        import time

        from gpuleak import _watch

        pid = os.fork()
        if pid == 0:
            KEPT.append(torch.empty(3 << 20, device="cuda"))  # a new segment: the child's trace
            os.kill(os.getpid(), signal.SIGUSR2)
            deadline = time.monotonic() + 20
            while not _watch.written() and time.monotonic() < deadline:
                time.sleep(0.02)
            print("child watched", _watch.written(), flush=True)
            KEPT.clear()
            os._exit(0)
        os.waitpid(pid, 0)
    elif mode in ("workspace", "workspace-lt"):
        api = "cublaslt" if mode == "workspace-lt" else "cublas"
        x = torch.empty(4096, device="cuda")
        for n in range(3):
            y = torch.matmul(x, api=api)  # the forward
            del y
    elif mode == "workspace-failed":
        x = torch.empty(4096, device="cuda")
        for api in ("cublas", "cublaslt"):
            try:
                torch.matmul(x, api=api)  # fails
            except RuntimeError as e:
                print("raised:", e)
    elif mode in ("kept", "kept-lt"):
        size = (1 << 20) if mode == "kept-lt" else (4 << 20)
        KEPT.append(torch.empty(size, device="cuda"))  # kept, never handed to cuBLAS
    elif mode == "check-workspace":
        x = torch.empty(4096, device="cuda")
        with gpuleak.check():
            y = torch.matmul(x)  # the first matmul allocates cuBLAS's workspace
            del y
        print("check passed")
    elif mode == "check":
        try:
            with gpuleak.check():
                KEPT.append(torch.empty(4096, device="cuda"))  # kept past the check
            print("check passed")
        except gpuleak.LeakError as e:
            print("check raised", e.leaked_bytes, str(e).splitlines()[1:3])
        with gpuleak.check():
            z = torch.empty(5 << 20, device="cuda")  # the cache grows, the tensor dies
            del z
        print("twin passed")
    print("done", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])
