"""CUDA graph memory through cuda-core's graphs, for gpuleak's end-to-end tests.

Two graphs, each with an allocation node that the graph frees itself (scratch: it lives only
while the graph runs) and one that it does not (kept):

- a `GraphDefinition`, built node by node (cuGraphAddMemAllocNode, cuGraphAddMemFreeNode);
  its kept node's memory belongs to no Python object;
- a `GraphBuilder`, captured from a stream (cuStreamBeginCapture_v2, cuStreamGetCaptureInfo,
  then cuMemAllocAsync and cuMemFreeAsync under capture, through a `GraphMemoryResource`); its
  kept memory is a `Buffer`, which cuda-core frees when the object goes.

cuda-core keeps what an executable graph needs alive with a user object (cuUserObjectCreate,
cuGraphRetainUserObject). Each graph is instantiated, launched once and synchronized. Then, by
the first argument:

    clean  the definition's kept memory is freed by a second GraphDefinition of one free node,
           launched once, and the captured Buffer is closed on the stream: nothing leaks;
    leak   nothing is freed by the program: the definition's kept memory leaks, while the
           captured Buffer is freed by its finalizer when the interpreter shuts down;
    exit   as leak, but the process ends with os._exit, which runs no finalizer: both leak.

Prints "node size=N freed=F" per allocation, then "launched" and "done".
"""

import os
import sys

from cuda.core import Device, GraphMemoryResource
from cuda.core.graph import GraphDefinition

SCRATCH_BYTES = 64 << 10
KEPT_BYTES = 256 << 10
CAPTURED_BYTES = 128 << 10


def allocate_scratch(graph):
    node = graph.allocate(SCRATCH_BYTES)
    node.deallocate(node.dptr)
    print(f"node size={node.bytesize} freed=1", flush=True)


def allocate_kept(graph):
    node = graph.allocate(KEPT_BYTES)
    print(f"node size={node.bytesize} freed=0", flush=True)
    return node.dptr


def capture_scratch(builder, memory):
    buf = memory.allocate(SCRATCH_BYTES, stream=builder)
    buf.close(builder)
    print(f"node size={SCRATCH_BYTES} freed=1", flush=True)


def capture_kept(builder, memory):
    buf = memory.allocate(CAPTURED_BYTES, stream=builder)
    print(f"node size={buf.size} freed=0", flush=True)
    return buf


def launch_once(graph, stream):
    graph.launch(stream)
    stream.sync()
    graph.close()


def main(mode):
    dev = Device(0)
    dev.set_current()
    stream = dev.create_stream()

    definition = GraphDefinition()
    allocate_scratch(definition)
    kept = allocate_kept(definition)
    launch_once(definition.instantiate(), stream)

    memory = GraphMemoryResource(dev)
    builder = stream.create_graph_builder()
    builder.begin_building()
    capture_scratch(builder, memory)
    captured = capture_kept(builder, memory)
    launch_once(builder.end_building().complete(), stream)
    print("launched", flush=True)

    if mode == "clean":
        release = GraphDefinition()
        release.deallocate(kept)
        launch_once(release.instantiate(), stream)
        captured.close(stream)
        stream.sync()
    print("done", flush=True)
    if mode == "exit":
        os._exit(0)
    KEEP.append(captured)


KEEP = []

if __name__ == "__main__":
    main(sys.argv[1])
