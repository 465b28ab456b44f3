"""CUDA graph memory through cuda-bindings, for gpuleak's end-to-end tests.

cuda-bindings fetches every driver entry point through cuGetProcAddress_v2 at its own CUDA
version (13.5), so the graph calls below reach the shim through its resolver wrappers, with
the variant of cuGraphAddNode that the driver hands out at that version. The program builds
one graph of two allocation nodes:

- one made by cuGraphAddMemAllocNode (in add_freed_node), which a free node of the same graph
  frees: it lives only while the graph runs;
- one made by the generic cuGraphAddNode (in add_generic_node), which the graph does not free.

It instantiates the graph, launches it once and synchronizes. With "clean" it then frees the
second node's memory with cuMemFree; without, that memory outlives the run (the leak).

Prints "node call=NAME size=N" per allocation node, then "launched" and "done".
"""

import sys

from cuda.bindings import driver as cu

FREED_BYTES = 64 << 10
KEPT_BYTES = 256 << 10


def check(result):
    """Returns the values of a cuda-bindings result tuple; exits with the error's name on failure."""
    err, *values = result
    if err != cu.CUresult.CUDA_SUCCESS:
        sys.exit(f"cuda_bindings_graphs: CUDA call failed with {err.name}")
    if not values:
        return None
    return values[0] if len(values) == 1 else tuple(values)


def device_pool():
    props = cu.CUmemPoolProps()
    props.allocType = cu.CUmemAllocationType.CU_MEM_ALLOCATION_TYPE_PINNED
    props.location.type = cu.CUmemLocationType.CU_MEM_LOCATION_TYPE_DEVICE
    props.location.id = 0
    return props


def add_freed_node(graph):
    params = cu.CUDA_MEM_ALLOC_NODE_PARAMS()
    params.poolProps = device_pool()
    params.bytesize = FREED_BYTES
    node = check(cu.cuGraphAddMemAllocNode(graph, None, 0, params))
    print(f"node call=cuGraphAddMemAllocNode size={FREED_BYTES}", flush=True)
    check(cu.cuGraphAddMemFreeNode(graph, [node], 1, params.dptr))


def add_generic_node(graph):
    params = cu.CUgraphNodeParams()
    params.type = cu.CUgraphNodeType.CU_GRAPH_NODE_TYPE_MEM_ALLOC
    params.alloc.poolProps = device_pool()
    params.alloc.bytesize = KEPT_BYTES
    check(cu.cuGraphAddNode(graph, None, None, 0, params))
    print(f"node call=cuGraphAddNode size={KEPT_BYTES}", flush=True)
    return params.alloc.dptr


def main():
    clean = sys.argv[1:] == ["clean"]
    check(cu.cuInit(0))
    dev = check(cu.cuDeviceGet(0))
    ctx = check(cu.cuDevicePrimaryCtxRetain(dev))
    check(cu.cuCtxSetCurrent(ctx))
    stream = check(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING))

    graph = check(cu.cuGraphCreate(0))
    add_freed_node(graph)
    kept = add_generic_node(graph)
    graph_exec = check(cu.cuGraphInstantiate(graph, 0))
    check(cu.cuGraphLaunch(graph_exec, stream))
    check(cu.cuStreamSynchronize(stream))
    print("launched", flush=True)
    check(cu.cuGraphExecDestroy(graph_exec))
    check(cu.cuGraphDestroy(graph))
    if clean:
        check(cu.cuMemFree(kept))
    check(cu.cuStreamDestroy(stream))
    check(cu.cuDevicePrimaryCtxRelease(dev))
    print("done", flush=True)


if __name__ == "__main__":
    main()
