"""CUDA graph memory through cuda-core's explicit graphs, for gpuleak's end-to-end tests.

`GraphDefinition` builds a graph node by node (cuGraphAddMemAllocNode and
cuGraphAddMemFreeNode through cuda-bindings' resolver table); cuda-core ties what the
executable graph needs to it with a user object (cuUserObjectCreate, cuGraphRetainUserObject).
The program builds one graph of two allocation nodes:

- one (in allocate_scratch) that a free node of the same graph frees: it lives only while the
  graph runs;
- one (in allocate_kept) that the graph does not free.

It instantiates the graph, launches it once and synchronizes. With "clean" it then frees the
kept memory the way graph memory is freed from another graph: a second GraphDefinition of one
free node, launched once. Without, that memory outlives the run (the leak).

Prints "node size=N freed=F" per allocation node, then "launched" and "done".
"""

import sys

from cuda.core import Device
from cuda.core.graph import GraphDefinition

SCRATCH_BYTES = 64 << 10
KEPT_BYTES = 256 << 10


def allocate_scratch(graph):
    node = graph.allocate(SCRATCH_BYTES)
    node.deallocate(node.dptr)
    print(f"node size={node.bytesize} freed=1", flush=True)


def allocate_kept(graph):
    node = graph.allocate(KEPT_BYTES)
    print(f"node size={node.bytesize} freed=0", flush=True)
    return node.dptr


def launch_once(graph, stream):
    graph_exec = graph.instantiate()
    graph_exec.launch(stream)
    stream.sync()
    graph_exec.close()


def main():
    clean = sys.argv[1:] == ["clean"]
    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()

    graph = GraphDefinition()
    allocate_scratch(graph)
    kept = allocate_kept(graph)
    launch_once(graph, stream)
    print("launched", flush=True)
    if clean:
        release = GraphDefinition()
        release.deallocate(kept)
        launch_once(release, stream)
    stream.close()
    print("done", flush=True)


if __name__ == "__main__":
    main()
