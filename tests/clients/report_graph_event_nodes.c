// link: driver
// Event nodes added to a graph by hand, and the calls that change them in an executable graph.
// A stream sets memory, then launches a graph on it; the launch records an event through one
// of the graph's event record nodes, and a second stream waits for that event before reading
// the memory and freeing it. By the first argument:
//
//   record         the record node records the event the consumer waits for;
//   generic        the same node made with cuGraphAddNode;
//   many           600 record nodes of another event before that one (the shim lists event
//                  nodes 512 to a record);
//   exec-set       the node records another event, and cuGraphExecEventRecordNodeSetEvent
//                  makes the executable graph record the awaited one;
//   exec-params    the same through cuGraphExecNodeSetParams;
//   update         the graph records another event; cuGraphExecUpdate_v2 takes the
//                  parameters of a second graph whose node records the awaited one;
//   update-v1      the same through the CUDA 10.2 cuGraphExecUpdate;
//   child          the node is in a child graph, and records another event until
//                  cuGraphExecChildGraphNodeSetParams takes a child graph that records the
//                  awaited one;
//   child-params   the same through cuGraphExecNodeSetParams;
//   update-set     cuGraphExecUpdate_v2 takes a second graph that also records the other
//                  event, then cuGraphExecEventRecordNodeSetEvent names the node by its handle
//                  in the first graph (an update keeps the executable graph's node identities);
//   child-set      likewise after cuGraphExecChildGraphNodeSetParams, naming the node of the
//                  child graph node's own graph;
//   wait           no record node: the memory is set on a third stream, which records an event
//                  that the graph's wait node waits for, and the reading is on the launch's own
//                  stream, after the launch.
//
//   relaunch       no event the reader waits for: the memory is set on a third stream, the
//                  graph launched there, then launched again on the reader's stream, which a
//                  launch of the same executable graph follows (cuGraphLaunch orders every
//                  launch behind the last launch of its executable graph).
//
// Each of those is correct: its report has no finding. Their mistaken twins:
//
//   stale          the graph records the awaited event, but cuGraphExecEventRecordNodeSetEvent
//                  changes the executable graph to record another: the consumer's wait is for
//                  an event never recorded, so nothing orders its read after the setting;
//   update-failed  cuGraphExecUpdate_v2 from a graph of another shape fails, so the executable
//                  graph still records the other event;
//   no-wait        as wait, with the graph's wait node waiting for another event (recorded
//                  before the memory was set);
//   two-execs      as relaunch, the second launch of a second executable graph made from the
//                  same graph, which nothing orders after the first.
//
// Prints "first 7": what the consumer read.
#include "sim_util.h"

#define N 1024

/* A graph of one node: a record node of event, or a wait node for it. */
static CUgraph graph_of(CUevent event, int record) {
    CUgraph g;
    CUgraphNode node;
    CHECK(cuGraphCreate(&g, 0));
    if (record)
        CHECK(cuGraphAddEventRecordNode(&node, g, NULL, 0, event));
    else
        CHECK(cuGraphAddEventWaitNode(&node, g, NULL, 0, event));
    return g;
}

static CUgraph graph_recording(CUevent event) { return graph_of(event, 1); }

/* The graph's first node. */
static CUgraphNode first_node(CUgraph g) {
    CUgraphNode node = NULL;
    size_t n = 1;
    CHECK(cuGraphGetNodes(g, &node, &n));
    return node;
}

