"""Event nodes of a graph built by hand, through cuda-core, for gpuleak's end-to-end tests.

Two streams: the graph runs on the producer, the consumer reads what it wrote. The graph, a
`GraphDefinition`, waits for an event the consumer records (`node.wait`: cuGraphAddEventWaitNode),
sets a device buffer (`memset`: cuGraphAddMemsetNode), then records an event
(`node.record`: cuGraphAddEventRecordNode). It is instantiated once and launched twice:

    launch 1  the graph waits for READY and records DONE; the consumer waits for DONE
              (`stream.wait`: cuStreamWaitEvent), copies the buffer to pinned host memory and
              then clears it, and records READY2 after the clear;
    launch 2  the executable graph now waits for READY2 and records DONE2, so the second
              launch's memset runs after the clear and the consumer's wait for DONE2 orders
              its copy after that memset.

How the executable graph is switched from (READY, DONE) to (READY2, DONE2), by the first
argument:

    node-update   the executable graph's nodes, one by one: `graph[node].update(event)`
                  (cuGraphExecNodeSetParams, CUDA 12.2);
    graph-update  the definition's nodes (`node.update(event)`: cuGraphNodeSetParams), then the
                  whole executable graph from the definition (`Graph.update`:
                  cuGraphExecUpdate, 12.0's ABI);
    child-update  the three nodes sit in a child graph (`embed`: cuGraphAddChildGraphNode,
                  cuGraphChildGraphNodeGetGraph, cuGraphNodeFindInClone), replaced in the
                  executable graph by a second child definition that waits for READY2 and
                  records DONE2 (`graph[child].update(definition)`: cuGraphExecNodeSetParams);
    no-update     the mistake: nothing is switched, so the second launch records DONE again
                  and the consumer's wait for DONE2 is for an event never recorded, and it
                  waits for READY again, not READY2: its memset races with the clear, and
                  the consumer's copy and free are not ordered after it.

DONE and DONE2 have timing enabled: the time from START (recorded on the producer before the
first launch) to each tells whether a launch has recorded it yet (cuEventElapsedTime fails for
an event never recorded). Prints "mode M", one "launch N value=V done=D done2=D2" line per
launch (V: the byte the consumer read; D, D2: 1 if the event has been recorded), then "done".
Every buffer is closed on the consumer stream, and the executable graph is closed: nothing leaks.
"""

import ctypes
import gc
import sys

from cuda.core import Device, EventOptions, LegacyPinnedMemoryResource
from cuda.core.graph import GraphDefinition

NBYTES = 4096
VALUE = 7


def build(definition, buf, ready, done):
    """wait(ready) -> memset(buf, VALUE) -> record(done), the first node an entry point."""
    wait = definition.wait(ready)
    memset = wait.memset(buf, VALUE, NBYTES)
    record = memset.record(done)
    return wait, record


def recorded(event, start):
    try:
        event - start
    except Exception:  # cuda-core's CUDAError: the event was never recorded
        return 0
    return 1


def consume(n, buf, host, consumer, done, events, start):
    consumer.wait(done)
    buf.copy_to(host, stream=consumer)
    consumer.sync()
    value = ctypes.string_at(int(host.handle), NBYTES)
    same = value == bytes([value[0]]) * NBYTES
    flags = " ".join(f"{name}={recorded(e, start)}" for name, e in events)
    print(f"launch {n} value={value[0] if same else 'mixed'} {flags}", flush=True)


def main(mode):
    if mode not in ("node-update", "graph-update", "child-update", "no-update"):
        sys.exit(f"usage: {sys.argv[0]} node-update|graph-update|child-update|no-update")
    print(f"mode {mode}", flush=True)
    dev = Device(0)
    dev.set_current()
    producer = dev.create_stream()
    consumer = dev.create_stream()
    timed = EventOptions(timing_enabled=True)
    start, done, done2 = (dev.create_event(timed) for _ in range(3))
    ready, ready2 = dev.create_event(), dev.create_event()
    events = (("done", done), ("done2", done2))

    buf = dev.memory_resource.allocate(NBYTES, stream=consumer)
    host = LegacyPinnedMemoryResource().allocate(NBYTES, stream=consumer)
    buf.fill(0, stream=consumer)
    launched(mode, buf, host, producer, consumer, (start, ready, ready2, done, done2), events)

    # The definitions and the executable graph hold the buffer: they are gone, so it is freed
    # now, on the consumer, which is then waited for.
    gc.collect()
    buf.close(consumer)
    host.close(consumer)
    consumer.sync()
    producer.sync()
    print("done", flush=True)


def launched(mode, buf, host, producer, consumer, ev, events):
    """Builds the graph, launches it twice, switching its events in between as `mode` says,
    and closes it."""
    start, ready, ready2, done, done2 = ev
    definition = GraphDefinition()
    if mode == "child-update":
        child = GraphDefinition()
        build(child, buf, ready, done)
        child_node = definition.embed(child)
    else:
        wait, record = build(definition, buf, ready, done)
    graph = definition.instantiate()

    producer.record(start)
    consumer.record(ready)
    graph.launch(producer)
    consume(1, buf, host, consumer, done, events, start)

    buf.fill(0, stream=consumer)
    consumer.record(ready2)
    if mode == "node-update":
        graph[wait].update(ready2)
        graph[record].update(done2)
    elif mode == "graph-update":
        wait.update(ready2)
        record.update(done2)
        graph.update(definition)
    elif mode == "child-update":
        second = GraphDefinition()
        build(second, buf, ready2, done2)
        graph[child_node].update(second)
    graph.launch(producer)
    consume(2, buf, host, consumer, done2, events, start)
    graph.close()


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "")
