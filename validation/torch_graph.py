"""The CUDA-graph workload of scripts/validate-gpu: a torch.cuda.graph replayed on the current
stream, whose output a side stream copies to pinned host memory after each replay.

    torch_graph.py race      the side stream copies without waiting for the replay: gpuleak
                             must report a cross-stream-race between the copy and cuGraphLaunch
                             (the graph's memcpy node writes the output the copy reads);
    torch_graph.py ordered   the side stream first waits for the current stream
                             (`side.wait_stream(...)`): no finding.

    torch_graph.py branch-race     inside the capture, the graph forks onto a side stream
                                   that copies a buffer out while the capturing stream then
                                   overwrites it, joining back only at the end: gpuleak must
                                   report a graph-race between the two memcpy nodes;
    torch_graph.py branch-ordered  the capturing stream first waits for the side stream: no
                                   finding.

    torch_graph.py free-race       with PyTorch's cudaMallocAsync backend (set here, before
                                   torch starts), a temporary made inside the capture (an
                                   allocation node) is read by a side stream and deleted on
                                   the capturing stream before it waits for the side stream
                                   (a free node): gpuleak must report an unordered-free
                                   between the free node and the side stream's memcpy node;
    torch_graph.py free-ordered    the temporary is deleted after the capturing stream waits
                                   for the side stream: no finding.

The graph's work is a copy into the static output (`static_out.copy_(...)`: a memcpy node,
whose range the shim reads exactly, unlike an elementwise kernel's, whose pointers travel in a
structure). The host synchronizes after every step. Prints `done STEPS` and, as PyTorch says
it, `torch_allocated BYTES`."""
import os
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "ordered"
if MODE.startswith("free-"):
    # Allocations under capture become graph memory nodes only with this backend.
    os.environ["PYTORCH_CUDA_ALLOC_CONF"] = "backend:cudaMallocAsync"

import torch  # noqa: E402

STEPS = 5


def replay(graph):
    """Replays `graph` STEPS times, synchronizing after each, and says what PyTorch holds."""
    for _ in range(STEPS):
        graph.replay()
        torch.cuda.synchronize()
    print(f"done {STEPS}")
    print(f"torch_allocated {torch.cuda.memory_allocated()}")


def branches():
    """The branch-race and branch-ordered modes: a race inside the graph, or none."""
    src = torch.ones(1 << 18, device="cuda")
    mid = torch.empty_like(src)
    out = torch.empty_like(src)
    side = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        main = torch.cuda.current_stream()
        mid.copy_(src)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            out.copy_(mid)
        if MODE == "branch-ordered":
            main.wait_stream(side)
        mid.copy_(src)
        main.wait_stream(side)
    replay(graph)


def frees():
    """The free-race and free-ordered modes: graph memory freed inside the graph while a side
    stream still reads it, or after it is done."""
    src = torch.ones(1 << 18, device="cuda")
    out = torch.empty_like(src)
    side = torch.cuda.Stream()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        main = torch.cuda.current_stream()
        tmp = torch.empty_like(src)
        tmp.copy_(src)
        side.wait_stream(main)
        with torch.cuda.stream(side):
            out.copy_(tmp)
        if MODE == "free-ordered":
            main.wait_stream(side)
        del tmp
        main.wait_stream(side)
    replay(graph)


def main():
    if MODE in ("branch-race", "branch-ordered"):
        branches()
        return
    if MODE in ("free-race", "free-ordered"):
        frees()
        return
    if MODE not in ("race", "ordered"):
        sys.exit(
            f"torch_graph.py: mode {MODE!r} is not race, ordered, branch-race, branch-ordered, free-race or free-ordered"
        )
    static_in = torch.ones(1 << 18, device="cuda")
    static_out = torch.empty_like(static_in)
    # Warm up on a side stream, as PyTorch's documentation asks before a capture.
    warm = torch.cuda.Stream()
    warm.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(warm):
        for _ in range(3):
            static_out.copy_(static_in * 2)
    torch.cuda.current_stream().wait_stream(warm)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_out.copy_(static_in * 2)
    side = torch.cuda.Stream()
    host = torch.empty(static_out.shape, pin_memory=True)
    for step in range(STEPS):
        static_in.fill_(step)
        graph.replay()
        if MODE == "ordered":
            side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            host.copy_(static_out, non_blocking=True)
        torch.cuda.synchronize()
    print(f"done {STEPS}")
    print(f"torch_allocated {torch.cuda.memory_allocated()}")


if __name__ == "__main__":
    main()