static void event_params(CUgraphNodeParams *p, CUgraphNodeType type, CUevent event) {
    memset(p, 0, sizeof *p);
    p->type = type;
    if (type == CU_GRAPH_NODE_TYPE_EVENT_RECORD)
        p->eventRecord.event = event;
    else
        p->eventWait.event = event;
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "record";
    setup();
    CUstream replay, consumer, producer;
    CUevent done, other, ready;
    CHECK(cuStreamCreate(&replay, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&consumer, CU_STREAM_NON_BLOCKING));
    CHECK(cuStreamCreate(&producer, CU_STREAM_NON_BLOCKING));
    CHECK(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&other, CU_EVENT_DISABLE_TIMING));
    CHECK(cuEventCreate(&ready, CU_EVENT_DISABLE_TIMING));
    /* Stream-ordered memory, freed in the reader's order: no free waits for the device. */
    CUdeviceptr d;
    CHECK(cuMemAllocAsync(&d, N * sizeof(unsigned), consumer));
    CHECK(cuStreamSynchronize(consumer));

    unsigned first = 0;
    CUgraph graph = NULL, second = NULL, child = NULL;
    CUgraphExec exec;
    CUgraphExec second_exec = NULL;
    if (!strcmp(mode, "relaunch") || !strcmp(mode, "two-execs")) {
        graph = graph_recording(other);
        CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
        CUgraphExec again = exec;
        if (!strcmp(mode, "two-execs")) {
            CHECK(cuGraphInstantiateWithFlags(&second_exec, graph, 0));
            again = second_exec;
        }
        CHECK(cuMemsetD32Async(d, 7, N, producer));
        CHECK(cuGraphLaunch(exec, producer));
        CHECK(cuGraphLaunch(again, replay));
        CHECK(cuMemcpyDtoHAsync_v2(&first, d, sizeof first, replay));
        CHECK(cuMemFreeAsync(d, replay));
        CHECK(cuStreamSynchronize(replay));
    } else if (!strcmp(mode, "wait") || !strcmp(mode, "no-wait")) {
        if (!strcmp(mode, "no-wait")) CHECK(cuEventRecord(other, producer));
        CHECK(cuMemsetD32Async(d, 7, N, producer));
        CHECK(cuEventRecord(ready, producer));
        graph = graph_of(!strcmp(mode, "wait") ? ready : other, 0);
        CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
        CHECK(cuGraphLaunch(exec, replay));
        CHECK(cuMemcpyDtoHAsync_v2(&first, d, sizeof first, replay));
        CHECK(cuMemFreeAsync(d, replay));
        CHECK(cuStreamSynchronize(replay));
        CHECK(cuStreamSynchronize(producer));
    } else {
        if (!strcmp(mode, "record") || !strcmp(mode, "stale")) {
            graph = graph_recording(done);
        } else if (!strcmp(mode, "many")) {
            CUgraphNode node;
            CHECK(cuGraphCreate(&graph, 0));
            for (int i = 0; i < 600; i++) CHECK(cuGraphAddEventRecordNode(&node, graph, NULL, 0, other));
            CHECK(cuGraphAddEventRecordNode(&node, graph, NULL, 0, done));
        } else if (!strcmp(mode, "generic")) {
            CUgraphNodeParams p;
            CUgraphNode node;
            event_params(&p, CU_GRAPH_NODE_TYPE_EVENT_RECORD, done);
            CHECK(cuGraphCreate(&graph, 0));
            CHECK(cuGraphAddNode(&node, graph, NULL, 0, &p));
        } else if (!strcmp(mode, "child") || !strcmp(mode, "child-params") ||
                   !strcmp(mode, "child-set")) {
            CUgraphNode node;
            child = graph_recording(other);
            CHECK(cuGraphCreate(&graph, 0));
            CHECK(cuGraphAddChildGraphNode(&node, graph, NULL, 0, child));
        } else {
            graph = graph_recording(other);
        }
        CHECK(cuGraphInstantiateWithFlags(&exec, graph, 0));
        CUgraphNode node = first_node(graph);
        if (!strcmp(mode, "stale")) {
            CHECK(cuGraphExecEventRecordNodeSetEvent(exec, node, other));
        } else if (!strcmp(mode, "exec-set")) {
            CHECK(cuGraphExecEventRecordNodeSetEvent(exec, node, done));
        } else if (!strcmp(mode, "exec-params")) {
            CUgraphNodeParams p;
            event_params(&p, CU_GRAPH_NODE_TYPE_EVENT_RECORD, done);
            CHECK(cuGraphExecNodeSetParams(exec, node, &p));
        } else if (!strcmp(mode, "update")) {
            second = graph_recording(done);
            CUgraphExecUpdateResultInfo info;
            CHECK(cuGraphExecUpdate_v2(exec, second, &info));
        } else if (!strcmp(mode, "update-v1")) {
            second = graph_recording(done);
            CUgraphNode error_node;
            CUgraphExecUpdateResult result;
            CHECK(cuGraphExecUpdate(exec, second, &error_node, &result));
        } else if (!strcmp(mode, "update-failed")) {
            /* Two nodes where the executable graph has one: refused. */
            second = graph_recording(done);
            CUgraphNode extra;
            CHECK(cuGraphAddEventRecordNode(&extra, second, NULL, 0, done));
            CUgraphExecUpdateResultInfo info;
            CUresult r = cuGraphExecUpdate_v2(exec, second, &info);
            if (r == CUDA_SUCCESS) return 5;
        } else if (!strcmp(mode, "child")) {
            second = graph_recording(done);
            CHECK(cuGraphExecChildGraphNodeSetParams(exec, node, second));
        } else if (!strcmp(mode, "update-set")) {
            second = graph_recording(other);
            CUgraphExecUpdateResultInfo info;
            CHECK(cuGraphExecUpdate_v2(exec, second, &info));
            CHECK(cuGraphExecEventRecordNodeSetEvent(exec, node, done));
        } else if (!strcmp(mode, "child-set")) {
            second = graph_recording(other);
            CHECK(cuGraphExecChildGraphNodeSetParams(exec, node, second));
            CUgraph embedded;
            CHECK(cuGraphChildGraphNodeGetGraph(node, &embedded));
            CHECK(cuGraphExecEventRecordNodeSetEvent(exec, first_node(embedded), done));
        } else if (!strcmp(mode, "child-params")) {
            second = graph_recording(done);
            CUgraphNodeParams p;
            memset(&p, 0, sizeof p);
            p.type = CU_GRAPH_NODE_TYPE_GRAPH;
            p.graph.graph = second;
            CHECK(cuGraphExecNodeSetParams(exec, node, &p));
        }
        CHECK(cuMemsetD32Async(d, 7, N, replay));
        CHECK(cuGraphLaunch(exec, replay));
        CHECK(cuStreamWaitEvent(consumer, done, 0));
        CHECK(cuMemcpyDtoHAsync_v2(&first, d, sizeof first, consumer));
        CHECK(cuMemFreeAsync(d, consumer));
        CHECK(cuStreamSynchronize(consumer));
        CHECK(cuStreamSynchronize(replay));
    }
    printf("first %u\n", first);

    CHECK(cuGraphExecDestroy(exec));
    if (second_exec) CHECK(cuGraphExecDestroy(second_exec));
    CHECK(cuGraphDestroy(graph));
    if (second) CHECK(cuGraphDestroy(second));
    if (child) CHECK(cuGraphDestroy(child));
    CHECK(cuEventDestroy_v2(done));
    CHECK(cuEventDestroy_v2(other));
    CHECK(cuEventDestroy_v2(ready));
    CHECK(cuStreamDestroy_v2(replay));
    CHECK(cuStreamDestroy_v2(consumer));
    CHECK(cuStreamDestroy_v2(producer));
    return first == 7 ? 0 : 4;
}
